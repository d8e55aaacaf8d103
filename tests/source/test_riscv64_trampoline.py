"""The 3.13 series' riscv64 trampoline, assembled for riscv64 and run under qemu-user.

perf's frame-pointer call chains on riscv64 follow s0 through {previous s0 at s0-16, return address at
s0-8}.  tests/data/riscv64_frame_walk.c copies the trampoline into a page of its own, calls an evaluator
through it and walks those records as the kernel does: the trampoline's caller must come right after the
trampoline.  The same walk over CPython 3.13.5's own riscv trampoline, which builds no record, skips the
caller: that is what the check sees when the record is missing.

The perf_jit half of the patch (the CIE and FDE) and the jitdump are proven only by real perf in a riscv64
guest; here its C is compiled for riscv64 with -Werror.  Needs Debian's gcc-riscv64-linux-gnu and
qemu-user-static (.ci/run installs them); without them the tests skip, saying so.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from cpython_perf.errors import SourceUnavailable
from cpython_perf.lanes import series_forms
from cpython_perf.matrix import PROJECT_ROOT, load_matrix
from cpython_perf.source import patches, sources

MATRIX = load_matrix()
WALK = PROJECT_ROOT / "tests" / "data" / "riscv64_frame_walk.c"
CC = "riscv64-linux-gnu-gcc"
QEMU = "qemu-riscv64-static"


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> dict[str, Path]:
    """{"released": 3.13.5 as released, "series": the same with the 3.13 series applied}."""
    missing = [tool for tool in (CC, QEMU) if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed here (Debian's gcc-riscv64-linux-gnu, "
                    "libc6-dev-riscv64-cross, qemu-user-static)")
    cell = MATRIX.cell("3.13-fp")
    try:
        tarball = sources.fetch_source(cell.recipe, log=lambda line: None)
    except SourceUnavailable as exc:
        pytest.skip(f"CPython {cell.recipe.version} is not reachable here: {str(exc).splitlines()[0]}")
    out = {}
    for name in ("released", "series"):
        where = tmp_path_factory.mktemp(name)
        with tarfile.open(tarball) as tar:
            tar.extractall(where, filter="tar")
        out[name] = where / cell.recipe.srcdir
    vs = MATRIX.series_of("3.13")
    patches.copy_additions(vs.additions, series_forms.ADDITIONS_ROOT, out["series"])
    patches.apply_series(patches.read_series(vs.series), out["series"])
    return out


def walk(tree: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    program = tmp_path / "walk"
    build = subprocess.run([CC, "-O2", "-fno-omit-frame-pointer", "-Wall", "-Werror", "-static", "-o", str(program),
                            str(WALK), str(tree / "Python" / "asm_trampoline.S")], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    return subprocess.run([QEMU, str(program)], capture_output=True, text=True, timeout=60)


def fields(run: subprocess.CompletedProcess) -> dict[str, int]:
    return {k: int(v) for k, v in (line.split() for line in run.stdout.splitlines())}


def test_the_series_trampoline_leaves_a_record_perf_walks_through(trees, tmp_path):
    run = walk(trees["series"], tmp_path)
    assert fields(run) == {"result": 42, "trampoline": 0, "caller": 1}, run.stdout + run.stderr
    assert run.returncode == 0


def test_the_released_trampoline_loses_its_caller(trees, tmp_path):
    run = walk(trees["released"], tmp_path)
    assert fields(run) == {"result": 42, "trampoline": 0, "caller": -1}, run.stdout + run.stderr
    assert run.returncode == 1


def test_the_series_trampoline_is_uncompressed_with_its_return_label(trees, tmp_path):
    """Every instruction 4 bytes (the FDE counts them so), the call's return at +20."""
    obj = tmp_path / "asm_trampoline.o"
    subprocess.run([CC, "-march=rv64gc", "-c", "-o", str(obj), str(trees["series"] / "Python" / "asm_trampoline.S")],
                   check=True)
    symbols = subprocess.run(["riscv64-linux-gnu-nm", str(obj)], capture_output=True, text=True, check=True).stdout
    addresses = {name: int(addr, 16) for addr, _, name in (line.split() for line in symbols.splitlines())}
    assert addresses["_Py_trampoline_func_return"] - addresses["_Py_trampoline_func_start"] == 20
    assert addresses["_Py_trampoline_func_end"] - addresses["_Py_trampoline_func_start"] == 36


# The LP64 Linux facts the two perf files read; configure gives the same on riscv64-linux-gnu.
PYCONFIG = PROJECT_ROOT / "tests" / "data" / "lp64_linux_pyconfig.h"


def compile_for_riscv64(tree: Path, source: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """source of tree compiled for riscv64 as CPython's Makefile compiles its core (-std=c11)."""
    (tmp_path / "pyconfig.h").write_text(PYCONFIG.read_text())
    return subprocess.run([CC, "-O2", "-std=c11", "-Wall", "-Werror", "-DPy_BUILD_CORE", f"-I{tmp_path}",
                           f"-I{tree / 'Include'}", f"-I{tree / 'Include' / 'internal'}", "-c",
                           "-o", str(tmp_path / "out.o"), str(tree / source)], capture_output=True, text=True)


@pytest.mark.parametrize("source", ["Python/perf_jit_trampoline.c", "Python/perf_trampoline.c"])
def test_the_perf_sources_compile_for_riscv64(trees, tmp_path, source):
    proc = compile_for_riscv64(trees["series"], source, tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_released_perf_jit_does_not_build_for_riscv64(trees, tmp_path):
    proc = compile_for_riscv64(trees["released"], "Python/perf_jit_trampoline.c", tmp_path)
    assert proc.returncode != 0 and "Unsupported target architecture" in proc.stderr, proc.stderr


def test_the_trampoline_copies_are_flushed_from_the_icache(trees, tmp_path):
    """glibc's __riscv_flush_icache, not libgcc's __clear_cache (an empty function on RISC-V, which GCC calls as
    it is under -std=c11)."""
    proc = compile_for_riscv64(trees["series"], "Python/perf_trampoline.c", tmp_path)
    assert proc.returncode == 0, proc.stderr
    calls = subprocess.run(["riscv64-linux-gnu-objdump", "-dr", str(tmp_path / "out.o")], capture_output=True,
                           text=True, check=True).stdout
    called = set(re.findall(r"R_RISCV_CALL(?:_PLT)?\s+(\S+)", calls))
    assert "__riscv_flush_icache" in called and "__clear_cache" not in called, sorted(called)


def trampoline_code(tree: Path, tmp_path: Path) -> bytes:
    """The bytes of tree's trampoline, _Py_trampoline_func_start to _end, as an rv64gc assembler makes them."""
    obj, raw = tmp_path / "trampoline.o", tmp_path / "trampoline.bin"
    subprocess.run([CC, "-march=rv64gc", "-c", "-o", str(obj), str(tree / "Python" / "asm_trampoline.S")], check=True)
    subprocess.run(["riscv64-linux-gnu-objcopy", "-O", "binary", "-j", ".text", str(obj), str(raw)], check=True)
    symbols = subprocess.run(["riscv64-linux-gnu-nm", str(obj)], capture_output=True, text=True, check=True).stdout
    at = {name: int(addr, 16) for addr, _, name in (line.split() for line in symbols.splitlines())}
    return raw.read_bytes()[at["_Py_trampoline_func_start"]:at["_Py_trampoline_func_end"]]


@pytest.fixture
def unwind_check(monkeypatch):
    """conformance/scripts/check_fix_perf_trampoline_unwind.py as it loads on a riscv64 machine."""
    import importlib.util
    import platform
    import sys
    scripts = PROJECT_ROOT / "conformance" / "scripts"
    monkeypatch.syspath_prepend(str(scripts))
    monkeypatch.setattr(platform, "machine", lambda: "riscv64")
    spec = importlib.util.spec_from_file_location("unwind_check_riscv64", scripts / "check_fix_perf_trampoline_unwind.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.delitem(sys.modules, "unwind_check_riscv64", raising=False)
    return module


def test_the_unwind_check_decodes_the_series_trampoline_as_a_frame_record(trees, tmp_path, unwind_check):
    """The check script the riscv64 cells run on their live trampolines (and on the jitdump's code) reads the
    assembler's own bytes of the series' trampoline: s0 at the frame's top, the record below it."""
    code = trampoline_code(trees["series"], tmp_path)
    kinds = [kind for _, _, kind in unwind_check.decode(code)]
    assert kinds == ["sub16", "sd_ra_8", "sd_fp_0", "fp_sp16", "call", "ld_ra_8", "ld_fp_0", "add16", "ret"]
    assert unwind_check.check_frame_record(code) == []


def test_the_unwind_check_finds_no_frame_record_in_the_released_trampoline(trees, tmp_path, unwind_check):
    """3.13.5's riscv trampoline, compressed by the assembler for rv64gc: decoded, and found to build no record."""
    code = trampoline_code(trees["released"], tmp_path)
    assert len(code) < 36   # 2-byte instructions
    errors = unwind_check.check_frame_record(code)
    assert errors and errors[0].startswith("no frame record"), errors


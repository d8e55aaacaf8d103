"""The riscv64 trampoline of the 3.13 series and of the 3.9/3.11 backport, assembled for riscv64 and run under
qemu-user.

perf's frame-pointer call chains on riscv64 follow s0 through {previous s0 at s0-16, return address at s0-8}.
tests/data/riscv64_frame_walk.c copies the trampoline into a page of its own, calls an evaluator through it and
walks those records as the kernel does: the trampoline's caller must come right after the trampoline. The same
walk over CPython 3.13.5's own riscv trampoline, which builds no record, skips the caller: that is what the
check sees when the record is missing.

The perf_jit half (the CIE and FDE) is built by the tree's own C for riscv64 (tests/data/jit_unwind_info.c,
backport_unwind_info.c), run under qemu-user, and read by the check scripts the cells run on a real jitdump;
that perf's unwinder follows it is proven only in a riscv64 guest. The perf files compile with -Werror. Needs
Debian's gcc-riscv64-linux-gnu and qemu-user-static (.ci/run installs them); without them the tests skip, saying
so.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cpython_perf.matrix import PROJECT_ROOT

from .series_trees import compile_core, jit_unwind_info, load_script, source_trees

WALK = PROJECT_ROOT / "tests" / "data" / "riscv64_frame_walk.c"
CC = "riscv64-linux-gnu-gcc"
QEMU = "qemu-riscv64-static"


def tools_or_skip() -> None:
    missing = [tool for tool in (CC, QEMU) if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed here (Debian's gcc-riscv64-linux-gnu, "
                    "libc6-dev-riscv64-cross, qemu-user-static)")


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> dict[str, Path]:
    """{"released": 3.13.5 as released, "series": the same with the 3.13 series applied}."""
    tools_or_skip()
    return source_trees("3.13", tmp_path_factory)


@pytest.fixture(scope="module")
def backport(tmp_path_factory) -> Path:
    """3.11.2 with the 3.11 series and the backport's shared files (Python-additions/, 3.9's too)."""
    tools_or_skip()
    return source_trees("3.11", tmp_path_factory)["series"]


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


def compile_for_riscv64(tree: Path, source: str, tmp_path: Path) -> subprocess.CompletedProcess:
    return compile_core(CC, tree, source, tmp_path)


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



def test_the_backport_trampoline_leaves_a_record_perf_walks_through(backport, tmp_path):
    """The 3.9/3.11 backport's trampoline (Python-additions/Python/asm_trampoline.S) is the same record."""
    run = walk(backport, tmp_path)
    assert fields(run) == {"result": 42, "trampoline": 0, "caller": 1}, run.stdout + run.stderr


@pytest.mark.parametrize("source", ["Python/perf_jit_trampoline.c", "Python/perf_trampoline.c"])
def test_the_backport_perf_sources_compile_for_riscv64(backport, tmp_path, source):
    proc = compile_for_riscv64(backport, source, tmp_path)
    assert proc.returncode == 0, proc.stderr


def test_the_backport_flushes_its_copies_through_glibc(backport, tmp_path):
    proc = compile_for_riscv64(backport, "Python/perf_trampoline.c", tmp_path)
    assert proc.returncode == 0, proc.stderr
    calls = subprocess.run(["riscv64-linux-gnu-objdump", "-dr", str(tmp_path / "out.o")], capture_output=True,
                           text=True, check=True).stdout
    called = set(re.findall(r"R_RISCV_CALL(?:_PLT)?\s+(\S+)", calls))
    assert "__riscv_flush_icache" in called and "__clear_cache" not in called, sorted(called)


def test_the_unwind_check_decodes_the_backport_trampoline(backport, tmp_path, unwind_check):
    code = trampoline_code(backport, tmp_path)
    assert unwind_check.check_frame_record(code) == []



@pytest.mark.parametrize("form", ["3.13", "backport"])
def test_the_jitdump_unwind_info_describes_the_trampoline(trees, backport, tmp_path, monkeypatch, form):
    """The .eh_frame and .eh_frame_hdr perf_jit writes (riscv64's build of 3.13's elf_init_ehframe() with the
    series, or of the backport's build_unwind_info(), run under qemu-user), read by the two check scripts the
    cells run on a real jitdump: the CFI, evaluated at every instruction of the simulated trampoline, gives the
    true CFA and return address, and the layout is perf inject's."""
    tree = trees["series"] if form == "3.13" else backport
    size, eh, hdr = jit_unwind_info(CC, QEMU, tree, tmp_path, form)
    code = trampoline_code(tree, tmp_path)
    assert size == len(code)
    unwind = load_script("check_fix_perf_trampoline_unwind", "riscv64", monkeypatch)
    assert unwind.check_unwind(eh, hdr, code) == []
    jitdump = load_script("check_jitdump", "riscv64", monkeypatch)
    assert jitdump.check_unwind(eh + hdr, len(hdr), size)["ra"] == unwind.REG_RA

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


@pytest.mark.parametrize("source", ["Python/perf_jit_trampoline.c", "Python/perf_trampoline.c"])
def test_the_perf_sources_compile_for_riscv64(trees, tmp_path, source):
    """Released 3.13.5 stops perf_jit_trampoline.c with "Unsupported target architecture" on riscv64."""
    tree = trees["series"]
    config = tmp_path / "pyconfig.h"
    # the LP64 Linux facts these two files read; configure would give the same on riscv64-linux-gnu
    config.write_text("#define PY_HAVE_PERF_TRAMPOLINE 1\n#define SIZEOF_VOID_P 8\n#define SIZEOF_LONG 8\n"
                      "#define SIZEOF_SIZE_T 8\n#define SIZEOF_INT 4\n#define SIZEOF_WCHAR_T 4\n"
                      "#define SIZEOF_LONG_LONG 8\n#define SIZEOF_FLOAT 4\n#define SIZEOF_DOUBLE 8\n"
                      "#define SIZEOF_TIME_T 8\n#define SIZEOF_OFF_T 8\n#define SIZEOF_PID_T 4\n"
                      "#define SIZEOF_SHORT 2\n#define ALIGNOF_LONG 8\n#define ALIGNOF_SIZE_T 8\n"
                      "#define SIZEOF_UINTPTR_T 8\n#define SIZEOF_FPOS_T 16\n#define SIZEOF__BOOL 1\n"
                      "#define HAVE_UNISTD_H 1\n#define HAVE_SYS_MMAN_H 1\n#define HAVE_MMAP 1\n"
                      "#define HAVE_STDINT_H 1\n#define HAVE_FCNTL_H 1\n#define HAVE_SYS_STAT_H 1\n"
                      "#define HAVE_SYS_TYPES_H 1\n#define HAVE_PTHREAD_H 1\n#define _GNU_SOURCE 1\n"
                      "#define WITH_PYMALLOC 1\n#define HAVE_DYNAMIC_LOADING 1\n#define HAVE_CLOCK_GETTIME 1\n"
                      "#define HAVE_SYS_TIME_H 1\n#define HAVE_STD_ATOMIC 1\n#define HAVE_BUILTIN_ATOMIC 1\n")
    for name, released in (("series", False), ("released", True)):
        if released and source != "Python/perf_jit_trampoline.c":
            continue
        here = trees[name]
        proc = subprocess.run([CC, "-O2", "-std=c11", "-Wall", "-Werror", "-DPy_BUILD_CORE", f"-I{tmp_path}",
                               f"-I{here / 'Include'}", f"-I{here / 'Include' / 'internal'}", "-c",
                               "-o", str(tmp_path / "out.o"), str(here / source)], capture_output=True, text=True)
        if released:
            assert proc.returncode != 0 and "Unsupported target architecture" in proc.stderr, proc.stderr
        else:
            assert proc.returncode == 0, proc.stderr

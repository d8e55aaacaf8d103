"""The riscv64 trampoline of the 3.13 series and of the 3.9/3.11 backport, assembled for riscv64 and run under
qemu-user.

perf's frame-pointer call chains on riscv64 follow s0 through {previous s0 at s0-16, return address at s0-8}.
tests/data/frame_walk.c copies the trampoline into a page of its own, calls an evaluator through it and
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
import subprocess
from pathlib import Path


from cpython_perf.matrix import PROJECT_ROOT

from .series_trees import CROSS_ARCHES, compile_core, template_symbols, trampoline_code

WALK = PROJECT_ROOT / "tests" / "data" / "frame_walk.c"
CROSS = RISCV64 = CROSS_ARCHES["riscv64"]
CC, QEMU = RISCV64.cc, RISCV64.qemu


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
    addresses = template_symbols(RISCV64, trees["series"] / "Python" / "asm_trampoline.S", tmp_path)
    assert addresses["_Py_trampoline_func_return"] - addresses["_Py_trampoline_func_start"] == 20
    assert addresses["_Py_trampoline_func_end"] - addresses["_Py_trampoline_func_start"] == 36


def test_the_trampoline_copies_are_flushed_from_the_icache(trees, tmp_path):
    """glibc's __riscv_flush_icache, not libgcc's __clear_cache (an empty function on RISC-V, which GCC calls as
    it is under -std=c11)."""
    proc = compile_core(CC, trees["series"], "Python/perf_trampoline.c", tmp_path)
    assert proc.returncode == 0, proc.stderr
    calls = subprocess.run(["riscv64-linux-gnu-objdump", "-dr", str(tmp_path / "out.o")], capture_output=True,
                           text=True, check=True).stdout
    called = set(re.findall(r"R_RISCV_CALL(?:_PLT)?\s+(\S+)", calls))
    assert "__riscv_flush_icache" in called and "__clear_cache" not in called, sorted(called)


def test_the_unwind_check_decodes_the_series_trampoline_as_a_frame_record(trees, tmp_path, unwind_check):
    """The check script the riscv64 cells run on their live trampolines (and on the jitdump's code) reads the
    assembler's own bytes of the series' trampoline: s0 at the frame's top, the record below it."""
    code = trampoline_code(RISCV64, trees["series"] / "Python" / "asm_trampoline.S", tmp_path)
    kinds = [kind for _, _, kind in unwind_check.decode(code)]
    assert kinds == ["sub16", "sd_ra_8", "sd_fp_0", "fp_sp16", "call", "ld_ra_8", "ld_fp_0", "add16", "ret"]
    assert unwind_check.check_frame_record(code) == []


def test_the_unwind_check_finds_no_frame_record_in_the_released_trampoline(trees, tmp_path, unwind_check):
    """3.13.5's riscv trampoline, compressed by the assembler for rv64gc: decoded, and found to build no record."""
    code = trampoline_code(RISCV64, trees["released"] / "Python" / "asm_trampoline.S", tmp_path)
    assert len(code) < 36   # 2-byte instructions
    errors = unwind_check.check_frame_record(code)
    assert errors and errors[0].startswith("no frame record"), errors



def test_the_backport_trampoline_leaves_a_record_perf_walks_through(backport, tmp_path):
    """The 3.9/3.11 backport's trampoline (Python-additions/Python/asm_trampoline.S) is the same record."""
    run = walk(backport, tmp_path)
    assert fields(run) == {"result": 42, "trampoline": 0, "caller": 1}, run.stdout + run.stderr


def test_the_backport_flushes_its_copies_through_glibc(backport, tmp_path):
    proc = compile_core(CC, backport, "Python/perf_trampoline.c", tmp_path)
    assert proc.returncode == 0, proc.stderr
    calls = subprocess.run(["riscv64-linux-gnu-objdump", "-dr", str(tmp_path / "out.o")], capture_output=True,
                           text=True, check=True).stdout
    called = set(re.findall(r"R_RISCV_CALL(?:_PLT)?\s+(\S+)", calls))
    assert "__riscv_flush_icache" in called and "__clear_cache" not in called, sorted(called)



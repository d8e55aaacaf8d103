"""The ppc64le trampoline of the 3.13 series and of the 3.9/3.11 backport, assembled for ppc64le and run under
qemu-user.

perf's frame-pointer call chains on 64-bit PowerPC follow the ELFv2 back chain: the doubleword at a frame's r1
is the caller's r1, and the return address into the caller is in the caller's LR save doubleword (its r1 + 16).
tests/data/frame_walk.c copies the trampoline into a page of its own, calls an evaluator through it and
walks that chain as the kernel does: the trampoline's caller must come right after the trampoline. It then calls
the template directly, as a function of the same module without a local entry point, with an evaluator that
clobbers r2 (the TOC pointer), which such a function must give back. Forms that break either (no frame of its
own; no TOC restore) are run the same way, to show the walk and the TOC check fail on them.

CPython 3.13.5 has no powerpc trampoline at all (its template is empty there) and its perf_jit does not build
for ppc64le. The perf_jit half (the CIE and FDE) is built by the tree's own C for ppc64le
(tests/data/jit_unwind_info.c, backport_unwind_info.c), run under qemu-user, and read by the check scripts the
cells run on a real jitdump; that perf's unwinder follows it is proven only in a ppc64le guest. The perf files
compile with -Werror. Needs Debian's gcc-powerpc64le-linux-gnu and qemu-user-static (.ci/run installs them);
without them the tests skip, saying so.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path


from cpython_perf.matrix import PROJECT_ROOT

from .series_trees import CROSS_ARCHES, compile_core, template_symbols, trampoline_code

WALK = PROJECT_ROOT / "tests" / "data" / "frame_walk.c"
CROSS = PPC64LE = CROSS_ARCHES["ppc64le"]
CC, QEMU = PPC64LE.cc, PPC64LE.qemu

# Broken forms of the trampoline: one that jumps to the evaluator without a frame of its own, and the series'
# without its r2 save and restore.
TAIL_JUMP = """\
    .text
    .globl _Py_trampoline_func_start
    .globl _Py_trampoline_func_end
_Py_trampoline_func_start:
    mr 12, 6
    mtctr 12
    bctr
_Py_trampoline_func_end:
    .section .note.GNU-stack,"",@progbits
"""


def walk(trampoline: Path, tmp_path: Path) -> tuple[subprocess.CompletedProcess, dict[str, int]]:
    program = tmp_path / "walk"
    build = subprocess.run([CC, "-O2", "-fno-omit-frame-pointer", "-Wall", "-Werror", "-static", "-o", str(program),
                            str(WALK), str(trampoline)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([QEMU, str(program)], capture_output=True, text=True, timeout=60)
    return run, {k: int(v) for k, v in (line.split() for line in run.stdout.splitlines())}


def test_the_series_trampoline_has_a_frame_perf_walks_through_and_keeps_r2(trees, tmp_path):
    run, seen = walk(trees["series"] / "Python" / "asm_trampoline.S", tmp_path)
    assert seen == {"result": 42, "trampoline": 0, "caller": 1, "toc": 1}, run.stdout + run.stderr
    assert run.returncode == 0


def test_a_trampoline_without_a_frame_of_its_own_is_not_in_the_walk(tmp_path):
    source = tmp_path / "tail_jump.S"
    source.write_text(TAIL_JUMP)
    run, seen = walk(source, tmp_path)
    assert seen["result"] == 42 and seen["trampoline"] == -1, run.stdout + run.stderr
    assert run.returncode != 0


def without_toc_restore(tree: Path, tmp_path: Path) -> Path:
    text = (tree / "Python" / "asm_trampoline.S").read_text()
    cut = re.sub(r"^\s*(std|ld)\s+2, 24\(1\)\n", "", text, flags=re.M)
    assert cut != text, "the series' ppc64le trampoline no longer saves r2 at 24(r1)"
    source = tmp_path / "no_toc.S"
    source.write_text(cut)
    return source


def test_a_trampoline_that_loses_r2_fails_its_direct_caller(trees, tmp_path):
    """The walk still passes, then the direct call comes back with the evaluator's r2 and the program dies."""
    run, seen = walk(without_toc_restore(trees["series"], tmp_path), tmp_path)
    assert seen.get("trampoline") == 0 and seen.get("caller") == 1, run.stdout + run.stderr
    assert seen.get("toc") != 1 and run.returncode != 0, run.stdout + run.stderr


def test_released_313_has_no_ppc64le_trampoline(trees, tmp_path):
    """3.13.5's template is empty on 64-bit PowerPC (asm_trampoline.S has no branch for it)."""
    symbols = template_symbols(PPC64LE, trees["released"] / "Python" / "asm_trampoline.S", tmp_path)
    assert symbols["_Py_trampoline_func_end"] == symbols["_Py_trampoline_func_start"]


def test_the_series_trampoline_is_twelve_instructions_with_its_return_label(trees, tmp_path):
    """The FDE of perf_jit_trampoline.c counts them: the call's return at +28, the end at +48."""
    at = template_symbols(PPC64LE, trees["series"] / "Python" / "asm_trampoline.S", tmp_path)
    assert at["_Py_trampoline_func_return"] - at["_Py_trampoline_func_start"] == 28
    assert at["_Py_trampoline_func_end"] - at["_Py_trampoline_func_start"] == 48


def test_the_trampoline_copies_are_flushed_from_the_icache(trees, tmp_path):
    """dcbst and icbi in new_code_arena's object code: GCC's __builtin___clear_cache() expands to nothing on
    powerpc64le and libgcc's __clear_cache() is an empty function there."""
    proc = compile_core(CC, trees["series"], "Python/perf_trampoline.c", tmp_path)
    assert proc.returncode == 0, proc.stderr
    code = subprocess.run(["powerpc64le-linux-gnu-objdump", "-dr", str(tmp_path / "out.o")], capture_output=True,
                          text=True, check=True).stdout
    ops = set(re.findall(r"^\s+[0-9a-f]+:\s+(?:[0-9a-f]{2} ){4}\s*(\w+)", code, re.M))
    assert {"dcbst", "icbi", "isync"} <= ops, sorted(ops)
    assert not re.search(r"R_PPC64_REL24\s+__clear_cache", code)


def test_the_unwind_check_decodes_the_series_trampoline_as_a_back_chain(trees, tmp_path, unwind_check):
    """The check script the ppc64le cells run on their live trampolines (and on the jitdump's code) reads the
    assembler's own bytes of the series' trampoline."""
    code = trampoline_code(PPC64LE, trees["series"] / "Python" / "asm_trampoline.S", tmp_path)
    kinds = [kind for _, _, kind in unwind_check.decode(code)]
    assert kinds == ["mflr_r0", "std_r0_16", "stdu32", "std_toc", "nop", "nop", "call", "ld_toc", "add32",
                     "ld_r0_16", "mtlr_r0", "ret"]
    assert unwind_check.check_frame_record(code) == []


def test_the_unwind_check_finds_a_lost_r2(trees, tmp_path, unwind_check):
    code = trampoline_code(PPC64LE, without_toc_restore(trees["series"], tmp_path), tmp_path)
    problems = unwind_check.check_frame_record(code)
    assert len(problems) == 1 and "r2" in problems[0], problems


def test_the_unwind_check_finds_a_missing_lr_rule(trees, tmp_path, unwind_check):
    """An FDE with the rows patch 33 writes (GCC's description of the same prologue, one row per
    instruction), evaluated by the check's CFI interpreter against the simulated trampoline: right at every
    instruction; and with the LR rule left out, wrong."""
    code = trampoline_code(PPC64LE, trees["series"] / "Python" / "asm_trampoline.S", tmp_path)
    fde_rows = bytes([0x40 | 2, 0x11, 65, 0x7E,      # advance 2; offset_extended_sf r65, -2 (CFA+16)
                      0x40 | 1, 0x0E, 32,            # advance 1; def_cfa_offset 32
                      0x40 | 6, 0x0E, 0,             # advance 6; def_cfa_offset 0
                      0x40 | 2, 0x06, 65])           # advance 2; restore_extended r65
    assert unwind_check.check_unwind(*synthesized_dso(code, fde_rows), code) == []
    wrong = unwind_check.check_unwind(*synthesized_dso(code, bytes([0x40 | 3, 0x0E, 32, 0x40 | 6, 0x0E, 0])), code)
    assert any("return address rule" in e for e in wrong), wrong


def synthesized_dso(code: bytes, fde_rows: bytes) -> tuple[bytes, bytes]:
    """(.eh_frame, .eh_frame_hdr) as perf inject lays them out after code, with the CIE patch 33 writes."""
    import struct
    cie_body = (struct.pack("<I", 0) + bytes([1]) + b"zR\0" + bytes([4, 0x78, 65, 1, 0x1B])
                + bytes([0x0C, 1, 0]))
    cie_body += b"\0" * (-(len(cie_body) + 4) % 8)
    cie = struct.pack("<I", len(cie_body)) + cie_body
    eh_base = (len(code) + 7) & ~7
    fde_start = len(cie)
    pc_field = fde_start + 8
    fde_body = struct.pack("<I", fde_start + 4) + struct.pack("<iI", -(eh_base + pc_field), len(code)) + b"\0" + fde_rows
    fde_body += b"\0" * (-(len(fde_body) + 4) % 8)
    eh = cie + struct.pack("<I", len(fde_body)) + fde_body + struct.pack("<I", 0)
    hdr_base = eh_base + len(eh)
    hdr = bytes([1, 0x1B, 0x03, 0x3B]) + struct.pack("<iIii", eh_base - (hdr_base + 4), 1, -hdr_base,
                                                     eh_base + fde_start - hdr_base)
    return eh, hdr


def test_the_backport_trampoline_has_the_same_frame_and_keeps_r2(backport, tmp_path):
    """The 3.9/3.11 backport's trampoline (Python-additions/Python/asm_trampoline.S), walked the same way."""
    run, seen = walk(backport / "Python" / "asm_trampoline.S", tmp_path)
    assert seen == {"result": 42, "trampoline": 0, "caller": 1, "toc": 1}, run.stdout + run.stderr


def test_the_backport_flushes_its_copies_from_the_icache(backport, tmp_path):
    proc = compile_core(CC, backport, "Python/perf_trampoline.c", tmp_path)
    assert proc.returncode == 0, proc.stderr
    code = subprocess.run(["powerpc64le-linux-gnu-objdump", "-d", str(tmp_path / "out.o")], capture_output=True,
                          text=True, check=True).stdout
    ops = set(re.findall(r"^\s+[0-9a-f]+:\s+(?:[0-9a-f]{2} ){4}\s*(\w+)", code, re.M))
    assert {"dcbst", "icbi", "isync"} <= ops, sorted(ops)



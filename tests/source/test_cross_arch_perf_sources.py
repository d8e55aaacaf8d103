"""The perf files of the 3.13 series and of the 3.9/3.11 backport, cross-compiled for each foreign arch whose
trampoline they carry (riscv64, ppc64le), and the jitdump unwinding information their own C builds there.

The unwinding information (the CIE and FDE of the trampoline, with the .eh_frame_hdr perf inject's layout needs)
is printed by tests/data/jit_unwind_info.c (3.13's elf_init_ehframe()) or backport_unwind_info.c (the
backport's build_unwind_info()), compiled with the tree's file for the arch and run under qemu-user, and read by
the two check scripts the cells run on a real jitdump: its CFI, evaluated at every instruction of the simulated
trampoline, must give the true CFA and return address, and its layout must be perf inject's.  That perf's
unwinder follows it is proven only in the arch's guest.  Needs Debian's cross compilers and qemu-user-static
(.ci/run installs them); without them the tests skip, saying so.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .series_trees import CROSS_ARCHES, compile_core, jit_unwind_info, load_script, trampoline_code

ARCHES = sorted(CROSS_ARCHES)
SOURCES = ["Python/perf_jit_trampoline.c", "Python/perf_trampoline.c"]
FORMS = ["3.13", "backport"]


def tree_of(form: str, trees, backport) -> Path:
    return trees["series"] if form == "3.13" else backport


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("arch", ARCHES)
def test_the_perf_sources_compile(trees, backport, tmp_path, arch, form, source):
    CROSS_ARCHES[arch].tools_or_skip()
    proc = compile_core(CROSS_ARCHES[arch].cc, tree_of(form, trees, backport), source, tmp_path)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("arch", ARCHES)
def test_released_perf_jit_does_not_build(trees, tmp_path, arch):
    CROSS_ARCHES[arch].tools_or_skip()
    proc = compile_core(CROSS_ARCHES[arch].cc, trees["released"], "Python/perf_jit_trampoline.c", tmp_path)
    assert proc.returncode != 0 and "Unsupported target architecture" in proc.stderr, proc.stderr


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("arch", ARCHES)
def test_the_jitdump_unwind_info_describes_the_trampoline(trees, backport, tmp_path, monkeypatch, arch, form):
    cross = CROSS_ARCHES[arch]
    cross.tools_or_skip()
    tree = tree_of(form, trees, backport)
    size, eh, hdr = jit_unwind_info(cross.cc, cross.qemu, tree, tmp_path, form)
    code = trampoline_code(cross, tree / "Python" / "asm_trampoline.S", tmp_path)
    assert size == len(code)
    unwind = load_script("check_fix_perf_trampoline_unwind", arch, monkeypatch)
    assert unwind.check_unwind(eh, hdr, code) == []
    jitdump = load_script("check_jitdump", arch, monkeypatch)
    assert jitdump.check_unwind(eh + hdr, len(hdr), size)["ra"] == unwind.REG_RA


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("arch", ARCHES)
def test_the_unwind_check_reads_the_trampoline_as_the_frame_perf_walks(trees, backport, tmp_path, monkeypatch,
                                                                       arch, form):
    """The check script the cells run on their live trampolines reads the assembler's own bytes of each tree's
    trampoline as the frame the arch's call chain walker follows."""
    cross = CROSS_ARCHES[arch]
    cross.tools_or_skip()
    code = trampoline_code(cross, tree_of(form, trees, backport) / "Python" / "asm_trampoline.S", tmp_path)
    unwind = load_script("check_fix_perf_trampoline_unwind", arch, monkeypatch)
    assert unwind.check_frame_record(code) == []

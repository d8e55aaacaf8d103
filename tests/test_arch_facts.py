"""matrix.yaml `arch_facts:`: what the driver knows of each arch is data, validated with the line it is on."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cpython_perf.ci import plan
from cpython_perf.errors import MatrixError
from cpython_perf.image import render
from cpython_perf.arches import ARCH_FACTS, HOST_CROSS_ARCHES, HOST_NATIVE_ARCHES, load_arch_facts, runs_natively
from cpython_perf.matrix import load_matrix
from cpython_perf.record import perf_runs
from cpython_perf.run import guest

from .conftest import edit, expect_error



def test_the_project_facts_give_the_hosts_and_what_they_run():
    # every arch of the matrix is described
    assert set(load_matrix().arches) <= set(ARCH_FACTS) == {"x86_64", "aarch64", "riscv64", "ppc64le", "i386"}
    assert HOST_NATIVE_ARCHES == {"x86_64": ("x86_64", "i386"), "aarch64": ("aarch64",)}
    assert HOST_CROSS_ARCHES == {"x86_64": ("aarch64", "riscv64", "ppc64le"), "aarch64": ()}
    assert ARCH_FACTS["i386"].machine == "i686" and ARCH_FACTS["i386"].pointer_bits == 32
    assert ARCH_FACTS["aarch64"].guest.kernel == "linux-image-cloud-arm64"
    # the guest's kernel is in the arm64 base image, which its guest boots
    assert "linux-image-cloud-arm64" in render.foreign_base_packages("aarch64")
    assert plan.NATIVE_RUNNER == {"x86_64": "ubuntu-24.04", "i386": "ubuntu-24.04", "aarch64": "ubuntu-24.04-arm"}


def test_the_riscv64_cells_come_from_its_arch_facts():
    """riscv64 is matrix.yaml data only: its entry of arch_facts and its name in arches: and in 3.13's cells give
    3.13-fp-riscv64, foreign on x86_64, with its guest's command line and event, and no code names it."""
    facts = load_arch_facts()
    assert facts["riscv64"].qemu_system == "qemu-system-riscv64" and facts["riscv64"].cross_built_on == ("x86_64",)
    cell = load_matrix().cell("3.13-fp-riscv64")
    assert cell.arch_facts == facts["riscv64"] and cell.foreign_on("x86_64") and not cell.build_only
    cmd = guest.qemu_command(cell, "/k", "/i", "/d.img", "/o.img", smp=2)
    assert cmd[:3] == ["qemu-system-riscv64", "-M", "virt"] and cmd[cmd.index("-cpu") + 1] == "rv64"
    assert "console=ttyS0" in cmd[cmd.index("-append") + 1]
    assert perf_runs.guest_event(cell) == "cpu-clock"
    assert not runs_natively("riscv64", "x86_64")
    driver = Path(__file__).resolve().parent.parent / "cpython_perf"
    named = [p for p in driver.rglob("*.py") if re.search(r"""["']riscv64["']""", p.read_text())]
    assert not named, f"riscv64 named as a value in the driver's code: {named}"


def test_the_ppc64le_cells_come_from_its_arch_facts():
    """ppc64le likewise: its guest is a pseries machine with the hypervisor console, and the fp variant's
    -mno-omit-leaf-frame-pointer, which GCC has no counterpart of there, is left out of its cells' CFLAGS
    (the other fp cells keep it)."""
    facts = load_arch_facts()["ppc64le"]
    assert facts.debian == "ppc64el" and facts.triplet == "powerpc64le-linux-gnu" and facts.trampoline
    matrix = load_matrix()
    cell = matrix.cell("3.13-fp-ppc64le")
    assert cell.modes == ("perf",) and matrix.cell("3.13-release-ppc64le").modes == ("perf_jit",)
    assert cell.cflags == "-fno-omit-frame-pointer"
    assert "-mno-omit-leaf-frame-pointer" in matrix.cell("3.13-fp-riscv64").cflags.split()
    cmd = guest.qemu_command(cell, "/k", "/i", "/d.img", "/o.img", smp=2)
    assert cmd[:3] == ["qemu-system-ppc64", "-M", "pseries"] and cmd[cmd.index("-cpu") + 1] == "power9"
    assert "console=hvc0" in cmd[cmd.index("-append") + 1]
    assert "linux-image-powerpc64le" in render.foreign_base_packages("ppc64le")
    driver = Path(__file__).resolve().parent.parent / "cpython_perf"
    named = [p for p in driver.rglob("*.py") if re.search(r"""["'](ppc64le|ppc64el)["']""", p.read_text())]
    assert not named, f"ppc64le named as a value in the driver's code: {named}"


def test_unknown_cflags_are_compiler_options(project_copy):
    edit(project_copy / "matrix.yaml", "    unknown_cflags: [-mno-omit-leaf-frame-pointer]\n",
         "    unknown_cflags: -mno-omit-leaf-frame-pointer\n")
    expect_error(project_copy, "unknown_cflags: -mno-omit-leaf-frame-pointer",
                 "unknown_cflags of arch_facts.ppc64le must be a list of compiler options")


def test_an_unknown_key_of_an_arch_is_named_with_its_line(project_copy):
    edit(project_copy / "matrix.yaml", "    qemu_user: qemu-aarch64\n", "    qemu_user: qemu-aarch64\n    qemu_usr: x\n")
    expect_error(project_copy, "qemu_usr: x", "unknown key 'qemu_usr' in arch_facts.aarch64")


def test_a_guest_samples_with_a_software_event(project_copy):
    edit(project_copy / "matrix.yaml", "      event: cpu-clock\n", "      event: cycles\n")
    expect_error(project_copy, "event: cycles", "must be a software event a TCG guest samples with")


def test_a_cross_built_arch_needs_its_guest(project_copy):
    path = project_copy / "matrix.yaml"
    text = path.read_text()
    start = text.index("    guest:\n      qemu: qemu-system-aarch64")
    end = text.index("      event: cpu-clock\n", start) + len("      event: cpu-clock\n")
    path.write_text(text[:start] + text[end:])
    expect_error(project_copy, "    cross_built_on: [x86_64]", "it needs qemu_user (the binfmt handler) and guest:")


def test_only_a_host_arch_cross_builds(project_copy):
    edit(project_copy / "matrix.yaml", "    cross_built_on: [x86_64]\n", "    cross_built_on: [i386]\n")
    expect_error(project_copy, "cross_built_on: [i386]", "names 'i386', which is no host")


def test_a_host_arch_names_its_runner(project_copy):
    edit(project_copy / "matrix.yaml", "    github_runner: ubuntu-24.04-arm\n", "")
    expect_error(project_copy, "    runs_on: [aarch64]", "arch_facts.aarch64 is a host arch: give its github_runner")


def test_the_matrix_arches_are_described_arches(project_copy):
    edit(project_copy / "matrix.yaml", "arches: [x86_64, aarch64, riscv64, ppc64le, i386]",
         "arches: [x86_64, aarch64, riscv64, ppc64le, i386, s390x]")
    expect_error(project_copy, "arches: [x86_64, aarch64, riscv64, ppc64le, i386, s390x]",
                 "unknown arch 's390x': arch_facts describes x86_64, aarch64, riscv64, ppc64le, i386; describe it there first")



def test_an_arch_never_emulated_has_no_guest_to_record_in():
    with pytest.raises(MatrixError, match="i386 has no guest: in matrix.yaml's arch_facts"):
        ARCH_FACTS["i386"].required_guest()
    assert ARCH_FACTS["aarch64"].required_guest().qemu == "qemu-system-aarch64"

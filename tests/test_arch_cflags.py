"""matrix.yaml `arch_cflags:`: extra CFLAGS of every cell of an arch (aarch64's branch protection)."""

from __future__ import annotations

import pytest

from cpython_perf.image import render
from cpython_perf.matrix import load_matrix

from .conftest import edit, expect_error, line_of

ARCH_CFLAGS = "arch_cflags:\n  aarch64: -mbranch-protection=standard\n"


def cflags_line(dockerfile: str) -> str:
    (line,) = [l.strip() for l in dockerfile.splitlines() if l.strip().startswith("CFLAGS=")]
    return line


def test_aarch64_cells_get_branch_protection_after_the_variant_flags():
    matrix = load_matrix()
    assert matrix.arch_cflags["aarch64"] == "-mbranch-protection=standard"
    fp = matrix.cell("3.13-fp-aarch64")
    assert fp.cflags == "-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -mbranch-protection=standard"
    assert matrix.cell("3.13-release-aarch64").cflags == "-mbranch-protection=standard"
    # the vanilla twin is built with the same flags: it shows what 3.13.5 as released does with them
    assert matrix.cell("3.13-release-vanilla-aarch64").cflags == "-mbranch-protection=standard"
    foreign = [c for c in matrix.cells.values() if c.arch == "aarch64"]
    assert foreign and all(c.cflags.endswith("-mbranch-protection=standard") for c in foreign)


def test_x86_64_cells_keep_exactly_their_variant_flags():
    matrix = load_matrix()
    host = [c for c in matrix.cells.values() if c.arch == "x86_64"]
    assert host
    for cell in host:
        assert cell.arch_cflags == ""
        assert cell.cflags == cell.variant.cflags
        text = render.render_cell_dockerfile(cell, "cpython-perf-base:trixie-abc", "d1g3st")
        assert cflags_line(text) == f'CFLAGS="{cell.variant.cflags}" \\'


def test_cross_dockerfile_configures_with_the_arch_flags():
    matrix = load_matrix()
    cell = matrix.cell("3.11-fp-aarch64")
    text = render.render_cell_dockerfile(cell, "cpython-perf-base:trixie-abc", "d1g3st",
                                         target_base_image="cpython-perf-base:trixie-arm64-def",
                                         build_python_image="cpython-perf:3.11-fp")
    assert cflags_line(text) == ('CFLAGS="-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer '
                                 '-mbranch-protection=standard" \\')
    release = render.render_cell_dockerfile(matrix.cell("3.11-release-aarch64"), "b", "d",
                                            target_base_image="t", build_python_image="cpython-perf:3.11-release")
    assert cflags_line(release) == 'CFLAGS="-mbranch-protection=standard" \\'


def test_without_arch_cflags_every_cell_has_its_variant_flags(project_copy):
    edit(project_copy / "matrix.yaml", ARCH_CFLAGS, "")
    matrix = load_matrix(project_copy / "matrix.yaml")
    assert matrix.arch_cflags == {}
    # but for the options an arch's GCC does not have (arch_facts' unknown_cflags: ppc64le's)
    assert all(c.cflags == " ".join(o for o in c.variant.cflags.split() if o not in c.arch_facts.unknown_cflags)
               for c in matrix.cells.values())
    assert matrix.cell("3.13-fp-ppc64le").cflags != matrix.cell("3.13-fp-ppc64le").variant.cflags


def test_arch_cflags_whitespace_is_normalised(project_copy):
    edit(project_copy / "matrix.yaml", ARCH_CFLAGS,
         'arch_cflags:\n  aarch64: "  -mbranch-protection=standard   -O2 "\n')
    cell = load_matrix(project_copy / "matrix.yaml").cell("3.13-release-aarch64")
    assert cell.cflags == "-mbranch-protection=standard -O2"


def test_arch_cflags_of_an_unknown_arch(project_copy):
    edit(project_copy / "matrix.yaml", ARCH_CFLAGS, ARCH_CFLAGS + "  s390x: -march=z13\n")
    expect_error(project_copy, "s390x: -march", "unknown arch 's390x' in arch_cflags")


def test_arch_cflags_must_be_a_mapping(project_copy):
    edit(project_copy / "matrix.yaml", ARCH_CFLAGS, "arch_cflags: -mbranch-protection=standard\n")
    expect_error(project_copy, "arch_cflags: -mbranch", "arch_cflags must map an arch to a string")


@pytest.mark.parametrize("value", ['""', "[-mbranch-protection=standard]", "3"])
def test_arch_cflags_must_be_a_non_empty_string(project_copy, value):
    edit(project_copy / "matrix.yaml", ARCH_CFLAGS, f"arch_cflags:\n  aarch64: {value}\n")
    expect_error(project_copy, f"aarch64: {value}", "arch_cflags of aarch64 must be a non-empty string")


@pytest.mark.parametrize("value", ["-DX=$(id)", "'-O2 -g'", "-DX=`id`"])
def test_arch_cflags_must_not_break_the_dockerfile_shell(project_copy, value):
    edit(project_copy / "matrix.yaml", ARCH_CFLAGS, f'arch_cflags:\n  aarch64: "{value}"\n')
    expect_error(project_copy, "  aarch64: ", "must be plain options")


def test_misspelt_arch_cflags_key_suggests(project_copy):
    edit(project_copy / "matrix.yaml", ARCH_CFLAGS, ARCH_CFLAGS.replace("arch_cflags:", "arch_cflag:"))
    expect_error(project_copy, "arch_cflag:", "did you mean 'arch_cflags'")

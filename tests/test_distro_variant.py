"""The distro variant (PGO + LTO + frame pointers, as Fedora and Ubuntu 24.04 build) and the variant
`configure:` list it uses.  No Docker."""

from __future__ import annotations

import re

import pytest

from cpython_perf.image import render
from cpython_perf.ci.plan import build_plan
from cpython_perf.matrix import load_matrix

from .conftest import edit, expect_error

MATRIX = load_matrix()
FRAME_POINTERS = ("-fno-omit-frame-pointer", "-mno-omit-leaf-frame-pointer")


def distro_cells():
    return [c for c in MATRIX.cells.values() if c.variant.name == "distro"]


def test_distro_variant_is_pgo_lto_and_frame_pointers():
    variant = MATRIX.variants["distro"]
    assert variant.configure == ("--enable-optimizations", "--with-lto")
    assert all(flag in variant.cflags.split() for flag in FRAME_POINTERS)


def test_distro_cells_and_their_vanilla_twins():
    names = {c.name for c in distro_cells()}
    assert {"3.13-distro", "3.13-distro-vanilla", "3.11-distro", "3.11-distro-vanilla"} <= names
    for cell in distro_cells():
        assert cell.arch == "x86_64", f"{cell.name}: distro cells are x86_64 only"
        if cell.vanilla:
            continue
        assert set(cell.modes) == {"perf", "perf_jit"}, cell.name
        twin = MATRIX.vanilla_twin(cell)
        assert twin is not None and twin.name == f"{cell.name}-vanilla"
        assert twin.series is None and not twin.additions
        assert twin.configure_args() == cell.configure_args() and twin.cflags == cell.cflags
    # a backport's twin is 3.11.2 as released: no perf support; native 3.13.5 keeps upstream's
    assert MATRIX.cell("3.11-distro-vanilla").modes == ()
    assert set(MATRIX.cell("3.13-distro-vanilla").modes) == {"perf", "perf_jit"}


def test_distro_cells_are_not_smoke_cells():
    assert not {c.name for c in distro_cells()} & set(MATRIX.smoke_cells)
    smoke_plan = {job["cell"] for job in build_plan(MATRIX, "pull_request")["cells"]}
    full_plan = {job["cell"] for job in build_plan(MATRIX, "schedule")["cells"]}
    distro = {c.name for c in distro_cells()}
    assert not distro & smoke_plan and distro <= full_plan


def test_configure_args_are_the_recipes_then_the_variants():
    cell = MATRIX.cell("3.13-distro")
    assert cell.configure_args() == [*cell.recipe.configure, "--enable-optimizations", "--with-lto"]
    # the other variants are unchanged by the new key
    assert MATRIX.cell("3.13-fp").configure_args() == list(cell.recipe.configure)


def test_rendered_dockerfile_passes_the_options_and_flags():
    cell = MATRIX.cell("3.11-distro")
    text = render.render_cell_dockerfile(cell, "base:tag")
    configure = re.search(r'CONFIGURE_ARGS="([^"]*)"', text).group(1).split()
    assert configure == ["--with-ensurepip=no", "--enable-optimizations", "--with-lto"]
    cflags = re.search(r'CFLAGS="([^"]*)"', text).group(1).split()
    assert cflags == list(FRAME_POINTERS)
    # the patched build gets the series and the additions, the twin neither
    assert "COPY patches/" in text and "COPY additions/" in text
    twin = render.render_cell_dockerfile(MATRIX.cell("3.11-distro-vanilla"), "base:tag")
    assert "COPY patches/" not in twin and re.search(r'CONFIGURE_ARGS="([^"]*)"', twin).group(1).split() == configure


def test_variant_configure_combines_with_configure_since(project_copy):
    edit(project_copy / "matrix.yaml", "    configure_since:\n      \"3.15\": [--without-frame-pointers]",
         "    configure: [--with-lto]\n    configure_since:\n      \"3.15\": [--without-frame-pointers]")
    matrix = load_matrix(project_copy / "matrix.yaml")
    assert matrix.cell("3.15-release").configure_args()[-2:] == ["--with-lto", "--without-frame-pointers"]
    assert matrix.cell("3.13-release").configure_args()[-1] == "--with-lto"


@pytest.mark.parametrize("value, message", [
    ("--enable-optimizations", "configure of variant 'distro' must be a list of configure options"),
    ("[--enable-optimizations, 3]", "must be a list of configure options"),
    ('["--with-lto --enable-shared"]', "configure option '--with-lto --enable-shared' of variant 'distro' must be one plain"),
    ("[--with-lto=$(id)]", "must be one plain --option"),
    ("[enable-optimizations]", "configure option 'enable-optimizations'"),
    ("[-O3]", "put compiler flags in cflags"),
])
def test_bad_variant_configure_names_the_line(project_copy, value, message):
    edit(project_copy / "matrix.yaml", "    configure: [--enable-optimizations, --with-lto]",
         f"    configure: {value}")
    expect_error(project_copy, f"    configure: {value}", message)


def test_configure_option_with_a_value_is_accepted(project_copy):
    edit(project_copy / "matrix.yaml", "    configure: [--enable-optimizations, --with-lto]",
         "    configure: [--enable-optimizations, --with-lto=full]")
    matrix = load_matrix(project_copy / "matrix.yaml")
    assert matrix.cell("3.13-distro").configure_args()[-1] == "--with-lto=full"

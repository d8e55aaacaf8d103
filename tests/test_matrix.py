from __future__ import annotations

import pytest

from cpython_perf.errors import MatrixError, UnknownCell
from cpython_perf.matrix import load_matrix

from .conftest import edit, expect_error, line_of


def test_project_matrix_loads_with_every_version():
    matrix = load_matrix()
    versions = {c.version for c in matrix.cells.values()}
    assert versions == {"3.9", "3.10", "3.11", "3.12", "3.13", "3.14", "3.15"}
    assert matrix.default_cell in matrix.cells
    assert set(matrix.smoke_cells) <= set(matrix.cells)


def test_cell_names_and_tags():
    cell = load_matrix().cell("3.13-fp")
    assert cell.image == "cpython-perf:3.13-fp"
    assert cell.recipe.version == "3.13.5"
    assert "-fno-omit-frame-pointer" in cell.variant.cflags


def test_release_variant_turns_frame_pointers_off_from_315():
    matrix = load_matrix()
    assert "--without-frame-pointers" in matrix.cell("3.15-release").configure_args()
    assert "--without-frame-pointers" not in matrix.cell("3.13-release").configure_args()


def test_o0_uses_the_largest_dwarf_stack():
    assert load_matrix().cell("3.13-O0").variant.dwarf_stack_size == 65528


def test_unknown_cell_names_close_matches():
    with pytest.raises(UnknownCell, match=r"unknown cell '3\.13-fpp'.*3\.13-fp"):
        load_matrix().cell("3.13-fpp")


def test_unknown_top_level_key(project_copy):
    edit(project_copy / "matrix.yaml", "base_suite: trixie", "base_suite: trixie\nbase_suit: trixie")
    expect_error(project_copy, "base_suit: trixie", "unknown key 'base_suit'")


def test_unknown_variant_key_suggests(project_copy):
    edit(project_copy / "matrix.yaml", "    cflags: -O0", "    cflag: -O0")
    expect_error(project_copy, "cflag: -O0", "did you mean 'cflags'")


def test_unknown_version(project_copy):
    edit(project_copy / "matrix.yaml", '  "3.10":', '  "2.7":')
    expect_error(project_copy, '"2.7":', "unknown version '2.7'")


def test_unquoted_version_is_caught(project_copy):
    edit(project_copy / "matrix.yaml", '  "3.10":', "  3.10:")
    expect_error(project_copy, "  3.10:", "must be a quoted string")


def test_unknown_variant_in_cells(project_copy):
    edit(project_copy / "matrix.yaml", "      fp: {modes: []}\n  \"3.11\"", "      pgo: {modes: []}\n  \"3.11\"")
    expect_error(project_copy, "pgo: {modes: []}", "unknown variant 'pgo'")


def test_unknown_perf_mode(project_copy):
    edit(project_copy / "matrix.yaml", "fp: {modes: [perf]}", "fp: {modes: [perf_map]}")
    expect_error(project_copy, "perf_map", "unknown perf mode 'perf_map'")


def test_native_version_cannot_claim_a_mode_it_lacks(project_copy):
    edit(project_copy / "matrix.yaml", "      O0: {modes: [perf]}", "      O0: {modes: [perf_jit]}")
    expect_error(project_copy, "O0: {modes: [perf_jit]}", "perf_jit is upstream only from 3.13")


def test_backport_claiming_a_mode_needs_a_series(project_copy):
    edit(project_copy / "matrix.yaml", "series: patches/3.9/series", "series: null")
    expect_error(project_copy, "fp: {modes: [perf], arches: [x86_64, aarch64], vanilla: [x86_64]}", "has no patch series")


def test_duplicate_key(project_copy):
    edit(project_copy / "matrix.yaml", "\narches: [x86_64, aarch64, riscv64, ppc64le, i386]", "\narches: [x86_64, aarch64, riscv64, ppc64le, i386]\narches: [x86_64]")
    path = project_copy / "matrix.yaml"
    with pytest.raises(MatrixError, match="duplicate key 'arches'"):
        load_matrix(path)


def test_unknown_smoke_cell(project_copy):
    edit(project_copy / "matrix.yaml", "smoke_cells: [3.13-fp, 3.11-fp]", "smoke_cells: [3.13-nope]")
    expect_error(project_copy, "smoke_cells:", "smoke cell '3.13-nope'")


def test_invalid_yaml_names_the_line(project_copy):
    edit(project_copy / "matrix.yaml", "arches: [x86_64, aarch64]", "arches: [x86_64, aarch64")
    with pytest.raises(MatrixError, match=r"matrix\.yaml:\d+: not valid YAML"):
        load_matrix(project_copy / "matrix.yaml")


def test_bad_recipe_hash(project_copy):
    recipe = project_copy / "recipes" / "3.13.yaml"
    edit(recipe, "sha256: 93e5", "sha256: XYZ")
    with pytest.raises(MatrixError) as info:
        load_matrix(project_copy / "matrix.yaml")
    assert str(info.value).startswith(f"{recipe}:{line_of(recipe, 'sha256:')}:")


def test_recipe_for_the_wrong_version(project_copy):
    recipe = project_copy / "recipes" / "3.12.yaml"
    edit(recipe, "version: 3.12.15", "version: 3.11.15")
    with pytest.raises(MatrixError, match="pins 3.11.15 but matrix.yaml uses it for 3.12"):
        load_matrix(project_copy / "matrix.yaml")


def test_missing_series_file(project_copy):
    edit(project_copy / "matrix.yaml", "support: none            # no backport planned\n    series: null",
         "support: none            # no backport planned\n    series: patches/3.10/series")
    expect_error(project_copy, "series: patches/3.10/series", "does not exist")


def test_vanilla_twin_has_no_series(project_copy):
    (project_copy / "patches" / "3.13").mkdir(parents=True, exist_ok=True)
    series = project_copy / "patches" / "3.13" / "series"
    if not series.exists():
        series.write_text("# empty\n")
    text = (project_copy / "matrix.yaml").read_text()
    start = text.index('"3.13":')
    section = text[start:].replace("series: null", "series: patches/3.13/series", 1)
    section = section.replace("fp: {modes: [perf]}", "fp: {modes: [perf], vanilla: true}", 1)
    (project_copy / "matrix.yaml").write_text(text[:start] + section)
    matrix = load_matrix(project_copy / "matrix.yaml")
    patched, twin = matrix.cell("3.13-fp"), matrix.cell("3.13-fp-vanilla")
    assert patched.series is not None and twin.series is None and twin.additions == ()
    assert twin.vanilla and twin.modes == patched.modes and twin.image == "cpython-perf:3.13-fp-vanilla"


def test_vanilla_needs_a_fix_series(project_copy):
    # "true }" (valid flow YAML) makes the 3.12 line the only match of the needle
    edit(project_copy / "matrix.yaml", "      fp: {modes: [perf]}\n      O0: {modes: [perf]}",
         "      fp: {modes: [perf], vanilla: true }\n      O0: {modes: [perf]}")
    expect_error(project_copy, "vanilla: true }", "a vanilla twin is the unpatched build of a version with a patch series")


def test_backport_twin_has_no_perf_support():
    matrix = load_matrix()
    patched, twin = matrix.cell("3.11-fp"), matrix.cell("3.11-fp-vanilla")
    assert patched.modes == ("perf",) and set(patched.backends) == {"perf", "perf_jit"}
    assert patched.additions and patched.series is not None
    assert twin.modes == () and twin.backends == () and twin.series is None and twin.additions == ()


def test_native_twin_keeps_upstream_support():
    twin = load_matrix().cell("3.13-release-vanilla")
    assert twin.modes == ("perf_jit",) and twin.backends == ("perf", "perf_jit")


def test_profiler_pins_are_loaded():
    pins = load_matrix().profilers
    assert pins.suite and pins.samply.startswith("0.") and pins.inferno.startswith("0.")


def test_profiler_pin_with_a_bad_version_is_caught(project_copy):
    edit(project_copy / "matrix.yaml", "  samply: 0.13.1-1+b2", "  samply: latest version")
    expect_error(project_copy, "samply: latest version", "profilers.samply must be a Debian suite or version")


def test_a_bad_austin_pin_is_caught(project_copy):
    edit(project_copy / "matrix.yaml", "  austin: {version: 4.0.0, sha256: ", "  austin: {version: 4.0.0, sha: ")
    expect_error(project_copy, "austin: {version: 4.0.0, sha: ", "profilers.austin")


def test_profiler_unknown_key_is_caught(project_copy):
    edit(project_copy / "matrix.yaml", "  samply: 0.13.1-1+b2", "  samply: 0.13.1-1+b2\n  pyspy: 0.4.1")
    expect_error(project_copy, "pyspy: 0.4.1", "unknown key 'pyspy' in profilers")

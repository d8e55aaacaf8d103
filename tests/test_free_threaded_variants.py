"""The free-threaded variants (ft, ftasan) and the variant `environment:` key ftasan uses.  No Docker."""

from __future__ import annotations

import pytest

from cpython_perf.image import render
from cpython_perf.ci.plan import build_plan
from cpython_perf.matrix import load_matrix

from .conftest import edit, expect_error

MATRIX = load_matrix()


def test_free_threaded_cells_patched_vanilla_and_asan():
    names = {c.name for c in MATRIX.cells.values() if c.variant.name in ("ft", "ftasan")}
    assert names == {"3.13-ft", "3.13-ft-vanilla", "3.13-ftasan"}
    for name in names:
        cell = MATRIX.cell(name)
        assert "--disable-gil" in cell.configure_args(), name
        assert set(cell.backends) == {"perf", "perf_jit"}, name
        assert set(cell.modes) == ({"perf"} if name == "3.13-ftasan" else {"perf", "perf_jit"}), name
    assert MATRIX.vanilla_twin(MATRIX.cell("3.13-ft")).name == "3.13-ft-vanilla"
    asan = MATRIX.cell("3.13-ftasan")
    assert "--with-address-sanitizer" in asan.configure_args()
    assert dict(asan.variant.environment) == {"ASAN_OPTIONS": "detect_leaks=0"}


def test_free_threaded_cells_are_not_smoke_cells():
    ft = {c.name for c in MATRIX.cells.values() if c.variant.name in ("ft", "ftasan")}
    smoke_plan = {job["cell"] for job in build_plan(MATRIX, "pull_request")["cells"]}
    full_plan = {job["cell"] for job in build_plan(MATRIX, "schedule")["cells"]}
    assert not ft & smoke_plan and ft <= full_plan


def test_environment_is_set_before_the_build_and_kept_in_the_image():
    text = render.render_cell_dockerfile(MATRIX.cell("3.13-ftasan"), "base:tag")
    env_at = text.index("ENV ASAN_OPTIONS=detect_leaks=0")
    assert env_at < text.index("RUN TARBALL="), "the build runs the new interpreter: the variable must be set first"
    plain = render.render_cell_dockerfile(MATRIX.cell("3.13-ft"), "base:tag")
    assert "ASAN_OPTIONS" not in plain


@pytest.mark.parametrize("value, message", [
    ("{asan_options: x}", "must be an upper-case NAME"),
    ("{ASAN_OPTIONS: \"a b\"}", "must be a string of"),
    ("{ASAN_OPTIONS: \"$(reboot)\"}", "must be a string of"),
    ("[ASAN_OPTIONS]", "must map NAME: value"),
])
def test_bad_variant_environment_names_the_line(project_copy, value, message):
    edit(project_copy / "matrix.yaml", "    environment:\n      ASAN_OPTIONS: detect_leaks=0",
         f"    environment: {value}")
    expect_error(project_copy, f"    environment: {value}", message)

"""The variant tables of README.md and docs/matrix.md are matrix.yaml's, as `python -m cpython_perf docs` writes
them (cpython_perf/report/variant_tables.py); no Docker."""

from __future__ import annotations

import pytest

from cpython_perf.errors import DriverError
from cpython_perf.matrix import PROJECT_ROOT, load_matrix
from cpython_perf.report import variant_tables

MATRIX = load_matrix()


def test_the_pages_show_the_matrix_variant_table():
    assert variant_tables.stale_pages(MATRIX) == [], "run `python -m cpython_perf docs` and commit the pages"


def test_every_variant_has_one_row_with_its_flags_and_modes():
    rows = variant_tables.variant_table(MATRIX).splitlines()[3:-1]
    assert [row.split(" | ")[0] for row in rows] == [f"| `{name}`" for name in MATRIX.variants]
    fp = next(row for row in rows if row.startswith("| `fp` |"))
    assert MATRIX.variants["fp"].cflags in fp and "`perf` (3.9," in fp
    release = next(row for row in rows if row.startswith("| `release` |"))
    assert "from 3.15: configure `--without-frame-pointers`" in release and "`perf_jit` (" in release


def test_a_changed_variant_makes_the_pages_stale(tmp_path):
    for page in variant_tables.PAGES:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / page).write_text((PROJECT_ROOT / page).read_text().replace(
            MATRIX.variants["O0"].description, "something else"))
    assert variant_tables.stale_pages(MATRIX, tmp_path) == list(variant_tables.PAGES)
    assert variant_tables.write_tables(MATRIX, tmp_path) == list(variant_tables.PAGES)
    assert variant_tables.stale_pages(MATRIX, tmp_path) == []


@pytest.mark.parametrize("text", ["no markers", f"{variant_tables.END}\n{variant_tables.BEGIN}",
                                  f"{variant_tables.BEGIN}\n{variant_tables.BEGIN}\n{variant_tables.END}"])
def test_a_page_without_its_markers_is_an_error_naming_it(text):
    with pytest.raises(DriverError, match=r"README\.md: no variant table to generate: put the lines"):
        variant_tables.with_table(text, "table", "README.md")

"""The variant tables of README.md and docs/matrix.md say what matrix.yaml says (no Docker).

matrix.yaml is the single source of truth of the variants; the two pages restate them for readers, one row
a variant under the header `| variant | flags | perf modes checked |`.  This test reads both tables and
fails, naming the page, the variant and what disagrees, when a row's name, flags or modes differ from the
matrix: every variant has its row and no row names another; the flags name the variant's CFLAGS (the frame
pointer flags may be written "frame pointers" or "the `fp` flags", empty CFLAGS "upstream defaults") and every
configure option, and claim frame pointers only for a variant built with them; the modes are those the
variant's cells claim.
"""

from __future__ import annotations

import re

import pytest

from cpython_perf.matrix import PERF_MODES, PROJECT_ROOT, load_matrix

PAGES = [PROJECT_ROOT / "README.md", PROJECT_ROOT / "docs" / "matrix.md"]
HEADER = "| variant | flags | perf modes checked |"
FRAME_POINTER_WORDS = ("frame pointers", "the `fp` flags")   # how the pages may name the fp variant's CFLAGS
NO_CFLAGS_WORDS = "upstream defaults"


def variant_rows(page) -> dict[str, tuple[str, str]]:
    """{variant: (flags, modes)} of the page's variant table; a variant named twice is an error."""
    lines = page.read_text().splitlines()
    assert HEADER in lines, f"{page.name}: no variant table ({HEADER})"
    rows: dict[str, tuple[str, str]] = {}
    for line in lines[lines.index(HEADER) + 2:]:
        if not line.startswith("| "):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        assert len(cells) == 3, f"{page.name}: not a row of three cells: {line}"
        name = re.fullmatch(r"`([A-Za-z0-9_]+)`", cells[0])
        assert name, f"{page.name}: the first cell names one variant in backticks: {line}"
        assert name.group(1) not in rows, f"{page.name}: variant {name.group(1)} has two rows"
        rows[name.group(1)] = (cells[1], cells[2])
    return rows


def flag_errors(variant, flags: str, fp_cflags: str) -> list[str]:
    """What the flags cell of a variant's row gets wrong, compared with the matrix."""
    errors = []
    options = [*variant.configure, *(option for _, added in variant.configure_since for option in added)]
    errors += [f"configure option {option} not named" for option in options if option not in flags]
    with_fp = variant.cflags == fp_cflags
    if not variant.cflags:
        if NO_CFLAGS_WORDS not in flags:
            errors.append(f"no CFLAGS, but the row does not say {NO_CFLAGS_WORDS!r}")
    elif variant.cflags not in flags and not (with_fp and any(w in flags for w in FRAME_POINTER_WORDS)):
        errors.append(f"CFLAGS {variant.cflags!r} not named")
    if not with_fp and re.search(r"(?<!no )frame pointers|the `fp` flags", flags):
        errors.append(f"claims frame pointers, but its CFLAGS are {variant.cflags!r}")
    return errors


@pytest.fixture(scope="module")
def matrix():
    return load_matrix()


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_the_page_has_a_row_for_each_variant_and_no_other(matrix, page):
    rows = set(variant_rows(page))
    assert rows == set(matrix.variants), (f"{page.name}: no row for {sorted(set(matrix.variants) - rows)}, "
                                          f"rows of no variant {sorted(rows - set(matrix.variants))}")


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_each_rows_flags_are_the_variants(matrix, page):
    fp_cflags = matrix.variants["fp"].cflags
    errors = {name: flag_errors(matrix.variants[name], flags, fp_cflags)
              for name, (flags, _) in variant_rows(page).items() if name in matrix.variants}
    wrong = {name: found for name, found in errors.items() if found}
    assert not wrong, f"{page.name}: {wrong}"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_each_rows_modes_are_those_its_cells_claim(matrix, page):
    claimed: dict[str, set[str]] = {}
    for cell in matrix.cells.values():
        claimed.setdefault(cell.variant.name, set()).update(cell.modes)
    stated = {name: {m for m in re.findall(r"`([^`]+)`", modes) if m in PERF_MODES}
              for name, (_, modes) in variant_rows(page).items()}
    wrong = {name: (modes, claimed.get(name, set())) for name, modes in stated.items()
             if modes != claimed.get(name, set())}
    assert not wrong, f"{page.name}: (stated, claimed by the matrix's cells): {wrong}"


def test_a_row_that_disagrees_is_named():
    """The checks find a missing configure option, unnamed CFLAGS and a frame-pointer claim the matrix denies."""
    matrix = load_matrix()
    fp = matrix.variants["fp"].cflags
    assert flag_errors(matrix.variants["distro"], "PGO + LTO + frame pointers", fp) == [
        "configure option --enable-optimizations not named", "configure option --with-lto not named"]
    assert flag_errors(matrix.variants["O0"], "unoptimised", fp) == ["CFLAGS '-O0' not named"]
    assert flag_errors(matrix.variants["release"], "upstream defaults, frame pointers", fp) == [
        "configure option --without-frame-pointers not named", "claims frame pointers, but its CFLAGS are ''"]
    assert flag_errors(matrix.variants["release"], "upstream defaults, no frame pointers (`--without-frame-pointers`)", fp) == []

"""The variant table README.md and docs/matrix.md show, generated from matrix.yaml: `python -m cpython_perf docs`.

matrix.yaml is the one source of the variants; a page shows them between two marker lines, and this module
writes what lies between: one row a variant, its description, its CFLAGS and configure options, and the perf
modes its cells claim with the versions that claim them.  A new variant is an edit of matrix.yaml followed
by `python -m cpython_perf docs`; `--check` (the unit tests) fails on a page whose table is not the matrix's.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import DriverError
from ..matrix import PERF_MODES, PROJECT_ROOT, Matrix, load_matrix
from ..subcommands import Command

PAGES = ("README.md", "docs/matrix.md")
BEGIN = "<!-- variant table: generated from matrix.yaml by `python -m cpython_perf docs`; edit matrix.yaml -->"
END = "<!-- end of the variant table -->"
HEADER = "| variant | what it is | flags | perf modes checked |"


def _code(items) -> str:
    return ", ".join(f"`{item}`" for item in items)


def _flags(variant) -> str:
    parts = [f"CFLAGS {_code([variant.cflags])}" if variant.cflags else "upstream CFLAGS"]
    if variant.configure:
        parts.append(f"configure {_code([' '.join(variant.configure)])}")
    for (major, minor), options in variant.configure_since:
        parts.append(f"from {major}.{minor}: configure {_code([' '.join(options)])}")
    return "; ".join(parts)


def _modes(matrix: Matrix, variant_name: str) -> str:
    """The modes the variant's checked cells claim, each set with the versions whose cells claim it."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for cell in matrix.cells.values():
        if cell.variant.name != variant_name or cell.vanilla or cell.build_only:
            continue
        versions = groups.setdefault(tuple(m for m in PERF_MODES if m in cell.modes), [])
        if cell.version not in versions:
            versions.append(cell.version)
    if not groups:
        return "none (no cell)"
    return "; ".join(f"{_code(modes) if modes else 'none'} ({', '.join(versions)})"
                     for modes, versions in groups.items())


def variant_table(matrix: Matrix) -> str:
    """The table, header to last row, with the markers around it."""
    rows = [BEGIN, HEADER, "| --- | --- | --- | --- |"]
    rows += [f"| `{name}` | {variant.description} | {_flags(variant)} | {_modes(matrix, name)} |"
             for name, variant in matrix.variants.items()]
    return "\n".join([*rows, END])


def with_table(text: str, table: str, page: str) -> str:
    """text with the lines from BEGIN to END replaced by table; an error naming the page without them."""
    lines = text.split("\n")
    if lines.count(BEGIN) != 1 or lines.count(END) != 1 or lines.index(BEGIN) > lines.index(END):
        raise DriverError(f"{page}: no variant table to generate: put the lines {BEGIN} and {END}, in that "
                          "order and once each, where the table belongs")
    start, end = lines.index(BEGIN), lines.index(END)
    return "\n".join([*lines[:start], table, *lines[end + 1:]])


def _pages(matrix: Matrix, root: Path) -> dict[str, tuple[str, str]]:
    """Each page's text as it is and as it is with the matrix's table."""
    table, texts = variant_table(matrix), {}
    for page in PAGES:
        old = (root / page).read_text()
        texts[page] = (old, with_table(old, table, page))
    return texts


def stale_pages(matrix: Matrix, root: Path = PROJECT_ROOT) -> list[str]:
    """The pages whose table is not the matrix's."""
    return [page for page, (old, new) in _pages(matrix, root).items() if new != old]


def write_tables(matrix: Matrix, root: Path = PROJECT_ROOT) -> list[str]:
    """Write each page's table from the matrix; the pages that changed."""
    changed = []
    for page, (old, new) in _pages(matrix, root).items():
        if new != old:
            (root / page).write_text(new)
            changed.append(page)
    return changed


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming each page whose table is not matrix.yaml's")


def run(args: argparse.Namespace) -> int:
    matrix = load_matrix(args.matrix)
    root = matrix.path.parent
    if args.check:
        stale = stale_pages(matrix, root)
        for page in stale:
            print(f"{page}: its variant table is not matrix.yaml's: run `python -m cpython_perf docs`")
        return 1 if stale else 0
    changed = write_tables(matrix, root)
    print(f"variant table written to {', '.join(changed)}" if changed else "variant tables already current")
    return 0


COMMAND = Command("docs", "write the variant tables of README.md and docs/matrix.md from matrix.yaml",
                  add_arguments, run)

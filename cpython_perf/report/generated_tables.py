"""The tables README.md and docs/ show, generated from matrix.yaml: `python -m cpython_perf docs`.

matrix.yaml is the one source of the variants and of the stock interpreters; a page shows a table between two
marker lines, and this module writes what lies between.  The variant table: one row a variant, its description,
its CFLAGS and configure options, and the perf modes its cells claim with the versions that claim them.  The
stock table: one row a distribution's own interpreter, what each mode gives there (with the experimental JIT
on where it is built) and why not, the defects it carries, and what to run instead; `nox -s stock-<name>`
checks every claim of a row on the real image (a mode it says works must work, a mode it says does not must be
diagnosed so, each defect must be seen and no other).  An edit of matrix.yaml is followed by
`python -m cpython_perf docs`; `--check` (the unit tests) fails on a page whose table is not the matrix's.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import DriverError
from dataclasses import dataclass
from typing import Callable

from ..matrix import NATIVE_SINCE, PERF_MODES, PROJECT_ROOT, Matrix, StockTarget, load_matrix
from ..subcommands import Command

BEGIN = "<!-- variant table: generated from matrix.yaml by `python -m cpython_perf docs`; edit matrix.yaml -->"
END = "<!-- end of the variant table -->"
HEADER = "| variant | what it is | flags | perf modes checked |"
STOCK_BEGIN = "<!-- stock table: generated from matrix.yaml by `python -m cpython_perf docs`; edit matrix.yaml -->"
STOCK_END = "<!-- end of the stock table -->"
STOCK_HEADER = "| interpreter | `perf` | `perf_jit` | defects it carries | without the series | instead |"
REMOTE_EXEC_SINCE = (3, 14)   # sys.remote_exec() (PEP 768): `activate --container` on a stock interpreter
# what a diagnosis code (matrix.yaml stock: not_given) means, for a reader of the table
DIAGNOSIS_TEXT = {
    "no-trampoline": "no trampoline before 3.12",
    "backend-not-available": "no perf_jit before 3.13",
    "no-frame-pointers": "no frame pointers: perf's unwinding stops in the eval loop",
    "perf-too-old": "the release's perf is too old for `perf inject --jit`",
}


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
    cells = [c for c in matrix.cells.values() if c.variant.name == variant_name and not c.vanilla and not c.build_only]
    first = {}   # version -> the modes of its first cell (the default arch's): an arch that claims others is named
    for cell in cells:
        first.setdefault(cell.version, cell.modes)
    for cell in cells:
        versions = groups.setdefault(tuple(m for m in PERF_MODES if m in cell.modes), [])
        label = cell.version if cell.modes == first[cell.version] else f"{cell.version} on {cell.arch}"
        if label not in versions:
            versions.append(label)
    if not groups:
        return "none (no cell)"
    return "; ".join(f"{_code(modes) if modes else 'none'} ({', '.join(versions)})"
                     for modes, versions in groups.items())


def _stock_mode(target: StockTarget, mode: str) -> str:
    if mode in target.modes:
        return "works" + (" (with `PYTHON_JIT=1` the trampoline turns the JIT off, and the sys API refuses while "
                          "the JIT is on: no JIT code is profiled)" if target.jit else "")
    return f"no: {DIAGNOSIS_TEXT.get(target.not_given.get(mode, ''), target.not_given.get(mode, 'not claimed'))}"


def _stock_instead(matrix: Matrix, target: StockTarget) -> str:
    """The cells and packaging lanes of the same version (the series' fixes and features), and what each defect
    it carries says to do instead (matrix.yaml defects: instead:)."""
    cells = [c.name for c in matrix.cells.values()
             if c.version == target.version and not c.vanilla and not c.build_only and c.arch == "x86_64"]
    lanes = [l.name for l in matrix.lanes.values() if l.version == target.version]
    bits = []
    if lanes:
        bits.append("deb lane " + _code(f"deb-{l}" for l in lanes))
    if cells:
        bits.append("cells " + _code(f"build-{c}" for c in cells[:3]))
    if not bits:
        bits.append("no cell of this version builds here")
    bits += [matrix.defects[d].instead for d in target.defects if matrix.defects[d].instead]
    return "; ".join(bits)


def _series_features_absent(target: StockTarget) -> str:
    version = tuple(int(p) for p in target.version.split("."))
    if version < NATIVE_SINCE["perf"]:
        return "the trampoline itself: `-X perf`, `PYTHONPERFSUPPORT`, `sys.activate_stack_trampoline()`"
    absent = [] if version >= NATIVE_SINCE["perf_jit"] else ["`-X perf_jit`"]
    absent.append("the switch from outside: `activate --container` uses `sys.remote_exec()`"
                  if version >= REMOTE_EXEC_SINCE else "the switch from outside (`activate`)")
    return "; ".join(absent)


def stock_table(matrix: Matrix) -> str:
    rows = [STOCK_BEGIN, STOCK_HEADER, "| --- | --- | --- | --- | --- | --- |"]
    for target in matrix.stock.values():
        reported = [matrix.defects[d].upstream for d in target.defects if matrix.defects[d].reported]
        unreported = [d for d in target.defects if not matrix.defects[d].reported]
        carried = ", ".join(reported + ([f"{len(unreported)} not reported upstream"] if unreported else [])) \
            or "none seen"
        rows.append(f"| {target.description} (`stock-{target.name}`) | {_stock_mode(target, 'perf')} | "
                    f"{_stock_mode(target, 'perf_jit')} | {carried} | {_series_features_absent(target)} | "
                    f"{_stock_instead(matrix, target)} |")
    return "\n".join([*rows, STOCK_END])


DEFECTS_BEGIN = ("<!-- defect list: generated from matrix.yaml by `python -m cpython_perf docs`; "
                 "edit matrix.yaml -->")
DEFECTS_END = "<!-- end of the defect list -->"


def defect_list(matrix: Matrix) -> str:
    """Each catalogued defect a stock interpreter carries: what it is, what it means, who carries it, where it
    is fixed (a report ready to send for those upstream has no issue for: matrix.yaml's report:)."""
    rows = [DEFECTS_BEGIN]
    for defect in matrix.defects.values():
        carriers = [t.name for t in matrix.stock.values() if defect.id in t.defects]
        if not carriers:
            continue
        upstream = defect.upstream if defect.reported else "not reported upstream (a report is ready in matrix.yaml)"
        fixed = f"; fixed upstream in {defect.fixed_upstream}" if defect.fixed_upstream else ""
        rows.append(f"- **{defect.title}** (`{defect.id}`; {upstream}{fixed}; fixed by `{defect.patch}`). "
                    f"{defect.means} Carried by: {', '.join(f'`stock-{c}`' for c in carriers)}.")
    return "\n".join([*rows, DEFECTS_END])


@dataclass(frozen=True)
class GeneratedTable:
    name: str
    begin: str
    end: str
    render: Callable[[Matrix], str]
    pages: tuple[str, ...]


ARCH_BEGIN = "<!-- arch table: generated from matrix.yaml by `python -m cpython_perf docs`; edit matrix.yaml -->"
ARCH_END = "<!-- end of the arch table -->"
ARCH_HEADER = "| arch | Debian | built | programs run | perf records | GitHub Actions | cells |"


def _arch_row(matrix: Matrix, arch: str) -> str:
    facts = matrix.arch_facts[arch]
    built, run, perf = [], [], []
    for host in facts.runs_on:
        built.append(f"natively on {host}" + (f" (under `setarch {facts.personality}`)" if facts.personality else ""))
        run.append(f"natively on {host}")
        perf.append(f"in Docker on {host}")
    if facts.cross_built_on:
        hosts = " or ".join(facts.cross_built_on)
        built.append(f"cross-compiled on {hosts} (`--host={facts.triplet}`)")
        run.append(f"under qemu-user (`{facts.qemu_user}`) in Docker on {hosts}")
        if facts.guest:
            g = facts.guest
            perf.append(f"in a `{g.qemu} -M {g.machine} -cpu {g.cpu}` guest on {hosts}, booted from the cell's "
                        f"image (Debian's `{g.kernel}`), sampling `{g.event}`")
    if not facts.trampoline:
        perf = ["none: no trampoline upstream, cells are build-only"]
    runner = facts.github_runner and f"`{facts.github_runner}`"
    if not runner:
        carriers = [h for h in facts.runs_on + facts.cross_built_on if matrix.arch_facts[h].github_runner]
        runner = "; ".join(
            f"`{matrix.arch_facts[h].github_runner}` ({'natively' if h in facts.runs_on else 'under qemu'})"
            for h in carriers) or "none"
    cells = [c.name for c in matrix.cells_of_arch(arch)]
    listed = _code(cells) if len(cells) <= 8 else f"{len(cells)} cells"
    return (f"| `{arch}` | `{facts.debian}` | {'; '.join(built)} | {'; '.join(run)} | "
            f"{'; '.join(perf)} | {runner} | {listed} |")


def arch_table(matrix: Matrix) -> str:
    """The arches of the matrix: how their cells are built, run and recorded, and their cells."""
    rows = [ARCH_BEGIN, ARCH_HEADER, "| --- | --- | --- | --- | --- | --- | --- |"]
    rows += [_arch_row(matrix, arch) for arch in matrix.arches]
    return "\n".join([*rows, ARCH_END])


TABLES = (GeneratedTable("variant", BEGIN, END, lambda m: variant_table(m), ("README.md", "docs/matrix.md")),
          GeneratedTable("arch", ARCH_BEGIN, ARCH_END, lambda m: arch_table(m), ("README.md", "docs/matrix.md")),
          GeneratedTable("stock", STOCK_BEGIN, STOCK_END, lambda m: stock_table(m), ("README.md", "docs/conformance.md")),
          GeneratedTable("defect", DEFECTS_BEGIN, DEFECTS_END, lambda m: defect_list(m), ("docs/conformance.md",)))
PAGES = tuple(dict.fromkeys(p for t in TABLES for p in t.pages))


def variant_table(matrix: Matrix) -> str:
    """The table, header to last row, with the markers around it."""
    rows = [BEGIN, HEADER, "| --- | --- | --- | --- |"]
    rows += [f"| `{name}` | {variant.description} | {_flags(variant)} | {_modes(matrix, name)} |"
             for name, variant in matrix.variants.items()]
    return "\n".join([*rows, END])


def with_table(text: str, table: str, page: str, begin: str = BEGIN, end: str = END, name: str = "variant") -> str:
    """text with the lines from begin to end replaced by table; an error naming the page without them."""
    lines = text.split("\n")
    if lines.count(begin) != 1 or lines.count(end) != 1 or lines.index(begin) > lines.index(end):
        raise DriverError(f"{page}: no {name} table to generate: put the lines {begin} and {end}, in that "
                          "order and once each, where the table belongs")
    start, stop = lines.index(begin), lines.index(end)
    return "\n".join([*lines[:start], table, *lines[stop + 1:]])


def _pages(matrix: Matrix, root: Path) -> dict[str, tuple[str, str]]:
    """Each page's text as it is and as it is with the matrix's tables."""
    texts = {}
    for page in PAGES:
        old = (root / page).read_text()
        new = old
        for table in TABLES:
            if page in table.pages:
                new = with_table(new, table.render(matrix), page, table.begin, table.end, table.name)
        texts[page] = (old, new)
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
            print(f"{page}: its tables are not matrix.yaml's: run `python -m cpython_perf docs`")
        return 1 if stale else 0
    changed = write_tables(matrix, root)
    print(f"tables written to {', '.join(changed)}" if changed else "tables already current")
    return 0


COMMAND = Command("docs", "write the variant and stock tables of README.md and docs/ from matrix.yaml",
                  add_arguments, run)

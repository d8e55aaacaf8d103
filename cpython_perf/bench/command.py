"""`python -m cpython_perf.bench [GROUP] [--cell NAME ...] [options]`: run one benchmark group, write its
results/bench/<group>-<UTC time>.json and refresh BENCHMARKS.md (cpython_perf.bench.summary).

GROUP: suite (the standard suite), wallclock (the default: the project's own workloads, timed),
instructions (the same workloads, counted), fidelity, build; `summary` only rewrites BENCHMARKS.md from
the latest results file of every group.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..errors import DriverError
from ..matrix import load_matrix
from . import build_cost, fidelity, instructions, suite, summary, wallclock
from .common import RESULTS_DIR, SUMMARY, write_results

GROUPS = {"wallclock": wallclock, "suite": suite, "instructions": instructions, "fidelity": fidelity,
          "build": build_cost}


def save_group_results(results: dict, group: str, directory: Path) -> tuple[Path, bool]:
    """Write the group's results file; where that is the project's results/bench, refresh BENCHMARKS.md from
    every group's files (a run kept elsewhere leaves the project's summary alone).  (path, refreshed)"""
    path = write_results(results, directory, group)
    refreshed = path.parent.resolve() == RESULTS_DIR.resolve()
    if refreshed:
        summary.refresh_summary(SUMMARY, RESULTS_DIR)
    return path, refreshed


def _summary_main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m cpython_perf.bench summary",
                                     description="Rewrite BENCHMARKS.md from the latest results file of every group.")
    parser.add_argument("--results", default=str(RESULTS_DIR), help="directory of the results files")
    parser.add_argument("--summary", default=str(SUMMARY), help="Markdown file to write (default: BENCHMARKS.md)")
    args = parser.parse_args(argv)
    try:
        print(f"wrote {summary.refresh_summary(Path(args.summary), Path(args.results))}")
    except DriverError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "summary":
        return _summary_main(argv[1:])
    name = argv.pop(0) if argv and argv[0] in GROUPS else "wallclock"
    group = GROUPS[name]
    parser = argparse.ArgumentParser(prog=f"python -m cpython_perf.bench {name}", description=group.__doc__.splitlines()[0],
                                     epilog=f"groups: {', '.join(GROUPS)} (default wallclock); summary")
    parser.add_argument("--matrix", help="path of matrix.yaml (default: the project's)")
    parser.add_argument("--cell", action="append", default=[], dest="cells", metavar="NAME",
                        help="cell to measure (repeatable; default: the matrix's default cell)")
    parser.add_argument("--results", default=str(RESULTS_DIR), help="directory of the results files (default: results/bench)")
    group.arguments(parser)
    args = parser.parse_args(argv)
    try:
        matrix = load_matrix(args.matrix)
        cells = [matrix.cell(cell) for cell in args.cells or [matrix.default_cell]]
        results = group.run(matrix, cells, args, lambda line: print(line, flush=True))
        path, refreshed = save_group_results(results, group.GROUP, Path(args.results))
        group.report(results, path)
        print(f"wrote {path}" + (f"; {SUMMARY.name} refreshed" if refreshed else f" ({SUMMARY.name} left alone)"))
    except DriverError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return 0

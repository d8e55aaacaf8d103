"""`python -m cpython_perf bench GROUP [--cell NAME ...] [options]`: run one benchmark group, write its
results/bench/<group>-<UTC time>.json and refresh BENCHMARKS.md (cpython_perf.bench.summary).

GROUP: suite (the standard suite), wallclock (the project's own workloads, timed), instructions (the same
workloads, counted), fidelity, build, jit-pipeline (perf_jit's record, inject and script against N code
objects), profilers (perf beside py-spy, Austin and profiling.sampling); `summary` only rewrites BENCHMARKS.md from the latest results file of
every group.  `python -m cpython_perf.bench [GROUP] ...` runs the same, wallclock where no group is named.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..matrix import load_matrix
from ..subcommands import Command, log, main_of
from . import build_cost, fidelity, instructions, jit_pipeline, profilers, suite, summary, wallclock
from .common import RESULTS_DIR, SUMMARY, write_results

GROUPS = {"wallclock": wallclock, "suite": suite, "instructions": instructions, "fidelity": fidelity,
          "build": build_cost, "jit-pipeline": jit_pipeline, "profilers": profilers}
DEFAULT_GROUP = "wallclock"   # of `python -m cpython_perf.bench` without a group
SUMMARY_DESCRIPTION = "Rewrite BENCHMARKS.md and the page of each results file (results/bench/<group>-<UTC time>.md)."


def save_group_results(results: dict, group: str, directory: Path) -> tuple[Path, bool]:
    """Write the group's results file; where that is the project's results/bench, refresh BENCHMARKS.md from
    every group's files (a run kept elsewhere leaves the project's summary alone).  (path, refreshed)"""
    path = write_results(results, directory, group)
    refreshed = path.parent.resolve() == RESULTS_DIR.resolve()
    if refreshed:
        summary.refresh_summary(SUMMARY, RESULTS_DIR)
    return path, refreshed


def add_arguments(parser) -> None:
    groups = parser.add_subparsers(dest="group", required=True)
    for name, group in GROUPS.items():
        about = group.__doc__.splitlines()[0]
        p = groups.add_parser(name, help=about, description=about)
        # default SUPPRESS: `python -m cpython_perf --matrix FILE bench ...` is not overridden
        p.add_argument("--matrix", default=argparse.SUPPRESS, help="path of matrix.yaml (default: the project's)")
        p.add_argument("--cell", action="append", default=[], dest="cells", metavar="NAME",
                       help="cell to measure (repeatable; default: the matrix's default cell)")
        p.add_argument("--results", default=str(RESULTS_DIR),
                       help="directory of the results files (default: results/bench)")
        group.arguments(p)
    p = groups.add_parser("summary", help=SUMMARY_DESCRIPTION, description=SUMMARY_DESCRIPTION)
    p.add_argument("--results", default=str(RESULTS_DIR), help="directory of the results files")
    p.add_argument("--summary", default=str(SUMMARY), help="Markdown file to write (default: BENCHMARKS.md)")


def _run_command(args) -> None:
    if args.group == "summary":
        print(f"wrote {summary.refresh_summary(Path(args.summary), Path(args.results))}")
        return
    group = GROUPS[args.group]
    matrix = load_matrix(args.matrix)
    cells = [matrix.cell(cell) for cell in args.cells or [matrix.default_cell]]
    results = group.run(matrix, cells, args, log)
    path, refreshed = save_group_results(results, group.GROUP, Path(args.results))
    group.report(results, path)
    print(f"wrote {path}" + (f"; {SUMMARY.name} refreshed" if refreshed else f" ({SUMMARY.name} left alone)"))


COMMAND = Command("bench", "the benchmarks: run one group (suite, wallclock, instructions, fidelity, build, "
                           "jit-pipeline, profilers) or "
                           "rewrite BENCHMARKS.md (summary) (cpython_perf/bench/)", add_arguments, _run_command,
                  description="Run one benchmark group, write its results/bench/<group>-<UTC time>.json and "
                              "refresh BENCHMARKS.md; or (summary) only rewrite BENCHMARKS.md.")
COMMANDS = (COMMAND,)


def main(argv: list[str] | None = None) -> int:
    """`python -m cpython_perf.bench [GROUP] ...`: `python -m cpython_perf bench GROUP ...`, wallclock where
    the first argument names no group."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in (*GROUPS, "summary"):
        argv.insert(0, DEFAULT_GROUP)
    return main_of(COMMAND, argv, prog="python -m cpython_perf.bench")

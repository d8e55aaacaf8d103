"""The report stage's subcommands of `python -m cpython_perf`: report (also `python -m cpython_perf.report`) and
docs (the variant tables of README.md and docs/matrix.md)."""

from __future__ import annotations

import os
from pathlib import Path

from ..matrix import PROJECT_ROOT
from ..subcommands import Command, main_of
from .pipeline import write_report
from . import generated_tables, profile_diff
from .results_files import PLAN_FILE


def add_arguments(parser) -> None:
    parser.add_argument("--results", default=os.environ.get("CPYTHON_PERF_RESULTS") or str(PROJECT_ROOT / "results"),
                        help="directory holding the JUnit files (default: $CPYTHON_PERF_RESULTS, else results/)")
    parser.add_argument("--plan", default=None,
                        help=f"the run's plan (python -m cpython_perf plan's JSON; default: {PLAN_FILE} in the "
                             "results directory, where it exists): tells cells not selected from selected ones "
                             "without results")


def _run_command(args) -> None:
    md, page = write_report(Path(args.results), plan=Path(args.plan) if args.plan else None)
    print(f"read {Path(args.results).resolve()}; wrote {md} and {page}")


COMMAND = Command("report", "results/report.md and results/report.html from the latest JUnit files of a run "
                            "(cpython_perf/report/pipeline.py)", add_arguments, _run_command,
                  description="The results report: every cell of matrix.yaml against every check, from the JUnit "
                              "files.")


def main(argv=None) -> int:
    return main_of(COMMAND, argv, prog="python -m cpython_perf.report")


COMMANDS = (COMMAND, generated_tables.COMMAND, profile_diff.COMMAND)

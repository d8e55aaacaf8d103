"""The results file of a standard-suite run, results/bench/suite-<UTC time>.json: what it holds (new_results;
nothing_run where no comparison could run), rewritten after every measurement ("complete": false until the
end: Progress), the newest one (latest_results), and its comparisons (analyse_suite: the instruction counts'
ratios with pyperf's wall-clock verdicts), which the run's page and BENCHMARKS.md show.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..matrix import PROJECT_ROOT, Cell
from .common import RESULTS_DIR, Comparison, Configuration, analyse, latest_group_results, machine_info, utc_stamp, write_results
from .common import _title as comparison_title
from .suite_pins import SuiteConfig

GROUP = "suite"   # results/bench/suite-<UTC time>.json


@dataclass
class Progress:
    """The results file, rewritten after every measurement."""

    results: dict
    directory: Path
    path: Path | None = None

    def save(self) -> Path:
        self.path = write_results(self.results, self.directory, GROUP)
        return self.path


PAIRS_METHOD = "interleaved pairs"   # settings["wallclock_method"] of a run whose wall clock was timed in pairs


def timed_in_pairs(results: dict) -> bool:
    """Whether a run's wall clock was timed in interleaved pairs (cpython_perf.bench.suite_wallclock); runs before
    that timed each configuration's runs after the other's and judged them by `pyperf compare_to`, which lets the
    measuring host's drift pass for a difference: their pages show those verdicts, BENCHMARKS.md's table does not."""
    return results.get("settings", {}).get("wallclock_method") == PAIRS_METHOD


def new_results(config: SuiteConfig, plan: list[Comparison], configs: list[Configuration], cells: list[Cell],
                measured: dict[str, dict], order: list[str], left_out: dict[str, dict[str, str]],
                stdlib_only: dict[str, list[str]], not_run: list[dict], *, instructions: bool, wallclock: bool,
                rigor: str, only: list[str] | None, pairs: int = 0) -> dict:
    """The results of a run about to measure: its suite, settings, benchmarks (order: those every cell runs;
    left_out: cell -> {name: reason}; stdlib_only: cell -> every benchmark it could run), cells (measured: cell
    -> its image, as instructions.cell_images found it), configurations and comparisons, nothing measured yet."""
    return {
        "created": utc_stamp(),
        "complete": False,
        "machine": machine_info(),
        "suite": {"pyperformance": config.pyperformance.__dict__, "pyperf": config.pyperf.__dict__,
                  "config": str(config.path.relative_to(PROJECT_ROOT)) if config.path.is_relative_to(PROJECT_ROOT) else str(config.path),
                  "min_loop_instructions": config.min_loop_instructions},
        "settings": {"instructions": instructions, "wallclock": wallclock, "rigor": rigor, "only": only,
                     "order": [c.key for c in configs],
                     **({"wallclock_method": PAIRS_METHOD, "pairs": pairs} if wallclock else {})},
        "benchmarks": order,
        "left_out": left_out,
        "stdlib_only": stdlib_only,
        "cells": {cell.name: {"version": cell.version, "variant": cell.variant.name, "arch": cell.arch,
                              "support": cell.support, "vanilla": cell.vanilla, **measured[cell.name]}
                  for cell in cells},
        "configurations": {c.key: {"cell": c.cell.name, "label": c.label, "argv": list(c.argv)} for c in configs},
        "comparisons_planned": [{"kind": c.kind, "a": c.a.key, "b": c.b.key} for c in plan],
        "not_run": not_run,
        "instructions": {"loops": {}, "timings": {c.key: {} for c in configs}, "raw": {c.key: {} for c in configs},
                         "failures": {}, "seconds": {c.key: 0.0 for c in configs}},
        "wallclock": {"files": {}, "means": {c.key: {} for c in configs}, "rounds": {}, "compare": [],
                      "failures": {}, "seconds": {c.key: 0.0 for c in configs}},
    }


def nothing_run(config: SuiteConfig, not_run: list[dict], kinds, only) -> dict:
    """The results of a run in which every comparison lacks an image: not_run says which and why."""
    results = {
        "created": utc_stamp(), "complete": True, "machine": machine_info(),
        "suite": {"pyperformance": config.pyperformance.__dict__, "pyperf": config.pyperf.__dict__,
                  "config": str(config.path), "min_loop_instructions": config.min_loop_instructions},
        "settings": {"instructions": False, "wallclock": False, "only": only, "order": [], "kinds": list(kinds)},
        "benchmarks": [], "left_out": {}, "cells": {}, "configurations": {}, "comparisons_planned": [],
        "not_run": not_run,
        "instructions": {"loops": {}, "timings": {}, "raw": {}, "failures": {}, "seconds": {}},
        "wallclock": {"files": {}, "means": {}, "compare": [], "failures": {}, "seconds": {}},
    }
    results["comparisons"] = []
    return results


def analyse_suite(results: dict) -> list[dict]:
    """common.analyse over the instruction counts (benchmarks both sides counted), with the wall-clock verdicts
    attached per benchmark and comparison."""
    ins = results["instructions"]
    shaped = {"timings": ins["timings"], "configurations": results["configurations"], "cells": results["cells"],
              "comparisons": [c for c in results["comparisons_planned"]
                              if ins["timings"][c["a"]] and ins["timings"][c["b"]]
                              and set(ins["timings"][c["a"]]) & set(ins["timings"][c["b"]])]}
    analysed = analyse(shaped) if shaped["comparisons"] else []
    walls = {(c["a"], c["b"]): c for c in results["wallclock"]["compare"]}
    for entry in analysed:
        wall = walls.get((entry["a"], entry["b"]))
        entry["wallclock"] = wall["verdicts"] if wall else None
    found = {(e["a"], e["b"]) for e in analysed}
    for c in results["comparisons_planned"]:   # wall clock only
        if (c["a"], c["b"]) not in found and (c["a"], c["b"]) in walls:
            analysed.append({"kind": c["kind"], "a": c["a"], "b": c["b"], "workloads": {}, "geomean": None,
                             "wallclock": walls[(c["a"], c["b"])]["verdicts"],
                             "title": comparison_title(c["kind"], c["a"], c["b"], results["configurations"]),
                             "target": "", "geomean_limit": None})
    return analysed


def latest_results(directory: Path = RESULTS_DIR) -> Path | None:
    return latest_group_results(directory, GROUP)

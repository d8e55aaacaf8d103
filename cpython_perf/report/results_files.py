"""The files of a results directory besides the checks' JUnit files: their names, and the readers of the run's
plan (plan.json), of each cell's missing-images.txt and seed `perf script` files, and of a buildbot run's
skipped.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..check.suite_results import SEED_RUN_SCRIPTS

PLAN_FILE = "plan.json"               # the CI run's plan (cpython_perf.ci.plan), downloaded by the report job
MISSING_IMAGES = "missing-images.txt"  # results/<cell>/: the images a selected cell's job could not load
CELL_JUNIT_DIR = "junit"   # results/junit/<cell>.xml: the report's consolidated JUnit file of each cell
LANES_DIR = "deb"          # results/deb/<lane run>/: what a packaging lane wrote (cpython_perf.lanes.lane_run)
# Cells a buildbot run did not run: results/skipped.json ({cell: why}), written by the master's `matrix`
# build (cpython_perf/ci/buildbot_steps.py) beside the run's uploads.
SKIPPED_FILE = "skipped.json"


def load_plan(path: Path) -> dict | None:
    """The run's plan (python -m cpython_perf plan's JSON), or None where there is none or it is unreadable."""
    try:
        plan = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        print(f"warning: {path}: not a plan ({exc}); the selection is unknown", file=sys.stderr)
        return None
    if not isinstance(plan, dict) or not isinstance((plan.get("selection") or {}).get("cells"), list):
        print(f"warning: {path}: no selection.cells; the selection is unknown", file=sys.stderr)
        return None
    return plan


def cell_files(results_dir: Path, cells) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(missing images, seed perf script files relative to results_dir) of each cell."""
    missing, scripts = {}, {}
    for cell in cells:
        folder = Path(results_dir) / cell
        marker = folder / MISSING_IMAGES
        if marker.is_file():
            missing[cell] = marker.read_text().split() or ["(unnamed)"]
        found = sorted(folder.glob(SEED_RUN_SCRIPTS)) if folder.is_dir() else []
        if found:
            scripts[cell] = [f"{cell}/{p.name}" for p in found]
    return missing, scripts


def script_label(path: str) -> str:
    """seed-perf_jit-env.perf-script.txt -> perf_jit env"""
    name = path.rsplit("/", 1)[-1].removeprefix("seed-").removesuffix(".perf-script.txt")
    mode, _, activation = name.rpartition("-")
    return f"{mode} {activation}" if mode else name


def skipped_cells(results_dir: Path) -> dict[str, str]:
    try:
        data = json.loads((Path(results_dir) / SKIPPED_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

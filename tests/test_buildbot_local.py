"""The local buildbot proof (nox -s buildbot-local; not in CI): a throwaway master and two workers on localhost
ran the smoke cells' builders for real (cpython_perf/ci/buildbot_local.py).  Asserted here from what the
master's REST API said and what the report builder produced: both cell builds succeeded, on different
workers, at the same time (their conformance steps overlapped: two perf suites on one machine), and the
report made from the workers' uploads shows both cells.

$CPYTHON_PERF_BUILDBOT_LOCAL_SUMMARY names the summary.json of a run (the nox session makes the run first);
without it, with $CPYTHON_PERF_BUILDBOT_LOCAL=1, the fixture makes the run itself."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest

from cpython_perf.ci import buildbot_local
from cpython_perf.matrix import PROJECT_ROOT, load_matrix

SUMMARY_ENV = "CPYTHON_PERF_BUILDBOT_LOCAL_SUMMARY"
pytestmark = [
    pytest.mark.buildbot_local,
    pytest.mark.skipif(not (os.environ.get(SUMMARY_ENV) or os.environ.get("CPYTHON_PERF_BUILDBOT_LOCAL")),
                       reason="starts a buildbot master and two workers and runs the smoke cells for real: "
                              "nox -s buildbot-local"),
]
MATRIX = load_matrix()


@pytest.fixture(scope="module")
def run() -> dict:
    if os.environ.get(SUMMARY_ENV):
        return json.loads(Path(os.environ[SUMMARY_ENV]).read_text())
    try:
        venv = buildbot_local.ensure_venv()
    except buildbot_local.BuildbotUnavailable as exc:
        pytest.skip(f"buildbot cannot be installed here: {exc}")
    with tempfile.TemporaryDirectory(prefix="cpython-perf-buildbot-") as root:
        return buildbot_local.run_local(venv, Path(root), PROJECT_ROOT / "results" / "buildbot-local")


def cell_builds(run) -> dict[str, dict]:
    builds = {}
    for build in run["builds"]:
        if build["builder"] in run["cells"]:
            assert build["builder"] not in builds, f"{build['builder']} ran twice"
            builds[build["builder"]] = build
    return builds


def test_the_smoke_cells_were_run(run):
    assert run["cells"] == [c for c in MATRIX.cells if c in MATRIX.smoke_cells]
    assert set(cell_builds(run)) == set(run["cells"])


def test_both_builds_succeeded(run):
    for cell, build in cell_builds(run).items():
        failed = [f"{s['name']}: {s['results']} ({s['state']})" for s in build["steps"] if s["results"] != "success"]
        assert build["results"] == "success", f"{cell} on {build['worker']}: {build['results']}; {failed}"
    matrix = [b for b in run["builds"] if b["builder"] == "matrix"]
    assert [b["results"] for b in matrix] == ["success"]


def test_on_different_workers(run):
    workers = {cell: build["worker"] for cell, build in cell_builds(run).items()}
    assert len(set(workers.values())) == len(workers) == 2, workers
    assert set(workers.values()) == set(run["workers"])


def test_at_the_same_time(run):
    """The two conformance steps (perf recording in both) overlapped: the concurrency proof."""
    assert run["conformance_overlap_seconds"] > 60, run.get("conformance_overlap_seconds")
    assert run["build_overlap_seconds"] >= run["conformance_overlap_seconds"]


def test_the_report_from_the_uploads_shows_both_cells(run):
    report = next(b for b in run["builds"] if b["builder"] == "report")
    assert report["results"] == "success", report["steps"]
    assert Path(run["report"]).exists()
    rows = run["report_rows"]
    assert set(rows) == set(run["cells"])
    for cell, row in rows.items():
        # passed, or incomplete where the suite skipped a check with its reason here; never failed or not run
        assert row["status"] in ("passed", "incomplete"), row["line"]
        assert int(row["pass"]) > 0 and row["fail"] == "0" and row["error"] == "0", row["line"]
    assert sorted(run["report_flamegraphs"]) == sorted(f"{c}/seed-flamegraph.svg" for c in run["cells"])
    for cell in run["cells"]:
        assert f"results/{cell}/junit.xml" in run["master_results"]

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


def _summary() -> dict | None:
    path = os.environ.get(SUMMARY_ENV)
    return json.loads(Path(path).read_text()) if path and Path(path).exists() else None


def scenario_is(name):
    """Tests of one run of the proof: the default smoke run, or a scenario (-- --scenario NAME)."""
    got = (_summary() or {}).get("scenario", "default") if os.environ.get(SUMMARY_ENV) else "default"
    return pytest.mark.skipif(got != name, reason=f"this run is the {got!r} proof, not {name!r}")


default_only = scenario_is("default")


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


@default_only
def test_the_smoke_cells_were_run(run):
    assert run["cells"] == [c for c in MATRIX.cells if c in MATRIX.smoke_cells]
    assert set(cell_builds(run)) == set(run["cells"])


@default_only
def test_both_builds_succeeded(run):
    for cell, build in cell_builds(run).items():
        failed = [f"{s['name']}: {s['results']} ({s['state']})" for s in build["steps"] if s["results"] != "success"]
        assert build["results"] == "success", f"{cell} on {build['worker']}: {build['results']}; {failed}"
    matrix = [b for b in run["builds"] if b["builder"] == "matrix"]
    assert [b["results"] for b in matrix] == ["success"]


@default_only
def test_on_different_workers(run):
    workers = {cell: build["worker"] for cell, build in cell_builds(run).items()}
    assert len(set(workers.values())) == len(workers) == 2, workers
    assert set(workers.values()) == set(run["workers"])


@default_only
def test_at_the_same_time(run):
    """The two conformance steps (perf recording in both) overlapped: the concurrency proof."""
    assert run["conformance_overlap_seconds"] > 60, run.get("conformance_overlap_seconds")
    assert run["build_overlap_seconds"] >= run["conformance_overlap_seconds"]


@default_only
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
    matrix_run = str(next(b for b in run["builds"] if b["builder"] == "matrix")["number"])
    for cell in run["cells"]:
        assert f"results/{matrix_run}/{cell}/junit.xml" in run["master_results"]   # keyed by the run


# --------------------------------------------------------------------------
# the runs' proofs: nox -s buildbot-local -- --scenario overlap|offline|revision


def _ok_row(row):
    return row["status"] in ("passed", "incomplete") and int(row["pass"]) > 0 and row["fail"] == "0" \
        and row["error"] == "0"


@scenario_is("overlap")
def test_overlapping_runs_keep_their_own_results(run):
    """Runs A (3.13-fp, 3.11-fp), B and C (3.11-fp) forced at once and 3.13-fp forced on its own during A: every
    run's uploads in results/<run>/, each report made from its own run; B collapsed into C (same selection);
    one matrix build at a time."""
    requests = run["requests"]
    assert [r["results"] for r in requests["A"]] == ["success"]
    assert [r["results"] for r in requests["B"]] == ["skipped"]          # collapsed into the newer C
    assert [r["results"] for r in requests["C"]] == ["success"]
    runs = run["runs"]
    assert runs["B"] is None and len({runs["A"], runs["C"], runs["solo"]}) == 3
    assert runs["solo"].startswith("3.13-fp-")                            # a cell forced on its own: a run of its own
    a, c = run["matrix_builds"]["A"], run["matrix_builds"]["C"]
    assert c["started_at"] >= a["complete_at"], "two matrix builds at once"
    assert set(run["cells_by_run"]["A"]) == {"3.13-fp", "3.11-fp"}
    assert set(run["cells_by_run"]["C"]) == {"3.11-fp"} and set(run["cells_by_run"]["solo"]) == {"3.13-fp"}
    for builds in run["cells_by_run"].values():
        assert all(b["results"] == "success" for b in builds.values()), builds
    tree = run["results_tree"]
    assert tree[runs["A"]] == ["3.11-fp", "3.13-fp", "skipped.json"]
    assert tree[runs["C"]] == ["3.11-fp", "skipped.json"] and tree[runs["solo"]] == ["3.13-fp"]
    ra, rc = run["reports"]["A"], run["reports"]["C"]
    assert set(ra["rows"]) == {"3.13-fp", "3.11-fp"} and all(_ok_row(r) for r in ra["rows"].values()), ra
    assert set(rc["rows"]) == {"3.11-fp"} and _ok_row(rc["rows"]["3.11-fp"]), rc   # 3.13-fp: not run in C
    assert ra["flamegraphs"] == ["3.11-fp/seed-flamegraph.svg", "3.13-fp/seed-flamegraph.svg"]
    assert run["served"]["status"] == 200 and run["served"]["title_ok"], run["served"]


@scenario_is("offline")
def test_a_worker_stopped_mid_run_does_not_hang_the_matrix(run):
    mid = run["mid_run"]
    assert set(mid["cells"]) == {"3.13-fp", "3.11-fp"}                    # no build of the aarch64 cell
    assert all(b["results"] == "success" for b in mid["cells"].values())
    assert mid["matrix"]["results"] == "warnings"
    assert mid["skipped_json"]["3.13-fp-aarch64"].startswith("no connected worker")
    assert "went away during the run" in mid["skipped_json"]["3.13-fp-aarch64"]
    assert [r["results"] for r in run["aarch64_requests"]] == ["cancelled"]
    assert mid["report"]["present"] and set(mid["report"]["rows"]) == {"3.13-fp", "3.11-fp"}
    assert mid["report"]["not_run_section"]["3.13-fp-aarch64"].startswith("not run: no connected worker")


@scenario_is("offline")
def test_a_worker_away_before_the_run_skips_its_cells(run):
    before = run["before_trigger"]
    assert before["cells"] == {} and before["matrix"]["results"] == "warnings"
    assert "was connected when the run began" in before["skipped_json"]["3.13-fp-aarch64"]
    assert len(run["aarch64_requests"]) == 1                                # nothing was triggered this time
    assert before["report"]["present"]
    assert before["report"]["not_run_section"]["3.13-fp-aarch64"].startswith("not run: no connected worker")


@scenario_is("revision")
def test_every_cell_of_a_run_builds_the_resolved_revision(run):
    landed = run["landed"]
    assert landed and landed["head"] != run["first_head"] and run["branch_head_after"] == landed["head"]
    assert run["matrix_revision"] == run["first_head"]
    later = [c for c, x in run["checkouts"].items() if x["source_started_at"] > landed["at"]]
    assert later, f"no checkout began after the commit landed: {run['checkouts']}"
    for cell, checkout in run["checkouts"].items():
        assert checkout["got_revision"] == run["first_head"], (cell, checkout)
        assert not checkout["landed_file_in_checkout"], cell
    assert set(run["cells"]) == {"3.13-fp", "3.11-fp"}
    assert all(b["results"] == "success" for b in run["cells"].values())
    assert run["report_build"]["results"] == "success" and run["report_build"]["got_revision"] == run["first_head"]
    assert set(run["report"]["rows"]) == {"3.13-fp", "3.11-fp"}

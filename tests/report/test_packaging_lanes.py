"""The packaging lanes' runs in the report (cpython_perf.report.packaging_lanes)."""

from __future__ import annotations

import json
from pathlib import Path

from cpython_perf.matrix import load_matrix
from cpython_perf.report import packaging_lanes, junit_results, model, pipeline, results_files

from tests.report.junit_files import case, junit

MATRIX = load_matrix()


REGRTEST_CASES = ('<testcase name="test.test_sys.SysModuleTest.test_exit" status="run" result="completed" time="0.1"/>'
                  '<testcase name="test.test_sys.SysModuleTest.test_getframe" status="run" time="0.1">{}</testcase>')


def regrtest_junit(path: Path, failing: bool = False) -> None:
    """CPython's own regrtest JUnit file: test cases named module.Class.method, without a classname."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = REGRTEST_CASES.format('<failure message="boom">t</failure>' if failing else "")
    path.write_text(f'<?xml version="1.0" encoding="utf-8"?>\n<testsuites><testsuite name="test_sys" tests="2">'
                    f"{body}</testsuite></testsuites>\n")


def lane(root: Path, name: str, **summary) -> Path:
    path = root / results_files.LANES_DIR / name
    path.mkdir(parents=True)
    (path / packaging_lanes.LANE_SUMMARY).write_text(json.dumps({
        "lane": name, "source_package": "python3.11", "package_version": "3.11.2-6+deb12u8",
        "options": {"with_series": True, "release_grade": False}, "phases": {"source": 1.2, "build": 900.4},
        **summary}))
    return path


PASSED_LANE = {"result": "ok", "problems": [],
               "checks": {"built": {"trampoline_active": True, "frame_pointer": {"libpython3.11.so": True}}},
               "regrtest": {"summary": "patched: 2 cases, 0 failures; vanilla: 2 cases, 1 failures; new in patched: 0"},
               "lintian": {"new": [], "gone": ["x"]}}


def results_of_every_kind(root: Path) -> None:
    """A results tree with everything the project writes: a conformance cell, the unit tests, three packaging lane
    runs (passed, failed, stopped) with CPython's regrtest JUnit, an external target."""
    junit(root / "3.13-fp" / "junit.xml", case("test_seed_chain[3.13-fp-perf-xoption]"))
    junit(root / "tests-junit.xml", case("test_parse", cls="tests.test_matrix"))
    passed = lane(root, "bookworm-3.11", **PASSED_LANE)
    regrtest_junit(passed / "regrtest-bookworm-3.11-junit.xml")
    regrtest_junit(passed / "regrtest-bookworm-3.11-archive-junit.xml", failing=True)
    (passed / "build.log").write_text("log")
    failed = lane(root, "bullseye-3.9", result="ok", problems=["`python3.9 -X perf` did not activate the trampoline"])
    regrtest_junit(failed / "regrtest-bullseye-3.9-junit.xml")
    lane(root, "trixie-3.13-baseline", options={"with_series": False}, phases={"source": 3.0})
    junit(root / "external-stock" / "junit.xml", case(
        "test_perf_mode[stock-trixie-usr-bin-python3.13-perf]", cls="conformance.test_external",
        props={"external_image": "stock:trixie", "external_python": "/usr/bin/python3.13", "mode": "perf"}))


def test_every_kind_of_result_the_project_writes_is_read_and_rendered(tmp_path):
    results_of_every_kind(tmp_path)
    md_path, page_path = pipeline.write_report(tmp_path, MATRIX, renderer=lambda *a: None)
    md, page = md_path.read_text(), page_path.read_text()
    built = model.build_report(MATRIX, junit_results.latest_results(tmp_path))
    # CPython's regrtest cases are neither checks of a cell nor unit tests of the driver
    assert [c.name for c in built.unbound] == ["test_parse"]
    assert list(built.grid["3.13-fp"]) == ["test_seed_chain[perf-xoption]"] and len(built.external) == 1
    rows = {row.name: row for row in packaging_lanes.lane_rows(tmp_path, MATRIX)}
    assert set(rows) == {"bookworm-3.11", "bullseye-3.9", "trixie-3.13-baseline"}   # every matrix lane has a run
    assert rows["bookworm-3.11"].status == "passed"
    assert rows["bookworm-3.11"].regrtest == [
        "bookworm-3.11-archive: 2 cases, 1 failed, 0 skipped", "bookworm-3.11: 2 cases, 0 failed, 0 skipped",
        "compared: " + PASSED_LANE["regrtest"]["summary"]]
    assert rows["bookworm-3.11"].logs == ["deb/bookworm-3.11/build.log"]
    assert (rows["bullseye-3.9"].status, rows["bullseye-3.9"].note) == (
        "failed", "`python3.9 -X perf` did not activate the trampoline")
    assert rows["trixie-3.13-baseline"].status == "did not finish"
    assert "after its source phase" in rows["trixie-3.13-baseline"].note
    assert "the archive's package alone (baseline)" in rows["trixie-3.13-baseline"].package
    for text in (md, page):
        assert "Packaging lanes" in text and "External interpreters" in text and "1 failed, 1 did not finish" in text
    assert md.startswith("# cpython-perf results\n\n**FAILED:")   # a failed lane fails the run
    assert "id='lanes'" in page and "href='deb/bookworm-3.11/build.log'" in page


def test_lanes_without_results_are_not_run_and_a_passed_lane_passes(tmp_path):
    junit(tmp_path / "3.13-fp" / "junit.xml", case("test_seed_chain[3.13-fp-perf-xoption]"))
    lane(tmp_path, "bookworm-3.11", **PASSED_LANE)
    rows = {row.name: row.status for row in packaging_lanes.lane_rows(tmp_path, MATRIX)}
    assert rows == {"bookworm-3.11": "passed", **{name: "not run" for name in MATRIX.lanes if name != "bookworm-3.11"}}
    built = model.build_report(MATRIX, junit_results.latest_results(tmp_path))
    built.lanes = packaging_lanes.lane_rows(tmp_path, MATRIX)
    assert "packaging lanes: 1 passed" in built.verdict() and not built.verdict().startswith("FAILED")


def test_a_lane_whose_summary_is_unreadable_did_not_finish(tmp_path):
    (tmp_path / results_files.LANES_DIR / "bookworm-3.11").mkdir(parents=True)
    (tmp_path / results_files.LANES_DIR / "bookworm-3.11" / packaging_lanes.LANE_SUMMARY).write_text("{")
    row = packaging_lanes.lane_rows(tmp_path, MATRIX)[0]
    assert row.status == "did not finish" and "summary.json unreadable" in row.note

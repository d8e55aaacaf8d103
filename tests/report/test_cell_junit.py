"""The consolidated JUnit file of each cell (cpython_perf.report.cell_junit)."""

from __future__ import annotations

from cpython_perf.matrix import load_matrix
from cpython_perf.report import junit_results, pipeline, results_files

from tests.report.junit_files import case, junit

MATRIX = load_matrix()


def test_each_cell_gets_one_junit_file_with_its_latest_results(tmp_path):
    skip = '<skipped type="pytest.skip" message="no perf capability">x</skipped>'
    junit(tmp_path / "3.13-fp" / "junit.xml", case("test_seed_chain[3.13-fp-perf-xoption]")
          + case("test_samply_seed_chain[3.13-fp-perf]", "conformance.test_samply", skip))
    pipeline.write_report(tmp_path, MATRIX, renderer="none here")
    cases = junit_results.parse_junit(tmp_path / results_files.CELL_JUNIT_DIR / "3.13-fp.xml")
    assert {c.name: c.outcome for c in cases} == {"test_seed_chain[3.13-fp-perf-xoption]": "passed",
                                                  "test_samply_seed_chain[3.13-fp-perf]": "skipped"}
    assert [c.message for c in cases if c.outcome == "skipped"] == ["no perf capability"]
    import xml.etree.ElementTree as ET
    suite = ET.parse(tmp_path / results_files.CELL_JUNIT_DIR / "3.12-fp.xml").getroot().find("testsuite")
    assert suite.get("tests") == "0"
    assert {p.get("name"): p.get("value") for p in suite.iter("property")}["status"] == "not run"
    # the consolidated files are outputs, never read back as results
    assert all(not c.source.startswith(str(tmp_path / results_files.CELL_JUNIT_DIR)) for c in junit_results.latest_results(tmp_path))

"""The JUnit files of a run read (cpython_perf.report.junit_results): outcomes, the newest result of each
testcase, files pytest really writes, results of retired tests, files without classnames."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from cpython_perf.matrix import load_matrix
from cpython_perf.report import junit_results, markdown_page, model, pipeline

from tests.report.junit_files import FAIL, SKIP, case, junit

MATRIX = load_matrix()


def test_outcomes_are_parsed_and_a_skip_is_never_a_pass(tmp_path):
    junit(tmp_path / "3.13-fp" / "junit.xml", "\n".join([
        case("test_seed_chain[3.13-fp-perf-xoption]", props={"chain_fraction": "0.97", "inside_foo": "512"}),
        case("test_seed_chain[3.13-fp-perf-env]", body=FAIL),
        case("test_seed_chain[3.12-fp-perf-xoption]", body=SKIP),
        case("test_seed_chain[3.13-O0-perf-xoption]", body='<error message="fixture broke">x</error>'),
        case("test_seed_chain[3.13-release-perf_jit-xoption]", body='<skipped type="pytest.xfail" message="known">x</skipped>'),
    ]))
    got = {c.name: c for c in junit_results.latest_results(tmp_path)}
    assert got["test_seed_chain[3.13-fp-perf-xoption]"].outcome == "passed"
    assert got["test_seed_chain[3.13-fp-perf-xoption]"].properties == {"chain_fraction": "0.97", "inside_foo": "512"}
    assert got["test_seed_chain[3.13-fp-perf-xoption]"].seconds == 1.5
    assert got["test_seed_chain[3.13-fp-perf-env]"].outcome == "failed"
    assert got["test_seed_chain[3.12-fp-perf-xoption]"].outcome == "skipped"
    assert got["test_seed_chain[3.12-fp-perf-xoption]"].message == "3.12-fp: source not available here"
    assert got["test_seed_chain[3.13-O0-perf-xoption]"].outcome == "error"
    assert got["test_seed_chain[3.13-release-perf_jit-xoption]"].outcome == "xfailed"

    rep = model.build_report(MATRIX, list(got.values()))
    assert rep.status("3.13-fp") == "failed"
    assert rep.status("3.12-fp") == "incomplete"      # only skipped: not passed
    assert rep.status("3.13-O0") == "failed"          # an error counts as a failure
    assert rep.status("3.13-release") == "incomplete"
    assert rep.status("3.9-fp") == "not run"
    assert "test_seed_chain[perf-xoption]" in rep.checks


def test_the_newest_file_wins(tmp_path):
    name = "test_seed_chain[3.13-fp-perf-xoption]"
    junit(tmp_path / "tests-junit.xml", case(name, body=FAIL), timestamp="2026-11-22T07:00:00+00:00")
    junit(tmp_path / "3.13-fp" / "junit.xml", case(name), timestamp="2026-11-22T08:00:00+00:00")
    [only] = junit_results.latest_results(tmp_path)
    assert only.outcome == "passed" and only.source.endswith("3.13-fp/junit.xml")
    junit(tmp_path / "tests-junit.xml", case(name, body=FAIL), timestamp="2026-11-22T09:00:00+00:00")
    [only] = junit_results.latest_results(tmp_path)
    assert only.outcome == "failed"


def test_unit_tests_are_summarised_apart_and_bad_files_ignored(tmp_path):
    junit(tmp_path / "tests-junit.xml", "\n".join([
        case("test_parse", cls="tests.test_matrix"),
        case("test_other", cls="tests.test_matrix", body=FAIL),
    ]))
    (tmp_path / "broken.xml").write_text("<testsuites")
    rep = model.build_report(MATRIX, junit_results.latest_results(tmp_path))
    assert [c.name for c in rep.unbound] == ["test_other", "test_parse"]
    assert rep.checks == []
    md = markdown_page.render_markdown(rep)
    assert "1 pass, 1 FAIL" in md and "tests.test_matrix::test_other: FAIL" in md


def test_reads_the_junit_file_pytest_really_writes(tmp_path):
    (tmp_path / "conformance").mkdir()
    (tmp_path / "conformance" / "test_fake.py").write_text(textwrap.dedent("""\
        import pytest

        @pytest.mark.parametrize("cell", ["3.13-fp", "3.12-fp"])
        def test_fake(cell, record_property):
            record_property("chain_fraction", 0.75)
            if cell == "3.12-fp":
                pytest.skip("3.12-fp: source not available here")
        """))
    out = tmp_path / "results" / "3.13-fp" / "junit.xml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    str(tmp_path / "conformance" / "test_fake.py"),
                    f"--junitxml={out}", "--rootdir", str(tmp_path)], cwd=tmp_path, env=env, check=True,
                   capture_output=True)
    rep = model.build_report(MATRIX, junit_results.latest_results(tmp_path / "results"))
    assert rep.grid["3.13-fp"]["test_fake"].outcome == "passed"
    assert rep.grid["3.13-fp"]["test_fake"].properties == {"chain_fraction": "0.75"}
    assert rep.grid["3.12-fp"]["test_fake"].outcome == "skipped"
    assert "source not available" in rep.grid["3.12-fp"]["test_fake"].message


def test_results_of_retired_tests_are_left_out(tmp_path):
    junit(tmp_path / "3.13-fp" / "junit.xml", case("test_seed_chain[3.13-fp-perf-xoption]")
          + case("test_seed_chain_broken_without_the_series[3.13-fp-perf]", body=FAIL))
    [kept, gone] = junit_results.latest_results(tmp_path)
    assert not junit_results.retired(kept) and junit_results.retired(gone)
    md, _ = pipeline.write_report(tmp_path, MATRIX, renderer="none here")
    assert "1 results of tests the suite no longer has left out" in md.read_text()
    assert "test_seed_chain_broken_without_the_series" not in md.read_text()


def test_a_junit_file_without_classnames_does_not_crash_the_report(tmp_path):
    """CPython's regrtest JUnit (results/deb/<lane>/regrtest-*-junit.xml) has test cases without a classname."""
    lane = tmp_path / "deb" / "bookworm-3.11"
    lane.mkdir(parents=True)
    (lane / "regrtest-patched-junit.xml").write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n<testsuites><testsuite name="test_sys" tests="1">'
        '<testcase name="test.test_sys.SysModuleTest.test_exit" status="run" result="completed" time="0.1"/>'
        '</testsuite></testsuites>\n')
    md, page = pipeline.write_report(tmp_path, MATRIX)
    assert md.exists() and page.exists()

"""Unit tests of cpython_perf.report.report (no Docker)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cpython_perf.check import suite_results
from cpython_perf.report import report
from cpython_perf.matrix import load_matrix

MATRIX = load_matrix()


def junit(path: Path, cases: str, timestamp: str = "2026-11-22T08:00:00.000000+00:00") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<testsuites><testsuite name="pytest" errors="0" failures="0" skipped="0" tests="1" time="1.0" '
        f'timestamp="{timestamp}" hostname="h">\n{cases}\n</testsuite></testsuites>\n'
    )
    return path


def case(name, cls="conformance.test_seed_chain", body="", time="1.5", props=None):
    properties = ""
    if props:
        properties = "<properties>" + "".join(f'<property name="{k}" value="{v}"/>' for k, v in props.items()) + "</properties>"
    return f'<testcase classname="{cls}" name="{name}" time="{time}">{properties}{body}</testcase>'


SKIP = '<skipped type="pytest.skip" message="3.12-fp: source not available here">conftest.py:99: 3.12-fp: source not available here</skipped>'
FAIL = '<failure message="AssertionError: chain broken (perf, xoption)">trace</failure>'


def cr(name, classname="conformance.test_checks"):
    return report.CaseResult(name=name, classname=classname, outcome="passed")


def test_only_conformance_results_count_for_a_cell(tmp_path):
    """A unit test parametrised by a cell name (tests/...) is not a check of that cell's interpreter."""
    cells = list(MATRIX.cells)
    unit = cr("test_an_x86_cell_on_an_arm64_host_is_a_clear_error[3.13-release-i386]", "tests.test_host_arch")
    assert report.cell_of(unit, cells) == (None, unit.name)
    junit(tmp_path / "tests-junit.xml", "\n".join([
        case("test_an_x86_cell_on_an_arm64_host_is_a_clear_error[3.13-release-i386]", cls="tests.test_host_arch"),
        case("test_seed_chain[3.13-fp-perf-xoption]"),
    ]))
    built = report.build_report(MATRIX, report.latest_results(tmp_path))
    assert built.status("3.13-release-i386") == "not run"
    assert list(built.grid["3.13-fp"]) == ["test_seed_chain[perf-xoption]"]
    assert [c.name for c in built.unbound] == [unit.name]


def test_cell_of_takes_the_longest_cell_name():
    cells = list(MATRIX.cells)
    assert report.cell_of(cr("test_check_script[3.13-fp-vanilla-check_fix_x]"), cells) == (
        "3.13-fp-vanilla", "test_check_script[check_fix_x]")
    assert report.cell_of(cr("test_seed_chain[3.13-fp-perf-xoption]"), cells) == ("3.13-fp", "test_seed_chain[perf-xoption]")
    assert report.cell_of(cr("test_variant_flags[3.13-O0]"), cells) == ("3.13-O0", "test_variant_flags")
    assert report.cell_of(cr("test_parse_ok"), cells) == (None, "test_parse_ok")
    assert report.cell_of(cr("test_parse[some-id]"), cells) == (None, "test_parse[some-id]")
    # a prefix that is not followed by '-' is not a match
    assert report.cell_of(cr("test_x[3.13-fpx]"), cells)[0] is None


def test_outcomes_are_parsed_and_a_skip_is_never_a_pass(tmp_path):
    junit(tmp_path / "3.13-fp" / "junit.xml", "\n".join([
        case("test_seed_chain[3.13-fp-perf-xoption]", props={"chain_fraction": "0.97", "inside_foo": "512"}),
        case("test_seed_chain[3.13-fp-perf-env]", body=FAIL),
        case("test_seed_chain[3.12-fp-perf-xoption]", body=SKIP),
        case("test_seed_chain[3.13-O0-perf-xoption]", body='<error message="fixture broke">x</error>'),
        case("test_seed_chain[3.13-release-perf_jit-xoption]", body='<skipped type="pytest.xfail" message="known">x</skipped>'),
    ]))
    got = {c.name: c for c in report.latest_results(tmp_path)}
    assert got["test_seed_chain[3.13-fp-perf-xoption]"].outcome == "passed"
    assert got["test_seed_chain[3.13-fp-perf-xoption]"].properties == {"chain_fraction": "0.97", "inside_foo": "512"}
    assert got["test_seed_chain[3.13-fp-perf-xoption]"].seconds == 1.5
    assert got["test_seed_chain[3.13-fp-perf-env]"].outcome == "failed"
    assert got["test_seed_chain[3.12-fp-perf-xoption]"].outcome == "skipped"
    assert got["test_seed_chain[3.12-fp-perf-xoption]"].message == "3.12-fp: source not available here"
    assert got["test_seed_chain[3.13-O0-perf-xoption]"].outcome == "error"
    assert got["test_seed_chain[3.13-release-perf_jit-xoption]"].outcome == "xfailed"

    rep = report.build_report(MATRIX, list(got.values()))
    assert rep.status("3.13-fp") == "failed"
    assert rep.status("3.12-fp") == "incomplete"      # only skipped: not passed
    assert rep.status("3.13-O0") == "failed"          # an error counts as a failure
    assert rep.status("3.13-release") == "incomplete"
    assert rep.status("3.9-fp") == "not run"
    assert "test_seed_chain[perf-xoption]" in rep.checks


def test_every_matrix_cell_is_a_row_even_when_never_run(tmp_path):
    junit(tmp_path / "3.13-fp" / "junit.xml", case("test_variant_flags[3.13-fp]", cls="conformance.test_build_shape"))
    md, page = report.write_report(tmp_path, MATRIX)
    text, markup = md.read_text(), page.read_text()
    for cell in MATRIX.cells:
        assert f"| {cell} |" in text, cell
        assert f"<td>{cell}</td>" in markup, cell
    row = next(line for line in text.splitlines() if line.startswith("| 3.11-fp | "))
    assert "not run" in row
    row = next(line for line in text.splitlines() if line.startswith("| 3.13-fp | "))
    assert "| passed |" in row


def test_skip_reason_and_properties_are_shown(tmp_path):
    junit(tmp_path / "a" / "junit.xml", "\n".join([
        case("test_seed_chain[3.13-fp-perf-xoption]", props={"chain_fraction": "0.9731", "perf_version": "6.12.43",
                                                             "kernel_version": "6.18.0"}),
        case("test_seed_chain[3.12-fp-perf-xoption]", body=SKIP),
    ]))
    rep = report.build_report(MATRIX, report.latest_results(tmp_path))
    md, page = report.render_markdown(rep), report.render_html(rep)
    grid_row = [line for line in md.splitlines() if line.startswith("| 3.12-fp | ")][1]
    assert "skip [1]" in grid_row and "pass" not in grid_row
    assert "1. 3.12-fp test_seed_chain[perf-xoption]: skip: 3.12-fp: source not available here" in md
    assert "chain_fraction=0.9731" in md and "chain_fraction=0.9731" in page
    assert rep.versions("3.13-fp") == {"perf_version": "6.12.43", "kernel_version": "6.18.0",
                                       "perf_event": "not recorded"}
    assert rep.versions("3.12-fp") == {"perf_version": "not recorded", "kernel_version": "not recorded",
                                       "perf_event": "not recorded"}
    assert "source not available here" in page


def test_the_sampling_event_is_shown_per_cell(tmp_path):
    """The event the host's probe chose (cpython_perf.record.perf_event) is the `event` column of each cell's row, in
    the Markdown, the HTML and the cell's consolidated JUnit file."""
    fallback = "cpu-clock (default: 0 samples)"
    junit(tmp_path / "a" / "junit.xml", "\n".join([
        case("test_seed_chain[3.13-fp-perf-xoption]", props={"perf_event": fallback}),
        case("test_seed_chain[3.13-fp-perf-env]", props={"perf_event": fallback}),
        case("test_seed_chain[3.12-fp-perf-xoption]", props={"perf_event": "default (cycles:P)"}),
    ]))
    md, page = report.write_report(tmp_path, MATRIX, renderer="none here")
    text, markup = md.read_text(), page.read_text()
    header = next(line for line in text.splitlines() if line.startswith("| cell | status |"))
    assert "| perf | kernel | event |" in header
    row = next(line for line in text.splitlines() if line.startswith("| 3.13-fp | "))
    assert f"| {fallback} |" in row
    row = next(line for line in text.splitlines() if line.startswith("| 3.12-fp | "))
    assert "| default (cycles:P) |" in row
    assert "<th>event</th>" in markup and f"<td>{fallback}</td>" in markup
    cell_file = (tmp_path / report.CELL_JUNIT_DIR / "3.13-fp.xml").read_text()
    assert f'name="perf_event" value="{fallback}"' in cell_file


def test_the_newest_file_wins(tmp_path):
    name = "test_seed_chain[3.13-fp-perf-xoption]"
    junit(tmp_path / "tests-junit.xml", case(name, body=FAIL), timestamp="2026-11-22T07:00:00+00:00")
    junit(tmp_path / "3.13-fp" / "junit.xml", case(name), timestamp="2026-11-22T08:00:00+00:00")
    [only] = report.latest_results(tmp_path)
    assert only.outcome == "passed" and only.source.endswith("3.13-fp/junit.xml")
    junit(tmp_path / "tests-junit.xml", case(name, body=FAIL), timestamp="2026-11-22T09:00:00+00:00")
    [only] = report.latest_results(tmp_path)
    assert only.outcome == "failed"


def test_unit_tests_are_summarised_apart_and_bad_files_ignored(tmp_path):
    junit(tmp_path / "tests-junit.xml", "\n".join([
        case("test_parse", cls="tests.test_matrix"),
        case("test_other", cls="tests.test_matrix", body=FAIL),
    ]))
    (tmp_path / "broken.xml").write_text("<testsuites")
    rep = report.build_report(MATRIX, report.latest_results(tmp_path))
    assert [c.name for c in rep.unbound] == ["test_other", "test_parse"]
    assert rep.checks == []
    md = report.render_markdown(rep)
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
    rep = report.build_report(MATRIX, report.latest_results(tmp_path / "results"))
    assert rep.grid["3.13-fp"]["test_fake"].outcome == "passed"
    assert rep.grid["3.13-fp"]["test_fake"].properties == {"chain_fraction": "0.75"}
    assert rep.grid["3.12-fp"]["test_fake"].outcome == "skipped"
    assert "source not available" in rep.grid["3.12-fp"]["test_fake"].message


def test_main_writes_both_files(tmp_path, capsys):
    assert report.main(["--results", str(tmp_path)]) == 0
    assert (tmp_path / "report.md").is_file() and (tmp_path / "report.html").is_file()
    assert "wrote" in capsys.readouterr().out


@pytest.mark.parametrize("outcome", ["skipped", "failed", "error", "xfailed"])
def test_labels_never_say_pass_for_anything_but_a_pass(outcome):
    assert report.LABEL[outcome] != report.LABEL["passed"]


def _svg_frame(name: str, y: int, x: int, w: int) -> str:
    """One frame as inferno writes it (title with the escaped name, rect with fg:x / fg:w sample positions)."""
    from html import escape
    return (f'<g><title>{escape(name)} ({w} samples, 1.00%)</title><rect x="0%" y="{y}" width="1%" height="15" '
            f'fill="rgb(1,2,3)" fg:x="{x}" fg:w="{w}"/><text x="0" y="0"></text></g>')


FOO, BAR = report.SEED_NESTING


def _svg(*frames) -> str:
    return "<svg>" + "".join(_svg_frame(*f) for f in frames) + "</svg>"


def test_svg_nesting_needs_foo_above_bar_and_inside_its_span():
    nested = _svg(("main", 100, 0, 10), (BAR, 68, 0, 8), ("_PyEval_EvalFrameDefault", 52, 0, 8), (FOO, 36, 1, 7))
    assert report.svg_nests(nested, FOO, BAR)
    assert not report.svg_nests(nested, BAR, FOO)                                   # bar is below foo
    assert not report.svg_nests(_svg((BAR, 68, 0, 4), (FOO, 36, 4, 4)), FOO, BAR)   # beside, not inside
    assert not report.svg_nests(_svg((FOO, 36, 0, 4)), FOO, BAR)                    # no bar at all
    assert report.svg_frames(_svg(("py::<module>:/src/script.py", 5, 0, 1)))[0][0] == "py::<module>:/src/script.py"


def test_flame_graph_is_rendered_checked_and_linked(tmp_path):
    junit(tmp_path / "3.13-fp" / "junit.xml", case("test_seed_chain[3.13-fp-perf-xoption]"))
    junit(tmp_path / "3.13-O0" / "junit.xml", case("test_seed_chain[3.13-O0-perf-xoption]"))
    (tmp_path / "3.13-fp" / report.SEED_PERF_SCRIPT).write_text("perf script text\n")
    seen = []

    def renderer(source, svg, title):
        seen.append((source.read_text(), title))
        svg.write_text(_svg((BAR, 68, 0, 8), (FOO, 36, 0, 8)))

    md, page = report.write_report(tmp_path, MATRIX, renderer=renderer)
    assert seen == [("perf script text\n", "3.13-fp: the seed script")]
    row = next(line for line in md.read_text().splitlines() if line.startswith("| 3.13-fp | "))
    assert f"[svg](3.13-fp/{report.SEED_FLAMEGRAPH}): {FOO} under {BAR}" in row
    row = next(line for line in md.read_text().splitlines() if line.startswith("| 3.13-O0 | "))
    assert "no seed perf script output" in row
    assert f"href='3.13-fp/{report.SEED_FLAMEGRAPH}'" in page.read_text()


def test_flame_graph_that_lacks_the_nesting_says_so(tmp_path):
    (tmp_path / "3.13-fp").mkdir()
    (tmp_path / "3.13-fp" / report.SEED_PERF_SCRIPT).write_text("x\n")
    out = report.render_flamegraphs(tmp_path, ["3.13-fp"],
                                    lambda source, svg, title: svg.write_text(_svg((FOO, 68, 0, 8), (BAR, 36, 0, 8))))
    assert out == {"3.13-fp": (f"3.13-fp/{report.SEED_FLAMEGRAPH}", f"does NOT show {FOO} under {BAR}")}


def test_flame_graph_reasons_when_renderer_missing_or_failing(tmp_path):
    (tmp_path / "3.13-fp").mkdir()
    (tmp_path / "3.13-fp" / report.SEED_PERF_SCRIPT).write_text("x\n")
    assert report.render_flamegraphs(tmp_path, ["3.13-fp", "3.13-O0"], "Docker is not available") == {
        "3.13-fp": (None, "no renderer: Docker is not available")}

    def failing(source, svg, title):
        svg.write_text("half")
        raise RuntimeError("cpython-perf-flamegraph failed (exit 101): no stack in the input")

    [(svg, note)] = report.render_flamegraphs(tmp_path, ["3.13-fp"], failing).values()
    assert svg is None and note == "renderer failed: cpython-perf-flamegraph failed (exit 101): no stack in the input"
    assert not (tmp_path / "3.13-fp" / report.SEED_FLAMEGRAPH).exists()


def test_each_cell_gets_one_junit_file_with_its_latest_results(tmp_path):
    skip = '<skipped type="pytest.skip" message="no perf capability">x</skipped>'
    junit(tmp_path / "3.13-fp" / "junit.xml", case("test_seed_chain[3.13-fp-perf-xoption]")
          + case("test_samply_seed_chain[3.13-fp-perf]", "conformance.test_samply", skip))
    report.write_report(tmp_path, MATRIX, renderer="none here")
    cases = report.parse_junit(tmp_path / report.CELL_JUNIT_DIR / "3.13-fp.xml")
    assert {c.name: c.outcome for c in cases} == {"test_seed_chain[3.13-fp-perf-xoption]": "passed",
                                                  "test_samply_seed_chain[3.13-fp-perf]": "skipped"}
    assert [c.message for c in cases if c.outcome == "skipped"] == ["no perf capability"]
    import xml.etree.ElementTree as ET
    suite = ET.parse(tmp_path / report.CELL_JUNIT_DIR / "3.12-fp.xml").getroot().find("testsuite")
    assert suite.get("tests") == "0"
    assert {p.get("name"): p.get("value") for p in suite.iter("property")}["status"] == "not run"
    # the consolidated files are outputs, never read back as results
    assert all(not c.source.startswith(str(tmp_path / report.CELL_JUNIT_DIR)) for c in report.latest_results(tmp_path))


def test_results_of_retired_tests_are_left_out(tmp_path):
    junit(tmp_path / "3.13-fp" / "junit.xml", case("test_seed_chain[3.13-fp-perf-xoption]")
          + case("test_seed_chain_broken_without_the_series[3.13-fp-perf]", body=FAIL))
    [kept, gone] = report.latest_results(tmp_path)
    assert not report.retired(kept) and report.retired(gone)
    md, _ = report.write_report(tmp_path, MATRIX, renderer="none here")
    assert "1 results of tests the suite no longer has left out" in md.read_text()
    assert "test_seed_chain_broken_without_the_series" not in md.read_text()


REGRTEST_CASES = ('<testcase name="test.test_sys.SysModuleTest.test_exit" status="run" result="completed" time="0.1"/>'
                  '<testcase name="test.test_sys.SysModuleTest.test_getframe" status="run" time="0.1">{}</testcase>')


def regrtest_junit(path: Path, failing: bool = False) -> None:
    """CPython's own regrtest JUnit file: test cases named module.Class.method, without a classname."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = REGRTEST_CASES.format('<failure message="boom">t</failure>' if failing else "")
    path.write_text(f'<?xml version="1.0" encoding="utf-8"?>\n<testsuites><testsuite name="test_sys" tests="2">'
                    f"{body}</testsuite></testsuites>\n")


def lane(root: Path, name: str, **summary) -> Path:
    path = root / report.LANES_DIR / name
    path.mkdir(parents=True)
    (path / report.LANE_SUMMARY).write_text(json.dumps({
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
    md_path, page_path = report.write_report(tmp_path, MATRIX, renderer=lambda *a: None)
    md, page = md_path.read_text(), page_path.read_text()
    built = report.build_report(MATRIX, report.latest_results(tmp_path))
    # CPython's regrtest cases are neither checks of a cell nor unit tests of the driver
    assert [c.name for c in built.unbound] == ["test_parse"]
    assert list(built.grid["3.13-fp"]) == ["test_seed_chain[perf-xoption]"] and len(built.external) == 1
    rows = {row.name: row for row in report.lane_rows(tmp_path, MATRIX)}
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
    rows = {row.name: row.status for row in report.lane_rows(tmp_path, MATRIX)}
    assert rows == {"bookworm-3.11": "passed", **{name: "not run" for name in MATRIX.lanes if name != "bookworm-3.11"}}
    built = report.build_report(MATRIX, report.latest_results(tmp_path))
    built.lanes = report.lane_rows(tmp_path, MATRIX)
    assert "packaging lanes: 1 passed" in built.verdict() and not built.verdict().startswith("FAILED")


def test_a_lane_whose_summary_is_unreadable_did_not_finish(tmp_path):
    (tmp_path / report.LANES_DIR / "bookworm-3.11").mkdir(parents=True)
    (tmp_path / report.LANES_DIR / "bookworm-3.11" / report.LANE_SUMMARY).write_text("{")
    row = report.lane_rows(tmp_path, MATRIX)[0]
    assert row.status == "did not finish" and "summary.json unreadable" in row.note


def test_a_buildbot_run_s_uploads_render_with_the_cells_it_skipped(tmp_path):
    run = tmp_path / "7"
    junit(run / "3.13-fp" / "junit.xml", case("test_seed_chain[3.13-fp-perf-xoption]"))
    (run / report.SKIPPED_FILE).write_text(json.dumps({"3.13-fp-aarch64": "no connected worker"}))
    md, page = report.write_report(run, MATRIX, renderer=lambda *a: None)
    assert "| 3.13-fp-aarch64 | not run: no connected worker |" in md.read_text()
    assert "3.13-fp-aarch64" in page.read_text()


def test_a_junit_file_without_classnames_does_not_crash_the_report(tmp_path):
    """CPython's regrtest JUnit (results/deb/<lane>/regrtest-*-junit.xml) has test cases without a classname."""
    lane = tmp_path / "deb" / "bookworm-3.11"
    lane.mkdir(parents=True)
    (lane / "regrtest-patched-junit.xml").write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n<testsuites><testsuite name="test_sys" tests="1">'
        '<testcase name="test.test_sys.SysModuleTest.test_exit" status="run" result="completed" time="0.1"/>'
        '</testsuite></testsuites>\n')
    md, page = report.write_report(tmp_path, MATRIX)
    assert md.exists() and page.exists()


# --------------------------------------------------------------------------
# expected skips, the verdict, the plan, the vanilla twin, perf script links

def expected_skip(fact, message="does not apply"):
    return f'<skipped type="pytest.skip" message="{message}">x</skipped>', {report.SKIP_EXPECTED: fact}


def test_a_smoke_cell_whose_only_skips_are_expected_passes(tmp_path):
    """The skips matrix.yaml explains (a mode the cell does not claim, a flag it is not built with) are n/a, not
    missing checks: the cell is passed, not incomplete."""
    jit_skip, jit_props = expected_skip("mode:perf_jit", "3.13-fp claims no perf_jit mode (modes: perf)")
    bp_skip, bp_props = expected_skip("cflag:-mbranch-protection")
    junit(tmp_path / "3.13-fp" / "junit.xml", "\n".join([
        case("test_seed_chain[3.13-fp-perf-xoption]"),
        case("test_perf_jit_periods_around_a_switch[3.13-fp]", "conformance.test_backend_switch_recording",
             jit_skip, props=jit_props),
        case("test_branch_protection_kept[3.13-fp]", "conformance.test_build_shape", bp_skip, props=bp_props),
    ]))
    md, page = report.write_report(tmp_path, MATRIX, renderer="none here")
    rep = report.build_report(MATRIX, report.latest_results(tmp_path))
    assert rep.status("3.13-fp") == "passed"
    assert rep.counts("3.13-fp")["expected"] == 2 and rep.counts("3.13-fp")["skipped"] == 0
    row = [line for line in md.read_text().splitlines() if line.startswith("| 3.13-fp | ")][1]
    assert "n/a" in row and "skip" not in row
    assert "claims no perf_jit mode" not in md.read_text().split("Reasons:")[-1]   # not listed as a missing check
    assert "class='expected'" in page.read_text()


@pytest.mark.parametrize("fact, cell, expected", [
    ("mode:perf_jit", "3.13-fp", True),            # 3.13-fp claims perf only
    ("mode:perf", "3.13-fp", False),               # it claims perf: a skip saying otherwise is a missing check
    ("build_only", "3.13-release-i386", True),
    ("build_only", "3.13-fp", False),
    ("cflag:-mbranch-protection", "3.13-fp", True),
    ("cflag:-fno-omit-frame-pointer", "3.13-fp", False),
    ("configure:--enable-optimizations,--with-lto", "3.13-fp", True),
    ("vanilla", "3.13-fp", False),
    ("vanilla", "3.13-fp-vanilla", True),
    ("foreign", "3.13-fp", False),
    ("nonsense", "3.13-fp", False),                # an unknown fact is never expected
])
def test_expected_skips_are_checked_against_the_matrix(fact, cell, expected):
    assert report.expected_skip(fact, MATRIX.cells[cell], MATRIX) is expected


def test_a_skip_the_matrix_does_not_explain_stays_a_missing_check(tmp_path):
    lie, props = expected_skip("mode:perf", "3.13-fp claims no perf mode")
    junit(tmp_path / "3.13-fp" / "junit.xml", case("test_seed_chain[3.13-fp-perf-xoption]", body=lie, props=props))
    rep = report.build_report(MATRIX, report.latest_results(tmp_path))
    assert rep.status("3.13-fp") == "incomplete"


def plan_json(tmp_path, cells, event="pull_request"):
    import json
    path = tmp_path / report.PLAN_FILE
    path.write_text(json.dumps({"event": event, "selection": {"cells": cells, "why": {}},
                                "cells": [{"cell": c, "execution": "native"} for c in cells]}))
    return path


def test_not_selected_image_failed_and_no_results_are_told_apart(tmp_path):
    junit(tmp_path / "3.13-fp" / "junit.xml", case("test_seed_chain[3.13-fp-perf-xoption]"))
    (tmp_path / "3.11-fp").mkdir()
    (tmp_path / "3.11-fp" / report.MISSING_IMAGES).write_text("image-cell-3.11-fp-0123456789abcdef\n")
    plan_json(tmp_path, ["3.13-fp", "3.11-fp", "3.12-fp"])
    md, page = report.write_report(tmp_path, MATRIX, renderer="none here")
    rep = report.build_report(MATRIX, report.latest_results(tmp_path), report.load_plan(tmp_path / report.PLAN_FILE))
    rep.missing_images, _ = report.cell_files(tmp_path, rep.cells)
    assert rep.status("3.13-fp") == "passed"
    assert rep.status("3.11-fp") == "image failed"
    assert rep.status("3.12-fp") == "no results"
    assert rep.status("3.9-fp") == "not selected"
    text = md.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| 3.11-fp | "))
    assert "image failed: not built: image-cell-3.11-fp-0123456789abcdef" in row
    others = len(MATRIX.cells) - 3
    assert (f"**FAILED: 1 of {len(MATRIX.cells)} cells ran: 1 passed, 0 failed, 0 incomplete; {others} not selected; "
            "2 selected without results (1 image failed)**") in text
    assert "id='verdict'" in page.read_text()


def test_without_a_plan_cells_without_results_are_not_run(tmp_path):
    junit(tmp_path / "3.13-fp" / "junit.xml", case("test_seed_chain[3.13-fp-perf-xoption]"))
    rep = report.build_report(MATRIX, report.latest_results(tmp_path))
    assert rep.status("3.11-fp") == "not run"
    assert rep.verdict() == (f"PASSED: 1 of {len(MATRIX.cells)} cells ran: 1 passed, 0 failed, 0 incomplete; "
                             f"{len(MATRIX.cells) - 1} not run (no plan.json: selection unknown)")


def test_a_broken_plan_is_ignored_with_a_warning(tmp_path, capsys):
    (tmp_path / "plan.json").write_text("{not json")
    assert report.load_plan(tmp_path / "plan.json") is None
    assert "not a plan" in capsys.readouterr().err
    assert report.load_plan(tmp_path / "absent.json") is None


def test_the_header_names_the_results_directory_read(tmp_path):
    junit(tmp_path / "elsewhere" / "3.13-fp" / "junit.xml", case("test_seed_chain[3.13-fp-perf-xoption]"))
    md, page = report.write_report(tmp_path / "elsewhere", MATRIX, renderer="none here")
    where = str((tmp_path / "elsewhere").resolve())
    assert f"from the JUnit files under {where}; no plan.json there" in md.read_text()
    assert where in page.read_text()


def test_each_patched_cell_is_compared_with_its_vanilla_twin(tmp_path):
    checks = ["check_fix_a", "check_fix_b"]
    junit(tmp_path / "3.13-fp" / "junit.xml", "\n".join(
        [case(f"test_check_script[3.13-fp-{c}]", "conformance.test_checks") for c in checks]
        + [case("test_no_new_regrtest_failures[3.13-fp]", "conformance.test_upstream_regression")]))
    junit(tmp_path / "3.13-fp-vanilla" / "junit.xml", "\n".join(
        [case("test_check_script[3.13-fp-vanilla-check_fix_a]", "conformance.test_checks"),
         case("test_check_script[3.13-fp-vanilla-check_fix_b]", "conformance.test_checks",
              '<failure message="did not detect the defect">x</failure>')]))
    rep = report.build_report(MATRIX, report.latest_results(tmp_path))
    text, css = rep.twin("3.13-fp")
    assert text == "3.13-fp-vanilla: 1/2 defects reproduced there, fixed here; CPython tests: no new failure"
    assert css == "failed"
    assert rep.twin("3.13-fp-vanilla")[0].startswith("twin of 3.13-fp")
    assert rep.twin("3.13-release-i386")[0] == "no vanilla twin"
    md = report.render_markdown(rep)
    assert "| vs vanilla twin |" in md.splitlines()[next(i for i, l in enumerate(md.splitlines()) if l.startswith("| cell | status"))]


def test_each_seed_recording_s_perf_script_output_is_linked(tmp_path):
    junit(tmp_path / "3.13-fp" / "junit.xml", case("test_seed_chain[3.13-fp-perf-xoption]"))
    for activation in ("xoption", "env"):
        (tmp_path / "3.13-fp" / suite_results.seed_perf_script_name("perf", activation)).write_text("x\n")
    md, page = report.write_report(tmp_path, MATRIX, renderer="none here")
    row = next(line for line in md.read_text().splitlines() if line.startswith("| 3.13-fp | "))
    assert "[perf env](3.13-fp/seed-perf-env.perf-script.txt), [perf xoption](3.13-fp/seed-perf-xoption.perf-script.txt)" in row
    assert "href='3.13-fp/seed-perf-xoption.perf-script.txt'" in page.read_text()


def test_the_seed_chain_test_saves_what_the_report_links():
    """conformance/test_seed_chain.py names its files with suite_results.seed_perf_script_name, which the
    report's glob finds."""
    import fnmatch
    source = (report.PROJECT_ROOT / "conformance" / "test_seed_chain.py").read_text()
    assert "keep_perf_script(runner, cell, seed_perf_script_name(mode, activation))" in source
    assert fnmatch.fnmatch(suite_results.seed_perf_script_name("perf_jit", "sys_api"), suite_results.SEED_RUN_SCRIPTS)


def test_the_report_job_reads_the_plan_and_keeps_the_perf_script_files():
    import yaml
    root = report.PROJECT_ROOT / ".github" / "workflows"
    steps = yaml.safe_load((root / "matrix.yml").read_text())["jobs"]["report"]["steps"]
    plan = [s for s in steps if s.get("with", {}).get("name") == "plan"]
    assert plan and plan[0]["with"]["path"] == "results", "the report job downloads plan.json into results/"
    upload = steps[-1]["with"]["path"]
    assert "results/*/*.perf-script.txt" in upload
    assert "missing-images.txt" in (root / "cell.yml").read_text() and report.MISSING_IMAGES == "missing-images.txt"

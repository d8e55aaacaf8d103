"""The report's model (cpython_perf.report.model): which cell a testcase belongs to, expected skips, each cell's
status, the verdict, the vanilla twin."""

from __future__ import annotations

import pytest

from cpython_perf.check import suite_results
from cpython_perf.matrix import load_matrix
from cpython_perf.report import junit_results, markdown_page, model, pipeline

from tests.report.junit_files import case, junit

MATRIX = load_matrix()


def cr(name, classname="conformance.test_checks"):
    return junit_results.CaseResult(name=name, classname=classname, outcome="passed")


def test_only_conformance_results_count_for_a_cell(tmp_path):
    """A unit test parametrised by a cell name (tests/...) is not a check of that cell's interpreter."""
    cells = list(MATRIX.cells)
    unit = cr("test_an_x86_cell_on_an_arm64_host_is_a_clear_error[3.13-release-i386]", "tests.test_host_arch")
    assert model.cell_of(unit, cells) == (None, unit.name)
    junit(tmp_path / "tests-junit.xml", "\n".join([
        case("test_an_x86_cell_on_an_arm64_host_is_a_clear_error[3.13-release-i386]", cls="tests.test_host_arch"),
        case("test_seed_chain[3.13-fp-perf-xoption]"),
    ]))
    built = model.build_report(MATRIX, junit_results.latest_results(tmp_path))
    assert built.status("3.13-release-i386") == "not run"
    assert list(built.grid["3.13-fp"]) == ["test_seed_chain[perf-xoption]"]
    assert [c.name for c in built.unbound] == [unit.name]


def test_cell_of_takes_the_longest_cell_name():
    cells = list(MATRIX.cells)
    assert model.cell_of(cr("test_check_script[3.13-fp-vanilla-check_fix_x]"), cells) == (
        "3.13-fp-vanilla", "test_check_script[check_fix_x]")
    assert model.cell_of(cr("test_seed_chain[3.13-fp-perf-xoption]"), cells) == ("3.13-fp", "test_seed_chain[perf-xoption]")
    assert model.cell_of(cr("test_variant_flags[3.13-O0]"), cells) == ("3.13-O0", "test_variant_flags")
    assert model.cell_of(cr("test_parse_ok"), cells) == (None, "test_parse_ok")
    assert model.cell_of(cr("test_parse[some-id]"), cells) == (None, "test_parse[some-id]")
    # a prefix that is not followed by '-' is not a match
    assert model.cell_of(cr("test_x[3.13-fpx]"), cells)[0] is None


@pytest.mark.parametrize("outcome", ["skipped", "failed", "error", "xfailed"])
def test_labels_never_say_pass_for_anything_but_a_pass(outcome):
    assert model.LABEL[outcome] != model.LABEL["passed"]


def expected_skip(fact, message="does not apply"):
    return f'<skipped type="pytest.skip" message="{message}">x</skipped>', {suite_results.SKIP_EXPECTED: fact}


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
    md, page = pipeline.write_report(tmp_path, MATRIX, renderer="none here")
    rep = model.build_report(MATRIX, junit_results.latest_results(tmp_path))
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
    ("configured:--disable-gil", "3.13-ft", True),     # free-threaded: a reader of the GIL build's layout skips
    ("configured:--disable-gil", "3.13-fp", False),
    ("vanilla", "3.13-fp", False),
    ("vanilla", "3.13-fp-vanilla", True),
    ("foreign", "3.13-fp", False),
    ("backend:perf_jit", "3.12-fp", True),         # 3.12 writes no jitdump
    ("backend:perf_jit", "3.13-fp", False),        # 3.13 offers it (its release cells claim it)
    ("nonsense", "3.13-fp", False),                # an unknown fact is never expected
])
def test_expected_skips_are_checked_against_the_matrix(fact, cell, expected):
    assert model.expected_skip(fact, MATRIX.cells[cell], MATRIX) is expected


def test_a_skip_the_matrix_does_not_explain_stays_a_missing_check(tmp_path):
    lie, props = expected_skip("mode:perf", "3.13-fp claims no perf mode")
    junit(tmp_path / "3.13-fp" / "junit.xml", case("test_seed_chain[3.13-fp-perf-xoption]", body=lie, props=props))
    rep = model.build_report(MATRIX, junit_results.latest_results(tmp_path))
    assert rep.status("3.13-fp") == "incomplete"


def test_without_a_plan_cells_without_results_are_not_run(tmp_path):
    junit(tmp_path / "3.13-fp" / "junit.xml", case("test_seed_chain[3.13-fp-perf-xoption]"))
    rep = model.build_report(MATRIX, junit_results.latest_results(tmp_path))
    assert rep.status("3.11-fp") == "not run"
    assert rep.verdict() == (f"PASSED: 1 of {len(MATRIX.cells)} cells ran: 1 passed, 0 failed, 0 incomplete; "
                             f"{len(MATRIX.cells) - 1} not run (no plan.json: selection unknown)")


def test_each_patched_cell_is_compared_with_its_vanilla_twin(tmp_path):
    checks = ["check_fix_a", "check_fix_b"]
    junit(tmp_path / "3.13-fp" / "junit.xml", "\n".join(
        [case(f"test_check_script[3.13-fp-{c}]", "conformance.test_checks") for c in checks]
        + [case("test_no_new_regrtest_failures[3.13-fp]", "conformance.test_upstream_regression")]))
    junit(tmp_path / "3.13-fp-vanilla" / "junit.xml", "\n".join(
        [case("test_check_script[3.13-fp-vanilla-check_fix_a]", "conformance.test_checks"),
         case("test_check_script[3.13-fp-vanilla-check_fix_b]", "conformance.test_checks",
              '<failure message="did not detect the defect">x</failure>')]))
    rep = model.build_report(MATRIX, junit_results.latest_results(tmp_path))
    text, css = rep.twin("3.13-fp")
    assert text == "3.13-fp-vanilla: 1/2 defects reproduced there, fixed here; CPython tests: no new failure"
    assert css == "failed"
    assert rep.twin("3.13-fp-vanilla")[0].startswith("twin of 3.13-fp")
    assert rep.twin("3.13-release-i386")[0] == "no vanilla twin"
    md = markdown_page.render_markdown(rep)
    assert "| vs vanilla twin |" in md.splitlines()[next(i for i, l in enumerate(md.splitlines()) if l.startswith("| cell | status"))]

"""Parsing regrtest's results and comparing a patched build with its vanilla twin (no Docker)."""

from cpython_perf.check import regrtest
from cpython_perf.matrix import load_matrix

JUNIT = """<?xml version="1.0" ?>
<testsuites tests="5" errors="1" failures="1">
  <testsuite name="test_os" tests="3">
    <testcase name="test_a" classname="test.test_os.FileTests" status="run" result="completed"/>
    <testcase name="test_b" classname="test.test_os.FileTests" status="run" result="completed">
      <failure type="AssertionError" message="boom">Traceback ...</failure>
    </testcase>
    <testcase name="test_c" classname="test.test_os.FileTests" status="run" result="completed">
      <skipped>not root</skipped>
    </testcase>
  </testsuite>
  <testsuite name="test_sys" tests="2">
    <testcase name="test_x" classname="test.test_sys.SysModuleTest" status="run" result="completed">
      <error type="RuntimeError" message="bad">Traceback ...</error>
    </testcase>
    <testcase name="test_y" classname="test.test_sys.SysModuleTest" status="run" result="completed"/>
  </testsuite>
</testsuites>
"""

SUMMARY_311 = """
== Tests result: FAILURE ==

5 tests OK.

2 tests failed:
    test_embed test_os

1 test altered the execution environment:
    test_threading

Total duration: 1 min 2 sec
Tests result: FAILURE
"""

SUMMARY_313 = """
== Tests result: FAILURE ==

1 test failed:
    test_capi

1 test crashed:
    test_subprocess

6 tests OK.

Total duration: 3 min 1 sec
Total tests: run=4,321 failures=2 skipped=100
Total test files: run=8/8 failed=2
Result: FAILURE
"""


def test_junit_cases_and_failures():
    result = regrtest.parse_junit(JUNIT)
    assert result.cases == 5 and result.skipped_cases == 1
    assert result.failed_cases == {"test_os.FileTests.test_b", "test_sys.SysModuleTest.test_x"}


def test_summary_failed_and_crashed_modules_only():
    assert regrtest.parse_summary(SUMMARY_311) == {"test_embed", "test_os"}
    assert regrtest.parse_summary(SUMMARY_313) == {"test_capi", "test_subprocess"}
    assert regrtest.parse_summary("== Tests result: SUCCESS ==\n\nAll 7 tests OK.\n") == set()


def test_module_failure_without_a_failing_case_counts():
    result = regrtest.parse_run(JUNIT, SUMMARY_311)
    # test_os has a failing case, test_embed (e.g. crashed at import) has none
    assert result.failures() == {"test_os.FileTests.test_b", "test_sys.SysModuleTest.test_x", "test_embed"}


def test_comparison_reports_only_new_failures():
    vanilla = regrtest.parse_run(JUNIT, "")
    patched = regrtest.parse_run(JUNIT.replace('name="test_y" classname="test.test_sys.SysModuleTest" status="run" '
                                               'result="completed"/>',
                                               'name="test_y" classname="test.test_sys.SysModuleTest" status="run" '
                                               'result="completed"><failure>x</failure></testcase>'),
                                 "")
    comparison = regrtest.Comparison(patched, vanilla)
    assert comparison.new_failures == ["test_sys.SysModuleTest.test_y"]
    assert regrtest.Comparison(vanilla, vanilla).new_failures == []


def test_failures_inside_a_module_that_failed_whole_on_vanilla_are_not_new():
    vanilla = regrtest.parse_run("", SUMMARY_311)          # test_embed failed as a module
    patched = regrtest.parse_run('<testsuites><testcase classname="test.test_embed.X" name="t">'
                                 '<failure/></testcase></testsuites>', "")
    assert regrtest.Comparison(patched, vanilla).new_failures == []


def test_commands_run_in_the_cells_tree():
    cell = load_matrix().cell("3.11-fp")
    command = regrtest.regrtest_command(cell, ["test_sys", "test_os"], "/src/r.xml")
    assert command[:2] == ["sh", "-c"]
    assert command[2].startswith("cd /usr/src/Python-3.11.2 && ./python -m test -j2")
    assert "--junit-xml /src/r.xml test_sys test_os" in command[2]
    assert "test_perf_profiler" in regrtest.shipped_tests_command(cell, ["test_perf_profiler"])[2]


def test_matrix_names_the_regression_tests():
    tests = load_matrix().regression_tests
    assert {"test_sys", "test_embed", "test_capi", "test_cmd_line", "test_threading", "test_os",
            "test_subprocess"} <= set(tests)


def test_case_ids_from_a_name_only_junit_file():
    """regrtest 3.13 puts the whole dotted id in name; the module must still come first."""
    result = regrtest.parse_junit('<testsuites><testcase name="test.test_perf_profiler.TestPerfProfilerWithDwarf.test_x">'
                                  '<failure/></testcase></testsuites>')
    assert result.failed_cases == {"test_perf_profiler.TestPerfProfilerWithDwarf.test_x"}
    vanilla = regrtest.parse_run("", "1 test failed:\n    test_perf_profiler\n")
    assert regrtest.Comparison(result, vanilla).new_failures == []


REQUESTED = ["test_sys", "test_os", "test_perf_profiler"]


def test_a_test_only_the_patched_tree_ships_was_added_by_the_series():
    selection = regrtest.select_tests(REQUESTED, ["test_sys", "test_os", "test_perf_profiler"], ["test_sys", "test_os"])
    assert selection.compared == ("test_sys", "test_os")
    assert selection.added == ("test_perf_profiler",)
    assert selection.dropped == () and selection.not_shipped == ()
    assert selection.patched_tests == ["test_sys", "test_os", "test_perf_profiler"]
    assert selection.vanilla_tests == ["test_sys", "test_os"]
    text = selection.describe("3.11-fp", "3.11-fp-vanilla")
    assert "added by 3.11-fp's series, run in 3.11-fp only, must pass there" in text
    assert "(3.11-fp-vanilla does not ship them): test_perf_profiler" in text


def test_tests_neither_tree_ships_are_left_out_and_tests_the_series_removed_are_named():
    selection = regrtest.select_tests(REQUESTED, ["test_sys"], ["test_sys", "test_os"])
    assert selection.compared == ("test_sys",) and selection.added == ()
    assert selection.dropped == ("test_os",) and selection.not_shipped == ("test_perf_profiler",)
    assert "shipped by neither: test_perf_profiler" in selection.describe("a", "b")
    assert "removed by the series" in selection.describe("a", "b")
    # a 3.13 cell and its twin both ship it: compared like any other
    assert regrtest.select_tests(REQUESTED, REQUESTED, REQUESTED).compared == tuple(REQUESTED)


ADDED_JUNIT = """<testsuites>
  <testcase name="test.test_sys.SysModuleTest.test_y"/>
  <testcase name="test.test_perf_profiler.TestPerfTrampoline.test_trampoline_works"/>
  <testcase name="test.test_perf_profiler.TestPerfTrampoline.test_sys_api"><failure>x</failure></testcase>
  <testcase name="test.test_perf_profiler.TestPerfProfiler.test_pre_fork_compile"><skipped>no ctypes</skipped></testcase>
</testsuites>"""


def test_failures_of_an_added_test_count_without_a_vanilla_baseline():
    patched = regrtest.parse_run(ADDED_JUNIT, "")
    assert patched.module_cases == {"test_sys": 1, "test_perf_profiler": 3}
    assert patched.module_skipped == {"test_perf_profiler": 1}
    assert patched.ran("test_perf_profiler") == 2
    # the twin never runs it; even a vanilla run that named it failed could not excuse it
    vanilla = regrtest.parse_run("<testsuites><testcase name='test.test_sys.SysModuleTest.test_y'/></testsuites>",
                                 "1 test failed:\n    test_perf_profiler\n")
    comparison = regrtest.Comparison(patched, vanilla, added=("test_perf_profiler",))
    assert comparison.new_failures == ["test_perf_profiler.TestPerfTrampoline.test_sys_api"]
    assert comparison.added_failures == ["test_perf_profiler.TestPerfTrampoline.test_sys_api"]
    assert comparison.added_not_run == []
    summary = comparison.summary()
    assert "added by the series, patched only (no vanilla baseline): test_perf_profiler: 3 cases, 1 failures, 1 skipped" \
        in summary
    # without the series' tag the same vanilla module failure would hide it
    assert regrtest.Comparison(patched, vanilla).new_failures == []


def test_an_added_test_that_ran_no_case_does_not_pass():
    skipped_whole = regrtest.parse_run("<testsuites/>", "== Tests result: SUCCESS ==\n\n1 test skipped:\n"
                                                        "    test_perf_profiler\n\nTotal duration: 1 sec\n")
    assert skipped_whole.skipped_modules == {"test_perf_profiler"} and skipped_whole.failures() == set()
    comparison = regrtest.Comparison(skipped_whole, regrtest.RegrtestResult(), added=("test_perf_profiler",))
    assert comparison.added_not_run == ["test_perf_profiler"]
    assert "skipped whole" in comparison.summary()
    # every case skipped (perf not permitted and no trampoline either) is no run
    all_skipped = regrtest.parse_run('<testsuites><testcase name="test.test_perf_profiler.A.t"><skipped/></testcase>'
                                     '</testsuites>', "")
    assert regrtest.Comparison(all_skipped, regrtest.RegrtestResult(),
                               added=("test_perf_profiler",)).added_not_run == ["test_perf_profiler"]
    # a module that crashed is a failure, not a skip
    crashed = regrtest.parse_run("", "1 test crashed:\n    test_perf_profiler\n")
    comparison = regrtest.Comparison(crashed, regrtest.RegrtestResult(), added=("test_perf_profiler",))
    assert comparison.added_not_run == [] and comparison.new_failures == ["test_perf_profiler"]


def test_the_backports_add_cpythons_test_module_of_the_feature():
    matrix = load_matrix()
    assert "test_perf_profiler" in matrix.regression_tests
    for name in ("3.9-fp", "3.11-fp", "3.9-release", "3.11-O0"):
        assert "Lib/test/test_perf_profiler.py" in matrix.cell(name).additions
    assert "Lib/test/test_perf_profiler.py" not in matrix.cell("3.13-fp").additions
    assert matrix.vanilla_twin(matrix.cell("3.11-fp")).additions == ()

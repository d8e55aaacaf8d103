"""Parsing regrtest's results and comparing a patched build with its vanilla twin (no Docker)."""

from cpython_perf import regrtest
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

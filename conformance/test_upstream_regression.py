"""CPython's own regression tests: a patched cell must not fail where its unpatched twin passes.

For every selected patched cell, matrix.yaml's `regression_tests` that both
trees ship run with `./python -m test` in the cell's built tree and in its
vanilla twin's (the pinned source as released, same variant and flags).
Failures are compared test case by test case (cpython_perf.check.regrtest); the
cell fails on any failure that only the patched build has.  A test only the
patched tree ships was added by its series (test_perf_profiler of the 3.9
and 3.11 backports): it runs in the patched tree alone, every failure of it
counts and it must run at least one test case there; the twin's lack of it
is printed and recorded, not an error.  A cell without a vanilla twin in
matrix.yaml is skipped with that reason.

A foreign-arch cell (aarch64, under qemu-user) must pass CPython's test_sys
outright: its sys functions are what the patches add.  A build-only cell
(i386, no trampoline) has no twin either: its test_sys runs outright in
test_build_only.py, which is not marked upstream_regression.

Marked `upstream_regression` (minutes per cell): `nox -s conformance-<cell>`
runs it, `nox -s tests` (CI's smoke run) leaves it out.
"""

from __future__ import annotations

import pytest

from cpython_perf.check import regrtest

from conftest import MATRIX, not_applicable

pytestmark = pytest.mark.upstream_regression
RUN_TIMEOUT = 3600


def _run(runner, cell, tests):
    junit = f"/src/{regrtest.JUNIT_FILE}"
    result = runner.run(regrtest.regrtest_command(cell, tests, junit), timeout=RUN_TIMEOUT)
    output = result.stdout + result.stderr
    junit_file = runner.src / regrtest.JUNIT_FILE
    assert junit_file.exists() or result.exit_code == 0, (
        f"regrtest did not run in {cell.name} (exit {result.exit_code}):\n{output[-4000:]}"
    )
    parsed = regrtest.parse_run(junit_file.read_text() if junit_file.exists() else "", output)
    print(f"--- {cell.name}: regrtest exit {result.exit_code}, {parsed.cases} cases, "
          f"{len(parsed.failures())} failures, {result.seconds:.0f} s")
    print(output[-1500:])
    return parsed


def test_no_new_regrtest_failures(patched_cell, runner_for, record_property):
    cell = patched_cell
    if cell.foreign:
        not_applicable("foreign", f"{cell.name} runs under qemu-user: CPython's test_sys must pass there outright "
                    "(test_foreign_arch_test_sys); the full comparison runs on the native cells")
    if cell.build_only:
        not_applicable("build_only", f"{cell.name} is build-only and has no vanilla twin: CPython's test_sys must pass there "
                    "outright (test_build_only.py::test_cpython_test_sys)")
    twin = MATRIX.vanilla_twin(cell)
    if twin is None:
        not_applicable("twin", f"{cell.name} has no vanilla twin in matrix.yaml (vanilla: true) to compare CPython's tests with")
    if not MATRIX.regression_tests:
        pytest.skip("matrix.yaml lists no regression_tests")
    requested = list(MATRIX.regression_tests)
    patched_runner = runner_for(cell)
    vanilla_runner = runner_for(twin)
    shipped = {}
    for which, runner in ((cell, patched_runner), (twin, vanilla_runner)):
        result = runner.run(regrtest.shipped_tests_command(which, requested), perf=False)
        assert result.exit_code == 0, result.stderr
        shipped[which.name] = result.stdout.split()
    selection = regrtest.select_tests(requested, shipped[cell.name], shipped[twin.name])
    record_property("regression_tests", " ".join(selection.compared))
    record_property("regression_tests_added_by_series", " ".join(selection.added))
    record_property("regression_tests_not_shipped", " ".join(selection.not_shipped))
    print(selection.describe(cell.name, twin.name))
    assert not selection.dropped, (
        f"{cell.name}'s tree lacks tests its unpatched twin {twin.name} ships: {' '.join(selection.dropped)}"
    )
    assert selection.patched_tests, f"{cell.name}'s tree ships none of {requested}"

    patched = _run(patched_runner, cell, selection.patched_tests)
    vanilla = (_run(vanilla_runner, twin, selection.vanilla_tests) if selection.vanilla_tests
               else regrtest.RegrtestResult())
    comparison = regrtest.Comparison(patched, vanilla, added=selection.added)
    record_property("patched_cases", patched.cases)
    record_property("vanilla_cases", vanilla.cases)
    record_property("patched_failures", " ".join(sorted(patched.failures())))
    record_property("vanilla_failures", " ".join(sorted(vanilla.failures())))
    for module in selection.added:
        record_property(f"added_{module}", f"{patched.module_cases.get(module, 0)} cases, "
                                           f"{patched.ran(module)} ran")
    print(comparison.summary())
    print("patched failures:", sorted(patched.failures()))
    print("vanilla failures:", sorted(vanilla.failures()))
    assert patched.cases > 0, f"no test case ran in {cell.name}: {comparison.summary()}"
    assert vanilla.cases > 0 or not selection.vanilla_tests, f"no test case ran in {twin.name}: {comparison.summary()}"
    assert not comparison.added_not_run, (
        f"tests {cell.name}'s series adds ran no test case there (skipped whole?): "
        f"{comparison.added_not_run}\n{comparison.summary()}"
    )
    assert not comparison.new_failures, (
        f"{cell.name} fails CPython tests that pass on {twin.name}, or tests its series adds: "
        f"{comparison.new_failures}\n{comparison.summary()}"
    )


FOREIGN_ARCH_TESTS = ["test_sys"]


def test_foreign_arch_test_sys(patched_cell, runner_for, record_property):
    cell = patched_cell
    if cell.build_only:
        not_applicable("build_only", f"{cell.name} is build-only: its test_sys runs in test_build_only.py::test_cpython_test_sys")
    if not cell.foreign:
        not_applicable("native", f"{cell.name} runs natively: its CPython tests are compared with its vanilla twin")
    parsed = _run(runner_for(cell, perf=False), cell, FOREIGN_ARCH_TESTS)
    record_property("cases", parsed.cases)
    record_property("failures", " ".join(sorted(parsed.failures())))
    assert parsed.cases > 0, f"no test case of {FOREIGN_ARCH_TESTS} ran in {cell.name}"
    assert not parsed.failures(), f"{cell.name} fails {FOREIGN_ARCH_TESTS} under qemu-user: {sorted(parsed.failures())}"

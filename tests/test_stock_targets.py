"""matrix.yaml `stock:`: the distributions' own interpreters the suite is run on (nox -s stock-<name>), read and
checked like the rest of the matrix: each bad entry an error naming its line."""

from __future__ import annotations

import pytest

from cpython_perf.matrix import load_matrix

from .conftest import edit, expect_error

SID_315 = "  sid-3.15:\n    distribution: debian\n"


def test_the_stock_interpreters_and_their_sessions():
    matrix = load_matrix()
    sid = matrix.stock["sid-3.15"]
    assert (sid.suite, sid.version, sid.package, sid.python) == ("sid", "3.15", "python3.15", "/usr/bin/python3.15")
    assert sid.session == "stock-sid-3.15" and sid.modes == ("perf", "perf_jit")
    assert matrix.stock["bookworm-3.11"].perf_suite == "bookworm-backports"
    assert matrix.stock["sid-3.14"].not_given == {"perf": "no-frame-pointers"} and matrix.stock["sid-3.14"].jit
    assert set(matrix.stock["bullseye-3.9"].not_given) == {"perf", "perf_jit"}
    assert "gh-146522" in matrix.stock["sid-3.15"].defects


@pytest.mark.parametrize("old, new, needle, message", [
    (SID_315, "  sid315:\n    distribution: debian\n", "sid315:", "must be named <suite>-<version>"),
    (SID_315, "  sid-3.15:\n    distribution: fedora\n", "distribution: fedora", "is not a key of distributions"),
    (SID_315, SID_315 + "    perf_suite: forky\n", "perf_suite: forky", "must be sid or one of its suites"),
    (SID_315, SID_315 + "    python: python3.15\n", "python: python3.15", "must be an absolute path"),
    ("(PEP 831)\n    modes: [perf, perf_jit]", "(PEP 831)\n    modes: [perf, dwarf]", "modes: [perf, dwarf]",
     "must be a list of"),
    (SID_315, SID_315 + "    pacakge: python3.15\n", "pacakge:", "did you mean 'package'"),
    ("(PEP 831)\n    modes: [perf, perf_jit]", "(PEP 831)\n    modes: [perf_jit]  # only", "modes: [perf_jit]  # only",
     "must say for each mode it does not give (perf) why, in not_given"),
    ("    not_given: {perf: no-frame-pointers}\n    jit: true", "    not_given: {perf: slow}\n    jit: true",
     "not_given: {perf: slow}", "one of no-trampoline, backend-not-available, no-frame-pointers, perf-too-old"),
    ("(PEP 831)\n    modes: [perf, perf_jit]\n    jit: true", "(PEP 831)\n    modes: [perf, perf_jit]\n    jit: 1",
     "jit: 1", "jit of stock.sid-3.15 must be true or false"),
])
def test_a_bad_stock_entry_names_its_line(project_copy, old, new, needle, message):
    edit(project_copy / "matrix.yaml", old, new)
    expect_error(project_copy, needle, message)

"""What a check's failure on an interpreter without the series means (cpython_perf/check/defects.py), and the
catalogue it reads (matrix.yaml defects:): every check script says what it checks, every defect id a script or a
stock target names is described, and a failure is put down to a defect only where every failure line is its."""

from __future__ import annotations

import re

import pytest

from cpython_perf.check import defects
from cpython_perf.matrix import PROJECT_ROOT, load_matrix

from ..conftest import edit, expect_error

SCRIPTS = PROJECT_ROOT / "conformance" / "scripts"

SCRIPT = '''# requires: perf
# checks: behaviour
# hits: gh-146522 /no more code watcher IDs available/
# hits: patches/3.13/0012 /^switch: the dump .* has no code load for first_period/
"""A check."""
'''


def test_every_check_script_says_what_it_checks():
    unsaid = []
    for script in sorted(SCRIPTS.glob("check_*.py")):
        text = script.read_text()
        kinds = re.findall(r"^#\s*checks:\s*(\S+)", text, re.M)
        has_fixes = bool(defects.fixes(text))
        if has_fixes == bool(kinds) or any(k not in ("behaviour", "series") for k in kinds):
            unsaid.append(script.name)
        if defects.hits(text) and has_fixes:
            unsaid.append(f"{script.name} (a reproducer needs no hits:)")
    assert not unsaid, ("each check script has either '# fixes: ID' (a reproducer) or '# checks: behaviour' / "
                        f"'# checks: series': {unsaid}")


def test_every_defect_a_script_or_a_stock_target_names_is_in_the_catalogue():
    matrix = load_matrix()
    named = defects.script_ids(SCRIPTS)
    assert named, "no check script names a defect"
    missing = {d: sorted(s) for d, s in named.items() if d not in matrix.defects}
    assert not missing, f"defect ids the check scripts name that matrix.yaml's defects: does not describe: {missing}"
    for target in matrix.stock.values():
        assert set(target.defects) <= set(matrix.defects)
    unused = set(matrix.defects) - set(named)
    assert not unused, f"defects: entries no check script sees: {sorted(unused)}"


def test_every_defect_a_conformance_test_puts_a_failure_down_to_is_in_the_catalogue():
    named = set()
    for test in sorted((PROJECT_ROOT / "conformance").glob("test_*.py")):
        named |= set(re.findall(r'xfail_if_carried\(\s*\w+,\s*"([^"]+)"', test.read_text()))
    assert named, "no conformance test puts a failure down to a defect"
    assert named <= set(load_matrix().defects), sorted(named - set(load_matrix().defects))


def test_failure_lines_are_the_fail_lines_or_the_last_line():
    assert defects.failure_lines("info\nFAIL:\n  one\n  two\n\nmore\n") == ["one", "two"]
    assert defects.failure_lines("x\nFAIL (gh-1): a\nFAIL (gh-1): b\n") == ["a", "b"]
    assert defects.failure_lines("1 activations\nthe last line\n\n") == ["the last line"]
    aborted = "Fatal Python error: PyMutex_Unlock: unlocking mutex that is not locked\n\nCurrent thread 0x1 (most recent call first):\n"
    assert defects.failure_lines(aborted) == ["Fatal Python error: PyMutex_Unlock: unlocking mutex that is not locked"]


def test_a_failure_is_a_defect_only_where_every_failure_line_is_one_it_carries():
    both = ("gh-146522", "patches/3.13/0012")
    out = "FAIL:\n  switch: the dump (9 bytes) has no code load for first_period; ...\n  x: no more code watcher IDs available\n"
    assert defects.explain(SCRIPT, out, both) == defects.Verdict(("patches/3.13/0012", "gh-146522"), ())
    # a defect the target is not known to carry explains nothing
    verdict = defects.explain(SCRIPT, out, ("gh-146522",))
    assert not verdict.explained and verdict.unexplained == ("switch: the dump (9 bytes) has no code load for first_period; ...",)
    # a new failure next to a known one still fails
    verdict = defects.explain(SCRIPT, out + "  something else broke\n", both)
    assert not verdict.explained and verdict.unexplained == ("something else broke",)
    # a reproducer that fails is its defect's
    assert defects.explain("# fixes: gh-143228\n", "anything", ("gh-143228",)).explained
    assert not defects.explain("# fixes: gh-143228\n", "anything", ()).explained


def test_the_present_text_says_what_it_means_and_where_it_is_fixed():
    matrix = load_matrix()
    d = matrix.defects["gh-146522"]
    text = defects.present_text(d, "3.15.2")
    assert text.startswith("present in 3.15.2: gh-146522: ") and d.means in text and d.patch in text
    unreported = next(x for x in matrix.defects.values() if not x.reported)
    assert "not reported upstream" in defects.present_text(unreported, "3.14.10") and unreported.report


@pytest.mark.parametrize("old, new, needle, message", [
    ("  gh-146522:\n    title:", "  gh-146522:\n    tilte: x\n    title:", "tilte:", "did you mean 'title'"),
    ("    instead: \"`PYTHONPERFSUPPORT=1` (or `PYTHON_PERF_JIT_SUPPORT=1`) in a worker pool's environment\"",
     "    instead: ''", "instead: ''", "instead must be a non-empty string"),
    ("    defects: [gh-146522", "    defects: [gh-999999, gh-146522", "defects: [gh-999999",
     "lists gh-999999, which defects: does not describe"),
])
def test_a_bad_defect_entry_names_its_line(project_copy, old, new, needle, message):
    edit(project_copy / "matrix.yaml", old, new)
    expect_error(project_copy, needle, message)


def test_a_subinterpreter_race_that_crashes_a_stock_interpreter_is_named():
    """On an interpreter as released, a subinterpreter's accepted activation shares the process's trampoline
    state with the main interpreter, which activates and deactivates it at the same moment: faulthandler's line
    (the whole output of such a run, as seen on sid's 3.14.10 in about one run of four) is the defect the
    series' main-interpreter-only patch fixes."""
    script = (SCRIPTS / "check_subinterpreter_refusal_race.py").read_text()
    crashed = ("Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f00bbd596c0 [Thread-1 (run_s] (most "
               "recent call first):\n  File \"<frozen importlib._bootstrap>\", line 1368 in _find_and_load\n")
    assert defects.explain(script, crashed, ("patches/3.13/0014",)) == defects.Verdict(("patches/3.13/0014",), ())
    assert not defects.explain(script, crashed, ()).explained
    # the other signals of a jump into memory that holds no trampoline (any more)
    for fault in ("Bus error", "Illegal instruction"):
        assert defects.explain(script, f"Fatal Python error: {fault}\n", ("patches/3.13/0014",)).explained
    assert not defects.explain(script, "Fatal Python error: Aborted\n", ("patches/3.13/0014",)).explained

"""CPython's own regression tests in a cell's built tree, and their comparison with its vanilla twin.

Every cell image keeps its built tree at /usr/src/Python-X.Y.Z (see
docker/cell.Dockerfile.j2), so `./python -m test` runs there exactly as a
packager runs it after `make`.  The tests to run are matrix.yaml's
`regression_tests`, each taken only where the version ships it (e.g.
test_perf_profiler from 3.12 on).  A patched cell passes when no test case
that passes on its vanilla twin (the same pinned source, unpatched) fails on
it: the backport or the fix series must not break the interpreter.

Failures are read from regrtest's JUnit XML (`--junit-xml`, one <testcase>
per test method) and from its closing summary ("N tests failed:" and the
module names under it), so a test module that crashes before it reports any
test case still counts.
"""

from __future__ import annotations

import re
import shlex
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from .matrix import Cell

JUNIT_FILE = "regrtest-junit.xml"
TIMEOUT_PER_TEST = 1200   # regrtest --timeout: seconds before a hung test module is killed

# "1 test failed:", "3 tests failed:", "2 tests failed again:", "1 test crashed:" ...
_SUMMARY_HEADER = re.compile(r"^(\d+) tests? (failed|crashed|failed again|altered the execution environment.*?|skipped|OK|"
                             r"omitted|run no tests|env changed|re-run tests?|interrupted)[^:\n]*:?\s*$")
_BAD_KINDS = ("failed", "crashed", "failed again")


def tree_dir(cell: Cell) -> str:
    """Where the cell's built tree lives in its image."""
    return f"/usr/src/{cell.recipe.srcdir}"


def shipped_tests_command(cell: Cell, tests: list[str]) -> list[str]:
    """A command printing, one per line, which of tests the cell's tree ships."""
    code = (
        "import os, sys\n"
        "for name in sys.argv[1:]:\n"
        "    base = os.path.join('Lib', 'test', name)\n"
        "    if os.path.isfile(base + '.py') or os.path.isdir(base):\n"
        "        print(name)\n"
    )
    return ["sh", "-c", f"cd {shlex.quote(tree_dir(cell))} && ./python -c {shlex.quote(code)} "
            + " ".join(shlex.quote(t) for t in tests)]


def regrtest_command(cell: Cell, tests: list[str], junit_path: str, jobs: int = 2) -> list[str]:
    """The regrtest command line, run in the cell's built tree."""
    args = ["./python", "-m", "test", f"-j{jobs}", f"--timeout={TIMEOUT_PER_TEST}",
            "--junit-xml", junit_path, *tests]
    return ["sh", "-c", f"cd {shlex.quote(tree_dir(cell))} && {shlex.join(args)}"]


@dataclass
class RegrtestResult:
    """What one regrtest run reported."""

    cases: int = 0                                        # test cases in the JUnit file
    failed_cases: set[str] = field(default_factory=set)   # "module.Class.method" that failed or errored
    failed_modules: set[str] = field(default_factory=set) # modules the summary lists as failed / crashed
    skipped_cases: int = 0

    def failures(self) -> set[str]:
        """Every failure, as test cases, plus modules that failed without a failing case."""
        modules_with_cases = {c.split(".", 1)[0] for c in self.failed_cases}
        return self.failed_cases | {m for m in self.failed_modules if m not in modules_with_cases}


def _case_id(testcase: ET.Element) -> str:
    """module.Class.method: regrtest writes the whole dotted id as name ("test.test_os.FileTests.test_a")
    or splits it into classname and name; the "test." package prefix is dropped either way."""
    classname = testcase.get("classname", "")
    name = testcase.get("name", "")
    case = f"{classname}.{name}" if classname else name
    return case[len("test."):] if case.startswith("test.") else case


def parse_junit(text: str) -> RegrtestResult:
    """Test cases and their failures from regrtest's --junit-xml output."""
    result = RegrtestResult()
    if not text.strip():
        return result
    root = ET.fromstring(text)
    for case in root.iter("testcase"):
        result.cases += 1
        if case.find("failure") is not None or case.find("error") is not None:
            result.failed_cases.add(_case_id(case))
        elif case.find("skipped") is not None:
            result.skipped_cases += 1
    return result


def parse_summary(output: str) -> set[str]:
    """Modules regrtest's closing summary lists as failed, crashed or failed again."""
    failed: set[str] = set()
    kind = None
    for line in output.splitlines():
        header = _SUMMARY_HEADER.match(line.strip())
        if header and not line.startswith((" ", "\t")):
            kind = header.group(2)
            continue
        if kind and line.startswith((" ", "\t")) and line.strip():
            if kind in _BAD_KINDS:
                failed.update(w for w in line.split() if w.startswith("test"))
            continue
        kind = None
    return failed


def parse_run(junit_text: str, output: str) -> RegrtestResult:
    result = parse_junit(junit_text)
    result.failed_modules = parse_summary(output)
    return result


@dataclass
class Comparison:
    patched: RegrtestResult
    vanilla: RegrtestResult

    @property
    def new_failures(self) -> list[str]:
        """Failures of the patched build that the vanilla build does not have."""
        vanilla = self.vanilla.failures()
        vanilla_modules = {f.split(".", 1)[0] for f in vanilla if "." not in f}
        return sorted(f for f in self.patched.failures()
                      if f not in vanilla and f.split(".", 1)[0] not in vanilla_modules)

    def summary(self) -> str:
        return (f"patched: {self.patched.cases} cases, {len(self.patched.failures())} failures; "
                f"vanilla: {self.vanilla.cases} cases, {len(self.vanilla.failures())} failures; "
                f"new in patched: {len(self.new_failures)}")

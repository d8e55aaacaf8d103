"""CPython's own regression tests in a cell's built tree, and their comparison with its vanilla twin.

Every cell image keeps its built tree at /usr/src/Python-X.Y.Z (see
docker/cell.Dockerfile.j2), so `./python -m test` runs there exactly as a
packager runs it after `make`.  The tests to run are matrix.yaml's
`regression_tests`, sorted by which of the two trees ships them
(`select_tests`): a test both ship runs in both and is compared; a test only
the patched tree ships was added by the series (test_perf_profiler, an
addition of the 3.9 and 3.11 backports) and runs there alone, with no
vanilla baseline: every failure of it counts, and it must run at least one
test case (a wholly skipped module proves nothing); a test neither ships
(test_perf_profiler of a 3.10 tree) is left out.  A patched cell passes when
no test case that passes on its vanilla twin (the same pinned source,
unpatched) fails on it, and the tests its series adds pass: the backport or
the fix series must not break the interpreter.

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

from ..matrix import Cell

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


@dataclass(frozen=True)
class TestSelection:
    """Which of matrix.yaml's regression_tests run where, from what each tree ships."""

    compared: tuple[str, ...]      # both trees ship it: run in both, failures compared
    added: tuple[str, ...]         # only the patched tree ships it (the series adds it): run there, must pass
    dropped: tuple[str, ...]       # only the vanilla twin ships it: the series removed a test (an error)
    not_shipped: tuple[str, ...]   # neither tree ships it: left out

    @property
    def patched_tests(self) -> list[str]:
        return [*self.compared, *self.added]

    @property
    def vanilla_tests(self) -> list[str]:
        return list(self.compared)

    def describe(self, patched: str, vanilla: str) -> str:
        def names(tests):
            return " ".join(tests) or "none"
        return (f"compared ({patched} and {vanilla}): {names(self.compared)}; "
                f"added by {patched}'s series, run in {patched} only, must pass there "
                f"({vanilla} does not ship them): {names(self.added)}; "
                f"shipped by neither: {names(self.not_shipped)}"
                + (f"; shipped by {vanilla} only (removed by the series): {names(self.dropped)}"
                   if self.dropped else ""))


def select_tests(requested, patched_shipped, vanilla_shipped) -> TestSelection:
    """Sort the requested tests (in their order) by which tree ships them."""
    patched, vanilla = set(patched_shipped), set(vanilla_shipped)
    return TestSelection(
        compared=tuple(t for t in requested if t in patched and t in vanilla),
        added=tuple(t for t in requested if t in patched and t not in vanilla),
        dropped=tuple(t for t in requested if t in vanilla and t not in patched),
        not_shipped=tuple(t for t in requested if t not in patched and t not in vanilla),
    )


def _module(case: str) -> str:
    return case.split(".", 1)[0]


@dataclass
class RegrtestResult:
    """What one regrtest run reported."""

    cases: int = 0                                        # test cases in the JUnit file
    failed_cases: set[str] = field(default_factory=set)   # "module.Class.method" that failed or errored
    failed_modules: set[str] = field(default_factory=set) # modules the summary lists as failed / crashed
    skipped_cases: int = 0
    skipped_modules: set[str] = field(default_factory=set)  # modules the summary lists as skipped whole
    module_cases: dict[str, int] = field(default_factory=dict)    # module -> test cases in the JUnit file
    module_skipped: dict[str, int] = field(default_factory=dict)  # module -> of those, skipped

    def failures(self) -> set[str]:
        """Every failure, as test cases, plus modules that failed without a failing case."""
        modules_with_cases = {_module(c) for c in self.failed_cases}
        return self.failed_cases | {m for m in self.failed_modules if m not in modules_with_cases}

    def ran(self, module: str) -> int:
        """Test cases of module that ran (not skipped).  A class skipped in setUpClass leaves no case
        in regrtest's JUnit file, so only cases that ran are counted for sure."""
        if module in self.skipped_modules:
            return 0
        return self.module_cases.get(module, 0) - self.module_skipped.get(module, 0)


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
        case_id = _case_id(case)
        module = _module(case_id)
        result.module_cases[module] = result.module_cases.get(module, 0) + 1
        if case.find("failure") is not None or case.find("error") is not None:
            result.failed_cases.add(case_id)
        elif case.find("skipped") is not None:
            result.skipped_cases += 1
            result.module_skipped[module] = result.module_skipped.get(module, 0) + 1
    return result


def _summary_modules(output: str, kinds) -> set[str]:
    """Modules regrtest's closing summary lists under headers of the given kinds."""
    modules: set[str] = set()
    kind = None
    for line in output.splitlines():
        header = _SUMMARY_HEADER.match(line.strip())
        if header and not line.startswith((" ", "\t")):
            kind = header.group(2)
            continue
        if kind and line.startswith((" ", "\t")) and line.strip():
            if kind in kinds:
                modules.update(w for w in line.split() if w.startswith("test"))
            continue
        kind = None
    return modules


def parse_summary(output: str) -> set[str]:
    """Modules regrtest's closing summary lists as failed, crashed or failed again."""
    return _summary_modules(output, _BAD_KINDS)


def parse_skipped_modules(output: str) -> set[str]:
    """Modules regrtest's closing summary lists as skipped whole ("1 test skipped:")."""
    return _summary_modules(output, ("skipped",))


def parse_run(junit_text: str, output: str) -> RegrtestResult:
    result = parse_junit(junit_text)
    result.failed_modules = parse_summary(output)
    result.skipped_modules = parse_skipped_modules(output)
    return result


@dataclass
class Comparison:
    patched: RegrtestResult
    vanilla: RegrtestResult
    # test modules the series adds (TestSelection.added): run in the patched tree only, so they have
    # no vanilla baseline and every failure of theirs counts
    added: tuple[str, ...] = ()

    @property
    def new_failures(self) -> list[str]:
        """Failures of the patched build that the vanilla build does not have, and every failure of
        a test the series adds."""
        vanilla = self.vanilla.failures()
        vanilla_modules = {_module(f) for f in vanilla if "." not in f}
        return sorted(f for f in self.patched.failures()
                      if _module(f) in self.added
                      or (f not in vanilla and _module(f) not in vanilla_modules))

    @property
    def added_failures(self) -> list[str]:
        """Failures of the tests the series adds."""
        return sorted(f for f in self.patched.failures() if _module(f) in self.added)

    @property
    def added_not_run(self) -> list[str]:
        """Tests the series adds that ran no test case in the patched tree (skipped whole, or nothing
        reported): they must run there to prove anything."""
        return [m for m in self.added if self.patched.ran(m) == 0 and m not in self.patched.failed_modules]

    def summary(self) -> str:
        text = (f"patched: {self.patched.cases} cases, {len(self.patched.failures())} failures; "
                f"vanilla: {self.vanilla.cases} cases, {len(self.vanilla.failures())} failures; "
                f"new in patched: {len(self.new_failures)}")
        for module in self.added:
            cases = self.patched.module_cases.get(module, 0)
            failed = sum(1 for f in self.added_failures if _module(f) == module)
            skipped = ("skipped whole" if module in self.patched.skipped_modules
                       else f"{self.patched.module_skipped.get(module, 0)} skipped")
            text += (f"; added by the series, patched only (no vanilla baseline): {module}: "
                     f"{cases} cases, {failed} failures, {skipped}")
        return text

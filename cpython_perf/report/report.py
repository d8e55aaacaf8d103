"""The results report: every cell of matrix.yaml against every check, from the JUnit files.

`nox -s report` (or `python -m cpython_perf report`) reads the latest JUnit XML
files under results/ -- results/<cell>/junit.xml from the conformance-<cell>
sessions, results/tests-junit.xml from `nox -s tests`, any other *.xml there --
and writes results/report.md, results/report.html and one consolidated JUnit
file per cell, results/junit/<cell>.xml (the latest result of each of its
checks, whichever run it came from; not read back as an input):

- rows: every cell of matrix.yaml, also those never run ("not run");
- columns: the checks, i.e. the test function with its parameters less the
  cell (e.g. test_seed_chain[perf-xoption]);
- each entry: pass / FAIL / ERROR / skip (with the reason) / n/a / xfail, or
  "-" where the cell's run did not collect that check.  A skip never shows
  as a pass.  "n/a" is an expected skip: the test said which fact of
  matrix.yaml makes the check not apply to the cell (property skip_expected:
  a mode the cell does not claim, a build-only cell, a backend, CFLAG or
  configure option it is not built with, no vanilla twin, a foreign arch
  emulated on its runner) and the report found that fact true of the cell in
  matrix.yaml (and, for foreign/native, in the run's plan); any other skip is
  a missing check.  A cell is "passed" with no failure, no error and no
  missing check, "incomplete" with missing checks (or xfails) but no failure;
- per cell: durations, the record_property values of each test
  (chain_fraction etc.) and the perf and kernel versions where a test
  recorded them (properties perf_version, kernel_version), and the event perf
  sampled with (property perf_event: perf's default, or cpu-clock where the
  host's probe found that the default gives no sample; cpython_perf.record.perf_event).

Above the tables one verdict line counts the cells that ran, passed, failed
and were incomplete, and those without results: where the run's plan is
known (plan.json in the results directory: the CI report job downloads the
plan job's artifact there), a cell the plan did not select is "not
selected", a selected one whose image was not built (its cell job wrote
results/<cell>/missing-images.txt) is "image failed", and any other selected
cell without results is "no results"; without a plan such a cell is "not
run".  Each patched cell is compared with its vanilla twin (the fix
reproducers that fail there and pass here, CPython's own tests), and the
`perf script` text of each seed recording (results/<cell>/seed-<mode>-
<activation>.perf-script.txt, saved by conformance/test_seed_chain.py) is
linked from the cell's row.  The header names the results directory read.

A testcase belongs to the cell whose name is the longest one of the matrix that
its parametrize id starts with (3.13-fp-vanilla before 3.13-fp).  Testcases
without a cell (the unit tests) are summarised apart.  When several files hold
the same testcase, the newest file (by its testsuite timestamp, else its
modification time) wins.

External interpreters.  Testcases of an external target (an interpreter in an
image that is not a matrix cell: `--image`/`--python`, cpython_perf.check.external,
results/external-<name>/junit.xml) carry the properties external_image and
external_python; they get their own section, one row per (image, python, perf
mode): works (passed) or does not work (skipped, or FAIL where the mode was
expected) with the diagnosed reason, and a line per target summing up its
check scripts.

Packaging lanes.  A deb lane (`nox -s deb-<suite>-<version>`, cpython_perf.lanes.lane_run) writes
results/deb/<lane>[-baseline][-release-grade]/: summary.json (its phases and their times, the checks of
the installed packages, the regrtest comparison with the archive's packages, the problems found) and
CPython's own regrtest JUnit of both package sets (regrtest-<image tag>-junit.xml).  Those JUnit files
are not checks of a cell and never enter the cell tables: the lanes section reads them, with the
summary, one row per lane run, and every lane of matrix.yaml `lanes:` without results is "not run".
A lane passed when its run reached the end with no problem; one with problems failed; one whose
summary stops before the end did not finish (a failure too).  Failed lanes turn the verdict FAILED.

Flame graphs.  Where results/<cell>/seed.perf-script.txt exists (the
`perf script` output of the seed run with the cell's first perf mode, saved by
conformance/test_seed_chain.py), the report renders results/<cell>/
seed-flamegraph.svg with inferno -- the maintained Rust port of FlameGraph
(used by cargo-flamegraph and py-spy): its perf collapser and its SVG
renderer, as Debian's librust-inferno-dev, compiled into the tools image
(cpython_perf.report.flamegraph, docker/flamegraph).  The rendered SVG is then read back:
the report says whether a py::foo frame sits inside a py::bar frame's span,
above it, as the howto's flame graph shows it.  Where there is no input, or
the renderer cannot run, the cell says why instead.
"""

from __future__ import annotations

import html
import json
import os
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from ..matrix import DEFAULT_ARCH, PROJECT_ROOT, Cell, Matrix, load_matrix
from ..record.perf_runs import SEED_SCRIPT
from ..record.perf_samples import py_symbol
from ..check.regrtest import parse_junit as parse_regrtest_junit
from ..check.suite_results import SEED_PERF_SCRIPT, SEED_RUN_SCRIPTS, SKIP_EXPECTED
from ..subcommands import Command, main_of

OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed")
# A cell's status: ran (passed / failed / incomplete) or why it has no results
NO_RESULTS = ("not selected", "image failed", "no results", "not run")
# "expected": a skip whose reason is a fact of matrix.yaml about the cell (property skip_expected), shown n/a
LABEL = {"passed": "pass", "failed": "FAIL", "error": "ERROR", "skipped": "skip", "xfailed": "xfail",
         "expected": "n/a", None: "-", "not run": "not run"}
# perf_event: the sampling event of the host's recordings (cpython_perf.record.perf_event: perf's default, or
# cpu-clock where the default gives no sample), the `event` column
VERSION_PROPERTIES = ("perf_version", "kernel_version", "perf_event")
SEED_FLAMEGRAPH = "seed-flamegraph.svg"
PLAN_FILE = "plan.json"               # the CI run's plan (cpython_perf.ci.plan), downloaded by the report job
MISSING_IMAGES = "missing-images.txt"  # results/<cell>/: the images a selected cell's job could not load
CELL_JUNIT_DIR = "junit"   # results/junit/<cell>.xml: the report's consolidated JUnit file of each cell
LANES_DIR = "deb"          # results/deb/<lane run>/: what a packaging lane wrote (cpython_perf.lanes.lane_run)
LANE_SUMMARY = "summary.json"
LANE_LOGS = ("build.log", "lintian-diff.txt", "checks.log")   # linked from the lane's row where present
FLAME_GRAPH_NOTE = (
    "Seed flame graphs: the perf samples of each cell's seed run (results/<cell>/seed.perf-script.txt, its first "
    "perf mode, -X activation) collapsed and drawn by inferno (Debian's librust-inferno-dev, in the tools image); "
    "each link says whether the SVG shows py::foo inside py::bar's span, above it.")


@dataclass
class CaseResult:
    """One <testcase> of a JUnit file."""

    name: str
    classname: str
    outcome: str
    message: str = ""
    seconds: float = 0.0
    properties: dict[str, str] = field(default_factory=dict)
    source: str = ""
    stamp: float = 0.0

    @property
    def key(self) -> tuple[str, str]:
        return self.classname, self.name

    @property
    def function(self) -> str:
        return self.name.split("[", 1)[0]

    @property
    def param_id(self) -> str | None:
        m = re.fullmatch(r"[^\[]*\[(.*)\]", self.name)
        return m.group(1) if m else None


def _outcome(case: ET.Element) -> tuple[str, str]:
    failure, error, skipped = case.find("failure"), case.find("error"), case.find("skipped")
    if error is not None:
        return "error", error.get("message") or (error.text or "").strip()
    if failure is not None:
        return "failed", failure.get("message") or (failure.text or "").strip()
    if skipped is not None:
        kind = "xfailed" if skipped.get("type") == "pytest.xfail" else "skipped"
        return kind, skipped.get("message") or (skipped.text or "").strip()
    return "passed", ""


def _file_stamp(path: Path, root: ET.Element) -> float:
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    for suite in suites:
        stamp = suite.get("timestamp")
        if stamp:
            try:
                parsed = datetime.fromisoformat(stamp)
            except ValueError:
                continue
            if parsed.tzinfo is None:
                parsed = parsed.astimezone()   # pytest writes local time without a zone
            return parsed.timestamp()
    return path.stat().st_mtime


def parse_junit(path: Path) -> list[CaseResult]:
    """Every testcase of one JUnit XML file (pytest's xunit1 or xunit2)."""
    root = ET.parse(path).getroot()
    stamp = _file_stamp(path, root)
    cases = []
    for case in root.iter("testcase"):
        outcome, message = _outcome(case)
        props = {p.get("name", ""): p.get("value", "") for p in case.iter("property")}
        cases.append(CaseResult(
            name=case.get("name", ""), classname=case.get("classname", ""), outcome=outcome,
            message=message, seconds=float(case.get("time") or 0.0), properties=props,
            source=str(path), stamp=stamp,
        ))
    return cases


def latest_results(results_dir: Path) -> list[CaseResult]:
    """The newest result of every testcase found in the JUnit files under results_dir (not the report's own)."""
    # the report's own output, and the lanes' regrtest files (read by lane_rows, not checks of a cell)
    skipped = (Path(results_dir) / CELL_JUNIT_DIR, Path(results_dir) / LANES_DIR)
    files = [p for p in sorted(Path(results_dir).glob("**/*.xml"))
             if p.is_file() and not any(p.is_relative_to(d) for d in skipped)]
    newest: dict[tuple[str, str], CaseResult] = {}
    for path in files:
        try:
            cases = parse_junit(path)
        except ET.ParseError as exc:
            print(f"warning: {path}: not a JUnit XML file ({exc}); ignored", file=sys.stderr)
            continue
        for case in cases:
            old = newest.get(case.key)
            if old is None or case.stamp >= old.stamp:
                newest[case.key] = case
    return list(newest.values())


# The package whose tests are checks of a cell; a unit test of the driver parametrised by a cell name
# (tests/...) says nothing about that cell's interpreter and never counts for it.
CONFORMANCE_PACKAGE = "conformance"


def cell_of(case: CaseResult, cell_names) -> tuple[str | None, str]:
    """(cell, check) of a conformance testcase: the longest cell name its parametrize id starts with.
    Any other testcase belongs to no cell."""
    pid = case.param_id
    if pid is None or case.classname.split(".", 1)[0] != CONFORMANCE_PACKAGE:
        return None, case.function if pid is None else case.name
    matches = [c for c in cell_names if pid == c or pid.startswith(c + "-")]
    if not matches:
        return None, case.name
    cell = max(matches, key=len)
    rest = pid[len(cell) + 1:]
    return cell, f"{case.function}[{rest}]" if rest else case.function


def expected_skip(fact: str, cell: Cell, matrix: Matrix, job: dict | None = None) -> bool:
    """Whether the fact a test gave for skipping a check (property skip_expected) holds for the cell in
    matrix.yaml: then the check does not apply there and its skip is expected.  job: the cell's job of the
    run's plan, where known (how it ran: natively or emulated).  An unknown or untrue fact is not expected."""
    kind, _, value = fact.partition(":")
    if kind == "mode":              # a perf mode the cell does not claim
        return bool(value) and value not in cell.modes
    if kind == "vanilla":           # an unpatched twin: only fix reproducers run there
        return cell.vanilla
    if kind == "build_only":        # an arch without the perf trampoline (i386)
        return cell.build_only
    if kind == "backends":          # the interpreter offers no perf backend
        return not cell.backends
    if kind == "cflag":             # a flag the cell is not built with
        return bool(value) and value not in cell.cflags.split() and not any(
            f.startswith(value + "=") for f in cell.cflags.split())
    if kind == "configure":         # configure options the cell is built without (any of them)
        options = cell.configure_args()
        return bool(value) and not any(o == v or o.startswith(v + "=") for v in value.split(",") for o in options)
    if kind == "twin":              # no vanilla twin in matrix.yaml
        return matrix.vanilla_twin(cell) is None and not cell.vanilla
    if kind in ("foreign", "native"):   # emulated (qemu) on its runner, or not
        if job is not None:
            return job.get("execution") == ("qemu" if kind == "foreign" else "native")
        return cell.foreign_on(DEFAULT_ARCH) if kind == "foreign" else True
    return False


@dataclass
class Report:
    cells: list[str]
    checks: list[str]
    grid: dict[str, dict[str, CaseResult]]
    unbound: list[CaseResult]
    generated: str
    flamegraphs: dict[str, tuple[str | None, str]] = field(default_factory=dict)  # cell -> (svg path, note)
    retired: int = 0   # results of tests the suite no longer has, left out
    external: list[CaseResult] = field(default_factory=list)   # testcases of external targets
    lanes: list["LaneRow"] = field(default_factory=list)       # packaging lane runs and lanes not run
    matrix: Matrix | None = None
    results_dir: str = "results"     # the directory read, as the header names it
    plan: dict | None = None         # the run's plan (plan.json), where known
    missing_images: dict[str, list[str]] = field(default_factory=dict)   # cell -> images its job lacked
    perf_scripts: dict[str, list[str]] = field(default_factory=dict)     # cell -> seed perf script files

    def plan_job(self, cell: str) -> dict | None:
        if not self.plan:
            return None
        return next((job for job in self.plan.get("cells", []) if job.get("cell") == cell), None)

    def selected(self, cell: str) -> bool | None:
        """Whether the run's plan selected the cell (None: no plan known)."""
        if self.plan is None:
            return None
        return cell in (self.plan.get("selection") or {}).get("cells", [])

    def outcome(self, case: CaseResult, cell: str) -> str:
        """The entry of a check: its outcome, or "expected" for a skip matrix.yaml explains."""
        fact = case.properties.get(SKIP_EXPECTED)
        if case.outcome == "skipped" and fact and self.matrix is not None and cell in self.matrix.cells:
            if expected_skip(fact, self.matrix.cells[cell], self.matrix, self.plan_job(cell)):
                return "expected"
        return case.outcome

    def status(self, cell: str) -> str:
        """passed / failed / incomplete (missing checks, nothing failed) for a cell with results; else
        not selected / image failed / no results (the run's plan known) or not run."""
        results = self.grid.get(cell)
        if not results:
            if self.missing_images.get(cell):
                return "image failed"
            selected = self.selected(cell)
            return "not run" if selected is None else "no results" if selected else "not selected"
        counts = self.counts(cell)
        if counts["failed"] or counts["error"]:
            return "failed"
        if counts["skipped"] or counts["xfailed"]:
            return "incomplete"
        return "passed"

    def counts(self, cell: str) -> Counter:
        return Counter(self.outcome(r, cell) for r in self.grid.get(cell, {}).values())

    def seconds(self, cell: str) -> float:
        return sum(r.seconds for r in self.grid.get(cell, {}).values())

    def versions(self, cell: str) -> dict[str, str]:
        found: dict[str, set[str]] = defaultdict(set)
        for r in self.grid.get(cell, {}).values():
            for name in VERSION_PROPERTIES:
                if r.properties.get(name):
                    found[name].add(r.properties[name])
        return {name: ", ".join(sorted(found[name])) if found[name] else "not recorded" for name in VERSION_PROPERTIES}

    def verdict(self) -> str:
        """One line: the cells that ran and how they ended, and those without results."""
        status = Counter(self.status(cell) for cell in self.cells)
        ran = sum(status[s] for s in ("passed", "failed", "incomplete"))
        missing = status["image failed"] + status["no results"]
        word = ("FAILED" if status["failed"] or missing else "INCOMPLETE" if status["incomplete"]
                else "PASSED" if ran else "NOTHING RAN")
        parts = [f"{ran} of {len(self.cells)} cells ran: {status['passed']} passed, {status['failed']} failed, "
                 f"{status['incomplete']} incomplete"]
        if self.plan is not None:
            parts.append(f"{status['not selected']} not selected")
            parts.append(f"{missing} selected without results"
                         + (f" ({status['image failed']} image failed)" if status["image failed"] else ""))
        else:
            parts.append(f"{status['not run']} not run (no plan.json: selection unknown)")
            if status["image failed"]:
                parts.append(f"{status['image failed']} image failed")
        lanes = Counter(row.status for row in self.lanes)
        if any(lanes[s] for s in LANE_RAN):
            parts.append("packaging lanes: " + ", ".join(f"{lanes[s]} {s}" for s in LANE_RAN if lanes[s]))
            if (lanes["failed"] or lanes["did not finish"]) and word != "FAILED":
                word = "FAILED"
        return f"{word}: " + "; ".join(parts)

    def twin(self, cell: str) -> tuple[str, str]:
        """The cell against its vanilla twin: (text, css class)."""
        if self.matrix is None or cell not in self.matrix.cells:
            return "", "none"
        c = self.matrix.cells[cell]
        if c.vanilla:
            patched = [p for p in self.cells if p in self.matrix.cells and self.matrix.vanilla_twin(self.matrix.cells[p]) is c]
            return f"twin of {', '.join(patched)}" if patched else "vanilla", "none"
        twin = self.matrix.vanilla_twin(c)
        if twin is None:
            return "no vanilla twin", "none"
        mine, theirs = self.grid.get(cell, {}), self.grid.get(twin.name, {})
        if not mine:
            return "", "none"
        regr = next((r for check, r in mine.items() if check.startswith("test_no_new_regrtest_failures")), None)
        regr_text = ""
        if regr is not None:
            regr_text = {"passed": "CPython tests: no new failure", "failed": "CPython tests: NEW failures",
                         "error": "CPython tests: ERROR"}.get(self.outcome(regr, cell), "")
        if not theirs:
            text = f"{twin.name}: no results"
            return (f"{text}; {regr_text}" if regr_text else text), ("failed" if regr and regr.outcome in ("failed", "error") else "incomplete")
        pairs = [check for check in theirs if check.startswith("test_check_script[") and check in mine]
        shown = sum(theirs[p].outcome == "passed" and mine[p].outcome == "passed" for p in pairs)
        broken = [p for p in pairs if mine[p].outcome in ("failed", "error") or theirs[p].outcome in ("failed", "error")]
        text = f"{twin.name}: {shown}/{len(pairs)} defects reproduced there, fixed here"
        if regr_text:
            text += f"; {regr_text}"
        if broken or (regr is not None and regr.outcome in ("failed", "error")):
            return text, "failed"
        return text, "passed" if shown == len(pairs) and (regr is None or regr.outcome == "passed") else "incomplete"


def retired(case: CaseResult, root: Path = PROJECT_ROOT) -> bool:
    """A result of a test the project's suite no longer has (its module is ours, its function is gone).  A test
    case without a classname (CPython's own regrtest JUnit, written by the deb lanes) is never ours."""
    parts = [part for part in case.classname.split(".") if part]
    if not parts:
        return False
    module = root / Path(*parts).with_suffix(".py")
    if not module.is_file():
        return False
    return re.search(rf"^\s*def {re.escape(case.function)}\(", module.read_text(), re.M) is None


def build_report(matrix: Matrix, cases: list[CaseResult], plan: dict | None = None) -> Report:
    cells = list(matrix.cells)
    grid: dict[str, dict[str, CaseResult]] = {c: {} for c in cells}
    unbound, checks, external = [], [], []
    for case in sorted(cases, key=lambda c: (c.classname, c.name)):
        if case.properties.get("external_image"):
            external.append(case)
            continue
        cell, check = cell_of(case, cells)
        if cell is None:
            unbound.append(case)
            continue
        grid[cell][check] = case
        if check not in checks:
            checks.append(check)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    return Report(cells, checks, grid, unbound, now, external=external, matrix=matrix, plan=plan)


def load_plan(path: Path) -> dict | None:
    """The run's plan (python -m cpython_perf plan's JSON), or None where there is none or it is unreadable."""
    try:
        plan = json.loads(Path(path).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        print(f"warning: {path}: not a plan ({exc}); the selection is unknown", file=sys.stderr)
        return None
    if not isinstance(plan, dict) or not isinstance((plan.get("selection") or {}).get("cells"), list):
        print(f"warning: {path}: no selection.cells; the selection is unknown", file=sys.stderr)
        return None
    return plan


def cell_files(results_dir: Path, cells) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(missing images, seed perf script files relative to results_dir) of each cell."""
    missing, scripts = {}, {}
    for cell in cells:
        folder = Path(results_dir) / cell
        marker = folder / MISSING_IMAGES
        if marker.is_file():
            missing[cell] = marker.read_text().split() or ["(unnamed)"]
        found = sorted(folder.glob(SEED_RUN_SCRIPTS)) if folder.is_dir() else []
        if found:
            scripts[cell] = [f"{cell}/{p.name}" for p in found]
    return missing, scripts


# --------------------------------------------------------------------------
# Packaging lanes (cpython_perf.lanes.lane_run)

LANE_RAN = ("passed", "failed", "did not finish", "incomplete")   # a lane run's status; else "not run"
LANE_COLUMNS = ("lane", "status", "package", "phases (s)", "installed packages", "CPython's regrtest",
                "lintian", "logs")


@dataclass
class LaneRow:
    name: str                 # the results directory: <lane>[-baseline][-release-grade]
    status: str               # LANE_RAN or "not run"
    note: str = ""            # the problems, or where the run stopped
    package: str = ""         # source package and version, with what was added
    phases: str = ""
    checks: str = ""          # trampoline and frame pointer of the installed packages
    regrtest: list[str] = field(default_factory=list)   # per regrtest JUnit file, and the comparison
    lintian: str = ""
    logs: list[str] = field(default_factory=list)       # paths relative to the results directory


def _lane_of(name: str, lanes) -> str | None:
    """The matrix lane a results directory belongs to: the longest lane name it starts with."""
    matches = [lane for lane in lanes if name == lane or name.startswith(lane + "-")]
    return max(matches, key=len) if matches else None


def _lane_status(summary: dict) -> tuple[str, str]:
    problems = summary.get("problems") or []
    if problems:
        return "failed", "; ".join(str(p) for p in problems)
    if summary.get("result") != "ok":
        phases = list((summary.get("phases") or {}))
        return "did not finish", (f"the run stopped after its {phases[-1]} phase (see the logs)" if phases
                                  else "the run stopped before its first phase ended")
    if "problems" not in summary:
        return "incomplete", "built; the installed packages were not checked (--no-checks)"
    return "passed", ""


def _regrtest_file_line(path: Path) -> str:
    what = path.name[len("regrtest-"):-len("-junit.xml")]
    try:
        result = parse_regrtest_junit(path.read_text())
    except (OSError, ET.ParseError) as exc:
        return f"{what}: JUnit file unreadable ({_first_line(str(exc))})"
    if not result.cases:
        return f"{what}: no test case in its JUnit file (regrtest did not run: see its .txt output)"
    return (f"{what}: {result.cases} cases, {len(result.failed_cases)} failed, {result.skipped_cases} skipped")


def lane_rows(results_dir: Path, matrix: Matrix | None) -> list[LaneRow]:
    """One row per lane run under results/deb/, then every lane of matrix.yaml without one ("not run")."""
    root = Path(results_dir) / LANES_DIR
    lanes = list(matrix.lanes) if matrix is not None else []
    rows: list[LaneRow] = []
    seen: set[str] = set()
    for run_dir in sorted(d for d in root.glob("*") if d.is_dir()) if root.is_dir() else []:
        name = run_dir.name
        seen.add(_lane_of(name, lanes) or name)
        logs = [str(p.relative_to(results_dir)) for p in
                [*(run_dir / n for n in LANE_LOGS), *sorted(run_dir.glob("regrtest-*.txt"))] if p.is_file()]
        try:
            summary = json.loads((run_dir / LANE_SUMMARY).read_text())
            if not isinstance(summary, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as exc:
            rows.append(LaneRow(name, "did not finish", f"{LANE_SUMMARY} unreadable: {_first_line(str(exc))}",
                                logs=logs))
            continue
        status, note = _lane_status(summary)
        options = summary.get("options") or {}
        added = ("the archive's package alone (baseline)" if options.get("with_series") is False
                 else "with the series")
        added += ", the archive's own build flags" if options.get("release_grade") else ""
        package = f"{summary.get('source_package', '?')} {summary.get('package_version', '?')} {added}"
        phases = ", ".join(f"{k} {v:.0f}" if isinstance(v, (int, float)) else f"{k} {v}"
                           for k, v in (summary.get("phases") or {}).items())
        built = (summary.get("checks") or {}).get("built") or {}
        checks = ""
        if built:
            fp = built.get("frame_pointer") or {}
            checks = (f"-X perf {'activates' if built.get('trampoline_active') else 'does NOT activate'} the "
                      f"trampoline; frame pointer: " + (", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in fp.items())
                                                       or "not found"))
        regr = [_regrtest_file_line(p) for p in sorted(run_dir.glob("regrtest-*-junit.xml"))]
        if (summary.get("regrtest") or {}).get("summary"):
            regr.append("compared: " + summary["regrtest"]["summary"])
        lint = summary.get("lintian") or {}
        lintian = (f"{len(lint.get('new', []))} tags new against the archive's build, {len(lint.get('gone', []))} gone"
                   if lint else "")
        rows.append(LaneRow(name, status, note, package, phases, checks, regr, lintian, logs))
    rows += [LaneRow(lane, "not run", "no results under " + f"{LANES_DIR}/{lane}/ (`nox -s deb-{lane}`)")
             for lane in lanes if lane not in seen]
    return rows


def _lane_css(status: str) -> str:
    return {"did not finish": "failed", "not run": "notrun"}.get(status, status)


def render_lanes_markdown(report: Report) -> list[str]:
    if not report.lanes:
        return []
    out = ["## Packaging lanes", "", "Debian's own source packages with the series added, built with Debian's rules, "
           "installed with apt and checked (`nox -s deb-<lane>`; results/deb/<lane>/).", "",
           "| " + " | ".join(LANE_COLUMNS) + " |", "|" + " --- |" * len(LANE_COLUMNS)]
    for row in report.lanes:
        logs = ", ".join(f"[{Path(p).name}]({p})" for p in row.logs)
        status = row.status + (f": {row.note}" if row.note else "")
        out.append("| " + " | ".join(_md_escape(x) for x in (row.name, status, row.package, row.phases, row.checks,
                                                             "; ".join(row.regrtest), row.lintian)) + f" | {logs} |")
    return out + [""]


def render_lanes_html(report: Report) -> str:
    if not report.lanes:
        return ""
    e = html.escape
    out = ["<h2>Packaging lanes</h2><p>Debian's own source packages with the series added, built with Debian's "
           "rules, installed with apt and checked (<code>nox -s deb-&lt;lane&gt;</code>; results/deb/&lt;lane&gt;/).</p>",
           "<table class='details' id='lanes'><tr>" + "".join(f"<th>{e(c)}</th>" for c in LANE_COLUMNS) + "</tr>"]
    for row in report.lanes:
        status = e(row.status) + (f"<br><small>{e(row.note)}</small>" if row.note else "")
        logs = " ".join(f"<a href='{e(p, quote=True)}'>{e(Path(p).name)}</a>" for p in row.logs)
        out.append(f"<tr><td>{e(row.name)}</td><td class='{_lane_css(row.status)}'>{status}</td>"
                   + "".join(f"<td>{e(x)}</td>" for x in (row.package, row.phases, row.checks))
                   + "<td>" + "<br>".join(e(x) for x in row.regrtest) + f"</td><td>{e(row.lintian)}</td>"
                   + f"<td>{logs}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


# --------------------------------------------------------------------------
# External interpreters (cpython_perf.check.external)

EXTERNAL_MODE_TEST = "test_perf_mode"
EXTERNAL_NOTE = ("Interpreters in images that are not matrix cells (`--image IMAGE --python PATH`, "
                 "cpython_perf.check.external): each perf mode recorded for real with the image's own perf, judged by the "
                 "cells' bars; where a mode does not work, the reason diagnosed from the image (sysconfig, the "
                 "interpreter's answers, objdump of the eval loop, perf's version and permission).")
_REASON_PREFIX = re.compile(r"^\S+ does not work with \S+ in \S+: ")


@dataclass
class ExternalRow:
    image: str
    python: str
    mode: str
    outcome: str          # works / does not work / does not work (expected: FAIL) / ERROR
    reason: str
    seconds: float
    python_version: str = ""
    perf_version: str = ""
    css: str = "passed"


def external_outcome(case: CaseResult) -> tuple[str, str]:
    """(outcome, css class) of an external mode test."""
    if case.outcome == "passed":
        return ("works (caveat)" if case.properties.get("external_caveat") else "works"), "passed"
    if case.outcome == "skipped":
        return "does not work", "skipped"
    if case.outcome == "failed":
        expected = case.properties.get("expected") == "True"
        return ("does not work (expected: FAIL)" if expected else "FAIL"), "failed"
    return LABEL.get(case.outcome, case.outcome), case.outcome


def external_rows(report: Report) -> list[ExternalRow]:
    """One row per (image, python, mode) of the external targets' mode tests."""
    rows = []
    for case in report.external:
        if case.function != EXTERNAL_MODE_TEST:
            continue
        props = case.properties
        outcome, css = external_outcome(case)
        reason = props.get("external_reason") or props.get("external_caveat") or ("" if case.outcome == "passed" else
                                                   _REASON_PREFIX.sub("", _first_line(case.message, 2000)))
        rows.append(ExternalRow(props.get("external_image", ""), props.get("external_python", ""),
                                props.get("mode", case.param_id or ""), outcome, reason, case.seconds,
                                props.get("python_version", ""), props.get("perf_version", ""), css))
    order = {"perf": 0, "perf_jit": 1}
    return sorted(rows, key=lambda r: (r.image, r.python, order.get(r.mode, 9), r.mode))


def external_check_summaries(report: Report) -> dict[tuple[str, str], str]:
    """(image, python) -> "N pass, M FAIL (names), K skip" of the target's other tests (the check scripts)."""
    grouped: dict[tuple[str, str], list[CaseResult]] = defaultdict(list)
    for case in report.external:
        if case.function != EXTERNAL_MODE_TEST:
            grouped[(case.properties.get("external_image", ""), case.properties.get("external_python", ""))].append(case)
    out = {}
    for key, cases in sorted(grouped.items()):
        n = Counter(c.outcome for c in cases)
        bad = [c.param_id.rsplit("-", 1)[-1] if c.param_id else c.name for c in cases if c.outcome in ("failed", "error")]
        parts = [f"{n[k]} {LABEL[k]}" for k in OUTCOMES if n[k]]
        out[key] = ", ".join(parts) + (f" (failed: {', '.join(sorted(bad))})" if bad else "")
    return out


def render_external_markdown(report: Report) -> list[str]:
    rows = external_rows(report)
    if not rows and not report.external:
        return []
    out = ["## External interpreters", "", EXTERNAL_NOTE, "",
           "| image | python | version | perf | mode | outcome | reason | s |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        out.append(f"| {_md_escape(r.image)} | {_md_escape(r.python)} | {r.python_version} | {r.perf_version} | "
                   f"{r.mode} | {r.outcome} | {_md_escape(r.reason)} | {r.seconds:.1f} |")
    summaries = external_check_summaries(report)
    if summaries:
        out += ["", "Check scripts run with the target's interpreter:", ""]
        out += [f"- {_md_escape(image)} {_md_escape(python)}: {_md_escape(text)}" for (image, python), text in summaries.items()]
    return out + [""]


def render_external_html(report: Report) -> str:
    rows = external_rows(report)
    if not rows and not report.external:
        return ""
    e = html.escape
    out = [f"<h2>External interpreters</h2><p>{e(EXTERNAL_NOTE)}</p><table><tr><th>image</th><th>python</th>"
           "<th>version</th><th>perf</th><th>mode</th><th>outcome</th><th>reason</th><th>s</th></tr>"]
    for r in rows:
        out.append(f"<tr><td>{e(r.image)}</td><td>{e(r.python)}</td><td>{e(r.python_version)}</td>"
                   f"<td>{e(r.perf_version)}</td><td>{e(r.mode)}</td><td class='{r.css}'>{e(r.outcome)}</td>"
                   f"<td>{e(r.reason)}</td><td>{r.seconds:.1f}</td></tr>")
    out.append("</table>")
    summaries = external_check_summaries(report)
    if summaries:
        out.append("<p>Check scripts run with the target's interpreter:</p><ul>" +
                   "".join(f"<li>{e(image)} {e(python)}: {e(text)}</li>" for (image, python), text in summaries.items())
                   + "</ul>")
    return "\n".join(out)


def _entry(report: Report, cell: str, check: str) -> tuple[str, CaseResult | None]:
    if not report.grid.get(cell):
        return "not run", None
    case = report.grid[cell].get(check)
    return (report.outcome(case, cell), case) if case else (None, None)


def _script_label(path: str) -> str:
    """seed-perf_jit-env.perf-script.txt -> perf_jit env"""
    name = path.rsplit("/", 1)[-1].removeprefix("seed-").removesuffix(".perf-script.txt")
    mode, _, activation = name.rpartition("-")
    return f"{mode} {activation}" if mode else name


CELL_COLUMNS = ("cell", "status", "pass", "fail", "error", "skip", "n/a", "s", "perf", "kernel", "event",
                "vs vanilla twin", "perf script", "seed flame graph")


def _cell_numbers(report: Report, cell: str) -> list[str]:
    """pass, fail, error, skip (missing checks and xfails), n/a (expected skips), seconds; blank if never run."""
    if not report.grid.get(cell):
        return [""] * 6
    n = report.counts(cell)
    return [str(n["passed"]), str(n["failed"]), str(n["error"]), str(n["skipped"] + n["xfailed"]),
            str(n["expected"]), f"{report.seconds(cell):.1f}"]


def _no_results_note(report: Report, cell: str) -> str:
    status = report.status(cell)
    if status == "image failed":
        return "not built: " + ", ".join(report.missing_images[cell])
    return {"no results": "selected, but no results (its cell job failed before the tests, or its artifact is "
                          "missing)"}.get(status, "")


def _first_line(text: str, limit: int = 200) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _header(report: Report) -> str:
    plan = report.plan
    source = (f"; the run's plan: {plan.get('event', '?')}, {len((plan.get('selection') or {}).get('cells', []))} "
              "cells selected" if plan is not None else "; no plan.json there (the selection is unknown)")
    return (f"Generated {report.generated} from the JUnit files under {report.results_dir}{source}"
            + (f" ({report.retired} results of tests the suite no longer has left out)." if report.retired else "."))


def render_markdown(report: Report) -> str:
    out = ["# cpython-perf results", "", f"**{report.verdict()}**", "", _header(report), ""]
    out += ["## Cells", "", "| " + " | ".join(CELL_COLUMNS) + " |", "|" + " --- |" * len(CELL_COLUMNS)]
    for cell in report.cells:
        v = report.versions(cell)
        ran = bool(report.grid.get(cell))
        versions = [_md_escape(v[k]) if ran else "" for k in VERSION_PROPERTIES]
        svg, note = _flame_note(report, cell)
        flame = f"[svg]({svg}): {_md_escape(note)}" if svg else _md_escape(note)
        twin, _ = report.twin(cell)
        scripts = ", ".join(f"[{_script_label(p)}]({p})" for p in report.perf_scripts.get(cell, []))
        status = report.status(cell)
        note = _no_results_note(report, cell)
        out.append(f"| {cell} | {status}{': ' + _md_escape(note) if note else ''} | " + " | ".join(_cell_numbers(report, cell))
                   + " | " + " | ".join(versions) + f" | {_md_escape(twin)} | {scripts} | {flame} |")
    out += ["", "## Checks", "", "Rows are cells, columns are checks; `-`: not collected in that cell's run; "
            "`n/a`: skipped because matrix.yaml says the check does not apply to the cell.", ""]
    if report.checks:
        notes: list[str] = []
        out.append("| cell | " + " | ".join(_md_escape(c) for c in report.checks) + " |")
        out.append("| --- |" + " --- |" * len(report.checks))
        for cell in report.cells:
            row = []
            for check in report.checks:
                outcome, case = _entry(report, cell, check)
                label = LABEL[outcome]
                if case is not None and outcome not in ("passed", "expected") and case.message:
                    notes.append(f"{cell} {check}: {LABEL[outcome]}: {_first_line(case.message)}")
                    label += f" [{len(notes)}]"
                row.append(label)
            out.append(f"| {cell} | " + " | ".join(row) + " |")
        if notes:
            out += ["", "Reasons:", ""] + [f"{i}. {_md_escape(n)}" for i, n in enumerate(notes, 1)]
    else:
        out.append("No cell results found.")
    out += ["", *render_lanes_markdown(report), *render_external_markdown(report), "## Details", ""]
    for cell in report.cells:
        results = report.grid.get(cell)
        if not results:
            continue
        out += [f"### {cell}", "", "| check | result | s | properties |", "| --- | --- | --- | --- |"]
        for check, case in results.items():
            props = ", ".join(f"{k}={v}" for k, v in case.properties.items())
            out.append(f"| {_md_escape(check)} | {LABEL[report.outcome(case, cell)]} | {case.seconds:.1f} | "
                       f"{_md_escape(props)} |")
        out.append("")
    if report.unbound:
        n = Counter(c.outcome for c in report.unbound)
        out += ["## Tests without a cell (unit tests)", "",
                ", ".join(f"{n[k]} {LABEL[k]}" for k in OUTCOMES if n[k]) +
                f"; {sum(c.seconds for c in report.unbound):.1f} s", ""]
        for case in report.unbound:
            if case.outcome != "passed":
                out.append(f"- {case.classname}::{case.name}: {LABEL[case.outcome]}: {_md_escape(_first_line(case.message))}")
        out.append("")
    out += ["## Flame graphs", "",
            FLAME_GRAPH_NOTE, ""]
    return "\n".join(out)


# The page fits a 1400-px window without horizontal scrolling (tests/report/test_report_browser.py): the cells
# table wraps its text anywhere rather than widen the page; the checks grid scrolls inside its own box.
_CSS = """
body{font-family:sans-serif;font-size:14px;margin:8px} table{border-collapse:collapse;margin-bottom:1em}
td,th{border:1px solid #bbb;padding:2px 6px;vertical-align:top;overflow-wrap:anywhere} th{background:#eee}
table.cells,table.details{max-width:100%} table.cells td,table.cells th{font-size:13px}
.verdict{font-size:16px;font-weight:bold;padding:4px 8px;display:inline-block}
.passed,.PASSED{background:#cfc}.failed,.error,.FAILED,.imagefailed,.noresults{background:#f99}
.skipped,.xfailed,.incomplete,.INCOMPLETE{background:#ffd27f}.expected{background:#e8f0e8;color:#555}
.notrun,.notselected,.NOTHING{background:#ddd;color:#555}.none{color:#999}
.wide{overflow-x:auto;max-width:100%}
"""


def _css_class(status: str) -> str:
    return status.replace(" ", "").replace("/", "")


def render_html(report: Report) -> str:
    e = html.escape
    verdict = report.verdict()
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>cpython-perf results</title>",
           f"<style>{_CSS}</style></head><body>", "<h1>cpython-perf results</h1>",
           f"<p class='verdict {e(verdict.split(':', 1)[0].split()[0])}' id='verdict'>{e(verdict)}</p>",
           f"<p>{e(_header(report))}</p>",
           "<h2>Cells</h2><table class='cells' id='cells'><tr>" + "".join(f"<th>{e(c)}</th>" for c in CELL_COLUMNS) + "</tr>"]
    for cell in report.cells:
        status, v = report.status(cell), report.versions(cell)
        ran = bool(report.grid.get(cell))
        note = _no_results_note(report, cell)
        nums = "".join(f"<td>{x}</td>" for x in _cell_numbers(report, cell))
        nums += "".join(f"<td>{e(v[k]) if ran else ''}</td>" for k in VERSION_PROPERTIES)
        twin, twin_css = report.twin(cell)
        nums += f"<td class='{twin_css}'>{e(twin)}</td>"
        nums += "<td>" + " ".join(f"<a href='{e(p, quote=True)}'>{e(_script_label(p))}</a>"
                                  for p in report.perf_scripts.get(cell, [])) + "</td>"
        svg, flame = _flame_note(report, cell)
        nums += f"<td><a href='{e(svg, quote=True)}'>svg</a>: {e(flame)}</td>" if svg else f"<td>{e(flame)}</td>"
        label = e(status) + (f"<br><small>{e(note)}</small>" if note else "")
        out.append(f"<tr><td>{e(cell)}</td><td class='{_css_class(status)}'>{label}</td>{nums}</tr>")
    out.append("</table><h2>Checks</h2><div class='wide'><table><tr><th>cell</th>" +
               "".join(f"<th>{e(c)}</th>" for c in report.checks) + "</tr>")
    for cell in report.cells:
        cells = []
        for check in report.checks:
            outcome, case = _entry(report, cell, check)
            cls = {"not run": _css_class(report.status(cell)), None: "none"}.get(outcome, outcome)
            title = ""
            if case is not None:
                bits = [f"{case.seconds:.1f} s"] + [f"{k}={v}" for k, v in case.properties.items()]
                if case.message and outcome != "passed":
                    bits.append(_first_line(case.message, 500))
                title = f" title='{e('; '.join(bits), quote=True)}'"
            text = LABEL[outcome] if outcome != "not run" else e(report.status(cell))
            if case is not None and outcome in ("skipped", "xfailed", "failed", "error") and case.message:
                text += f"<br><small>{e(_first_line(case.message, 160))}</small>"
            elif case is not None and "chain_fraction" in case.properties:
                text += f"<br><small>{e(case.properties['chain_fraction'])}</small>"
            cells.append(f"<td class='{cls}'{title}>{text}</td>")
        out.append(f"<tr><td>{e(cell)}</td>{''.join(cells)}</tr>")
    out.append("</table></div>")
    out.append(render_lanes_html(report))
    out.append(render_external_html(report))
    out.append("<h2>Details</h2>")
    for cell in report.cells:
        results = report.grid.get(cell)
        if not results:
            continue
        out.append(f"<h3>{e(cell)}</h3><table class='details'><tr><th>check</th><th>result</th><th>s</th><th>properties</th><th>message</th></tr>")
        for check, case in results.items():
            props = ", ".join(f"{k}={v}" for k, v in case.properties.items())
            msg = _first_line(case.message, 500) if case.outcome != "passed" else ""
            outcome = report.outcome(case, cell)
            out.append(f"<tr><td>{e(check)}</td><td class='{outcome}'>{LABEL[outcome]}</td>"
                       f"<td>{case.seconds:.1f}</td><td>{e(props)}</td><td>{e(msg)}</td></tr>")
        out.append("</table>")
    if report.unbound:
        n = Counter(c.outcome for c in report.unbound)
        out.append("<h2>Tests without a cell (unit tests)</h2><p>" +
                   e(", ".join(f"{n[k]} {LABEL[k]}" for k in OUTCOMES if n[k])) + "</p><ul>")
        for case in report.unbound:
            if case.outcome != "passed":
                out.append(f"<li>{e(case.classname)}::{e(case.name)}: {LABEL[case.outcome]}: {e(_first_line(case.message))}</li>")
        out.append("</ul>")
    out.append(f"<h2>Flame graphs</h2><p>{e(FLAME_GRAPH_NOTE)}</p></body></html>")
    return "\n".join(out)


_SVG_FRAME = re.compile(r'<title>(?P<name>[^<]*?) \([\d,]+ samples?[^<]*</title>\s*<rect [^>]*?y="(?P<y>[\d.]+)"'
                        r'[^>]*?fg:x="(?P<x>\d+)" fg:w="(?P<w>\d+)"')
SEED_NESTING = (py_symbol("foo", SEED_SCRIPT), py_symbol("bar", SEED_SCRIPT))   # (callee, caller)


def svg_frames(svg_text: str) -> list[tuple[str, float, int, int]]:
    """The frames of an inferno flame graph: (name, y, first sample, sample count); the root is at the bottom."""
    return [(html.unescape(m.group("name")), float(m.group("y")), int(m.group("x")), int(m.group("w")))
            for m in _SVG_FRAME.finditer(svg_text)]


def svg_nests(svg_text: str, inner: str, outer: str) -> bool:
    """Whether some frame named inner lies within the span of a frame named outer, above it (a callee)."""
    frames = svg_frames(svg_text)
    outers = [(y, x, w) for name, y, x, w in frames if name == outer]
    return any(iy < oy and ox <= ix and ix + iw <= ox + ow
               for name, iy, ix, iw in frames if name == inner for oy, ox, ow in outers)


def render_flamegraphs(results_dir: Path, cells, renderer) -> dict[str, tuple[str | None, str]]:
    """Render results/<cell>/seed.perf-script.txt to seed-flamegraph.svg where it exists.

    renderer(perf_script, svg, title) draws the SVG or raises with the reason;
    a string instead of a renderer says why none could be had.
    """
    out: dict[str, tuple[str | None, str]] = {}
    for cell in cells:
        source = results_dir / cell / SEED_PERF_SCRIPT
        if not source.is_file():
            continue
        svg = results_dir / cell / SEED_FLAMEGRAPH
        if not callable(renderer):
            out[cell] = (None, f"no renderer: {renderer}")
            continue
        try:
            renderer(source, svg, f"{cell}: the seed script")
        except Exception as exc:
            svg.unlink(missing_ok=True)
            out[cell] = (None, f"renderer failed: {_first_line(str(exc))}")
            continue
        inner, outer = SEED_NESTING
        shown = svg_nests(svg.read_text(errors="replace"), inner, outer)
        out[cell] = (f"{cell}/{SEED_FLAMEGRAPH}",
                     f"{inner} under {outer}" if shown else f"does NOT show {inner} under {outer}")
    return out


def default_renderer(matrix: Matrix):
    """inferno in the tools image; or, where Docker is not available, the reason."""
    from .. import host
    from ..errors import DockerUnavailable
    from .flamegraph import render_flamegraph

    try:
        client = host.docker_client()
    except DockerUnavailable as exc:
        return f"Docker is not available for the tools image ({_first_line(str(exc))})"
    return lambda source, svg, title: render_flamegraph(client, matrix, source, svg, title, log=lambda s: None)


def _flame_note(report: Report, cell: str) -> tuple[str | None, str]:
    if cell in report.flamegraphs:
        return report.flamegraphs[cell]
    return None, "no seed perf script output" if report.grid.get(cell) else ""


def cell_junit(report: Report, cell: str) -> ET.ElementTree:
    """One JUnit file of a cell: the latest result of each of its checks, whatever run it came from.

    A cell never run has no testcase; its suite says so in the property `status`.
    """
    results = report.grid.get(cell, {})
    counts = report.counts(cell)
    suite = ET.Element("testsuite", name=cell, tests=str(len(results)), failures=str(counts["failed"]),
                       errors=str(counts["error"]), skipped=str(counts["skipped"] + counts["xfailed"] + counts["expected"]),
                       time=f"{report.seconds(cell):.3f}",
                       timestamp=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    props = ET.SubElement(suite, "properties")
    svg, note = _flame_note(report, cell)
    for name, value in [("status", report.status(cell)), ("expected_skips", str(counts["expected"])),
                        *report.versions(cell).items(),
                        ("seed_flamegraph", svg or ""), ("seed_flamegraph_note", note)]:
        ET.SubElement(props, "property", name=name, value=value)
    for check, case in sorted(results.items()):
        element = ET.SubElement(suite, "testcase", classname=case.classname, name=case.name,
                                time=f"{case.seconds:.3f}", file=case.source)
        if case.properties:
            case_props = ET.SubElement(element, "properties")
            for name, value in case.properties.items():
                ET.SubElement(case_props, "property", name=name, value=value)
        tag = {"failed": "failure", "error": "error", "skipped": "skipped", "xfailed": "skipped"}.get(case.outcome)
        if tag:
            ET.SubElement(element, tag, message=case.message[:2000],
                          **({"type": "pytest.xfail"} if case.outcome == "xfailed" else {}))
    root = ET.Element("testsuites", name=f"cpython-perf {cell}")
    root.append(suite)
    return ET.ElementTree(root)


def write_report(results_dir: Path, matrix: Matrix | None = None, renderer=None,
                 plan: Path | None = None) -> tuple[Path, Path]:
    """results_dir/report.md and report.html (and results_dir/junit/<cell>.xml).  plan: the run's plan
    (default: results_dir/plan.json where it exists)."""
    results_dir = Path(results_dir)
    matrix = matrix or load_matrix()
    cases = latest_results(results_dir)
    current = [c for c in cases if not retired(c)]
    report = build_report(matrix, current, load_plan(plan or results_dir / PLAN_FILE))
    report.retired = len(cases) - len(current)
    report.results_dir = str(results_dir.resolve())
    report.missing_images, report.perf_scripts = cell_files(results_dir, report.cells)
    report.lanes = lane_rows(results_dir, matrix)
    report.flamegraphs = render_flamegraphs(results_dir, report.cells, renderer or default_renderer(matrix))
    results_dir.mkdir(parents=True, exist_ok=True)
    junit_dir = results_dir / CELL_JUNIT_DIR
    junit_dir.mkdir(exist_ok=True)
    for cell in report.cells:
        cell_junit(report, cell).write(junit_dir / f"{cell}.xml", encoding="utf-8", xml_declaration=True)
    md, page = results_dir / "report.md", results_dir / "report.html"
    md.write_text(render_markdown(report) + skipped_markdown(results_dir))
    page.write_text(with_skipped_html(render_html(report), results_dir))
    return md, page


# --------------------------------------------------------------------------
# Cells a buildbot run did not run: results/skipped.json ({cell: why}), written by the master's `matrix`
# build (cpython_perf/ci/buildbot_steps.py) beside the run's uploads.

SKIPPED_FILE = "skipped.json"


def skipped_cells(results_dir: Path) -> dict[str, str]:
    import json

    try:
        data = json.loads((Path(results_dir) / SKIPPED_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def skipped_markdown(results_dir: Path) -> str:
    skipped = skipped_cells(results_dir)
    if not skipped:
        return ""
    return "\n".join(["", "## Not run", "", "Cells of this run that were not run, and why.", "",
                      "| cell | why |", "| --- | --- |",
                      *(f"| {cell} | not run: {_md_escape(why)} |" for cell, why in sorted(skipped.items())), ""])


def with_skipped_html(page: str, results_dir: Path) -> str:
    skipped = skipped_cells(results_dir)
    if not skipped:
        return page
    e = html.escape
    section = ("<h2>Not run</h2><p>Cells of this run that were not run, and why.</p><table><tr><th>cell</th>"
               "<th>why</th></tr>" + "".join(f"<tr><td>{e(cell)}</td><td class='notrun'>not run: {e(why)}</td></tr>"
                                              for cell, why in sorted(skipped.items())) + "</table>")
    at = page.rfind("</body>")
    return page[:at] + section + page[at:] if at >= 0 else page + section


def add_arguments(parser) -> None:
    parser.add_argument("--results", default=os.environ.get("CPYTHON_PERF_RESULTS") or str(PROJECT_ROOT / "results"),
                        help="directory holding the JUnit files (default: $CPYTHON_PERF_RESULTS, else results/)")
    parser.add_argument("--plan", default=None,
                        help=f"the run's plan (python -m cpython_perf plan's JSON; default: {PLAN_FILE} in the "
                             "results directory, where it exists): tells cells not selected from selected ones "
                             "without results")


def _run_command(args) -> None:
    md, page = write_report(Path(args.results), plan=Path(args.plan) if args.plan else None)
    print(f"read {Path(args.results).resolve()}; wrote {md} and {page}")


COMMAND = Command("report", "results/report.md and results/report.html from the latest JUnit files of a run "
                            "(cpython_perf/report/report.py)", add_arguments, _run_command,
                  description=__doc__.splitlines()[0])


def main(argv=None) -> int:
    return main_of(COMMAND, argv, prog="python -m cpython_perf.report")


if __name__ == "__main__":
    sys.exit(main())

"""The report's model: each testcase placed in its cell's row and its check's column, each cell's status
(passed, failed, incomplete, or why it has no results), the verdict over all cells, and each cell against its
vanilla twin."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone

from ..check.suite_results import SKIP_EXPECTED
from ..arches import DEFAULT_ARCH
from ..matrix import Cell, Matrix
from .packaging_lanes import LANE_RAN, LaneRow
from .junit_results import CaseResult

OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed")
# A cell's status: ran (passed / failed / incomplete) or why it has no results
NO_RESULTS = ("not selected", "image failed", "no results", "not run")
# "expected": a skip whose reason is a fact of matrix.yaml about the cell (property skip_expected), shown n/a
LABEL = {"passed": "pass", "failed": "FAIL", "error": "ERROR", "skipped": "skip", "xfailed": "xfail",
         "expected": "n/a", None: "-", "not run": "not run"}
# perf_event: the sampling event of the host's recordings (cpython_perf.record.perf_event: perf's default, or
# cpu-clock where the default gives no sample), the `event` column
VERSION_PROPERTIES = ("perf_version", "kernel_version", "perf_event")
CELL_COLUMNS = ("cell", "status", "pass", "fail", "error", "skip", "n/a", "s", "perf", "kernel", "event",
                "vs vanilla twin", "perf script", "seed flame graph")

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
    if kind == "backend":           # the interpreter does not offer this one
        return bool(value) and value not in cell.backends
    if kind == "cflag":             # a flag the cell is not built with
        return bool(value) and value not in cell.cflags.split() and not any(
            f.startswith(value + "=") for f in cell.cflags.split())
    if kind == "configure":         # configure options the cell is built without (any of them)
        options = cell.configure_args()
        return bool(value) and not any(o == v or o.startswith(v + "=") for v in value.split(",") for o in options)
    if kind == "configured":        # a configure option the cell is built with (--disable-gil)
        options = cell.configure_args()
        return bool(value) and any(o == value or o.startswith(value + "=") for o in options)
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
    lanes: list[LaneRow] = field(default_factory=list)       # packaging lane runs and lanes not run
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

    def entry(self, cell: str, check: str) -> tuple[str, CaseResult | None]:
        """The outcome of a check in a cell's row (None: not collected there; "not run": the cell has no results),
        and its testcase."""
        if not self.grid.get(cell):
            return "not run", None
        case = self.grid[cell].get(check)
        return (self.outcome(case, cell), case) if case else (None, None)

    def cell_numbers(self, cell: str) -> list[str]:
        """pass, fail, error, skip (missing checks and xfails), n/a (expected skips), seconds; blank if never run."""
        if not self.grid.get(cell):
            return [""] * 6
        n = self.counts(cell)
        return [str(n["passed"]), str(n["failed"]), str(n["error"]), str(n["skipped"] + n["xfailed"]),
                str(n["expected"]), f"{self.seconds(cell):.1f}"]

    def no_results_note(self, cell: str) -> str:
        status = self.status(cell)
        if status == "image failed":
            return "not built: " + ", ".join(self.missing_images[cell])
        return {"no results": "selected, but no results (its cell job failed before the tests, or its artifact is "
                              "missing)"}.get(status, "")

    def flamegraph(self, cell: str) -> tuple[str | None, str]:
        """(the seed flame graph's path, what it shows or why there is none) of a cell."""
        if cell in self.flamegraphs:
            return self.flamegraphs[cell]
        return None, "no seed perf script output" if self.grid.get(cell) else ""

    def header(self) -> str:
        plan = self.plan
        source = (f"; the run's plan: {plan.get('event', '?')}, {len((plan.get('selection') or {}).get('cells', []))} "
                  "cells selected" if plan is not None else "; no plan.json there (the selection is unknown)")
        return (f"Generated {self.generated} from the JUnit files under {self.results_dir}{source}"
                + (f" ({self.retired} results of tests the suite no longer has left out)." if self.retired else "."))


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

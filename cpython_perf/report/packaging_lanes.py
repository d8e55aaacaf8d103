"""The packaging lanes' runs (cpython_perf.lanes.lane_run) under results/deb/: one row per run, from its
summary.json and CPython's regrtest JUnit files, and every lane of matrix.yaml without a run."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from ..check.regrtest import parse_junit as parse_regrtest_junit
from ..matrix import Matrix
from .messages import first_line
from .results_files import LANES_DIR

LANE_SUMMARY = "summary.json"
LANE_LOGS = ("build.log", "lintian-diff.txt", "checks.log")   # linked from the lane's row where present
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
        return f"{what}: JUnit file unreadable ({first_line(str(exc))})"
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
            rows.append(LaneRow(name, "did not finish", f"{LANE_SUMMARY} unreadable: {first_line(str(exc))}",
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

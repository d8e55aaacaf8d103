"""The testcases of a run's JUnit files: each parsed into a CaseResult, the newest result of each kept, and the
results of tests the suite no longer has told apart."""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ..matrix import PROJECT_ROOT
from .results_files import CELL_JUNIT_DIR, LANES_DIR


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

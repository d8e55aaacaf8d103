"""The external targets' rows (interpreters in images that are not matrix cells, cpython_perf.check.external):
one per (image, python, perf mode), and a line per target summing up its check scripts."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from .junit_results import CaseResult
from .messages import first_line
from .model import LABEL, OUTCOMES, Report

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
                                                   _REASON_PREFIX.sub("", first_line(case.message, 2000)))
        mode = props.get("mode", case.param_id or "") + (" (PYTHON_JIT=1)" if props.get("jit") == "True" else "")
        rows.append(ExternalRow(props.get("external_image", ""), props.get("external_python", ""),
                                mode, outcome, reason, case.seconds,
                                props.get("python_version", ""), props.get("perf_version", ""), css))
    order = {"perf": 0, "perf (PYTHON_JIT=1)": 1, "perf_jit": 2, "perf_jit (PYTHON_JIT=1)": 3}
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


def external_defects(report: Report) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(image, python) -> [(defect ids, what the xfail says: present in <version>: ...)], once per finding, of the
    checks a catalogued defect explained on an interpreter without the series."""
    found: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for case in report.external:
        ids = case.properties.get("defect_present")
        if case.outcome != "xfailed" or not ids:
            continue
        key = (case.properties.get("external_image", ""), case.properties.get("external_python", ""))
        found[key].setdefault(ids, first_line(case.message, 2000))
    return {key: sorted(texts.items()) for key, texts in sorted(found.items())}

"""results/junit/<cell>.xml: one JUnit file per cell, the latest result of each of its checks, whichever run it came
from (an output of the report, never read back as an input)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import datetime, timezone

from .model import Report


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
    svg, note = report.flamegraph(cell)
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

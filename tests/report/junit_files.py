"""JUnit files as pytest writes them, for the report's tests (a conformance testcase by default)."""

from __future__ import annotations

from pathlib import Path


def junit(path: Path, cases: str, timestamp: str = "2026-11-22T08:00:00.000000+00:00") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<testsuites><testsuite name="pytest" errors="0" failures="0" skipped="0" tests="1" time="1.0" '
        f'timestamp="{timestamp}" hostname="h">\n{cases}\n</testsuite></testsuites>\n'
    )
    return path


def case(name, cls="conformance.test_seed_chain", body="", time="1.5", props=None):
    properties = ""
    if props:
        properties = "<properties>" + "".join(f'<property name="{k}" value="{v}"/>' for k, v in props.items()) + "</properties>"
    return f'<testcase classname="{cls}" name="{name}" time="{time}">{properties}{body}</testcase>'


SKIP = '<skipped type="pytest.skip" message="3.12-fp: source not available here">conftest.py:99: 3.12-fp: source not available here</skipped>'
FAIL = '<failure message="AssertionError: chain broken (perf, xoption)">trace</failure>'

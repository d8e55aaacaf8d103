"""The check scripts' `# records: perf` header (conformance/test_checks.py): a script that runs perf record
itself cannot work under qemu-user, and on a foreign-arch cell it is skipped saying so rather than failing
with perf's own last line of output as its reason.  The header must be on exactly the scripts that record."""

from __future__ import annotations

import re

from cpython_perf.matrix import PROJECT_ROOT

SCRIPTS = PROJECT_ROOT / "conformance" / "scripts"
HEADER = re.compile(r"^#\s*records:\s*perf\b", re.M)
# childcheck's helper that records, or a perf record command line of the script's own
RECORDS = re.compile(r"\bperf_record_program\(|\[\s*\"perf\",\s*\"record\"")


def test_records_header_marks_exactly_the_scripts_that_record():
    scripts = sorted(SCRIPTS.glob("check_*.py"))
    assert scripts
    recording = {p.name for p in scripts if RECORDS.search(p.read_text())}
    marked = {p.name for p in scripts if HEADER.search(p.read_text())}
    assert recording, "no check script records with perf: the pattern no longer matches how they do it"
    assert marked == recording, (f"records with perf but has no '# records: perf': {sorted(recording - marked)}; "
                                 f"marked but does not record: {sorted(marked - recording)}")

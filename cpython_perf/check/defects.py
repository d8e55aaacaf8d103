"""What a check script's failure on an interpreter without the series means: a catalogued defect of CPython as
released, or a failure of the check.

A check script says what it checks in its header:
  # fixes: gh-NNN              a reproducer: it fails (exit 1) wherever the defect is present;
  # hits: ID /REGEX/           a check of behaviour any interpreter must have, whose failure on an
                               interpreter without the series the defect ID explains when a line of
                               what it printed matches REGEX (one line per defect and form);
  # checks: series             a feature only the series has (skipped, with the reason, elsewhere).
IDs are keys of matrix.yaml's `defects:`.  A stock target lists the defects it is known to carry; a
failure is put down to a defect only where every failure line the check printed is explained by a
defect of that list (or, for an interpreter of an image matrix.yaml does not describe, of the catalogue),
so a new failure next to a known one still fails.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..matrix import Defect

_FIXES = re.compile(r"^#\s*fixes:\s*(.*)$", re.M)
_HITS = re.compile(r"^#\s*hits:\s*(\S+)\s+/(.+)/\s*$", re.M)
_CHECKS = re.compile(r"^#\s*checks:\s*(\S+)\s*$", re.M)
SERIES_FEATURE = "series"
# what a check prints to say it failed: "FAIL: why", "FAIL (gh-N): why", or "FAIL:" and indented lines
_FAIL_LINE = re.compile(r"^FAIL(?: \([^)]*\))?:\s*(.*)$")


def fixes(text: str) -> list[str]:
    m = _FIXES.search(text)
    return m.group(1).replace(",", " ").split() if m else []


def hits(text: str) -> list[tuple[str, re.Pattern]]:
    """(defect id, the pattern of a failure line it explains) of a script's `# hits:` lines."""
    return [(m.group(1), re.compile(m.group(2))) for m in _HITS.finditer(text)]


def is_series_feature(text: str) -> bool:
    return any(m.group(1) == SERIES_FEATURE for m in _CHECKS.finditer(text))


def failure_lines(output: str) -> list[str]:
    """The lines in which a check said what failed: each 'FAIL: why', each indented line under a bare 'FAIL:',
    each 'Fatal Python error: ...' of an interpreter that aborted under it; a check that prints none of these is
    judged by its last line."""
    lines = output.splitlines()
    found = [l.strip() for l in lines if l.startswith("Fatal Python error: ")]
    i = 0
    while i < len(lines):
        m = _FAIL_LINE.match(lines[i].strip())
        if m and m.group(1):
            found.append(m.group(1))
        elif m:
            i += 1
            while i < len(lines) and lines[i][:1].isspace() and lines[i].strip():
                found.append(lines[i].strip())
                i += 1
            continue
        i += 1
    if not found:
        last = [l.strip() for l in lines if l.strip()]
        found = last[-1:]
    return found


@dataclass(frozen=True)
class Verdict:
    """A failed check on an interpreter without the series: the defects that explain it (empty: none does) and
    the failure lines nothing explains."""

    defects: tuple[str, ...]
    unexplained: tuple[str, ...]

    @property
    def explained(self) -> bool:
        return bool(self.defects) and not self.unexplained


def explain(script_text: str, output: str, carried) -> Verdict:
    """Which of the `carried` defect ids explain a failed check's output: its `# fixes:` ids (the reproducer
    failed: the defect is there) or its `# hits:` patterns matching every failure line."""
    carried = set(carried)
    reproduces = [d for d in fixes(script_text) if d in carried]
    if reproduces:
        return Verdict(tuple(reproduces), ())
    patterns = [(d, p) for d, p in hits(script_text) if d in carried]
    seen, unexplained = [], []
    for line in failure_lines(output):
        matched = [d for d, p in patterns if p.search(line)]
        if matched:
            seen += [d for d in matched if d not in seen]
        else:
            unexplained.append(line)
    return Verdict(tuple(seen), tuple(unexplained))


def present_text(defect: Defect, version: str) -> str:
    """'present in 3.15.2: gh-N: title. what it means. fixed upstream in / by the series' patch'."""
    upstream = defect.upstream if defect.reported else "not reported upstream (report ready: matrix.yaml defects:)"
    fixed = f"fixed upstream in {defect.fixed_upstream}; " if defect.fixed_upstream else ""
    return (f"present in {version}: {upstream}: {defect.title}. {defect.means} ({fixed}fixed by {defect.patch}, "
            "which the project's cells and deb lanes carry)")


def script_ids(scripts_dir: Path) -> dict[str, set[str]]:
    """Every defect id the check scripts name (fixes: and hits:), with the scripts naming it."""
    found: dict[str, set[str]] = {}
    for script in sorted(scripts_dir.glob("check_*.py")):
        text = script.read_text()
        for d in fixes(text) + [d for d, _ in hits(text)]:
            found.setdefault(d, set()).add(script.name)
    return found

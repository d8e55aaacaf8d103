"""Run the in-interpreter check scripts of conformance/scripts/ in the cells that claim what they need.

Each check_*.py is a stdlib-only program that exits 0 when the behaviour it
checks holds, 1 (with a message) when it does not, and 2 when it cannot
check on this interpreter (shown as a skip with its reason).  A script that
runs perf record itself takes the host's sampling event from
$CPYTHON_PERF_EVENT and, for dwarf call graphs, the cell's dump size from
$CPYTHON_PERF_DWARF_STACK (the runner sets both).  Header lines:
  # requires: perf perf_jit   the backends the cell's interpreter must offer for it to run
  # records: perf            the script runs perf record itself: perf cannot sample a
                              program under qemu-user, so on a foreign-arch cell it is
                              skipped with that reason (the guest records the seed chain
                              and the shapes there)
  # emulated-reproduction: no a timing-dependent reproducer that does not
                              reproduce under qemu-user: on a foreign-arch
                              vanilla twin it is skipped with that reason
                              (it still runs, as a check, on the patched cell)
  # fixes: gh-NNN             a reproducer of an upstream defect (or patches/3.13/NNNN,
                              the series patch that fixes it, where upstream has no
                              issue for it): it must FAIL
                              (exit 1) on the cell's vanilla twin, the pinned
                              source without the fix series, and pass on the
                              patched cell.  The pair proves that the check
                              sees the bug and that the series removes it.
"""

from __future__ import annotations

import re

import pytest

from cpython_perf.check import external
from cpython_perf.matrix import PROJECT_ROOT

from conftest import check_script_fixes, not_applicable, target_check_gate

CANNOT_CHECK = 2
RECORDS_PERF = re.compile(r"^#\s*records:\s*perf\b", re.M)


def test_check_script(cell_check, runner_for, record_property, target_facts):
    cell, script = cell_check
    if cell.vanilla and cell.foreign and re.search(r"^#\s*emulated-reproduction:\s*no\b", script.read_text(), re.M):
        not_applicable("foreign", f"{script.name} is timing dependent and does not reproduce its defect under qemu-user "
                    f"(its header says so); it is proven on the x86_64 vanilla twin")
    if cell.foreign and RECORDS_PERF.search(script.read_text()):
        not_applicable("foreign", f"{script.name} records with perf itself, and perf cannot sample a program under "
                       f"qemu-user; on {cell.name} the qemu-system guest records the seed chain and the shape "
                       "catalogue (test_seed_chain, test_catalogue_shapes), and the script runs on the x86_64 cells")
    target_check_gate(cell, script, target_facts, record_property)   # an external target (--image/--python): see conftest
    runner = runner_for(cell)
    result = runner.run([runner.python, f"/src/{script.name}"], timeout=1200)
    output = (result.stdout + result.stderr)[-6000:]
    print(output)
    fixes = check_script_fixes(script)
    if result.exit_code == CANNOT_CHECK:
        pytest.skip(f"{script.name} cannot check on {cell.name}: {output.strip().splitlines()[-1] if output.strip() else ''}")
    if isinstance(cell, external.ExternalTarget) and fixes and result.exit_code == 1:
        facts = target_facts(cell)
        if facts.has_series is False:
            # CPython as released (or a build without the series): the defect it carries is a finding about the
            # interpreter, not a failure of the suite
            record_property("defect_present", " ".join(fixes))
            pytest.xfail(defect_present(script, fixes, facts.version_text))
    if cell.vanilla:
        record_property("defect_reproduced", result.exit_code == 1)
        assert result.exit_code == 1, (
            f"{script.name} ({', '.join(fixes)}) did not detect the defect on the unpatched {cell.name} "
            f"(exit {result.exit_code}): the check cannot see the bug\n{output}"
        )
    else:
        assert result.exit_code == 0, f"{script.name} failed in {cell.name} (exit {result.exit_code}):\n{output}"


def defect_present(script, fixes: list[str], version: str) -> str:
    """What an external interpreter's defect means, from the reproducer's own words: 'present: <issue>', what the
    check found (its docstring's first sentence), and the series patch that fixes it."""
    text = script.read_text()
    m = re.search(r'"""(.+?)(?:\.(?=\s+[A-Z])|"""|\n\s*\n)', text, re.S)
    what = " ".join(m.group(1).split()).rstrip(".") if m else script.name
    where = []
    for fix in fixes:
        if fix.startswith("patches/"):
            where += [str(p.relative_to(PROJECT_ROOT)) for p in sorted(PROJECT_ROOT.glob(fix + "-*.patch"))]
        else:
            where += [str(p.relative_to(PROJECT_ROOT)) for p in sorted(PROJECT_ROOT.glob(f"patches/*/*{fix}*.patch"))]
    upstream = [f for f in fixes if f.startswith("gh-")]
    return (f"present in {version}: {', '.join(upstream) or 'not reported upstream'}: {what}. "
            f"fixed by {', '.join(where) or ', '.join(fixes)} (the project's cells and deb lanes carry it)")

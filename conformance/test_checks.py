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
  # checks: behaviour         what any interpreter with the backend must do
  # hits: ID /REGEX/          on an interpreter without the series, a failure is defect ID's
                              where every failure line the check printed matches the REGEX
                              of a defect (matrix.yaml defects:) the target carries
                              (cpython_perf/check/defects.py); anything else fails
  # checks: series            a feature only the series has: skipped, with the reason, on an
                              interpreter without it
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

from cpython_perf.check import defects, external

from conftest import MATRIX, carried_defects, check_script_fixes, not_applicable, target_check_gate

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
    if isinstance(cell, external.ExternalTarget) and defects.is_series_feature(script.read_text()) \
            and target_facts(cell).has_series is False:
        pytest.skip(f"{script.name} checks a feature of the series ({first_sentence(script)}); {cell.name} is "
                    "built without it")
    runner = runner_for(cell)
    result = runner.run([runner.python, f"/src/{script.name}"], timeout=1200)
    output = (result.stdout + result.stderr)[-6000:]
    print(output)
    fixes = check_script_fixes(script)
    if result.exit_code == CANNOT_CHECK:
        pytest.skip(f"{script.name} cannot check on {cell.name}: {output.strip().splitlines()[-1] if output.strip() else ''}")
    if isinstance(cell, external.ExternalTarget):
        facts = target_facts(cell)
        if facts.has_series is False:
            judge_without_series(cell, script, result.exit_code, output, facts.version_text, record_property)
            return
    if cell.vanilla:
        record_property("defect_reproduced", result.exit_code == 1)
        assert result.exit_code == 1, (
            f"{script.name} ({', '.join(fixes)}) did not detect the defect on the unpatched {cell.name} "
            f"(exit {result.exit_code}): the check cannot see the bug\n{output}"
        )
    else:
        assert result.exit_code == 0, f"{script.name} failed in {cell.name} (exit {result.exit_code}):\n{output}"


def judge_without_series(target, script, exit_code: int, output: str, version: str, record_property) -> None:
    """An interpreter as released (no series): a failure that catalogued defects it carries explain all of is a
    finding about the interpreter (xfail 'present: ...'), anything else fails; a stock target's list of known
    defects must also hold the other way (a reproducer it lists that passes: the list is out of date)."""
    text = script.read_text()
    carried = carried_defects(target)
    listed = f"matrix.yaml's stock.{target.stock}.defects" if target.stock else "the catalogue"
    if exit_code == 0:
        stale = [d for d in defects.fixes(text) if target.carries is not None and d in target.carries]
        assert not stale, (f"{script.name} passes on {target.name} ({version}), but {listed} says it carries "
                           f"{', '.join(stale)}: take it off the list (fixed in this release?)")
        return
    verdict = defects.explain(text, output, carried)
    if not verdict.explained:
        missing = [d for d in defects.fixes(text) + [d for d, _ in defects.hits(text)]
                   if d not in carried and d in MATRIX.defects]
        hint = (f"; if it is {', '.join(dict.fromkeys(missing))}, add that to {listed}" if missing
                and target.carries is not None else "")
        pytest.fail(f"{script.name} failed on {target.name} ({version}, without the series) and no defect "
                    f"{listed} lists explains {'; '.join(verdict.unexplained) or 'it'}{hint}:\n{output}",
                    pytrace=False)
    record_property("defect_present", " ".join(verdict.defects))
    pytest.xfail(" | ".join(defects.present_text(MATRIX.defects[d], version) for d in verdict.defects))


def first_sentence(script) -> str:
    m = re.search(r'"""(.+?)(?:\.(?=\s)|"""|\n\s*\n)', script.read_text(), re.S)
    return " ".join(m.group(1).split()) if m else script.name

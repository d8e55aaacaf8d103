"""Run the in-interpreter check scripts of conformance/scripts/ in every cell that claims what they need.

Each check_*.py is a stdlib-only program that exits 0 when the behaviour it
checks holds and 1 (with a message) when it does not; a '# requires: MODE'
line names the perf modes it needs.
"""

from __future__ import annotations


def test_check_script(cell_check, runner_for):
    cell, script = cell_check
    runner = runner_for(cell)
    result = runner.run(["python3", f"/src/{script.name}"], timeout=1200)
    output = (result.stdout + result.stderr)[-6000:]
    print(output)
    assert result.exit_code == 0, f"{script.name} failed in {cell.name} (exit {result.exit_code}):\n{output}"

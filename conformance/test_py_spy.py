"""py-spy, which reads the interpreter's frames from outside, sees the same Python chain with perf support on.

py-spy (the PyPI wheel's static x86_64 binary, pinned in matrix.yaml
`profilers:`, mounted read-only into the cell container) records a program
that keeps calls -> top -> mid -> leaf hot, once without perf support and once
with each backend the interpreter offers (-X perf, -X perf_jit), in both of
py-spy's modes: the default, which reads the frame chain only, and --native,
which unwinds the C stack too and puts each Python frame where the eval loop's
C frame ran it: py-spy counts the native frames named _PyEval_EvalFrameDefault*
and gives each the Python frames up to the next entry frame, so each C entry
of the loop must be one such native frame (trampolines, and with frame records
the loop's assembly entries, change what that C stack holds).  top calls mid
through map(), so that the chain has a C entry of the loop inside it.

Must hold, in every run: of the samples whose innermost frame of the program
is leaf, at least 90% show leaf, mid, top, calls, <module> in that order (with
--native, the program's frames in that order, whatever C frames stand between
them).  Foreign-arch and build-only cells are skipped: the binary is x86_64's.
"""

from __future__ import annotations

import pytest

from cpython_perf.record import py_spy

from conftest import not_applicable

PY_SPY_MOUNT = py_spy.MOUNT
RATE = 199
MIN_WHOLE = 0.9
CHAIN = ("leaf", "mid", "top", "calls", "<module>")
PROGRAM_NAME = "py_spy_chain.py"
PROGRAM = '''
import time

def leaf(n):
    s = 0
    for i in range(n):
        s += i * i
    return s

def mid(n):
    return leaf(n)

def top(n):
    return list(map(mid, (n,)))[0]   # mid is entered from C (map), a C entry of the eval loop

def calls():
    end = time.perf_counter() + 2
    while time.perf_counter() < end:
        top(2000)

calls()
'''


@pytest.mark.also_external
@pytest.mark.parametrize("native", [False, True], ids=["frames", "native"])
def test_py_spy_sees_the_chain(cell, native, runner_for, py_spy_binary, record_property):
    # an external target (a stock image, --image) runs on this host's arch, as the matrix's x86_64 cells
    if getattr(cell, "foreign", False) or getattr(cell, "build_only", False) or getattr(cell, "arch", "x86_64") != "x86_64":
        not_applicable("arch", f"{cell.name}: py-spy's pinned binary is x86_64's; it runs on the x86_64 cells")
    if "--disable-gil" in getattr(cell, "configure_args", list)():
        # its objects have another layout there (benfred/py-spy#711, open): "Failed to find a python
        # interpreter in the .data section", as on the free-threaded build without the series
        not_applicable("configured:--disable-gil", f"{cell.name} is free-threaded, which py-spy does not read")
    runner = runner_for(cell, perf=False)
    runner.extra_mounts[py_spy_binary.parent] = PY_SPY_MOUNT
    (runner.src / PROGRAM_NAME).write_text(PROGRAM)
    program = f"/src/{PROGRAM_NAME}"
    failures = []
    for backend in (None, *cell.check_backends):
        options = ["-X", backend] if backend else []
        output = f"/src/py-spy-{backend or 'inactive'}.txt"
        command = py_spy.record_command(f"{PY_SPY_MOUNT}/py-spy", [runner.python, *options, program], output,
                                        RATE, native=native)
        result = runner.run(command, perf=False, timeout=300)
        assert result.exit_code == 0, f"py-spy record ({backend or 'inactive'}) in {cell.name}: {result.stderr[-2000:]}"
        raw = (runner.src / output.removeprefix("/src/")).read_text(errors="replace")
        counts = py_spy.chain_counts(raw, CHAIN, program, file_frames_only=native)
        label = f"-X {backend}" if backend else "inactive"
        record_property(f"py_spy {'native' if native else 'frames'} {label}", f"{counts['full_chain_samples']}/{counts['inside_samples']}")
        failures += chain_failures(label, counts)
    assert not failures, "; ".join(failures)


def chain_failures(label: str, counts: dict) -> list[str]:
    """What a run's chain counts (py_spy.stack_chain_counts) break of the rule, printed first; [] when it holds."""
    print(f"{label}: {counts['inside_samples']} samples in leaf, {counts['full_chain_samples']} with the chain")
    if counts["inside_samples"] < 100:
        return [f"{label}: only {counts['inside_samples']} samples in leaf of {counts['process_samples']}"]
    if counts["fraction"] < MIN_WHOLE:
        return [f"{label}: {counts['full_chain_samples']} of {counts['inside_samples']} samples in leaf show "
                f"{' <- '.join(CHAIN)} (at least {MIN_WHOLE:.0%})"]
    return []

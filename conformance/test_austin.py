"""Austin, which reads the interpreter's frames from outside as py-spy does, sees the same Python chain with perf
support on.

Austin (austin-dist's wheel, pinned in matrix.yaml `profilers:`, mounted read-only into the cell container,
which gets CAP_SYS_PTRACE for its process_vm_readv) samples test_py_spy's program, once without perf support
and once with each backend the interpreter offers; austin-python's mojo2austin reads its MOJO output.  Must
hold, in every run: of the samples whose innermost frame of the program is leaf, at least 90% show leaf, mid,
top, calls, <module> in that order.  A run with samples but not one of them in leaf (seen once with Austin 4.0.0, under
load) is shown and run again once; a second such run fails.  Foreign-arch and build-only cells are skipped: the binary is x86_64's.
"""

from __future__ import annotations

import pytest

from cpython_perf.check import viewer_readers
from cpython_perf.image import tools
from cpython_perf.record import austin, py_spy

from conftest import MATRIX, not_applicable
from test_py_spy import CHAIN, PROGRAM, PROGRAM_NAME, chain_failures

INTERVAL_US = 1000


@pytest.mark.also_external
def test_austin_sees_the_chain(cell, runner_for, record_property):
    if getattr(cell, "foreign", False) or getattr(cell, "build_only", False) or getattr(cell, "arch", "x86_64") != "x86_64":
        not_applicable("arch", f"{cell.name}: Austin's pinned binary is x86_64's; it runs on the x86_64 cells")
    if "--disable-gil" in getattr(cell, "configure_args", list)():
        # austin-dist 4.0.0 samples a free-threaded 3.13 with no frame at all (inactive too): its free-threaded
        # support (P403n1x87/austin#409, merged 2026-05-12) came after that release
        not_applicable("configured:--disable-gil", f"{cell.name} is free-threaded, which Austin 4.0.0 does not read")
    try:
        binary = tools.austin_binary(MATRIX)
        viewer_readers.mojo2austin()
    except viewer_readers.ReaderMissing as exc:
        pytest.skip(str(exc))
    runner = runner_for(cell, perf=False)
    runner.extra_mounts[binary.parent] = austin.MOUNT
    runner.extra_caps.append(austin.CAPABILITY)
    (runner.src / PROGRAM_NAME).write_text(PROGRAM)
    program = f"/src/{PROGRAM_NAME}"
    failures = []
    for backend in (None, *cell.check_backends):
        label = f"-X {backend}" if backend else "inactive"
        output = f"austin-{backend or 'inactive'}.mojo"
        command = austin.record_command(f"{austin.MOUNT}/austin", [runner.python, *(["-X", backend] if backend else []),
                                                                   program], f"/src/{output}", INTERVAL_US)
        for attempt in (1, 2):
            result = runner.run(command, perf=False, timeout=300)
            assert result.exit_code == 0, f"austin ({label}) in {cell.name}: {(result.stderr or result.stdout)[-2000:]}"
            text = viewer_readers.austin_text(runner.src / output, runner.src / f"{output}.txt")
            counts = py_spy.stack_chain_counts(austin.collapsed_stacks(text), CHAIN, program)
            if counts["inside_samples"] or not counts["process_samples"] or attempt == 2:
                break
            # Austin 4.0.0 now and then (once in CI, under load) samples a whole run without one frame of the
            # program: shown, and run once more; a second such run fails
            record_property(f"austin {label} first run", f"0 of {counts['process_samples']} samples in leaf")
            print(f"{label}: no sample in leaf of {counts['process_samples']}; three of its deepest stacks:")
            print("\n".join(sorted(text.splitlines(), key=len)[-3:]))
        record_property(f"austin {label}", f"{counts['full_chain_samples']}/{counts['inside_samples']}")
        failures += chain_failures(label, counts)
    assert not failures, "; ".join(failures)

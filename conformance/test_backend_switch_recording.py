"""perf_jit, switched away and back: perf resolves samples of both perf_jit periods.

For every cell that claims perf_jit (the release and O0 cells), perf records
conformance/scripts/switch_backends.py with the howto's perf_jit command line
(perf_runs.perf_run: -k 1, --call-graph dwarf[,size], the ring buffer -m the
memlock limit allows, then perf inject --jit and perf script): the script
spins ~1 s in busy_first() under -X perf_jit, switches to perf
(sys.activate_stack_trampoline) for middle(), back to perf_jit, and spins ~1 s
in busy_third().  It prints each period's CLOCK_MONOTONIC window (the clock of
`perf record -k 1`), so each sample of the process is placed in its period.

In each of the two perf_jit periods there must be at least MIN_PERIOD_SAMPLES
samples of the process, and at least MIN_NAMED_FRACTION of them must carry
py::busy_first:<script> (first period) / py::busy_third:<script> (third
period) among their frames: perf inject --jit must resolve both periods
from the one /tmp/jit-PID.dump.

Seen before the fix: the second perf_jit activation reopened the dump with
O_TRUNC, so busy_first's code load record was gone and perf inject named
nothing in the first period.

Foreign-arch cells are not recorded here (their one guest boot runs the seed
chain); the dump's content across reactivation is checked there, under
qemu-user, by scripts/check_jit_dump_reactivation.py.
"""

from __future__ import annotations

from cpython_perf.record import perf_runs
from cpython_perf.record.perf_samples import min_chain_fraction, parse_perf_script, py_symbol

from conftest import not_applicable

SCRIPT = "/src/switch_backends.py"
PERIOD_SECONDS = "1.0"
PERIODS = {"busy_first": py_symbol("busy_first", SCRIPT), "busy_third": py_symbol("busy_third", SCRIPT)}
MIN_PERIOD_SAMPLES = 50    # samples of the process inside each perf_jit period
# of those, the share that must name the period's function: perf_jit's chain bar (measured: 100%)
MIN_NAMED_FRACTION = min_chain_fraction("perf_jit")


def periods(stdout: str) -> dict[str, tuple[float, float]]:
    """The script's "period <name> <start> <end>" lines."""
    found = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "period":
            found[parts[1]] = (float(parts[2]), float(parts[3]))
    return found


def test_perf_jit_periods_around_a_switch(cell, runner_for, record_property):
    if cell.vanilla:
        not_applicable("vanilla", f"{cell.name} is a vanilla twin: only fix reproducers run there")
    if "perf_jit" not in cell.modes:
        not_applicable("mode:perf_jit", f"{cell.name} claims no perf_jit mode (modes: {', '.join(cell.modes) or 'none'})")
    if cell.foreign:
        not_applicable("foreign", f"{cell.name}: a foreign arch records in a qemu-system guest, whose one boot per cell runs "
                    "the seed chain; this recording is checked on the x86_64 cells")
    runner = runner_for(cell)
    run = perf_runs.perf_run(cell, "perf_jit", "xoption", SCRIPT, args=("--seconds", PERIOD_SECONDS),
                            event=runner.event)
    result = runner.run(run.shell, timeout=900)
    assert result.exit_code == 0, f"perf run failed in {runner.image}:\n{run.shell}\n{result.stderr[-4000:]}"
    stdout = (runner.src / "python.stdout").read_text()
    windows = periods(stdout)
    assert set(PERIODS) <= set(windows), f"the script did not report its periods: {stdout[-1000:]!r}"
    samples = parse_perf_script((runner.src / run.output).read_text(errors="replace"))
    process = [s for s in samples if s.comm.startswith("python")]
    record_property("process_samples", len(process))
    problems, summary = [], []
    for function, symbol in PERIODS.items():
        start, end = windows[function]
        inside = [s for s in process if start <= s.time <= end]
        named = [s for s in inside if symbol in s.python_frames()]
        fraction = len(named) / len(inside) if inside else 0.0
        record_property(f"{function}_samples", len(inside))
        record_property(f"{function}_named", len(named))
        innermost = {}
        for s in inside:
            key = (s.python_frames() or ["<no py:: frame>"])[0]
            innermost[key] = innermost.get(key, 0) + 1
        common = sorted(innermost.items(), key=lambda kv: -kv[1])[:3]
        line = (f"{function} period [{start:.3f}, {end:.3f}]: {len(named)} of {len(inside)} samples "
                f"name {symbol} ({fraction:.1%}); innermost py:: frames: {common}")
        summary.append(line)
        if len(inside) < MIN_PERIOD_SAMPLES:
            times = [s.time for s in process]
            span = f"[{min(times):.3f}, {max(times):.3f}]" if times else "none"
            problems.append(f"only {len(inside)} samples of the process in the {function} period "
                            f"(process samples span {span}): {line}")
        elif fraction < MIN_NAMED_FRACTION:
            problems.append(line)
    print("\n".join(summary))
    assert not problems, "perf_jit periods around a backend switch:\n  " + "\n  ".join(problems)

"""The howto's seed: py::foo under py::bar under py::baz under py::<module>.

For each perf mode a cell claims and each way of turning support on
(-X, environment variable, sys API around the run), perf records the howto's
script inside the cell and the parsed samples must show the chain, leaf to
root, in at least 95% of the samples taken inside foo with perf (frame
pointers), 90% with perf_jit (perf_samples.min_chain_fraction; every run here
measured 100%, so a regression that breaks one stack in three fails).
Without activation no py:: frame may appear at all.

Foreign-arch cells (aarch64) record in a qemu-system guest booted from their
image (cpython_perf.run.runners.GuestRunner), with the cpu-clock event; the same command lines.

The `perf script` output of every seed recording is kept as
results/<cell>/seed-<mode>-<activation>.perf-script.txt, linked from the
report's row of the cell; the first mode's -X recording is also
results/<cell>/seed.perf-script.txt, the input of its flame graph.
"""

from __future__ import annotations

import pytest

from cpython_perf.record import perf_runs
from cpython_perf.record.perf_samples import chain_report, parse_perf_script, py_symbol, python_frame_count

from cpython_perf.check.suite_results import SEED_PERF_SCRIPT, seed_perf_script_name

from conftest import SEED_SCRIPT, assert_chain, dump_reach, guest_skip_reason, not_applicable, results_dir

pytestmark = pytest.mark.needs_perf   # skipped on build-only cells (conftest)
SCRIPT = SEED_SCRIPT
SEED_CHAIN = [py_symbol(f, SCRIPT) for f in ("foo", "bar", "baz", "<module>")]


def record(runner, cell, mode, activation, record_property=None):
    """Record the script in the cell; parsed samples.  The cost of perf itself (perf.data size, record /
    inject / script wall times) goes to the test's properties."""
    reason = guest_skip_reason(cell, mode, activation) if cell.foreign else None
    if reason:
        not_applicable("foreign", reason)
    run = perf_runs.perf_run(cell, mode, activation, SCRIPT, event=runner.event)
    result = runner.run(run.shell, timeout=900)
    assert result.exit_code == 0, f"perf run failed in {runner.image}:\n{run.shell}\n{result.stderr[-4000:]}"
    if record_property is not None:
        phases = perf_runs.parse_phases((runner.src / perf_runs.PHASES_OUTPUT).read_text())
        for name, value in phases.items():
            record_property(f"perf_{name}" if name == "data_bytes" else f"{name}_ms", value)
    return parse_perf_script((runner.src / run.output).read_text(errors="replace"))


def expected_chain(runner, cell, stack_bytes, record_property):
    """The seed chain, cut to what a stack dump of stack_bytes can physically reach (None: no dump).

    Frame-pointer unwinding in the kernel (perf, -X perf) always reaches the
    root: stack_bytes is None.  A profiler that copies the user stack and
    unwinds it afterwards (perf --call-graph dwarf for perf_jit; samply in
    every mode) reaches only as far as the copy: where k nested eval frames of
    the cell's binary exceed the dump (e.g. -O0, ~18 KiB each) only the k
    innermost Python frames can appear, and exactly those are demanded;
    everywhere else the whole chain is (conftest.dump_reach).
    """
    reach = dump_reach(runner, cell, stack_bytes, record_property)
    return SEED_CHAIN if reach is None else SEED_CHAIN[:reach]


@pytest.mark.parametrize("activation", perf_runs.ACTIVATIONS)
def test_seed_chain(cell_mode, activation, runner_for, record_property):
    cell, mode = cell_mode
    runner = runner_for(cell)
    chain = expected_chain(runner, cell, perf_runs.stack_dump_bytes(cell, mode), record_property)
    samples = record(runner, cell, mode, activation, record_property)
    keep_perf_script(runner, cell, seed_perf_script_name(mode, activation))
    if activation == "xoption" and mode == cell.modes[0]:
        keep_perf_script(runner, cell, SEED_PERF_SCRIPT)
    assert_chain(chain_report(samples, chain), mode, f"{mode}, {activation}", record_property)


def keep_perf_script(runner, cell, name: str) -> None:
    """The seed run's perf script output goes to results/<cell>/<name>: the report links it and draws the
    flame graph of the first mode's -X run."""
    target = results_dir() / cell.name / name
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.write_bytes((runner.src / perf_runs.SCRIPT_OUTPUT).read_bytes())
    partial.replace(target)


def test_no_python_frames_without_activation(cell, runner_for):
    """Negative control: the same recording without -X perf shows C frames only."""
    runner = runner_for(cell)
    samples = record(runner, cell, None, "xoption")
    process = [s for s in samples if s.comm.startswith("python")]
    assert len(process) >= 50, f"perf recorded only {len(process)} samples of the Python process"
    assert any(f.symbol.startswith(("_PyEval_EvalFrame", perf_runs.EVAL_LOOP_BODY)) for s in process for f in s.frames), (
        "no sample shows the interpreter's eval loop: symbols are not resolved"
    )
    assert python_frame_count(samples) == 0, "py:: frames appeared although no perf support was activated"

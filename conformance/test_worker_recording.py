"""The howto's chain recorded inside a pool worker that spawn or forkserver started.

`python3 -X perf app.py` with a ProcessPoolExecutor: a worker made by spawn or forkserver is a new
interpreter, started with the options subprocess passes on.  perf records the parent (and, following
it, its workers) inside the cell; in the worker's samples the chain script.py's foo under bar under baz
under pool_seed.py's work must be there, as test_seed_chain demands it of a single process
(perf_samples.min_chain_fraction: 95% of the samples inside foo with perf, 90% with perf_jit).  Each
backend the cell's interpreter offers is recorded with one of the two start methods that start a new
interpreter (conformance/scripts/check_worker_trampoline.py checks every start method and pool, without
perf).
"""

from __future__ import annotations

import re

import pytest

from cpython_perf.record import perf_runs
from cpython_perf.record.perf_samples import chain_report, parse_perf_script, py_symbol, python_frame_count

from conftest import assert_chain, not_applicable, xfail_if_carried

# skipped on build-only cells; also run on an --image/--python target, e.g. a deb lane's installed package
pytestmark = [pytest.mark.needs_perf, pytest.mark.also_external]
SCRIPT = "/src/pool_seed.py"
START_METHOD = {"perf": "spawn", "perf_jit": "forkserver"}
WORKER_SECONDS = "0.75"   # at the suite's 9999 Hz: thousands of samples in the worker
WORKER_CHAIN = [py_symbol(f, "/src/script.py") for f in ("foo", "bar", "baz")] + [py_symbol("work", SCRIPT)]


@pytest.mark.parametrize("mode", ("perf", "perf_jit"))
def test_chain_in_a_pool_worker(cell, mode, runner_for, record_property, target_facts):
    if cell.foreign:
        not_applicable("foreign", f"{cell.name}: perf cannot sample under qemu-user; the worker recording runs on "
                                  "the x86_64 cells")
    if mode not in cell.backends:
        not_applicable(f"mode:{mode}", f"{cell.name}'s interpreter does not offer {mode}")
    if cell.vanilla:
        not_applicable("vanilla", f"{cell.name} is a vanilla twin: check_worker_trampoline.py reproduces the defect "
                                  "there")
    runner = runner_for(cell)
    method = START_METHOD[mode]
    run = perf_runs.perf_run(cell, mode, "xoption", SCRIPT, args=(method, WORKER_SECONDS), event=runner.event,
                             python=runner.python, perf=runner.perf)
    result = runner.run(run.shell, timeout=600)
    assert result.exit_code == 0, f"perf run failed in {runner.image}:\n{run.shell}\n{result.stderr[-3000:]}"
    said = (runner.src / "python.stdout").read_text()
    m = re.search(r"parent (\d+) worker (\d+)", said)
    assert m, f"pool_seed.py did not finish: {said[-500:]}"
    parent, worker = int(m.group(1)), int(m.group(2))
    samples = parse_perf_script((runner.src / run.output).read_text(errors="replace"))
    in_worker = [s for s in samples if s.pid == worker]
    record_property("start_method", method)
    record_property("worker_samples", len(in_worker))
    print(f"{len(samples)} samples; {len(in_worker)} of the {method} worker {worker} (parent {parent})")
    named = python_frame_count(in_worker)
    record_property("worker_python_frames", named)
    if in_worker and not named:
        # not one Python frame named in thousands of samples: the worker ran without the trampoline (an
        # interpreter whose subprocess does not pass the parent's backend on)
        xfail_if_carried(cell, "patches/3.13/0026", f"{len(in_worker)} samples of the {method} worker, no py:: "
                         "frame", target_facts, record_property)
    assert_chain(chain_report(in_worker, WORKER_CHAIN), mode, f"{mode}, a {method} worker of a ProcessPoolExecutor",
                 record_property, hint=f" (the {method} worker ran without the trampoline?)")

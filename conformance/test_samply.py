"""The seed chain seen by samply, the second profiler (samply record --save-only).

samply (Debian's package, pinned in matrix.yaml `profilers:`, mounted read-only
into the cell container) records the howto's script with the cell's perf
support turned on by -X; it reads /tmp/perf-PID.map (perf) or the jitdump
(perf_jit) itself.  The saved profile is parsed (cpython_perf.record.samply) into the
same samples perf's output gives, and must show the same chain:
py::foo under py::bar under py::baz under py::<module>, in the same share of
foo's samples as perf's test demands for the mode the interpreter ran in (95%
with -X perf, 90% with -X perf_jit: perf_samples.min_chain_fraction) -- cut, as perf_jit's is, to the Python
frames samply's 32000-byte stack copy can reach (at -O0, fewer than four).  Without activation no py:: frame may
appear.

The activation paths (environment, sys API) are perf's test's concern: here
the profiler changes, not the interpreter.  Foreign-arch cells are skipped:
their recordings run in a qemu-system guest, which has perf but not samply.
"""

from __future__ import annotations

import pytest

from cpython_perf.record import samply
from cpython_perf.record.perf_samples import chain_report, python_frame_count

from conftest import assert_chain, not_applicable
from test_seed_chain import SCRIPT, expected_chain

pytestmark = pytest.mark.needs_perf   # skipped on build-only cells (conftest)
SAMPLY_MOUNT = "/opt/samply"


def record(runner, samply_binary, mode):
    runner.extra_mounts[samply_binary.parent] = SAMPLY_MOUNT
    result = runner.run(samply.record_command(mode, "xoption", SCRIPT, samply=f"{SAMPLY_MOUNT}/samply"),
                        timeout=600)
    assert result.exit_code == 0, f"samply record failed in {runner.image}:\n{result.stderr[-3000:]}"
    samples = samply.read_profile(runner.src)
    if not samples and runner.event:
        pytest.fail(f"samply recorded no sample: perf's default event gives none on this host (the probe chose "
                    f"{runner.event} for perf), and samply 0.13 has no option to choose its event: it falls back to "
                    "cpu-clock only when opening cycles fails (cpython_perf.record.perf_event)", pytrace=False)
    return samples


def _skip_foreign(cell):
    if cell.foreign:
        not_applicable("foreign", f"{cell.name}: recordings of a foreign arch run in its qemu-system guest, which has perf "
                    "but not samply; samply is checked on the x86_64 cells")


def test_samply_seed_chain(cell_mode, runner_for, samply_binary, record_property):
    cell, mode = cell_mode
    _skip_foreign(cell)
    runner = runner_for(cell)
    # samply unwinds a copy of the stack in every mode: at -O0 the copy holds fewer eval frames than the chain
    chain = expected_chain(runner, cell, samply.STACK_BYTES, record_property)
    samples = record(runner, samply_binary, mode)
    assert_chain(chain_report(samples, chain), mode, f"samply, {mode}", record_property)


def test_samply_no_python_frames_without_activation(cell, runner_for, samply_binary):
    _skip_foreign(cell)
    samples = record(runner_for(cell), samply_binary, None)
    process = [s for s in samples if s.comm.startswith("python")]
    assert len(process) >= 50, f"samply recorded only {len(process)} samples of the Python process"
    assert python_frame_count(samples) == 0, "py:: frames appeared in samply's profile without perf support"

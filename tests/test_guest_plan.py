"""What a foreign cell's one guest boot records must be exactly what its tests ask for: the seed chain's
runs and the catalogue shapes' (conformance/conftest.guest_jobs).  A recording that is asked for but not
planned fails its test; one planned but never asked for costs guest time.  Runs pytest on a throwaway
conformance test, which sees conftest as the suite does; no Docker, no qemu."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from cpython_perf.matrix import PROJECT_ROOT

PROBE = textwrap.dedent("""\
    import pytest
    from cpython_perf.matrix import load_matrix
    from conftest import (GUEST_SHAPES, SHAPES, guest_jobs, guest_shape_skip_reason, shape_run)

    MATRIX = load_matrix()

    def test_fp_cell_plans_every_shape_but_recursion_with_perf():
        cell = MATRIX.cells["3.13-fp-aarch64"]
        planned = {job.shell: job.name for job in guest_jobs(cell)}
        for shape in SHAPES:
            shell = shape_run(cell, "perf", shape).shell
            if shape == "recursion":
                assert shell not in planned
                assert "perf_event_max_stack" in guest_shape_skip_reason(cell, "perf", shape)
            else:
                assert planned.get(shell) == f"shape-{shape}"
                assert guest_shape_skip_reason(cell, "perf", shape) is None
            assert shape_run(cell, "perf_jit", shape).shell not in planned
            assert "-X perf only" in guest_shape_skip_reason(cell, "perf_jit", shape)
        assert len(set(GUEST_SHAPES)) == len(SHAPES) - 1

    def test_vanilla_twin_plans_no_shape():
        cell = MATRIX.cells["3.13-release-vanilla-aarch64"]
        assert not [job for job in guest_jobs(cell) if job.name.startswith("shape-")]
    """)


def test_guest_plans_the_catalogue_shapes():
    probe = PROJECT_ROOT / "conformance" / f"test_zz_guest_plan_probe_{os.getpid()}.py"
    probe.write_text(PROBE)
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(probe)],
                              cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    finally:
        probe.unlink()
    assert done.returncode == 0 and "2 passed" in done.stdout, done.stdout + done.stderr

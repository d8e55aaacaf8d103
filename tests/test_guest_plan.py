"""What a foreign cell's one guest boot records must be exactly what its tests ask for: the seed chain's
runs, the catalogue shapes' and test_jit_inject's comparison of the injectors (conformance/conftest.guest_jobs).
A recording that is asked for but not planned fails its test; one planned but never asked for costs guest
time.  Runs pytest on a throwaway conformance test, which sees conftest as the suite does; no Docker, no qemu."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from cpython_perf.matrix import PROJECT_ROOT

PROBE = textwrap.dedent("""\
    import pytest
    from cpython_perf.matrix import load_matrix
    from conftest import (GUEST_SHAPES, JIT_INJECT_FILES, JIT_INJECT_OUTPUTS, JIT_INJECT_PROGRAM, SHAPES,
                          guest_files, guest_jobs, guest_shape_skip_reason, jit_inject_not_applicable,
                          jit_inject_script, shape_run)
    from cpython_perf.record import perf_runs
    from cpython_perf.run.guest import GuestRun, JobResult
    from cpython_perf.run.runners import GuestRunner

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

    def test_jit_inject_is_planned_where_the_interpreter_offers_perf_jit():
        foreign = [cell for cell in MATRIX.cells.values() if cell.foreign]
        assert "3.13-fp-aarch64" in {cell.name for cell in foreign}
        for cell in foreign:
            jobs = [job for job in guest_jobs(cell) if job.name == "jit-inject"]
            if "perf_jit" in cell.backends and not cell.vanilla:
                assert [(job.shell, job.outputs) for job in jobs] == [(jit_inject_script(cell), JIT_INJECT_OUTPUTS)]
                assert jit_inject_not_applicable(cell) is None
            else:
                assert not jobs
                fact = "vanilla" if "perf_jit" in cell.backends else "backend:perf_jit"
                assert jit_inject_not_applicable(cell)[0] == fact
        assert jit_inject_not_applicable(MATRIX.cells["3.13-release-vanilla"]) is None   # x86_64 twin: compared

    def test_jit_inject_files_are_in_the_guest():
        script = jit_inject_script(MATRIX.cells["3.13-fp-aarch64"])
        for path in JIT_INJECT_FILES:
            assert path in guest_files() and f"/src/{path.name}" in script
        assert len({path.name for path in guest_files()}) == len(guest_files())   # one /src: no name twice

    def test_the_guest_runs_the_program_sampled_as_the_guest_samples():
        native = jit_inject_script(MATRIX.cells["3.13-fp"], event="cpu-clock")
        guest = jit_inject_script(MATRIX.cells["3.13-fp-aarch64"])
        assert f"-X perf_jit {JIT_INJECT_PROGRAM} " in native and f"-X perf_jit {JIT_INJECT_PROGRAM} " in guest
        assert f"-e cpu-clock -F {perf_runs.SAMPLE_FREQUENCY} " in native
        event = perf_runs.guest_event(MATRIX.cells["3.13-fp-aarch64"])
        assert f"-e {event} -F {perf_runs.GUEST_DWARF_SAMPLE_FREQUENCY} " in guest
        for text in (native, guest):
            assert "--call-graph dwarf" in text and "-k 1" in text
            # addr2line's inline lookups took minutes in the emulated guest
            assert text.count("perf script --no-inline ") == 2

    def test_the_test_asks_the_guest_runner_for_the_planned_job(tmp_path):
        cell = MATRIX.cells["3.13-fp-aarch64"]
        (tmp_path / "src").mkdir()
        outputs = {name: name.encode() for name in JIT_INJECT_OUTPUTS}
        run = GuestRun({"jit-inject": JobResult("jit-inject", 0, "", "", 120.0, dict(outputs))}, 60.0, 600.0, 30.0, "")
        runner = GuestRunner(None, cell.image, tmp_path, cell.name, guest_jobs(cell), lambda: run,
                             lambda name, value: None)
        # as test_jit_inject.py calls it
        result = runner.run(jit_inject_script(cell, runner.perf, runner.python, runner.event), timeout=600)
        assert result.exit_code == 0 and result.seconds == 120.0
        for name in JIT_INJECT_OUTPUTS:
            assert (tmp_path / "src" / name).read_bytes() == name.encode()
    """)


def test_guest_plans_what_the_tests_ask_for():
    probe = PROJECT_ROOT / "conformance" / f"test_zz_guest_plan_probe_{os.getpid()}.py"
    probe.write_text(PROBE)
    try:
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(probe)],
                              cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    finally:
        probe.unlink()
    assert done.returncode == 0 and "6 passed" in done.stdout, done.stdout + done.stderr

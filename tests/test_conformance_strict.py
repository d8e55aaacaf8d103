"""Strict cells: a selected cell that cannot run fails instead of being skipped (CI, buildbot and the GitHub
cell jobs turn it on).  Runs pytest on a throwaway conformance test; no Docker."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from cpython_perf.matrix import PROJECT_ROOT

PROBE = textwrap.dedent("""\
    from conftest import cannot_run

    def test_a_cell_that_cannot_run():
        cannot_run("3.12-fp: source not available here")
    """)


def run_probe(tmp_path, *args, strict_env=None):
    probe = PROJECT_ROOT / "conformance" / f"test_zz_strict_probe_{os.getpid()}.py"
    probe.write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k != "CPYTHON_PERF_STRICT"}
    if strict_env is not None:
        env["CPYTHON_PERF_STRICT"] = strict_env
    try:
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(probe), *args],
                              cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)
    finally:
        probe.unlink()


def test_a_cell_that_cannot_run_is_skipped_by_default(tmp_path):
    done = run_probe(tmp_path)
    assert done.returncode == 0 and "1 skipped" in done.stdout, done.stdout + done.stderr


def test_strict_cells_turn_it_into_a_failure(tmp_path):
    for args, env in ((["--strict-cells"], None), ([], "1")):
        done = run_probe(tmp_path, *args, strict_env=env)
        assert done.returncode == 1 and "1 failed" in done.stdout, done.stdout + done.stderr
        assert "source not available here" in done.stdout


def test_ci_buildbot_and_the_cell_jobs_turn_it_on():
    assert "export CPYTHON_PERF_STRICT=1" in (PROJECT_ROOT / ".ci" / "run").read_text()
    assert 'CPYTHON_PERF_STRICT: "1"' in (PROJECT_ROOT / ".github" / "workflows" / "cell.yml").read_text()
    assert 'env.setdefault("CPYTHON_PERF_STRICT", "1")' in (PROJECT_ROOT / "cpython_perf" / "ci" /
                                                             "buildbot_config.py").read_text()

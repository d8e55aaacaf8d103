from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys

import pytest

from cpython_perf import host
from cpython_perf.cli import main
from cpython_perf.errors import DockerUnavailable
from cpython_perf.matrix import PROJECT_ROOT

from .conftest import edit


def test_unknown_cell_exits_non_zero_without_traceback(capsys):
    assert main(["build", "3.13-nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown cell '3.13-nope'") and "Traceback" not in err


def test_malformed_matrix_exits_non_zero_naming_the_line(project_copy, capsys):
    edit(project_copy / "matrix.yaml", "arches: [x86_64, aarch64]", "arches: [x86_64, sparc]")
    assert main(["--matrix", str(project_copy / "matrix.yaml"), "cells"]) == 2
    assert "matrix.yaml:" in capsys.readouterr().err


def test_render_prints_the_dockerfile(capsys):
    assert main(["render", "3.11-fp"]) == 0
    assert "Python-3.11.2.tgz" in capsys.readouterr().out


def test_docker_unavailable_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(DockerUnavailable) as info:
        host.docker_client(log=lambda *_: None, start_daemon=False)
    assert "no Docker engine answers at unix:///nonexistent/docker.sock" in str(info.value)
    assert "dockerd" in str(info.value)


def test_build_without_docker_exits_non_zero(tmp_path):
    """The whole command, as a user runs it, against a missing engine."""
    env = {"DOCKER_HOST": "unix:///nonexistent/docker.sock", "PATH": "/usr/bin:/bin",
           "CPYTHON_PERF_SOURCE_CACHE": str(tmp_path), "CPYTHON_PERF_PYTHON_ORG_MIRROR": "http://127.0.0.1:9"}
    tarball = tmp_path / "Python-3.13.5.tar.xz"
    proc = subprocess.run([sys.executable, "-m", "cpython_perf", "build", "3.12-fp"], cwd=PROJECT_ROOT,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr   # a runtime failure (usage errors exit 2)
    # the engine is asked first (an image of the same inputs would be used as it is), so it is what is named
    assert "no Docker engine answers" in proc.stderr and "Traceback" not in proc.stderr
    assert not tarball.exists()


def test_nox_lists_a_session_per_cell():
    nox = [sys.executable, "-m", "nox"]
    if importlib.util.find_spec("nox") is None:
        if shutil.which("nox") is None:
            pytest.skip("nox is neither importable nor on PATH")
        nox = [shutil.which("nox")]
    proc = subprocess.run([*nox, "-l"], cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    from cpython_perf.matrix import load_matrix

    for name in load_matrix().cells:
        assert f"build-{name}" in proc.stdout and f"conformance-{name}" in proc.stdout


def test_malformed_arch_facts_exit_non_zero_naming_the_line_at_import(tmp_path):
    """matrix.yaml's arch_facts are read when the driver is imported: `python -m cpython_perf` says what is wrong
    and where, as for any matrix error, not with a traceback."""
    shutil.copytree(PROJECT_ROOT / "cpython_perf", tmp_path / "cpython_perf",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(PROJECT_ROOT / "matrix.yaml", tmp_path / "matrix.yaml")
    edit(tmp_path / "matrix.yaml", "    triplet: riscv64-linux-gnu\n", '    triplet: "riscv64 linux"\n')
    line = next(n for n, text in enumerate((tmp_path / "matrix.yaml").read_text().splitlines(), 1)
                if "riscv64 linux" in text)
    run = subprocess.run([sys.executable, "-m", "cpython_perf", "cells"], cwd=tmp_path, capture_output=True,
                         text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)})
    assert run.returncode == 2, run.stderr
    assert run.stderr.startswith(f"error: {tmp_path / 'matrix.yaml'}:{line}: triplet of arch_facts.riscv64"), run.stderr
    assert "Traceback" not in run.stderr

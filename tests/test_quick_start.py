"""The README's first command's set-up, run as a new user would run it, in pristine Debian 12 and 13 containers.

`./nox` must make its own environment with nox (Debian refuses `pip install` outside a virtual environment,
PEP 668) and list the sessions, up to the point where the Docker engine is needed.  The containers are made
from Debian's packages with mmdebstrap (python3 and ca-certificates only) and kept as
cpython-perf-pristine:<suite>.  Where this machine's pip is pointed at a CA bundle of its own (PIP_CERT, as
behind an intercepting proxy), the bundle is handed to the container's pip the same way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cpython_perf.image.bases import bootstrap_base
from cpython_perf.image.docker_build import image_exists
from cpython_perf.matrix import PROJECT_ROOT

pytestmark = pytest.mark.container

SUITES = ("bookworm", "trixie")   # Debian 12, Debian 13


def pristine_image(client, suite: str) -> str:
    tag = f"cpython-perf-pristine:{suite}"
    if not image_exists(client, tag):
        bootstrap_base(client, suite, ["python3", "ca-certificates"], tag, print)
    return tag


def project_copy(dest: Path) -> Path:
    """The files of the checkout (tracked and not ignored), as a user's clone has them."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=PROJECT_ROOT, check=True,
                            capture_output=True, text=True).stdout.split()
    dest.mkdir()
    for rel in listed:
        src = PROJECT_ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def run_in(image: str, project: Path, *, user: str | None = None) -> subprocess.CompletedProcess:
    cmd = ["docker", "run", "--rm", "-v", f"{project}:/project", "-w", "/project"]
    cert = os.environ.get("PIP_CERT")
    if cert and Path(cert).is_file():
        cmd += ["-v", f"{cert}:/run/host-ca.crt:ro", "-e", "PIP_CERT=/run/host-ca.crt"]
    if user:
        cmd += ["--user", user]
    return subprocess.run([*cmd, image, "./nox", "-l"], capture_output=True, text=True, timeout=900)


@pytest.mark.parametrize("suite", SUITES)
def test_nox_makes_its_environment_on_a_pristine_debian(docker_client, tmp_path, suite):
    image = pristine_image(docker_client, suite)
    project = project_copy(tmp_path / "project")
    done = run_in(image, project)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "build-3.13-fp" in done.stdout and "* tests" in done.stdout
    assert (project / ".nox-venv" / ".complete").is_file()
    # the second run uses the environment as it is
    again = run_in(image, project)
    assert again.returncode == 0 and "making" not in again.stderr


@pytest.mark.parametrize("suite", SUITES)
def test_a_user_without_python3_venv_is_told_what_to_install(docker_client, tmp_path, suite):
    image = pristine_image(docker_client, suite)
    project = project_copy(tmp_path / "project")
    os.chmod(project, 0o777)
    done = run_in(image, project, user="1000:1000")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "apt-get install python3-venv" in done.stderr
    assert not (project / ".nox-venv").exists(), "a failed set-up must leave no environment behind"

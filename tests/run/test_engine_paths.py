"""The suite finds out when the Docker engine does not see its files (docker-outside-of-docker).

From inside a container with the host's Docker socket mounted (as GitLab's Docker executor, a CI worker in a
container, a devcontainer or act run a job), the probe on a directory only that container has says what to
set; on a directory mounted at the same path in both it finds nothing wrong.  Then the smoke cell's
conformance itself runs there (its seed-chain recordings, which bind-mount pytest's temporary directory into
the cell's containers, and a check script): stopped with that one line where pytest's temporary directory is
the job container's own, passing with --basetemp on a directory mounted at the same path in both.  The
project, the driver's dependencies and the source cache are mounted into the base image, which has a
python3."""

from __future__ import annotations

import os
import shlex
import shutil
import sysconfig
import tempfile
from pathlib import Path

import pytest

from cpython_perf.image import bases, pipeline
from cpython_perf.run import containers
from cpython_perf.matrix import PROJECT_ROOT, load_matrix
from cpython_perf.source import sources

pytestmark = pytest.mark.container

SOCKET = "/var/run/docker.sock"
PROBE = """
import docker, sys
from pathlib import Path
from cpython_perf.run import containers
print(containers.engine_path_problem(docker.from_env(), sys.argv[1], Path(sys.argv[2])))
"""


@pytest.fixture(scope="module")
def base_image(docker_client):
    return bases.ensure_base_image(docker_client, load_matrix().base_suite, log=lambda *_: None)


def test_the_engine_sees_this_machines_directory(docker_client, base_image, tmp_path):
    assert containers.engine_path_problem(docker_client, base_image, tmp_path) is None


@pytest.mark.skipif(not os.path.exists(SOCKET), reason=f"no {SOCKET} to mount")
def test_from_a_container_using_the_hosts_engine(docker_client, base_image):
    site = sysconfig.get_paths()["purelib"]
    shared = Path(tempfile.mkdtemp(prefix="cpython-perf-shared-"))
    try:
        def probe(directory: str, extra: dict) -> str:
            volumes = {SOCKET: {"bind": SOCKET, "mode": "rw"}, str(PROJECT_ROOT): {"bind": "/project", "mode": "ro"},
                       site: {"bind": "/site", "mode": "ro"}, **extra}
            out = docker_client.containers.run(
                base_image, entrypoint=["python3", "-c", PROBE, base_image, directory], user="0", volumes=volumes,
                environment={"PYTHONPATH": "/project:/site"}, remove=True, stdout=True, stderr=True)
            return out.decode().strip().splitlines()[-1]

        # a directory of the job container only, as pytest's temporary directory is there
        message = probe("/tmp", {})
        assert "does not see this machine's /tmp" in message and "--basetemp=DIR" in message
        # the same path mounted in both: the way out the message names
        assert probe(str(shared), {str(shared): {"bind": str(shared), "mode": "rw"}}) == "None"
    finally:
        for f in shared.iterdir():
            f.unlink()
        shared.rmdir()


SMOKE_SELECTION = ["conformance/test_seed_chain.py", "conformance/test_checks.py", "-k",
                   "seed_chain or trampoline_hot_path"]


@pytest.mark.skipif(not os.path.exists(SOCKET), reason=f"no {SOCKET} to mount")
def test_conformance_from_a_container_using_the_hosts_engine(docker_client, base_image):
    matrix = load_matrix()
    cell = matrix.cell(matrix.default_cell)
    pipeline.ensure_cell_image(cell, matrix)     # built here, as a job's earlier step would have
    site = sysconfig.get_paths()["purelib"]
    cache = sources.default_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    shared = Path(tempfile.mkdtemp(prefix="cpython-perf-shared-"))
    shared.chmod(0o777)

    def conformance(extra_args: list[str], extra_volumes: dict) -> tuple[int, str]:
        volumes = {SOCKET: {"bind": SOCKET, "mode": "rw"}, str(PROJECT_ROOT): {"bind": "/checkout", "mode": "ro"},
                   site: {"bind": "/site", "mode": "ro"}, str(cache): {"bind": str(cache), "mode": "ro"},
                   **extra_volumes}
        # the job's own checkout, on the job container's file system (the suite writes results/ there)
        # the plugins of this machine's packages are built for its own Python, not the base image's python3: none
        # is loaded (hypothesis's has a compiled part)
        pytest_command = shlex.join(["python3", "-m", "pytest", *SMOKE_SELECTION, "--cell", cell.name,
                                     "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-q", "-rs", *extra_args])
        shell = ("mkdir /project && tar -C /checkout --exclude=./.nox --exclude=./.git --exclude=./results -cf - . "
                 f"| tar -C /project -xf - && cd /project && {pytest_command}")
        container = docker_client.containers.run(
            base_image, ["sh", "-c", shell], user="0", volumes=volumes, working_dir="/", detach=True,
            environment={"PYTHONPATH": "/project:/site", sources.CACHE_ENV: str(cache),
                         "CPYTHON_PERF_STRICT": "1"})
        try:
            status = container.wait(timeout=900)["StatusCode"]
            return status, container.logs().decode(errors="replace")
        finally:
            container.remove(force=True)

    try:
        status, output = conformance([], {})
        print(output[-2000:])
        assert status != 0 and "does not see this machine's" in output and "--basetemp=DIR" in output, (
            f"the suite ran on in a job container whose temporary directory the engine cannot see (exit {status})")
        status, output = conformance([f"--basetemp={shared}/run"], {str(shared): {"bind": str(shared), "mode": "rw"}})
        print(output[-3000:])
        assert status == 0 and " passed" in output and "failed" not in output, (
            f"the smoke conformance failed from a container with the host's engine (exit {status}):\n{output[-3000:]}")
    finally:
        shutil.rmtree(shared, ignore_errors=True)   # what the runs left, written by root in the containers

"""The suite finds out when the Docker engine does not see its files (docker-outside-of-docker).

From inside a container with the host's Docker socket mounted (as GitLab's Docker executor, a CI worker in a
container, a devcontainer or act run a job), the probe on a directory only that container has says what to
set; on a directory mounted at the same path in both it finds nothing wrong.  The project and the driver's
dependencies are mounted into the base image, which has a python3."""

from __future__ import annotations

import os
import sysconfig
import tempfile
from pathlib import Path

import pytest

from cpython_perf.build import containers, images
from cpython_perf.matrix import PROJECT_ROOT, load_matrix

pytestmark = pytest.mark.container

SOCKET = "/var/run/docker.sock"
PROBE = """
import docker, sys
from pathlib import Path
from cpython_perf.build import containers
print(containers.engine_path_problem(docker.from_env(), sys.argv[1], Path(sys.argv[2])))
"""


@pytest.fixture(scope="module")
def base_image(docker_client):
    return images.ensure_base_image(docker_client, load_matrix().base_suite, log=lambda *_: None)


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

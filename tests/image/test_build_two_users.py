"""An image one user built is used as it is when another user builds the same inputs.

Docker's layer cache keys a COPY on the files' owners, so the second user's build would not reuse the
first's layers and would build the cell again from scratch.  `build CELL` trusts the inputs label instead:
here root builds a small image carrying the 3.13-fp cell's inputs label (under a throwaway repository name,
so no real image is touched), then a throwaway user in the docker group runs `build` for that cell.  The
source cache is empty and every source is loopback, so a build would fail at once; using the image does not.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
import uuid

import pytest

from cpython_perf.image import labels, pipeline
from cpython_perf.matrix import PROJECT_ROOT, load_matrix

pytestmark = pytest.mark.container

SCRIPT = r"""
import sys
from cpython_perf import matrix as m
m.IMAGE_REPOSITORY = sys.argv[1]
from cpython_perf.image import pipeline
mx = m.load_matrix()
print(pipeline.build_cell(mx.cell("3.13-fp"), mx, no_cache=len(sys.argv) > 2)["how"])
"""


def _context(digest: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in (("Dockerfile", f"FROM scratch\nCOPY probe /probe\nLABEL {labels.INPUTS_LABEL}={digest}\n"),
                           ("probe", "built by uid 0\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data.encode()))
    return buf.getvalue()


def _python_for(user: str) -> tuple[str, str]:
    """An interpreter of this one's version that user may run (this one may sit under root's home), and this
    environment's site-packages (the driver's dependencies) for its path."""
    import sysconfig
    site = sysconfig.get_paths()["purelib"]
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for python in (sys.executable, f"/usr/bin/{version}", f"/usr/local/bin/{version}"):
        if subprocess.run(["runuser", "-u", user, "--", python, "-c", ""], capture_output=True).returncode == 0:
            return python, site
    pytest.skip(f"no {version} that {user} may run")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("useradd") or not shutil.which("runuser"),
                    reason="needs root, useradd and runuser to make the second user")
def test_a_second_user_uses_the_image_the_first_built(docker_client):
    matrix = load_matrix()
    repository = f"cpython-perf-twousers-{uuid.uuid4().hex[:8]}"
    digest = pipeline.cell_inputs(matrix.cell("3.13-fp"), matrix.base_suite, log=lambda *_: None, matrix=matrix,
                                  fetch=False).digest
    image, _ = docker_client.images.build(fileobj=io.BytesIO(_context(digest)), custom_context=True,
                                          tag=f"{repository}:3.13-fp", rm=True)
    user = f"cpt{uuid.uuid4().hex[:6]}"
    subprocess.run(["useradd", "--create-home", "--groups", "docker", user], check=True)
    try:
        cache = f"/home/{user}/empty-source-cache"
        python, site = _python_for(user)
        env = {"PATH": os.environ["PATH"], "HOME": f"/home/{user}", "PYTHONPATH": f"{PROJECT_ROOT}:{site}",
               "CPYTHON_PERF_SOURCE_CACHE": cache,
               "CPYTHON_PERF_PYTHON_ORG_MIRROR": "http://127.0.0.1:9/ftp/python",
               "CPYTHON_PERF_DEBIAN_ARCHIVE": "http://127.0.0.1:9/debian"}
        run = ["runuser", "-u", user, "--", python, "-c", SCRIPT, repository]
        proc = subprocess.run(run, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
        assert proc.stdout.strip().splitlines()[-1] == "current"
        assert "used as it is" in proc.stdout + proc.stderr
        assert docker_client.images.get(f"{repository}:3.13-fp").id == image.id
        # --no-cache builds: here it needs the source, which no loopback source has
        forced = subprocess.run(run + ["no-cache"], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True,
                                timeout=300)
        assert forced.returncode != 0 and "127.0.0.1" in forced.stdout + forced.stderr
    finally:
        subprocess.run(["userdel", "--remove", user], check=False, capture_output=True)
        docker_client.images.remove(image.id, force=True)

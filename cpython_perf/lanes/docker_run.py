"""`docker run` of a packaging lane's containers: the command line, and the run with its output logged (a
heartbeat meanwhile) or captured; an image's inputs label, which says whether a bootstrapped image is current."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from .. import progress
from ..image.labels import INPUTS_LABEL
from ..run import containers


def docker_run_command(image: str, argv: list[str], *, mounts: dict[Path, str] | None = None,
                       env: dict[str, str] | None = None, workdir: str | None = None, name: str | None = None,
                       cap_add: list[str] | None = None, network: bool = True, user: str | None = None,
                       options: list[str] | tuple[str, ...] = ()) -> list[str]:
    """options: more `docker run` options (a BuildConditions' host name, CPU set)."""
    cmd = ["docker", "run", "--rm", *options]
    if name:
        cmd += ["--name", name]
    if user:
        cmd += ["--user", user]
    for host_path, inside in (mounts or {}).items():
        cmd += ["-v", f"{host_path}:{inside}"]
    for key, value in (env or {}).items():
        cmd += ["-e", f"{key}={value}"]
    if workdir:
        cmd += ["-w", workdir]
    # a perf capability comes with CAP_IPC_LOCK, as in every container of the driver (containers.py: perf's
    # ring buffers outside the per-user locked-memory budget, so several suites can record at once)
    for cap in containers.container_capabilities(cap_add):
        cmd += ["--cap-add", cap]
    if not network:
        cmd += ["--network", "none"]
    return cmd + [image, *argv]


def run_logged(cmd: list[str], log_file: Path, name: str | None = None, timeout: float | None = None,
               log=lambda line: None, what: str | None = None) -> int:
    """Run a command with its output appended to log_file, a heartbeat on log (cpython_perf.progress: every line
    with --verbose); the named container is removed if interrupted."""
    with progress.Progress(what or shlex.join(cmd[-3:]), log_file, log, append=True) as step:
        try:
            rc = step.run(cmd, timeout=timeout)
        except BaseException:
            if name:
                subprocess.run(["docker", "rm", "-f", name], capture_output=True)
            raise
        step.ok = rc == 0
        return rc


def run_captured(cmd: list[str], timeout: float = 3600) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


def tail_of(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def image_label(tag: str) -> str | None:
    proc = subprocess.run(["docker", "image", "inspect", "--format",
                           "{{index .Config.Labels \"" + INPUTS_LABEL + "\"}}", tag], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None

"""What the host needs: Debian packages (docker.io, mmdebstrap) and a Docker engine.

On a Debian machine where we are root, missing tools are installed with
apt-get and a missing daemon is started in the background (this is what a
fresh CI machine needs).  Elsewhere the error says what to install or start.
Set CPYTHON_PERF_NO_HOST_SETUP=1 to forbid both.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from .errors import DockerUnavailable, DriverError

DOCKERD_LOG = Path("/var/log/cpython-perf-dockerd.log")


def host_setup_allowed() -> bool:
    return (
        os.environ.get("CPYTHON_PERF_NO_HOST_SETUP", "") in ("", "0")
        and hasattr(os, "geteuid") and os.geteuid() == 0
        and shutil.which("apt-get") is not None
    )


def ensure_commands(commands: dict[str, str], log=print) -> None:
    """Make sure each command exists, installing its Debian package if allowed.

    commands maps a command name to the Debian package that provides it.
    """
    missing = {cmd: pkg for cmd, pkg in commands.items() if shutil.which(cmd) is None}
    if not missing:
        return
    packages = sorted(set(missing.values()))
    if not host_setup_allowed():
        raise DriverError(
            f"missing on this machine: {', '.join(missing)}. Install the Debian packages "
            f"{' '.join(packages)} (apt-get install {' '.join(packages)}), or run as root on Debian "
            "so that the driver installs them."
        )
    log(f"installing {' '.join(packages)} with apt-get (needed: {', '.join(missing)})")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for args in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
        proc = subprocess.run(args, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise DriverError(f"{' '.join(args)} failed:\n{proc.stderr.strip()[-2000:]}")
    still = [cmd for cmd in missing if shutil.which(cmd) is None]
    if still:
        raise DriverError(f"installed {' '.join(packages)} but {', '.join(still)} is still not on PATH")


def docker_client(log=print, start_daemon: bool = True):
    """A connected docker.DockerClient; starts dockerd if allowed and needed."""
    import docker  # imported here so that unit tests of other modules need no Docker SDK

    try:
        client = docker.from_env(timeout=600)
        client.ping()
        return client
    except Exception as exc:  # DockerException, requests errors, socket errors
        first_error = exc
    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    can_start = start_daemon and host_setup_allowed() and "DOCKER_HOST" not in os.environ
    if can_start:
        ensure_commands({"dockerd": "docker.io"}, log)
        log(f"no Docker engine answers at {where}; starting dockerd (log: {DOCKERD_LOG})")
        with open(DOCKERD_LOG, "ab") as out:
            subprocess.Popen(["dockerd"], stdout=out, stderr=out, stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(1)
            try:
                client = docker.from_env(timeout=600)
                client.ping()
                return client
            except Exception as exc:
                first_error = exc
    raise DockerUnavailable(
        f"no Docker engine answers at {where} ({first_error.__class__.__name__}: {first_error}).\n"
        "Start it (`systemctl start docker`, or `dockerd &` as root), or install it "
        "(Debian: apt-get install docker.io); as root on Debian the driver does both itself "
        "unless CPYTHON_PERF_NO_HOST_SETUP=1 or DOCKER_HOST is set."
    )


def engine_version(client) -> tuple[int, int]:
    version = client.version().get("Version", "0.0")
    parts = [int("".join(ch for ch in p if ch.isdigit()) or 0) for p in version.split(".")[:2]]
    return parts[0], parts[1] if len(parts) > 1 else 0


BINFMT_DIR = Path("/proc/sys/fs/binfmt_misc")


def binfmt_problem(entry_text: str | None, handler: str) -> str | None:
    """What is wrong with a binfmt_misc entry for running foreign binaries in containers, or None.

    Docker containers do not have the host's /usr/libexec/qemu-binfmt: the
    handler must be opened at registration (flag F, fix-binary), as Debian's
    qemu-user-static registers it.
    """
    if entry_text is None:
        return f"no binfmt_misc handler {handler} is registered"
    lines = entry_text.splitlines()
    if not lines or lines[0].strip() != "enabled":
        return f"the binfmt_misc handler {handler} is registered but disabled"
    flags = next((l.split(":", 1)[1].strip() for l in lines if l.startswith("flags:")), "")
    if "F" not in flags:
        return (f"the binfmt_misc handler {handler} lacks the F (fix-binary) flag (flags: {flags or 'none'}), "
                "so containers cannot find its interpreter")
    return None


def ensure_binfmt(arch, log=print) -> None:
    """Make the host run arch's binaries (in containers too): qemu-user-static registered with binfmt_misc.

    arch is a matrix.ArchFacts.  Installs qemu-user-static and binfmt-support,
    mounts binfmt_misc and enables the handler when allowed; otherwise says
    what to do.
    """
    handler = arch.qemu_user
    ensure_commands({f"{handler}-static": "qemu-user-static", "update-binfmts": "binfmt-support"}, log)
    entry = BINFMT_DIR / handler

    def read():
        try:
            return entry.read_text()
        except OSError:
            return None

    problem = binfmt_problem(read(), handler)
    if problem and host_setup_allowed():
        if not (BINFMT_DIR / "register").exists():
            subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(BINFMT_DIR)], capture_output=True)
        subprocess.run(["update-binfmts", "--enable", handler], capture_output=True)
        problem = binfmt_problem(read(), handler)
        if not problem:
            log(f"registered the {handler} binfmt_misc handler (qemu-user-static)")
    if problem:
        raise DriverError(
            f"{arch.name} programs cannot run on this host: {problem}.\n"
            f"Fix: apt-get install qemu-user-static binfmt-support, then `update-binfmts --enable {handler}` "
            "(as root; mount binfmt_misc on /proc/sys/fs/binfmt_misc first if it is not)."
        )

"""The archive's own binary packages of a lane's exact version, downloaded in the build image (apt checks
them against the signed indices) and kept in the cache: what lintian and the checks compare the built
packages with."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from ..errors import DriverError
from ..matrix import Lane
from .docker_run import docker_run_command, run_captured


def archive_dir(cache: Path, lane: Lane) -> Path:
    """Where the archive's packages of the lane's version are kept, in the lane's cache directory."""
    return cache / f"archive-{lane.package_version}"


def download_archive_debs(lane: Lane, image: str, archive_dir: Path, names: list[str], log=print) -> None:
    """The archive's binary packages of the lane's exact version (apt verifies them against the signed
    indices), downloaded in the build container, kept in the cache."""
    wanted = [n for n in names if not n.endswith("-udeb")]
    have = {p.name.split("_", 1)[0] for p in archive_dir.glob("*.deb")}
    if archive_dir.is_dir() and set(wanted) <= have:
        return
    archive_dir.mkdir(parents=True, exist_ok=True)
    script = ("apt-get update -qq && for p in " + " ".join(shlex.quote(f"{n}={lane.package_version}")
                                                           for n in wanted)
              + "; do apt-get download -q \"$p\" || echo \"MISSING $p\"; done")
    proc = run_captured(docker_run_command(image, ["sh", "-c", script], mounts={archive_dir: "/a"},
                                           workdir="/a"))
    missing = re.findall(r"^MISSING (\S+)", proc.stdout, re.M)
    if missing:
        log(f"{lane.name}: the archive does not serve {', '.join(missing)}")
    if proc.returncode != 0 or not any(archive_dir.glob("*.deb")):
        raise DriverError(f"downloading the archive's {lane.source_package} {lane.package_version} binaries "
                          f"failed: {(proc.stderr or proc.stdout)[-2000:]}")

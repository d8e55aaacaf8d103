"""An image made without an image registry: a root file system from mmdebstrap, then `docker import`.

The project's base images (bases.py), the stock images of cpython_perf.check.external and the packaging lanes'
build and checking images (cpython_perf.lanes.images) are all made so: each gives its mmdebstrap command
line, bootstrap_image runs it and imports the tarball it wrote, and the tag exists only once the image is whole.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

from .. import progress
from ..errors import ImageBuildFailed


def mmdebstrap_archive_args(suite: str, uri: str | None, extra_suites=(), target: str = "rootfs.tar") -> list[str]:
    """mmdebstrap's suite, target and mirror arguments.  With no archive named, no mirror is given: mmdebstrap
    then takes its default archive for a Debian suite, and the extra suites are added to the sources list it
    wrote (a setup hook, before anything is downloaded) with that list's own archive."""
    if uri is not None:
        return [suite, target, f"deb {uri} {suite} main", *(f"deb {uri} {extra} main" for extra in extra_suites)]
    hooks = [f"--setup-hook=uri=$(awk '$1 == \"deb\" && $3 == \"{suite}\" {{print $2; exit}}' "
             f"\"$1/etc/apt/sources.list\") && [ -n \"$uri\" ] && "
             f"echo \"deb $uri {extra} main\" >> \"$1/etc/apt/sources.list\"" for extra in extra_suites]
    return [*hooks, suite, target]


def bootstrap_image(client, cmd: list[str], tar: Path, tag: str, log, *, log_file: Path | None = None,
                    labels: dict[str, str] | None = None) -> None:
    """Run cmd (an mmdebstrap command line writing the root file system to tar), then `docker import` tar as tag
    with labels.  mmdebstrap's output goes to log_file (appended; default: results/logs/mmdebstrap-<tag>.log,
    started anew) with a heartbeat on log; a failure's message has its tail.  The tag exists only where the
    import made it with every label: ImageBuildFailed otherwise."""
    log("$ " + shlex.join(cmd))
    path = log_file or progress.log_path(f"mmdebstrap-{tag}")
    with progress.Progress(f"mmdebstrap {tag}", path, log, append=log_file is not None) as step:
        rc = step.run(cmd)
        step.ok = rc == 0
    if rc != 0:
        _clean_mmdebstrap_leftovers(step.tail(2000), log)
        raise ImageBuildFailed(f"mmdebstrap for {tag} failed (exit {rc}); {step.failure()}")
    log(f"importing {tar.stat().st_size >> 20} MiB rootfs as {tag}")
    repository, _, version = tag.partition(":")
    changes = [f"LABEL {name}={value}" for name, value in (labels or {}).items()]
    try:
        client.api.import_image_from_file(str(tar), repository=repository, tag=version, changes=changes or None)
        imported = client.images.get(tag).labels or {}
    except Exception as exc:   # docker.errors.APIError, ImageNotFound: nothing was imported
        raise ImageBuildFailed(f"docker import did not create {tag}: {exc}") from None
    wrong = {name: imported.get(name) for name, value in (labels or {}).items() if imported.get(name) != value}
    if wrong:
        raise ImageBuildFailed(f"docker import of {tag} gave other labels than {labels}: {wrong}")


def _clean_mmdebstrap_leftovers(log_tail: str, log) -> None:
    """After a failed setup, mmdebstrap's file-mirror-automount hook can leave the .debs bind-mounted in its
    temporary root, which it then cannot remove: unmount those (only under the tempdir its log names)."""
    tempdirs = re.findall(r"^I: removing tempdir (/\S+?)\.\.\.$", log_tail, re.M)
    for tempdir in dict.fromkeys(tempdirs):
        if not re.fullmatch(r"/tmp/mmdebstrap\.[A-Za-z0-9]+", tempdir) or not Path(tempdir).exists():
            continue
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()
                  if line.split()[1].startswith(tempdir + "/")]
        for mount in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", mount], capture_output=True)
        shutil.rmtree(tempdir, ignore_errors=True)
        log(f"removed what mmdebstrap left in {tempdir} ({len(mounts)} bind mounts)")

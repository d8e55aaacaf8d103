"""The base images cell images are built on, made once and kept under a tag that names their package list.

The host's base, two ways from one package list (docker/base-packages.txt):
  registry   FROM debian:<suite>-slim + apt-get install, where an image registry answers;
  bootstrap  mmdebstrap --variant=apt --include=<list> + `docker import`, where none does.
`auto` uses the registry if debian:<suite>-slim is present or can be pulled.

A foreign arch (aarch64) has its own base image, always bootstrapped with
mmdebstrap --architectures=<arch> (docker/base-packages-<arch>.txt), and its
cells are cross-compiled on the host base (docker/cell-cross.Dockerfile.j2)
with the interpreter of a host cell of the same version as the build Python.
A non-host arch the host kernel runs natively (i386) has its own base image
too, bootstrapped the same way from the host's list (render.native_base_packages),
and its cells are built inside it like the host's (docker/cell.Dockerfile.j2).
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path

from .. import host
from ..errors import DriverError, ImageBuildFailed
from ..arches import ARCH_FACTS, HOST_ARCH, runs_natively
from ..source import sources
from . import render
from .bootstrap import bootstrap_image, mmdebstrap_archive_args
from .docker_build import docker_build, image_exists, scratch_dir

BASE_MODE_ENV = "CPYTHON_PERF_BASE_MODE"
BASE_MODES = ("auto", "registry", "bootstrap")


def ensure_base_image(client, suite: str, mode: str | None = None, log=print) -> str:
    """Return the tag of the base image, creating it if it does not exist."""
    packages = render.base_packages()
    tag = render.host_base_image_tag(suite)
    if image_exists(client, tag):
        return tag
    mode = mode or os.environ.get(BASE_MODE_ENV, "auto")
    if mode not in BASE_MODES:
        raise DriverError(f"base image mode {mode!r} is not one of {', '.join(BASE_MODES)} "
                          f"(set by {BASE_MODE_ENV} or --base-mode)")
    if mode == "auto":
        mode = "registry" if _registry_base_available(client, suite, log) else "bootstrap"
    started = time.monotonic()
    if mode == "registry":
        dockerfile = render.render_base_dockerfile(suite, packages)
        with tempfile.TemporaryDirectory(prefix="cpython-perf-base-") as ctx:
            Path(ctx, "Dockerfile").write_text(dockerfile)
            docker_build(client, Path(ctx), tag, log)
    else:
        bootstrap_base(client, suite, packages, tag, log)
    log(f"base image {tag} ready ({mode} mode, {time.monotonic() - started:.0f} s)")
    return tag


def _registry_base_available(client, suite: str, log) -> bool:
    ref = f"debian:{suite}-slim"
    if image_exists(client, ref):
        return True
    try:
        client.images.pull("debian", tag=f"{suite}-slim")
        return True
    except Exception as exc:
        first = str(exc).splitlines()[0][:200]
        log(f"no image registry answers ({first}); bootstrapping the base image with mmdebstrap")
        return False


def ensure_arch_base_image(client, suite: str, arch: str, log=print) -> str:
    """The base image of a non-host arch's cells, bootstrapped with mmdebstrap --architectures if missing:
    under qemu-user for a foreign arch, natively for one the host kernel runs (i386 on x86_64).  The host's
    own arch: its base (ensure_base_image)."""
    if arch == HOST_ARCH:
        return ensure_base_image(client, suite, log=log)
    facts = ARCH_FACTS[arch]
    tag = render.arch_base_image_tag(suite, arch)
    if image_exists(client, tag):
        return tag
    if not runs_natively(arch):
        host.ensure_binfmt(facts, log)
    started = time.monotonic()
    bootstrap_base(client, suite, render.arch_base_packages(arch), tag, log, debian_arch=facts.debian)
    log(f"base image {tag} ready (bootstrap mode, {arch}, {time.monotonic() - started:.0f} s)")
    return tag


def bootstrap_base(client, suite: str, packages: list[str], tag: str, log, debian_arch: str | None = None,
                   extra_suites: tuple[str, ...] = ()) -> None:
    """A base of packages bootstrapped as tag: mmdebstrap suite (and extra_suites of the same archive, e.g.
    bookworm-backports) from the Debian archive of sources.debian_archive_uri(), then `docker import`."""
    host.ensure_commands({"mmdebstrap": "mmdebstrap"}, log)
    apt_options: list[str] = []
    for attempt in (1, 2):
        with tempfile.TemporaryDirectory(prefix="cpython-perf-rootfs-", dir=scratch_dir()) as tmp:
            tar = Path(tmp) / "rootfs.tar"
            arch_option = [f"--architectures={debian_arch}"] if debian_arch else []
            cmd = ["mmdebstrap", "--variant=apt", *arch_option, *apt_options, f"--include={','.join(packages)}",
                   *mmdebstrap_archive_args(suite, sources.debian_archive_uri(), extra_suites, str(tar))]
            try:
                bootstrap_image(client, cmd, tar, tag, log)
                return
            except ImageBuildFailed as exc:
                expired = expired_release(str(exc))
                if attempt == 2 or expired is None:
                    raise
        log(f"the archive's Release file ({expired}) has expired: a frozen or snapshot archive, whose index no "
            f"longer renews its Valid-Until date. Bootstrapping {tag} again with {IGNORE_VALID_UNTIL} (its "
            "signature is still checked, only its age is not; the image's own apt is set the same way)")
        apt_options = [f"--aptopt={IGNORE_VALID_UNTIL}"]


# apt's option for an archive whose Release file is past its Valid-Until date (a frozen copy, snapshot.debian.org)
IGNORE_VALID_UNTIL = 'Acquire::Check-Valid-Until "false"'


def expired_release(text: str) -> str | None:
    """The Release file apt refused as expired in text (mmdebstrap's output), or None."""
    m = re.search(r"Release file for (\S+) is expired", text)
    return m.group(1) if m else None

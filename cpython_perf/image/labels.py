"""The labels a cell image carries, and whether a local image is the one its inputs make.

INPUTS_LABEL holds the digest of every input of the image (Dockerfile, build script, tarball hash, patches,
additions: context.build_context); the Dockerfile sets it, so an image is tagged with the label of the inputs it
was built from and a stale image is never taken for the current one (image_is_current).  The same label marks
the packaging lanes' bootstrapped images (cpython_perf.lanes.images).

Labels that describe the build rather than its inputs (the project's repository, its git revision: build_labels)
are given to `docker build` beside the Dockerfile, never rendered into it, so that a new commit which changes no
input keeps the digest, and an image pulled from a registry (cpython_perf.image.registry) says which revision
built it.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from ..matrix import PROJECT_ROOT, Cell
from ..source import patches
from .context import BuildContext

INPUTS_LABEL = "org.cpython-perf.inputs"
# Build-time labels (build_labels): OCI's annotations of where the image comes from, and what CPython source
# and patch series are inside
SOURCE_LABEL = "org.opencontainers.image.source"
REVISION_LABEL = "org.opencontainers.image.revision"
CPYTHON_URL_LABEL = "org.cpython-perf.cpython.url"
CPYTHON_SHA256_LABEL = "org.cpython-perf.cpython.sha256"
SERIES_LABEL = "org.cpython-perf.series.sha256"
# The project's repository URL for SOURCE_LABEL; where unset, GitHub Actions' $GITHUB_SERVER_URL/$GITHUB_REPOSITORY,
# and where neither is set the label is left out (the driver names no repository host of its own)
SOURCE_ENV = "CPYTHON_PERF_IMAGE_SOURCE"


def series_digest(cell: Cell) -> str | None:
    """The sha256 of a cell's patch series as `sha256sum series $(sed 's/#.*//' series) | sha256sum` computes it
    in the series' directory: the series file, then each patch it names, in order.  None: a cell without one."""
    if not cell.series:
        return None
    lines = [f"{hashlib.sha256(cell.series.read_bytes()).hexdigest()}  series\n"]
    lines += [f"{hashlib.sha256(p.path.read_bytes()).hexdigest()}  {p.name}\n"
              for p in patches.read_series(cell.series)]
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def project_source(environ=None) -> str | None:
    """The project's repository URL (SOURCE_LABEL): $CPYTHON_PERF_IMAGE_SOURCE, or GitHub Actions' repository."""
    environ = os.environ if environ is None else environ
    if environ.get(SOURCE_ENV, "").strip():
        return environ[SOURCE_ENV].strip()
    server, repository = environ.get("GITHUB_SERVER_URL", ""), environ.get("GITHUB_REPOSITORY", "")
    return f"{server.rstrip('/')}/{repository}" if server and repository else None


def project_revision(environ=None, root: Path = PROJECT_ROOT) -> str | None:
    """The git revision the image is built from (REVISION_LABEL): GitHub Actions' $GITHUB_SHA, or the checkout's
    HEAD, with `-dirty` appended (as `git describe --dirty` does) where tracked files differ from it.  None where
    neither is known (no git, not a checkout)."""
    environ = os.environ if environ is None else environ
    if environ.get("GITHUB_SHA", "").strip():
        return environ["GITHUB_SHA"].strip()
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", "-q", "HEAD"], capture_output=True,
                              text=True, timeout=30)
        if head.returncode != 0 or not head.stdout.strip():
            return None
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    dirty = "-dirty" if status.returncode != 0 or status.stdout.strip() else ""
    return head.stdout.strip() + dirty


def build_labels(inputs: BuildContext, environ=None, revision: str | None = None) -> dict[str, str]:
    """The labels `docker build` adds to a cell image beside its Dockerfile's (cell, modes, inputs digest): the
    project's repository and git revision where known, the CPython source's URL and sha256, the series' digest.
    None of them enters the inputs digest: the revision changes with every commit, the source and series are in
    it already (the tarball by its sha256)."""
    cell = inputs.cell
    labels = {CPYTHON_URL_LABEL: cell.recipe.url, CPYTHON_SHA256_LABEL: cell.recipe.sha256}
    series = series_digest(cell)
    if series:
        labels[SERIES_LABEL] = series
    source = project_source(environ)
    if source:
        labels[SOURCE_LABEL] = source
    revision = revision if revision is not None else project_revision(environ)
    if revision:
        labels[REVISION_LABEL] = revision
    return labels


def image_is_current(client, inputs: BuildContext) -> bool:
    """Whether the local image of inputs' cell carries inputs' digest (INPUTS_LABEL)."""
    import docker.errors

    try:
        image = client.images.get(inputs.cell.image)
    except docker.errors.ImageNotFound:
        return False
    return (image.labels or {}).get(INPUTS_LABEL) == inputs.digest

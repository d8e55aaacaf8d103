"""The image stage: a cell image built from its build context with `docker build`.

The context must come from a verified source with its series checked on it (the source stage with fetch), made
for this host.  The directory `docker build` is given holds the rendered Dockerfile, the build script, the
tarball, the series and the additions (prepare_context).  The base images it starts from are made first where
missing (bases.py); the image carries the Dockerfile's labels (the cell, its modes, the inputs digest) and the
build's (labels.build_labels), and is tagged only when the build succeeds.  A cross build's build Python image
must exist already (pipeline.py makes it first).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ..errors import DriverError
from ..arches import HOST_ARCH
from ..source import patches
from . import bases, render
from .context import BuildContext
from .docker_build import docker_build, scratch_dir
from .labels import build_labels


def check_buildable(inputs: BuildContext) -> None:
    """A DriverError unless inputs' source was verified and its series checked on it, for this host."""
    cell = inputs.cell
    if not inputs.source.verified or inputs.series.applied is None:
        raise DriverError(f"{cell.name}: its build context was made without fetching the source (fetch=False); "
                          "a build needs the source verified and its series checked on it first")
    if inputs.host != HOST_ARCH:
        raise DriverError(f"{cell.name}: its inputs were computed for an {inputs.host} host; this one is {HOST_ARCH}")


def build_cell_image(client, inputs: BuildContext, suite: str, log=print, base_mode: str | None = None,
                     no_cache: bool = False, *, tag: str | None = None,
                     variation: render.BuildVariation | None = None, container_limits: dict | None = None) -> str:
    """Build the cell image of inputs and tag it (tag: another tag than the cell's image, e.g. a reproducibility
    build's; variation and container_limits: a build under other conditions, cpython_perf.image.reproducibility);
    the tag."""
    check_buildable(inputs)
    cell = inputs.cell
    if cell.arch == HOST_ARCH or cell.foreign:
        bases.ensure_base_image(client, suite, base_mode, log)   # host cells and cross builds run on the host's base
    if cell.arch != HOST_ARCH:
        # the arch's own base: what a foreign cell is installed on, what a native one (i386) is built in
        bases.ensure_arch_base_image(client, suite, cell.arch, log)
    tag = tag or cell.image
    with tempfile.TemporaryDirectory(prefix=f"cpython-perf-{cell.name}-", dir=scratch_dir()) as ctx:
        prepare_context(inputs, Path(ctx), variation)
        docker_build(client, Path(ctx), tag, log, no_cache, labels=build_labels(inputs),
                     container_limits=container_limits)
    return tag


def prepare_context(inputs: BuildContext, ctx: Path, variation: render.BuildVariation | None = None) -> str:
    """Fill ctx, the directory `docker build` is given, from inputs (variation: a build under other conditions,
    cpython_perf.image.reproducibility); return the rendered Dockerfile."""
    cell = inputs.cell
    varied = variation is not None or not inputs.rendered
    dockerfile = inputs.dockerfile(inputs.digest, variation) if varied else inputs.rendered
    (ctx / "Dockerfile").write_text(dockerfile)
    shutil.copy2(render.BUILD_SCRIPT, ctx / "build-cpython.sh")
    try:
        os.link(inputs.tarball, ctx / cell.recipe.filename)
    except OSError:
        shutil.copy2(inputs.tarball, ctx / cell.recipe.filename)
    series = inputs.series
    if series.series:
        (ctx / "patches").mkdir()
        shutil.copy2(series.series, ctx / "patches" / "series")
        for p in series.patches:
            shutil.copy2(p.path, ctx / "patches" / p.name)
    if series.additions:
        patches.copy_additions(series.additions, patches.ADDITIONS_ROOT, ctx / "additions")
    return dockerfile

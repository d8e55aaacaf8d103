"""A cell down the stages to its image: `python -m cpython_perf build CELL`, and the look-ups the conformance
fixtures, the CI plan, `push` and `render` make of a cell's inputs.

build_cell takes the stages one after the other, each once: the source (cpython_perf.source.cell_source), the
build context (context.py), the image (cell_image.py), its SBOM (sbom.py).  Before them it looks for an image of
the same inputs, here or published in a registry: the inputs digest takes the source tarball by its pinned
sha256, so that look-up fetches nothing (cell_inputs with fetch=False).
"""

from __future__ import annotations

import time
from pathlib import Path

from .. import host
from ..matrix import Cell, Matrix, load_matrix
from ..source.cell_source import cell_source
from . import cell_image, context, labels, sbom
from . import registry as published   # build_cell's `registry` is the registry's reference
from .context import BuildContext


def cell_inputs(cell: Cell, suite: str, cache_dir: Path | None = None, log=print, matrix: Matrix | None = None, *,
                fetch: bool = True, host: str | None = None) -> BuildContext:
    """The cell's build context from its source stage: fetched, verified and checked (fetch), or from the pins
    alone (fetch=False: the CI plan, a look-up by digest; the same digest).  host: the arch of the machine that
    builds it (default: this one).  A cross-compiled cell needs matrix to find its build Python cell."""
    return context.cell_context(cell_source(cell, matrix, cache_dir, log, fetch=fetch, host=host), suite)


def build_cell(cell: Cell, matrix: Matrix | None = None, log=print, base_mode: str | None = None,
               cache_dir: Path | None = None, no_cache: bool = False, registry: str | None = None) -> dict:
    """Make the cell's image cpython-perf:<cell>: its source fetched and verified and its series checked on it,
    its build context (Dockerfile and inputs digest), the image built from that context, its SBOM attached;
    return the timings, the tag, the inputs digest and how the image was had (`how`).

    Without no_cache: a local image whose inputs label is the cell's inputs digest is used as it is (whoever
    built it: Docker's layer cache keys a COPY on the files' owners, so another user's build would not reuse
    its layers), else, with a registry (cpython_perf.image.registry), the image published for the cell's inputs
    is pulled; only where neither is had does it build."""
    matrix = matrix or load_matrix()
    started = time.monotonic()
    client = None
    if not no_cache:
        client = host.docker_client(log)
        known = cell_inputs(cell, matrix.base_suite, cache_dir, log, matrix, fetch=False)
        how = _current_or_pulled(client, known, registry, log)
        if how:
            return {"cell": cell.name, "image": cell.image, "seconds": time.monotonic() - started,
                    "inputs": known.digest, "how": how}
    source = cell_source(cell, matrix, cache_dir, log)
    inputs = context.cell_context(source, matrix.base_suite)
    client = client or host.docker_client(log)
    tag = _image(client, inputs, matrix.base_suite, log, base_mode, no_cache, _puller(client, registry, log))
    sbom.attach_sbom(client, inputs, tag, matrix.base_suite, log)
    seconds = time.monotonic() - started
    log(f"built {cell.image} in {seconds:.1f} s")
    return {"cell": cell.name, "image": cell.image, "seconds": seconds, "inputs": inputs.digest, "how": "built"}


def _image(client, inputs: BuildContext, suite: str, log, base_mode: str | None = None, no_cache: bool = False,
           pull=None) -> str:
    """The image stage of inputs (cell_image.build_cell_image), a cross build's build Python image first: it is
    a stage of this build, used as it is where current, else pulled (pull: a function of BuildContext, True
    where it fetched the image of those inputs from a registry), else built with its SBOM."""
    cell_image.check_buildable(inputs)
    build_python = inputs.build_python
    if build_python and not labels.image_is_current(client, build_python) and not (pull and pull(build_python)):
        log(f"{build_python.cell.image} (the build Python of {inputs.cell.name}) is missing or stale; building it")
        built = _image(client, build_python, suite, log, base_mode, pull=pull)
        sbom.attach_sbom(client, build_python, built, suite, log)
    return cell_image.build_cell_image(client, inputs, suite, log, base_mode, no_cache)


def _puller(client, registry: str | None, log):
    """_image's pull: the published image of some inputs from registry (None: no registry)."""
    if not registry:
        return None
    return lambda inputs: published.pull_published(client, inputs, registry, log)


def _current_or_pulled(client, inputs: BuildContext, registry: str | None, log) -> str | None:
    """`current` where the local image carries inputs' digest, `pulled` where the registry had it, else None."""
    if labels.image_is_current(client, inputs):
        log(f"{inputs.cell.image} is current (its label {labels.INPUTS_LABEL} is these inputs' digest "
            f"{inputs.digest}): used as it is, not pulled or built (--no-cache builds it again)")
        return "current"
    if registry and published.pull_published(client, inputs, registry, log):
        return "pulled"
    return None


def ensure_cell_image(cell: Cell, matrix: Matrix | None = None, log=print, registry: str | None = None) -> str:
    """The cell's image tag, building it first unless an image of the same inputs exists here or, with a
    registry (default: $CPYTHON_PERF_REGISTRY, where set), is published there.

    The inputs digest takes the source tarball by its pinned sha256, so an image whose label carries that
    digest is trusted as it is, without fetching the source (a CI cell job loads the image its image job
    built; python.org being unreachable then changes nothing).  Only a build fetches."""
    matrix = matrix or load_matrix()
    registry = registry or published.configured_registry()
    client = host.docker_client(log)
    known = cell_inputs(cell, matrix.base_suite, None, log, matrix, fetch=False)
    if labels.image_is_current(client, known) or (
            registry and published.pull_published(client, known, registry, log)):
        return cell.image
    log(f"{cell.image} is missing or stale; building it")
    inputs = cell_inputs(cell, matrix.base_suite, None, log, matrix)
    tag = _image(client, inputs, matrix.base_suite, log, pull=_puller(client, registry, log))
    sbom.attach_sbom(client, inputs, tag, matrix.base_suite, log)
    return cell.image


def push_cell(cell: Cell, registry: str, matrix: Matrix | None = None, log=print) -> str:
    """Publish the cell's current image in registry under its inputs digest (cpython_perf.image.registry); the
    `<repository>@<manifest digest>` pushed.  No source is fetched: the digest is computed as the plan does."""
    matrix = matrix or load_matrix()
    inputs = cell_inputs(cell, matrix.base_suite, None, log, matrix, fetch=False)
    return published.push_published(host.docker_client(log), inputs, registry, log)


def rendered_dockerfile(cell: Cell, matrix: Matrix | None = None) -> str:
    """The cell's Dockerfile as this host builds it (no source fetched, no digest label)."""
    matrix = matrix or load_matrix()
    return cell_inputs(cell, matrix.base_suite, log=lambda *_: None, matrix=matrix, fetch=False).dockerfile()

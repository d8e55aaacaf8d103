"""The operations behind `nox -s build-<cell>` and the conformance fixtures."""

from __future__ import annotations

import time
from pathlib import Path

from .. import host
from . import images
from . import registry as published
from ..matrix import Cell, Matrix, load_matrix


def build_cell(cell: Cell, matrix: Matrix | None = None, log=print, base_mode: str | None = None,
               cache_dir: Path | None = None, no_cache: bool = False, registry: str | None = None) -> dict:
    """The cell down the stages, each once: the source (its tarball fetched and verified, its series checked on
    it), the build context (its Dockerfile rendered, its inputs digest: images.cell_inputs), the image (built,
    its SBOM attached, tagged: images.build_cell_image); return timings, the tag and how it was had (`how`).

    Without no_cache: a local image whose inputs label is the cell's inputs digest is used as it is (whoever
    built it: Docker's layer cache keys a COPY on the files' owners, so another user's build would not reuse
    its layers), else, with a registry (cpython_perf.build.registry), the image published for the cell's inputs
    is pulled; only where neither is had does it build."""
    matrix = matrix or load_matrix()
    started = time.monotonic()
    client = None
    if not no_cache:
        client = host.docker_client(log)
        known = images.cell_inputs(cell, matrix.base_suite, cache_dir, log, matrix, fetch=False)
        how = _current_or_pulled(client, known, registry, log)
        if how:
            return {"cell": cell.name, "image": cell.image, "seconds": time.monotonic() - started,
                    "inputs": known.digest, "how": how}
    inputs = images.cell_inputs(cell, matrix.base_suite, cache_dir, log, matrix)
    client = client or host.docker_client(log)
    images.build_cell_image(client, inputs, matrix.base_suite, log, base_mode, no_cache,
                            pull=_puller(client, registry, log))
    seconds = time.monotonic() - started
    log(f"built {cell.image} in {seconds:.1f} s")
    return {"cell": cell.name, "image": cell.image, "seconds": seconds, "inputs": inputs.digest, "how": "built"}


def _puller(client, registry: str | None, log):
    """images.build_cell_image's pull: the published image of some inputs from registry (None: no registry)."""
    if not registry:
        return None
    return lambda inputs: published.pull_published(client, inputs, registry, log)


def _current_or_pulled(client, inputs: images.BuildContext, registry: str | None, log) -> str | None:
    """`current` where the local image carries inputs' digest, `pulled` where the registry had it, else None."""
    if images.image_is_current(client, inputs):
        log(f"{inputs.cell.image} is current (its label {images.INPUTS_LABEL} is these inputs' digest "
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
    known = images.cell_inputs(cell, matrix.base_suite, None, log, matrix, fetch=False)
    if images.image_is_current(client, known) or (
            registry and published.pull_published(client, known, registry, log)):
        return cell.image
    inputs = images.cell_inputs(cell, matrix.base_suite, None, log, matrix)
    log(f"{cell.image} is missing or stale; building it")
    images.build_cell_image(client, inputs, matrix.base_suite, log, pull=_puller(client, registry, log))
    return cell.image


def push_cell(cell: Cell, registry: str, matrix: Matrix | None = None, log=print) -> str:
    """Publish the cell's current image in registry under its inputs digest (cpython_perf.build.registry); the
    `<repository>@<manifest digest>` pushed.  No source is fetched: the digest is computed as the plan does."""
    matrix = matrix or load_matrix()
    inputs = images.cell_inputs(cell, matrix.base_suite, None, log, matrix, fetch=False)
    return published.push_published(host.docker_client(log), inputs, registry, log)


def rendered_dockerfile(cell: Cell, matrix: Matrix | None = None) -> str:
    """The cell's Dockerfile as this host builds it (no source fetched, no digest label)."""
    matrix = matrix or load_matrix()
    return images.cell_inputs(cell, matrix.base_suite, log=lambda *_: None, matrix=matrix, fetch=False).dockerfile()


def sbom_command(matrix: Matrix, args, log=print) -> int:
    """`python -m cpython_perf sbom CELL`: the SBOM of the cell's current image (cpython_perf.build.sbom)."""
    from . import sbom
    from ..errors import DriverError

    cell = matrix.cell(args.cell)
    client = host.docker_client(log)
    inputs = images.cell_inputs(cell, matrix.base_suite, None, log, matrix)
    if not images.image_is_current(client, inputs):
        raise DriverError(f"{cell.image} is missing or was built from other inputs: build it first "
                          f"(`nox -s build-{cell.name}`), the SBOM describes the image")
    packages = sbom.image_packages(client, cell.image)
    facts = sbom.cell_facts(inputs, packages, distro=sbom.distro_of(matrix.base_suite))
    text = sbom.cell_bom(facts)
    out = sbom.write(text, Path(args.out) if args.out else images.sbom_results_path(cell.name))
    label, carried = sbom.image_sbom(client, cell.image)
    if carried == text and label == sbom.label_value(text):
        attached = f"the same document is in the image at {sbom.IMAGE_SBOM_PATH} (label {sbom.SBOM_LABEL}={label})"
    elif args.attach:
        images.attach_sbom(client, inputs, cell.image, matrix.base_suite, log=lambda line: None, save=False)
        attached = (f"attached it to {cell.image} at {sbom.IMAGE_SBOM_PATH} "
                    f"(label {sbom.SBOM_LABEL}={sbom.label_value(text)})")
    elif carried is None:
        attached = ("the image carries no SBOM (built by a driver that did not attach one): --attach puts it "
                    "into the image")
    else:
        attached = f"the image carries another SBOM at {sbom.IMAGE_SBOM_PATH} (label {label}): --attach replaces it"
    log(f"{out}: CycloneDX {sbom.SPEC_VERSION}, valid (the library's JSON-schema validator); {len(packages)} Debian "
        f"packages, {len(facts.patches)} patches, {len(facts.additions)} additions; {attached}")
    return 0

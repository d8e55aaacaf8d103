"""`python -m cpython_perf sbom CELL`: the SBOM of a cell's current image, written, compared with the one the
image carries, and (--attach) put into it.  A lane's SBOM (--lane) is cpython_perf.lanes's."""

from __future__ import annotations

from pathlib import Path

from .. import host
from ..errors import DriverError
from ..matrix import Matrix
from . import labels, sbom
from .pipeline import cell_inputs


def sbom_command(matrix: Matrix, args, log=print) -> int:
    """The SBOM of the cell's current image (cpython_perf.image.sbom); exit status 0."""
    cell = matrix.cell(args.cell)
    client = host.docker_client(log)
    inputs = cell_inputs(cell, matrix.base_suite, None, log, matrix)
    if not labels.image_is_current(client, inputs):
        raise DriverError(f"{cell.image} is missing or was built from other inputs: build it first "
                          f"(`nox -s build-{cell.name}`), the SBOM describes the image")
    packages = sbom.image_packages(client, cell.image)
    facts = sbom.cell_facts(inputs, packages, distro=sbom.distro_of(matrix.base_suite))
    text = sbom.cell_bom(facts)
    out = sbom.write(text, Path(args.out) if args.out else sbom.sbom_results_path(cell.name))
    label, carried = sbom.image_sbom(client, cell.image)
    if carried == text and label == sbom.label_value(text):
        attached = f"the same document is in the image at {sbom.IMAGE_SBOM_PATH} (label {sbom.SBOM_LABEL}={label})"
    elif args.attach:
        sbom.attach_sbom(client, inputs, cell.image, matrix.base_suite, log=lambda line: None, save=False)
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

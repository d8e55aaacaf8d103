"""The operations behind `nox -s build-<cell>` and the conformance fixtures."""

from __future__ import annotations

import time
from pathlib import Path

from . import host, images
from .matrix import Cell, Matrix, load_matrix


def build_cell(cell: Cell, matrix: Matrix | None = None, log=print, base_mode: str | None = None,
               cache_dir: Path | None = None, no_cache: bool = False) -> dict:
    """Fetch, check, and build the cell's image; return timings and the tag."""
    matrix = matrix or load_matrix()
    started = time.monotonic()
    inputs = images.cell_inputs(cell, matrix.base_suite, cache_dir, log, matrix)
    client = host.docker_client(log)
    images.build_cell_image(client, inputs, matrix.base_suite, log, base_mode, no_cache)
    seconds = time.monotonic() - started
    log(f"built {cell.image} in {seconds:.1f} s")
    return {"cell": cell.name, "image": cell.image, "seconds": seconds, "inputs": inputs.digest}


def ensure_cell_image(cell: Cell, matrix: Matrix | None = None, log=print) -> str:
    """The cell's image tag, building it first unless an image of the same inputs exists.

    The inputs digest takes the source tarball by its pinned sha256, so an image whose label carries that
    digest is trusted as it is, without fetching the source (a CI cell job loads the image its image job
    built; python.org being unreachable then changes nothing).  Only a build fetches."""
    matrix = matrix or load_matrix()
    client = host.docker_client(log)
    if images.image_is_current(client, images.cell_inputs(cell, matrix.base_suite, None, log, matrix,
                                                          fetch=False)):
        return cell.image
    inputs = images.cell_inputs(cell, matrix.base_suite, None, log, matrix)
    log(f"{cell.image} is missing or stale; building it")
    images.build_cell_image(client, inputs, matrix.base_suite, log)
    return cell.image


def rendered_dockerfile(cell: Cell, matrix: Matrix | None = None) -> str:
    """The cell's Dockerfile as this host builds it (no source fetched, no digest label)."""
    matrix = matrix or load_matrix()
    return images.cell_inputs(cell, matrix.base_suite, log=lambda *_: None, matrix=matrix, fetch=False).dockerfile()

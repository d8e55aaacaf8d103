"""A cell's build context: what its image is made from, and the inputs digest over all of it.

From the source stage's value (cpython_perf.source.cell_source) it takes the base images, renders the Dockerfile
from docker/ (render.py) and digests every input: the Dockerfile, the build Python's digest (a cross build), the
build script, the tarball's pinned sha256, the series file, each patch and each addition.  The digest labels the
image (labels.INPUTS_LABEL) and names it in a registry (registry.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from pathlib import Path

from ..arches import HOST_ARCH
from ..matrix import Cell
from ..source import patches, sources
from ..source.cell_source import CellSource
from . import render


@dataclass(frozen=True)
class BuildContext:
    """The build context of a cell: everything its image is made from (the source and the series the source
    stage handed over, the base images, the rendered Dockerfile) and the inputs digest of them all, which
    labels the image (labels.INPUTS_LABEL) and names it in a registry."""

    cell: Cell
    base_tag: str
    source: sources.VerifiedSource
    series: patches.CheckedSeries
    digest: str
    # a cross-compiled cell: its arch's base image, and the context of the host
    # cell whose interpreter is the build Python
    target_base_tag: str = ""
    build_python: "BuildContext | None" = None

    host: str = HOST_ARCH   # the arch of the machine that builds it
    rendered: str = ""      # the Dockerfile as built, with the digest label (build_context renders it once)

    @property
    def tarball(self) -> Path:
        return self.source.tarball

    @property
    def patches(self) -> list[patches.Patch]:
        return list(self.series.patches)

    def dockerfile(self, digest: str = "unset", variation: render.BuildVariation | None = None) -> str:
        return render.render_cell_dockerfile(
            self.cell, self.base_tag, digest, target_base_image=self.target_base_tag,
            build_python_image=self.build_python.cell.image if self.build_python else "", host=self.host,
            variation=variation)


def cell_context(source: CellSource, suite: str) -> BuildContext:
    """The build context of the cell the source stage handed over, for the host it was gathered for (a cross
    build's includes its build Python cell's: a change there rebuilds it too)."""
    build_python = cell_context(source.build_python, suite) if source.build_python else None
    return build_context(source.cell, suite, source.source, source.series, build_python, source.host)


def build_context(cell: Cell, suite: str, source: sources.VerifiedSource, series: patches.CheckedSeries,
                  build_python: BuildContext | None = None, host: str | None = None) -> BuildContext:
    """The cell's build context: its base images, its Dockerfile rendered from docker/, and the inputs digest
    over the Dockerfile, the build Python's digest (a cross build), the build script, the tarball's pinned
    sha256, the series file, each patch and each addition.  host: the arch of the machine that builds it
    (default: this one): a cell built natively and the same cell cross-compiled have different Dockerfiles,
    so different digests."""
    host = host or HOST_ARCH
    base_tag = render.build_base_image_tag(suite, cell.arch, host)
    target_base_tag = render.foreign_base_image_tag(suite, cell.arch, host) if cell.foreign_on(host) else ""
    undigested = BuildContext(cell, base_tag, source, series, "", target_base_tag, build_python, host)
    digest = hashlib.sha256()
    for part in (
        undigested.dockerfile().encode(),
        *([build_python.digest.encode()] if build_python else []),
        render.BUILD_SCRIPT.read_bytes(),
        cell.recipe.sha256.encode(),
        series.series.read_bytes() if series.series else b"",
        *(p.path.read_bytes() for p in series.patches),
        *((rel.encode() + (patches.ADDITIONS_ROOT / rel).read_bytes()) for rel in series.additions),
    ):
        digest.update(hashlib.sha256(part).digest())
    digested = dataclasses.replace(undigested, digest=digest.hexdigest())
    return dataclasses.replace(digested, rendered=digested.dockerfile(digested.digest))

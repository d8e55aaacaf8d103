"""The source stage of a cell: its tarball and its patch series, as the image stage takes them.

With fetch (a build): the tarball from the source cache or fetched, its bytes and signature checked
(sources.verified_source; may raise SourceUnavailable, HashMismatch, SignatureError), then the series applied
to it on the host (patches.check_cell_series: PatchFailed names the patch that does not apply).  Without
(the CI plan, a look-up by inputs digest): the pins and the series' bytes only, nothing fetched or applied;
the inputs digest takes the tarball by its pinned sha256, so both give the same digest.

A cell cross-compiled on the host needs a second CPython, its build Python cell's (matrix.build_python_cell_on),
so its source comes with that cell's too (CellSource.build_python).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import DriverError
from ..arches import HOST_ARCH, cannot_build_reason
from ..matrix import Cell, Matrix
from . import patches, sources


@dataclass(frozen=True)
class CellSource:
    """The source stage's value for a cell built on host: its source, its series, and (a cross build) its build
    Python cell's."""

    cell: Cell
    source: sources.VerifiedSource
    series: patches.CheckedSeries
    host: str = HOST_ARCH
    build_python: "CellSource | None" = None


def cell_source(cell: Cell, matrix: Matrix | None = None, cache_dir: Path | None = None, log=print, *,
                fetch: bool = True, host: str | None = None) -> CellSource:
    """The cell's source and series for a build on host (default: this machine; the CI plan asks for its
    runner's): fetched, verified and checked, or (fetch=False) as the pins name them.  A cell that host cannot
    build is an error saying where it builds; a cross-compiled one needs matrix to find its build Python cell."""
    host = host or HOST_ARCH
    why_not = cannot_build_reason(cell.arch, host)
    if why_not:
        raise DriverError(f"{cell.name}: {why_not}")
    if fetch:   # the verified tarball, then the series checked on it
        source = sources.verified_source(cell.recipe, cache_dir, log)
        series = patches.check_cell_series(patches.read_cell_series(cell.series, cell.additions), source,
                                           patches.ADDITIONS_ROOT, log)
    else:       # the pins and the series' bytes are all the inputs digest needs
        source = sources.pinned_source(cell.recipe)
        series = patches.read_cell_series(cell.series, cell.additions)
    build_python = None
    if cell.foreign_on(host):
        if matrix is None:
            raise DriverError(f"{cell.name} is cross-compiled: the matrix is needed to find its build Python cell")
        build_python = cell_source(matrix.build_python_cell_on(cell, host), matrix, cache_dir, log, fetch=fetch,
                                   host=host)
    return CellSource(cell, source, series, host, build_python)

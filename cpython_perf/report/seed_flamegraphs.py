"""Each cell's seed flame graph: results/<cell>/seed.perf-script.txt drawn to seed-flamegraph.svg (by inferno in
the tools image, cpython_perf.report.flamegraph), then read back for py::foo inside py::bar's span."""

from __future__ import annotations

from pathlib import Path

from ..check.suite_results import SEED_PERF_SCRIPT
from ..matrix import Matrix
from ..record.perf_runs import SEED_SCRIPT
from ..record.perf_samples import py_symbol
from .flamegraph_svg import svg_nests
from .messages import first_line

SEED_FLAMEGRAPH = "seed-flamegraph.svg"
FLAME_GRAPH_NOTE = (
    "Seed flame graphs: the perf samples of each cell's seed run (results/<cell>/seed.perf-script.txt, its first "
    "perf mode, -X activation) collapsed and drawn by inferno (Debian's librust-inferno-dev, in the tools image); "
    "each link says whether the SVG shows py::foo inside py::bar's span, above it.")
SEED_NESTING = (py_symbol("foo", SEED_SCRIPT), py_symbol("bar", SEED_SCRIPT))   # (callee, caller)


def render_flamegraphs(results_dir: Path, cells, renderer) -> dict[str, tuple[str | None, str]]:
    """Render results/<cell>/seed.perf-script.txt to seed-flamegraph.svg where it exists.

    renderer(perf_script, svg, title) draws the SVG or raises with the reason;
    a string instead of a renderer says why none could be had.
    """
    out: dict[str, tuple[str | None, str]] = {}
    for cell in cells:
        source = results_dir / cell / SEED_PERF_SCRIPT
        if not source.is_file():
            continue
        svg = results_dir / cell / SEED_FLAMEGRAPH
        if not callable(renderer):
            out[cell] = (None, f"no renderer: {renderer}")
            continue
        try:
            renderer(source, svg, f"{cell}: the seed script")
        except Exception as exc:
            svg.unlink(missing_ok=True)
            out[cell] = (None, f"renderer failed: {first_line(str(exc))}")
            continue
        inner, outer = SEED_NESTING
        shown = svg_nests(svg.read_text(errors="replace"), inner, outer)
        out[cell] = (f"{cell}/{SEED_FLAMEGRAPH}",
                     f"{inner} under {outer}" if shown else f"does NOT show {inner} under {outer}")
    return out


def default_renderer(matrix: Matrix):
    """inferno in the tools image; or, where Docker is not available, the reason."""
    from .. import host
    from ..errors import DockerUnavailable
    from .flamegraph import render_flamegraph

    try:
        client = host.docker_client()
    except DockerUnavailable as exc:
        return f"Docker is not available for the tools image ({first_line(str(exc))})"
    return lambda source, svg, title: render_flamegraph(client, matrix, source, svg, title, log=lambda s: None)

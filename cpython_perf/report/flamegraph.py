"""The report's flame graphs: inferno over a `perf script` output file, run in the tools image
(cpython_perf.image.tools builds it; docker/flamegraph is the command).  `python -m cpython_perf profile` draws
its flame graph with the same renderer."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import DriverError
from ..image.tools import FLAMEGRAPH_COMMAND, ensure_tools_image
from ..matrix import Matrix
from ..run import containers


def render_flamegraph(client, matrix: Matrix, perf_script: Path, svg: Path, title: str, log=print) -> None:
    """Render perf_script (`perf script` output) to svg with inferno, in the tools image.

    Raises DriverError with the renderer's message on failure; svg is then absent.
    """
    perf_script = perf_script.resolve()
    svg = svg.resolve()
    partial = svg.with_name(svg.name + ".partial")
    mounts = {perf_script.parent: "/in"}
    out_dir = "/in"
    if svg.parent != perf_script.parent:
        mounts[svg.parent] = out_dir = "/out"
    command = f'{FLAMEGRAPH_COMMAND} "$TITLE" < /in/{perf_script.name} > {out_dir}/{partial.name}'
    run_renderer(client, matrix, command, mounts, svg, title, f"{FLAMEGRAPH_COMMAND} failed on {perf_script}", log)


def run_renderer(client, matrix: Matrix, command: str, mounts: dict, svg: Path, title: str, failure: str,
                 log=print) -> None:
    """Run command (which writes svg's NAME.partial through mounts) in the tools image with $TITLE; then the
    partial file becomes svg.  Raises DriverError starting with failure, leaving no svg, when it does not."""
    tag = ensure_tools_image(client, matrix, log)
    partial = svg.with_name(svg.name + ".partial")
    result = containers.run(client, tag, command, workdir="/", mounts=mounts, env={"TITLE": title}, timeout=600)
    if result.exit_code != 0 or not partial.is_file() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        message = (result.stderr or result.stdout).strip().splitlines()
        raise DriverError(f"{failure} (exit {result.exit_code}): {message[-1] if message else 'no output'}")
    os.replace(partial, svg)

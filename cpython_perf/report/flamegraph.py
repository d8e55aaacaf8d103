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
    tag = ensure_tools_image(client, matrix, log)
    perf_script = perf_script.resolve()
    svg = svg.resolve()
    partial = svg.with_name(svg.name + ".partial")
    mounts = {perf_script.parent: "/in"}
    out_dir = "/in"
    if svg.parent != perf_script.parent:
        mounts[svg.parent] = out_dir = "/out"
    command = f'{FLAMEGRAPH_COMMAND} "$TITLE" < /in/{perf_script.name} > {out_dir}/{partial.name}'
    result = containers.run(client, tag, command, workdir="/", mounts=mounts, env={"TITLE": title}, timeout=600)
    if result.exit_code != 0 or not partial.is_file() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        message = (result.stderr or result.stdout).strip().splitlines()
        raise DriverError(f"{FLAMEGRAPH_COMMAND} failed on {perf_script} (exit {result.exit_code}): "
                          f"{message[-1] if message else 'no output'}")
    os.replace(partial, svg)

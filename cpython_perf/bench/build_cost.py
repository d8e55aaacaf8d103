"""Build cost: a cell's cold image build, its no-change rebuild, and the same build on the host.

`python -m cpython_perf bench build --cell 3.13-fp` (`nox -s bench-build -- ...`), for each cell:

- cold: `docker build --no-cache` of the cell image (base image present: it is shared by every cell);
- no change: the same build again, every layer from the cache (what `nox -s build-<cell>` costs when
  nothing changed);
- host: docker/build-cpython.sh -- the script the image runs -- run on this host over the same
  build context (tarball, additions, series) with the cell's CFLAGS and configure options, into a
  temporary prefix.  The host's compiler and -dev packages are this machine's, not the image's: the
  optional modules the host build could not make are listed with the result, as `make` names them.

Writes results/bench/build-<UTC timestamp>.json; BENCHMARKS.md shows the latest one.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from ..image import bases, pipeline, render
from ..image.cell_image import prepare_context
from ..image.context import BuildContext
from ..image.docker_build import scratch_dir
from .. import host
from . import common
from ..errors import DriverError
from ..arches import HOST_ARCH

RESULTS_DIR = common.RESULTS_DIR
GROUP = "build"   # results/bench/build-<UTC time>.json
_MISSING = re.compile(r"necessary bits to build these optional modules were not found:\n(.*?)(?:\nTo find|\n\n|$)", re.S)


def missing_modules(make_output: str) -> list[str]:
    """The optional modules `make` says it could not build (CPython's setup.py / configure summary)."""
    found = []
    for block in _MISSING.findall(make_output):
        found += block.split()
    return sorted(set(found))


def host_build(inputs: BuildContext, log=print) -> dict:
    """Run build-cpython.sh on the host over the cell's build context; seconds and what it could not build."""
    cell = inputs.cell
    if cell.arch != HOST_ARCH:
        raise DriverError(f"{cell.name} is built for {cell.arch}; the host build is measured for host cells")
    with tempfile.TemporaryDirectory(prefix=f"cpython-perf-host-{cell.name}-", dir=scratch_dir()) as tmp:
        ctx = Path(tmp, "context")
        ctx.mkdir()
        prepare_context(inputs, ctx)
        env = dict(os.environ, TARBALL=cell.recipe.filename, SRCDIR=cell.recipe.srcdir, PREFIX=str(Path(tmp, "prefix")),
                   CFLAGS=cell.cflags, CONFIGURE_ARGS=" ".join(cell.configure_args()))
        log(f"{cell.name}: build-cpython.sh on the host")
        started = time.monotonic()
        done = subprocess.run(["bash", str(render.BUILD_SCRIPT), str(ctx), str(Path(tmp, "work"))], env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True)
        seconds = time.monotonic() - started
        output = done.stdout + done.stderr
        if done.returncode != 0:
            raise DriverError(f"the host build of {cell.name} failed (exit {done.returncode}):\n{output[-3000:]}")
    return {"seconds": round(seconds, 1), "missing_modules": missing_modules(output),
            "compiler": _first_line(["cc", "--version"])}


def _first_line(command: list[str]) -> str:
    try:
        return subprocess.run(command, capture_output=True, text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        return "unknown"


def measure(matrix, cells, cold: bool = True, on_host: bool = True, log=print) -> dict:
    client = host.docker_client(log)
    bases.ensure_base_image(client, matrix.base_suite, log=log)
    out = {"created": common.utc_stamp(), "machine": common.machine_info(), "cells": {}}
    quiet = lambda line: None  # noqa: E731
    for cell in cells:
        entry: dict = {}
        if cold:
            log(f"{cell.name}: cold build (--no-cache)")
            entry["cold_seconds"] = round(pipeline.build_cell(cell, matrix, log=quiet, no_cache=True)["seconds"], 1)
        log(f"{cell.name}: no-change rebuild")
        entry["no_change_seconds"] = round(pipeline.build_cell(cell, matrix, log=quiet)["seconds"], 1)
        if on_host and cell.arch == HOST_ARCH:
            entry["host"] = host_build(pipeline.cell_inputs(cell, matrix.base_suite, None, quiet, matrix), log)
        out["cells"][cell.name] = entry
    return out


def render_markdown(results: dict, source: str = "") -> str:
    lines = [
        "## Build cost",
        "",
        f"From {source or 'a build-cost run'} ({results['created']}; `python -m cpython_perf bench build`). "
        "Wall time on the measuring host (see Machine): the cell image built with `--no-cache` (base image present), the same build "
        "again with nothing changed, and docker/build-cpython.sh run on the host over the same context.",
        "",
        "| cell | cold image build | no-change rebuild | same build on the host | host could not build |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for name, cell in results["cells"].items():
        cold = f"{cell['cold_seconds']:.0f} s" if "cold_seconds" in cell else "-"
        hosted = cell.get("host")
        on_host = f"{hosted['seconds']:.0f} s" if hosted else "-"
        missing = ", ".join(hosted["missing_modules"]) if hosted and hosted["missing_modules"] else "-"
        lines.append(f"| {name} | {cold} | {cell['no_change_seconds']:.1f} s | {on_host} | {missing} |")
    return "\n".join(lines) + "\n"


def latest_results(directory: Path = RESULTS_DIR) -> Path | None:
    return common.latest_group_results(directory, GROUP)


# The group's command line (cpython_perf.bench.command): `python -m cpython_perf bench build ...`


def arguments(parser) -> None:
    parser.add_argument("--no-cold", action="store_true", help="skip the --no-cache build")
    parser.add_argument("--no-host", action="store_true", help="skip the build on the host")


def run(matrix, cells, args, log) -> dict:
    return measure(matrix, cells, not args.no_cold, not args.no_host, log)


def report(results: dict, path: Path) -> None:
    print(render_markdown(results, str(path)))

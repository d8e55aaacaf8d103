"""Command line of the driver: `python -m cpython_perf COMMAND ...`.

Errors the user can act on (DriverError) are printed as one message, without
a traceback, and the exit status is non-zero.
"""

from __future__ import annotations

import argparse
import json
import sys

from . import build, host, images, patches, sources
from .errors import DriverError
from .matrix import load_matrix


def _log(line: str) -> None:
    print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cpython_perf", description=__doc__.splitlines()[0])
    parser.add_argument("--matrix", help="path of matrix.yaml (default: the project's)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("cells", help="list the cells of the matrix as JSON lines")
    p = sub.add_parser("render", help="print a cell's rendered Dockerfile")
    p.add_argument("cell")
    p = sub.add_parser("fetch", help="fetch and verify a cell's source tarball")
    p.add_argument("cell")
    p = sub.add_parser("build", help="build a cell's image cpython-perf:<cell>")
    p.add_argument("cell")
    p.add_argument("--base-mode", choices=images.BASE_MODES, default=None,
                   help="how to make the base image (default: auto, or $CPYTHON_PERF_BASE_MODE)")
    p.add_argument("--no-cache", action="store_true", help="rebuild every layer of the cell image")
    p = sub.add_parser("base-image", help="create the base image if it does not exist")
    p.add_argument("--mode", choices=images.BASE_MODES, default=None)
    p = sub.add_parser("check-series", help="apply a cell's additions and series to its pristine source")
    p.add_argument("cell")
    args = parser.parse_args(argv)

    try:
        matrix = load_matrix(args.matrix)
        if args.command == "cells":
            for cell in matrix.cells.values():
                print(json.dumps({"name": cell.name, "version": cell.recipe.version, "variant": cell.variant.name,
                                  "arch": cell.arch, "modes": list(cell.modes), "support": cell.support,
                                  "image": cell.image}))
        elif args.command == "render":
            sys.stdout.write(build.rendered_dockerfile(matrix.cell(args.cell), matrix))
        elif args.command == "fetch":
            cell = matrix.cell(args.cell)
            path = sources.fetch_source(cell.recipe, log=_log)
            print(path)
        elif args.command == "build":
            build.build_cell(matrix.cell(args.cell), matrix, _log, args.base_mode, no_cache=args.no_cache)
        elif args.command == "base-image":
            print(images.ensure_base_image(host.docker_client(_log), matrix.base_suite, args.mode, _log))
        elif args.command == "check-series":
            cell = matrix.cell(args.cell)
            tarball = sources.fetch_source(cell.recipe, log=_log)
            count = patches.check_series_applies(tarball, cell.recipe.srcdir, cell.additions,
                                                 images.ADDITIONS_ROOT, cell.series)
            for p in patches.read_series(cell.series) if cell.series else []:
                missing = patches.missing_dep3_fields(p.path)
                if missing:
                    raise DriverError(f"patch {p.name} lacks DEP-3 fields: {', '.join(missing)}")
            print(f"{cell.name}: {len(cell.additions)} additions and {count} patches apply to {cell.recipe.srcdir}")
    except DriverError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return 0

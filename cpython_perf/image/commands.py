"""The image stage's subcommands of `python -m cpython_perf`: render, build, push, base-image, tools-image,
reproducibility."""

from __future__ import annotations

import sys

from .. import host
from ..errors import DriverError
from ..arches import HOST_ARCH, KNOWN_ARCHES
from ..matrix import load_matrix
from ..progress import add_verbose_option
from ..subcommands import Command, log
from . import bases, pipeline, registry, reproducibility, tools


def _cell_argument(parser) -> None:
    parser.add_argument("cell")


def _render(args) -> None:
    matrix = load_matrix(args.matrix)
    sys.stdout.write(pipeline.rendered_dockerfile(matrix.cell(args.cell), matrix))


def _build_arguments(parser) -> None:
    add_verbose_option(parser)
    parser.add_argument("cell")
    parser.add_argument("--base-mode", choices=bases.BASE_MODES, default=None,
                        help="how to make the base image (default: auto, or $CPYTHON_PERF_BASE_MODE)")
    parser.add_argument("--no-cache", action="store_true",
                        help="build the cell image, every layer, even where a local image carries its inputs "
                             "digest (without it, such an image is used as it is, whoever built it)")
    parser.add_argument("--if-stale", action="store_true",
                        help="build only if no image of the same inputs digest exists (a CI worker's build step)")
    parser.add_argument("--registry", default=None, metavar="REF",
                        help="an image registry, host[:port][/path] (default: $CPYTHON_PERF_REGISTRY, else none): "
                             "use a current local image, else pull the one published for the cell's inputs "
                             "digest, and build only where neither is had (cpython_perf/image/registry.py)")


def _build(args) -> None:
    matrix = load_matrix(args.matrix)
    cell = matrix.cell(args.cell)
    if args.if_stale and not args.no_cache:
        pipeline.ensure_cell_image(cell, matrix, log, registry.configured_registry(args.registry))
        log(f"{cell.image} is current")
    else:
        pipeline.build_cell(cell, matrix, log, args.base_mode, no_cache=args.no_cache,
                            registry=registry.configured_registry(args.registry))


def _push_arguments(parser) -> None:
    parser.add_argument("cell")
    parser.add_argument("--registry", default=None, metavar="REF",
                        help=f"host[:port][/path], e.g. {registry.EXAMPLE} (default: $CPYTHON_PERF_REGISTRY)")


def _push(args) -> None:
    matrix = load_matrix(args.matrix)
    cell = matrix.cell(args.cell)
    where = registry.configured_registry(args.registry)
    if where is None:
        raise DriverError(f"push needs a registry: --registry REF or ${registry.REGISTRY_ENV} "
                          f"(e.g. {registry.EXAMPLE})")
    print(pipeline.push_cell(cell, where, matrix, log))


def _base_image_arguments(parser) -> None:
    add_verbose_option(parser)
    parser.add_argument("--mode", choices=bases.BASE_MODES, default=None)
    parser.add_argument("--arch", choices=KNOWN_ARCHES, default=HOST_ARCH,
                        help="the base of another arch's cells (always bootstrapped; --mode is the host base's)")


def _base_image(args) -> None:
    matrix = load_matrix(args.matrix)
    client = host.docker_client(log)
    print(bases.ensure_base_image(client, matrix.base_suite, args.mode, log) if args.arch == HOST_ARCH
          else bases.ensure_arch_base_image(client, matrix.base_suite, args.arch, log))


def _tools_image(args) -> None:
    print(tools.ensure_tools_image(host.docker_client(log), load_matrix(args.matrix), log))


def _reproducibility_arguments(parser) -> None:
    add_verbose_option(parser)
    parser.add_argument("cell")
    parser.add_argument("--out", default=None, help="results directory (default: results/reproducibility/<cell>)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the two images (cpython-perf-repro:<cell>-a-<pid>, -b-<pid>)")
    parser.add_argument("--other-build-path", action="store_true",
                        help="build b in another directory too (CPython records its build directory: shows "
                             "what that changes)")


def _reproducibility(args) -> int:
    matrix = load_matrix(args.matrix)
    summary = reproducibility.run(matrix.cell(args.cell), matrix, log, args.out, args.keep, args.other_build_path)
    return 1 if summary["unexplained"] else 0


COMMANDS = (
    Command("render", "print a cell's rendered Dockerfile", _cell_argument, _render),
    Command("build", "build a cell's image cpython-perf:<cell>", _build_arguments, _build),
    Command("push", "publish a cell's current image in a registry as <registry>/cpython-perf:<cell>-<inputs digest>",
            _push_arguments, _push),
    Command("base-image", "create the base image if it does not exist", _base_image_arguments, _base_image),
    Command("tools-image", "create the tools image (samply, flame graphs) if it does not exist",
            add_verbose_option, _tools_image),
    Command("reproducibility", "build a cell twice (its own build; then another build path, umask, locale, time "
                               "zone, CPU count, later) and compare their /opt/cpython (diffoscope); exit 1 on a "
                               "difference without a known reason (cpython_perf/image/reproducibility.py)",
            _reproducibility_arguments, _reproducibility),
)

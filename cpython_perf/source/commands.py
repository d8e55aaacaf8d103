"""The source stage's subcommands of `python -m cpython_perf`: fetch, pin."""

from __future__ import annotations

from ..matrix import load_matrix
from ..subcommands import Command, log
from . import pins, sources


def _cell_argument(parser) -> None:
    parser.add_argument("cell")


def _fetch(args) -> None:
    cell = load_matrix(args.matrix).cell(args.cell)
    print(sources.fetch_source(cell.recipe, log=log))


def _pin(args) -> int:
    return pins.main(load_matrix(args.matrix), args, log)


COMMANDS = (
    Command("fetch", "fetch and verify a cell's source tarball", _cell_argument, _fetch),
    Command("pin", "pin a series to its newest python.org release (signature checked), or --check: list the pins "
                   "behind (cpython_perf/source/pins.py)", pins.add_arguments, _pin),
)

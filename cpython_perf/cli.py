"""Command line of the driver: `python -m cpython_perf COMMAND ...`.

Each package declares its own subcommands (COMMANDS: cpython_perf.subcommands.Command); this module puts
them under one parser, in the order a cell goes through the stages, then the packaging lanes, CI and the
benchmarks.  Every subcommand runs through subcommands.run: errors the user can act on (DriverError) are
printed as one message, without a traceback: exit status 2 for a usage error (argparse's, an unknown cell,
a bad matrix), 1 for a runtime failure (errors.RuntimeFailure).  Long steps print a heartbeat and keep
their output in results/logs/ (cpython_perf.progress); --verbose prints all of it.
"""

from __future__ import annotations

import argparse
import json
import sys

from . import doctor, progress, subcommands
from .bench import command as bench
from .check import commands as check
from .ci import commands as ci
from .lanes import commands as lanes
from .image import commands as image
from .matrix import load_matrix
from .profile import commands as profile
from .record import commands as record
from .report import commands as report
from .source import commands as source

PROG = "python -m cpython_perf"


def _cells(args) -> None:
    for cell in load_matrix(args.matrix).cells.values():
        print(json.dumps({"name": cell.name, "version": cell.recipe.version, "variant": cell.variant.name,
                          "arch": cell.arch, "modes": list(cell.modes), "support": cell.support,
                          "image": cell.image}))


CELLS = subcommands.Command("cells", "list the cells of the matrix as JSON lines", subcommands.no_arguments, _cells)

COMMANDS = (doctor.COMMAND, CELLS, *source.COMMANDS, *image.COMMANDS, *record.COMMANDS, *check.COMMANDS,
            *report.COMMANDS, *profile.COMMANDS, *lanes.COMMANDS, *ci.COMMANDS, *bench.COMMANDS)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    top.add_argument("--matrix", help="path of matrix.yaml (default: the project's)")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        subcommands.add_command(sub, command)
    return top


def main(argv: list[str] | None = None) -> int:
    argv, program = profile.split_program(sys.argv[1:] if argv is None else list(argv))
    args = subcommands.parse(parser(), argv)
    args.program = program
    if getattr(args, "verbose", False):
        progress.set_verbose()
    return subcommands.run(next(c for c in COMMANDS if c.name == args.command), args)

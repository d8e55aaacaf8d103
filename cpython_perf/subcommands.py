"""The subcommands of `python -m cpython_perf`: what a package declares, and the one place each runs.

A package lists the subcommands it brings in COMMANDS (its `commands` module; bench's `command`); cli.py
puts every package's under one parser.  Whether a subcommand is started as `python -m cpython_perf NAME`
or by its module's own `python -m cpython_perf.<module>` form (main_of), it runs through `run`: a
DriverError is printed as one line, `error: ...`, without a traceback, and its exit_code returned (2 for a
usage error, 1 for a runtime failure: errors.py); Ctrl-C exits 130.

The standard library and errors.py only: `python -m cpython_perf.record.clean_tmp` runs with a container's
own Python, without the driver's dependencies.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Callable

from .errors import DriverError

# set on a parser (pass_unknown_arguments) whose command takes the arguments it does not know: args.unknown
PASSES_UNKNOWN = "passes_unknown_arguments"


@dataclass(frozen=True)
class Command:
    """A subcommand: `add_arguments(parser)` declares its arguments, `run(args)` does it and returns the exit
    status (None: 0).  args.matrix is the path of matrix.yaml the user gave (None: the project's)."""

    name: str
    help: str                                   # its line in `python -m cpython_perf --help`
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], "int | None"]
    description: str | None = None              # the first line of `NAME --help` (default: none)
    usage: str | None = None                    # argparse's own usage line where it would mislead


def no_arguments(parser: argparse.ArgumentParser) -> None:
    """add_arguments of a command that takes none."""


def pass_unknown_arguments(parser: argparse.ArgumentParser) -> None:
    """The command of this parser takes the arguments no parser knows (they are handed on, e.g. to pytest),
    in args.unknown; any other command refuses them."""
    parser.set_defaults(**{PASSES_UNKNOWN: True})


def log(line: str) -> None:
    """The progress lines of a command: on stdout, at once."""
    print(line, flush=True)


def add_command(subparsers, command: Command) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(command.name, help=command.help, description=command.description,
                                   usage=command.usage)
    command.add_arguments(parser)
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """parser.parse_args, except that a command marked by pass_unknown_arguments gets the arguments no parser
    knows in args.unknown (every other command: argparse's usage error, exit 2)."""
    args, unknown = parser.parse_known_args(argv)
    if unknown and not getattr(args, PASSES_UNKNOWN, False):
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    args.unknown = unknown
    return args


def run(command: Command, args: argparse.Namespace) -> int:
    """Run a parsed command: its exit status, a DriverError said in one line."""
    try:
        status = command.run(args)
    except DriverError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return 0 if status is None else status


def main_of(command: Command, argv: list[str] | None, prog: str) -> int:
    """One command with a parser of its own, as its module's `python -m` form runs it: the same arguments and
    the same run as `python -m cpython_perf NAME`."""
    parser = argparse.ArgumentParser(prog=prog, description=command.description, usage=command.usage)
    parser.set_defaults(matrix=None)   # `python -m cpython_perf --matrix` has no place here: the project's
    command.add_arguments(parser)
    return run(command, parse(parser, sys.argv[1:] if argv is None else list(argv)))

"""The record stage's subcommands of `python -m cpython_perf`, for programs the driver did not start: record,
activate, clean-tmp; and jit-inject, perf inject --jit for perf_jit recordings in one ELF per trampoline arena."""

from __future__ import annotations

from ..matrix import load_matrix
from ..subcommands import Command, log
from . import activate, clean_tmp, jit_inject, outside


def _record(args) -> int:
    return outside.main(load_matrix(args.matrix), args, log)


def _activate(args) -> int:
    return activate.main(load_matrix(args.matrix), args, log)


def _jit_inject(args) -> int:
    return jit_inject.run(args, log)


COMMANDS = (
    Command("record", "record the processes of a running container with perf from outside it (the host's pid "
                      "namespace), keeping each one's perf map or jitdump where perf reads it after the process "
                      "exited (cpython_perf/record/outside.py)", outside.add_arguments, _record,
            usage="python -m cpython_perf record --container NAME [--pid PID ...] [--mode MODE] [--seconds N] "
                  "[--out DIR] [-F HZ] [--perf-image IMAGE | --host-perf] [-- PERF RECORD OPTIONS]"),
    Command("activate", "switch the perf trampoline of a running Python process from outside it (gdb asks, the "
                        "interpreter switches at a safe point): a service started without -X perf "
                        "(cpython_perf/record/activate.py)", activate.add_arguments, _activate,
            usage="python -m cpython_perf activate (--container NAME [--pid PID] | --pid PID) "
                  "[--mode perf|perf_jit|off] [--timeout S] [--tools-image IMAGE | --host-gdb]"),
    clean_tmp.COMMAND,
    Command("jit-inject", "perf inject --jit for a -X perf_jit recording, one ELF per trampoline arena instead of "
                          "one per code object: seconds instead of minutes for many functions "
                          "(cpython_perf/record/jit_inject.py)", jit_inject.add_arguments, _jit_inject,
            usage="python -m cpython_perf jit-inject -i PERF_DATA -o OUT [--root DIR] [--fallback-perf PERF]"),
)

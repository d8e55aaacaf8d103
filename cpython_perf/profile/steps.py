"""The command lines a profile run runs in its container (cwd /src, outputs in /out), in order: profile_steps.

With the perf of the image and the target's record options (record_options: perf_runs.record_options, as
the conformance suite records: `-g` for perf; `-k 1 --call-graph dwarf` and a ring buffer sized to the
memlock limit for perf_jit), at -F 999 by default:

    perf record ... -o /out/perf.data -- python -X MODE script.py ARGS
    python -E /opt/cpython-perf/jit_inject.py -i /out/perf.data -o /out/perf.jit.data --fallback-perf perf
                                                                        (perf_jit: record/jit_inject.py)
    perf script -F comm,pid,tid,time,event,ip,sym,dso -i DATA > /out/perf.script.txt
    perf report -i DATA --stdio --no-children ... > /out/perf.report.txt

A step is required unless it says otherwise (a failure ends the run; the report's does not).  Around them:
the program's path under /src (program_argv), the ring buffer measured in the container
(ring_buffer_step), and the hand-over of what the run wrote to the invoking user (marker_command before,
ownership_command after).  The container's paths and the files a run writes are named here.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from ..errors import DriverError
from ..record.perf_samples import PERF_SCRIPT_FIELDS
from ..record.viewer_files import VIEWER_FILES
from .target import Target

SRC, OUT, TMP = "/src", "/out", "/tmp"
# record/jit_inject.py, mounted read-only: perf inject --jit's work for perf_jit in one ELF per trampoline arena
# (perf's own writes one file per code object and slows down with their number), run by the program's python
JIT_INJECT = "/opt/cpython-perf/jit_inject.py"
# What a run writes into the output directory (removed before a run, so no file is left from an older one)
PERF_DATA, JIT_DATA = "perf.data", "perf.jit.data"
SCRIPT_TEXT, REPORT_TEXT, FLAMEGRAPH, COMMANDS_TEXT = "perf.script.txt", "perf.report.txt", "flamegraph.svg", "commands.txt"
OUTPUTS = (PERF_DATA, PERF_DATA + ".old", JIT_DATA, SCRIPT_TEXT, REPORT_TEXT, FLAMEGRAPH, COMMANDS_TEXT, *VIEWER_FILES)
START_MARKER = f"{TMP}/.cpython-perf-profile-start"
REPORT_OPTIONS = ["--stdio", "--no-children", "--sort", "comm,dso,sym", "-g", "none", "--percent-limit", "0.5"]


@dataclass
class Step:
    """A command run in the profile container: what is printed, and what runs (argv or a shell line)."""

    name: str
    display: str
    argv: list[str]
    stream: bool = False        # the program's own output goes to the terminal
    required: bool = True       # a failure ends the run


RING_BUFFER_PLACEHOLDER = "$(dwarf_mmap)"   # perf_runs.record_options' per-CPU ring buffer of a dwarf recording


def profile_steps(target: Target, mode: str, python: str, program: list[str], frequency: int,
                  ring_buffer: str | None = None) -> list[Step]:
    """The perf command lines of a run, in the container (cwd /src, outputs in /out).  ring_buffer: the -m
    size of a dwarf recording, computed in the container (ring_buffer_step: its memlock limit and CPUs)."""
    from ..record.perf_runs import python_command

    perf = target.perf
    options = record_options(target, mode, frequency)
    if ring_buffer is not None:
        options = [ring_buffer if o == RING_BUFFER_PLACEHOLDER else o for o in options]
    argv, _ = python_command(mode, "xoption", program[0], tuple(program[1:]), python)
    record = [perf, "record", *options, "-o", f"{OUT}/{PERF_DATA}", "--", *argv]
    steps = [Step("record", shlex.join(record), record, stream=True)]
    data = f"{OUT}/{PERF_DATA}"
    if mode == "perf_jit":
        # -E: a PYTHONPERFSUPPORT or PYTHON_PERF_JIT_SUPPORT of the program's environment is not the injector's
        inject = [python, "-E", JIT_INJECT, "-i", data, "-o", f"{OUT}/{JIT_DATA}", "--fallback-perf", perf]
        steps.append(Step("inject", shlex.join(inject), inject))
        data = f"{OUT}/{JIT_DATA}"
    script = f"{shlex.join([perf, 'script', '-F', PERF_SCRIPT_FIELDS, '-i', data])} > {OUT}/{SCRIPT_TEXT}"
    steps.append(Step("script", script, ["sh", "-c", script]))
    report = f"{shlex.join([perf, 'report', '-i', data, *REPORT_OPTIONS])} > {OUT}/{REPORT_TEXT}"
    steps.append(Step("report", report, ["sh", "-c", report], required=False))
    return steps


def ring_buffer_step() -> Step:
    """Prints the per-CPU ring buffer a dwarf recording gets in this container (perf_runs.DWARF_MMAP_FUNCTION)."""
    from ..record.perf_runs import DWARF_MMAP_FUNCTION

    return Step("ring-buffer", "", ["sh", "-c", f"{DWARF_MMAP_FUNCTION}\ndwarf_mmap"])


def marker_command(uid: int) -> str:
    """Before the run: the root-owned paths the current directory already has (they stay root's), listed in
    START_MARKER, whose time marks the start (ownership_command)."""
    return f"find {SRC} -xdev -user 0 > {START_MARKER}" if uid != 0 else f"touch {START_MARKER}"


def ownership_command(uid: int, gid: int) -> str:
    """Give the invoking user what the run wrote: the output directory, and what appeared in the current
    directory during the run owned by root (e.g. __pycache__) -- not what was root's before the run (a
    root-owned directory the program wrote in stays root's)."""
    owner = f"{uid}:{gid}"
    line = ""
    if uid != 0:
        line = (f"[ -e {START_MARKER} ] && find {SRC} -xdev -user 0 -newer {START_MARKER} "
                f"| grep -vxF -f {START_MARKER} | while IFS= read -r p; do chown -h {owner} \"$p\"; done; ")
    return line + f"rm -f {START_MARKER}; chown -R {owner} {OUT}"


def program_argv(program: list[str], cwd: Path) -> list[str]:
    """The python arguments of the program: a script path (relative, or absolute inside cwd) becomes its
    path under /src; anything else (-m module, -c code, a path in the image) is passed as it is."""
    if not program:
        raise DriverError("no program to profile: put it after `--`, e.g. `-- script.py ARGS` or `-- -m module`")
    first = program[0]
    if first.startswith("-"):
        return list(program)
    path = Path(first)
    host = path if path.is_absolute() else cwd / path
    if host.is_file():
        try:
            rel = host.resolve().relative_to(cwd.resolve())
        except ValueError:
            raise DriverError(f"{first} is outside the current directory {cwd}, which is what the container sees "
                              "(mounted at /src): run from a directory that holds it") from None
        return [f"{SRC}/{rel.as_posix()}", *program[1:]]
    if path.is_absolute():
        return list(program)   # a path in the image
    raise DriverError(f"{first}: no such file in {cwd} (the current directory, mounted at /src)")


def record_options(target: Target, mode: str, frequency: int) -> list[str]:
    """perf record options of the mode, as the conformance suite records (perf_runs.record_options), at
    the given frequency."""
    from ..record.perf_runs import record_options as suite_options

    if frequency <= 0:
        raise DriverError(f"--frequency must be a positive number of samples a second, not {frequency}")
    return suite_options(target.run_spec, mode, frequency=frequency)

"""`python -m cpython_perf profile`: the command line (add_arguments, split_program: the program is what
follows the first `--`) and the run (run: target and mode, the image and its requirements, the steps in one
container, the flame graph, the outputs handed back; main: an engine's error said in one line).

Exit status: 0; 2 for a usage error (unknown cell, unclaimed mode, no program); 1 when something
failed at run time (the program's own non-zero exit included: the outputs are written anyway).
"""

from __future__ import annotations

import argparse
import os
import shlex
import time
from pathlib import Path

from .. import subcommands
from ..errors import DriverError
from ..matrix import PERF_MODES, Matrix, load_matrix
from ..record import jit_inject
from ..record.perf_samples import PerfScriptError
from ..record.viewer_files import VIEWER_FILES, write_viewer_files_of_script
from ..record.untrusted_files import Refused, read_regular_file, write_new_file
from .requirements import VENV, ensure_requirements_image, image_path_variable
from .results import draw_flamegraph, prepare_out, report_top, summarise
from .session import Session
from .steps import (COMMANDS_TEXT, FLAMEGRAPH, JIT_DATA, JIT_INJECT, OUT, PERF_DATA, REPORT_TEXT,
                    RING_BUFFER_PLACEHOLDER, SCRIPT_TEXT, SRC, TMP, Step, marker_command, ownership_command,
                    profile_steps, program_argv, record_options, ring_buffer_step)
from .target import MODE_WHY, ProfileFailed, cell_target, choose_mode, external_target, image_id

DEFAULT_OUT = "perf-profile"
DEFAULT_FREQUENCY = 999
# perf script's and perf report's text, read back from the output directory (which the image's program can write)
OUTPUT_LIMIT = 1 << 30


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("cell", nargs="?", help="the matrix cell whose image runs the program (or --image/--python)")
    p.add_argument("--image", help="any image instead of a cell's (with --python)")
    p.add_argument("--python", dest="target_python", help="path of the interpreter in --image")
    p.add_argument("--mode", choices=PERF_MODES, default=None,
                   help="perf mode (default: perf where the cell claims it, frame pointers; else perf_jit)")
    p.add_argument("--requirements", "-r", default=None,
                   help="a pip requirements file, installed once into a venv of a derived image cached per "
                        "(image, file contents)")
    p.add_argument("--reinstall", action="store_true", help="make the requirements' image again even if cached")
    p.add_argument("--out", "-o", default=DEFAULT_OUT, help=f"output directory (default: ./{DEFAULT_OUT})")
    p.add_argument("--frequency", "-F", type=int, default=DEFAULT_FREQUENCY,
                   help=f"sampling frequency in Hz (default {DEFAULT_FREQUENCY}; 9999 for runs under a second)")
    p.add_argument("--no-flamegraph", action="store_true", help="skip the flame graph (no tools image needed)")


def split_program(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """A profile command line split at its first `--`: (the driver's arguments, the program's: what follows,
    handed to python as they are).  None when the command is not `profile` or has no `--`."""
    if "profile" not in argv:
        return argv, None
    start = argv.index("profile")
    if "--" not in argv[start:]:
        return argv, None
    cut = argv.index("--", start)
    return argv[:cut], argv[cut + 1:]


def run(matrix: Matrix, args, program: list[str] | None, log=print, client=None, cwd: Path | None = None,
        owner: tuple[int, int] | None = None) -> int:
    """`python -m cpython_perf profile ...`: see the package's docstring (cpython_perf/profile/__init__.py).  owner: (uid, gid) the outputs are
    given to (default: the invoking user's)."""
    from .. import host
    from ..run import containers

    cwd = (cwd or Path.cwd()).resolve()
    if args.image or args.target_python:
        if args.cell:
            raise DriverError("give a cell or --image/--python, not both")
        if not (args.image and args.target_python):
            raise DriverError("--image and --python go together: the image, and the interpreter's path in it")
    elif not args.cell:
        raise DriverError("which cell? `profile CELL -- script.py` (`python -m cpython_perf cells` lists them), "
                          "or --image IMAGE --python PATH")
    if program is None:
        raise DriverError("no program to profile: put it after `--`, e.g. `profile 3.13-fp -- script.py ARGS`")
    target = cell_target(matrix, args.cell) if args.cell else None
    if target is not None:
        mode = choose_mode(target, args.mode)   # usage errors before anything runs
    argv = program_argv(program, cwd)
    if args.frequency <= 0:
        raise DriverError(f"--frequency must be a positive number of samples a second, not {args.frequency}")
    owner = owner or (os.getuid(), os.getgid())
    client = client or host.docker_client(log)
    record_lines: list[str] = []
    started = time.monotonic()

    if target is None:
        def probe(command):
            return containers.run(client, args.image, command, workdir="/", timeout=300)

        target = external_target(client, args.image, args.target_python, probe)
        mode = choose_mode(target, args.mode)
    elif image_id(client, target.image) is None:
        from ..image import pipeline

        log(f"{target.image} does not exist here: building it (a cold build takes minutes)")
        try:
            pipeline.ensure_cell_image(target.cell, matrix, log)
        except DriverError as exc:   # no source here, a failed build: not a usage error
            raise ProfileFailed(f"{target.image} could not be built: {exc}") from None
    try:
        capability = containers.perf_capability(client, target.image, perf=target.perf)
    except DriverError as exc:   # PerfNotPermitted: this machine's engine, not the command line
        raise ProfileFailed(str(exc)) from None
    log(f"profile: {target.label} in {target.image}, mode {mode} ({MODE_WHY[mode]})")

    image, python = target.image, target.python
    env: dict[str, str] = {}
    if args.requirements:
        image, python = ensure_requirements_image(client, target, cwd / Path(args.requirements).expanduser(),
                                                  args.reinstall, log, record_lines)
        env = {"VIRTUAL_ENV": VENV}
    out = prepare_out((cwd / Path(args.out).expanduser()).resolve())
    mounts = {cwd: (SRC, "rw"), out: (OUT, "rw"), out / "tmp": (TMP, "rw"),
              Path(jit_inject.__file__).resolve(): (JIT_INJECT, "ro")}
    if args.requirements:
        env["PATH"] = f"{VENV}/bin:{image_path_variable(client, image)}"
    failure, program_status, timings = None, None, {}
    session = Session(client, image, mounts, [capability], env, SRC, log, record_lines)
    try:
        session.exec(Step("mark", "", ["sh", "-c", marker_command(owner[0])]), quiet=True)
        ring_buffer = None
        if RING_BUFFER_PLACEHOLDER in record_options(target, mode, args.frequency):
            code, said, _ = session.exec(ring_buffer_step(), quiet=True)
            ring_buffer = said.strip() if code == 0 and said.strip() else None
        steps = profile_steps(target, mode, python, argv, args.frequency,
                              ring_buffer=ring_buffer or "512K")
        for step in steps:
            code, tail, seconds = session.exec(step)
            timings[step.name] = seconds
            if step.name == "record":
                program_status = code
                if code != 0 and not (out / PERF_DATA).is_file():
                    failure = f"perf record failed (exit {code}) and wrote no perf.data: {_last_lines(tail)}"
                    break
                continue
            if code != 0:
                message = f"{step.name} failed (exit {code}): {_last_lines(tail)}"
                if step.required:
                    failure = message
                    break
                log(f"warning: {message}")
        if failure is None and not args.no_flamegraph:
            failure = draw_flamegraph(client, matrix, out, f"{' '.join(program)} ({target.label}, {mode})", log,
                                      record_lines, timings)
    finally:
        session.exec(Step("chown", ownership_command(*owner), ["sh", "-c", ownership_command(*owner)]), quiet=True)
        session.close()
        # the image's program can write the output directory (mounted at /out): a link it left under this
        # name is replaced, never written through
        write_new_file(out / COMMANDS_TEXT, ("\n".join(record_lines) + "\n").encode())
        if owner != (os.getuid(), os.getgid()):
            # as the rest (a root caller handing the outputs to another user)
            os.chown(out / COMMANDS_TEXT, *owner, follow_symlinks=False)
    if (out / SCRIPT_TEXT).is_file():
        try:
            for path in write_viewer_files_of_script(out / SCRIPT_TEXT, f"{' '.join(program)} ({target.label}, {mode})",
                                                     args.frequency, OUTPUT_LIMIT):
                if owner != (os.getuid(), os.getgid()):
                    os.chown(path, *owner, follow_symlinks=False)
        except (Refused, PerfScriptError, OSError) as exc:
            log(f"note: the viewers' files ({', '.join(VIEWER_FILES)}) were not written: {exc}")
    for name, show in ((SCRIPT_TEXT, summarise), (REPORT_TEXT, report_top)):
        try:
            text = read_regular_file(out / name, OUTPUT_LIMIT).decode(errors="replace")
        except FileNotFoundError:
            continue
        except Refused as exc:
            log(f"refused: {exc}")
            continue
        if name == REPORT_TEXT:
            log(f"top of {out / REPORT_TEXT}:")
        for line in show(text):
            log(("  " if name == REPORT_TEXT else "") + line)
    log(f"wrote {out}/: " + ", ".join(n for n in (PERF_DATA, JIT_DATA, SCRIPT_TEXT, REPORT_TEXT, FLAMEGRAPH, COMMANDS_TEXT,
                                                  *VIEWER_FILES)
                                      if (out / n).is_file()) + f" (and tmp/: the maps perf report needs) "
        f"in {time.monotonic() - started:.1f} s ({', '.join(f'{k} {v:.1f} s' for k, v in timings.items())})")
    data = JIT_DATA if mode == "perf_jit" else PERF_DATA
    log("report again: " + shlex.join(["docker", "run", "--rm", "-v", f"{out}:{OUT}", "-v", f"{out / 'tmp'}:{TMP}",
                                       image, target.perf, "report", "-i", f"{OUT}/{data}"]))
    if failure:
        raise ProfileFailed(failure)
    if program_status:
        raise ProfileFailed(f"the program exited with status {program_status} (perf record's exit status); "
                            f"its profile is in {out}")
    return 0


def _last_lines(text: str, n: int = 3) -> str:
    said = [l.strip() for l in text.strip().splitlines() if l.strip()]
    return " / ".join(said[-n:]) or "no output"


def main(matrix: Matrix, args, program: list[str] | None, log=print) -> int:
    """The CLI's entry: run(); an error of the Docker engine is a run-time failure, said in one line."""
    try:
        import docker.errors
    except ImportError:   # host.docker_client says what is missing
        return run(matrix, args, program, log)
    try:
        return run(matrix, args, program, log)
    except docker.errors.DockerException as exc:
        raise ProfileFailed(f"the Docker engine refused: {' '.join(str(exc).split())}") from None


def _run_command(args) -> int:
    return main(load_matrix(args.matrix), args, args.program, subcommands.log)


# args.program: what follows the first `--` (split_program; the command line sets it)
COMMAND = subcommands.Command(
    "profile", "run your own program under real perf in a cell's image (or any image): perf.data, perf script "
               "text, a flame graph written to --out (cpython_perf/profile/)", add_arguments, _run_command,
    usage="python -m cpython_perf profile (CELL | --image IMAGE --python PATH) [--mode MODE] "
          "[--requirements FILE] [--out DIR] [-F HZ] -- script.py [ARGS ...]")
COMMANDS = (COMMAND,)

"""Profile your own program with real perf in a cell image, outputs written back to the host.

    python -m cpython_perf profile CELL [--mode perf|perf_jit] [--requirements FILE] [--out DIR] [-F HZ] \\
        -- script.py ARGS
    python -m cpython_perf profile --image IMAGE --python PATH [...] -- script.py ARGS

What it does, each command line printed as it runs:

1. The image.  A cell's `cpython-perf:<cell>` (built first if missing; used as it is if present, so
   `nox -s build-<cell>` refreshes a stale one), or with --image/--python any image and the path of a
   Python in it, as the conformance suite's external target takes them (cpython_perf.check.external).
2. The mode.  A cell may be profiled only in the perf modes it claims in matrix.yaml (anything else is
   a usage error naming the valid ones).  Default: `perf` where the cell claims it (every claim of
   `perf` is a build with frame pointers: perf record -g, unwound by the kernel, small perf.data, no
   post-processing), else the cell's only claim, `perf_jit` (release cells: no frame pointers; dwarf
   unwinding of a copied stack + `perf inject --jit`).  An --image target claims nothing: its
   interpreter is probed (external.PYTHON_PROBE) and a mode it does not offer is refused; the default
   is `perf` where sysconfig's CFLAGS keep frame pointers, else `perf_jit` where offered.
3. The requirements (--requirements FILE).  The images have no pip, but CPython's bundled ensurepip
   makes one in a venv (checked: 3.9.2, 3.11.2 and 3.13.5 cells).  The venv is made once per
   (image id, python, requirements file contents) in a derived image,
   `cpython-perf-profile:<target>-<hash>`: a container of the image makes the venv at
   /opt/cpython-perf-venv and `pip install -r`s the file; the venv is copied out (a tar) and
   `docker build` adds it to the image (FROM its id, one ADD), tagged only when that succeeded, with
   nothing else of the install container (no mount point, no pip setting).  Why an image rather than
   a venv in a host cache directory mounted in: the venv's scripts and its pyvenv.cfg name absolute
   paths inside the image and its python links to the image's interpreter, so it is only valid with
   that image, whose id the tag's hash covers; Docker removes it with the image (`docker image
   prune`, `docker rmi`); and no root-owned files land in the user's home (the container runs as
   root).  pip in the container reaches the package index the host's pip is configured for
   (pip_passthrough: PIP_* settings of the environment and of pip's configuration files, their CA
   bundle and local index directories mounted read-only; proxy variables).  A requirements file's
   relative paths are read from its own directory (mounted at /requirements); changes to files it
   names are not in the hash: --reinstall makes the image again.
4. The recording.  One container of that image with the current directory at /src (the working
   directory: `script.py` runs as /src/script.py, its py:: symbols say so), the output directory at
   /out and its tmp/ at /tmp (perf-PID.map, jit-PID.dump and the jitted-*.so files perf inject
   writes, kept for `perf report` later), given the least capability perf needs
   (containers.perf_capability, plus IPC_LOCK).  Then, with the perf of the image and the cell's
   record options (perf_runs.record_options: `-g` for perf; `-k 1 --call-graph dwarf` and a ring
   buffer sized to the memlock limit for perf_jit), at -F 999 by default (-F 9999, the howto's and the
   suite's, for runs under a second):
       perf record ... -o /out/perf.data -- python -X MODE script.py ARGS
       perf inject -i /out/perf.data --jit -o /out/perf.jit.data          (perf_jit)
       perf script -F comm,pid,tid,time,event,ip,sym,dso -i DATA > /out/perf.script.txt
       perf report -i DATA --stdio --no-children ... > /out/perf.report.txt
5. The flame graph: inferno over perf.script.txt in the tools image (cpython_perf.report.flamegraph) ->
   /out/flamegraph.svg.
6. Ownership: the container runs as root (perf needs its capabilities); at the end everything under
   the output directory, and what the program created in the current directory during the run, is
   chowned to the invoking user.

Exit status: 0; 2 for a usage error (unknown cell, unclaimed mode, no program); 1 when something
failed at run time (the program's own non-zero exit included: the outputs are written anyway).
"""

from __future__ import annotations

import argparse
import configparser
import hashlib
import json
import os
import re
import shlex
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from . import subcommands
from .errors import DriverError
from .matrix import PERF_MODES, Matrix, load_matrix
from .record.perf_samples import PERF_SCRIPT_FIELDS

PROFILE_REPOSITORY = "cpython-perf-profile"
VENV = "/opt/cpython-perf-venv"
VENV_TAR = "cpython-perf-venv.tar"
SRC, OUT, TMP, REQUIREMENTS_DIR = "/src", "/out", "/tmp", "/requirements"
PIP_CERT_IN_CONTAINER = "/run/cpython-perf/pip-cert.pem"
DEFAULT_OUT = "perf-profile"
DEFAULT_FREQUENCY = 999
# What a run writes into the output directory (removed before a run, so no file is left from an older one)
PERF_DATA, JIT_DATA = "perf.data", "perf.jit.data"
SCRIPT_TEXT, REPORT_TEXT, FLAMEGRAPH, COMMANDS = "perf.script.txt", "perf.report.txt", "flamegraph.svg", "commands.txt"
OUTPUTS = (PERF_DATA, PERF_DATA + ".old", JIT_DATA, SCRIPT_TEXT, REPORT_TEXT, FLAMEGRAPH, COMMANDS)
START_MARKER = f"{TMP}/.cpython-perf-profile-start"
REPORT_OPTIONS = ["--stdio", "--no-children", "--sort", "comm,dso,sym", "-g", "none", "--percent-limit", "0.5"]
MODE_WHY = {"perf": "frame pointers: perf record -g, unwound by the kernel",
            "perf_jit": "no frame pointers needed: dwarf unwinding of a copied stack, then perf inject --jit"}


class ProfileFailed(DriverError):
    """A run-time failure of a profile run (exit status 1; usage errors stay 2)."""

    exit_code = 1


# --------------------------------------------------------------------------
# Command line


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


@dataclass(frozen=True)
class Target:
    """What the program runs in: an image, the python to run there, the perf command and the modes allowed."""

    label: str                      # a cell name, or image + python
    image: str
    python: str                     # python3 on PATH in a cell image; --python for an external one
    perf: str                       # the image's perf command (an external image's may be perf_X.Y)
    modes: tuple[str, ...]          # the cell's claims; an external interpreter's offered backends
    run_spec: object                # the Cell or ExternalTarget perf_runs.record_options reads
    cell: object | None = None      # the matrix Cell, if any
    facts: object | None = None     # external.TargetFacts of an --image target


def cell_target(matrix: Matrix, name: str) -> Target:
    """A cell's target; the usage errors of a cell that cannot be profiled here."""
    cell = matrix.cell(name)   # UnknownCell, exit 2
    if cell.build_only:
        raise DriverError(f"{cell.name} is build-only ({cell.arch} has no perf trampoline): nothing to profile")
    if cell.foreign:
        raise DriverError(f"{cell.name} is an {cell.arch} cell, emulated on this {os.uname().machine} host: perf "
                          "cannot sample a program under qemu-user; profile a cell of this host's arch")
    if not cell.modes:
        raise DriverError(f"{cell.name} claims no perf mode in {matrix.path} (a vanilla twin): nothing to profile")
    return Target(cell.name, cell.image, "python3", "perf", tuple(cell.modes), cell, cell=cell)


def choose_mode(target: Target, requested: str | None) -> str:
    """The mode to record in: requested if the target allows it, else a usage error naming the valid ones;
    without a request the target's default (default_mode)."""
    if requested is None:
        return default_mode(target)
    if requested not in target.modes:
        what = "claims" if target.cell is not None else "offers"
        raise DriverError(f"{target.label} does not support perf mode {requested!r}: it {what} "
                          f"{', '.join(target.modes) or 'none'} (valid: --mode {' | --mode '.join(target.modes)})")
    return requested


def default_mode(target: Target) -> str:
    """perf where allowed and frame pointers are there (every cell claiming perf has them; an external
    interpreter's sysconfig CFLAGS are asked), else perf_jit where allowed, else what is allowed."""
    if not target.modes:
        raise DriverError(f"{target.label} offers no perf mode: nothing to profile")
    if "perf" in target.modes and target.facts is not None:
        from .check.external import cflags_frame_pointers

        if cflags_frame_pointers(target.facts.python.get("config", {})) is not True and "perf_jit" in target.modes:
            return "perf_jit"
    return "perf" if "perf" in target.modes else target.modes[0]


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
    from .record.perf_runs import record_options as suite_options

    options = suite_options(target.run_spec, mode)
    if frequency <= 0:
        raise DriverError(f"--frequency must be a positive number of samples a second, not {frequency}")
    i = options.index("-F")
    options[i + 1] = str(frequency)
    return options


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
    from .record.perf_runs import python_command

    perf = target.perf
    options = record_options(target, mode, frequency)
    if ring_buffer is not None:
        options = [ring_buffer if o == RING_BUFFER_PLACEHOLDER else o for o in options]
    argv, _ = python_command(mode, "xoption", program[0], tuple(program[1:]), python)
    record = [perf, "record", *options, "-o", f"{OUT}/{PERF_DATA}", "--", *argv]
    steps = [Step("record", shlex.join(record), record, stream=True)]
    data = f"{OUT}/{PERF_DATA}"
    if mode == "perf_jit":
        inject = [perf, "inject", "-i", data, "--jit", "-o", f"{OUT}/{JIT_DATA}"]
        steps.append(Step("inject", shlex.join(inject), inject))
        data = f"{OUT}/{JIT_DATA}"
    script = f"{shlex.join([perf, 'script', '-F', PERF_SCRIPT_FIELDS, '-i', data])} > {OUT}/{SCRIPT_TEXT}"
    steps.append(Step("script", script, ["sh", "-c", script]))
    report = f"{shlex.join([perf, 'report', '-i', data, *REPORT_OPTIONS])} > {OUT}/{REPORT_TEXT}"
    steps.append(Step("report", report, ["sh", "-c", report], required=False))
    return steps


def ring_buffer_step() -> Step:
    """Prints the per-CPU ring buffer a dwarf recording gets in this container (perf_runs.DWARF_MMAP_FUNCTION)."""
    from .record.perf_runs import DWARF_MMAP_FUNCTION

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


def image_path_variable(client, image: str) -> str:
    """The PATH an image's containers get (its config's Env), for a venv's bin to go in front of."""
    for item in client.images.get(image).attrs.get("Config", {}).get("Env") or []:
        if item.startswith("PATH="):
            return item[len("PATH="):]
    return "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def docker_run_line(image: str, mounts: dict, caps: list[str], env: dict[str, str], workdir: str,
                    command: list[str]) -> str:
    """The `docker run` equivalent of a container this module creates (printed, and written to commands.txt)."""
    words = ["docker", "run", "--rm"]
    for cap in caps:
        words += ["--cap-add", cap]
    for host, (inside, mode) in mounts.items():
        words += ["-v", f"{host}:{inside}" + (":ro" if mode == "ro" else "")]
    for key, value in env.items():
        words += ["-e", f"{key}={value}"]
    words += ["-w", workdir, image, *command]
    return shlex.join(words)


# --------------------------------------------------------------------------
# pip inside the container: the host's configuration, passed through


PIP_CONFIG_KEYS = {   # pip option -> how its value is treated
    "index-url": "urls", "extra-index-url": "urls", "find-links": "urls", "trusted-host": "plain",
    "cert": "file", "client-cert": "file", "constraint": "files", "timeout": "plain", "default-timeout": "plain",
    "retries": "plain", "proxy": "plain", "no-index": "plain", "disable-pip-version-check": "plain",
    "only-binary": "plain", "prefer-binary": "plain", "pre": "plain",
}
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")
# Directories never mounted over in the container (a local index would hide the image's own files)
_PROTECTED = ("/", "/bin", "/sbin", "/lib", "/lib64", "/usr", "/etc", "/opt", "/opt/cpython", "/src", "/out", "/tmp",
              "/run", "/proc", "/sys", "/dev", "/var", "/root", "/home", REQUIREMENTS_DIR, VENV)


def pip_config_files(environ, home: Path) -> list[Path]:
    """pip's configuration files in its order of precedence, lowest first (site files are venv-local and
    left out): global (XDG_CONFIG_DIRS, /etc), user (~/.pip, ~/.config), then $PIP_CONFIG_FILE."""
    xdg_dirs = [d for d in environ.get("XDG_CONFIG_DIRS", "/etc/xdg").split(":") if d]
    files = [Path(d) / "pip" / "pip.conf" for d in reversed(xdg_dirs)] + [Path("/etc/pip.conf")]
    config_home = Path(environ.get("XDG_CONFIG_HOME") or home / ".config")
    files += [home / ".pip" / "pip.conf", config_home / "pip" / "pip.conf"]
    if environ.get("PIP_CONFIG_FILE") and environ["PIP_CONFIG_FILE"] != os.devnull:
        files.append(Path(environ["PIP_CONFIG_FILE"]))
    return files


def host_pip_settings(environ=None, files: list[Path] | None = None, home: Path | None = None) -> dict[str, str]:
    """The pip settings of this host that matter for installing: [global] and [install] of the config
    files, overridden by PIP_<OPTION> environment variables, as pip itself layers them."""
    environ = os.environ if environ is None else environ
    files = pip_config_files(environ, home or Path.home()) if files is None else files
    settings: dict[str, str] = {}
    for path in files:
        parser = configparser.RawConfigParser()
        try:
            parser.read(path)
        except (OSError, configparser.Error):
            continue
        for section in ("global", "install"):
            if parser.has_section(section):
                for key, value in parser.items(section):
                    if key in PIP_CONFIG_KEYS:
                        settings[key] = " ".join(value.split())
    for key in PIP_CONFIG_KEYS:
        value = environ.get("PIP_" + key.upper().replace("-", "_"))
        if value is not None:
            settings[key] = value
    return settings


@dataclass
class PipPassthrough:
    env: dict[str, str] = field(default_factory=dict)
    mounts: dict[Path, str] = field(default_factory=dict)   # host path -> container path, read-only
    notes: list[str] = field(default_factory=list)          # what was left out, and why


def _mountable(path: Path) -> str | None:
    """Why a host path cannot be mounted at the same place in the container (None: it can)."""
    if not path.exists():
        return "does not exist on this host"
    for protected in _PROTECTED:
        if str(path) == protected or (path.is_dir() and Path(protected).is_relative_to(path)):
            return f"mounting it would hide the image's {protected}"
    return None


def pip_passthrough(settings: dict[str, str], environ=None) -> PipPassthrough:
    """PIP_* variables and read-only mounts that give pip in a container this host's pip configuration.

    Network URLs go as they are; a CA bundle (cert) is mounted at a fixed path; local index and
    find-links directories and constraint files are mounted at their own paths (a file:// simple index
    links to its files by relative URLs, so the index's parent directory is mounted); proxy variables are
    passed on.  A local path that does not exist, or that would hide the image's own directories, is left
    out with a note."""
    environ = os.environ if environ is None else environ
    out = PipPassthrough()

    def mount(path: Path, what: str) -> bool:
        why = _mountable(path)
        if why:
            out.notes.append(f"pip {what} {path} not passed to the container: it {why}")
            return False
        out.mounts[path] = str(path)
        return True

    for key, value in settings.items():
        kind = PIP_CONFIG_KEYS[key]
        var = "PIP_" + key.upper().replace("-", "_")
        if kind == "plain":
            out.env[var] = value
        elif kind == "file":
            if mount(Path(value), key) and key == "cert":
                del out.mounts[Path(value)]
                out.mounts[Path(value)] = PIP_CERT_IN_CONTAINER
                out.env[var] = PIP_CERT_IN_CONTAINER
            elif Path(value) in out.mounts:
                out.env[var] = value
        elif kind == "files":
            kept = [v for v in value.split() if mount(Path(v), key)]
            if kept:
                out.env[var] = " ".join(kept)
        else:   # urls: index-url, extra-index-url, find-links
            kept = []
            for url in value.split():
                if url.startswith("file://") or not re.match(r"^[a-z][a-z0-9+.-]*://", url):
                    path = Path(url[len("file://"):] if url.startswith("file://") else url)
                    root = path.parent if key.endswith("index-url") and path.name == "simple" else path
                    if not mount(root, key):
                        continue
                kept.append(url)
            if kept:
                out.env[var] = " ".join(kept)
    for var in PROXY_VARIABLES:
        if environ.get(var):
            out.env[var] = environ[var]
    return out


def requirements_tag(target_label: str, image_id: str, python: str, requirements: bytes) -> str:
    """cpython-perf-profile:<target>-<12 hex of sha256(image id, python, requirements)>."""
    digest = hashlib.sha256(b"\0".join([image_id.encode(), python.encode(), requirements])).hexdigest()[:12]
    name = re.sub(r"[^a-z0-9._-]+", "-", target_label.lower()).strip("-.")[:100] or "image"
    return f"{PROFILE_REPOSITORY}:{name}-{digest}"


def venv_steps(python: str, requirements_name: str) -> list[Step]:
    make = [python, "-m", "venv", VENV]
    install = [f"{VENV}/bin/python", "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check",
               "-r", f"{REQUIREMENTS_DIR}/{requirements_name}"]
    return [Step("venv", shlex.join(make), make), Step("pip", shlex.join(install), install, stream=True)]


def pip_failure_hint(output: str) -> str:
    """What a failed pip install's output says of the index: unreachable, or a requirement not found."""
    unreachable = ("NewConnectionError", "Max retries exceeded", "Temporary failure in name resolution",
                   "Network is unreachable", "SSLError", "CERTIFICATE_VERIFY_FAILED", "ProxyError",
                   "Connection refused", "timed out")
    if any(s in output for s in unreachable):
        return ("the package index could not be reached from the container (pip uses the host's pip settings: "
                "PIP_INDEX_URL, PIP_CERT, pip.conf; check them with `pip config list`)")
    if "No matching distribution found" in output or "Could not find a version" in output:
        return "a requirement is not on the configured package index"
    return ""


# --------------------------------------------------------------------------
# Containers: one kept running while the steps run in it (docker exec), so each command line is printed
# and timed here and the outputs are handed back to the user at the end whatever happened


class Session:
    """A container of image kept running (sleep infinity) to run steps in with docker exec."""

    def __init__(self, client, image: str, mounts: dict, caps: list[str], env: dict[str, str], workdir: str,
                 log, record: list[str]):
        self.client, self.image, self.env, self.workdir, self.log, self.record = client, image, env, workdir, log, record
        from .run import containers

        self.caps = containers.container_capabilities(caps)
        self.mounts = mounts
        volumes = {str(h): {"bind": c, "mode": m} for h, (c, m) in mounts.items()}
        self.container = client.containers.create(image, ["sleep", "infinity"], working_dir=workdir, volumes=volumes,
                                                  cap_add=self.caps, environment=env, detach=True)
        self.emit(f"$ {docker_run_line(image, mounts, self.caps, env, workdir, ['sleep', 'infinity'])}  "
                  "# the container the commands below run in (docker exec)")
        self.container.start()

    def emit(self, line: str) -> None:
        self.log(line)
        self.record.append(line)

    def exec(self, step: Step, quiet: bool = False) -> tuple[int, str, float]:
        """Run a step; (exit status, its output's tail, seconds).  Streamed steps write to the terminal."""
        if step.display and not quiet:
            self.emit(f"$ {step.display}")
        api = self.client.api
        started = time.monotonic()
        exec_id = api.exec_create(self.container.id, step.argv, workdir=self.workdir, environment=self.env)["Id"]
        tail = b""
        for out, err in api.exec_start(exec_id, stream=True, demux=True):
            for chunk, stream in ((out, sys.stdout), (err, sys.stderr)):
                if chunk:
                    tail = (tail + chunk)[-20000:]
                    if step.stream:
                        _write(stream, chunk)
        code = api.exec_inspect(exec_id).get("ExitCode")
        seconds = time.monotonic() - started
        if not quiet:
            self.record.append(f"#   exit {code}, {seconds:.1f} s")
        return (code if code is not None else -1), tail.decode(errors="replace"), seconds

    def close(self) -> None:
        self.container.remove(force=True)


def _write(stream, chunk: bytes) -> None:
    """The program's own output, as it comes, to the terminal (or to whatever stands in for it)."""
    if hasattr(stream, "buffer"):
        stream.flush()
        stream.buffer.write(chunk)
    else:
        stream.write(chunk.decode(errors="replace"))
    stream.flush()


def _image_id(client, ref: str) -> str | None:
    import docker.errors

    try:
        return client.images.get(ref).id
    except docker.errors.ImageNotFound:
        return None


def ensure_requirements_image(client, target: Target, requirements: Path, reinstall: bool, log,
                              record: list[str], passthrough: PipPassthrough | None = None) -> tuple[str, str]:
    """(image, python) with the requirements installed in a venv: the derived image, made if missing."""
    requirements = requirements.resolve()
    if not requirements.is_file():
        raise DriverError(f"--requirements {requirements}: no such file")
    image_id = _image_id(client, target.image)
    tag = requirements_tag(target.label, image_id, target.python, requirements.read_bytes())
    python = f"{VENV}/bin/python"
    if not reinstall and _image_id(client, tag):
        log(f"requirements: {tag} (cached: {target.image} + {requirements.name})")
        return tag, python
    passthrough = passthrough or pip_passthrough(host_pip_settings())
    for note in passthrough.notes:
        log(f"note: {note}")
    log(f"requirements: making {tag}: a venv at {VENV} in {target.image} with {requirements.name} installed")
    mounts = {requirements.parent: (REQUIREMENTS_DIR, "ro"),
              **{h: (c, "ro") for h, c in passthrough.mounts.items()}}
    session = Session(client, target.image, mounts, [], passthrough.env, REQUIREMENTS_DIR, log, record)
    try:
        for step in venv_steps(target.python, requirements.name):
            code, tail, seconds = session.exec(step)
            if code != 0:
                hint = pip_failure_hint(tail)
                said = [l for l in tail.strip().splitlines() if l.strip()][-3:]
                raise ProfileFailed(f"{step.name} failed in {target.image} (exit {code}): {' / '.join(said)}"
                                    + (f"; {hint}" if hint else ""))
        venv_tar = b"".join(session.container.get_archive(VENV)[0])
    finally:
        session.close()
    build_requirements_image(client, image_id, tag, venv_tar, requirements.name, log, record)
    return tag, python


def requirements_dockerfile(base_id: str, requirements_name: str) -> str:
    """The derived image: the cell's image and the venv made in it, nothing else (no mount point, no pip
    setting of the install container)."""
    return (f"FROM {base_id}\n"
            f"ADD {VENV_TAR} {Path(VENV).parent}/\n"
            f"LABEL cpython-perf.profile.base={json.dumps(base_id)} "
            f"cpython-perf.profile.requirements={json.dumps(requirements_name)}\n")


def build_requirements_image(client, base_id: str, tag: str, venv_tar: bytes, requirements_name: str, log,
                             record: list[str]) -> None:
    """docker build of the derived image from the venv's tar (tagged only when the build succeeds)."""
    import tempfile

    from .image.docker_build import docker_build

    with tempfile.TemporaryDirectory(prefix="cpython-perf-profile-") as ctx:
        Path(ctx, "Dockerfile").write_text(requirements_dockerfile(base_id, requirements_name))
        Path(ctx, VENV_TAR).write_bytes(venv_tar)
        line = f"$ docker build -t {tag} <context: Dockerfile (FROM the image, ADD {VENV_TAR}), {VENV_TAR} " \
               f"({len(venv_tar) // 1024} KiB, {VENV} copied out of the install container)>"
        log(line)
        record.append(line)
        try:
            docker_build(client, Path(ctx), tag, lambda _line: None)
        except DriverError as exc:
            raise ProfileFailed(str(exc)) from None


def external_target(client, image: str, python: str, run) -> Target:
    """An --image/--python target: the interpreter probed for the backends it offers, the image for its perf."""
    from .check import external

    if _image_id(client, image) is None:
        raise DriverError(f"image {image} does not exist here (docker pull or build it)")
    spec = external.ExternalTarget(image, python)
    probe = run([python, "-c", external.PYTHON_PROBE])
    if probe.exit_code != 0:
        raise DriverError(f"{python} does not run in {image} (exit {probe.exit_code}): "
                          f"{(probe.stderr or probe.stdout).strip()[-500:]}")
    facts = external.TargetFacts(json.loads(probe.stdout.strip().splitlines()[-1]),
                                 external.parse_perf_candidates(run(external.PERF_PROBE).stdout))
    if not facts.perf.command:
        raise ProfileFailed(f"no perf in {image}: {'; '.join(facts.perf.notes) or 'no perf command'} "
                            "(Debian: install linux-perf)")
    offered = tuple(m for m in PERF_MODES if facts.offers(m))
    if not offered:
        raise ProfileFailed(f"{python} in {image} (Python {facts.version_text}) offers no perf trampoline: "
                            "neither -X perf nor -X perf_jit writes a map")
    return Target(f"{image} {python}", image, python, facts.perf.command, offered, spec, facts=facts)


# --------------------------------------------------------------------------
# Reading the outputs back


def svg_stacks(svg_text: str) -> list[tuple[str, ...]]:
    """Every frame of an inferno flame graph as its stack, root first: the frames below it (greater y)
    whose span of samples holds its span, then itself."""
    from .report.flamegraph_svg import svg_frames

    frames = svg_frames(svg_text)
    stacks = []
    for name, y, x, w in frames:
        below = sorted(((fy, fname) for fname, fy, fx, fw in frames
                        if fy > y and fx <= x and x + w <= fx + fw), reverse=True)
        stacks.append(tuple(fname for _, fname in below) + (name,))
    return stacks


def _matches(symbol: str, want) -> bool:
    return want.fullmatch(symbol) is not None if isinstance(want, re.Pattern) else symbol == want


def python_chain_found(stacks, chain) -> bool:
    """Whether some stack's py:: frames (root first, C frames between them ignored) hold chain (outer
    first: strings, or compiled patterns that must match the whole symbol) as consecutive frames."""
    for stack in stacks:
        py = [s for s in stack if s.startswith("py::")]
        for i in range(len(py) - len(chain) + 1):
            if all(_matches(py[i + k], chain[k]) for k in range(len(chain))):
                return True
    return False


def summarise(script_text: str, top: int = 8) -> list[str]:
    """A few lines on the recorded samples: how many, how many carry Python frames, the Python functions
    most often innermost."""
    from .record.perf_samples import parse_perf_script

    samples = parse_perf_script(script_text)
    with_py = [s for s in samples if s.python_frames()]
    lines = [f"{len(samples)} samples, {len(with_py)} with Python frames"]
    if samples and not with_py:
        lines.append("no py:: frame in any sample: the trampoline was not active, or the unwinding did not reach "
                     "it (without frame pointers use --mode perf_jit)")
    counts = Counter(s.python_frames()[0] for s in with_py)
    for symbol, n in counts.most_common(top):
        lines.append(f"  {n:7d}  {100 * n / len(samples):5.1f}%  {symbol}")
    return lines


# --------------------------------------------------------------------------
# The run


def prepare_out(out: Path) -> Path:
    """The output directory, made by the invoking user, without the outputs of an earlier run; its tmp/
    (mounted at /tmp) world-writable and sticky like /tmp, emptied."""
    out.mkdir(parents=True, exist_ok=True)
    for name in OUTPUTS:
        (out / name).unlink(missing_ok=True)
    tmp = out / "tmp"
    if tmp.is_dir():
        for child in tmp.iterdir():
            if child.is_file() or child.is_symlink():
                child.unlink()
    tmp.mkdir(exist_ok=True)
    tmp.chmod(0o1777)
    return out


def run(matrix: Matrix, args, program: list[str] | None, log=print, client=None, cwd: Path | None = None,
        owner: tuple[int, int] | None = None) -> int:
    """`python -m cpython_perf profile ...`: see the module's docstring.  owner: (uid, gid) the outputs are
    given to (default: the invoking user's)."""
    from .run import containers
    from . import host

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
    elif _image_id(client, target.image) is None:
        from .image import pipeline

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
    mounts = {cwd: (SRC, "rw"), out: (OUT, "rw"), out / "tmp": (TMP, "rw")}
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
            failure = _flamegraph(client, matrix, out, f"{' '.join(program)} ({target.label}, {mode})", log,
                                  record_lines, timings)
    finally:
        session.exec(Step("chown", ownership_command(*owner), ["sh", "-c", ownership_command(*owner)]), quiet=True)
        session.close()
        (out / COMMANDS).write_text("\n".join(record_lines) + "\n")
        if owner != (os.getuid(), os.getgid()):
            os.chown(out / COMMANDS, *owner)   # as the rest (a root caller handing the outputs to another user)
    if (out / SCRIPT_TEXT).is_file():
        for line in summarise((out / SCRIPT_TEXT).read_text(errors="replace")):
            log(line)
    if (out / REPORT_TEXT).is_file():
        log(f"top of {out / REPORT_TEXT}:")
        for line in _report_top((out / REPORT_TEXT).read_text(errors="replace")):
            log("  " + line)
    log(f"wrote {out}/: " + ", ".join(n for n in (PERF_DATA, JIT_DATA, SCRIPT_TEXT, REPORT_TEXT, FLAMEGRAPH, COMMANDS)
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


def _flamegraph(client, matrix, out: Path, title: str, log, record_lines, timings) -> str | None:
    """Render the flame graph in the tools image; the failure's message, or None."""
    from .image import tools
    from .report.flamegraph import render_flamegraph

    started = time.monotonic()
    try:
        tag = tools.ensure_tools_image(client, matrix, log)
        inner = f'{tools.FLAMEGRAPH_COMMAND} "$TITLE" < /in/{SCRIPT_TEXT} > /in/{FLAMEGRAPH}'
        line = "$ " + shlex.join(["docker", "run", "--rm", "-e", f"TITLE={title}", "-v", f"{out}:/in", tag,
                                  "sh", "-c", inner])
        log(line)
        record_lines.append(line)
        render_flamegraph(client, matrix, out / SCRIPT_TEXT, out / FLAMEGRAPH, title, log)
    except DriverError as exc:
        return f"the flame graph could not be drawn: {exc}"
    finally:
        timings["flamegraph"] = time.monotonic() - started
    return None


def _last_lines(text: str, n: int = 3) -> str:
    said = [l.strip() for l in text.strip().splitlines() if l.strip()]
    return " / ".join(said[-n:]) or "no output"


def _report_top(text: str, n: int = 12) -> list[str]:
    return [l for l in text.splitlines() if l.strip() and not l.startswith("#")][:n]


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
               "text, a flame graph written to --out (cpython_perf/profile.py)", add_arguments, _run_command,
    usage="python -m cpython_perf profile (CELL | --image IMAGE --python PATH) [--mode MODE] "
          "[--requirements FILE] [--out DIR] [-F HZ] -- script.py [ARGS ...]")

"""Record the Python processes of a running container with perf from outside it, and read them after they exit.

    python -m cpython_perf record --container NAME [--pid PID ...] [--mode perf|perf_jit] [--seconds N] \\
        [--out DIR] [-F HZ] [--live [--interval S] [--entries N]] [--perf-image IMAGE | --host-perf] \\
        [-- PERF RECORD OPTIONS]

perf outside a container (on the node, in a sidecar) names a process by its host pid, while the
interpreter in the container names its perf map and jitdump with its pid in the container, in the
container's /tmp.  perf finds them through /proc only while the process lives; once it has exited every
Python frame is `[unknown] (/tmp/perf-<host pid>.map)`, and `perf inject --jit` injects nothing.  This
command:

1. finds the container's processes (its first process's pid namespace, procfs.Namespace) and records
   them: `perf record -p <their host pids>` (perf follows the children they start), with the mode's
   call graphs (`-g`; perf_jit: `-k 1 --call-graph dwarf` and a ring buffer sized to the memlock limit),
   at -F 999, with the host's sampling event (perf_event), then any options given after `--`.  perf
   runs in a container of --perf-image (default: the tools image, Debian trixie's perf) with the host's
   pid namespace and the perf capability plus CAP_SYS_PTRACE, or with --host-perf as the host's perf;
   until the processes exit, --seconds pass, or Ctrl-C;
2. meanwhile keeps every map and jitdump of the container's processes as DIR/tmp/perf-<host pid>.map and
   DIR/tmp/jit-<host pid>.dump as they grow, and the files they map executable (the interpreter, its
   libraries) under DIR/root/ (container_files.Keeper: /proc is polled every 10 ms, so a worker that
   lives a second is kept too);
3. perf_jit: renames the recording's mmap of each jitdump to jit-<host pid>.dump (perf_data) and injects
   the trampolines' symbols and unwind tables, one ELF per arena in DIR/tmp (jit_inject, as `profile`
   does; `perf inject --jit` with DIR/tmp as /tmp where the reading perf unwinds without libunwind)
   -> DIR/perf.jit.data;
4. writes `perf script` of it to DIR/perf.script.txt, with DIR/tmp as /tmp and `--symfs DIR/root`, in a pid
   namespace of its own: perf then reads the kept files whether the processes still live or not.

--live records windows of --interval seconds instead, each read as in 4. and shown as a table of its functions
(live_top), until Ctrl-C, --seconds or the processes' exit.

It reads the container's /tmp through /proc/<pid>/root: run it as root on the host (sudo), in the
host's pid namespace.  What to run to read the recording again is printed at the end (and is in
docs/profile.md, with the recipe for running perf yourself).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DriverError, RuntimeFailure
from ..matrix import PERF_MODES
from . import jit_inject, procfs
from .container_files import Keeper, process_mode
from .perf_data import PerfDataError, rename_jitdumps
from .perf_runs import DWARF_MMAP_FUNCTION
from .perf_samples import PERF_SCRIPT_FIELDS, PerfScriptError, parse_perf_script, printable
from .live_top import CLEAR, top_table
from .untrusted_files import ForeignRoot, PrivateDir, Refused, read_regular_file, write_new_file
from .viewer_files import VIEWER_FILES, write_viewer_files_of_script

DEFAULT_OUT = "perf-outside"
DEFAULT_FREQUENCY = 999
PERF_DATA, JIT_DATA, SCRIPT_TEXT, COMMANDS = "perf.data", "perf.jit.data", "perf.script.txt", "commands.txt"
OUT_IN_CONTAINER = "/out"
# Where the files the processes map executable are kept (perf script --symfs): DIR/root/<their path>, and
# DIR/root/tmp links to DIR/tmp so that the ELF files of the jit injection, written there, are found too.
OBJECTS = "root"
MIN_JIT_PERF = (6, 8)   # perf inject --jit reads CPython's jitdumps from perf 6.8 on
PERF_RECORD_CAPABILITIES = ("SYS_PTRACE",)   # beside the perf capability: attach to another container's processes
# perf record options that choose what is recorded: given after `--`, nothing is added
TARGET_OPTIONS = {"-a", "--all-cpus", "-p", "--pid", "-t", "--tid", "-C", "--cpu", "-G", "--cgroup", "-u", "--uid"}
STOPPED_TMP_LIMIT = 4 << 30   # of a stopped container's /tmp, read from the engine as a tar
STOPPED_FILE_LIMIT = 512 << 20   # of one file of that tar, read into memory
SCRIPT_LIMIT = 1 << 30   # of the perf script text the viewers' files are written from
LIVE_INTERVAL, LIVE_ENTRIES = 2.0, 20   # --live: seconds a window, functions a table
TOP_TEXT = "top.txt"   # --live: the last window's table


class RecordFailed(RuntimeFailure):
    """A run-time failure of `record --container` (exit status 1)."""


def add_arguments(p) -> None:
    p.add_argument("--container", required=True, help="the running container (name or id) whose processes to record")
    p.add_argument("--pid", type=int, action="append", default=[], metavar="PID",
                   help="a process to record, by its pid in the container (repeatable; default: every process of "
                        "the container; perf follows the children they start)")
    p.add_argument("--mode", choices=PERF_MODES, default=None,
                   help="the perf mode the program runs in (default: perf_jit if a recorded process maps its own "
                        "jitdump or was started with -X perf_jit or PYTHON_PERF_JIT_SUPPORT, else perf)")
    p.add_argument("--seconds", type=float, default=None,
                   help="stop after this long (default: when the recorded processes have exited, or Ctrl-C)")
    p.add_argument("--out", "-o", default=DEFAULT_OUT, help=f"output directory (default: ./{DEFAULT_OUT})")
    p.add_argument("--frequency", "-F", type=int, default=DEFAULT_FREQUENCY,
                   help=f"sampling frequency in Hz (default {DEFAULT_FREQUENCY})")
    p.add_argument("--live", action="store_true",
                   help="a top-like view instead of one recording: every --interval seconds, the functions of the "
                        "last window with the Python frames named (-X perf processes), until Ctrl-C or --seconds")
    p.add_argument("--interval", type=float, default=LIVE_INTERVAL,
                   help=f"--live: seconds per window (default {LIVE_INTERVAL})")
    p.add_argument("--entries", type=int, default=LIVE_ENTRIES, help=f"--live: functions shown (default {LIVE_ENTRIES})")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--perf-image", default=None,
                       help="an image with perf >= 6.8 to run perf in (default: the tools image, built if missing)")
    which.add_argument("--host-perf", action="store_true",
                       help="run the host's perf instead (perf_jit needs perf >= 6.8 for perf inject --jit)")
    p.add_argument("perf_args", nargs="*", metavar="PERF_RECORD_OPTIONS",
                   help="after --: more perf record options (e.g. -e cycles, --call-graph dwarf,16384)")


# --------------------------------------------------------------------------
# The pieces, each its own function (tested without Docker)


def record_options(mode: str, frequency: int, event: str | None, extra: list[str]) -> list[str]:
    """perf record's options for the mode (before -p): call graphs, frequency, event, then extra."""
    if frequency <= 0:
        raise DriverError(f"--frequency must be a positive number of samples a second, not {frequency}")
    options = [*(["-e", event] if event and not _names_event(extra) else []), "-F", str(frequency)]
    options += ["-g"] if mode == "perf" else ["-k", "1", "--call-graph", "dwarf", "-m", "$(dwarf_mmap)"]
    return options + list(extra)


def _names_event(extra: list[str]) -> bool:
    return any(a in ("-e", "--event") or a.startswith("--event=") for a in extra)


def names_target(extra: list[str]) -> bool:
    """Whether the extra options choose what perf records (then no -p is added)."""
    return any(a in TARGET_OPTIONS or a.split("=", 1)[0] in TARGET_OPTIONS for a in extra)


def record_shell(perf: str, options: list[str], pids: list[int], data: str, seconds: float | None) -> str:
    """The shell script that records (sh: the dwarf ring buffer is computed where perf runs)."""
    words = [shlex.quote(perf), "record", *(o if o == "$(dwarf_mmap)" else shlex.quote(o) for o in options)]
    if pids:
        words += ["-p", ",".join(map(str, pids))]
    words += ["-o", shlex.quote(data)]
    if seconds:
        words += ["--", "sleep", str(seconds)]
    return f"{DWARF_MMAP_FUNCTION}\nexec {' '.join(words)}\n"


def choose_mode(requested: str | None, modes: list[str | None]) -> str:
    """The mode: requested, else perf_jit where a recorded process runs -X perf_jit (container_files.process_mode:
    what the process maps and was started with, never a file name another process could plant), else perf."""
    if requested:
        return requested
    return "perf_jit" if "perf_jit" in modes else "perf"


def perf_version(text: str) -> tuple[int, int] | None:
    """(major, minor) of `perf --version` output ("perf version 6.1.187")."""
    m = re.search(r"(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def summarise(script_text: str, top: int = 8) -> list[str]:
    """A few lines about the samples: per process, how many carry Python frames; the innermost Python functions."""
    samples = parse_perf_script(script_text)
    with_py = [s for s in samples if s.python_frames()]
    lines = [f"{len(samples)} samples, {len(with_py)} with Python frames, "
             f"{len({s.pid for s in samples})} processes"]
    unnamed = sum(1 for s in samples for f in s.frames if f.symbol == "[unknown]" and "/tmp/perf-" in f.dso)
    if unnamed:
        lines.append(f"{unnamed} frames in a perf map perf could not read ([unknown] in /tmp/perf-PID.map)")
    for symbol, n in Counter(s.python_frames()[0] for s in with_py).most_common(top):
        lines.append(f"  {n:7d}  {100 * n / len(samples):5.1f}%  {printable(symbol)}")
    return lines


@dataclass
class Container:
    """The container being recorded: its id and name, its first process's host pid, its image."""

    id: str
    name: str
    pid: int
    image: str


def find_container(client, name: str) -> Container:
    import docker.errors

    try:
        container = client.containers.get(name)
    except docker.errors.NotFound:
        raise DriverError(f"no container {name!r} here (docker ps lists the running ones)") from None
    state = container.attrs.get("State", {})
    if not state.get("Running") or not state.get("Pid"):
        raise DriverError(f"container {name!r} is not running ({state.get('Status', '?')}): start it first")
    return Container(container.id, container.name, int(state["Pid"]), container.attrs["Config"]["Image"])


def check_access(pid: int, proc: Path = procfs.PROC) -> None:
    """The container's /tmp must be readable through /proc/<pid>/root (root, in the host's pid namespace),
    resolved inside the container (a /tmp that is a link leads to the container's own directory, or nowhere)."""
    try:
        with ForeignRoot(proc / str(pid) / "root", f"the container of process {pid}") as root:
            os.close(root.open_dir("tmp", follow=True))
    except PermissionError:
        raise DriverError(f"cannot read the container's /tmp through /proc/{pid}/root: record --container reads "
                          "the processes' perf maps there; run it as root on the host (sudo)") from None
    except FileNotFoundError:
        raise DriverError(f"process {pid} of the container is not in this pid namespace's /proc (or its /tmp is "
                          "missing): run record --container on the host, not in a container") from None
    except Refused as exc:
        raise DriverError(f"the container's /tmp (process {pid}) cannot be read safely: {exc}") from None


class StoppedContainerFiles:
    """The /tmp of a container that has stopped (not removed), read once from the engine as a tar (at most
    STOPPED_TMP_LIMIT bytes of it): the Keeper's last resort for the files it had not finished copying.  Only
    regular files of /tmp itself are read (a link in the tar is not followed), each at most STOPPED_FILE_LIMIT
    bytes (it is read into memory)."""

    def __init__(self, client, container_id: str, scratch: Path):
        self.client, self.container_id, self.scratch = client, container_id, scratch
        self._tar: tarfile.TarFile | None = None
        self._tried = False

    def _open(self) -> tarfile.TarFile | None:
        if not self._tried:
            self._tried = True
            import docker.errors

            try:
                stream, _ = self.client.containers.get(self.container_id).get_archive("/tmp")
                path = self.scratch / "container-tmp.tar"
                written = 0
                with open(path, "xb") as f:
                    for chunk in stream:
                        written += len(chunk)
                        if written > STOPPED_TMP_LIMIT:
                            raise OSError(f"the stopped container's /tmp is larger than {STOPPED_TMP_LIMIT >> 30} GiB")
                        f.write(chunk)
                self._tar = tarfile.open(path)
            except (docker.errors.DockerException, tarfile.TarError, OSError):
                self._tar = None
        return self._tar

    def read(self, name: str) -> bytes | None:
        tar = self._open()
        if tar is None:
            return None
        try:
            info = tar.getmember(f"tmp/{name}")
        except KeyError:
            return None
        if not info.isreg() or info.size > STOPPED_FILE_LIMIT:
            return None
        member = tar.extractfile(info)
        return member.read() if member is not None else None

    def listing(self) -> list[tuple[str, float]]:
        tar = self._open()
        if tar is None:
            return []
        return [(m.name.rpartition("/")[2], float(m.mtime)) for m in tar.getmembers()
                if m.isfile() and m.name.count("/") == 1]

    def close(self) -> None:
        if self._tar is not None:
            self._tar.close()


# --------------------------------------------------------------------------
# Running perf: in a container of an image (the host's pid namespace), or the host's


@dataclass
class PerfRunner:
    """Runs perf for the recording and for reading it; log: each command line as it runs."""

    client: object
    out: Path
    image: str | None          # None: the host's perf
    capability: str | None = None
    log: object = print
    commands: list[str] = field(default_factory=list)

    def _note(self, line: str) -> None:
        self.commands.append(line)
        self.log(f"$ {line}")

    def version(self) -> tuple[int, int] | None:
        if self.image is None:
            proc = subprocess.run(["perf", "--version"], capture_output=True, text=True)
            return perf_version(proc.stdout)
        from ..run import containers

        return perf_version(containers.run(self.client, self.image, ["perf", "--version"], workdir="/").stdout)

    def record(self, shell: str, started: threading.Event, stop: threading.Event) -> tuple[int, str]:
        """Run the recording shell; started is set once perf has created its output.  Ctrl-C, or stop set by
        the caller, ends the recording with SIGINT, as perf expects.  Returns (exit status, output's tail)."""
        data = self.out / PERF_DATA
        if self.image is None:
            self._note(f"sh -c {shlex.quote(shell)}")
            proc = subprocess.Popen(["sh", "-c", shell], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, start_new_session=True)
            output: list[str] = []
            reader = threading.Thread(target=lambda: output.extend(proc.stdout), daemon=True)
            reader.start()
            self._wait(lambda: proc.poll() is None, lambda: os.killpg(proc.pid, signal.SIGINT), data, started,
                       stop)
            proc.wait()
            reader.join(5)
            return proc.returncode, "".join(output)[-3000:]
        from ..run import containers

        caps = containers.container_capabilities([self.capability, *PERF_RECORD_CAPABILITIES])
        self._note(" ".join(["docker", "run", "--rm", "--pid", "host", *(f"--cap-add {c}" for c in caps),
                             "-v", f"{self.out}:{OUT_IN_CONTAINER}", self.image, "sh", "-c", shlex.quote(shell)]))
        container = self.client.containers.create(
            self.image, ["sh", "-c", shell], working_dir=OUT_IN_CONTAINER, pid_mode="host", cap_add=caps,
            volumes={str(self.out): {"bind": OUT_IN_CONTAINER, "mode": "rw"}}, detach=True)
        try:
            container.start()

            def running() -> bool:
                container.reload()
                return container.status in ("created", "running")

            self._wait(running, lambda: container.kill(signal="SIGINT"), data, started, stop)
            status = container.wait(timeout=120).get("StatusCode", -1)
            return status, container.logs(stdout=True, stderr=True).decode(errors="replace")[-3000:]
        finally:
            container.remove(force=True)

    @staticmethod
    def _wait(running, interrupt, data: Path, started: threading.Event, stop: threading.Event) -> None:
        """Until the recording ends: set started once its output exists; interrupt it on Ctrl-C or stop."""
        while True:
            try:
                if not running():
                    break
                if data.exists():
                    started.set()
                if stop.wait(0.05):
                    stop.clear()
                    interrupt()
            except KeyboardInterrupt:
                interrupt()
        started.set()

    def read(self, command: list[str], output: str | None = None) -> tuple[int, str]:
        """A perf command reading the recording, with DIR/tmp as /tmp and in a pid namespace of its own (perf
        then takes every recorded process as gone and reads the kept files).  output: a file in DIR for its
        standard output."""
        if self.image is None:
            # the host's perf: a mount namespace with DIR/tmp on /tmp, a pid namespace with a /proc of its own.
            # DIR may be under /tmp, which the bind hides: perf is run from DIR, with paths relative to it.
            inner = (f"cd {shlex.quote(str(self.out))} && mount --bind tmp /tmp && {shlex.join(command)}"
                     + (f" > {shlex.quote(output)}" if output else ""))
            argv = ["unshare", "--mount", "--pid", "--fork", "--mount-proc", "sh", "-c", inner]
            self._note(shlex.join(argv))
            proc = subprocess.run(argv, capture_output=True, text=True)
            return proc.returncode, (proc.stderr or proc.stdout)[-3000:]
        from ..run import containers

        shell = shlex.join(command) + (f" > {OUT_IN_CONTAINER}/{output}" if output else "")
        self._note(f"docker run --rm -v {self.out}:{OUT_IN_CONTAINER} -v {self.out / 'tmp'}:/tmp {self.image} "
                   f"sh -c {shlex.quote(shell)}")
        result = containers.run(self.client, self.image, shell, workdir=OUT_IN_CONTAINER,
                                mounts={self.out: OUT_IN_CONTAINER, self.out / "tmp": "/tmp"}, timeout=3600)
        return result.exit_code, (result.stderr or result.stdout)[-3000:]


def _path(name: str, host: bool, out: Path) -> str:
    """A file of DIR as the reading perf sees it (the host's perf runs in DIR: PerfRunner.read)."""
    return name if host else f"{OUT_IN_CONTAINER}/{name}"


# --------------------------------------------------------------------------
# The command


def prepare_out(out: Path) -> Path:
    """The output directory, ready: an earlier recording's outputs removed; DIR not writable by group or others
    (made 0700 where it is new); tmp/ (the kept maps and dumps) and root/ (the mapped files) made new, 0700,
    as this user's, so no other user can read what is copied nor plant a link the command would write through."""
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        out.mkdir(mode=0o700)
    except FileExistsError:
        pass
    try:
        fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        raise DriverError(f"--out {out}: not a directory of its own ({exc.strerror}): name a directory, not a link "
                          "or a file") from None
    try:
        st = os.fstat(fd)
        owners = {os.geteuid()} | ({int(os.environ["SUDO_UID"])} if os.environ.get("SUDO_UID", "").isdigit() else set())
        if st.st_uid not in owners:
            raise DriverError(f"--out {out} belongs to uid {st.st_uid}, not to you: its owner could change what is "
                              "written there as root; choose a directory of your own")
        if st.st_mode & 0o022:
            os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~0o022)
        for name in (PERF_DATA, PERF_DATA + ".old", JIT_DATA, SCRIPT_TEXT, COMMANDS, *VIEWER_FILES):
            try:
                os.unlink(name, dir_fd=fd)
            except FileNotFoundError:
                pass
        for sub in ("tmp", OBJECTS):
            try:
                found = os.stat(sub, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(found.st_mode):
                shutil.rmtree(out / sub)   # fd-based on Linux: a link inside is removed, never followed
            else:
                os.unlink(sub, dir_fd=fd)
    finally:
        os.close(fd)
    for sub in ("tmp", OBJECTS):
        made = PrivateDir(out / sub)
        if sub == OBJECTS:
            made.symlink("../tmp", "tmp")
        made.close()
    return out


def run(matrix, args, log=print, client=None, started: threading.Event | None = None,
        stop: threading.Event | None = None) -> int:
    """`python -m cpython_perf record --container ...` (see the module's docstring).  started: set once perf
    records (a test starts its program's work then); stop: set it to end the recording as Ctrl-C does."""
    from .. import host
    from . import perf_event

    out = Path(args.out).expanduser().resolve()
    client = client or host.docker_client(log)
    container = find_container(client, args.container)
    check_access(container.pid)
    if args.host_perf:
        image, capability = None, None
        if shutil.which("perf") is None:
            raise DriverError("--host-perf: no perf on this host (Debian: apt-get install linux-perf)")
    else:
        from ..image import tools
        from ..run import containers

        image = args.perf_image or tools.ensure_tools_image(client, matrix, log)
        try:
            capability = containers.perf_capability(client, image)
        except DriverError as exc:
            raise RecordFailed(str(exc)) from None
    runner = PerfRunner(client, out, image, capability, log)
    namespace = procfs.Namespace(container.pid)
    namespace.scan()
    if args.pid:
        targets = []
        for inner in args.pid:
            found = namespace.by_ns_pid(inner)
            if found is None:
                listing = ", ".join(f"{p.ns_pid} (host {p.pid})" for p in sorted(namespace.known.values(),
                                                                               key=lambda p: p.ns_pid))
                raise DriverError(f"no process {inner} in container {container.name}: its processes are {listing}")
            targets.append(found)
    else:
        targets = sorted(namespace.known.values(), key=lambda p: p.ns_pid)
    mode = choose_mode(args.mode, [process_mode(p) for p in targets])
    if getattr(args, "live", False):
        if mode != "perf":
            raise DriverError("--live names the Python frames of -X perf processes (their perf maps); a perf_jit "
                              "recording must be injected before it names any: record it, then read it")
        if args.interval < 0.5 or args.entries < 1:
            raise DriverError(f"--interval must be at least 0.5 s and --entries at least 1 (not {args.interval}, "
                              f"{args.entries})")
    if mode == "perf_jit":
        version = runner.version()
        if version is not None and version < MIN_JIT_PERF:
            raise DriverError(f"perf_jit needs perf >= {MIN_JIT_PERF[0]}.{MIN_JIT_PERF[1]} for perf inject --jit; "
                              f"{'the host' if image is None else image} has {version[0]}.{version[1]} (use the "
                              "tools image: leave out --host-perf)")
    event = None
    if not _names_event(args.perf_args):
        try:
            if image is not None:
                event = perf_event.host_event(client, image, capability).event
        except perf_event.NoSamples as exc:
            raise RecordFailed(str(exc)) from None
    options = record_options(mode, args.frequency, event, args.perf_args)
    pids = [] if names_target(args.perf_args) else [p.pid for p in targets]
    log(f"record: container {container.name} ({container.image}), processes "
        + ", ".join(f"{p.ns_pid} (host {p.pid})" for p in targets) + f", mode {mode}; perf "
        + ("of the host" if image is None else f"in {image}") + f"; files kept in {out / 'tmp'}")
    prepare_out(out)   # only now: a usage error above leaves an earlier recording in DIR as it was
    keeper = Keeper(container.pid, out / "tmp", objects=out / OBJECTS).start()
    stop = stop or threading.Event()
    started = started or threading.Event()
    data = str(out / PERF_DATA) if image is None else f"{OUT_IN_CONTAINER}/{PERF_DATA}"
    if getattr(args, "live", False):
        return _live(runner, keeper, container.name, options, pids, out, data, image is None, args, log, started,
                     stop)
    shell = record_shell("perf", options, pids, data, args.seconds)
    began = time.monotonic()
    try:
        status, said = runner.record(shell, started, stop)
    except BaseException:
        keeper.stop()
        raise
    scratch = Path(tempfile.mkdtemp(prefix="cpython-perf-record-"))
    stopped = StoppedContainerFiles(client, container.id, scratch)
    try:
        summary = keeper.stop(stopped.read, stopped.listing)
    finally:
        stopped.close()
        shutil.rmtree(scratch, ignore_errors=True)
    log(f"recorded {time.monotonic() - began:.1f} s (perf exit {status}); kept {len(summary.maps)} perf maps, "
        f"{len(summary.dumps)} jitdumps of {summary.processes} processes seen, "
        f"{sum(keeper.objects_copied.values()) // 1024} KiB of mapped files")
    for line in keeper.errors[:5]:
        log(f"note: {printable(line)}")
    for line in summary.refused[:20]:
        log(f"refused: {printable(line)}")
    if len(summary.refused) > 20:
        log(f"refused: {len(summary.refused) - 20} more files")
    if mode == "perf" and summary.dumps and not summary.maps and args.mode is None:
        log("note: no recorded process ran -X perf_jit when the recording began, so it was recorded for -X perf "
            f"(frame pointers); {len(summary.dumps)} jitdumps appeared since. Record -X perf_jit programs with "
            "--mode perf_jit, or once they have started")
    if summary.missed:
        log(f"note: {len(summary.missed)} files of processes that lived less than the polling interval were not "
            f"kept: {', '.join(summary.missed[:5])}")
    if not (out / PERF_DATA).is_file():
        raise RecordFailed(f"perf record wrote no perf.data (exit {status}): {said.strip()[-600:]}")
    read_data = PERF_DATA
    if mode == "perf_jit":
        renames = keeper.renames()
        try:
            count = rename_jitdumps(out / PERF_DATA, out / (PERF_DATA + ".renamed"), renames)
        except PerfDataError as exc:
            raise RecordFailed(str(exc)) from None
        os.replace(out / (PERF_DATA + ".renamed"), out / PERF_DATA)
        log(f"renamed {count} jitdump mmaps of perf.data to jit-<host pid>.dump")
        inject_jit(runner, out, image is None, log)
        read_data = JIT_DATA
    code, said = runner.read(["perf", "script", "--symfs", _path(OBJECTS, image is None, out),
                              "-F", PERF_SCRIPT_FIELDS, "-i", _path(read_data, image is None, out)], SCRIPT_TEXT)
    if code != 0:
        raise RecordFailed(f"perf script failed (exit {code}): {said.strip()[-600:]}")
    try:
        for line in summarise((out / SCRIPT_TEXT).read_text(errors="replace")):
            log(line)
    except PerfScriptError as exc:   # a frame line of a shape not known here: the text is written all the same
        log(f"note: {SCRIPT_TEXT} could not be summarised ({exc})")
    try:
        viewer_files = [p.name for p in write_viewer_files_of_script(out / SCRIPT_TEXT, f"record --container {container.name} ({mode})",
                                                                      args.frequency, SCRIPT_LIMIT)]
    except (Refused, PerfScriptError, OSError) as exc:
        viewer_files = []
        log(f"note: the viewers' files ({', '.join(VIEWER_FILES)}) were not written: {exc}")
    (out / COMMANDS).write_text("\n".join(runner.commands) + "\n")
    _give_back(out)
    again = (["docker", "run", "--rm", "-v", f"{out}:{OUT_IN_CONTAINER}", "-v", f"{out / 'tmp'}:/tmp", image,
              "perf", "report", "--symfs", f"{OUT_IN_CONTAINER}/{OBJECTS}", "-i", f"{OUT_IN_CONTAINER}/{read_data}"]
             if image else ["sudo", "unshare", "--mount", "--pid", "--fork", "--mount-proc", "sh", "-c",
                            f"cd {shlex.quote(str(out))} && mount --bind tmp /tmp && perf report --symfs {OBJECTS} "
                            f"-i {read_data}"])
    log(f"wrote {out}/: {read_data}, {SCRIPT_TEXT}, {''.join(n + ', ' for n in viewer_files)}tmp/ (the maps and dumps), {OBJECTS}/ (the mapped files). "
        "Read it again: " + shlex.join(again))
    return 0


def _live(runner: PerfRunner, keeper: Keeper, name: str, options: list[str], pids: list[int], out: Path,
          data: str, host: bool, args, log, started: threading.Event, stop: threading.Event) -> int:
    """--live: windows of --interval seconds, each read with the kept files and shown as a table (live_top),
    until Ctrl-C, stop, --seconds, or the recorded processes are gone.  DIR keeps the last window's recording,
    its perf script and its table (top.txt)."""
    deadline = time.monotonic() + args.seconds if args.seconds else None
    clear = CLEAR if sys.stdout.isatty() else ""
    windows = 0
    try:
        while not stop.is_set():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            window = args.interval if left is None else max(0.5, min(args.interval, left))
            status, said = runner.record(record_shell("perf", options, pids, data, window), started, stop)
            if not (out / PERF_DATA).is_file():
                raise RecordFailed(f"perf record wrote no perf.data (exit {status}): {said.strip()[-600:]}")
            code, said = runner.read(["perf", "script", "--symfs", _path(OBJECTS, host, out), "-F",
                                      PERF_SCRIPT_FIELDS, "-i", _path(PERF_DATA, host, out)], SCRIPT_TEXT)
            if code != 0:
                raise RecordFailed(f"perf script failed (exit {code}): {said.strip()[-600:]}")
            samples = parse_perf_script(read_regular_file(out / SCRIPT_TEXT, SCRIPT_LIMIT).decode(errors="replace"))
            windows += 1
            lines = top_table(samples, args.entries, f"{name}, window {windows} ({window:.1f} s): ")
            write_new_file(out / TOP_TEXT, ("\n".join(lines) + "\n").encode())
            log(clear + "\n".join(lines))
            if pids and not any(os.path.exists(f"/proc/{pid}") for pid in pids):
                log("the recorded processes have exited")
                break
    finally:
        keeper.stop()
        (out / COMMANDS).write_text("\n".join(runner.commands) + "\n")
        _give_back(out)
    log(f"{windows} windows; the last one's recording, perf script and table are in {out}/")
    return 0


def inject_jit(runner: PerfRunner, out: Path, host: bool, log=print) -> None:
    """DIR/perf.jit.data from DIR/perf.data: the trampolines' symbols and unwind tables in one ELF per arena
    (jit_inject, run here with DIR as the root: the recording's /tmp/jit-PID.dump is DIR/tmp's, and the ELF
    files beside the dumps are where the reading perf's --symfs DIR/root finds them, through DIR/root/tmp), or perf inject --jit where the reading perf unwinds without
    libunwind or the injector cannot read the recording; each says why."""
    _, options = runner.read(["perf", "version", "--build-options"])
    why = None
    if not jit_inject.unwinds_with_libunwind_text(options):
        why = "the reading perf unwinds without libunwind (perf version --build-options)"
    else:
        started = time.monotonic()
        try:
            summary = jit_inject.inject(str(out / PERF_DATA), str(out / JIT_DATA), root=str(out))
        except jit_inject.JitInjectError as exc:
            why = str(exc)
        else:
            log(f"injected {summary.loads} code loads of {summary.dumps} jitdumps into {summary.arenas} ELF files "
                f"(record/jit_inject.py) in {time.monotonic() - started:.1f} s")
            for warning in summary.warnings:
                log(f"note: {warning}")
            return
    log(f"note: {why}: perf inject --jit instead")
    code, said = runner.read(["perf", "inject", "-i", _path(PERF_DATA, host, out), "--jit",
                              "-o", _path(JIT_DATA, host, out)])
    if code != 0:
        raise RecordFailed(f"perf inject --jit failed (exit {code}): {said.strip()[-600:]}")


def _give_back(out: Path) -> None:
    """Under sudo, hand the outputs to the invoking user."""
    uid, gid = os.environ.get("SUDO_UID"), os.environ.get("SUDO_GID")
    if os.geteuid() != 0 or not (uid and gid and uid.isdigit() and gid.isdigit()):
        return
    for root, dirs, files in os.walk(out):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), int(uid), int(gid))
    os.lchown(out, int(uid), int(gid))


def main(matrix, args, log=print) -> int:
    try:
        import docker.errors
    except ImportError:
        return run(matrix, args, log)
    try:
        return run(matrix, args, log)
    except docker.errors.DockerException as exc:
        raise RecordFailed(f"the Docker engine refused: {' '.join(str(exc).split())}") from None

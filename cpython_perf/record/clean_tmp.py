"""Remove the perf maps and jitdumps of processes that are gone, and only those.

    python -m cpython_perf clean-tmp [--dir /tmp | --container NAME] [--older-than 1d] [--dry-run]
        [--all-users] [--keep-for PERF.DATA_OR_DIR ...]

Every process run with `-X perf` writes `/tmp/perf-<pid>.map`, with `-X perf_jit` `/tmp/jit-<pid>.dump`
(and `perf inject --jit` writes `jitted-<pid>-<n>.so` beside the dump, `jit-inject` `jit-<pid>-arena-<n>.so`);
nothing removes them, so a
service whose workers come and go fills /tmp.  perf needs a process's file to name its Python frames
for as long as anyone reads a recording of it, and perf names a file by the pid alone.  So a file is
removed only when all of these hold, each checked at the time of removal:

- it is a regular file (not a link) named `perf-<pid>.map`, `jit-<pid>.dump`, `jitted-<pid>-<n>.so` or
  `jit-<pid>-arena-<n>.so`;
- it belongs to the user running clean-tmp (`--all-users`, as root: to anyone);
- it was last modified longer ago than `--older-than` (default one day: the time left to read a recording);
- no process with that pid exists (in the pid namespace that named it: the caller's, or the container's);
- no process has it open or mapped (perf report, a copy in progress, ...);
- no recording names that pid: the perf.data files named with `--keep-for` (a file, or a directory's
  `*.data` files), and the output of every `perf record` running now (perf's `-o`, else `perf.data` in
  its working directory, read through /proc/<perf pid>/root); a running `perf record` whose output
  cannot be read (written to a pipe, compressed) stops clean-tmp: nothing is removed until it ends.

`--container NAME` cleans a running container's /tmp from the host (through /proc/<pid>/root): the pids
in those names are the container's, a process is alive when the container has it; recordings made on the
host name host pids, so there every `perf` process running on the host stops clean-tmp, and `--keep-for`
is refused (`record --container` keeps copies of the files it needs in its own output directory).

`--dry-run` says what would be removed and why each other file is kept; the exit status is 0, or 1 when
a file could not be removed.
"""

from __future__ import annotations

import os
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import DriverError
from ..subcommands import Command, log, main_of
from . import procfs
from .perf_data import PerfDataError, pids_named

FILE_NAME = re.compile(r"^(?:perf-(?P<map>\d+)\.map|jit-(?P<dump>\d+)\.dump|jitted-(?P<so>\d+)-\d+\.so"
                       r"|jit-(?P<arena>\d+)-arena-\d+\.so)$")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
DEFAULT_OLDER_THAN = "1d"
PERF_READERS = {"record", "report", "script", "inject", "annotate", "top", "trace", "mem", "c2c", "sched", "kvm",
                "timechart", "lock", "kwork", "diff", "archive", "buildid-cache"}


def add_arguments(p) -> None:
    where = p.add_mutually_exclusive_group()
    where.add_argument("--dir", default="/tmp", help="the directory to clean (default: /tmp)")
    where.add_argument("--container", default=None,
                       help="clean a running container's /tmp from the host (as root), by its processes")
    p.add_argument("--older-than", default=DEFAULT_OLDER_THAN, metavar="AGE",
                   help=f"only files last modified longer ago: N[smhd] (default {DEFAULT_OLDER_THAN}; 0 for any age)")
    p.add_argument("--dry-run", "-n", action="store_true", help="say what would be removed, remove nothing")
    p.add_argument("--all-users", action="store_true", help="as root: every user's files (default: your own)")
    p.add_argument("--keep-for", action="append", default=[], metavar="PERF_DATA",
                   help="a perf.data (or a directory of *.data files) whose processes' files must stay (repeatable)")


def parse_age(text: str) -> float:
    """Seconds of N[smhd] (a bare number: seconds)."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if not m:
        raise DriverError(f"--older-than {text!r}: give N followed by s, m, h or d (e.g. 30m, 1d)")
    return float(m.group(1)) * UNITS[m.group(2) or "s"]


def pid_of(name: str) -> int | None:
    m = FILE_NAME.match(name)
    if not m:
        return None
    return int(next(v for v in m.groupdict().values() if v is not None))


@dataclass(frozen=True)
class Decision:
    name: str
    size: int
    remove: bool
    why: str


@dataclass
class Recordings:
    """What the recordings say: the pids they name, and a reason to remove nothing at all (or None)."""

    pids: set[int]
    block: str | None


def perf_processes(proc: Path = procfs.PROC) -> list[tuple[int, list[str]]]:
    """Running perf processes (their pid, argv) that read or write recordings."""
    found = []
    for pid in procfs.pids(proc):
        argv = procfs.cmdline(pid, proc)
        if not argv or not re.fullmatch(r"perf(_\d+(\.\d+)*)?", os.path.basename(argv[0])):
            continue
        subcommand = next((a for a in argv[1:] if not a.startswith("-")), "")
        if subcommand in PERF_READERS:
            found.append((pid, argv))
    return found


def record_output(pid: int, argv: list[str], proc: Path = procfs.PROC) -> Path | None:
    """Where a running `perf record` writes (read through its root; None: a pipe, or unknown)."""
    output = "perf.data"
    for i, arg in enumerate(argv):
        if arg in ("-o", "--output") and i + 1 < len(argv):
            output = argv[i + 1]
        elif arg.startswith("--output="):
            output = arg.split("=", 1)[1]
        elif arg.startswith("-o") and len(arg) > 2:
            output = arg[2:]
    if output == "-":
        return None
    path = Path(output)
    if not path.is_absolute():
        cwd = procfs.cwd(pid, proc)
        if cwd is None:
            return None
        path = cwd / path
    return proc / str(pid) / "root" / str(path).lstrip("/")


def recordings(keep_for: list[str], container: bool, proc: Path = procfs.PROC) -> Recordings:
    """The pids the named perf.data files and the running perf records name (see the module's docstring)."""
    pids: set[int] = set()
    for item in keep_for:
        path = Path(item)
        if not path.exists():
            raise DriverError(f"--keep-for {item}: no such file or directory")
        files = sorted(p for p in path.iterdir() if p.is_file() and (p.suffix == ".data" or ".data." in p.name)) \
            if path.is_dir() else [path]
        for data in files:
            try:
                pids |= pids_named(data)
            except (PerfDataError, OSError) as exc:
                raise DriverError(f"--keep-for {data}: cannot tell which processes it recorded: {exc}") from None
    for pid, argv in perf_processes(proc):
        said = " ".join(argv)[:120]
        if container:
            return Recordings(pids, f"perf is running on the host (pid {pid}: {said}): it may record or read this "
                                    "container's processes, which it names by host pid")
        if next((a for a in argv[1:] if not a.startswith("-")), "") != "record":
            continue   # a reader has the files it reads open: holders() keeps those
        pids |= {int(p) for i, a in enumerate(argv[:-1]) if a in ("-p", "--pid")
                 for p in argv[i + 1].split(",") if p.isdigit()}
        output = record_output(pid, argv, proc)
        if output is None:
            return Recordings(pids, f"perf record (pid {pid}: {said}) writes to a pipe: which processes it records "
                                    "cannot be read until it ends")
        try:
            pids |= pids_named(output)
        except (PerfDataError, OSError) as exc:
            return Recordings(pids, f"perf record (pid {pid}: {said}) is running and its output cannot be read "
                                    f"({exc}): nothing is removed until it ends")
    return Recordings(pids, None)


def decide(directory: Path, older_than: float, all_users: bool, alive, recorded: Recordings,
           now: float | None = None, proc: Path = procfs.PROC) -> list[Decision]:
    """A decision for every file of directory named like a perf map, jitdump or jitted object.
    alive(pid) -> whether the process that named it exists."""
    now = time.time() if now is None else now
    uid = os.geteuid()
    entries = []
    for name in sorted(os.listdir(directory)):
        pid = pid_of(name)
        if pid is None:
            continue
        try:
            st = os.stat(directory / name, follow_symlinks=False)
        except FileNotFoundError:
            continue
        entries.append((name, pid, st))
    held = procfs.holders({directory / name for name, _, st in entries if stat.S_ISREG(st.st_mode)}, proc)
    decisions = []
    for name, pid, st in entries:
        age = now - st.st_mtime
        if not stat.S_ISREG(st.st_mode):
            why = "not a regular file"
        elif st.st_uid != uid and not (all_users and uid == 0):
            why = f"owned by uid {st.st_uid}, not by you" + ("" if uid != 0 else " (--all-users to include)")
        elif age < older_than:
            why = f"modified {_age(age)} ago (--older-than {_age(older_than)})"
        elif alive(pid):
            why = f"process {pid} is running"
        elif directory / name in held:
            why = f"open in process {', '.join(map(str, held[directory / name]))}"
        elif pid in recorded.pids:
            why = f"a recording names process {pid}"
        elif recorded.block:
            why = recorded.block
        else:
            decisions.append(Decision(name, st.st_size, True, f"process {pid} is gone, {_age(age)} since its last write"))
            continue
        decisions.append(Decision(name, st.st_size, False, why))
    return decisions


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def remove(directory: Path, decisions: list[Decision]) -> list[str]:
    """Unlink the files decided for removal, each only if it is still the same file (inode, size, time)
    as when it was decided on; returns the failures."""
    failures = []
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for d in decisions:
            if not d.remove:
                continue
            try:
                st = os.stat(d.name, dir_fd=fd, follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode) or st.st_size != d.size:
                    failures.append(f"{d.name}: changed since it was looked at, left alone")
                    continue
                os.unlink(d.name, dir_fd=fd)
            except FileNotFoundError:
                continue
            except OSError as exc:
                failures.append(f"{d.name}: {exc.strerror}")
    finally:
        os.close(fd)
    return failures


def run(args, log=print, client=None, proc: Path = procfs.PROC) -> int:
    older_than = parse_age(args.older_than)
    if args.all_users and os.geteuid() != 0:
        raise DriverError("--all-users needs root (only root may remove other users' files in /tmp)")
    if args.container:
        if args.keep_for:
            raise DriverError("--keep-for names recordings by host pid, the container's files by its own pids: "
                              "with --container, perf running on the host stops clean-tmp instead")
        from .. import host
        from .outside import check_access, find_container

        container = find_container(client or host.docker_client(log), args.container)
        check_access(container.pid, proc)
        directory = proc / str(container.pid) / "root" / "tmp"
        namespace = procfs.Namespace(container.pid, proc)
        namespace.scan()
        living = {p.ns_pid for p in namespace.known.values() if procfs.alive(p, proc)}

        def alive(pid: int) -> bool:
            return pid in living
        where = f"container {container.name}'s /tmp"
    else:
        directory = Path(args.dir)
        if not directory.is_dir():
            raise DriverError(f"--dir {directory}: not a directory")

        def alive(pid: int) -> bool:
            return (proc / str(pid)).exists()
        where = str(directory)
    recorded = recordings(args.keep_for, bool(args.container), proc)
    decisions = decide(directory, older_than, args.all_users, alive, recorded, proc=proc)
    gone = [d for d in decisions if d.remove]
    for d in decisions:
        log(f"{'would remove' if args.dry_run and d.remove else 'remove' if d.remove else 'keep'}  {d.name}  "
            f"({d.size} bytes): {d.why}")
    failures = [] if args.dry_run else remove(directory, decisions)
    for failure in failures:
        log(f"not removed: {failure}")
    freed = sum(d.size for d in gone)
    log(f"{where}: {len(gone)} of {len(decisions)} files {'would be ' if args.dry_run else ''}removed "
        f"({freed / 1048576:.1f} MiB), {len(decisions) - len(gone)} kept")
    return 1 if failures else 0


def _run_command(args) -> int:
    return run(args, log)


COMMAND = Command("clean-tmp", "remove the perf maps and jitdumps of processes that are gone: never one whose "
                               "process runs, that a process holds open, or that a recording names "
                               "(cpython_perf/record/clean_tmp.py)",
                  add_arguments, _run_command, description=__doc__.splitlines()[0])


def main(argv: list[str] | None = None) -> int:
    """`python -m cpython_perf.record.clean_tmp`: the same command without the rest of the driver (it needs the
    standard library only, so a container's own Python can run it on its /tmp)."""
    return main_of(COMMAND, argv, prog="python -m cpython_perf.record.clean_tmp")


if __name__ == "__main__":
    raise SystemExit(main())

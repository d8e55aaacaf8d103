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
  cannot be read (written to a pipe, compressed, a link, a FIFO) stops clean-tmp: nothing is removed
  until it ends.

`--container NAME` cleans a running container's /tmp from the host (through /proc/<pid>/root): the pids
in those names are the container's, a process is alive when the container has it; recordings made on the
host name host pids, so there every `perf` process running on the host stops clean-tmp, and `--keep-for`
is refused (`record --container` keeps copies of the files it needs in its own output directory).

What it reads is someone else's.  It runs as root on a node, and every file of a container's /tmp, of the
host's shared /tmp and of a running perf's root was written by a user or a container that may want root to
remove or read something else.  So:

- **One directory, by one descriptor.**  The directory cleaned is opened once, inside the root it belongs
  to, and everything else is relative to that descriptor: the listing, the `fstatat` of each entry (never
  following a link), the comparison with what processes hold (by device and inode of those stats, not by
  path), the check again just before removal and the `unlinkat`.  For `--container` the descriptor is the
  container's /tmp opened with `openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)` from
  /proc/<pid>/root (cpython_perf.record.untrusted_files): a container whose /tmp is a link (`/tmp ->
  /var/tmp/x`) has it resolved as its own processes resolve it, to the container's /var/tmp/x, never the
  host's; on a kernel without openat2 such a /tmp is refused.  `--dir` is opened `O_NOFOLLOW`: a `--dir`
  that is itself a link is refused (give its real path: whoever can change the link would choose what is
  cleaned).
- **The same file, or nothing.**  An entry is removed only if, looked at again just before `unlinkat`,
  it is the very file that was judged: a regular file of the same device, inode, size and modification
  time.  The one race left is between that look and the `unlinkat`, which removes by name: a name swapped
  in that moment (renamed over) names another entry of that same directory, so at worst that other
  entry -- something its owner put in the cleaned /tmp under a perf file's name -- goes instead (that name
  only).  Nothing outside the directory can be removed: no path is resolved again after the directory was
  opened, and `unlinkat` removes the entry itself (a link, never what it points to).
- **Recordings read without following what others planted.**  A running perf's output is opened inside
  its own root (/proc/<perf pid>/root, openat2 as above), its last component not followed, `O_NONBLOCK`,
  and read only if it is a regular file; a link or a FIFO there stops clean-tmp (nothing removed) rather
  than being read or blocking it.  A `--keep-for` path is opened `O_NOFOLLOW | O_NONBLOCK` (its last
  component a link, or neither a regular file nor a directory: refused, naming it), and so is each
  `*.data` of a `--keep-for` directory, relative to the directory's descriptor (a link there is refused:
  it could name any file; a FIFO or a socket is no recording and is passed over).

`--dry-run` says what would be removed and why each other file is kept; the exit status is 0, or 1 when
a file could not be removed.
"""

from __future__ import annotations

import errno
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
from .untrusted_files import READ_FLAGS, FileIdentity, ForeignRoot, Refused, has_openat2

FILE_NAME = re.compile(r"^(?:perf-(?P<map>\d+)\.map|jit-(?P<dump>\d+)\.dump|jitted-(?P<so>\d+)-\d+\.so"
                       r"|jit-(?P<arena>\d+)-arena-\d+\.so)$")
UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
DEFAULT_OLDER_THAN = "1d"
PERF_READERS = {"record", "report", "script", "inject", "annotate", "top", "trace", "mem", "c2c", "sched", "kvm",
                "timechart", "lock", "kwork", "diff", "archive", "buildid-cache"}
DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def add_arguments(p) -> None:
    where = p.add_mutually_exclusive_group()
    where.add_argument("--dir", default="/tmp", help="the directory to clean (default: /tmp; not a link to one)")
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
    """What to do with one entry of the cleaned directory; identity is what the entry was when judged (None:
    not a regular file), which it must still be when it is removed."""

    name: str
    size: int
    remove: bool
    why: str
    identity: FileIdentity | None = None


@dataclass
class Recordings:
    """What the recordings say: the pids they name, and a reason to remove nothing at all (or None)."""

    pids: set[int]
    block: str | None


# -- the directory cleaned, opened once


def open_host_dir(path: str) -> int:
    """A descriptor of the directory `--dir` names, its last component not followed: a link there is refused
    (whoever can change it would choose what root cleans)."""
    name = path.rstrip("/") or "/"    # a trailing slash would make the kernel follow a link
    try:
        return os.open(name, DIRECTORY_FLAGS | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise DriverError(f"--dir {path}: no such directory") from None
    except OSError as exc:
        try:
            link = stat.S_ISLNK(os.lstat(name).st_mode)
        except OSError:
            link = False
        if link:
            raise DriverError(f"--dir {path}: a symbolic link, which clean-tmp does not follow (whoever can change "
                              f"it would choose what is removed): give the real path, e.g. --dir "
                              f"$(realpath {path})") from None
        if exc.errno == errno.ENOTDIR:
            raise DriverError(f"--dir {path}: not a directory") from None
        raise DriverError(f"--dir {path}: {exc.strerror}") from None


def open_container_tmp(root: str | os.PathLike, where: str) -> tuple[int | None, str | None]:
    """(a descriptor of the /tmp of the container whose root is root (/proc/<pid>/root), None where it has
    none; a line to say about it, or None).  Resolved inside the root, as the container's own processes
    resolve it: a /tmp that is a link is followed there (with openat2), never to the host's directory of
    that name."""
    try:
        foreign = ForeignRoot(root, where)
    except PermissionError:
        raise DriverError(f"cannot open {root}: clean-tmp --container reads the container's /tmp through it; run "
                          "it as root on the host (sudo)") from None
    except FileNotFoundError:
        raise DriverError(f"{root} does not exist: the container's process is not in this pid namespace's /proc "
                          "(run clean-tmp --container on the host, not in a container), or it has just ended") \
            from None
    with foreign:
        try:
            return foreign.open_dir("tmp"), None
        except FileNotFoundError:
            return None, f"{where}: the container has no /tmp: nothing to clean"
        except Refused as refused:
            try:
                target = os.readlink("tmp", dir_fd=foreign.fd)
            except OSError:
                raise DriverError(f"{where}: cannot be opened ({refused.why})") from None
        if not has_openat2():
            raise DriverError(f"{where}: a symbolic link (to {target!r}), and this kernel has no openat2 to resolve "
                              "it inside the container (Linux 5.6 or newer): nothing is removed")
        said = f"{where}: a symbolic link to {target!r}, resolved inside the container"
        try:
            return foreign.open_dir("tmp", follow=True), said
        except FileNotFoundError:
            return None, f"{said}: no such directory there, nothing to clean"
        except Refused as refused:
            raise DriverError(f"{said}: cannot be opened ({refused.why})") from None


# -- recordings


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


def record_output(pid: int, argv: list[str], proc: Path = procfs.PROC) -> str | None:
    """Where a running `perf record` writes, as a path inside its own root (None: a pipe).  Raises Refused
    where a relative output's working directory cannot be read."""
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
    if output.startswith("/"):
        return output
    cwd = procfs.cwd(pid, proc)
    if cwd is None:
        raise Refused(output, "perf's working directory cannot be read")
    return f"{cwd}/{output}"


def pids_of_open_file(fd: int, name: str) -> set[int]:
    """pids_named of a regular file this process holds open (fd; name says which in an error): read through
    /proc/self/fd/N, the file already opened, so no path is resolved again."""
    via = f"/proc/self/fd/{fd}"
    try:
        return pids_named(Path(via))
    except PerfDataError as exc:
        raise PerfDataError(str(exc).replace(via, name)) from None


def read_recording(root: str | os.PathLike, path: str, where: str) -> set[int]:
    """The pids a perf.data names, path resolved inside root (a process's /proc/<pid>/root): a link as its last
    component, a FIFO or a device is Refused, never followed or waited on."""
    with ForeignRoot(root, where) as foreign:
        fd, _st = foreign.open_regular(path)
    try:
        return pids_of_open_file(fd, path)
    finally:
        os.close(fd)


def _open_keep_for(item: str) -> tuple[int, os.stat_result]:
    """A `--keep-for` path opened without following its last component or blocking (a FIFO), and its stat."""
    try:
        fd = os.open(item, READ_FLAGS)
    except FileNotFoundError:
        raise DriverError(f"--keep-for {item}: no such file or directory") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise DriverError(f"--keep-for {item}: a symbolic link, which clean-tmp does not follow (it could lead "
                              f"to any file): give the real path, e.g. --keep-for $(realpath {item})") from None
        raise DriverError(f"--keep-for {item}: {exc.strerror}") from None
    st = os.fstat(fd)
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        os.close(fd)
        raise DriverError(f"--keep-for {item}: neither a perf.data file nor a directory of them")
    return fd, st


def _keep_for_pids(item: str) -> set[int]:
    """The pids the recordings of one `--keep-for` name: the file, or each `*.data` of the directory (opened
    relative to it, none followed)."""
    fd, st = _open_keep_for(item)
    try:
        if stat.S_ISREG(st.st_mode):
            return _pids_or_refuse(fd, item)
        pids: set[int] = set()
        for name in sorted(n for n in os.listdir(fd) if n.endswith(".data") or ".data." in n):
            shown = os.path.join(item, name)
            try:
                data = os.open(name, READ_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                continue
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise DriverError(f"--keep-for {shown}: a symbolic link, which clean-tmp does not follow (it "
                                      "could lead to any file): put the recording itself there, or name it "
                                      "by its real path") from None
                raise DriverError(f"--keep-for {shown}: {exc.strerror}") from None
            try:
                if stat.S_ISREG(os.fstat(data).st_mode):   # a directory, FIFO or socket is no recording
                    pids |= _pids_or_refuse(data, shown)
            finally:
                os.close(data)
        return pids
    finally:
        os.close(fd)


def _pids_or_refuse(fd: int, name: str) -> set[int]:
    try:
        return pids_of_open_file(fd, name)
    except (PerfDataError, OSError) as exc:
        raise DriverError(f"--keep-for {name}: cannot tell which processes it recorded: {exc}") from None


def recordings(keep_for: list[str], container: bool, proc: Path = procfs.PROC) -> Recordings:
    """The pids the named perf.data files and the running perf records name (see the module's docstring)."""
    pids: set[int] = set()
    for item in keep_for:
        pids |= _keep_for_pids(item)
    for pid, argv in perf_processes(proc):
        said = " ".join(argv)[:120]
        if container:
            return Recordings(pids, f"perf is running on the host (pid {pid}: {said}): it may record or read this "
                                    "container's processes, which it names by host pid")
        if next((a for a in argv[1:] if not a.startswith("-")), "") != "record":
            continue   # a reader has the files it reads open: holders() keeps those
        pids |= {int(p) for i, a in enumerate(argv[:-1]) if a in ("-p", "--pid")
                 for p in argv[i + 1].split(",") if p.isdigit()}
        try:
            output = record_output(pid, argv, proc)
            if output is None:
                return Recordings(pids, f"perf record (pid {pid}: {said}) writes to a pipe: which processes it "
                                        "records cannot be read until it ends")
            pids |= read_recording(proc / str(pid) / "root", output, f"perf record {pid}'s root")
        except (PerfDataError, OSError) as exc:
            return Recordings(pids, f"perf record (pid {pid}: {said}) is running and its output cannot be read "
                                    f"({exc}): nothing is removed until it ends")
    return Recordings(pids, None)


# -- judging and removing, relative to the directory's descriptor


def decide(directory: int, older_than: float, all_users: bool, alive, recorded: Recordings,
           now: float | None = None, proc: Path = procfs.PROC) -> list[Decision]:
    """A decision for every entry of directory (a descriptor) named like a perf map, jitdump or jitted object,
    each stat'ed relative to it without following a link.  alive(pid) -> whether the process that named it
    exists."""
    now = time.time() if now is None else now
    uid = os.geteuid()
    entries = []
    for name in sorted(os.listdir(directory)):
        pid = pid_of(name)
        if pid is None:
            continue
        try:
            st = os.stat(name, dir_fd=directory, follow_symlinks=False)
        except FileNotFoundError:
            continue
        entries.append((name, pid, st))
    held = procfs.holders({(st.st_dev, st.st_ino) for _, _, st in entries if stat.S_ISREG(st.st_mode)}, proc)
    decisions = []
    for name, pid, st in entries:
        age = now - st.st_mtime
        regular = stat.S_ISREG(st.st_mode)
        if not regular:
            why = "not a regular file"
        elif st.st_uid != uid and not (all_users and uid == 0):
            why = f"owned by uid {st.st_uid}, not by you" + ("" if uid != 0 else " (--all-users to include)")
        elif age < older_than:
            why = f"modified {_age(age)} ago (--older-than {_age(older_than)})"
        elif alive(pid):
            why = f"process {pid} is running"
        elif (st.st_dev, st.st_ino) in held:
            why = f"open in process {', '.join(map(str, held[(st.st_dev, st.st_ino)]))}"
        elif pid in recorded.pids:
            why = f"a recording names process {pid}"
        elif recorded.block:
            why = recorded.block
        else:
            decisions.append(Decision(name, st.st_size, True, f"process {pid} is gone, {_age(age)} since its last "
                                                              "write", FileIdentity.of(st)))
            continue
        decisions.append(Decision(name, st.st_size, False, why, FileIdentity.of(st) if regular else None))
    return decisions


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def remove(directory: int, decisions: list[Decision]) -> list[str]:
    """Unlink (relative to directory, a descriptor) the entries decided for removal, each only if it is still
    the regular file that was judged (device, inode, size, modification time); returns the failures."""
    failures = []
    for d in decisions:
        if not d.remove:
            continue
        try:
            st = os.stat(d.name, dir_fd=directory, follow_symlinks=False)
            if d.identity is None or not stat.S_ISREG(st.st_mode) or FileIdentity.of(st) != d.identity:
                failures.append(f"{d.name}: changed since it was looked at, left alone")
                continue
            os.unlink(d.name, dir_fd=directory)
        except FileNotFoundError:
            continue
        except OSError as exc:
            failures.append(f"{d.name}: {exc.strerror}")
    return failures


def clean(directory: int, where: str, *, older_than: float, all_users: bool, dry_run: bool, alive,
          recorded: Recordings, log=print, proc: Path = procfs.PROC) -> int:
    """Judge and (unless dry_run) remove the entries of directory (a descriptor), saying each decision and the
    total; the exit status."""
    decisions = decide(directory, older_than, all_users, alive, recorded, proc=proc)
    gone = [d for d in decisions if d.remove]
    for d in decisions:
        log(f"{'would remove' if dry_run and d.remove else 'remove' if d.remove else 'keep'}  {d.name}  "
            f"({d.size} bytes): {d.why}")
    failures = [] if dry_run else remove(directory, decisions)
    for failure in failures:
        log(f"not removed: {failure}")
    freed = sum(d.size for d in gone)
    log(f"{where}: {len(gone)} of {len(decisions)} files {'would be ' if dry_run else ''}removed "
        f"({freed / 1048576:.1f} MiB), {len(decisions) - len(gone)} kept")
    return 1 if failures else 0


def clean_container_tmp(root: str | os.PathLike, where: str, *, older_than: float, all_users: bool,
                        dry_run: bool, alive, log=print, proc: Path = procfs.PROC) -> int:
    """Clean the /tmp of the container whose root directory is root (its /proc/<pid>/root), its /tmp resolved
    inside that root (open_container_tmp); alive(pid) -> whether the container has that pid."""
    directory, said = open_container_tmp(root, where)
    if said:
        log(said)
    if directory is None:
        return 0
    try:
        return clean(directory, where, older_than=older_than, all_users=all_users, dry_run=dry_run, alive=alive,
                     recorded=recordings([], True, proc), log=log, proc=proc)
    finally:
        os.close(directory)


def run(args, log=print, client=None, proc: Path = procfs.PROC) -> int:
    older_than = parse_age(args.older_than)
    if args.all_users and os.geteuid() != 0:
        raise DriverError("--all-users needs root (only root may remove other users' files in /tmp)")
    rules = {"older_than": older_than, "all_users": args.all_users, "dry_run": args.dry_run}
    if args.container:
        if args.keep_for:
            raise DriverError("--keep-for names recordings by host pid, the container's files by its own pids: "
                              "with --container, perf running on the host stops clean-tmp instead")
        from .. import host
        from .outside import find_container

        container = find_container(client or host.docker_client(log), args.container)
        try:
            namespace = procfs.Namespace(container.pid, proc)
        except ProcessLookupError:
            raise DriverError(f"cannot read the container's processes through {proc}/{container.pid}: run "
                              "clean-tmp --container as root on the host (sudo)") from None
        namespace.scan()
        living = {p.ns_pid for p in namespace.known.values() if procfs.alive(p, proc)}

        def alive(pid: int) -> bool:
            return pid in living
        return clean_container_tmp(proc / str(container.pid) / "root", f"container {container.name}'s /tmp",
                                   alive=alive, log=log, proc=proc, **rules)

    def alive(pid: int) -> bool:
        return (proc / str(pid)).exists()
    directory = open_host_dir(args.dir)
    try:
        recorded = recordings(args.keep_for, False, proc)
        return clean(directory, args.dir, alive=alive, recorded=recorded, log=log, proc=proc, **rules)
    finally:
        os.close(directory)


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

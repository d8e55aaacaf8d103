"""What /proc says about processes: their pid namespace and pid in it, their start time, the files they hold.

Read from the host's pid namespace (as root, or with CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH: the links
under /proc/PID/ns and /proc/PID/fd, and /proc/PID/root, are readable only with ptrace access to the
process).  A process that ends while it is read is simply not there: every reader returns None or leaves
it out rather than raising.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class ProcessId:
    """A process as /proc shows it: its pid here, its pid in its own pid namespace (the last NSpid entry:
    what it calls itself, and the pid in its /tmp/perf-PID.map), and its start time (clock ticks since
    boot), which tells it from a later process given the same pid."""

    pid: int
    ns_pid: int
    start: int


def pid_namespace(pid: int, proc: Path = PROC) -> tuple[int, int] | None:
    """(device, inode) of the pid namespace of process pid (None: gone, or not readable)."""
    try:
        st = os.stat(proc / str(pid) / "ns" / "pid")
    except OSError:
        return None
    return st.st_dev, st.st_ino


def start_time(pid: int, proc: Path = PROC) -> int | None:
    """Field 22 of /proc/PID/stat: when the process started, in clock ticks since boot (None: gone)."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces or parentheses itself
    fields = text[text.rfind(")") + 2:].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def ns_pid(pid: int, proc: Path = PROC) -> int | None:
    """The process's pid in its own pid namespace: the last number of the NSpid line of /proc/PID/status
    (None: gone, or a kernel before 4.1 without that line)."""
    try:
        for line in (proc / str(pid) / "status").read_text().splitlines():
            if line.startswith("NSpid:"):
                return int(line.split()[-1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def identify(pid: int, proc: Path = PROC) -> ProcessId | None:
    inner, start = ns_pid(pid, proc), start_time(pid, proc)
    if inner is None or start is None:
        return None
    return ProcessId(pid, inner, start)


def pids(proc: Path = PROC) -> list[int]:
    """Every process (thread group) /proc lists now."""
    try:
        return [int(name) for name in os.listdir(proc) if name.isdigit()]
    except OSError:
        return []


def alive(process: ProcessId, proc: Path = PROC) -> bool:
    """Whether that process (not only its pid: its start time too) still exists."""
    return start_time(process.pid, proc) == process.start


class Namespace:
    """The processes of one pid namespace (a container's), found by polling /proc: scan() adds the ones that
    appeared since the last scan, so a process is known from the scan after it started until the end, even
    once it has exited.  Only processes of that very namespace are taken, not of namespaces nested in it."""

    def __init__(self, anchor: int, proc: Path = PROC):
        self.proc = proc
        self.anchor = anchor
        self.namespace = pid_namespace(anchor, proc)
        if self.namespace is None:
            raise ProcessLookupError(f"process {anchor} does not exist, or its /proc/{anchor}/ns/pid cannot be read")
        self.known: dict[int, ProcessId] = {}      # by pid (here)
        self._listed: set[int] = set()              # the pids of the last scan

    def scan(self) -> list[ProcessId]:
        """Look at the processes that appeared since the last scan (pids /proc did not list then: a scan
        costs a directory listing, and a few reads per new process): those of the namespace are added to
        known (and returned)."""
        listed = set(pids(self.proc))
        new = []
        for pid in sorted(listed - self._listed):
            if pid_namespace(pid, self.proc) != self.namespace:
                continue
            ident = identify(pid, self.proc)
            if ident is not None:
                self.known[pid] = ident
                new.append(ident)
        self._listed = listed
        return new

    def by_ns_pid(self, inner: int) -> ProcessId | None:
        """The known process that calls itself inner in the namespace (the newest, if the pid was reused)."""
        found = [p for p in self.known.values() if p.ns_pid == inner]
        return max(found, key=lambda p: p.start) if found else None


def holders(identities: set[tuple[int, int]], proc: Path = PROC) -> dict[tuple[int, int], list[int]]:
    """Of identities ((device, inode) of regular files, as the caller stat'ed them), those some process has open
    or mapped now, with the pids holding each: every /proc/PID/fd/* link and every file mapping of
    /proc/PID/maps is compared by (device, inode).  The caller's stat is the only look at the files themselves,
    so a path swapped since cannot make another file count.  Processes whose fds cannot be read (another
    user's, without privilege) are left out."""
    wanted = set(identities)
    found: dict[tuple[int, int], list[int]] = {}
    if not wanted:
        return found
    for pid in pids(proc):
        fd_dir = proc / str(pid) / "fd"
        try:
            names = os.listdir(fd_dir)
        except OSError:
            names = []
        for name in names:
            try:
                st = os.stat(fd_dir / name)
            except OSError:
                continue
            hit = (st.st_dev, st.st_ino)
            if hit in wanted and pid not in found.get(hit, []):
                found.setdefault(hit, []).append(pid)
        try:
            maps = (proc / str(pid) / "maps").read_text()
        except OSError:
            continue
        for line in maps.splitlines():
            # address perms offset major:minor inode path
            parts = line.split(None, 5)
            if len(parts) < 6 or not parts[4].isdigit() or parts[4] == "0":
                continue
            try:
                major, minor = (int(x, 16) for x in parts[3].split(":"))
            except ValueError:
                continue
            hit = (os.makedev(major, minor), int(parts[4]))
            if hit in wanted and pid not in found.get(hit, []):
                found.setdefault(hit, []).append(pid)
    return found


def cmdline(pid: int, proc: Path = PROC) -> list[str]:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def cwd(pid: int, proc: Path = PROC) -> Path | None:
    try:
        return Path(os.readlink(proc / str(pid) / "cwd"))
    except OSError:
        return None

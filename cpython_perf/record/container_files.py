"""Keep the perf maps and jitdumps of a container's processes under the names perf reads once they have exited.

A process in a container writes `/tmp/perf-<pid>.map` and `/tmp/jit-<pid>.dump` in its own mount
namespace, named with its pid in its own pid namespace.  perf outside the container names the process
by its host pid.  While the process lives, perf finds the map through /proc/<pid>/root (its nsinfo
support); once it has exited perf looks for `/tmp/perf-<host pid>.map` in its own /tmp, which nobody
wrote, and every Python frame is `[unknown]`.  `perf inject --jit` likewise accepts a dump after the
process has exited only as `jit-<host pid>.dump` (perf_data.rename_jitdumps renames the recording's mmap
of it), and names the code it injects after the pid in the dump's records.

The Keeper polls /proc for the processes of the container's pid namespace (procfs.Namespace: new ones
every `interval`, 10 ms by default, so a worker that lives a few tens of milliseconds is still seen) and
copies each one's files into a directory, as they grow:

    /tmp/perf-<ns pid>.map  ->  DIR/perf-<host pid>.map    (as it is)
    /tmp/jit-<ns pid>.dump  ->  DIR/jit-<host pid>.dump    (whole records only; the pid and tid of each
                                                            code load and move, and of the header, set to
                                                            the host pid)

It reads them through /proc/<host pid>/root while the process lives, then through the root of the
container's first process (the files stay in the container's /tmp after their process has exited), and
at the end, once the container has stopped, through a reader the caller gives (the Docker engine's
copy of the stopped container's files).  A process that starts and exits between two scans is not seen;
its files are counted in `missed` (the files of the container's /tmp that no known process wrote).
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import procfs

MAP_NAME = re.compile(r"^perf-(\d+)\.map$")
DUMP_NAME = re.compile(r"^jit-(\d+)\.dump$")
JITDUMP_HEADER_SIZE = 40
JITDUMP_HEADER_PID = 20        # u32 magic, version, total_size, elf_mach, pad1, then u32 pid
JITDUMP_RECORD_HEADER = struct.Struct("<IIQ")   # id, total_size, timestamp
JIT_CODE_LOAD, JIT_CODE_MOVE = 0, 1             # records whose body starts with u32 pid, u32 tid
JITDUMP_MAGIC = 0x4A695444

Reader = Callable[[str], "bytes | None"]   # a file name in the container's /tmp -> its bytes (None: absent)


def map_name(pid: int) -> str:
    return f"perf-{pid}.map"


def dump_name(pid: int) -> str:
    return f"jit-{pid}.dump"


@dataclass
class Kept:
    """One file being kept: how much of the source has been taken, and where it goes."""

    source: str        # its name in the container's /tmp
    dest: Path
    jitdump: bool
    host_pid: int
    taken: int = 0     # bytes of the source copied (a map: up to its last whole line; a dump: whole records)

    def take(self, data: bytes) -> None:
        """data: the source from offset `taken` to its current end.  Appends what is whole of it."""
        if self.jitdump:
            out, used = rewrite_jitdump(data, self.taken, self.host_pid)
        else:
            used = data.rfind(b"\n") + 1
            out = data[:used]
        if used:
            # 0600 as the interpreter writes them: code addresses are for the user alone
            fd = os.open(self.dest, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "ab") as f:
                f.write(out)
            self.taken += used

    def restart(self) -> None:
        """The source is shorter than what was taken (cut back after a failed write): take it again."""
        self.dest.unlink(missing_ok=True)
        self.taken = 0


def mapped_objects(pid: int, proc: Path = procfs.PROC) -> set[str]:
    """The files a process maps executable (the interpreter, its shared libraries, extension modules), as
    paths in its own mount namespace: perf needs them to name and unwind its C frames.  Its jitdump,
    deleted files and anonymous or special mappings are left out."""
    try:
        maps = (proc / str(pid) / "maps").read_text()
    except OSError:
        return set()
    found = set()
    for line in maps.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or "x" not in parts[1]:
            continue
        path = parts[5].strip()
        if (not path.startswith("/") or path.endswith(" (deleted)") or path.startswith("/memfd:")
                or DUMP_NAME.match(path.rpartition("/")[2]) or "/../" in path):
            continue
        found.add(path)
    return found


def rewrite_jitdump(data: bytes, offset: int, pid: int) -> tuple[bytes, int]:
    """The whole records of data (a jitdump read from offset), with the header's pid and every code load's and
    code move's pid and tid set to pid; and how many bytes of data that is (a record cut off at the end is
    left for the next read)."""
    out = bytearray()
    at = 0
    if offset == 0:
        if len(data) < JITDUMP_HEADER_SIZE:
            return b"", 0
        header = bytearray(data[:JITDUMP_HEADER_SIZE])
        struct.pack_into("<I", header, JITDUMP_HEADER_PID, pid)
        out += header
        at = JITDUMP_HEADER_SIZE
    while at + JITDUMP_RECORD_HEADER.size <= len(data):
        kind, size, _ = JITDUMP_RECORD_HEADER.unpack_from(data, at)
        if size < JITDUMP_RECORD_HEADER.size or at + size > len(data):
            break
        record = bytearray(data[at:at + size])
        if kind in (JIT_CODE_LOAD, JIT_CODE_MOVE) and size >= JITDUMP_RECORD_HEADER.size + 8:
            struct.pack_into("<II", record, JITDUMP_RECORD_HEADER.size, pid, pid)
        out += record
        at += size
    return bytes(out), at


@dataclass
class Summary:
    processes: int = 0                                  # processes of the container seen
    maps: list[int] = field(default_factory=list)      # host pids whose map was kept
    dumps: list[int] = field(default_factory=list)     # host pids whose jitdump was kept
    missed: list[str] = field(default_factory=list)    # files of the container's /tmp no seen process wrote


class Keeper:
    """Keeps the files of the processes of anchor's pid namespace in dest (see the module's docstring).
    start() runs the polling in a thread, stop() ends it after a last copy; or call poll() yourself."""

    def __init__(self, anchor: int, dest: Path, objects: Path | None = None, interval: float = 0.01,
                 copy_every: float = 0.1, proc: Path = procfs.PROC):
        self.namespace = procfs.Namespace(anchor, proc)
        self.anchor = self.namespace.known.get(anchor) or procfs.identify(anchor, proc)
        self.dest = Path(dest)
        self.dest.mkdir(parents=True, exist_ok=True)
        self.interval, self.copy_every, self.proc = interval, copy_every, proc
        self.kept: dict[str, Kept] = {}     # by dest name
        # objects: where the files the processes map executable are copied, at their paths (perf script
        # --symfs): perf needs the interpreter's binary to name C frames and, with dwarf, to unwind them
        self.objects = Path(objects) if objects is not None else None
        self.objects_copied: dict[str, int] = {}   # path -> bytes
        self._finished: set[int] = set()             # host pids whose files were copied after they exited
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_copy = 0.0
        self.errors: list[str] = []
        self.started = time.time()

    # -- reading the container's /tmp

    def _roots(self, process: procfs.ProcessId) -> list[Path]:
        """Where the process's /tmp can be read now: its own root while it lives, else the container's."""
        roots = []
        if procfs.alive(process, self.proc):
            roots.append(self.proc / str(process.pid) / "root")
        if self.anchor is not None and procfs.alive(self.anchor, self.proc):
            roots.append(self.proc / str(self.anchor.pid) / "root")
        return roots

    def _copy(self, kept: Kept, read: Callable[[], "bytes | None"] | None, roots: list[Path]) -> bool:
        """Copy what is new of kept's source; False when it was found nowhere."""
        for root in roots:
            path = root / "tmp" / kept.source
            try:
                with open(path, "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    if size < kept.taken:
                        kept.restart()
                    f.seek(kept.taken)
                    kept.take(f.read(size - kept.taken))
                return True
            except FileNotFoundError:
                continue
            except OSError as exc:
                self.errors.append(f"{path}: {exc.strerror}")
                continue
        data = read() if read is not None else None
        if data is None:
            return False
        if len(data) < kept.taken:
            kept.restart()
        kept.take(data[kept.taken:])
        return True

    def copy_objects(self, process: procfs.ProcessId) -> None:
        """Copy the files process maps executable that were not copied yet (while it lives: through its root)."""
        if self.objects is None or not procfs.alive(process, self.proc):
            return
        root = self.proc / str(process.pid) / "root"
        for path in sorted(mapped_objects(process.pid, self.proc) - set(self.objects_copied)):
            dest = self.objects / path.lstrip("/")
            try:
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(root / path.lstrip("/"), dest)
                self.objects_copied[path] = dest.stat().st_size
            except OSError as exc:
                self.errors.append(f"{path} of process {process.pid}: {exc.strerror or exc}")
                self.objects_copied[path] = 0

    def copy_all(self, reader: Reader | None = None) -> None:
        """Copy what is new in the files of every known process (reader: the last resort, for a stopped
        container)."""
        for process in list(self.namespace.known.values()):
            if process.pid in self._finished:
                continue
            gone = not procfs.alive(process, self.proc)
            self.copy_objects(process)
            roots = self._roots(process)
            for name, jitdump in ((map_name(process.ns_pid), False), (dump_name(process.ns_pid), True)):
                dest_name = dump_name(process.pid) if jitdump else map_name(process.pid)
                kept = self.kept.get(dest_name)
                fresh = kept is None
                if fresh:
                    kept = Kept(name, self.dest / dest_name, jitdump, process.pid)
                    kept.dest.unlink(missing_ok=True)
                found = self._copy(kept, (lambda n=name: reader(n)) if reader is not None else None, roots)
                if found and fresh:
                    kept.dest.touch()
                    self.kept[dest_name] = kept
            if gone and (roots or reader is not None):
                # copied after the process exited: its files take nothing more
                self._finished.add(process.pid)

    def poll(self) -> None:
        self.namespace.scan()
        now = time.monotonic()
        if now - self._last_copy >= self.copy_every:
            self._last_copy = now
            self.copy_all()

    # -- the thread

    def start(self) -> "Keeper":
        self.namespace.scan()
        self.copy_all()
        self._thread = threading.Thread(target=self._run, name="cpython-perf-keeper", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.poll()
            except Exception as exc:  # noqa: BLE001 - a bad read must not end the keeping
                self.errors.append(f"{type(exc).__name__}: {exc}")

    def stop(self, reader: Reader | None = None,
             listing: Callable[[], "list[tuple[str, float]]"] | None = None) -> Summary:
        """End the polling, copy once more (through reader where the container has stopped) and say what was
        kept; listing: (name, mtime) of the files in the container's /tmp, where it can no longer be read
        through /proc (to count the files no seen process wrote)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.namespace.scan()
        self.copy_all(reader)
        return self.summary(listing)

    def summary(self, listing: Callable[[], "list[tuple[str, float]]"] | None = None) -> Summary:
        """What was kept, and the maps and dumps of the container's /tmp written since the keeping started
        that no seen process wrote (a process that lived less than the polling interval)."""
        kept_names = {k.source for k in self.kept.values()}
        names: list[tuple[str, float]] = []
        if self.anchor is not None and procfs.alive(self.anchor, self.proc):
            tmp = self.proc / str(self.anchor.pid) / "root" / "tmp"
            try:
                for name in os.listdir(tmp):
                    try:
                        names.append((name, os.stat(tmp / name).st_mtime))
                    except OSError:
                        pass
            except OSError:
                pass
        elif listing is not None:
            names = listing()
        missed = sorted(name for name, mtime in names
                        if (MAP_NAME.match(name) or DUMP_NAME.match(name)) and name not in kept_names
                        and mtime >= self.started - 1)
        return Summary(len(self.namespace.known),
                       sorted(k.host_pid for k in self.kept.values() if not k.jitdump and k.taken),
                       sorted(k.host_pid for k in self.kept.values() if k.jitdump and k.taken),
                       missed)

    def renames(self) -> dict[int, tuple[int, int]]:
        """For perf_data.rename_jitdumps: host pid -> (pid in the container, host pid) of every kept dump."""
        by_pid = self.namespace.known
        return {k.host_pid: (by_pid[k.host_pid].ns_pid, k.host_pid) for k in self.kept.values()
                if k.jitdump and k.host_pid in by_pid}

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

Everything the container holds is untrusted (untrusted_files): each path is resolved inside the
container's root, never through a link to the host's files; only regular files are read, without
blocking (a FIFO, a device), at most MAP_LIMIT or DUMP_LIMIT bytes of one file (OBJECT_LIMIT of a mapped
object), a chunk at a time; a map line or a jitdump record longer than a chunk, or a dump without the
jitdump magic, ends its copy.  Each such file is listed once in `refused` with the reason, and the rest of
the recording goes on.  The copies are made new in DIR (0700), 0600 each, as the interpreter makes its own.
"""

from __future__ import annotations

import os
import re
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import procfs
from .untrusted_files import CHUNK, ForeignRoot, PrivateDir, Refused

MAP_NAME = re.compile(r"^perf-(\d+)\.map$")
DUMP_NAME = re.compile(r"^jit-(\d+)\.dump$")
JITDUMP_HEADER_SIZE = 40
JITDUMP_HEADER_LIMIT = 4096   # a header that says it is longer is taken as this long
JITDUMP_HEADER_PID = 20        # u32 magic, version, total_size, elf_mach, pad1, then u32 pid
JITDUMP_RECORD_HEADER = struct.Struct("<IIQ")   # id, total_size, timestamp
JIT_CODE_LOAD, JIT_CODE_MOVE = 0, 1             # records whose body starts with u32 pid, u32 tid
JITDUMP_MAGIC = 0x4A695444
# The most of one file that is copied: a map grows by about 74 bytes a code object, a dump by about 413, so
# these hold hundreds of thousands of code objects; a file past its limit is refused from there on
MAP_LIMIT = 256 << 20
DUMP_LIMIT = 2 << 30
OBJECT_LIMIT = 2 << 30          # an executable or library a process maps (libpython, an extension module)
READ_CHUNK = 16 * CHUNK         # read at a time; a map line or a jitdump record must fit in one
MAPS_LIMIT = 16 << 20           # of /proc/<pid>/maps (a process with a million mappings has about 100 MiB)

Reader = Callable[[str], "bytes | None"]   # a file name in the container's /tmp -> its bytes (None: absent)


def map_name(pid: int) -> str:
    return f"perf-{pid}.map"


def dump_name(pid: int) -> str:
    return f"jit-{pid}.dump"


@dataclass
class Kept:
    """One file being kept: how much of the source has been taken, and where it goes (a name in out)."""

    source: str        # its name in the container's /tmp
    dest: Path
    jitdump: bool
    host_pid: int
    taken: int = 0     # bytes of the source copied (a map: up to its last whole line; a dump: whole records)
    out: PrivateDir | None = None   # where dest is made (default: dest's directory, opened as a PrivateDir)
    made: bool = False

    @property
    def limit(self) -> int:
        return DUMP_LIMIT if self.jitdump else MAP_LIMIT

    def _out(self) -> PrivateDir:
        if self.out is None:
            self.out = PrivateDir(self.dest.parent)
        return self.out

    def take(self, data: bytes) -> None:
        """data: the source from offset `taken` on (at most a chunk).  Appends what is whole of it; Refused
        where the source cannot be a map or a dump, or would pass its limit."""
        if self.taken + len(data) > self.limit:
            raise Refused(f"/tmp/{self.source}", f"larger than the {self.limit >> 20} MiB kept of such a file")
        if self.jitdump:
            if self.taken == 0 and len(data) >= 4 and struct.unpack_from("<I", data)[0] != JITDUMP_MAGIC:
                raise Refused(f"/tmp/{self.source}", "not a jitdump (no JiTD magic)")
            out, used = rewrite_jitdump(data, self.taken, self.host_pid)
            whole = "a jitdump record"
        else:
            used = data.rfind(b"\n") + 1
            out = data[:used]
            whole = "a line"
        if not used and len(data) >= READ_CHUNK:
            raise Refused(f"/tmp/{self.source}", f"{whole} longer than {READ_CHUNK >> 20} MiB")
        if not self.made:
            # new, 0600 as the interpreter writes them: code addresses are for the user alone
            fd = self._out().create(self.dest.name)
            self.made = True
        elif used:
            fd = self._out().append(self.dest.name)
        else:
            return
        with os.fdopen(fd, "ab") as f:
            f.write(out)
        self.taken += used

    def restart(self) -> None:
        """The source is shorter than what was taken (cut back after a failed write): take it again."""
        self._out().remove(self.dest.name)
        self.made = False
        self.taken = 0


def read_maps(pid: int, proc: Path = procfs.PROC) -> str:
    """/proc/<pid>/maps, at most MAPS_LIMIT bytes of it ("" where it cannot be read)."""
    try:
        with open(proc / str(pid) / "maps", "rb") as f:
            return f.read(MAPS_LIMIT).decode(errors="replace")
    except OSError:
        return ""


def mapped_files(pid: int, proc: Path = procfs.PROC) -> list[tuple[str, str]]:
    """(permissions, path) of each file mapping of a process, as the kernel names them (paths in its own mount
    namespace); anonymous and special mappings are left out."""
    found = []
    # one line a mapping: the kernel escapes \n in a file name and nothing else, so only \n ends a line
    for line in read_maps(pid, proc).split("\n"):
        parts = line.split(" ", 5)
        if len(parts) == 6:
            path = parts[5].lstrip(" ")   # the kernel pads the path's column with spaces
            if path.startswith("/"):
                found.append((parts[1], path))
    return found


def mapped_objects(pid: int, proc: Path = procfs.PROC) -> set[str]:
    """The files a process maps executable (the interpreter, its shared libraries, extension modules), as
    paths in its own mount namespace: perf needs them to name and unwind its C frames.  Its jitdump,
    deleted files and anonymous or special mappings are left out."""
    found = set()
    for perms, path in mapped_files(pid, proc):
        if ("x" not in perms or path.endswith(" (deleted)") or path.startswith("/memfd:")
                or DUMP_NAME.match(path.rpartition("/")[2]) or "/../" in path or "\n" in path):
            continue
        found.add(path)
    return found


def process_mode(process: procfs.ProcessId, proc: Path = procfs.PROC) -> str | None:
    """The perf mode a process runs in, from what the kernel says it is, not from files it could plant for
    another: "perf_jit" where it maps its own jitdump (`-X perf_jit` maps /tmp/jit-<its pid>.dump so that
    perf sees the dump) or its command line asks for it (`-X perf_jit`, before the dump is made); "perf"
    where its command line has `-X perf`; PYTHON_PERF_JIT_SUPPORT and PYTHONPERFSUPPORT in the environment it
started with count the same; else None (no sign: the perf map, if any, is not mapped)."""
    own_dump = dump_name(process.ns_pid)
    if any(path.rpartition("/")[2] == own_dump for _, path in mapped_files(process.pid, proc)):
        return "perf_jit"
    argv = procfs.cmdline(process.pid, proc)
    options = [b for a, b in zip(argv, argv[1:]) if a == "-X"] + [a[2:] for a in argv if a.startswith("-X")]
    environ = environment(process.pid, proc)
    if "perf_jit" in options or environ.get("PYTHON_PERF_JIT_SUPPORT", "") not in ("", "0"):
        return "perf_jit"
    if "perf" in options or environ.get("PYTHONPERFSUPPORT", "") not in ("", "0"):
        return "perf"
    return None


def environment(pid: int, proc: Path = procfs.PROC, limit: int = 1 << 20) -> dict[str, str]:
    """The environment a process started with (/proc/<pid>/environ, at most limit bytes; {} if unreadable)."""
    try:
        with open(proc / str(pid) / "environ", "rb") as f:
            raw = f.read(limit)
    except OSError:
        return {}
    found = {}
    for item in raw.split(b"\0"):
        key, eq, value = item.partition(b"=")
        if eq:
            found[key.decode(errors="replace")] = value.decode(errors="replace")
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
        # the header's total_size says where the records start (perf's reader skips to it); at least 40 bytes
        size = max(JITDUMP_HEADER_SIZE, min(struct.unpack_from("<I", data, 8)[0], JITDUMP_HEADER_LIMIT))
        if len(data) < size:
            return b"", 0
        header = bytearray(data[:size])
        struct.pack_into("<I", header, JITDUMP_HEADER_PID, pid)
        out += header
        at = size
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
    refused: list[str] = field(default_factory=list)   # files not copied (or not further): what and why


class Keeper:
    """Keeps the files of the processes of anchor's pid namespace in dest (see the module's docstring).
    start() runs the polling in a thread, stop() ends it after a last copy; or call poll() yourself."""

    def __init__(self, anchor: int, dest: Path, objects: Path | None = None, interval: float = 0.01,
                 copy_every: float = 0.1, proc: Path = procfs.PROC):
        self.namespace = procfs.Namespace(anchor, proc)
        self.anchor = self.namespace.known.get(anchor) or procfs.identify(anchor, proc)
        self.dest = Path(dest)
        self.dest.parent.mkdir(parents=True, exist_ok=True)
        self.out = PrivateDir(self.dest)
        self.interval, self.copy_every, self.proc = interval, copy_every, proc
        self.kept: dict[str, Kept] = {}     # by dest name
        # objects: where the files the processes map executable are copied, at their paths (perf script
        # --symfs): perf needs the interpreter's binary to name C frames and, with dwarf, to unwind them
        self.objects = Path(objects) if objects is not None else None
        if self.objects is not None:
            self.objects.parent.mkdir(parents=True, exist_ok=True)
        self.objects_out = PrivateDir(self.objects) if self.objects is not None else None
        self.objects_copied: dict[str, int] = {}   # path -> bytes
        self._finished: set[int] = set()             # host pids whose files were copied after they exited
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_copy = 0.0
        self.errors: list[str] = []
        self.refused: dict[str, str] = {}            # what was refused (a file of a process) -> why
        self.started = time.time()

    # -- reading the container's /tmp

    def _roots(self, process: procfs.ProcessId) -> tuple[bool, list[ForeignRoot]]:
        """Where the process's /tmp can be read now: its own root while it lives, else the container's; whether
        there was any, and those that could be opened (once for both of its files; the caller closes them)."""
        paths = []
        if procfs.alive(process, self.proc):
            paths.append(self.proc / str(process.pid) / "root")
        if self.anchor is not None and procfs.alive(self.anchor, self.proc):
            paths.append(self.proc / str(self.anchor.pid) / "root")
        opened = []
        for path in paths:
            try:
                opened.append(ForeignRoot(path))
            except OSError:
                pass    # the process has gone since it was looked at
        return bool(paths), opened

    def _refuse(self, what: str, why: str) -> None:
        self.refused.setdefault(what, why)

    def _copy_from(self, kept: Kept, root: ForeignRoot) -> None:
        """Copy what is new of kept's source from the /tmp of root (FileNotFoundError: it is not there)."""
        fd, st = root.open_regular(f"tmp/{kept.source}")
        try:
            if st.st_size < kept.taken:
                kept.restart()
            while kept.taken < st.st_size:
                data = os.pread(fd, min(READ_CHUNK, st.st_size - kept.taken), kept.taken)
                if not data:
                    break
                before = kept.taken
                kept.take(data)
                if kept.taken == before:
                    break
        finally:
            os.close(fd)

    def _copy(self, kept: Kept, read: Callable[[], "bytes | None"] | None, roots: list[ForeignRoot]) -> bool:
        """Copy what is new of kept's source; False when it was found nowhere (or was refused)."""
        what = f"/tmp/{kept.source} of process {kept.host_pid}"
        if what in self.refused:
            return False
        try:
            for root in roots:
                try:
                    self._copy_from(kept, root)
                    return True
                except FileNotFoundError:
                    continue
            data = read() if read is not None else None
            if data is None:
                return False
            if len(data) < kept.taken:
                kept.restart()
            while kept.taken < len(data):
                before = kept.taken
                kept.take(data[kept.taken:kept.taken + READ_CHUNK])
                if kept.taken == before:
                    break
            return True
        except Refused as exc:
            self._refuse(what, exc.why)
            return kept.made
        except OSError as exc:
            self.errors.append(f"{what}: {exc.strerror or exc}")
            return kept.made

    def copy_objects(self, process: procfs.ProcessId) -> None:
        """Copy the files process maps executable that were not copied yet (while it lives: through its root)."""
        if self.objects_out is None or not procfs.alive(process, self.proc):
            return
        wanted = sorted(mapped_objects(process.pid, self.proc) - set(self.objects_copied))
        if not wanted:
            return
        try:
            foreign = ForeignRoot(self.proc / str(process.pid) / "root")
        except OSError:
            return
        try:
            for path in wanted:
                self.objects_copied[path] = 0
                try:
                    self.objects_copied[path] = self._copy_object(foreign, path)
                except Refused as exc:
                    self._refuse(f"{path} (mapped by process {process.pid})", exc.why)
                except OSError as exc:
                    self.errors.append(f"{path} of process {process.pid}: {exc.strerror or exc}")
        finally:
            foreign.close()

    def _copy_object(self, foreign: ForeignRoot, path: str) -> int:
        src, st = foreign.open_regular(path)
        try:
            if st.st_size > OBJECT_LIMIT:
                raise Refused(path, f"{st.st_size >> 20} MiB, more than the {OBJECT_LIMIT >> 20} MiB copied of a "
                                    "mapped file")
            dst = self.objects_out.create(path.lstrip("/"))
            copied = 0
            with os.fdopen(dst, "wb") as out:
                while copied < st.st_size:
                    data = os.pread(src, min(READ_CHUNK, st.st_size - copied), copied)
                    if not data:
                        break
                    out.write(data)
                    copied += len(data)
            return copied
        finally:
            os.close(src)

    def copy_all(self, reader: Reader | None = None) -> None:
        """Copy what is new in the files of every known process (reader: the last resort, for a stopped
        container)."""
        for process in list(self.namespace.known.values()):
            if process.pid in self._finished:
                continue
            gone = not procfs.alive(process, self.proc)
            self.copy_objects(process)
            any_root, roots = self._roots(process)
            try:
                for name, jitdump in ((map_name(process.ns_pid), False), (dump_name(process.ns_pid), True)):
                    dest_name = dump_name(process.pid) if jitdump else map_name(process.pid)
                    kept = self.kept.get(dest_name)
                    fresh = kept is None
                    if fresh:
                        kept = Kept(name, self.dest / dest_name, jitdump, process.pid, out=self.out)
                        self.out.remove(dest_name)
                    found = self._copy(kept, (lambda n=name: reader(n)) if reader is not None else None, roots)
                    if found and fresh:
                        if not kept.made:
                            os.close(self.out.create(dest_name))
                            kept.made = True
                        self.kept[dest_name] = kept
            finally:
                for root in roots:
                    root.close()
            if gone and (any_root or reader is not None):
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

    def _listing(self) -> list[tuple[str, float]]:
        """(name, mtime) of the maps and dumps in the container's /tmp, read inside its root."""
        names: list[tuple[str, float]] = []
        try:
            foreign = ForeignRoot(self.proc / str(self.anchor.pid) / "root")
        except OSError:
            return names
        try:
            fd = foreign.open_dir("tmp", follow=True)   # a /tmp that is a link: the container's own directory
        except OSError:
            foreign.close()
            return names
        try:
            for name in os.listdir(fd):
                if MAP_NAME.match(name) or DUMP_NAME.match(name):
                    try:
                        names.append((name, os.stat(name, dir_fd=fd, follow_symlinks=False).st_mtime))
                    except OSError:
                        pass
        finally:
            os.close(fd)
            foreign.close()
        return names

    def summary(self, listing: Callable[[], "list[tuple[str, float]]"] | None = None) -> Summary:
        """What was kept, and the maps and dumps of the container's /tmp written since the keeping started
        that no seen process wrote (a process that lived less than the polling interval)."""
        kept_names = {k.source for k in self.kept.values()}
        if self.anchor is not None and procfs.alive(self.anchor, self.proc):
            names = self._listing()
        elif listing is not None:
            names = listing()
        else:
            names = []
        missed = sorted(name for name, mtime in names
                        if (MAP_NAME.match(name) or DUMP_NAME.match(name)) and name not in kept_names
                        and mtime >= self.started - 1)
        return Summary(len(self.namespace.known),
                       sorted(k.host_pid for k in self.kept.values() if not k.jitdump and k.taken),
                       sorted(k.host_pid for k in self.kept.values() if k.jitdump and k.taken),
                       missed, [f"{what}: {why}" for what, why in sorted(self.refused.items())])

    def renames(self) -> dict[int, tuple[int, int]]:
        """For perf_data.rename_jitdumps: host pid -> (pid in the container, host pid) of every kept dump."""
        by_pid = self.namespace.known
        return {k.host_pid: (by_pid[k.host_pid].ns_pid, k.host_pid) for k in self.kept.values()
                if k.jitdump and k.host_pid in by_pid}

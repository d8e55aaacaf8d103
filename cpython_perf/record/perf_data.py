"""Read and amend a perf.data file's records without perf: the processes it names, and its jitdump mmaps.

The file (tools/perf/Documentation/perf.data-file-format.txt): a 104-byte header (magic `PERFILE2`, the
attrs and data sections as offset/size pairs, a bitmap of the features that follow the data), the data
section -- records, each an 8-byte header {u32 type, u16 misc, u16 size} and its body -- then one
{offset, size} entry per feature and the features themselves.

Three uses:

- `pids_named(path)`: the pids of the processes a recording holds (their COMM, FORK, EXIT, MMAP and
  MMAP2 records: perf writes one of these for every process it records, synthesized at the start for
  those already running).  `clean-tmp` keeps the perf maps and jitdumps of those pids.
- `rename_jitdumps(src, dst, renames)`: `perf inject --jit` finds a process's jitdump by the mmap
  record of `/tmp/jit-<pid>.dump`, and accepts it only when the pid in the name is the process's pid
  in perf's own pid namespace -- or, while the process lives, its pid in its own namespace (perf reads
  /proc/<pid>/status for that).  A process of a container writes `jit-<pid in the container>.dump`; once
  it has exited, perf inject cannot tell that this is its dump and injects nothing.  Renaming the mmap
  record's file to `jit-<host pid>.dump` (and keeping the dump under that name, which
  `record --container` does) lets perf inject read it after the process is gone.

- `set_arch(path, name)`: perf record writes uname's machine into the file (its ARCH feature), and perf script
  picks the registers it unwinds dwarf samples with by that name.  perf 6.12 (Debian trixie) knows riscv64's
  registers only as "riscv": on riscv64 it says "Fail to find SP register for arch riscv64" and unwinds no
  dwarf sample past its first frame (perf's normalize_arch() has no riscv rule; mainline perf names the arch
  from the ELF machine instead).  Rewriting the name, in place, before perf inject and perf script unwinds
  them.  Standalone, for a machine without the driver: `python3 perf_data.py set-arch perf.data riscv`.

The file may come from anywhere (a recording another user made, one a container's perf writes): it is
opened without blocking and only as a regular file, and every section, record and field is checked against
the bytes that hold it before it is used, so that a malformed file raises PerfDataError naming what does
not fit.  `pids_named` reads the records a chunk at a time: its memory does not grow with the recording.
"""

from __future__ import annotations

import os
import re
import stat
import struct
from dataclasses import dataclass
from pathlib import Path

MAGIC = b"PERFILE2"
HEADER = struct.Struct("<8sQQQQQQQQ4Q")   # magic, size, attr_size, attrs{off,size}, data{off,size}, event_types, features
assert HEADER.size == 104
RECORD_HEADER = struct.Struct("<IHH")
RECORD_MMAP, RECORD_COMM, RECORD_EXIT, RECORD_FORK, RECORD_MMAP2 = 1, 3, 4, 7, 10
RECORD_COMPRESSED, RECORD_COMPRESSED2 = 81, 83
# Where a record's file name starts: after the header and the fixed fields (pid, tid, addr, len, pgoff;
# MMAP2 also maj/min/ino/generation or a build id, prot, flags).
FILENAME_AT = {RECORD_MMAP: 8 + 32, RECORD_MMAP2: 8 + 64}
JITDUMP_NAME = re.compile(rb"^jit-(\d+)\.dump$")


class PerfDataError(ValueError):
    """A file that is not a perf.data this module can read (another endianness, compressed records, cut short)."""


@dataclass(frozen=True)
class Layout:
    data_offset: int
    data_size: int        # 0 while perf record still writes the file: its records run to the end
    features: int         # how many feature sections follow the data


def read_layout(head: bytes, file_size: int, partial: bool = False) -> Layout:
    """The layout a perf.data header declares, checked against the file's size.  A data section that runs past
    the end of the file is refused, or with partial read as far as the file goes (as one still being
    written)."""
    if len(head) < HEADER.size or head[:8] != MAGIC:
        raise PerfDataError("not a perf.data file (no PERFILE2 magic: an older format, another endianness, "
                            "or perf record -o - output)")
    fields = HEADER.unpack_from(head)
    data_offset, data_size = fields[5], fields[6]
    features = sum(bin(word).count("1") for word in fields[9:13])
    if data_offset < HEADER.size:
        raise PerfDataError(f"its data section starts at {data_offset}, inside its {HEADER.size}-byte header")
    if data_size == 0:   # still being written: the records run to the end of the file
        data_size = max(0, file_size - data_offset)
    elif data_offset + data_size > file_size:
        if partial:
            return Layout(data_offset, max(0, file_size - data_offset), features)
        raise PerfDataError(f"its data section ({data_size} bytes at {data_offset}) runs past the end of the file "
                            f"({file_size} bytes): cut short")
    return Layout(data_offset, data_size, features)


def _open_regular(path: Path):
    """path (the caller's: a link is followed) opened for reading without blocking: a FIFO or a device is refused,
    never waited on."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise PerfDataError(f"{path} is not a regular file (a FIFO, a device or a directory): not read")
    return os.fdopen(fd, "rb")


# the pids in a record's body: MMAP, MMAP2 and COMM start with pid, tid; FORK and EXIT with pid, ppid
_PIDS = {RECORD_COMM: struct.Struct("<I"), RECORD_MMAP: struct.Struct("<I"), RECORD_MMAP2: struct.Struct("<I"),
         RECORD_FORK: struct.Struct("<II"), RECORD_EXIT: struct.Struct("<II")}
_NAMES = {RECORD_COMM: "COMM", RECORD_MMAP: "MMAP", RECORD_MMAP2: "MMAP2", RECORD_FORK: "FORK", RECORD_EXIT: "EXIT"}


def _records(data: bytes):
    """(offset, type, size) of each record in a data section (a record cut short at the end is left out)."""
    at = 0
    while at + RECORD_HEADER.size <= len(data):
        kind, _misc, size = RECORD_HEADER.unpack_from(data, at)
        if size < RECORD_HEADER.size or at + size > len(data):
            break
        yield at, kind, size
        at += size


def _check_record(path, at: int, kind: int, size: int) -> None:
    """A record whose pids this module reads must hold them (one too short for its file name is no jitdump's
    mmap: it is left as it is)."""
    need = RECORD_HEADER.size + _PIDS[kind].size
    if size < need:
        raise PerfDataError(f"{path}: the {_NAMES[kind]} record at {at} ({size} bytes) is too short for its fields "
                            f"({need} bytes)")


def pids_named(path: Path, chunk: int = 1 << 20) -> set[int]:
    """The pids of the processes a perf.data names (COMM, FORK, EXIT, MMAP, MMAP2 records).  Raises
    PerfDataError for a file whose records are compressed (perf record -z): their pids cannot be read here;
    and for one whose header or records do not fit in it.  A data section that runs past the end of the file
    (a recording copied in part) is read as far as it goes: the pids it names so far."""
    pids: set[int] = set()
    with _open_regular(path) as f:
        try:
            layout = read_layout(f.read(HEADER.size), os.fstat(f.fileno()).st_size, partial=True)
        except PerfDataError as exc:
            raise PerfDataError(f"{path}: {exc}") from None
        end = layout.data_offset + layout.data_size
        at = layout.data_offset
        buf, buf_at = b"", at
        while at + RECORD_HEADER.size <= end:
            if at + RECORD_HEADER.size > buf_at + len(buf):
                f.seek(at)
                buf, buf_at = f.read(min(chunk, end - at)), at
                if len(buf) < RECORD_HEADER.size:
                    break   # the file shrank: what is there was read
            kind, _misc, size = RECORD_HEADER.unpack_from(buf, at - buf_at)
            if size < RECORD_HEADER.size or at + size > end:
                break       # cut short at the end (or zeros where perf record has not written yet)
            if kind in (RECORD_COMPRESSED, RECORD_COMPRESSED2):
                raise PerfDataError(f"{path} holds compressed records (perf record -z): the processes it names "
                                    "cannot be read without perf")
            if kind in _PIDS:
                _check_record(path, at, kind, size)
                if at + size > buf_at + len(buf):   # the whole record in the buffer (a record is < 64 KiB)
                    f.seek(at)
                    buf, buf_at = f.read(max(size, min(chunk, end - at))), at
                    if len(buf) < size:
                        break   # the file shrank: what is there was read
                pids.update(_PIDS[kind].unpack_from(buf, at - buf_at + RECORD_HEADER.size))
            at += size
    pids.discard(0)
    pids.discard(0xFFFFFFFF)
    return pids


def _renamed(record: bytes, kind: int, renames: dict[int, tuple[int, int]]) -> bytes | None:
    """The record with its jitdump's file renamed (None: not a jitdump mmap of a process in renames)."""
    start = FILENAME_AT[kind]
    pid = struct.unpack_from("<I", record, 8)[0]
    if pid not in renames:
        return None
    end = record.find(b"\0", start)
    if end < 0:
        return None
    name = record[start:end]
    directory, _, base = name.rpartition(b"/")
    m = JITDUMP_NAME.match(base)
    inner, outer = renames[pid]
    if not m or int(m.group(1)) != inner:
        return None
    new_name = directory + b"/" + f"jit-{outer}.dump".encode()
    old_len = (end - start + 1 + 7) // 8 * 8     # the name, its NUL, padded to 8 bytes as the kernel does
    new_len = (len(new_name) + 1 + 7) // 8 * 8
    trailer = record[start + old_len:]           # the sample_id fields (sample_id_all), if any
    body = record[RECORD_HEADER.size:start] + new_name.ljust(new_len, b"\0") + trailer
    _kind, misc, _size = RECORD_HEADER.unpack_from(record)
    if RECORD_HEADER.size + len(body) > 0xFFFF:
        raise PerfDataError(f"the mmap record of {name[:80]!r}... renamed would be {RECORD_HEADER.size + len(body)} "
                            "bytes, more than a record holds")
    return RECORD_HEADER.pack(kind, misc, RECORD_HEADER.size + len(body)) + body


def finished_layout(path, head: bytes, file_size: int, then: str) -> Layout:
    """The layout of a finished recording at path (its header head): a malformed file, or one perf record still
    writes (its data size 0), raises PerfDataError naming path; then: what to do after perf record ends."""
    try:
        layout = read_layout(head, file_size)
    except PerfDataError as exc:
        raise PerfDataError(f"{path}: {exc}") from None
    if HEADER.unpack_from(head)[6] == 0:
        raise PerfDataError(f"{path} is still being written (its data size is 0): {then} after perf record ends")
    return layout


def rename_jitdumps(src: Path, dst: Path, renames: dict[int, tuple[int, int]]) -> int:
    """Copy perf.data src to dst with the jitdump mmaps renamed: renames maps a pid of the recording (perf's
    namespace) to (its pid in its own namespace, the pid to name instead), so `/tmp/jit-<inner>.dump` of
    that process becomes `/tmp/jit-<outer>.dump`.  The feature sections after the data are moved with it.
    Returns how many records were renamed.  src must be a finished recording."""
    with _open_regular(src) as f:
        raw = f.read()
    layout = finished_layout(src, raw[:HEADER.size], len(raw), "rename")
    fields = list(HEADER.unpack_from(raw))
    data_end = layout.data_offset + layout.data_size
    if data_end + 16 * layout.features > len(raw):
        raise PerfDataError(f"{src}: its feature table ({layout.features} entries at {data_end}) runs past the end "
                            f"of the file ({len(raw)} bytes)")
    for i in range(layout.features):   # they follow the data and move with it: each must be there
        offset, size = struct.unpack_from("<QQ", raw, data_end + 16 * i)
        if offset < data_end or offset + size > len(raw):
            raise PerfDataError(f"{src}: its feature section {i} ({size} bytes at {offset}) is not in the file after "
                                f"the data (which ends at {data_end})")
    data = raw[layout.data_offset:data_end]
    out, count, last = [], 0, 0
    for at, kind, size in _records(data):
        if kind in (RECORD_COMPRESSED, RECORD_COMPRESSED2):
            raise PerfDataError(f"{src} holds compressed records (perf record -z): its jitdump mmaps cannot be "
                                "renamed; record without -z")
        if kind in FILENAME_AT:
            _check_record(src, layout.data_offset + at, kind, size)
            new = _renamed(data[at:at + size], kind, renames)
            if new is not None:
                out.append(data[last:at])
                out.append(new)
                last = at + size
                count += 1
    out.append(data[last:])
    new_data = b"".join(out)
    delta = len(new_data) - len(data)
    tail = bytearray(raw[layout.data_offset + layout.data_size:])
    for i in range(layout.features):   # each feature's {offset, size}: the features follow the data, so they move
        offset, size = struct.unpack_from("<QQ", tail, i * 16)
        struct.pack_into("<QQ", tail, i * 16, offset + delta, size)
    fields[6] = len(new_data)
    Path(dst).write_bytes(HEADER.pack(*fields) + raw[HEADER.size:layout.data_offset] + new_data + bytes(tail))
    return count


FEATURE_ARCH = 6   # HEADER_ARCH: {u32 length, the machine's name, NUL-padded to that length}


def set_arch(path: Path, name: str) -> str:
    """Rewrite the arch name a finished perf.data records (its ARCH feature) as name, in place; the old name.
    The new name takes the old one's room, NUL-padded: it must be shorter than that room."""
    new = name.encode()
    if not new or b"\0" in new or not new.isascii():
        raise PerfDataError(f"{name!r} is not an arch name")
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    with os.fdopen(fd, "r+b") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise PerfDataError(f"{path} is not a regular file (a FIFO, a device or a directory): not changed")
        head = f.read(HEADER.size)
        layout = finished_layout(path, head, st.st_size, "change it")
        bits = int.from_bytes(struct.pack("<4Q", *HEADER.unpack_from(head)[9:13]), "little")
        if not bits >> FEATURE_ARCH & 1:
            raise PerfDataError(f"{path} records no arch (its ARCH feature is not set)")
        index = bin(bits & ((1 << FEATURE_ARCH) - 1)).count("1")   # the features are in bit order
        data_end = layout.data_offset + layout.data_size
        f.seek(data_end + 16 * index)
        entry = f.read(16)
        if len(entry) != 16:
            raise PerfDataError(f"{path}: its feature table runs past the end of the file")
        offset, size = struct.unpack("<QQ", entry)
        if offset < data_end or size < 4 or offset + size > st.st_size:
            raise PerfDataError(f"{path}: its ARCH section ({size} bytes at {offset}) is not in the file after the data")
        f.seek(offset)
        section = f.read(size)
        (length,) = struct.unpack_from("<I", section)
        if length > size - 4 or length == 0:
            raise PerfDataError(f"{path}: its ARCH string ({length} bytes) does not fit its section ({size} bytes)")
        old = section[4:4 + length].split(b"\0", 1)[0].decode("ascii", "replace")
        if len(new) >= length:
            raise PerfDataError(f"{path}: {name!r} does not fit the {length} bytes of its ARCH string")
        f.seek(offset + 4)
        f.write(new.ljust(length, b"\0"))
    return old


def main(argv=None) -> int:
    """`python3 perf_data.py set-arch FILE NAME`: set_arch, standalone (no driver needed)."""
    import sys
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or args[0] != "set-arch":
        print("usage: perf_data.py set-arch PERF_DATA NAME", file=sys.stderr)
        return 2
    try:
        old = set_arch(Path(args[1]), args[2])
    except (OSError, PerfDataError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{args[1]}: arch {old} -> {args[2]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Read and amend a perf.data file's records without perf: the processes it names, and its jitdump mmaps.

The file (tools/perf/Documentation/perf.data-file-format.txt): a 104-byte header (magic `PERFILE2`, the
attrs and data sections as offset/size pairs, a bitmap of the features that follow the data), the data
section -- records, each an 8-byte header {u32 type, u16 misc, u16 size} and its body -- then one
{offset, size} entry per feature and the features themselves.

Two uses:

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
"""

from __future__ import annotations

import os
import re
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


def read_layout(head: bytes, file_size: int) -> Layout:
    if len(head) < HEADER.size or head[:8] != MAGIC:
        raise PerfDataError("not a perf.data file (no PERFILE2 magic: an older format, another endianness, "
                            "or perf record -o - output)")
    fields = HEADER.unpack_from(head)
    data_offset, data_size = fields[5], fields[6]
    features = sum(bin(word).count("1") for word in fields[9:13])
    if data_size == 0:   # still being written: the records run to the end of the file
        data_size = max(0, file_size - data_offset)
    return Layout(data_offset, data_size, features)


def _records(data: bytes):
    """(offset, type, size) of each record in a data section (a record cut short at the end is left out)."""
    at = 0
    while at + RECORD_HEADER.size <= len(data):
        kind, _misc, size = RECORD_HEADER.unpack_from(data, at)
        if size < RECORD_HEADER.size or at + size > len(data):
            break
        yield at, kind, size
        at += size


def pids_named(path: Path) -> set[int]:
    """The pids of the processes a perf.data names (COMM, FORK, EXIT, MMAP, MMAP2 records).  Raises
    PerfDataError for a file whose records are compressed (perf record -z): their pids cannot be read here."""
    with open(path, "rb") as f:
        head = f.read(HEADER.size)
        layout = read_layout(head, os.fstat(f.fileno()).st_size)
        f.seek(layout.data_offset)
        data = f.read(layout.data_size)
    pids: set[int] = set()
    for at, kind, _size in _records(data):
        if kind in (RECORD_COMM, RECORD_MMAP, RECORD_MMAP2):
            pids.add(struct.unpack_from("<I", data, at + 8)[0])
        elif kind in (RECORD_FORK, RECORD_EXIT):
            pids.update(struct.unpack_from("<II", data, at + 8))
        elif kind in (RECORD_COMPRESSED, RECORD_COMPRESSED2):
            raise PerfDataError(f"{path} holds compressed records (perf record -z): the processes it names "
                                "cannot be read without perf")
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
    return RECORD_HEADER.pack(kind, misc, RECORD_HEADER.size + len(body)) + body


def rename_jitdumps(src: Path, dst: Path, renames: dict[int, tuple[int, int]]) -> int:
    """Copy perf.data src to dst with the jitdump mmaps renamed: renames maps a pid of the recording (perf's
    namespace) to (its pid in its own namespace, the pid to name instead), so `/tmp/jit-<inner>.dump` of
    that process becomes `/tmp/jit-<outer>.dump`.  The feature sections after the data are moved with it.
    Returns how many records were renamed.  src must be a finished recording."""
    raw = Path(src).read_bytes()
    layout = read_layout(raw[:HEADER.size], len(raw))
    fields = list(HEADER.unpack_from(raw))
    if fields[6] == 0:
        raise PerfDataError(f"{src} is still being written (its data size is 0): rename after perf record ends")
    data = raw[layout.data_offset:layout.data_offset + layout.data_size]
    out, count, last = [], 0, 0
    for at, kind, size in _records(data):
        if kind in (RECORD_COMPRESSED, RECORD_COMPRESSED2):
            raise PerfDataError(f"{src} holds compressed records (perf record -z): its jitdump mmaps cannot be "
                                "renamed; record without -z")
        if kind in FILENAME_AT:
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

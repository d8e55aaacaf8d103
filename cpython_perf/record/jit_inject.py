"""`perf inject --jit` for CPython's perf_jit trampolines: one ELF per trampoline arena instead of one per code object.

    python3 -E jit_inject.py -i perf.data -o perf.jit.data [--root DIR] [--fallback-perf PERF]
    python -m cpython_perf jit-inject -i perf.data -o perf.jit.data [...]

Why.  `perf inject --jit` writes one `jitted-PID-N.so` and one MMAP2 record per JIT_CODE_LOAD of the jitdump.
perf keeps its DSOs in an array that it re-sorts (qsort by long name, strcmp) whenever one was appended out of
name order, and `jitted-13-10.so` sorts before `jitted-13-9.so`: every new jitted DSO costs a sort of all of
them, in perf inject and again in perf script (whose profile is 80% that comparison and strcmp); and perf
script's libunwind walks every live map of the thread for each frame it unwinds.  A program that ran 40,000
code objects took 57 s to inject and 131 s to script 1,088 samples; here 0.3 s and 0.9 s.

What this does instead.  CPython places its trampolines in arenas (anonymous executable mappings of 64 KiB,
each slot 0x110 bytes of the same code; adjacent arenas merge into one mapping).  For each arena of each
jitdump (the code loads that fall in one recorded executable mapping of the process, merged where those
overlap) it writes ONE ELF, `jit-PID-arena-K.so` beside the dump (ET_DYN, file offset = ELF address, one
PT_LOAD at 0), laid out as

    ELF header | .eh_frame | .eh_frame_hdr | .text.reuse | .text (the arena's span) | .symtab .strtab ...

- `.text`: the span, every slot's code at its offset from the span's start;
- `.symtab`: one FUNC symbol per code load at its file offset, named as the jitdump (and perf inject) names
  it, e.g. `py::foo:/src/script.py`;
- `.eh_frame`: the dump's CIE (from its JIT_CODE_UNWINDING_INFO records) and one FDE per slot, its pc_begin
  pc-relative to where it is mapped; `.eh_frame_hdr` its sorted search table;

and puts, where perf inject would have put its N records, two MMAP2 records per arena at the time of its
first code load: the span, mapped to `.text`; and the unwind tables ([0, end of .eh_frame_hdr) of the file),
mapped at a free address range below the arena.  perf's libunwind (the dwarf unwinder of Debian's perf 6.x) reads
.eh_frame_hdr and the FDEs through the process's maps, at the ELF's load address (the least start - pgoff of
the ELF's maps: this second map, by construction) plus their ELF address; the span's map alone could not
hold them without covering addresses of other mappings.  The range is chosen free of every mapping the
recording names, of any process (forked children keep their parent's maps), and of the other arenas'.
A perf built without libunwind (Debian's perf 7.x) unwinds with libdw, which reads `.eh_frame` from the
file instead, seen from the span's map (start - pgoff): `.eh_frame`'s sh_addr is chosen so that its FDEs
decode to the same slots there (libdw_eh_frame_address).

Reused slots.  The 3.13 series hands the slot of a freed code object to the next new one, and the dump then
has a later code load at the same address; perf inject names an address after the load that came last
before each sample.  A single ELF cannot give one address two names, but it can give one address two *file
offsets*: every load that lands on an address (or range) an earlier load of its arena had is written once
more (section `.text.reuse`), and gets an MMAP2 record of its own, at its load's time, covering its code only
and mapping it to that copy.  perf replaces the overlapped part of the arena's map with it from that time
on, so samples before and after the reuse resolve as perf inject's do; every such record maps the same file,
so the number of DSOs stays one per arena and the live maps grow by at most two per reused slot.  Its unwind
rules are those of the slot's first load (CPython's trampolines are the same code in every slot; a later load
of another size or unwind program keeps its own name but not its own FDE -- said on stderr).

Where the records go.  perf reads a recording in rounds (FINISHED_ROUND): at each it delivers, in time order,
what it holds up to the latest time seen before the previous one.  Each new record is put before the first
round that delivers its time, so perf never reads it after samples that needed it ("out of order events").
The jitdump MMAP record of the process (/tmp/jit-PID.dump, mapped by CPython so that perf records it) is left
out, and so are the process's anonymous mappings (//anon, [anon:, /memfd:) from its time on -- a new arena's
mapping would otherwise replace the maps of the arenas it merges with -- both as perf inject does.  Everything
else is copied byte for byte; the feature sections that follow the data move with it.  No JIT_CODE_DEBUG_INFO
(line tables): CPython writes none.

Files someone else wrote.  The dumps and the directories they are in belong to the profiled processes (a
container's /tmp under --root, or a /tmp shared with other users), and the injector may run as root.  A dump
is opened without following a link or blocking, and only a regular file of at most DUMP_LIMIT (2 GiB) is read:
under a --root other than / through untrusted_files.ForeignRoot (every component of its path resolved inside
the root, as the container's own processes resolve it), under / with untrusted_files.open_private_file.  A
link, a FIFO, a device or a bigger file raises JitInjectError saying so.  Each ELF file is made new in its
dump's directory, opened the same way: a file of a random name created there with O_CREAT | O_EXCL |
O_NOFOLLOW, relative to the directory's descriptor, then renamed over its name in that directory (a link
someone made under the name is replaced by the rename, never followed).  Every size and count the dump and
the recording declare is checked against the bytes that hold it before it is used; an ELF file bigger than
ELF_LIMIT (512 MiB: an arena spanning that much is not CPython's) is refused.  A malformed dump or recording
raises JitInjectError naming the file, the offset and what is wrong.

Limits (each raises JitInjectError: with --fallback-perf, perf inject --jit is run instead): a recording in
another byte order, compressed (perf record -z) or piped; without `-k 1` (CLOCK_MONOTONIC, as perf inject
--jit requires) or sample_id_all; a jitdump with architecture timestamps (TSC), or unwinding info whose CIE
has augmentations other than `zR`.

Stdlib only, one file: it runs in the recording's container with the profiled interpreter (perf_jit exists
from 3.12 on), as well as on the host under the driver.  Its one import from the driver, untrusted_files, is
taken where it is there (in the package); run as a file of its own, it opens files by the same rules with the
stdlib alone, without openat2: under a --root other than / every component of a path is opened by itself with
O_NOFOLLOW (a link anywhere in the path is refused), under / the last one.
"""

from __future__ import annotations

import argparse
import bisect
import errno
import os
import re
import struct
import subprocess
import secrets
import stat
import sys
import time
from dataclasses import dataclass, field

# ---------------------------------------------------------------- jitdump (perf's jitdump-specification.txt)
JITDUMP_MAGIC = 0x4A695444
JITDUMP_HEADER = struct.Struct("<IIIIIIQQ")   # magic, version, total_size, elf_mach, pad1, pid, timestamp, flags
JIT_RECORD = struct.Struct("<IIQ")             # id, total_size, timestamp
JIT_CODE_LOAD, JIT_CODE_MOVE, JIT_CODE_DEBUG_INFO, JIT_CODE_CLOSE, JIT_CODE_UNWINDING_INFO = range(5)
CODE_LOAD = struct.Struct("<IIQQQQ")          # pid, tid, vma, code_addr, code_size, code_index; name\0, code
CODE_MOVE = struct.Struct("<IIQQQQQ")         # pid, tid, vma, old_code_addr, new_code_addr, code_size, code_index
UNWINDING_INFO = struct.Struct("<QQQ")        # unwinding_size, eh_frame_hdr_size, mapped_size; data
JITDUMP_FLAGS_ARCH_TIMESTAMP = 1

# ---------------------------------------------------------------- perf.data (perf.data-file-format.txt)
PERF_MAGIC = b"PERFILE2"
# magic, size, attr_size, attrs {offset, size}, data {offset, size}, event_types {offset, size}, features bitmap
PERF_HEADER = struct.Struct("<8sQQQQQQQQ4Q")
RECORD_HEADER = struct.Struct("<IHH")         # type, misc, size
RECORD_MMAP, RECORD_SAMPLE, RECORD_MMAP2 = 1, 9, 10
USER_RECORDS, RECORD_FINISHED_ROUND = 64, 68
RECORD_COMPRESSED, RECORD_COMPRESSED2 = 81, 83
MISC_USER = 2
MISC_MMAP_DATA = 1 << 13
MISC_MMAP_BUILD_ID = 1 << 14
MMAP2_BODY = struct.Struct("<IIQQQIIQQII")    # pid, tid, start, len, pgoff, maj, min, ino, ino_generation, prot, flags
MMAP_BODY = struct.Struct("<IIQQQ")           # pid, tid, start, len, pgoff
PROT_EXEC = 4
PROT_READ_EXEC = 5
MAP_PRIVATE = 2
# perf_event_attr: sample_type at 24, the flag bits at 40, clockid at 92
ATTR_SAMPLE_TYPE, ATTR_FLAGS, ATTR_CLOCKID = 24, 40, 92
FLAG_SAMPLE_ID_ALL, FLAG_USE_CLOCKID = 1 << 18, 1 << 25
CLOCK_MONOTONIC = 1
SAMPLE_IP, SAMPLE_TID, SAMPLE_TIME, SAMPLE_ID, SAMPLE_CPU, SAMPLE_STREAM_ID, SAMPLE_IDENTIFIER = (
    1 << 0, 1 << 1, 1 << 2, 1 << 6, 1 << 7, 1 << 9, 1 << 16)
ANON_NAMES = (b"//anon", b"[anon:", b"/memfd:")   # perf inject --jit drops these after a process's jitdump
JITDUMP_NAME = re.compile(rb"(?:^|/)jit-(\d+)\.dump$")

# ---------------------------------------------------------------- ELF
ELF_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
PROGRAM_HEADER = struct.Struct("<IIQQQQQQ")
SECTION_HEADER = struct.Struct("<IIQQQQIIQQ")
SYMBOL = struct.Struct("<IBBHQQ")
ET_DYN = 3
PT_LOAD, PF_X, PF_R = 1, 1, 4
SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB = 1, 2, 3
SHF_ALLOC, SHF_EXECINSTR = 2, 4
STB_LOCAL, STT_FUNC = 0, 2
CODE_ALIGN = 16


DUMP_LIMIT = 2 << 30     # bytes of a jitdump read (-X perf_jit writes about 413 bytes a code object)
ELF_LIMIT = 512 << 20    # bytes of one arena's ELF (CPython's trampolines take 0x110 bytes each: 2 million of them)
LEB128_LIMIT = 10        # bytes of a LEB128 number in unwinding info (64 bits)


class JitInjectError(ValueError):
    """An input this injector does not handle (perf inject --jit may: see the module's Limits)."""


# ======================================================================= files someone else wrote

READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class _Refused(OSError):
    """untrusted_files.Refused, where the driver's package is not there: what was not opened and why."""

    def __init__(self, path: str, why: str):
        super().__init__(f"{path}: {why}")
        self.path, self.why = path, why


def _not_regular(st: os.stat_result) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(st.st_mode):
            return f"{name}, not a regular file"
    return "not a regular file"


class _WalkingRoot:
    """untrusted_files.ForeignRoot's rules with the stdlib alone (no openat2): every component of a path opened
    by itself, relative to the one before, with O_NOFOLLOW; a link or `..` anywhere in the path is refused."""

    def __init__(self, root: str):
        self.root = root
        self.fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def _open(self, path: str, flags: int) -> int:
        parts = [part for part in path.split("/") if part not in ("", ".")]
        if not parts:
            raise _Refused(path, "an empty path")
        if ".." in parts:
            raise _Refused(path, "a path with '..'")
        fd = os.dup(self.fd)
        try:
            for i, part in enumerate(parts):
                last = i == len(parts) - 1
                try:
                    nxt = os.open(part, (flags if last else os.O_PATH | os.O_DIRECTORY) | os.O_NOFOLLOW | os.O_CLOEXEC,
                                  dir_fd=fd)
                except FileNotFoundError:
                    raise
                except OSError as exc:
                    if exc.errno in (errno.ELOOP, errno.ENOTDIR):   # a link where a file or a directory is
                        raise _Refused(path, "a symbolic link in its path (or a component that is not a directory)") \
                            from None
                    raise _Refused(path, exc.strerror or str(exc)) from None
                os.close(fd)
                fd = nxt
            return fd
        except BaseException:
            os.close(fd)
            raise

    def open_regular(self, path: str) -> tuple[int, os.stat_result]:
        fd = self._open(path, READ_FLAGS)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise _Refused(path, _not_regular(st))
        return fd, st

    def open_dir(self, path: str) -> int:
        return self._open(path, os.O_RDONLY | os.O_DIRECTORY)


def _open_private_file(path: str, limit: int) -> tuple[int, os.stat_result]:
    """untrusted_files.open_private_file with the stdlib alone (it is that already)."""
    try:
        fd = os.open(path, READ_FLAGS)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _Refused(path, "a symbolic link" if exc.errno == errno.ELOOP else exc.strerror or str(exc)) from None
    st = os.fstat(fd)
    why = _not_regular(st) if not stat.S_ISREG(st.st_mode) else (
        f"{st.st_size} bytes, more than the {limit >> 20} MiB read of such a file" if st.st_size > limit else None)
    if why:
        os.close(fd)
        raise _Refused(path, why)
    return fd, st


try:   # in the driver's package: its rules for the files a container or another user wrote
    from .untrusted_files import ForeignRoot, Refused, open_private_file
except ImportError:   # jit_inject.py run as a file of its own (python3 -E jit_inject.py in a container)
    ForeignRoot, Refused, open_private_file = _WalkingRoot, _Refused, _open_private_file


class RootFiles:
    """The files the recording names, as found under root: its jitdumps read, the ELF files written beside them
    (see "Files someone else wrote" in the module's docstring).  Paths are the recording's (absolute); root "/"
    is this machine's own tree."""

    def __init__(self, root: str = "/"):
        self.root = root or "/"
        self._foreign = None

    def close(self) -> None:
        if self._foreign is not None:
            self._foreign.close()
            self._foreign = None

    def where(self, path: str) -> str:
        """path as found under the root (for messages and the summary); a path leading out of it (`..`) is
        refused."""
        return _under(self.root, path)

    def foreign(self):
        """The root, opened once (ForeignRoot; None for "/")."""
        if self.root == "/":
            return None
        if self._foreign is None:
            try:
                self._foreign = ForeignRoot(self.root)
            except OSError as exc:
                raise JitInjectError(f"--root {self.root}: {exc.strerror or exc}") from None
        return self._foreign

    def read(self, path: str, limit: int = DUMP_LIMIT) -> bytes:
        """The bytes of the regular file path (at most limit of them); FileNotFoundError where it is absent,
        JitInjectError where it is refused (a link, a FIFO, a device, a bigger file) or cannot be read."""
        where = self.where(path)
        try:
            foreign = self.foreign()
            if foreign is None:
                fd, st = open_private_file(path, limit)
            else:
                fd, st = foreign.open_regular(path)
                if st.st_size > limit:
                    os.close(fd)
                    raise Refused(path, f"{st.st_size} bytes, more than the {limit >> 20} MiB read of such a file")
        except FileNotFoundError:
            raise
        except Refused as exc:
            raise JitInjectError(f"{where}: refused: {exc.why}") from None
        except OSError as exc:
            raise JitInjectError(f"{where}: {exc.strerror or exc}") from None
        try:
            parts, at = [], 0
            while at < st.st_size:   # what the file held when it was opened (a live process may still append)
                block = os.pread(fd, min(st.st_size - at, 16 << 20), at)
                if not block:
                    break
                parts.append(block)
                at += len(block)
            return b"".join(parts)
        except OSError as exc:
            raise JitInjectError(f"{where}: {exc.strerror or exc}") from None
        finally:
            os.close(fd)

    def _open_dir(self, directory: str) -> int:
        foreign = self.foreign()
        if foreign is None:
            # the path as the kernel named the dump's mapping (no link in it then): its last component not followed
            return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        if directory.strip("/") == "":
            return os.dup(foreign.fd)
        return foreign.open_dir(directory)

    def write_new(self, path: str, data: bytes) -> os.stat_result:
        """path (in the recording's tree) with data, as a new file of its own (mode 0644, readable by whoever
        reads the recording, as perf inject's files are): a file of a random name created O_EXCL | O_NOFOLLOW in
        path's directory (never a file someone else made, in a shared /tmp), then renamed over path's name in
        that directory (a link there is replaced, not followed).  Its stat; JitInjectError where it cannot be
        made."""
        where = self.where(path)
        directory, name = os.path.split(path)
        try:
            dir_fd = self._open_dir(directory or "/")
        except Refused as exc:
            raise JitInjectError(f"{where}: its directory is refused: {exc.why}") from None
        except OSError as exc:
            why = "a symbolic link" if exc.errno == errno.ELOOP else exc.strerror or str(exc)
            raise JitInjectError(f"{where}: its directory is refused: {why}") from None
        tmp = None
        try:
            for _attempt in range(100):
                candidate = f".jit-inject-{secrets.token_hex(8)}.tmp"
                try:
                    fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                                 0o600, dir_fd=dir_fd)
                except FileExistsError:
                    continue
                tmp = candidate
                break
            else:
                raise JitInjectError(f"{where}: no free temporary name in its directory")
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fchmod(fd, 0o644)
                st = os.fstat(fd)
            finally:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            tmp = None
            return st
        except OSError as exc:
            raise JitInjectError(f"{where}: {exc.strerror or exc}") from None
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp, dir_fd=dir_fd)
                except OSError:
                    pass
            os.close(dir_fd)


# ======================================================================= the jitdump

@dataclass(frozen=True)
class Cie:
    """The parts of a CIE this writes again (as version 1, augmentation zR, pc-relative sdata4 pointers)."""

    code_align: int
    data_align: int
    return_register: int
    instructions: bytes


@dataclass
class CodeLoad:
    time: int
    pid: int
    tid: int
    addr: int
    size: int
    index: int
    name: bytes
    code: bytes
    cie: Cie | None = None
    fde_instructions: bytes | None = None


@dataclass
class Jitdump:
    pid: int
    elf_mach: int
    loads: list[CodeLoad]


def _leb128(data: bytes, p: int, end: int, signed: bool = False) -> tuple[int, int]:
    """The LEB128 number at data[p] (within data[:end]) and the position after it."""
    value = shift = 0
    for q in range(p, min(end, p + LEB128_LIMIT)):
        byte = data[q]
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            if signed and byte & 0x40:
                value -= 1 << shift
            return value, q + 1
    if end - p >= LEB128_LIMIT:
        raise JitInjectError(f"a LEB128 number of more than {LEB128_LIMIT} bytes (64 bits) at {p}")
    raise JitInjectError(f"a LEB128 number at {p} runs past the end of its entry")


def _uleb(data: bytes, p: int, end: int) -> tuple[int, int]:
    return _leb128(data, p, end)


def _sleb(data: bytes, p: int, end: int) -> tuple[int, int]:
    return _leb128(data, p, end, signed=True)


def _uleb_bytes(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _sleb_bytes(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        done = (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40)
        out.append(byte | (0 if done else 0x80))
        if done:
            return bytes(out)


# the size of a DW_EH_PE-encoded value by its low nibble (absptr is a pointer: 8 bytes on a 64-bit target)
_ENCODED_SIZE = {0x00: 8, 0x02: 2, 0x03: 4, 0x04: 8, 0x0A: 2, 0x0B: 4, 0x0C: 8}


def parse_eh_frame(data: bytes) -> tuple[Cie, bytes, int, int]:
    """The CIE and the first FDE's instructions of an .eh_frame as CPython writes it (one CIE, one FDE), and
    where the FDE's pc_begin and pc_range are (their offset, the size of each).  Every field is read within
    its entry: JitInjectError says which one does not fit."""
    cie: Cie | None = None
    cie_encoding = 0
    augmented = False
    p = 0
    while p + 4 <= len(data):
        length = struct.unpack_from("<I", data, p)[0]
        if length == 0:
            break
        if length == 0xFFFFFFFF:
            raise JitInjectError("64-bit DWARF .eh_frame in the jitdump's unwinding info")
        start, end = p + 4, p + 4 + length
        if end > len(data):
            raise JitInjectError(f"unwinding info cut short: the .eh_frame entry at {p} declares {length} bytes, "
                                 f"{len(data) - start} follow")
        if length < 4:
            raise JitInjectError(f"an .eh_frame entry of {length} bytes at {p}, too short for its CIE id or pointer")
        entry_id = struct.unpack_from("<I", data, start)[0]
        if entry_id == 0:   # a CIE
            if start + 5 >= end:
                raise JitInjectError(f"the CIE at {p} ({length} bytes) is too short for its version and augmentation")
            version = data[start + 4]
            q = data.find(b"\0", start + 5, end)
            if q < 0:
                raise JitInjectError(f"the CIE at {p}: its augmentation string runs past its end (no NUL)")
            augmentation = data[start + 5:q]
            q += 1
            if augmentation not in (b"", b"zR"):
                raise JitInjectError(f"CIE augmentation {augmentation!r} (only zR is written again)")
            code_align, q = _uleb(data, q, end)
            data_align, q = _sleb(data, q, end)
            if version == 1:
                if q >= end:
                    raise JitInjectError(f"the CIE at {p}: its return address register runs past its end")
                ra, q = data[q], q + 1
            else:
                ra, q = _uleb(data, q, end)
            if ra > 255:
                raise JitInjectError(f"return address register {ra}")
            augmented = augmentation.startswith(b"z")
            if augmented:
                length_aug, q = _uleb(data, q, end)
                if q + length_aug > end:
                    raise JitInjectError(f"the CIE at {p}: its augmentation data ({length_aug} bytes) runs past its "
                                         "end")
                cie_encoding = data[q] if length_aug else 0
                q += length_aug
            # the instructions as written, padding (DW_CFA_nop) included: stripping NULs would also cut off a
            # last operand that is 0 (riscv64's FDE ends with DW_CFA_def_cfa_offset 0)
            cie = Cie(code_align, data_align, ra, data[q:end])
        else:               # an FDE
            if cie is None:
                raise JitInjectError("an FDE before its CIE")
            size = _ENCODED_SIZE.get(cie_encoding & 0x0F)
            if size is None:
                raise JitInjectError(f"FDE pointer encoding {cie_encoding:#x}")
            q = start + 4 + 2 * size
            if q > end:
                raise JitInjectError(f"the FDE at {p} ({length} bytes) is too short for its pc_begin and pc_range")
            if augmented:
                length_aug, q = _uleb(data, q, end)
                if q + length_aug > end:
                    raise JitInjectError(f"the FDE at {p}: its augmentation data ({length_aug} bytes) runs past its "
                                         "end")
                q += length_aug
            return cie, data[q:end], start + 4, size
        p = end
    raise JitInjectError("unwinding info without an FDE")


def read_jitdump(path: str, files: RootFiles | None = None) -> Jitdump:
    """The code loads of the jitdump at path (in files' root: this machine's own tree by default), read as
    RootFiles reads a file someone else wrote (a link, a FIFO, a device or a file of more than DUMP_LIMIT,
    2 GiB, raises JitInjectError saying so; an absent one FileNotFoundError); see parse_jitdump."""
    files = files or RootFiles("/")
    return parse_jitdump(files.read(path), files.where(path))


def parse_jitdump(raw: bytes, name: str = "the jitdump") -> Jitdump:
    """The code loads of a jitdump, in its order (time order), each with the unwinding info written before it
    (JIT_CODE_UNWINDING_INFO applies to the next JIT_CODE_LOAD).  A JIT_CODE_MOVE is a load of the moved code
    at its new address.  A record cut short at the end (the process died while writing), or one whose size is
    less than its header's (zeros where a write failed), ends the dump; a whole record whose fields do not fit
    in it, or declare more bytes than it holds, raises JitInjectError (name: the dump, in the message)."""
    if len(raw) < JITDUMP_HEADER.size:
        raise JitInjectError(f"{name}: not a jitdump (too short)")
    magic, _version, header_size, elf_mach, _pad, pid, _ts, flags = JITDUMP_HEADER.unpack_from(raw)
    if magic != JITDUMP_MAGIC:
        raise JitInjectError(f"{name}: not a little-endian jitdump (magic {magic:#x})")
    if header_size < JITDUMP_HEADER.size:
        raise JitInjectError(f"{name}: its header declares {header_size} bytes, less than its "
                             f"{JITDUMP_HEADER.size} bytes of fields")
    if flags & JITDUMP_FLAGS_ARCH_TIMESTAMP:
        raise JitInjectError(f"{name}: architecture timestamps (TSC) are not converted here")
    if elf_mach > 0xFFFF:
        raise JitInjectError(f"{name}: ELF machine {elf_mach} (e_machine has 16 bits)")
    loads: list[CodeLoad] = []
    by_index: dict[int, CodeLoad] = {}
    pending: tuple[Cie, bytes] | None = None
    cies: dict[Cie, Cie] = {}
    # every trampoline's unwinding info is the same but for the FDE's pc_begin (and pc_range): parsed once
    shapes: dict[tuple[int, int, bytes], tuple[Cie, bytes]] = {}
    pc_at = pc_size = 0
    p = header_size
    while p + JIT_RECORD.size <= len(raw):
        kind, size, ts = JIT_RECORD.unpack_from(raw, p)
        if size < JIT_RECORD.size or p + size > len(raw):
            break
        body, end = p + JIT_RECORD.size, p + size
        if kind == JIT_CODE_LOAD:
            if body + CODE_LOAD.size >= end:
                raise JitInjectError(f"{name}: the code load at {p} ({size} bytes) is too short for its fields")
            lpid, tid, _vma, addr, code_size, index = CODE_LOAD.unpack_from(raw, body)
            q = raw.find(b"\0", body + CODE_LOAD.size, end)
            if q < 0:
                raise JitInjectError(f"{name}: the code load at {p}: its name runs past the record's end (no NUL)")
            if code_size > end - (q + 1):
                raise JitInjectError(f"{name}: the code load at {p} declares {code_size} bytes of code, its record "
                                     f"holds {end - (q + 1)}")
            load = CodeLoad(ts, lpid, tid, addr, code_size, index, raw[body + CODE_LOAD.size:q],
                            raw[q + 1:q + 1 + code_size])
            if pending is not None:
                load.cie, load.fde_instructions = pending
                pending = None
            loads.append(load)
            by_index[index] = load
        elif kind == JIT_CODE_MOVE:
            if body + CODE_MOVE.size > end:
                raise JitInjectError(f"{name}: the code move at {p} ({size} bytes) is too short for its fields")
            lpid, tid, _vma, _old, new, code_size, index = CODE_MOVE.unpack_from(raw, body)
            old = by_index.get(index)
            if old is not None:
                if code_size > len(old.code):
                    raise JitInjectError(f"{name}: the code move at {p} declares {code_size} bytes of code, the "
                                         f"load it moves has {len(old.code)}")
                moved = CodeLoad(ts, lpid, tid, new, code_size, index, old.name, old.code[:code_size], old.cie,
                                 old.fde_instructions)
                loads.append(moved)
                by_index[index] = moved
        elif kind == JIT_CODE_UNWINDING_INFO:
            if body + UNWINDING_INFO.size > end:
                raise JitInjectError(f"{name}: the unwinding info at {p} ({size} bytes) is too short for its fields")
            unwind_size, hdr_size, _mapped = UNWINDING_INFO.unpack_from(raw, body)
            at = body + UNWINDING_INFO.size
            if hdr_size > unwind_size or unwind_size > end - at:
                raise JitInjectError(f"{name}: the unwinding info at {p} declares {unwind_size} bytes ({hdr_size} of "
                                     f".eh_frame_hdr), its record holds {end - at}")
            data = raw[at:at + unwind_size - hdr_size]
            key = (pc_at, pc_size, data[:pc_at] + data[pc_at + 2 * pc_size:]) if pc_size else None
            pending = shapes.get(key) if key is not None else None
            if pending is None:
                try:
                    cie, instructions, pc_at, pc_size = parse_eh_frame(data)
                except JitInjectError as exc:
                    raise JitInjectError(f"{name}: the unwinding info at {p}: {exc}") from None
                pending = (cies.setdefault(cie, cie), instructions)
                shapes[(pc_at, pc_size, data[:pc_at] + data[pc_at + 2 * pc_size:])] = pending
        elif kind == JIT_CODE_CLOSE:
            break
        p += size
    return Jitdump(pid, elf_mach, loads)


# ======================================================================= arenas and their ELF files

@dataclass
class Overlay:
    load: CodeLoad
    offset: int            # its copy's file offset (section .text.reuse)


@dataclass
class Layout:
    """Where the parts of an arena's ELF are (file offsets = ELF addresses) and its unwind tables' runtime
    address."""

    eh_frame: int = 0
    eh_frame_hdr: int = 0
    unwind_end: int = 0    # the end of .eh_frame_hdr: [0, unwind_end) is mapped at unwind_at
    reuse: int = 0
    text: int = 0          # the span
    unwind_at: int = 0


@dataclass
class Arena:
    start: int
    end: int
    first: list[CodeLoad] = field(default_factory=list)      # one per slot: the first load of each address
    overlays: list[Overlay] = field(default_factory=list)    # later loads on an address (or range) already used
    layout: Layout = field(default_factory=Layout)
    path: str = ""         # the ELF as the recording names it
    file: str = ""         # ... and where it is written
    first_time: int = 0


def _covering(intervals: list[tuple[int, int]], addr: int) -> tuple[int, int] | None:
    i = bisect.bisect_right(intervals, (addr, float("inf"))) - 1
    if i >= 0 and intervals[i][0] <= addr < intervals[i][1]:
        return intervals[i]
    return None


def merge_intervals(intervals) -> list[tuple[int, int]]:
    merged: list[list[int]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def group_arenas(loads: list[CodeLoad], mappings: list[tuple[int, int]], page: int = 4096) -> list[Arena]:
    """The loads grouped by the executable mapping of the process that holds them (mappings: (start, end) of
    its MMAP/MMAP2 records; those that hold a load are merged where they overlap or touch); loads no recorded
    mapping holds are grouped while they are in the same or adjacent pages.  Within an arena the first load of
    each address is a slot of its span; a later one at an address, or overlapping the range, of an earlier one
    is an overlay."""
    addrs = sorted(ld.addr for ld in loads)
    covering = merge_intervals(m for m in mappings
                               if bisect.bisect_left(addrs, m[1]) > bisect.bisect_left(addrs, m[0]))
    keyed: dict[tuple[int, int], list[CodeLoad]] = {}
    loose: list[CodeLoad] = []
    for load in loads:
        if load.size == 0:
            continue
        key = _covering(covering, load.addr)
        if key is None:
            loose.append(load)
        else:
            keyed.setdefault(key, []).append(load)
    groups = list(keyed.values())
    if loose:
        by_addr = sorted(loose, key=lambda ld: ld.addr)
        runs, run = [], [by_addr[0]]
        for load in by_addr[1:]:
            prev_end = run[-1].addr + run[-1].size
            if load.addr // page - (prev_end - 1) // page <= 1:
                run.append(load)
            else:
                runs.append(run)
                run = [load]
        runs.append(run)
        for r in runs:
            r.sort(key=lambda ld: ld.time)
        groups += runs
    return sorted((_arena_of(g) for g in groups), key=lambda a: a.start)


def _arena_of(group: list[CodeLoad]) -> Arena:
    firsts: dict[int, CodeLoad] = {}
    later: list[CodeLoad] = []
    for load in group:                      # time order
        if load.addr in firsts:
            later.append(load)
        else:
            firsts[load.addr] = load
    # a first load overlapping an earlier slot's range (not at its address): the later of the two is an overlay
    kept: list[CodeLoad] = []
    for load in sorted(firsts.values(), key=lambda ld: ld.addr):
        if kept and load.addr < kept[-1].addr + kept[-1].size:
            if load.time > kept[-1].time:
                later.append(load)
            else:
                later.append(kept[-1])
                kept[-1] = load
            continue
        kept.append(load)
    later.sort(key=lambda ld: ld.time)
    arena = Arena(kept[0].addr, max(ld.addr + ld.size for ld in kept), kept)
    arena.overlays = [Overlay(load, 0) for load in later]
    arena.first_time = min(ld.time for ld in kept)
    return arena


def _align(value: int, to: int) -> int:
    return (value + to - 1) // to * to


def _pad(blob: bytearray, to: int) -> None:
    blob += b"\0" * (_align(len(blob), to) - len(blob))


def _entry(body: bytes) -> bytes:
    """An .eh_frame entry: its length, then body padded so that the entry ends 8-aligned."""
    padded = body + b"\0" * (_align(4 + len(body), 8) - 4 - len(body))
    return struct.pack("<I", len(padded)) + padded


def cie_entry(c: Cie) -> bytes:
    """c as a version 1 CIE, augmentation zR, its FDEs' pointers pc-relative sdata4."""
    return _entry(struct.pack("<IB", 0, 1) + b"zR\0" + _uleb_bytes(c.code_align) + _sleb_bytes(c.data_align)
                  + bytes([c.return_register]) + b"\x01\x1b" + c.instructions)


def fde_entry(cie_pointer: int, pc_begin: int, pc_range: int, instructions: bytes) -> bytes:
    """An FDE: its CIE pointer, pc_begin and pc_range as sdata4, no augmentation data, its instructions."""
    return _entry(struct.pack("<Iii", cie_pointer, pc_begin, pc_range) + b"\0" + instructions)


def eh_frame_and_hdr(arena: Arena, eh_frame_at: int, runtime_of_file: int) -> tuple[bytes, bytes, list[str]]:
    """.eh_frame (its CIEs, one FDE per slot, pc-relative to where they are mapped: file offset +
    runtime_of_file) and .eh_frame_hdr (its search table) of an arena, .eh_frame at file offset eh_frame_at and
    .eh_frame_hdr right after it."""
    out = bytearray()
    cie_at: dict[Cie, int] = {}
    entries = []                            # (runtime start, FDE's offset in .eh_frame)
    for load in arena.first:
        if load.cie is None:
            continue
        where = cie_at.get(load.cie)
        if where is None:
            where = cie_at[load.cie] = len(out)
            out += cie_entry(load.cie)
        fde = len(out)
        field_runtime = runtime_of_file + eh_frame_at + fde + 8      # where pc_begin is mapped
        out += fde_entry(fde + 4 - where, load.addr - field_runtime, load.size, load.fde_instructions)
        entries.append((load.addr, fde))
    out += b"\0\0\0\0"                      # the terminator
    hdr_at = eh_frame_at + len(out)
    hdr_runtime = runtime_of_file + hdr_at
    hdr = bytearray(struct.pack("<BBBBiI", 1, 0x1B, 0x03, 0x3B, eh_frame_at - (hdr_at + 4), len(entries)))
    hdr += b"".join(struct.pack("<ii", addr - hdr_runtime, eh_frame_at + fde - hdr_at) for addr, fde in entries)
    warnings = []
    slot = {ld.addr: ld for ld in arena.first}
    for overlay in arena.overlays:
        first = slot.get(overlay.load.addr)
        if first is None or first.size != overlay.load.size or first.fde_instructions != overlay.load.fde_instructions:
            warnings.append(f"code load {overlay.load.index} ({overlay.load.name.decode(errors='replace')}) at "
                            f"{overlay.load.addr:#x} reuses a range whose unwind rules differ; it keeps the first's")
    return bytes(out), bytes(hdr), warnings


def plan_layout(arena: Arena) -> Layout:
    """File offsets of an arena's ELF before its unwind tables are placed (their size is known from the slots)."""
    lay = Layout()
    lay.eh_frame = _align(ELF_HEADER.size + PROGRAM_HEADER.size, 8)
    unwound = [ld for ld in arena.first if ld.cie is not None]
    n = len(unwound)
    # the sizes of what eh_frame_and_hdr writes: its entries' sizes do not depend on where they are mapped
    size = sum(len(cie_entry(c)) for c in {ld.cie for ld in unwound})
    fde_sizes: dict[bytes, int] = {}
    for ld in unwound:
        if ld.fde_instructions not in fde_sizes:
            fde_sizes[ld.fde_instructions] = len(fde_entry(0, 0, 0, ld.fde_instructions))
        size += fde_sizes[ld.fde_instructions]
    size += 4                               # the terminator
    lay.eh_frame_hdr = lay.eh_frame + size
    lay.unwind_end = lay.eh_frame_hdr + 12 + 8 * n
    lay.reuse = _align(lay.unwind_end, CODE_ALIGN)
    offset = lay.reuse
    for overlay in arena.overlays:
        overlay.offset = offset
        offset += _align(max(overlay.load.size, 1), CODE_ALIGN)
    lay.text = _align(offset, CODE_ALIGN)
    size = lay.text + arena.end - arena.start
    if size > ELF_LIMIT:
        raise JitInjectError(f"the arena at {arena.start:#x} would be an ELF of {size >> 20} MiB "
                             f"({arena.end - arena.start} bytes of span, {len(arena.overlays)} reused slots), more "
                             f"than the {ELF_LIMIT >> 20} MiB made of one (its code loads are too far apart, or too "
                             "many at one address)")
    arena.layout = lay
    return lay


def place_unwind_tables(arena: Arena, taken: list[tuple[int, int]], page: int = 4096) -> int:
    """A runtime address for the arena's unwind tables ([0, unwind_end) of its ELF): free of every mapping the
    recording names and of the other arenas' tables (taken: sorted, merged), at or below the span's start minus
    its file offset (so that this mapping's start - pgoff is the least of the ELF's mappings: perf's libunwind
    takes the ELF's load address from the least), and within +-2 GiB of the code (.eh_frame's 32-bit offsets).
    """
    size = arena.layout.unwind_end
    hi = (arena.start - arena.layout.text) // page * page
    while hi > 0x10000:
        lo = hi
        i = bisect.bisect_left(taken, (lo + size, 0)) - 1       # the last interval starting before our end
        if i >= 0 and taken[i][1] > lo:
            hi = (taken[i][0] - size) // page * page
            continue
        if arena.end - lo >= (1 << 31) - (1 << 20):
            break
        return lo
    raise JitInjectError(f"no free address range for the unwind tables of the arena at {arena.start:#x}")


def libdw_eh_frame_address(arena: Arena) -> int:
    """The sh_addr of the arena's .eh_frame: where libdw finds the FDEs that libunwind reads through the maps.

    perf's libunwind takes .eh_frame_hdr's sh_addr from the file and reads the table and the FDEs through the
    process's maps, at the ELF's load address (unwind_at: the tables' map) plus that address, so their pointers
    are encoded relative to unwind_at + file offset.  A perf built without libunwind (Debian's perf 7.x)
    unwinds with libdw, which reports the ELF at the start - pgoff of the map that holds the pc (the span's:
    arena.start - text, not unwind_at), reads the first .eh_frame from the file by its section header and
    decodes its pc-relative pointers from its sh_addr.  This sh_addr puts .eh_frame, seen from that base, where
    libunwind reads it (modulo 2**64: it is usually below 0), so both find each slot's FDE at the slot.  libdw
    scans .eh_frame itself: .eh_frame_hdr comes after it (libdw only takes one before it, and would drop this
    one, whose eh_frame_ptr is libunwind's address)."""
    lay = arena.layout
    return (lay.unwind_at + lay.eh_frame - (arena.start - lay.text)) & 0xFFFF_FFFF_FFFF_FFFF


def elf_image(arena: Arena, machine: int) -> tuple[bytes, list[str]]:
    """The ELF of an arena (see the module's docstring); plan_layout and place_unwind_tables first."""
    lay = arena.layout
    frames, hdr, warnings = eh_frame_and_hdr(arena, lay.eh_frame, lay.unwind_at)
    assert lay.eh_frame + len(frames) == lay.eh_frame_hdr and lay.eh_frame_hdr + len(hdr) == lay.unwind_end
    span = arena.end - arena.start
    text = bytearray(span)
    for load in arena.first:
        at = load.addr - arena.start
        text[at:at + len(load.code)] = load.code
    reuse = bytearray()
    for overlay in arena.overlays:
        reuse += b"\0" * (overlay.offset - lay.reuse - len(reuse))
        reuse += overlay.load.code
    reuse += b"\0" * (lay.text - lay.reuse - len(reuse))

    strtab = bytearray(b"\0")
    symbols = [SYMBOL.pack(0, 0, 0, 0, 0, 0)]
    for load in arena.first:
        symbols.append(SYMBOL.pack(len(strtab), (STB_LOCAL << 4) | STT_FUNC, 0, 4,
                                   lay.text + load.addr - arena.start, load.size))
        strtab += load.name + b"\0"
    for overlay in arena.overlays:
        symbols.append(SYMBOL.pack(len(strtab), (STB_LOCAL << 4) | STT_FUNC, 0, 3, overlay.offset,
                                   overlay.load.size))
        strtab += overlay.load.name + b"\0"
    symtab = b"".join(symbols)
    names = [b"", b".eh_frame", b".eh_frame_hdr", b".text.reuse", b".text", b".symtab", b".strtab", b".shstrtab"]
    shstrtab = bytearray()
    name_at = []
    for name in names:
        name_at.append(len(shstrtab))
        shstrtab += name + b"\0"
    text_end = lay.text + span
    symtab_offset = _align(text_end, 8)
    strtab_offset = symtab_offset + len(symtab)
    shstrtab_offset = strtab_offset + len(strtab)
    sections_offset = _align(shstrtab_offset + len(shstrtab), 8)
    code = SHF_ALLOC | SHF_EXECINSTR
    sections = [
        SECTION_HEADER.pack(0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
        SECTION_HEADER.pack(name_at[1], SHT_PROGBITS, SHF_ALLOC, libdw_eh_frame_address(arena), lay.eh_frame,
                            len(frames), 0, 0, 8, 0),
        SECTION_HEADER.pack(name_at[2], SHT_PROGBITS, SHF_ALLOC, lay.eh_frame_hdr, lay.eh_frame_hdr, len(hdr), 0, 0,
                            4, 0),
        SECTION_HEADER.pack(name_at[3], SHT_PROGBITS, code, lay.reuse, lay.reuse, lay.text - lay.reuse, 0, 0,
                            CODE_ALIGN, 0),
        SECTION_HEADER.pack(name_at[4], SHT_PROGBITS, code, lay.text, lay.text, span, 0, 0, CODE_ALIGN, 0),
        SECTION_HEADER.pack(name_at[5], SHT_SYMTAB, 0, 0, symtab_offset, len(symtab), 6, len(symbols), 8,
                            SYMBOL.size),
        SECTION_HEADER.pack(name_at[6], SHT_STRTAB, 0, 0, strtab_offset, len(strtab), 0, 0, 1, 0),
        SECTION_HEADER.pack(name_at[7], SHT_STRTAB, 0, 0, shstrtab_offset, len(shstrtab), 0, 0, 1, 0),
    ]
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8)
    header = ELF_HEADER.pack(ident, ET_DYN, machine, 1, 0, ELF_HEADER.size, sections_offset, 0, ELF_HEADER.size,
                             PROGRAM_HEADER.size, 1, SECTION_HEADER.size, len(sections), len(sections) - 1)
    program = PROGRAM_HEADER.pack(PT_LOAD, PF_R | PF_X, 0, 0, 0, text_end, text_end, 0x1000)
    out = bytearray(header + program)
    for offset, blob in [(lay.eh_frame, frames), (lay.eh_frame_hdr, hdr), (lay.reuse, bytes(reuse)),
                         (lay.text, bytes(text)), (symtab_offset, symtab), (strtab_offset, bytes(strtab)),
                         (shstrtab_offset, bytes(shstrtab)), (sections_offset, b"".join(sections))]:
        assert len(out) <= offset, (len(out), offset)
        out += b"\0" * (offset - len(out))
        out += blob
    return bytes(out), warnings


# ======================================================================= perf.data

@dataclass
class Recording:
    path: str
    header: tuple
    attr_size: int
    sample_type: int
    first_id: int
    data_offset: int
    data_size: int
    features: int
    markers: list[tuple[int, int, int, int, bytes, int]]   # (offset, size, pid, tid, dump path, time) of jitdump mmaps
    exec_maps: dict[int, list[tuple[int, int]]]           # pid -> (start, end) of its executable mappings
    all_maps: list[tuple[int, int]]                       # (start, end) of every mapping of every process
    anon_maps: list[tuple[int, int, int, int]]            # (offset, size, pid, time) of //anon, [anon:, /memfd: mmaps
    rounds: list[tuple[int, int]]                         # (offset, time it delivers up to) of each FINISHED_ROUND
    _bounds: list[int] = field(default_factory=list, repr=False)

    def position_for(self, ts: int) -> int:
        """Where a record of time ts goes so that perf reads it in order: before the first FINISHED_ROUND that
        delivers its time (everything delivered before it is older), else at the end of the data."""
        if len(self._bounds) != len(self.rounds):
            self._bounds = [r[1] for r in self.rounds]
        i = bisect.bisect_left(self._bounds, ts)
        return self.rounds[i][0] if i < len(self.rounds) else self.data_offset + self.data_size


def _sample_id(rec: Recording, pid: int, tid: int, ts: int) -> bytes:
    st = rec.sample_type
    out = b""
    if st & SAMPLE_TID:
        out += struct.pack("<II", pid, tid)
    if st & SAMPLE_TIME:
        out += struct.pack("<Q", ts)
    if st & SAMPLE_ID:
        out += struct.pack("<Q", rec.first_id)
    if st & SAMPLE_STREAM_ID:
        out += struct.pack("<Q", rec.first_id)
    if st & SAMPLE_CPU:
        out += struct.pack("<II", 0, 0)
    if st & SAMPLE_IDENTIFIER:
        out += struct.pack("<Q", rec.first_id)
    return out


def _section(path: str, what: str, offset: int, size: int, file_size: int) -> None:
    """A section the header declares must lie in the file."""
    if offset + size > file_size:
        raise JitInjectError(f"{path}: its {what} ({size} bytes at {offset}) run past the end of the file "
                             f"({file_size} bytes)")


def read_recording(path: str, chunk: int = 64 << 20) -> Recording:
    """The layout of a perf.data file, its jitdump mmaps and each process's executable mappings.  Every
    section, record and field is checked against the bytes that hold it: JitInjectError says which does not
    fit."""
    with open(path, "rb") as f:
        file_size = os.fstat(f.fileno()).st_size
        head = f.read(PERF_HEADER.size)
        if len(head) < PERF_HEADER.size or head[:8] != PERF_MAGIC:
            raise JitInjectError(f"{path}: not a perf.data file in this byte order (perf record -o - output, or "
                                 "another endianness)")
        fields = PERF_HEADER.unpack_from(head)
        attr_size, attrs_offset, attrs_size, data_offset, data_size = fields[2:7]
        if data_size == 0:
            raise JitInjectError(f"{path}: its data size is 0 (perf record still writing, or killed)")
        if data_offset < PERF_HEADER.size:
            raise JitInjectError(f"{path}: its data section starts at {data_offset}, inside the header")
        _section(path, "data", data_offset, data_size, file_size)
        _section(path, "event attributes", attrs_offset, attrs_size, file_size)
        features = sum(bin(word).count("1") for word in fields[9:13])
        data_end = data_offset + data_size
        _section(path, "feature table", data_end, 16 * features, file_size)
        f.seek(data_end)
        table = f.read(16 * features)
        for i in range(features):   # they follow the data, and move with it: each must be there
            offset, size = struct.unpack_from("<QQ", table, 16 * i)
            if offset < data_end or offset + size > file_size:
                raise JitInjectError(f"{path}: its feature section {i} ({size} bytes at {offset}) is not in the file "
                                     f"after the data (which ends at {data_end})")
        if attr_size <= 16 or attrs_size < attr_size:
            raise JitInjectError(f"{path}: no event attributes")
        if attr_size < ATTR_CLOCKID + 4 + 16:
            raise JitInjectError(f"{path}: event attributes of {attr_size - 16} bytes, without a clockid (a perf "
                                 "older than -k)")
        f.seek(attrs_offset)
        attrs = f.read(attrs_size)
        sample_types = set()
        first_id = 0
        for i in range(attrs_size // attr_size):
            entry = attrs[i * attr_size:(i + 1) * attr_size]
            sample_type = struct.unpack_from("<Q", entry, ATTR_SAMPLE_TYPE)[0]
            flags = struct.unpack_from("<Q", entry, ATTR_FLAGS)[0]
            clockid = struct.unpack_from("<i", entry, ATTR_CLOCKID)[0]
            if not flags & FLAG_SAMPLE_ID_ALL:
                raise JitInjectError(f"{path}: recorded without sample_id_all (no times on its mmap records)")
            if not flags & FLAG_USE_CLOCKID or clockid != CLOCK_MONOTONIC:
                raise JitInjectError(f"{path}: not recorded with -k 1 (CLOCK_MONOTONIC), the jitdump's clock")
            sample_types.add(sample_type)
            if i == 0:
                ids_offset, ids_size = struct.unpack_from("<QQ", entry, attr_size - 16)
                if ids_size >= 8:
                    _section(path, "first event id", ids_offset, 8, file_size)
                    f.seek(ids_offset)
                    first_id = struct.unpack("<Q", f.read(8))[0]
        if len(sample_types) != 1:
            raise JitInjectError(f"{path}: events with different sample types")
        sample_type = next(iter(sample_types))
        if not sample_type & SAMPLE_TIME:
            raise JitInjectError(f"{path}: recorded without times (perf record -T / --no-timestamp?)")
        # a record's time, from the end of its sample_id trailer: after it come ID, STREAM_ID, CPU, IDENTIFIER
        time_from_end = 8 + 8 * sum(1 for bit in (SAMPLE_ID, SAMPLE_STREAM_ID, SAMPLE_CPU, SAMPLE_IDENTIFIER)
                                    if sample_type & bit)
        trailer = time_from_end + (8 if sample_type & SAMPLE_TID else 0)   # the whole sample_id
        # perf reads the records in rounds: at each FINISHED_ROUND it delivers, in time order, what it holds up
        # to the latest time seen before the previous one.  rounds: (offset, that time) of each.
        rounds: list[tuple[int, int]] = []
        latest = flushed = 0
        sample_time_at = 8 + 8 * sum(1 for bit in (SAMPLE_IDENTIFIER, SAMPLE_IP, SAMPLE_TID) if sample_type & bit)
        markers = []
        exec_maps: dict[int, list[tuple[int, int]]] = {}
        all_maps: list[tuple[int, int]] = []
        anon_maps: list[tuple[int, int, int, int]] = []
        at, end = data_offset, data_end
        buf, buf_at = b"", data_offset
        while at < end:
            if at + RECORD_HEADER.size > end:
                raise JitInjectError(f"{path}: a record header at {at} cut short by the end of the data ({end})")
            if at + RECORD_HEADER.size > buf_at + len(buf):
                f.seek(at)
                buf, buf_at = f.read(min(chunk, end - at)), at
            if at + RECORD_HEADER.size > buf_at + len(buf):
                raise JitInjectError(f"{path}: cut short at {at} while reading (the file shrank)")
            kind, misc, size = RECORD_HEADER.unpack_from(buf, at - buf_at)
            if size < RECORD_HEADER.size:
                raise JitInjectError(f"{path}: a record of size {size} at {at}")
            if at + size > end:
                raise JitInjectError(f"{path}: the record at {at} ({size} bytes) runs past the end of the data ({end})")
            if kind in (RECORD_COMPRESSED, RECORD_COMPRESSED2):
                raise JitInjectError(f"{path} holds compressed records (perf record -z): record without -z")
            if at + size > buf_at + len(buf):
                f.seek(at)
                buf, buf_at = f.read(max(size, min(chunk, end - at))), at
                if size > len(buf):
                    raise JitInjectError(f"{path}: cut short at {at} while reading (the file shrank)")
            if kind < USER_RECORDS:     # the kernel's records carry their time (samples in their body)
                time_at = sample_time_at if kind == RECORD_SAMPLE else size - time_from_end
                if time_at < RECORD_HEADER.size or time_at + 8 > size:
                    raise JitInjectError(f"{path}: a record of type {kind} at {at} ({size} bytes) is too short for its "
                                         "time")
                latest = max(latest, struct.unpack_from("<Q", buf, at - buf_at + time_at)[0])
            elif kind == RECORD_FINISHED_ROUND:
                rounds.append((at, flushed))
                flushed = latest
            if kind in (RECORD_MMAP, RECORD_MMAP2):
                record = buf[at - buf_at:at - buf_at + size]
                body = MMAP2_BODY if kind == RECORD_MMAP2 else MMAP_BODY
                name_at = 8 + body.size
                name_end = record.find(b"\0", name_at, size - trailer)
                if name_end < 0:
                    raise JitInjectError(f"{path}: the mmap record at {at} ({size} bytes): its file name runs past "
                                         "its end (no NUL before its sample_id)")
                if kind == RECORD_MMAP2:
                    pid, tid, start, length, _pgoff, *_ids, prot, _flags = MMAP2_BODY.unpack_from(record, 8)
                    executable = bool(prot & PROT_EXEC)
                else:
                    pid, tid, start, length, _pgoff = MMAP_BODY.unpack_from(record, 8)
                    executable = not misc & MISC_MMAP_DATA
                name = record[name_at:name_end]
                ts = struct.unpack_from("<Q", record, size - time_from_end)[0]
                m = JITDUMP_NAME.search(name)
                if m:
                    markers.append((at, size, pid, tid, name, ts))
                else:
                    all_maps.append((start, start + length))
                    if name.startswith(ANON_NAMES):
                        anon_maps.append((at, size, pid, ts))
                    if executable:
                        exec_maps.setdefault(pid, []).append((start, start + length))
            at += size
    return Recording(path, fields, attr_size, sample_type, first_id, data_offset, data_size, features,
                     markers, exec_maps, all_maps, anon_maps, rounds)


def mmap2_record(rec: Recording, pid: int, tid: int, ts: int, start: int, length: int, pgoff: int, path: bytes,
                 st: os.stat_result) -> bytes:
    name = path + b"\0"
    name += b"\0" * (_align(len(name), 8) - len(name))
    body = MMAP2_BODY.pack(pid, tid, start, length, pgoff, os.major(st.st_dev), os.minor(st.st_dev), st.st_ino, 0,
                           PROT_READ_EXEC, MAP_PRIVATE) + name + _sample_id(rec, pid, tid, ts)
    return RECORD_HEADER.pack(RECORD_MMAP2, MISC_USER, RECORD_HEADER.size + len(body)) + body


def _copy_range(src, dst, offset: int, size: int, chunk: int = 16 << 20) -> None:
    src.seek(offset)
    while size > 0:
        block = src.read(min(chunk, size))
        if not block:
            raise JitInjectError("perf.data cut short while copying")
        dst.write(block)
        size -= len(block)


def write_recording(rec: Recording, out_path: str, replacements: dict[int, tuple[int, bytes]]) -> None:
    """perf.data rec copied to out_path with records replaced: replacements maps an offset in the file to (the
    size of the record there to leave out, 0 to insert before it; the bytes written instead); the feature
    sections that follow the data move with it."""
    delta = sum(len(new) - size for size, new in replacements.values())
    fields = list(rec.header)
    fields[6] = rec.data_size + delta
    data_end = rec.data_offset + rec.data_size
    with open(rec.path, "rb") as src, open(out_path, "wb") as dst:
        dst.write(PERF_HEADER.pack(*fields))
        _copy_range(src, dst, PERF_HEADER.size, rec.data_offset - PERF_HEADER.size)
        at = rec.data_offset
        for offset in sorted(replacements):
            size, new = replacements[offset]
            _copy_range(src, dst, at, offset - at)
            dst.write(new)
            at = offset + size
        _copy_range(src, dst, at, data_end - at)
        src.seek(data_end)
        table = bytearray(src.read(rec.features * 16))
        if len(table) < rec.features * 16:
            raise JitInjectError(f"{rec.path}: cut short at its feature table while copying")
        for i in range(rec.features):   # each feature's {offset, size}: the features follow the data, so they move
            offset, size = struct.unpack_from("<QQ", table, i * 16)
            struct.pack_into("<QQ", table, i * 16, offset + delta, size)
        dst.write(table)
        rest = os.fstat(src.fileno()).st_size - (data_end + rec.features * 16)
        _copy_range(src, dst, data_end + rec.features * 16, rest)


# ======================================================================= the whole

@dataclass
class Summary:
    dumps: int = 0
    loads: int = 0
    arenas: int = 0
    overlays: int = 0
    records: int = 0
    dropped: int = 0
    elf_bytes: int = 0
    files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _under(root: str, path: str) -> str:
    """path of the recording as found under root; a path that leads out of root (`..`) is refused."""
    if root in ("", "/"):
        return path
    top = os.path.normpath(root)
    found = os.path.normpath(os.path.join(top, path.lstrip("/")))
    if not found.startswith(top + os.sep):
        raise JitInjectError(f"the recording names {path}, which leads out of {root}")
    return found


def inject(in_path: str, out_path: str, root: str = "/") -> Summary:
    """perf.data in_path -> out_path with the code of every jitdump it maps given to perf as one ELF per arena.
    root: where the paths the recording names are found (the directory a container's / is at; "/" inside it),
    each resolved inside it (see "Files someone else wrote" in the module's docstring: a link in a dump's path
    leading out of the root leads nowhere, and a root whose tmp/ is a link to a directory beside it has its
    dumps refused: give the directory that holds tmp/ itself).  A dump that is absent, or named by a relative
    path, is left as it is (a warning in the summary); one refused, or malformed, raises JitInjectError.
    """
    rec = read_recording(in_path)
    files = RootFiles(root)
    try:
        return _inject(rec, out_path, files)
    finally:
        files.close()


def _inject(rec: Recording, out_path: str, files: RootFiles) -> Summary:
    summary = Summary()
    removals: dict[int, int] = {}       # offset -> size of a record left out
    insertions: list[tuple[int, bytes]] = []
    done: set[tuple[int, bytes]] = set()
    taken = merge_intervals(rec.all_maps)   # address ranges an unwind table's map must keep out of
    injected: dict[int, int] = {}       # pid -> time of its (first) injected jitdump mmap
    for at, size, pid, tid, name, marker_time in sorted(rec.markers, key=lambda m: m[5]):
        if (pid, name) in done:
            removals[at] = size                 # a second mmap of a dump already injected
            continue
        done.add((pid, name))
        dump_path = os.fsdecode(name)   # a path as the kernel named it: any bytes but NUL
        if not dump_path.startswith("/"):
            summary.warnings.append(f"{dump_path!r}: not an absolute path (left as it is)")
            continue
        try:
            dump = read_jitdump(dump_path, files)
        except FileNotFoundError:
            summary.warnings.append(f"{dump_path}: not found (left as it is)")
            continue
        summary.dumps += 1
        summary.loads += len(dump.loads)
        arenas = group_arenas(dump.loads, rec.exec_maps.get(pid, []))
        taken = merge_intervals(taken + [(a.start, a.end) for a in arenas])
        directory = os.path.dirname(dump_path)
        events = []
        for k, arena in enumerate(arenas):
            plan_layout(arena)
            arena.layout.unwind_at = place_unwind_tables(arena, taken)
            at_ = arena.layout.unwind_at
            taken = merge_intervals(taken + [(at_, at_ + arena.layout.unwind_end)])
            arena.path = f"{directory.rstrip('/')}/jit-{dump.pid}-arena-{k}.so"
            arena.file = files.where(arena.path)
            encoded = os.fsencode(arena.path)
            if len(encoded) > 0xFFFF - 256:
                raise JitInjectError(f"{dump_path[:80]!r}...: a path of {len(encoded)} bytes, too long for an mmap "
                                     "record")
            image, warnings = elf_image(arena, dump.elf_mach)
            summary.warnings += warnings
            st = files.write_new(arena.path, image)
            summary.files.append(arena.file)
            summary.elf_bytes += len(image)
            tid, t0, lay = arena.first[0].tid, arena.first_time, arena.layout
            events.append((t0, mmap2_record(rec, pid, tid, t0, lay.unwind_at, lay.unwind_end, 0, encoded, st)))
            events.append((t0, mmap2_record(rec, pid, tid, t0, arena.start, arena.end - arena.start, lay.text,
                                            encoded, st)))
            for overlay in arena.overlays:
                ld = overlay.load
                events.append((ld.time, mmap2_record(rec, pid, ld.tid, ld.time, ld.addr, ld.size, overlay.offset,
                                                     encoded, st)))
            summary.overlays += len(arena.overlays)
        summary.arenas += len(arenas)
        summary.records += len(events)
        events.sort(key=lambda e: e[0])
        removals[at] = size
        insertions += events
        injected.setdefault(pid, marker_time)
    for at, size, pid, ts in rec.anon_maps:   # as perf inject: a process's anonymous mappings after its jitdump's
        if pid in injected and ts >= injected[pid]:
            removals[at] = size
            summary.dropped += 1
    replacements: dict[int, tuple[int, bytes]] = {at: (size, b"") for at, size in removals.items()}
    by_position: dict[int, list[bytes]] = {}
    for ts, record in sorted(insertions, key=lambda e: e[0]):
        by_position.setdefault(rec.position_for(ts), []).append(record)
    for position, records in by_position.items():
        size, _nothing = replacements.get(position, (0, b""))
        replacements[position] = (size, b"".join(records))
    write_recording(rec, out_path, replacements)
    return summary


def add_arguments(p) -> None:
    p.add_argument("-i", "--input", required=True, help="perf.data recorded with -k 1 from a -X perf_jit process")
    p.add_argument("-o", "--output", required=True, help="the perf.data to write (perf script/report read it)")
    p.add_argument("--root", default="/", help="where the recording's paths (/tmp/jit-PID.dump) are found, and "
                                               "the ELF files written (default /: inside the recording's container)")
    p.add_argument("--fallback-perf", metavar="PERF", default=None,
                   help="if this injector cannot handle the input, or PERF unwinds without libunwind, run "
                        "`PERF inject -i IN --jit -o OUT` instead")


def unwinds_with_libunwind(perf: str) -> bool:
    """Whether this perf unwinds dwarf call graphs with libunwind (`perf version --build-options`), which reads
    the unwind tables through the process's maps as this injector lays them out.  A perf built without it
    unwinds with libdw, which reads them from the file relative to the map that holds the pc: it finds each
    slot's first load's FDE (libdw_eh_frame_address), but a reused slot's map (.text.reuse) has none, so
    --fallback-perf still runs perf inject for such a perf."""
    try:
        said = subprocess.run([perf, "version", "--build-options"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return unwinds_with_libunwind_text(said.stdout)


def unwinds_with_libunwind_text(build_options: str) -> bool:
    """unwinds_with_libunwind from the text of `perf version --build-options`."""
    return any(line.split(":")[0].strip() == "libunwind" and "[ on" in line for line in build_options.splitlines())


def run(args, log=None) -> int:
    say = log or (lambda text: print(text, file=sys.stderr))
    started = time.monotonic()

    def perf_inject(why: str) -> int:
        say(f"jit-inject: {why}; running perf inject --jit instead")
        return subprocess.call([args.fallback_perf, "inject", "-i", args.input, "--jit", "-o", args.output])

    if args.fallback_perf and not unwinds_with_libunwind(args.fallback_perf):
        return perf_inject(f"{args.fallback_perf} does not unwind with libunwind (perf version --build-options)")
    try:
        summary = inject(args.input, args.output, args.root)
    except JitInjectError as e:
        if not args.fallback_perf:
            say(f"jit-inject: {e}")
            return 3
        return perf_inject(str(e))
    for warning in summary.warnings:
        say(f"jit-inject: warning: {warning}")
    say(f"jit-inject: {summary.dumps} jitdump(s), {summary.loads} code loads -> {summary.arenas} ELF file(s) "
        f"({summary.elf_bytes} bytes), {summary.records} mmap records ({summary.overlays} for reused slots), "
        f"{time.monotonic() - started:.2f} s")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="jit_inject.py", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())

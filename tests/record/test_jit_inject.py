"""jit_inject: a jitdump and a perf.data built here, injected, and read back as perf would read them.

The fixtures are made in Python: a jitdump as CPython's perf_jit backend writes it (x86-64 trampolines of 8
bytes, 0x110 apart, each load preceded by its unwinding info), and a perf.data whose process mapped an arena
and the dump, with samples and FINISHED_ROUND records.  The checks model what perf does with the result:
which map covers an address at a time (later mmaps replace the overlapped part of earlier ones), the symbol at
the file offset it maps to, the unwind tables as perf's libunwind finds them (the ELF's load address is the
least start - pgoff of its maps, .eh_frame_hdr and the FDEs read through maps), and the order perf delivers
the records in (rounds).  A real recording of each cell is checked by conformance/test_jit_inject.py.
"""

from __future__ import annotations

import os
import shutil
import stat
import struct
import subprocess
from pathlib import Path

import pytest

from cpython_perf.record import jit_inject as ji

PID = 4242
ARENA = 0x7F0000100000
LOOSE = 0x7F0000900000          # a load no recorded mapping holds
STRIDE = 0x110
CODE = bytes.fromhex("554889e5ffd15dc3")     # push rbp; mov rbp,rsp; call *rcx; pop rbp; ret
CIE_INSTRUCTIONS = bytes.fromhex("0c0708900100")
FDE_INSTRUCTIONS = bytes.fromhex("410e108602430d06430c0708c6")
ATTR_SIZE = 136
EVENT_ID = 77
SAMPLE_TYPE = ji.SAMPLE_IP | ji.SAMPLE_TID | ji.SAMPLE_TIME | (1 << 8)      # + PERIOD


# ---------------------------------------------------------------- fixtures

def eh_frame(pc: int, size: int) -> bytes:
    """CPython's .eh_frame for a trampoline (CIE zR, pc-relative sdata4; the pc as perf inject lays it out)."""
    cie = struct.pack("<IB", 0, 1) + b"zR\0" + bytes([1, 0x78, 16, 1, 0x1B]) + CIE_INSTRUCTIONS
    cie += b"\0" * (-(len(cie) + 4) % 8)
    fde = struct.pack("<Iii", len(cie) + 4 + 4, pc, size) + b"\0" + FDE_INSTRUCTIONS
    fde += b"\0" * (-(len(fde) + 4) % 8)
    return struct.pack("<I", len(cie)) + cie + struct.pack("<I", len(fde)) + fde


def jitdump(loads: list[tuple[int, int, str]]) -> bytes:
    """(time, address, name) -> a jitdump: unwinding info then a code load for each."""
    out = bytearray(ji.JITDUMP_HEADER.pack(ji.JITDUMP_MAGIC, 1, 40, 62, 0, PID, 1, 0))
    for index, (ts, addr, name) in enumerate(loads, 1):
        frame = eh_frame(-100, len(CODE))
        hdr = bytes(20)
        body = ji.UNWINDING_INFO.pack(len(frame) + len(hdr), len(hdr), 0x60) + frame + hdr
        body += b"\0" * (-(len(body) + 16) % 8)
        out += ji.JIT_RECORD.pack(ji.JIT_CODE_UNWINDING_INFO, 16 + len(body), ts - 1) + body
        body = ji.CODE_LOAD.pack(PID, PID, addr, addr, len(CODE), index) + name.encode() + b"\0" + CODE
        out += ji.JIT_RECORD.pack(ji.JIT_CODE_LOAD, 16 + len(body), ts) + body
    return bytes(out)


def sample_id(ts: int) -> bytes:
    return struct.pack("<IIQ", PID, PID, ts)


def mmap2(ts: int, start: int, length: int, name: bytes, prot: int = 5) -> bytes:
    name += b"\0" * (8 - len(name) % 8)
    body = ji.MMAP2_BODY.pack(PID, PID, start, length, 0, 0, 0, 0, 0, prot, 2) + name + sample_id(ts)
    return ji.RECORD_HEADER.pack(ji.RECORD_MMAP2, ji.MISC_USER, 8 + len(body)) + body


def sample(ts: int, ip: int) -> bytes:
    body = struct.pack("<QIIQQ", ip, PID, PID, ts, 1)
    return ji.RECORD_HEADER.pack(9, ji.MISC_USER, 8 + len(body)) + body


def finished_round() -> bytes:
    return ji.RECORD_HEADER.pack(ji.RECORD_FINISHED_ROUND, 0, 8)


def perf_data(records: list[bytes], *, clockid: int = 1, flags: int | None = None) -> bytes:
    """A perf.data: header, one attr (its id at the end), the records, one feature section (a hostname)."""
    if flags is None:
        flags = ji.FLAG_SAMPLE_ID_ALL | ji.FLAG_USE_CLOCKID
    attr = bytearray(ATTR_SIZE)
    struct.pack_into("<IIQQQQQ", attr, 0, 1, ATTR_SIZE, 0, 999, SAMPLE_TYPE, 0, flags)
    struct.pack_into("<i", attr, ji.ATTR_CLOCKID, clockid)
    ids_at = ji.PERF_HEADER.size
    attrs_at = ids_at + 8
    data_at = attrs_at + ATTR_SIZE + 16
    attrs = bytes(attr) + struct.pack("<QQ", ids_at, 8)
    data = b"".join(records)
    feature = b"hostname\0\0\0\0\0\0\0\0"
    table_at = data_at + len(data)
    features = struct.pack("<QQ", table_at + 16, len(feature)) + feature
    header = ji.PERF_HEADER.pack(ji.PERF_MAGIC, ji.PERF_HEADER.size, ATTR_SIZE + 16, attrs_at, len(attrs), data_at,
                                 len(data), 0, 0, 1 << 2, 0, 0, 0)
    return header + struct.pack("<Q", EVENT_ID) + attrs + data + features


LOADS = [
    (150, ARENA, "py::a:/src/x.py"),
    (160, ARENA + STRIDE, "py::b:/src/x.py"),
    (170, LOOSE, "py::loose:/src/x.py"),
    (400, ARENA, "py::c:/src/x.py"),                 # a's slot, reused
    (450, ARENA + 2 * STRIDE, "py::d:/src/x.py"),
    (600, ARENA, "py::e:/src/x.py"),                 # and again
]


def recording(tmp: Path, loads=LOADS, **kw) -> tuple[Path, Path]:
    (tmp / "tmp").mkdir(exist_ok=True)
    (tmp / "tmp" / f"jit-{PID}.dump").write_bytes(jitdump(loads))
    records = [
        mmap2(10, 0x400000, 0x1000, b"/usr/bin/python3"),
        mmap2(100, ARENA, 0x10000, b"//anon"),
        mmap2(110, 0x7F0000200000, 0x1000, f"/tmp/jit-{PID}.dump".encode()),
        sample(120, 0x400100),
        finished_round(),
        sample(200, ARENA + 1), sample(210, ARENA + STRIDE + 5), sample(220, LOOSE + 3),
        mmap2(300, ARENA + 0x10000, 0x10000, b"//anon"),     # another arena, after the dump: left out
        finished_round(),
        sample(410, ARENA + 5), sample(460, ARENA + 2 * STRIDE + 1),
        finished_round(),
        sample(700, ARENA + 5),
        finished_round(),
    ]
    src = tmp / "perf.data"
    src.write_bytes(perf_data(records, **kw))
    return src, tmp / "perf.jit.data"


# ---------------------------------------------------------------- readers of the result, as perf reads it

def records_of(path: Path):
    raw = path.read_bytes()
    fields = ji.PERF_HEADER.unpack_from(raw)
    at, end = fields[5], fields[5] + fields[6]
    out = []
    while at < end:
        kind, _misc, size = ji.RECORD_HEADER.unpack_from(raw, at)
        out.append((kind, raw[at:at + size]))
        at += size
    assert at == end
    return raw, fields, out


def record_time(kind: int, record: bytes) -> int | None:
    if kind == 9:
        return struct.unpack_from("<Q", record, 8 + 16)[0]
    if kind < 64:
        return struct.unpack_from("<Q", record, len(record) - 8)[0]
    return None


def delivered(path: Path) -> list[tuple[int, bytes]]:
    """The records in the order perf's ordered events deliver them; asserts none is queued late."""
    _raw, _fields, records = records_of(path)
    queue, out = [], []
    latest = next_flush = last_flush = 0
    for kind, record in records:
        ts = record_time(kind, record)
        if ts is None:
            if kind == ji.RECORD_FINISHED_ROUND:
                ready = sorted(q for q in queue if q[0] <= next_flush)
                queue = [q for q in queue if q[0] > next_flush]
                out += ready
                last_flush = max(last_flush, next_flush)
                next_flush = latest
            continue
        assert ts >= last_flush, f"a record of time {ts} read after perf delivered up to {last_flush}"
        latest = max(latest, ts)
        queue.append((ts, len(out) + len(queue), kind, record))
    out += sorted(queue)
    return [(ts, record) for ts, _n, _kind, record in out]


class Elf:
    def __init__(self, path: Path):
        self.raw = raw = path.read_bytes()
        h = ji.ELF_HEADER.unpack_from(raw)
        assert raw[:4] == b"\x7fELF" and h[1] == ji.ET_DYN and h[2] == 62
        shoff, shnum, shstrndx = h[6], h[12], h[13]
        sections = [ji.SECTION_HEADER.unpack_from(raw, shoff + i * 64) for i in range(shnum)]
        names_at = sections[shstrndx][4]
        self.sections = {}
        for s in sections[1:]:
            name = raw[names_at + s[0]:raw.index(b"\0", names_at + s[0])].decode()
            self.sections[name] = s
        sym = self.sections[".symtab"]
        strings = self.sections[".strtab"][4]
        self.symbols = []
        for i in range(1, sym[5] // ji.SYMBOL.size):
            name_at, info, _o, shndx, value, size = ji.SYMBOL.unpack_from(raw, sym[4] + i * ji.SYMBOL.size)
            assert info == ji.STT_FUNC and shndx in (3, 4)
            self.symbols.append((value, size, raw[strings + name_at:raw.index(b"\0", strings + name_at)].decode()))
        # ET_DYN, one PT_LOAD at 0: an address in the ELF is its file offset
        assert struct.unpack_from("<IIQQ", raw, h[5]) == (ji.PT_LOAD, ji.PF_R | ji.PF_X, 0, 0)

    def symbol_at(self, offset: int) -> str | None:
        for value, size, name in self.symbols:
            if value <= offset < value + size:
                return name
        return None


class Maps:
    """perf's maps of the process at a time: MMAP2 records applied in delivery order, later over earlier."""

    def __init__(self, path: Path, until: int):
        self.maps = []      # (start, end, pgoff, file)
        for ts, record in delivered(path):
            if ts > until or ji.RECORD_HEADER.unpack_from(record)[0] != ji.RECORD_MMAP2:
                continue
            _pid, _tid, start, length, pgoff, *_rest = ji.MMAP2_BODY.unpack_from(record, 8)
            name = record[72:record.index(b"\0", 72)].decode()
            kept = []
            for s, e, p, f in self.maps:      # the overlapped part of older maps goes
                if e <= start or s >= start + length:
                    kept.append((s, e, p, f))
                    continue
                if s < start:
                    kept.append((s, start, p, f))
                if e > start + length:
                    kept.append((start + length, e, p + start + length - s, f))
            kept.append((start, start + length, pgoff, name))
            self.maps = kept

    def find(self, addr: int):
        return next(((s, e, p, f) for s, e, p, f in self.maps if s <= addr < e), None)

    def read(self, root: Path, addr: int, size: int) -> bytes:
        s, _e, p, f = self.find(addr)
        data = (root / f.lstrip("/")).read_bytes()
        return data[addr - s + p:addr - s + p + size]


def resolve(root: Path, maps: Maps, addr: int) -> str | None:
    found = maps.find(addr)
    if found is None or "arena" not in found[3]:
        return None
    s, _e, pgoff, f = found
    return Elf(root / f.lstrip("/")).symbol_at(addr - s + pgoff)


def unwind_fde(root: Path, maps: Maps, ip: int) -> tuple[int, int]:
    """The FDE perf's libunwind finds for ip: (pc_begin, pc_range)."""
    s, e, pgoff, f = maps.find(ip)
    elf = Elf(root / f.lstrip("/"))
    base = min(ms - mp for ms, _me, mp, mf in maps.maps if mf == f)        # less the ELF's base address, 0
    hdr_at = base + elf.sections[".eh_frame_hdr"][3]
    version, _ptr_enc, count_enc, table_enc, _ptr, count = struct.unpack("<BBBBiI", maps.read(root, hdr_at, 12))
    assert (version, count_enc, table_enc) == (1, 0x03, 0x3B)
    table = [struct.unpack("<ii", maps.read(root, hdr_at + 12 + 8 * i, 8)) for i in range(count)]
    starts = [hdr_at + loc for loc, _fde in table]
    assert starts == sorted(starts)
    i = max(k for k, start in enumerate(starts) if start <= ip)
    fde_at = hdr_at + table[i][1]
    length, cie_pointer, pc, size = struct.unpack("<IIii", maps.read(root, fde_at, 16))
    cie_at = fde_at + 4 - cie_pointer
    assert maps.read(root, cie_at + 4, 4) == bytes(4)                       # a CIE
    assert maps.read(root, fde_at + 17, len(FDE_INSTRUCTIONS)) == FDE_INSTRUCTIONS
    return fde_at + 8 + pc, size


# ---------------------------------------------------------------- tests

def test_one_elf_per_arena_and_a_record_for_each_reuse(tmp_path):
    src, dst = recording(tmp_path)
    summary = ji.inject(str(src), str(dst), root=str(tmp_path))
    assert (summary.dumps, summary.loads, summary.arenas, summary.overlays) == (1, 6, 2, 2)
    # per arena: its unwind tables' map and its span's; one per reuse
    assert summary.records == 2 * 2 + 2 and summary.dropped == 1
    assert sorted(p.name for p in (tmp_path / "tmp").iterdir()) == [
        f"jit-{PID}-arena-0.so", f"jit-{PID}-arena-1.so", f"jit-{PID}.dump"]
    _raw, _fields, records = records_of(dst)
    names = [r[72:r.index(b"\0", 72)] for kind, r in records if kind == ji.RECORD_MMAP2]
    assert f"/tmp/jit-{PID}.dump".encode() not in names                       # replaced, as perf inject does
    assert names.count(b"//anon") == 1                                        # the one after the dump is gone
    assert sum(1 for kind, _r in records if kind == 9) == 7                   # every sample kept


def test_a_symlink_in_the_way_is_replaced_not_followed(tmp_path):
    """In a shared /tmp another user may have made the ELF's name (or a temporary one) a symlink to a file of
    root's: the injector replaces the link and leaves the file alone, and leaves no temporary file."""
    src, dst = recording(tmp_path)
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    for name in (f"jit-{PID}-arena-0.so", f"jit-{PID}-arena-0.so.tmp"):
        (tmp_path / "tmp" / name).symlink_to(victim)
    ji.inject(str(src), str(dst), root=str(tmp_path))
    assert victim.read_bytes() == b"keep"
    arena = tmp_path / "tmp" / f"jit-{PID}-arena-0.so"
    assert not arena.is_symlink() and arena.read_bytes()[:4] == b"\x7fELF"
    assert oct(arena.stat().st_mode & 0o777) == "0o644"
    assert not [p for p in (tmp_path / "tmp").iterdir() if p.name.startswith(".jit-inject-")]


def test_a_path_leading_out_of_the_root_is_refused(tmp_path):
    assert ji._under(str(tmp_path), "/tmp/jit-1.dump") == str(tmp_path / "tmp" / "jit-1.dump")
    with pytest.raises(ji.JitInjectError, match="leads out of"):
        ji._under(str(tmp_path), "/tmp/../../etc/jit-1.dump")
    assert ji._under("/", "/tmp/jit-1.dump") == "/tmp/jit-1.dump"


def test_each_address_is_named_after_the_load_before_the_time(tmp_path):
    src, dst = recording(tmp_path)
    ji.inject(str(src), str(dst), root=str(tmp_path))
    expected = {  # time -> {address: name}, as perf inject --jit names them
        200: {ARENA + 1: "py::a:/src/x.py", ARENA + STRIDE + 5: "py::b:/src/x.py", LOOSE + 3: "py::loose:/src/x.py"},
        410: {ARENA + 5: "py::c:/src/x.py", ARENA + STRIDE: "py::b:/src/x.py"},
        460: {ARENA + 2 * STRIDE + 1: "py::d:/src/x.py", ARENA: "py::c:/src/x.py"},
        700: {ARENA + 7: "py::e:/src/x.py", ARENA + STRIDE + 7: "py::b:/src/x.py", LOOSE: "py::loose:/src/x.py"},
    }
    for ts, names in expected.items():
        maps = Maps(dst, ts)
        for addr, name in names.items():
            assert resolve(tmp_path, maps, addr) == name, (ts, hex(addr))
        assert resolve(tmp_path, maps, ARENA + 8) is None                    # between two slots: no symbol
    assert resolve(tmp_path, Maps(dst, 140), ARENA) is None                 # before the first load


def test_unwind_tables_are_found_through_the_maps_for_every_slot(tmp_path):
    src, dst = recording(tmp_path)
    ji.inject(str(src), str(dst), root=str(tmp_path))
    maps = Maps(dst, 700)
    for addr in (ARENA, ARENA + STRIDE, ARENA + 2 * STRIDE, LOOSE):
        for ip in (addr, addr + 4, addr + 7):          # a reused slot's overlay map included
            assert unwind_fde(tmp_path, maps, ip) == (addr, len(CODE)), hex(ip)
    # the tables' own map is free of every mapping the recording names, below the arena
    tables = sorted(m for m in maps.maps if m[2] == 0 and "arena" in m[3])
    assert len(tables) == 2
    assert tables[0][1] <= ARENA and ARENA + 3 * STRIDE <= tables[1][0] and tables[1][1] <= LOOSE
    for start, end, _p, _f in tables:
        assert not (start < 0x400000 + 0x1000 and end > 0x400000)


def test_records_are_placed_where_perf_reads_them_in_order(tmp_path):
    src, dst = recording(tmp_path)
    ji.inject(str(src), str(dst), root=str(tmp_path))
    order = [ts for ts, _r in delivered(dst)]      # asserts nothing arrives after its time was delivered
    assert order == sorted(order)


def test_features_move_with_the_data(tmp_path):
    src, dst = recording(tmp_path)
    ji.inject(str(src), str(dst), root=str(tmp_path))
    raw, fields, _records = records_of(dst)
    table_at = fields[5] + fields[6]
    offset, size = struct.unpack_from("<QQ", raw, table_at)
    assert raw[offset:offset + size] == b"hostname" + bytes(8) and offset == table_at + 16
    assert raw[fields[3]:fields[3] + fields[4]] == src.read_bytes()[fields[3]:fields[3] + fields[4]]


def test_readelf_reads_the_elf(tmp_path):
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("no readelf (binutils) on this machine")
    src, dst = recording(tmp_path)
    ji.inject(str(src), str(dst), root=str(tmp_path))
    elf = tmp_path / "tmp" / f"jit-{PID}-arena-0.so"
    out = subprocess.run([readelf, "-W", "-S", "-s", "--debug-dump=frames", str(elf)], capture_output=True,
                         text=True, check=True)
    assert "Warning" not in out.stderr, out.stderr
    assert out.stdout.count(" FDE ") == 3 and out.stdout.count(" CIE") == 1
    for name in ("py::a:/src/x.py", "py::b:/src/x.py", "py::c:/src/x.py", "py::d:/src/x.py", "py::e:/src/x.py"):
        assert name in out.stdout


def test_unsupported_recordings_say_why(tmp_path):
    src, dst = recording(tmp_path, clockid=0)
    with pytest.raises(ji.JitInjectError, match="-k 1"):
        ji.inject(str(src), str(dst), root=str(tmp_path))
    src, dst = recording(tmp_path, flags=ji.FLAG_USE_CLOCKID)
    with pytest.raises(ji.JitInjectError, match="sample_id_all"):
        ji.inject(str(src), str(dst), root=str(tmp_path))
    src.write_bytes(b"PERFFILE" + bytes(200))
    with pytest.raises(ji.JitInjectError, match="not a perf.data"):
        ji.inject(str(src), str(dst), root=str(tmp_path))


def test_fallback_runs_perf_inject(tmp_path):
    src, dst = recording(tmp_path, clockid=0)
    fake = tmp_path / "perf"
    fake.write_text(f"#!/bin/sh\nif [ \"$1\" = version ]; then echo '  libunwind: [ on  ]  # HAVE_LIBUNWIND_SUPPORT'; "
                    f"exit 0; fi\necho \"$@\" > {tmp_path}/argv\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    said = []
    args = ji.argparse.Namespace(input=str(src), output=str(dst), root=str(tmp_path), fallback_perf=None)
    assert ji.run(args, said.append) == 3 and "-k 1" in said[-1]
    args.fallback_perf = str(fake)
    assert ji.run(args, said.append) == 0
    assert (tmp_path / "argv").read_text().split() == ["inject", "-i", str(src), "--jit", "-o", str(dst)]


def test_a_perf_that_unwinds_without_libunwind_gets_perf_inject(tmp_path):
    """perf built without libunwind unwinds with libdw, which reads unwind tables per map: not this layout."""
    src, dst = recording(tmp_path)
    fake = tmp_path / "perf"
    fake.write_text(f"#!/bin/sh\nif [ \"$1\" = version ]; then echo '  libunwind: [ OFF ]  # HAVE_LIBUNWIND_SUPPORT'; "
                    f"exit 0; fi\necho \"$@\" > {tmp_path}/argv\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    said = []
    args = ji.argparse.Namespace(input=str(src), output=str(dst), root=str(tmp_path), fallback_perf=str(fake))
    assert ji.run(args, said.append) == 0 and "does not unwind with libunwind" in said[-1]
    assert (tmp_path / "argv").read_text().split() == ["inject", "-i", str(src), "--jit", "-o", str(dst)]
    assert not ji.unwinds_with_libunwind(str(tmp_path / "no-such-perf"))


def test_runs_standalone_with_the_stdlib_only(tmp_path):
    """The file is copied or mounted into a container and run by the profiled interpreter: its one import from
    the driver (untrusted_files) is taken only where it is there, else its stand-ins of the stdlib."""
    text = Path(ji.__file__).read_text()
    assert "import cpython_perf" not in text and "from cpython_perf" not in text
    relative = [line.strip() for line in text.splitlines() if line.lstrip().startswith(("from .", "import ."))]
    assert relative == ["from .untrusted_files import ForeignRoot, Refused, open_private_file"]
    guarded = text[text.index(relative[0]):].splitlines()[1].strip()
    assert guarded.startswith("except ImportError:") and "_WalkingRoot, _Refused, _open_private_file" in text
    src, dst = recording(tmp_path)
    lone = tmp_path / "jit_inject.py"
    shutil.copy(ji.__file__, lone)
    out = subprocess.run([os.sys.executable, "-E", str(lone), "-i", str(src), "-o", str(dst), "--root",
                          str(tmp_path)], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "6 code loads -> 2 ELF file(s)" in out.stderr


# ---------------------------------------------------------------- malformed inputs (found by test_fuzz_parsers.py)
# Each case is an input that ended in another exception (IndexError, struct.error, a plain ValueError,
# MemoryError), in minutes of work or in a hang before the parsers checked what they read; each now raises
# JitInjectError naming what does not fit.

def _cie(body: bytes) -> bytes:
    return struct.pack("<I", len(body)) + body


VALID_CIE = struct.pack("<IB", 0, 1) + b"zR\0" + bytes([1, 0x78, 16, 1, 0x1B]) + CIE_INSTRUCTIONS

EH_FRAME_CASES = {
    # was IndexError: the data alignment's LEB128 has its continuation bit set at the end of the data
    "a LEB128 number cut short": (_cie(struct.pack("<IB", 0, 1) + b"zR\0" + b"\x01\x80"), "runs past the end"),
    # was ValueError('subsection not found'), a ValueError that is not JitInjectError
    "an augmentation string without its NUL": (_cie(struct.pack("<IB", 0, 1) + b"zRxx"), "no NUL"),
    # was struct.error: an entry of 2 bytes, its id read past the data
    "an entry shorter than its id": (b"\x02\x00\x00\x00\xab\xcd", "too short for its CIE id"),
    # was IndexError: a CIE of its id alone, its version read past the data
    "a CIE without a version": (_cie(bytes(4)), "too short for its version"),
    # was IndexError: an FDE of 6 bytes after a valid CIE, its augmentation length read past the data
    "an FDE shorter than its pointers": (_cie(VALID_CIE) + _cie(struct.pack("<I", len(VALID_CIE) + 4) + b"\0\0"),
                                         "too short for its pc_begin"),
    # took 3 s (quadratic in its length: minutes for a few MB of a dump's unwinding info): 300,000 bytes of 0xff
    "an overlong LEB128 number": (_cie(struct.pack("<IB", 0, 1) + b"zR\0" + b"\xff" * 300_000 + b"\x7f" + b"x\x10"),
                                  "more than 10 bytes"),
}


@pytest.mark.parametrize("case", EH_FRAME_CASES)
def test_malformed_unwinding_info_says_what_does_not_fit(case):
    data, says = EH_FRAME_CASES[case]
    with pytest.raises(ji.JitInjectError, match=says):
        ji.parse_eh_frame(data)


def _header(size: int = 40, elf_mach: int = 62) -> bytes:
    return ji.JITDUMP_HEADER.pack(ji.JITDUMP_MAGIC, 1, size, elf_mach, 0, PID, 1, 0)


def _load_record(addr: int = ARENA, code: bytes = CODE, code_size: int | None = None, name: bytes = b"py::f:x\0",
                 index: int = 1) -> bytes:
    body = ji.CODE_LOAD.pack(PID, PID, addr, addr, len(code) if code_size is None else code_size, index) + name + code
    return ji.JIT_RECORD.pack(ji.JIT_CODE_LOAD, 16 + len(body), 150) + body


JITDUMP_CASES = {
    # was struct.error: a code load of 24 bytes at the end of the dump, its fields read past it
    "a code load shorter than its fields": (_header() + ji.JIT_RECORD.pack(ji.JIT_CODE_LOAD, 24, 1) + bytes(8),
                                            "too short for its fields"),
    # was ValueError('subsection not found'): the name's NUL looked for past the record, to the dump's end
    "a code load name without its NUL": (_header() + _load_record(name=b"py::f", code=b""), "no NUL"),
    # was accepted with a size of 2**30: inject then made a 1 GiB span for the arena's ELF, twice over
    # (MemoryError where the memory is not there); from 2**31 on it was refused further on, for want of an
    # address range
    "a code size beyond the record": (_header() + _load_record(code_size=1 << 30), "declares 1073741824 bytes"),
    # was struct.error: unwinding info of 8 bytes, its three sizes read past the record
    "unwinding info shorter than its fields": (_header() + ji.JIT_RECORD.pack(ji.JIT_CODE_UNWINDING_INFO, 24, 1)
                                               + bytes(8), "too short for its fields"),
    # was a negative slice (unwind_size - eh_frame_hdr_size < 0: everything up to near the dump's end parsed
    # as .eh_frame); and a size past the record read the records after it
    "unwinding info declaring less than its header": (
        _header() + ji.JIT_RECORD.pack(ji.JIT_CODE_UNWINDING_INFO, 16 + 24 + 32, 1)
        + ji.UNWINDING_INFO.pack(4, 20, 0) + bytes(32) + _load_record(), "declares 4 bytes"),
    # was accepted: the moved load 2**30 bytes long, then a 1 GiB span for its ELF
    "a code move longer than the code it moves": (
        _header() + _load_record() + ji.JIT_RECORD.pack(ji.JIT_CODE_MOVE, 16 + ji.CODE_MOVE.size, 160)
        + ji.CODE_MOVE.pack(PID, PID, ARENA, ARENA, ARENA + 64, 1 << 30, 1), "the load it moves has 8"),
    # was struct.error in elf_image (e_machine is 16 bits, the dump's field 32)
    "an ELF machine over 16 bits": (_header(elf_mach=0x10000) + _load_record(), "e_machine has 16 bits"),
    # was read as records from inside the header (here: none, an empty dump, said nowhere)
    "a header declaring less than its fields": (_header(size=8) + _load_record(), "less than its 40 bytes"),
}


@pytest.mark.parametrize("case", JITDUMP_CASES)
def test_malformed_jitdumps_say_what_does_not_fit(case, tmp_path):
    raw, says = JITDUMP_CASES[case]
    with pytest.raises(ji.JitInjectError, match=says):
        ji.parse_jitdump(raw)
    (tmp_path / "tmp").mkdir()
    (tmp_path / "tmp" / f"jit-{PID}.dump").write_bytes(raw)
    src = tmp_path / "perf.data"
    src.write_bytes(perf_data([mmap2(10, ARENA, 0x10000, b"//anon"),
                               mmap2(110, 0x7F0000200000, 0x1000, f"/tmp/jit-{PID}.dump".encode()),
                               sample(200, ARENA)]))
    with pytest.raises(ji.JitInjectError, match=says):
        ji.inject(str(src), str(tmp_path / "out.data"), root=str(tmp_path))


def test_an_arena_too_big_for_one_elf_is_refused_before_it_is_made(tmp_path):
    """Two code loads 1 GiB apart in one recorded executable mapping: the span would be a 1 GiB ELF (was:
    allocated and written); ELF_LIMIT refuses it first."""
    (tmp_path / "tmp").mkdir()
    (tmp_path / "tmp" / f"jit-{PID}.dump").write_bytes(_header() + _load_record(ARENA) + _load_record(ARENA + (1 << 30),
                                                                                                      index=2))
    src = tmp_path / "perf.data"
    src.write_bytes(perf_data([mmap2(10, ARENA, (1 << 30) + 0x10000, b"//anon"),
                               mmap2(110, 0x7F0000200000, 0x1000, f"/tmp/jit-{PID}.dump".encode())]))
    with pytest.raises(ji.JitInjectError, match="more than the 512 MiB"):
        ji.inject(str(src), str(tmp_path / "out.data"), root=str(tmp_path))
    assert sorted(p.name for p in (tmp_path / "tmp").iterdir()) == [f"jit-{PID}.dump"]


def _edited(raw: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(raw)
    struct.pack_into("<" + fmt, out, offset, value)
    return bytes(out)


def _records_fixture() -> list[bytes]:
    return [mmap2(10, 0x400000, 0x1000, b"/usr/bin/python3"),
            mmap2(110, 0x7F0000200000, 0x1000, f"/tmp/jit-{PID}.dump".encode()),
            sample(200, 0x400100), finished_round()]


def _fixture_perf() -> bytes:
    return perf_data(_records_fixture())


def _cut_after_data(raw: bytes) -> bytes:
    fields = ji.PERF_HEADER.unpack_from(raw)
    return raw[:fields[5] + fields[6]]


def _data_end(raw: bytes) -> int:
    fields = ji.PERF_HEADER.unpack_from(raw)
    return fields[5] + fields[6]


RECORDING_CASES = {
    # was MemoryError: f.read(2**60) of the attrs section
    "attributes of 2**60 bytes": (lambda r: _edited(r, 32, "Q", 1 << 60), "run past the end of the file"),
    # was ValueError("cannot fit 'int' into an offset-sized integer"): f.seek(2**63)
    "attributes at 2**63": (lambda r: _edited(r, 24, "Q", 1 << 63), "run past the end of the file"),
    # was struct.error: an attr of 56 bytes, its clockid (at 92) read past it
    "attributes without a clockid": (lambda r: _edited(_edited(r, 16, "Q", 72), 32, "Q", 72), "without a clockid"),
    # was struct.error: the first id read at the end of the file (8 bytes wanted, 0 there)
    "an event id past the end": (lambda r: _edited(r, 104 + 8 + ATTR_SIZE, "Q", len(r)), "first event id"),
    # was struct.error: the records read past the end of the file
    "a data section past the end": (lambda r: _edited(r, 48, "Q", len(r)), "data .* run past the end"),
    # was struct.error: the last mmap record cut to its header, its fields read past the data
    "an mmap record shorter than its fields": (
        lambda r: _edited(_edited(r, 48, "Q", ji.PERF_HEADER.unpack_from(r)[6] + 16)[:_data_end(r)]
                          + ji.RECORD_HEADER.pack(ji.RECORD_MMAP2, 2, 16) + bytes(8) + r[_data_end(r):],
                          48, "Q", ji.PERF_HEADER.unpack_from(r)[6] + 16),
        "too short for its time|no NUL"),
    # was ValueError('subsection not found'): a name without its NUL, looked for to the end of the record (its
    # sample_id, here all 0xff); where the sample_id has a 0 byte the name ran into it
    "an mmap name without its NUL": (
        lambda r: r[:_data_end(r) - 8 - len(sample(0, 0)) - (8 + 64 + 24 + 16)]
        + _no_nul_mmap() + r[_data_end(r) - 8 - len(sample(0, 0)):], "no NUL"),
    # was struct.error in write_recording, after the output was begun: a feature bit with no table after the data
    "a feature table past the end": (_cut_after_data, "feature table"),
    # was struct.error packing the moved feature's offset (2**64 - 1 + the records added)
    "a feature at 2**64 - 1": (lambda r: _edited(r, _data_end(r), "Q", (1 << 64) - 1), "feature section 0"),
}


def _no_nul_mmap() -> bytes:
    record = bytearray(mmap2(110, 0x7F0000200000, 0x1000, f"/tmp/jit-{PID}.dump".encode()))
    name_at = 8 + ji.MMAP2_BODY.size
    record[name_at:] = b"x" * (len(record) - 16 - name_at) + b"\xff" * 16
    return bytes(record)


@pytest.mark.parametrize("case", RECORDING_CASES)
def test_malformed_recordings_say_what_does_not_fit(case, tmp_path):
    make, says = RECORDING_CASES[case]
    raw = make(_fixture_perf())
    (tmp_path / "tmp").mkdir()
    (tmp_path / "tmp" / f"jit-{PID}.dump").write_bytes(jitdump(LOADS[:2]))
    src, dst = tmp_path / "perf.data", tmp_path / "out.data"
    src.write_bytes(raw)
    with pytest.raises(ji.JitInjectError, match=says):
        ji.inject(str(src), str(dst), root=str(tmp_path))
    assert not dst.exists()


def test_a_dump_named_in_bytes_that_are_not_utf8(tmp_path):
    """A path is any bytes but NUL (was UnicodeDecodeError): the dump is found and its ELF named in the same
    bytes."""
    directory = os.path.join(os.fsencode(tmp_path), b"tmp", b"caf\xe9")
    os.makedirs(directory)
    with open(os.path.join(directory, f"jit-{PID}.dump".encode()), "wb") as f:
        f.write(jitdump(LOADS[:2]))
    src = tmp_path / "perf.data"
    name = b"/tmp/caf\xe9/jit-" + str(PID).encode() + b".dump"
    src.write_bytes(perf_data([mmap2(10, ARENA, 0x10000, b"//anon"), mmap2(110, 0x7F0000200000, 0x1000, name)]))
    summary = ji.inject(str(src), str(tmp_path / "out.data"), root=str(tmp_path))
    assert summary.arenas == 1 and os.path.exists(os.path.join(directory, f"jit-{PID}-arena-0.so".encode()))
    _raw, _fields, records = records_of(tmp_path / "out.data")
    names = [r[72:r.index(b"\0", 72)] for kind, r in records if kind == ji.RECORD_MMAP2]
    assert b"/tmp/caf\xe9/jit-" + str(PID).encode() + b"-arena-0.so" in names


def test_a_relative_dump_name_is_left_alone(tmp_path):
    """The kernel names mappings by absolute paths: a relative one (was read from the current directory, its
    ELF written at the top of the root) is left as it is."""
    (tmp_path / f"jit-{PID}.dump").write_bytes(jitdump(LOADS[:2]))
    src = tmp_path / "perf.data"
    src.write_bytes(perf_data([mmap2(10, ARENA, 0x10000, b"//anon"),
                               mmap2(110, 0x7F0000200000, 0x1000, f"jit-{PID}.dump".encode())]))
    summary = ji.inject(str(src), str(tmp_path / "out.data"), root=str(tmp_path))
    assert summary.dumps == 0 and "not an absolute path" in summary.warnings[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"jit-{PID}.dump", "out.data", "perf.data"]


# ---------------------------------------------------------------- dumps someone else made: links, FIFOs, sizes

def _alarm(seconds: int):
    """A SIGALRM after seconds that fails the test (a read that blocks), cancelled on exit."""
    import contextlib
    import signal

    @contextlib.contextmanager
    def bounded():
        def fire(_signum, _frame):
            raise AssertionError(f"blocked for {seconds} s")
        previous = signal.signal(signal.SIGALRM, fire)
        signal.alarm(seconds)
        try:
            yield
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)
    return bounded()


@pytest.mark.parametrize("root", ["root", "/"])
def test_a_symlinked_dump_is_refused(tmp_path, root):
    """/tmp/jit-PID.dump -> a file of root's (was read through the link): refused, under a root and under /."""
    src, dst = recording(tmp_path)
    dump = tmp_path / "tmp" / f"jit-{PID}.dump"
    victim = tmp_path / "victim.dump"
    dump.rename(victim)
    dump.symlink_to(victim)
    if root == "/":
        with pytest.raises(ji.JitInjectError, match="refused: a symbolic link"):
            ji.read_jitdump(str(dump))
        return
    with pytest.raises(ji.JitInjectError, match=f"jit-{PID}.dump: refused: a symbolic link"):
        ji.inject(str(src), str(dst), root=str(tmp_path))
    assert not dst.exists()


@pytest.mark.parametrize("root", ["root", "/"])
def test_a_fifo_dump_is_refused_without_blocking(tmp_path, root):
    """A FIFO under the dump's name (was: open() waited for a writer for ever): refused at once."""
    src, dst = recording(tmp_path)
    dump = tmp_path / "tmp" / f"jit-{PID}.dump"
    dump.unlink()
    os.mkfifo(dump)
    with _alarm(10), pytest.raises(ji.JitInjectError, match="refused: a FIFO"):
        if root == "/":
            ji.read_jitdump(str(dump))
        else:
            ji.inject(str(src), str(dst), root=str(tmp_path))


def test_a_dump_over_the_size_cap_is_refused_unread(tmp_path):
    """A sparse file of DUMP_LIMIT + 1 bytes (was: read whole into memory)."""
    src, dst = recording(tmp_path)
    with open(tmp_path / "tmp" / f"jit-{PID}.dump", "r+b") as f:
        f.truncate(ji.DUMP_LIMIT + 1)
    with pytest.raises(ji.JitInjectError, match="more than the 2048 MiB"):
        ji.inject(str(src), str(dst), root=str(tmp_path))
    with pytest.raises(ji.JitInjectError, match="more than the 2048 MiB"):
        ji.read_jitdump(str(tmp_path / "tmp" / f"jit-{PID}.dump"))


def test_a_directory_of_the_dumps_path_that_leads_out_of_the_root(tmp_path):
    """The container's /tmp made a link to a directory of the host (was: the dump read there and the ELF files
    written there, as root): resolved inside the root, where it leads nowhere."""
    outside = tmp_path / "host-dir"
    root = tmp_path / "root"
    root.mkdir()
    src, dst = recording(root)
    (root / "tmp").rename(outside)
    for target in (str(outside), "../host-dir"):   # absolute: root/<that path> inside the root; `..` stops at it
        (root / "tmp").unlink(missing_ok=True)
        (root / "tmp").symlink_to(target)
        try:
            summary = ji.inject(str(src), str(dst), root=str(root))
        except ji.JitInjectError as exc:
            assert "refused" in str(exc)
        else:
            assert summary.dumps == 0 and "not found" in summary.warnings[0]
        assert sorted(p.name for p in outside.iterdir()) == [f"jit-{PID}.dump"]


def test_elf_files_are_made_new_in_the_dumps_directory(tmp_path):
    """The ELF is written to a new file of a random name (O_CREAT | O_EXCL | O_NOFOLLOW, relative to the
    directory's descriptor), renamed over its name: a link planted under that name is replaced, its target
    untouched; a planted temporary name is never opened."""
    src, dst = recording(tmp_path)
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    (tmp_path / "tmp" / f"jit-{PID}-arena-1.so").symlink_to(victim)
    files = ji.RootFiles(str(tmp_path))
    try:
        st = files.write_new(f"/tmp/jit-{PID}-arena-1.so", b"\x7fELF")
    finally:
        files.close()
    made = tmp_path / "tmp" / f"jit-{PID}-arena-1.so"
    assert not made.is_symlink() and made.read_bytes() == b"\x7fELF" and victim.read_bytes() == b"keep"
    assert (os.stat(made).st_ino, oct(st.st_mode & 0o777)) == (st.st_ino, "0o644")
    assert [p.name for p in (tmp_path / "tmp").iterdir() if p.name.startswith(".jit-inject-")] == []


def test_the_standalone_file_opens_dumps_by_the_same_rules(tmp_path):
    """Run as a file of its own (no driver package beside it): a symlinked dump is refused all the same, by
    _WalkingRoot (every component opened O_NOFOLLOW)."""
    src, dst = recording(tmp_path)
    dump = tmp_path / "tmp" / f"jit-{PID}.dump"
    dump.rename(tmp_path / "tmp" / "real.dump")
    dump.symlink_to("real.dump")
    lone = tmp_path / "jit_inject.py"
    shutil.copy(ji.__file__, lone)
    out = subprocess.run([os.sys.executable, "-E", str(lone), "-i", str(src), "-o", str(dst), "--root",
                          str(tmp_path)], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert out.returncode == 3 and "refused: a symbolic link" in out.stderr, out.stderr
    walking = ji._WalkingRoot(str(tmp_path))
    try:
        with pytest.raises(ji._Refused, match="symbolic link"):
            walking.open_regular(f"/tmp/jit-{PID}.dump")
        fd, st = walking.open_regular("/tmp/real.dump")
        os.close(fd)
        assert st.st_size == len(jitdump(LOADS))
    finally:
        walking.close()


def test_under_slash_the_dump_is_read_and_its_elf_made_where_the_recording_names_them(tmp_path):
    """root "/" (the injector run in the recording's own tree): the recording's absolute paths as they are, the
    dump opened by open_private_file, the ELF files made in its directory; a link in the dump's place refused."""
    dump = tmp_path / f"jit-{PID}.dump"
    dump.write_bytes(jitdump(LOADS))
    src, dst = tmp_path / "perf.data", tmp_path / "perf.jit.data"
    src.write_bytes(perf_data([mmap2(100, ARENA, 0x10000, b"//anon"),
                               mmap2(110, 0x7F0000200000, 0x1000, str(dump).encode()), sample(200, ARENA + 1)]))
    summary = ji.inject(str(src), str(dst))
    assert summary.arenas == 2 and summary.files == [str(tmp_path / f"jit-{PID}-arena-{k}.so") for k in (0, 1)]
    assert all(Elf(Path(f)).symbols for f in summary.files)
    dump.rename(tmp_path / "real.dump")
    dump.symlink_to(tmp_path / "real.dump")
    with pytest.raises(ji.JitInjectError, match="refused: a symbolic link"):
        ji.inject(str(src), str(dst))


# ---------------------------------------------------------------- as perf's libdw unwinder reads the ELF
# A perf built without libunwind (Debian's perf 7.x) unwinds with libdw (tools/perf/util/unwind-libdw.c): the
# ELF of the map that holds ip is reported to libdwfl at base = start - pgoff of that map (dwfl_report_elf,
# add_p_vaddr false: its bias is base less the first PT_LOAD's aligned p_vaddr), and libdw reads the CFI from
# the file by its section headers (dwarf_getcfi_elf: the first .eh_frame, with the last .eh_frame_hdr before
# it if any, whose eh_frame_ptr must be that .eh_frame's sh_addr), its pc-relative pointers relative to the
# sections' sh_addr; it looks up ip - bias.  Nothing is read through the process's maps.

def _sections_in_order(raw: bytes) -> list[tuple[str, tuple]]:
    h = ji.ELF_HEADER.unpack_from(raw)
    shoff, shnum, shstrndx = h[6], h[12], h[13]
    sections = [ji.SECTION_HEADER.unpack_from(raw, shoff + i * 64) for i in range(shnum)]
    names_at = sections[shstrndx][4]
    return [(raw[names_at + s[0]:raw.index(b"\0", names_at + s[0])].decode(), s) for s in sections[1:]]


def libdw_fde(root: Path, maps: Maps, ip: int) -> tuple[int, int] | None:
    """The FDE perf's libdw unwinder finds for ip, (pc_begin, pc_range) at runtime, or None (it then unwinds
    the frame by its frame pointer, elfutils' x86_64 fallback)."""
    mask = (1 << 64) - 1
    s, _e, pgoff, f = maps.find(ip)
    raw = (root / f.lstrip("/")).read_bytes()
    h = ji.ELF_HEADER.unpack_from(raw)
    loads = [struct.unpack_from("<IIQQQQQQ", raw, h[5] + i * h[9]) for i in range(h[10])]
    _type, _flags, _offset, vaddr, _paddr, _filesz, _memsz, align = next(p for p in loads if p[0] == ji.PT_LOAD)
    bias = (s - pgoff - (vaddr & -max(align, 1))) & mask
    hdr = frame = None
    for name, sh in _sections_in_order(raw):
        if name == ".eh_frame_hdr":
            hdr = sh
        elif name == ".eh_frame":
            frame = sh
            break
    assert frame is not None
    frame_vaddr, frame_at, frame_size = frame[3], frame[4], frame[5]
    pc = (ip - bias) & mask
    if hdr is not None:
        version, ptr_enc, count_enc, table_enc, ptr, count = struct.unpack_from("<BBBBiI", raw, hdr[4])
        assert (version, ptr_enc, count_enc, table_enc) == (1, 0x1B, 0x03, 0x3B)
        if (hdr[3] + 4 + ptr) & mask != frame_vaddr:
            hdr = None          # libdw's sanity check: the search table is not used
    entries = []                # (start, range) of every FDE, in ELF addresses, as libdw decodes them
    at = frame_at
    while at < frame_at + frame_size:
        length, entry_id = struct.unpack_from("<II", raw, at)
        if length == 0:
            break
        if entry_id:            # an FDE: pc_begin pc-relative (sdata4) to where it is, by sh_addr
            begin, size = struct.unpack_from("<ii", raw, at + 8)
            entries.append(((frame_vaddr + (at + 8 - frame_at) + begin) & mask, size))
        at += 4 + length
    if hdr is not None:         # the search table: the last entry at or below pc, then that FDE's range
        table = [struct.unpack_from("<ii", raw, hdr[4] + 12 + 8 * i) for i in range(count)]
        below = [(hdr[3] + loc) & mask for loc, _fde in table if (hdr[3] + loc) & mask <= pc]
        entries = [(start, size) for start, size in entries if below and start == max(below)]
    covering = [(start, size) for start, size in entries if start <= pc < start + size]
    if not covering:
        return None
    start, size = covering[0]
    return (start + bias) & mask, size


def test_libdw_finds_each_slot_s_fde_in_the_elf(tmp_path):
    """A perf without libunwind (Debian's perf 7.x) unwinds with libdw, which reads .eh_frame from the file at
    the text map's start - pgoff (was: its pointers were relative to the tables' own map, below the arena, so
    libdw found no FDE and unwound each trampoline by its frame pointer: at its first instructions, and at its
    ret, that skips the eval loop's frame, or ends the chain where the caller keeps no frame pointer); perf's
    libunwind still finds the same FDE through the maps."""
    src, dst = recording(tmp_path)
    ji.inject(str(src), str(dst), root=str(tmp_path))
    for ts, slots in ((200, (ARENA, ARENA + STRIDE, LOOSE)), (460, (ARENA + STRIDE, ARENA + 2 * STRIDE))):
        maps = Maps(dst, ts)
        for addr in slots:
            for ip in (addr, addr + 4, addr + 7):
                assert libdw_fde(tmp_path, maps, ip) == (addr, len(CODE)), (ts, hex(ip))
                assert unwind_fde(tmp_path, maps, ip) == (addr, len(CODE)), (ts, hex(ip))


def test_a_last_operand_of_zero_is_kept():
    """riscv64's unwind info ends its CIE with DW_CFA_def_cfa sp, 0 and its FDE with DW_CFA_def_cfa_offset 0: a
    0 byte that is an operand, not padding.  With the NULs stripped, the FDE written again ended in a
    def_cfa_offset without its operand wherever no padding followed it, and perf unwound no sample past the
    first trampoline of the arena (seen in the riscv64 guest: 630 of 944 samples short of perf inject's)."""
    cie_instructions = bytes.fromhex("0c0200")                       # def_cfa sp(2), 0
    fde_instructions = bytes.fromhex("440e10480181028802440c08004e")  # ... advance 4 (4e is advance_loc 14)
    fde_instructions += bytes.fromhex("c1c8440c021044")              # restore ra, s0; CFA sp+16; advance 4
    fde_instructions += bytes.fromhex("0e00")                        # def_cfa_offset 0
    cie = struct.pack("<IB", 0, 1) + b"zR\0" + bytes([1, 0x78, 1, 1, 0x1B]) + cie_instructions
    fde = struct.pack("<Iii", len(cie) + 4 + 4, -64, 36) + b"\0" + fde_instructions
    assert (len(fde) + 4) % 8 == 0, "the FDE must end 8-aligned, with no padding after its last operand"
    data = struct.pack("<I", len(cie)) + cie + struct.pack("<I", len(fde)) + fde
    parsed, instructions, _, _ = ji.parse_eh_frame(data)
    assert instructions.endswith(bytes.fromhex("0e00")) and instructions.startswith(fde_instructions)
    assert parsed.instructions.startswith(cie_instructions)
    written = ji.fde_entry(0, 0, 36, instructions)
    assert bytes.fromhex("0e00") in written[-len(instructions) - 8:]

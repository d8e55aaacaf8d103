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
    """The file is copied or mounted into a container and run by the profiled interpreter: no driver imports."""
    text = Path(ji.__file__).read_text()
    assert "from ." not in text and "import cpython_perf" not in text and "from cpython_perf" not in text
    src, dst = recording(tmp_path)
    lone = tmp_path / "jit_inject.py"
    shutil.copy(ji.__file__, lone)
    out = subprocess.run([os.sys.executable, "-E", str(lone), "-i", str(src), "-o", str(dst), "--root",
                          str(tmp_path)], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "6 code loads -> 2 ELF file(s)" in out.stderr

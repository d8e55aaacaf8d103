"""Property-based fuzzing of every parser of files someone else wrote (hypothesis).

The commands run as root on a node and read what containers and other users wrote: jitdumps, perf maps,
/proc/<pid>/maps, perf.data files, and `perf script` text whose symbol names come from those maps.  Each
parser here is fed malformed input made from small valid samples (the fixtures of test_jit_inject.py and
test_perf_data.py): valid headers with a field set to an edge value, the sample cut at every length, bytes
overwritten, inserted or removed, random bytes, huge declared sizes and counts, overlong, negative and
unterminated LEB128 numbers, zero-size records, records declaring more bytes than the file holds.  Every
input must end in a result or in the module's own error with a message (JitInjectError, PerfDataError,
PerfScriptError, DriverError, untrusted_files.Refused), never in IndexError, struct.error,
UnicodeDecodeError, MemoryError, OverflowError and the like; within a deadline (DEADLINE_MS an example, and
a watchdog of WATCHDOG_S that ends a loop that never would); with at most MEMORY_LIMIT bytes allocated at
the peak (tracemalloc: a declared size of 2**60 must never be allocated); and jit_inject.inject writes
nothing but its output and its ELF files.

How many examples each property gets: CPYTHON_PERF_FUZZ_EXAMPLES (default EXAMPLES_DEFAULT, so that the
file takes well under a minute in the unit run on two cores); `nox -s fuzz` runs it with many more.  The
inputs are drawn from a seed, CPYTHON_PERF_FUZZ_SEED or a random one: a failure prints its input, and the
seed that draws the same inputs again.  Without hypothesis installed (pyproject's fuzz extra) the file is
skipped, saying why.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import random
import signal
import struct
import tempfile
import time
import tracemalloc
from pathlib import Path

import pytest

_INSTALL_NOTE = os.environ.get("CPYTHON_PERF_FUZZ_INSTALL", "")
hypothesis = pytest.importorskip(
    "hypothesis", reason="hypothesis is not installed (pyproject.toml's fuzz extra, which nox -s unit, tests and "
                         "fuzz install)" + (f"; pip said: {_INSTALL_NOTE}" if _INSTALL_NOTE else ""))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.configuration import set_hypothesis_home_dir  # noqa: E402

from cpython_perf.bench import fidelity  # noqa: E402
from cpython_perf.errors import DriverError  # noqa: E402
from cpython_perf.record import container_files  # noqa: E402
from cpython_perf.record import jit_inject as ji  # noqa: E402
from cpython_perf.record import perf_data, perf_samples  # noqa: E402
from cpython_perf.record.jit_inject import JitInjectError  # noqa: E402
from cpython_perf.record.perf_data import PerfDataError  # noqa: E402
from cpython_perf.record.perf_samples import PerfScriptError  # noqa: E402
from cpython_perf.record.untrusted_files import Refused  # noqa: E402

from . import test_jit_inject as jif  # noqa: E402
from . import test_perf_data as pdf  # noqa: E402

EXAMPLES_DEFAULT = 200
EXAMPLES = int(os.environ.get("CPYTHON_PERF_FUZZ_EXAMPLES", "") or EXAMPLES_DEFAULT)
SEED = int(os.environ.get("CPYTHON_PERF_FUZZ_SEED", "") or random.SystemRandom().randrange(1 << 32))
DEADLINE_MS = 2000
WATCHDOG_S = 20
MEMORY_LIMIT = 48 << 20

# hypothesis keeps no example database here (database=None) and its other files out of the checkout
set_hypothesis_home_dir(os.environ.get("CPYTHON_PERF_FUZZ_HOME") or os.path.join(tempfile.gettempdir(),
                                                                                 "cpython-perf-hypothesis"))
settings.register_profile(
    "cpython-perf-fuzz", max_examples=EXAMPLES, deadline=DEADLINE_MS, derandomize=False, database=None,
    print_blob=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                            HealthCheck.filter_too_much])


def FUZZ(test):
    """A property test with the profile's settings, its inputs drawn from SEED."""
    return hypothesis.seed(SEED)(settings(settings.get_profile("cpython-perf-fuzz"))(test))


# ---------------------------------------------------------------- how every input must end

class DidNotEnd(Exception):
    """A parser still running after WATCHDOG_S (an endless loop): not an error a caller can expect."""


@contextlib.contextmanager
def watchdog(seconds: float = WATCHDOG_S):
    def fire(_signum, _frame):
        raise DidNotEnd(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def ends_cleanly(call, allowed: tuple = ()):
    """call()'s result, or the allowed error it raised (which must say something); any other exception is the
    fuzzer's finding and propagates.  Time (watchdog) and memory (tracemalloc's peak) are bounded."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    _note(f"CPYTHON_PERF_FUZZ_SEED={SEED} draws these inputs again", event=False)
    try:
        with watchdog():
            try:
                result = call()
            except allowed as exc:
                assert str(exc).strip(), f"{type(exc).__name__} without a message"
                _note(f"{type(exc).__name__}: {_kind_of(str(exc))}")
                return exc
            _note("a result")
            return result
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        if started:
            tracemalloc.stop()
        assert peak < MEMORY_LIMIT, f"{peak >> 20} MiB allocated at the peak"


def _kind_of(message: str) -> str:
    """A message without its numbers and paths: what kind of refusal it is (for --hypothesis-show-statistics)."""
    words = [w for w in message.split() if not any(c.isdigit() for c in w) and "/" not in w]
    return " ".join(words[:8])


def _note(what: str, event: bool = True) -> None:
    """An event counted by --hypothesis-show-statistics (how the examples ended), or a note printed with a
    failing example; outside a test of hypothesis, nothing."""
    try:
        (hypothesis.event if event else hypothesis.note)(what)
    except hypothesis.errors.InvalidArgument:
        pass


# ---------------------------------------------------------------- values at the edges

def mostly(usual: st.SearchStrategy, other: st.SearchStrategy, times: int = 3) -> st.SearchStrategy:
    """usual `times` times for each time of other: a field right more often than not, so that the parser gets
    past it to the next."""
    return st.one_of(*[usual] * times, other)


U32_EDGES = [0, 1, 2, 7, 8, 9, 15, 16, 17, 23, 24, 39, 40, 41, 55, 56, 57, 64, 72, 104, 112, 136, 0xFFFF, 0x10000,
             0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF]
U64_EDGES = U32_EDGES + [1 << 32, 1 << 40, 1 << 60, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]


def u16() -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from([v for v in U32_EDGES if v <= 0xFFFF]), st.integers(0, 0xFFFF))


def u32() -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from(U32_EDGES), st.integers(0, (1 << 32) - 1))


def u64() -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from(U64_EDGES), st.integers(0, (1 << 64) - 1))


@st.composite
def mutated(draw, sample: bytes, fields: tuple = ()) -> bytes:
    """sample with one to four edits: a field of `fields` ((offset, struct format) of the sample's known
    fields) or any offset overwritten with an edge value, bytes flipped, inserted or removed, or the end cut."""
    data = bytearray(sample)
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["field", "field", "u8", "u16", "u32", "u64", "insert", "delete", "cut"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if op == "field" and fields:
            at, fmt = draw(st.sampled_from(fields))
            value = draw({"B": st.integers(0, 255), "H": u16(), "I": u32(), "Q": u64()}[fmt])
            data[at:at + struct.calcsize(fmt)] = struct.pack("<" + fmt, value)
        elif op in ("u8", "u16", "u32", "u64", "field"):
            fmt, strategy = {"u8": ("B", st.integers(0, 255)), "u16": ("H", u16()), "u32": ("I", u32())}.get(
                op, ("Q", u64()))
            data[at:at + struct.calcsize(fmt)] = struct.pack("<" + fmt, draw(strategy))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=64))
        elif op == "delete":
            del data[at:at + draw(st.integers(1, 64))]
        else:   # the end cut off (shrinking towards nothing cut)
            del data[len(data) - draw(st.integers(0, len(data))):]
    return bytes(data)


# ---------------------------------------------------------------- the valid samples

def _leb_unsigned(value: int) -> bytes:
    return ji._uleb_bytes(value)


def leb128() -> st.SearchStrategy[bytes]:
    """LEB128 numbers: valid (up to 2**70), negative, overlong (zeros padded with continuation bits),
    unterminated (every byte with its continuation bit)."""
    return st.one_of(
        st.integers(0, 1 << 70).map(_leb_unsigned),
        st.integers(-(1 << 70), 1 << 70).map(ji._sleb_bytes),
        st.integers(1, 40).map(lambda n: b"\x80" * n + b"\x00"),
        st.integers(1, 40).map(lambda n: b"\xff" * n + b"\x7f"),
        st.binary(min_size=1, max_size=24).map(lambda b: bytes(x | 0x80 for x in b)),
    )


def entry(body: bytes, length: int | None = None) -> bytes:
    return struct.pack("<I", len(body) if length is None else length) + body


@st.composite
def eh_frames(draw) -> bytes:
    """An .eh_frame of a CIE and an FDE whose every field may be wrong: version, augmentation, the LEB128
    numbers, the pointer encoding, the entry lengths; sometimes a third entry, sometimes no terminator."""
    augmentation = draw(st.sampled_from([b"zR", b"", b"z", b"zPLR", b"zRS"]) | st.binary(max_size=5))
    cie = struct.pack("<IB", draw(mostly(st.just(0), u32())),
                      draw(mostly(st.sampled_from([1, 3]), st.integers(0, 255))))
    cie += augmentation + (b"\0" if draw(st.integers(0, 9)) else b"")
    cie += draw(leb128()) + draw(leb128())
    cie += draw(st.sampled_from([b"\x10"]) | leb128())
    if augmentation.startswith(b"z"):
        cie += draw(st.sampled_from([b"\x01"]) | leb128())
        cie += bytes([draw(st.sampled_from([0x1B, 0x03, 0x04, 0x0C, 0x00, 0x01, 0x05, 0xFF]))])
    cie += draw(st.binary(max_size=12))
    fde = struct.pack("<I", draw(mostly(st.just(len(cie) + 8), u32())))
    fde += draw(st.binary(min_size=0, max_size=20))
    frames = entry(cie, draw(mostly(st.none(), u32()))) + entry(fde, draw(mostly(st.none(), u32())))
    if draw(st.booleans()):
        frames += draw(st.binary(max_size=16))
    if draw(st.booleans()):
        frames += bytes(4)
    return frames


VALID_EH_FRAME = jif.eh_frame(-100, len(jif.CODE))
EH_FRAME_FIELDS = ((0, "I"), (4, "I"), (8, "B"), (9, "B"), (12, "B"), (13, "B"), (14, "B"), (15, "B"), (16, "B"))


def _jitdump_fields(raw: bytes) -> tuple:
    """(offset, format) of the header's fields and of every record's header and fixed fields in a dump."""
    out = [(4, "I"), (8, "I"), (12, "I"), (20, "I"), (32, "Q")]
    p = 40
    while p + 16 <= len(raw):
        kind, size, _ = ji.JIT_RECORD.unpack_from(raw, p)
        out += [(p, "I"), (p + 4, "I"), (p + 8, "Q")]
        if kind == ji.JIT_CODE_LOAD:
            out += [(p + 16, "I"), (p + 20, "I")] + [(p + 24 + 8 * i, "Q") for i in range(4)]
        elif kind == ji.JIT_CODE_UNWINDING_INFO:
            out += [(p + 16 + 8 * i, "Q") for i in range(3)] + [(p + 40 + o, f) for o, f in EH_FRAME_FIELDS]
        if size < 16:
            break
        p += size
    return tuple(out)


VALID_DUMP = jif.jitdump(jif.LOADS)
DUMP_FIELDS = _jitdump_fields(VALID_DUMP)
SMALL_DUMP = jif.jitdump(jif.LOADS[:2])


@st.composite
def jit_records(draw) -> bytes:
    """One jitdump record of any kind, its fields from edge values, its declared size right or not."""
    kind = draw(st.sampled_from([ji.JIT_CODE_LOAD, ji.JIT_CODE_LOAD, ji.JIT_CODE_MOVE, ji.JIT_CODE_UNWINDING_INFO,
                                 ji.JIT_CODE_UNWINDING_INFO, ji.JIT_CODE_DEBUG_INFO, ji.JIT_CODE_CLOSE]) | u32())
    addr = draw(st.sampled_from([jif.ARENA, jif.ARENA + jif.STRIDE, jif.LOOSE, 0, 0x10000]) | u64())
    if kind == ji.JIT_CODE_LOAD:
        code = draw(st.binary(max_size=24))
        name = draw(st.binary(max_size=24)) + (b"\0" if draw(st.booleans()) else b"")
        body = ji.CODE_LOAD.pack(draw(u32()), draw(u32()), addr, addr, draw(st.just(len(code)) | u64()),
                                 draw(st.integers(0, 4) | u64())) + name + code
    elif kind == ji.JIT_CODE_MOVE:
        body = ji.CODE_MOVE.pack(draw(u32()), draw(u32()), addr, addr, draw(u64()), draw(st.integers(0, 64) | u64()),
                                 draw(st.integers(0, 4) | u64()))
    elif kind == ji.JIT_CODE_UNWINDING_INFO:
        frame = draw(st.just(VALID_EH_FRAME) | eh_frames())
        hdr = draw(st.integers(0, 24))
        body = ji.UNWINDING_INFO.pack(draw(st.just(len(frame) + hdr) | u64()), draw(st.just(hdr) | u64()),
                                      draw(u64())) + frame + bytes(hdr)
    else:
        body = draw(st.binary(max_size=48))
    if draw(st.booleans()):
        body = body[:draw(st.integers(0, len(body)))]
    size = draw(st.just(16 + len(body)) | st.sampled_from([0, 1, 15, 16]) | u32())
    return ji.JIT_RECORD.pack(kind, size, draw(st.integers(0, 1000) | u64())) + body


@st.composite
def jitdumps(draw) -> bytes:
    """A jitdump: the valid one mutated, records made here after a valid or mutated header, or random bytes
    after the magic."""
    how = draw(st.sampled_from(["mutated", "records", "records", "random"]))
    if how == "mutated":
        return draw(mutated(draw(st.sampled_from([VALID_DUMP, SMALL_DUMP])), DUMP_FIELDS))
    header = ji.JITDUMP_HEADER.pack(ji.JITDUMP_MAGIC, 1, draw(st.just(40) | u32()), draw(st.just(62) | u32()), 0,
                                    jif.PID, 1, draw(st.just(0) | u64()))
    if how == "random":
        return header[:4] + draw(st.binary(max_size=400))
    return header + b"".join(draw(st.lists(jit_records(), max_size=8)))


# perf.data: the fixture of test_jit_inject (one attr with its id, records, one feature section)
def _perf_records() -> list[bytes]:
    return [
        jif.mmap2(10, 0x400000, 0x1000, b"/usr/bin/python3"),
        jif.mmap2(100, jif.ARENA, 0x10000, b"//anon"),
        jif.mmap2(110, 0x7F0000200000, 0x1000, f"/tmp/jit-{jif.PID}.dump".encode()),
        jif.sample(120, 0x400100),
        jif.finished_round(),
        jif.sample(200, jif.ARENA + 1),
        jif.mmap2(300, jif.ARENA + 0x10000, 0x10000, b"//anon"),
        jif.finished_round(),
        jif.sample(410, jif.ARENA + 5),
        jif.finished_round(),
    ]


VALID_PERF = jif.perf_data(_perf_records())


def _perf_fields(raw: bytes) -> tuple:
    """(offset, format) of the header's fields, the attr's, the first id's, each record's header and fixed
    fields, and the feature table's."""
    out = [(8 + 8 * i, "Q") for i in range(12)]
    fields = ji.PERF_HEADER.unpack_from(raw)
    attrs = fields[3]
    out += [(attrs + o, "Q") for o in (ji.ATTR_SAMPLE_TYPE, ji.ATTR_FLAGS)] + [(attrs + ji.ATTR_CLOCKID, "I"),
                                                                             (attrs + jif.ATTR_SIZE, "Q"),
                                                                             (attrs + jif.ATTR_SIZE + 8, "Q")]
    at, end = fields[5], fields[5] + fields[6]
    while at + 8 <= end:
        kind, _misc, size = ji.RECORD_HEADER.unpack_from(raw, at)
        out += [(at, "I"), (at + 4, "H"), (at + 6, "H")]
        if kind == ji.RECORD_MMAP2:
            out += [(at + 8, "I"), (at + 16, "Q"), (at + 24, "Q"), (at + 32, "Q"), (at + 64, "I"), (at + size - 8, "Q")]
        elif kind == ji.RECORD_SAMPLE:
            out += [(at + 8 + 8 * i, "Q") for i in range(4)]
        at += max(size, 8)
    out += [(end, "Q"), (end + 8, "Q")]
    return tuple(out)


PERF_FIELDS = _perf_fields(VALID_PERF)


@st.composite
def perf_records(draw) -> bytes:
    """A perf.data record: an mmap (its name any bytes: not UTF-8, no NUL, long), a sample, a round, a
    compressed one or any type, its declared size right or not."""
    kind = draw(st.sampled_from([ji.RECORD_MMAP2, ji.RECORD_MMAP2, ji.RECORD_MMAP, ji.RECORD_SAMPLE,
                                 ji.RECORD_FINISHED_ROUND, 3, 4, 7, ji.RECORD_COMPRESSED]) | st.integers(0, 100))
    ts = draw(st.integers(0, 1000) | u64())
    if kind in (ji.RECORD_MMAP2, ji.RECORD_MMAP):
        name = draw(st.sampled_from([f"/tmp/jit-{jif.PID}.dump".encode(), b"//anon", b"/usr/lib/x.so",
                                     b"jit-1.dump", b"/tmp/\xff\xfe/jit-1.dump"]) | st.binary(max_size=40))
        if kind == ji.RECORD_MMAP2:
            record = jif.mmap2(ts, draw(u64()), draw(u64()), name, draw(st.just(5) | u32()))
        else:
            name += b"\0" * (8 - len(name) % 8)
            body = ji.MMAP_BODY.pack(jif.PID, jif.PID, draw(u64()), draw(u64()), 0) + name + jif.sample_id(ts)
            record = ji.RECORD_HEADER.pack(ji.RECORD_MMAP, draw(st.sampled_from([0, ji.MISC_MMAP_DATA])),
                                           8 + len(body)) + body
    elif kind == ji.RECORD_SAMPLE:
        record = jif.sample(ts, draw(u64()))
    elif kind == ji.RECORD_FINISHED_ROUND:
        record = jif.finished_round()
    else:
        body = draw(st.binary(max_size=64))
        record = ji.RECORD_HEADER.pack(kind, 0, 8 + len(body)) + body
    if draw(st.booleans()):
        record = record[:draw(st.integers(0, len(record)))]
    if draw(st.booleans()) and len(record) >= 8:
        record = record[:6] + struct.pack("<H", draw(st.sampled_from([0, 1, 7, 8, 9, 16, 0xFFFF]) | u16())) + record[8:]
    return record


@st.composite
def perf_files(draw) -> bytes:
    """A perf.data of test_jit_inject's shape: the valid one mutated, or its header and attr around records
    made here."""
    if draw(st.booleans()):
        return draw(mutated(VALID_PERF, PERF_FIELDS))
    clockid = draw(mostly(st.just(1), st.integers(-2, 3)))
    flags = draw(mostly(st.none(), u64()))
    raw = jif.perf_data(draw(st.lists(perf_records(), max_size=10)), clockid=clockid, flags=flags)
    return draw(st.just(raw) | mutated(raw, tuple((8 * i + 8, "Q") for i in range(12))))


# perf_data's fixture (test_perf_data: no attrs, the records, one feature section)
RENAMES = {4001: (1, 4001), 4002: (7, 4002)}
VALID_PD = pdf.perf_file([pdf.comm(4001, b"python3"), pdf.mmap2(4001, b"/tmp/jit-1.dump"),
                          pdf.mmap2(4001, b"/usr/lib/libc.so.6"), pdf.mmap(4002, b"/tmp/jit-7.dump"),
                          pdf.fork(4003, 4001)])


def _pd_fields(raw: bytes) -> tuple:
    out = [(8 + 8 * i, "Q") for i in range(12)]
    at = 104
    end = 104 + struct.unpack_from("<Q", raw, 48)[0]
    while at + 8 <= end:
        _kind, _misc, size = struct.unpack_from("<IHH", raw, at)
        out += [(at, "I"), (at + 6, "H"), (at + 8, "I"), (at + 12, "I")]
        at += max(size, 8)
    return tuple(out + [(end, "Q"), (end + 8, "Q")])


PD_FIELDS = _pd_fields(VALID_PD)


@st.composite
def pd_records(draw) -> bytes:
    kind = draw(st.sampled_from([perf_data.RECORD_COMM, perf_data.RECORD_MMAP, perf_data.RECORD_MMAP2,
                                 perf_data.RECORD_FORK, perf_data.RECORD_EXIT, perf_data.RECORD_COMPRESSED,
                                 perf_data.RECORD_COMPRESSED2]) | st.integers(0, 100))
    pid = draw(st.sampled_from([4001, 4002, 4003, 0, 0xFFFFFFFF]) | u32())
    name = draw(st.sampled_from([b"/tmp/jit-1.dump", b"/tmp/jit-7.dump", b"jit-1.dump", b"/" * 300 + b"jit-1.dump"])
                | st.binary(max_size=40))
    if kind == perf_data.RECORD_MMAP2:
        record = pdf.mmap2(pid, name)
    elif kind == perf_data.RECORD_MMAP:
        record = pdf.mmap(pid, name)
    elif kind == perf_data.RECORD_COMM:
        record = pdf.comm(pid, name)
    elif kind == perf_data.RECORD_FORK:
        record = pdf.fork(pid, draw(u32()))
    else:
        record = pdf.record(kind, draw(st.binary(max_size=40)))
    if draw(st.booleans()):
        record = record[:draw(st.integers(0, len(record)))]
    if draw(st.booleans()) and len(record) >= 8:
        size = draw(st.sampled_from([0, 1, 8, 9, 12, 16, 0xFFFF]) | u16())
        record = record[:6] + struct.pack("<H", size) + record[8:]
    return record


@st.composite
def pd_files(draw) -> bytes:
    how = draw(st.sampled_from(["mutated", "records", "random"]))
    if how == "mutated":
        return draw(mutated(VALID_PD, PD_FIELDS))
    if how == "random":
        return b"PERFILE2" + draw(st.binary(min_size=96, max_size=300))
    records = draw(st.lists(pd_records(), max_size=8))
    raw = pdf.perf_file(records, data_size=draw(st.none() | st.just(0) | u64()))
    return draw(st.just(raw) | mutated(raw, tuple((8 + 8 * i, "Q") for i in range(12))))


# ---------------------------------------------------------------- files on disk

@contextlib.contextmanager
def scratch():
    with tempfile.TemporaryDirectory(prefix="cpython-perf-fuzz-") as tmp:
        yield Path(tmp)


def read_back(raw: bytes, name: str, read, allowed: tuple):
    """ends_cleanly(read(path)) of raw written to a scratch file of that name."""
    with scratch() as tmp:
        path = tmp / name
        path.write_bytes(raw)
        return ends_cleanly(lambda: read(str(path)), allowed)


def listing(top: Path) -> dict[str, str]:
    """Every entry under top: path -> what it is (a file: its content's hash)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(top):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            rel = str(path.relative_to(top))
            if path.is_symlink():
                out[rel] = "link -> " + os.readlink(path)
            elif path.is_file():
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                out[rel] = "dir"
    return out


# ======================================================================= jit_inject

@FUZZ
@given(st.one_of(eh_frames(), mutated(VALID_EH_FRAME, EH_FRAME_FIELDS), st.binary(max_size=200)))
def test_parse_eh_frame(data):
    result = ends_cleanly(lambda: ji.parse_eh_frame(data), (JitInjectError,))
    if not isinstance(result, Exception):
        cie, instructions, pc_at, size = result
        assert 0 <= pc_at and pc_at + 2 * size <= len(data) and size in (2, 4, 8)
        assert 0 <= cie.return_register <= 255


@FUZZ
@given(jitdumps())
def test_read_jitdump(raw):
    dump = read_back(raw, "jit-1.dump", ji.read_jitdump, (JitInjectError,))
    if not isinstance(dump, Exception):
        assert 0 <= dump.elf_mach <= 0xFFFF
        for load in dump.loads:     # every load's code is what its record holds: never more than the dump
            assert len(load.code) == load.size <= len(raw)
            assert load.cie is None or 0 <= load.cie.return_register <= 255


@FUZZ
@given(perf_files())
def test_read_recording(raw):
    rec = read_back(raw, "perf.data", lambda path: ji.read_recording(path, chunk=256), (JitInjectError,))
    if not isinstance(rec, Exception):
        assert ji.PERF_HEADER.size <= rec.data_offset and rec.data_offset + rec.data_size <= len(raw)
        for at, size, *_ in rec.markers + rec.anon_maps:
            assert rec.data_offset <= at and at + size <= rec.data_offset + rec.data_size


def _inject_case(tmp: Path, dump: bytes, perf: bytes) -> None:
    """inject() of perf in tmp, its dump tmp/tmp/jit-PID.dump, root tmp: a result or JitInjectError, and nothing
    written but the output, ELF files beside the dump, nothing left half-made and no file changed."""
    (tmp / "tmp").mkdir()
    (tmp / "tmp" / f"jit-{jif.PID}.dump").write_bytes(dump)
    (tmp / "perf.data").write_bytes(perf)
    before = listing(tmp)
    result = ends_cleanly(lambda: ji.inject(str(tmp / "perf.data"), str(tmp / "perf.jit.data"), root=str(tmp)),
                          (JitInjectError,))
    after = listing(tmp)
    assert {k: v for k, v in after.items() if k in before} == before, "an input file changed"
    made = set(after) - set(before)
    strays = [name for name in made
              if name != "perf.jit.data" and not (name.startswith("tmp/jit-") and "-arena-" in name
                                                  and name.endswith(".so"))]
    assert not strays, f"written outside the output: {strays}"
    if isinstance(result, Exception):
        return
    assert "perf.jit.data" in made
    assert set(result.files) == {str(tmp / name) for name in made if name.endswith(".so")}


@FUZZ
@given(st.one_of(
    st.tuples(jitdumps(), st.just(VALID_PERF)),
    st.tuples(st.just(VALID_DUMP), perf_files()),
    st.tuples(jitdumps(), perf_files()),
))
def test_inject_end_to_end(pair):
    dump, perf = pair
    with scratch() as tmp:
        _inject_case(tmp, dump, perf)


def test_inject_of_every_cut_of_the_dump_and_of_the_recording():
    """The valid pair, each file cut at every length (a dump a dying process left half-written, a recording
    copied in part)."""
    for n in range(len(VALID_DUMP) + 1):
        with scratch() as tmp:
            _inject_case(tmp, VALID_DUMP[:n], VALID_PERF)
    for n in range(len(VALID_PERF) + 1):
        with scratch() as tmp:
            _inject_case(tmp, VALID_DUMP, VALID_PERF[:n])


def test_every_cut_of_a_jitdump_and_of_its_unwinding_info():
    whole = ji.parse_jitdump(VALID_DUMP)
    for n in range(len(VALID_DUMP) + 1):
        dump = ends_cleanly(lambda: ji.parse_jitdump(VALID_DUMP[:n]), (JitInjectError,))
        if not isinstance(dump, Exception):    # whole records only: a prefix of the whole dump's loads
            assert dump.loads == whole.loads[:len(dump.loads)]
    for n in range(len(VALID_EH_FRAME) + 1):
        ends_cleanly(lambda: ji.parse_eh_frame(VALID_EH_FRAME[:n]), (JitInjectError,))


def test_huge_declared_sizes_are_not_allocated():
    """Sizes of 2**60 and more in a small dump or recording: refused before anything that big is made (the
    memory bound of ends_cleanly)."""
    load = bytearray(jif.jitdump(jif.LOADS[:1]))
    # after the header and the unwinding info, the load's record header, pid, tid, vma, addr
    code_size_at = 40 + struct.unpack_from("<I", load, 44)[0] + 16 + 24
    for value in (1 << 31, 1 << 60, (1 << 64) - 1):
        struct.pack_into("<Q", load, code_size_at, value)
        assert isinstance(ends_cleanly(lambda: ji.parse_jitdump(bytes(load)), (JitInjectError,)), JitInjectError)
    for field in (2, 3, 4, 5, 6):      # attr_size, attrs {offset, size}, data {offset, size}
        for value in (1 << 60, (1 << 63) + 5, (1 << 64) - 1):
            raw = bytearray(VALID_PERF)
            struct.pack_into("<Q", raw, 8 * field, value)
            with scratch() as tmp:
                (tmp / "perf.data").write_bytes(raw)
                result = ends_cleanly(lambda: ji.read_recording(str(tmp / "perf.data")), (JitInjectError,))
                assert isinstance(result, JitInjectError), (field, value)
                result = ends_cleanly(lambda: perf_data.pids_named(tmp / "perf.data"), (PerfDataError,))
                assert isinstance(result, (PerfDataError, set))


# ======================================================================= perf_data

@FUZZ
@given(st.binary(max_size=140), st.integers(0, 1 << 64))
def test_read_layout(head, file_size):
    if len(head) >= 8 and head[:8] != b"PERFILE2":
        head = b"PERFILE2" + head[8:]
    layout = ends_cleanly(lambda: perf_data.read_layout(head, file_size), (PerfDataError,))
    if not isinstance(layout, Exception):
        assert layout.data_offset >= perf_data.HEADER.size and layout.data_size >= 0


@FUZZ
@given(pd_files())
def test_pids_named(raw):
    with scratch() as tmp:
        (tmp / "perf.data").write_bytes(raw)
        pids = ends_cleanly(lambda: perf_data.pids_named(tmp / "perf.data", chunk=64), (PerfDataError,))
        if not isinstance(pids, Exception):    # the chunk size changes nothing
            assert pids == perf_data.pids_named(tmp / "perf.data")
            assert all(0 < pid < 0xFFFFFFFF for pid in pids)


@FUZZ
@given(pd_files())
def test_rename_jitdumps(raw):
    with scratch() as tmp:
        (tmp / "perf.data").write_bytes(raw)
        count = ends_cleanly(lambda: perf_data.rename_jitdumps(tmp / "perf.data", tmp / "out.data", RENAMES),
                             (PerfDataError,))
        if isinstance(count, Exception):
            assert not (tmp / "out.data").exists()
            return
        out = (tmp / "out.data").read_bytes()
        before, after = perf_data.HEADER.unpack_from(raw), perf_data.HEADER.unpack_from(out)
        assert after[:6] == before[:6] and after[7:] == before[7:]     # only the data size changes
        assert perf_data.read_layout(out[:104], len(out)).data_size == after[6]


def test_every_cut_of_a_perf_data():
    for n in range(len(VALID_PD) + 1):
        with scratch() as tmp:
            (tmp / "perf.data").write_bytes(VALID_PD[:n])
            ends_cleanly(lambda: perf_data.pids_named(tmp / "perf.data"), (PerfDataError,))
            ends_cleanly(lambda: perf_data.rename_jitdumps(tmp / "perf.data", tmp / "out.data", RENAMES),
                         (PerfDataError,))
            ends_cleanly(lambda: ji.read_recording(str(tmp / "perf.data")), (JitInjectError,))


# ======================================================================= perf script text

COMMS = mostly(st.sampled_from(["python3", "Thread 1 (x)", "perf-exec", "a b  c", "x:", "1/1 2.0:"]),
               st.sampled_from(["9" * 5000, "x\u2028y"]) | st.text(min_size=1, max_size=30).filter(
                   lambda s: not s[0].isspace()), times=9)
SYMBOLS = mostly(st.sampled_from(["py::foo:/src/x.py", "operator()(int)", "[unknown]", "f+0x13", "a (b) c",
                                  "(deleted)", " " * 3000 + "x", "py::<lambda>:/a b/c.py"]),
                 st.sampled_from(["x\x0by", "x\x1cy", "x\u2028y", "x\ny"]) | st.text(max_size=40), times=9)
DSOS = mostly(st.sampled_from(["/tmp/perf-42.map", "[kernel.kallsyms]", "[unknown]", "/x (deleted)",
                               "/memfd:a (deleted)", "/usr/lib/x86_64-linux-gnu/libc.so.6"]),
              st.sampled_from(["a(b", "a)b", "x\ny"]) | st.text(max_size=30), times=9)


EVENTS = mostly(st.sampled_from(["cpu-clock:ppp:", "cycles:", "task-clock: ", ""]), st.text(max_size=20), times=9)


@st.composite
def header_lines(draw) -> str:
    pid = draw(mostly(st.integers(-1, 1 << 22).map(str),
                      st.integers(0, 10 ** 30).map(str) | st.sampled_from(["9" * 5000, "\u0663", "-0", "00042"]),
                      times=9))
    return (f"{draw(COMMS)}{' ' * draw(st.integers(1, 8))}{pid}/{draw(st.integers(-1, 1 << 22))}"
            f"{' ' * draw(st.integers(1, 8))}{draw(st.integers(0, 10**6))}.{draw(st.integers(0, 999999)):06d}: "
            f"{draw(EVENTS)}")


@st.composite
def frame_lines(draw) -> str:
    return f"\t{' ' * draw(st.integers(0, 8))}{draw(st.integers(0, 1 << 64)):x} {draw(SYMBOLS)} ({draw(DSOS)})"


@st.composite
def odd_lines(draw) -> str:
    """A line perf does not print: long runs where a pattern with two unbounded parts could backtrack for ever,
    or any text."""
    if draw(st.booleans()):
        n = draw(st.sampled_from([20000, 40000]) | st.integers(1000, 40000))
        return draw(st.sampled_from([f"a{' ' * n}z", f"x 1/1{' ' * n}x", f"x 1/1 1.0: {'a' * 5}{' ' * n}b",
                                     f"\t 1 {' (' * (n // 2)}", f"\t 1 x{' ' * n}(a{' ' * n}b",
                                     f"\t 1 x (a){' ' * n}b", f"x{' 1/1' * (n // 4)}"]))
    return draw(st.text(max_size=80))


@st.composite
def perf_script_texts(draw) -> str:
    """Samples (a header, frames, a blank line), now and then a line perf does not print put among them."""
    lines = []
    for _ in range(draw(st.integers(0, 5))):
        lines.append(draw(header_lines()))
        lines += draw(st.lists(frame_lines(), max_size=5))
        lines.append("")
    for _ in range(draw(mostly(st.just(0), st.integers(1, 3)))):
        lines.insert(draw(st.integers(0, len(lines))), draw(odd_lines()))
    return "\n".join(lines) + "\n"


@FUZZ
@given(perf_script_texts())
def test_parse_perf_script(text):
    samples = ends_cleanly(lambda: perf_samples.parse_perf_script(text), (PerfScriptError,))
    if not isinstance(samples, Exception):
        for sample in samples:
            assert sample.comm and not sample.comm[0].isspace()
            assert all(isinstance(f.ip, int) and f.ip >= 0 for f in sample.frames)


def test_perf_script_header_fields_are_read_as_before():
    """The header parser is a search over bounded fields: it reads perf's own header lines as the single
    regular expression it replaces did (the comm up to the first PID/TID TIME:, the event without its colon)."""
    cases = {
        "python3    42/42    100.000001: cpu-clock:ppp: ": ("python3", 42, 42, 100.000001, "cpu-clock:ppp"),
        "Thread 1 (x)  7/9  1.5: task-clock: ": ("Thread 1 (x)", 7, 9, 1.5, "task-clock"),
        "a 1/1 2.0: b 3/3 4.0: cycles:": ("a", 1, 1, 2.0, "b 3/3 4.0: cycles"),
        "perf-exec  -1/-1  0.000000: cycles :  ": ("perf-exec", -1, -1, 0.0, "cycles "),
        "x 5/6 7.25:  ": ("x", 5, 6, 7.25, ""),
    }
    for line, expected in cases.items():
        [sample] = perf_samples.parse_perf_script(line + "\n")
        assert (sample.comm, sample.pid, sample.tid, sample.time, sample.event) == expected


def test_a_long_line_is_parsed_in_time_linear_in_its_length():
    """A header line's comm (or event) of a long run of spaces took time quadratic in its length (the single
    regular expression backtracked: 3 s for 16,000 characters, 20 s for 40,000); a jitdump's symbol name may
    hold a newline, so such a line can come from a profiled program."""
    for line in (f"a{' ' * 40000}z", f"x 1/1 1.0: a{' ' * 40000}b", f"\t 1 x{' ' * 40000}(a{' ' * 40000}b"):
        started = time.monotonic()
        ends_cleanly(lambda: perf_samples.parse_perf_script(line + "\n"), (PerfScriptError,))
        assert time.monotonic() - started < 1.0, line[:20]


def test_a_pid_of_thousands_of_digits_is_not_a_header():
    """int() refuses strings of more than 4300 digits (was a plain ValueError, not PerfScriptError)."""
    with pytest.raises(PerfScriptError, match="not a sample header"):
        perf_samples.parse_perf_script(f"python3 {'9' * 5000}/1 1.0: cycles:\n")


# ======================================================================= container_files (read only here)

@FUZZ
@given(st.one_of(jitdumps(), st.binary(max_size=300)), st.integers(0, 400), st.integers(1, (1 << 32) - 1))
def test_rewrite_jitdump_in_pieces(raw, split, pid):
    """The Keeper feeds a dump as it grows: rewriting it in two reads (the second from where the first stopped)
    gives what one read gives, and what is taken is whole records of the same length."""
    whole, used = ends_cleanly(lambda: container_files.rewrite_jitdump(raw, 0, pid))
    assert 0 <= used <= len(raw) and len(whole) == used
    first, taken = container_files.rewrite_jitdump(raw[:split], 0, pid)
    assert len(first) == taken <= min(split, len(raw))
    rest, more = container_files.rewrite_jitdump(raw[taken:], taken, pid)
    assert len(rest) == more and first + rest == whole and taken + more == used


def test_rewrite_jitdump_keeps_the_records_after_a_longer_header():
    raw = jif.jitdump(jif.LOADS[:2])
    longer = bytearray(raw[:40])
    struct.pack_into("<I", longer, 8, 48)
    longer = bytes(longer) + bytes(8) + raw[40:]
    assert len(ji.parse_jitdump(longer).loads) == 2
    out, used = container_files.rewrite_jitdump(longer, 0, 99)
    assert used == len(longer) and len(ji.parse_jitdump(out).loads) == 2


MAPS_PATHS = st.one_of(st.sampled_from(["/usr/bin/python3", "/usr/lib/libc.so.6", "/tmp/jit-1.dump", "[heap]",
                                        "/x (deleted)", "/memfd:a", "/a/../b", "/a b", "//anon", ""]),
                       st.text(max_size=30).map(lambda s: "/" + s))


@st.composite
def maps_texts(draw) -> bytes:
    lines = []
    for _ in range(draw(st.integers(0, 10))):
        perms = draw(st.sampled_from(["r-xp", "r--p", "rwxp", "---p", "x"]) | st.text(max_size=5))
        lines.append(f"7f0000000000-7f0000001000 {perms} 00000000 08:01 1234{' ' * draw(st.integers(1, 20))}"
                     f"{draw(MAPS_PATHS)}")
    text = "\n".join(lines).encode(errors="surrogatepass") if lines else b""
    return draw(st.just(text) | st.binary(max_size=300) | mutated(text or b"x"))


@FUZZ
@given(maps_texts())
def test_mapped_objects(maps):
    with scratch() as proc:
        (proc / "77").mkdir()
        (proc / "77" / "maps").write_bytes(maps)
        found = ends_cleanly(lambda: container_files.mapped_objects(77, proc=proc))
    assert isinstance(found, set)
    for path in found:
        assert path.startswith("/") and not path.endswith(" (deleted)") and "\n" not in path


def test_mapped_objects_reads_a_line_per_mapping():
    """A file name with a line-separator character that is not \\n (the kernel prints it as it is) must not make
    a second mapping of what follows it."""
    evil = "/tmp/x\x1c7f0000000000-7f0000001000 r-xp 00000000 08:01 1 /etc/shadow"
    with scratch() as proc:
        (proc / "77").mkdir()
        (proc / "77" / "maps").write_bytes(f"7f0000000000-7f0000001000 r-xp 00000000 08:01 1 {evil}\n".encode())
        assert "/etc/shadow" not in container_files.mapped_objects(77, proc=proc)


# ======================================================================= fidelity

@FUZZ
@given(st.one_of(st.text(max_size=300), st.lists(st.sampled_from(["7f00 10 py::a:/x.py", "1 2 py::", "x y py::a:b:c",
                                                                 "1 2", "", "1 2 3 4 py::z"]) | st.text(max_size=40),
                                                 max_size=10).map("\n".join)))
def test_perf_map_entries(text):
    for name, filename in ends_cleanly(lambda: fidelity.perf_map_entries(text)):
        assert isinstance(name, str) and isinstance(filename, str)


@FUZZ
@given(st.one_of(jitdumps(), st.binary(max_size=200)))
def test_jitdump_entries(raw):
    ends_cleanly(lambda: fidelity.jitdump_entries(raw), (DriverError,))


def test_every_cut_of_a_jitdump_for_the_other_readers():
    for n in range(len(VALID_DUMP) + 1):
        ends_cleanly(lambda: fidelity.jitdump_entries(VALID_DUMP[:n]), (DriverError,))
        out, used = container_files.rewrite_jitdump(VALID_DUMP[:n], 0, 99)
        assert len(out) == used <= n


# ======================================================================= the files themselves: links, FIFOs

def test_a_refused_dump_under_a_root_is_a_jit_inject_error(tmp_path):
    """Through ForeignRoot: a dump that is a link (even to a file inside the root) or a FIFO is refused, not
    read, and the FIFO's open does not wait for a writer."""
    src, dst = jif.recording(tmp_path)
    dump = tmp_path / "tmp" / f"jit-{jif.PID}.dump"
    dump.rename(tmp_path / "tmp" / "real.dump")
    dump.symlink_to("real.dump")
    with watchdog(10), pytest.raises(JitInjectError, match="refused: a symbolic link"):
        ji.inject(str(src), str(dst), root=str(tmp_path))
    dump.unlink()
    os.mkfifo(dump)
    with watchdog(10), pytest.raises(JitInjectError, match="refused: a FIFO"):
        ji.inject(str(src), str(dst), root=str(tmp_path))
    assert not dst.exists()


def test_refusals_are_refused_errors():
    """untrusted_files.Refused is the OSError the file readers raise, each saying what and why."""
    exc = Refused("/tmp/x", "a FIFO, not a regular file")
    assert isinstance(exc, OSError) and "a FIFO" in str(exc)
    with scratch() as tmp:
        os.mkfifo(tmp / "fifo")
        with watchdog(10), pytest.raises(JitInjectError, match="FIFO"):
            ji.read_jitdump(str(tmp / "fifo"))
        with watchdog(10), pytest.raises(PerfDataError, match="not a regular file"):
            perf_data.pids_named(tmp / "fifo")

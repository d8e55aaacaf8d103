"""perf_data: the pids a perf.data names, and its jitdump mmaps renamed (no perf needed: files written here in
perf.data's layout; conformance/test_outside_recording.py runs the rename on real recordings with real perf)."""

from __future__ import annotations

import os
import signal
import struct

import pytest

from cpython_perf.record import perf_data
from cpython_perf.record.perf_data import PerfDataError, pids_named, rename_jitdumps

TRAILER = b"\x11" * 8   # a sample_id trailer (sample_id_all), kept as it is


def record(kind: int, body: bytes, misc: int = 0) -> bytes:
    return struct.pack("<IHH", kind, misc, 8 + len(body)) + body


def name_field(name: bytes) -> bytes:
    padded = (len(name) + 1 + 7) // 8 * 8
    return name.ljust(padded, b"\0")


def mmap2(pid: int, name: bytes) -> bytes:
    fixed = struct.pack("<IIQQQ", pid, pid, 0x7F0000001000, 0x1000, 0) + b"\0" * 24 + struct.pack("<II", 5, 2)
    return record(perf_data.RECORD_MMAP2, fixed + name_field(name) + TRAILER, misc=2)


def mmap(pid: int, name: bytes) -> bytes:
    fixed = struct.pack("<IIQQQ", pid, pid, 0x7F0000002000, 0x1000, 0)
    return record(perf_data.RECORD_MMAP, fixed + name_field(name) + TRAILER)


def comm(pid: int, name: bytes) -> bytes:
    return record(perf_data.RECORD_COMM, struct.pack("<II", pid, pid) + name_field(name) + TRAILER)


def fork(pid: int, ppid: int) -> bytes:
    return record(perf_data.RECORD_FORK, struct.pack("<IIIIQ", pid, ppid, pid, ppid, 123) + TRAILER)


def perf_file(records: list[bytes], feature: bytes = b"FEATURE!", data_size: int | None = None) -> bytes:
    """A perf.data: header, no attrs, the records, one feature section (bit 2) after them."""
    data = b"".join(records)
    data_offset = 104
    table_at = data_offset + len(data)
    header = struct.pack("<8sQQQQQQQQ4Q", b"PERFILE2", 104, 136, data_offset, 0, data_offset,
                         len(data) if data_size is None else data_size, 0, 0, 1 << 2, 0, 0, 0)
    table = struct.pack("<QQ", table_at + 16, len(feature))
    return header + data + table + feature


def walk(raw: bytes):
    """(type, record bytes) of a file's data section, and its feature contents (checks the layout)."""
    fields = perf_data.HEADER.unpack_from(raw)
    offset, size = fields[5], fields[6]
    data, out, at = raw[offset:offset + size], [], 0
    while at < len(data):
        kind, _, rsize = struct.unpack_from("<IHH", data, at)
        out.append((kind, data[at:at + rsize]))
        at += rsize
    assert at == len(data)
    feature_at, feature_size = struct.unpack_from("<QQ", raw, offset + size)
    return out, raw[feature_at:feature_at + feature_size]


def test_pids_named_reads_comm_fork_and_mmap_records(tmp_path):
    path = tmp_path / "perf.data"
    path.write_bytes(perf_file([comm(10, b"python3"), mmap2(10, b"/usr/bin/python3"), mmap(11, b"/tmp/x"),
                                fork(12, 10)]))
    assert pids_named(path) == {10, 11, 12}


def test_pids_named_of_a_file_still_being_written(tmp_path):
    """perf record leaves the data size 0 until it ends: the records then run to the end of the file."""
    path = tmp_path / "perf.data"
    raw = perf_file([comm(10, b"python3"), comm(13, b"worker")], feature=b"", data_size=0)
    path.write_bytes(raw[:-16])   # no feature table yet either
    assert pids_named(path) == {10, 13}


def test_compressed_records_are_refused(tmp_path):
    path = tmp_path / "perf.data"
    path.write_bytes(perf_file([comm(10, b"python3"), record(perf_data.RECORD_COMPRESSED, b"\0" * 16)]))
    with pytest.raises(PerfDataError, match="compressed"):
        pids_named(path)


def test_not_a_perf_data(tmp_path):
    path = tmp_path / "perf.data"
    path.write_bytes(b"\0" * 200)
    with pytest.raises(PerfDataError, match="PERFILE2"):
        pids_named(path)


def test_rename_jitdumps_renames_the_dump_of_each_process_and_moves_the_features(tmp_path):
    src, dst = tmp_path / "perf.data", tmp_path / "renamed.data"
    records = [comm(4001, b"python3"),
               mmap2(4001, b"/tmp/jit-1.dump"),           # the container's first process: renamed
               mmap2(4001, b"/usr/lib/libc.so.6"),        # not a dump
               mmap(4002, b"/tmp/jit-7.dump"),            # MMAP (not MMAP2) of a worker: renamed
               mmap2(4003, b"/tmp/jit-9.dump"),           # a process not in renames: left alone
               mmap2(4001, b"/tmp/jit-2.dump")]           # a dump of another pid than the process's: left alone
    src.write_bytes(perf_file(records))
    count = rename_jitdumps(src, dst, {4001: (1, 4001), 4002: (7, 4002)})
    assert count == 2
    renamed, feature = walk(dst.read_bytes())
    assert feature == b"FEATURE!"
    names = [r[perf_data.FILENAME_AT[k]:].split(b"\0")[0] for k, r in renamed if k in perf_data.FILENAME_AT]
    assert names == [b"/tmp/jit-4001.dump", b"/usr/lib/libc.so.6", b"/tmp/jit-4002.dump", b"/tmp/jit-9.dump",
                     b"/tmp/jit-2.dump"]
    for (kind, before), (_, after) in zip(walk(src.read_bytes())[0], renamed):
        assert after.endswith(TRAILER), "the sample_id trailer must stay at the end of the record"
        assert after[:6] == before[:6], "the record's type and misc must stay"
    assert pids_named(dst) == {4001, 4002, 4003}


def test_rename_refuses_a_recording_still_being_written(tmp_path):
    src = tmp_path / "perf.data"
    src.write_bytes(perf_file([mmap2(5, b"/tmp/jit-1.dump")], data_size=0))
    with pytest.raises(PerfDataError, match="still being written"):
        rename_jitdumps(src, tmp_path / "out.data", {5: (1, 5)})


# ---------------------------------------------------------------- malformed files (found by test_fuzz_parsers.py)
# Each case ended in another exception (MemoryError, a plain ValueError, struct.error) or a hang before the
# layout and the records were checked against the file; each now raises PerfDataError saying what does not fit.

def _edited(raw: bytes, offset: int, value: int, fmt: str = "<Q") -> bytes:
    out = bytearray(raw)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


GOOD = [comm(4001, b"python3"), mmap2(4001, b"/tmp/jit-1.dump")]
PIDS_CASES = {
    # was read from inside the header (its records the header's bytes)
    "a data section inside the header": (_edited(perf_file(GOOD), 40, 8), "inside its 104-byte header"),
    # was struct.error: a COMM record of 8 bytes last in the file, its pid read past the end
    "a record shorter than its pid": (perf_file(GOOD + [record(perf_data.RECORD_COMM, b"")], data_size=0)[:-16 - 8],
                                      "COMM record .* too short"),
}


def test_pids_named_of_a_data_section_past_the_end_of_the_file(tmp_path):
    """A declared data size of 2**60 (was MemoryError: f.read(2**60)), or the data at 2**63 (was ValueError:
    f.seek past what an offset holds): read as far as the file goes, as a recording copied in part."""
    path = tmp_path / "perf.data"
    path.write_bytes(_edited(perf_file(GOOD), 48, 1 << 60))
    assert pids_named(path) == {4001}
    path.write_bytes(_edited(perf_file(GOOD), 40, 1 << 63))
    assert pids_named(path) == set()
    with pytest.raises(PerfDataError, match="runs past the end of the file"):
        rename_jitdumps(path, tmp_path / "out.data", {4001: (1, 4001)})


@pytest.mark.parametrize("case", PIDS_CASES)
def test_pids_named_of_a_malformed_file_says_what_does_not_fit(case, tmp_path):
    raw, says = PIDS_CASES[case]
    path = tmp_path / "perf.data"
    path.write_bytes(raw)
    with pytest.raises(PerfDataError, match=says):
        pids_named(path)


def test_pids_named_reads_a_chunk_at_a_time(tmp_path):
    """Records across the chunks' edges are read whole: the chunk size changes nothing."""
    path = tmp_path / "perf.data"
    path.write_bytes(perf_file([comm(pid, b"python3") for pid in range(10, 60)] + [fork(70, 10)]))
    assert pids_named(path, chunk=40) == pids_named(path) == set(range(10, 60)) | {70}


def test_a_fifo_is_refused_without_blocking(tmp_path):
    """A FIFO where a recording is looked for (was: open() waited for a writer for ever)."""
    os_fifo = tmp_path / "perf.data"
    os.mkfifo(os_fifo)

    def fire(_signum, _frame):
        raise AssertionError("blocked opening a FIFO")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.alarm(10)
    try:
        with pytest.raises(PerfDataError, match="not a regular file"):
            pids_named(os_fifo)
        with pytest.raises(PerfDataError, match="not a regular file"):
            rename_jitdumps(os_fifo, tmp_path / "out.data", {5: (1, 5)})
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _long_dump_record() -> bytes:
    """An MMAP2 of a dump whose name (65447 bytes, its NUL the last of its padding) fills the record to 65528
    bytes: renamed jit-1 -> jit-4001, it needs 8 bytes more, 65536."""
    name = b"/" + b"d" * 65435 + b"/jit-1.dump"
    made = mmap2(4001, name)
    assert len(made) == 65528
    return made


RENAME_CASES = {
    # was struct.error: a feature bit set and the file ending with the data (no feature table)
    "a feature table past the end": (perf_file(GOOD)[:-16 - 8], "feature table"),
    # was struct.error packing the moved offset (2**64 - 1 + the bytes the renames add)
    "a feature at 2**64 - 1": (_edited(perf_file(GOOD), 104 + sum(map(len, GOOD)), (1 << 64) - 1),
                               "feature section 0"),
    # was struct.error: an MMAP2 record of 10 bytes, its pid read past it
    "an mmap record shorter than its pid": (perf_file([record(perf_data.RECORD_MMAP2, b"\x01\x02")] + GOOD),
                                            "MMAP2 record .* too short"),
    # was struct.error: the renamed record 65536 bytes, more than its u16 size holds
    "a renamed record past 64 KiB": (perf_file([_long_dump_record()]), "more than a record holds"),
}


@pytest.mark.parametrize("case", RENAME_CASES)
def test_rename_of_a_malformed_file_says_what_does_not_fit(case, tmp_path):
    raw, says = RENAME_CASES[case]
    src, dst = tmp_path / "perf.data", tmp_path / "renamed.data"
    src.write_bytes(raw)
    with pytest.raises(PerfDataError, match=says):
        rename_jitdumps(src, dst, {4001: (1, 4001)})
    assert not dst.exists()


def arch_file(arch: bytes = b"riscv64", room: int = 64, other_features: bool = True) -> bytes:
    """A perf.data with a HOSTNAME (bit 3) and an ARCH (bit 6) feature after its records, as perf writes them:
    {u32 length, the NUL-padded string}."""
    data = b"".join(GOOD)
    data_offset = 104
    bits = (1 << 3) * other_features | 1 << perf_data.FEATURE_ARCH
    sections = ([b"\x08\0\0\0node\0\0\0\0"] if other_features else []) + [struct.pack("<I", room) + arch.ljust(room, b"\0")]
    table_at = data_offset + len(data)
    at = table_at + 16 * len(sections)
    table = b""
    for section in sections:
        table += struct.pack("<QQ", at, len(section))
        at += len(section)
    header = struct.pack("<8sQQQQQQQQ4Q", b"PERFILE2", 104, 136, data_offset, 0, data_offset, len(data), 0, 0,
                         bits, 0, 0, 0)
    return header + data + table + b"".join(sections)


def test_set_arch_rewrites_the_arch_feature_in_place(tmp_path):
    path = tmp_path / "perf.data"
    path.write_bytes(arch_file())
    assert perf_data.set_arch(path, "riscv") == "riscv64"
    raw = path.read_bytes()
    assert len(raw) == len(arch_file())
    assert raw.endswith(struct.pack("<I", 64) + b"riscv".ljust(64, b"\0"))
    assert raw.replace(b"riscv\0\0", b"riscv64") == arch_file()   # nothing else changed
    assert perf_data.set_arch(path, "riscv") == "riscv"


@pytest.mark.parametrize("raw, name, says", [
    (arch_file(room=8), "riscv64x", "does not fit"),
    (arch_file(other_features=False)[:-30], "riscv", "ARCH section"),
    (perf_file(GOOD), "riscv", "records no arch"),
    (arch_file(), "", "not an arch name"),
])
def test_set_arch_of_a_file_it_cannot_change_says_why_and_leaves_it(tmp_path, raw, name, says):
    path = tmp_path / "perf.data"
    path.write_bytes(raw)
    with pytest.raises(PerfDataError, match=says):
        perf_data.set_arch(path, name)
    assert path.read_bytes() == raw


def test_set_arch_standalone_as_the_guest_runs_it(tmp_path, capsys):
    path = tmp_path / "perf.data"
    path.write_bytes(arch_file())
    assert perf_data.main(["set-arch", str(path), "riscv"]) == 0
    assert "arch riscv64 -> riscv" in capsys.readouterr().out
    assert perf_data.main(["set-arch", str(tmp_path / "missing.data"), "riscv"]) == 1
    assert perf_data.main(["set-arch"]) == 2


def test_set_arch_of_a_real_recording_is_what_perf_reads(tmp_path):
    """perf's own header dump of a recording made here shows the new name."""
    import shutil
    import subprocess
    if shutil.which("perf") is None:
        pytest.skip("no perf here")
    path = tmp_path / "perf.data"
    made = subprocess.run(["perf", "record", "-q", "-e", "cpu-clock", "-o", str(path), "--", "true"],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"perf record cannot record here: {made.stderr.strip()[-200:]}")
    old = perf_data.set_arch(path, "riscv")
    header = subprocess.run(["perf", "report", "--header-only", "-i", str(path)], capture_output=True, text=True)
    assert "# arch : riscv\n" in header.stdout and old in os.uname().machine, header.stdout[-2000:]

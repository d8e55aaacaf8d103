"""container_files: the Keeper copies the perf maps and jitdumps of a pid namespace's processes as they grow,
under their host pids, whole lines and whole records only (no Docker: the host's own pid namespace, and real
child processes that write such files in /tmp and exit; conformance/test_outside_recording.py keeps the files
of a real container with real perf)."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cpython_perf.record import container_files, procfs
from cpython_perf.record.container_files import Keeper, Kept, rewrite_jitdump

JITDUMP_HEADER = struct.pack("<IIIIIIQQ", container_files.JITDUMP_MAGIC, 1, 40, 62, 0, 1, 0, 0)


def code_load(pid: int, name: bytes, index: int) -> bytes:
    body = struct.pack("<IIQQQQ", pid, pid + 1, 0x1000 * index, 0x1000 * index, 16, index) + name + b"\0" + b"\xcc" * 16
    return struct.pack("<IIQ", container_files.JIT_CODE_LOAD, 16 + len(body), 1000 + index) + body


def unwinding_info() -> bytes:
    body = struct.pack("<QQQ", 8, 8, 8) + b"\0" * 8
    return struct.pack("<IIQ", 4, 16 + len(body), 5) + body


def test_rewrite_jitdump_sets_the_pids_and_keeps_a_cut_record_for_later():
    dump = JITDUMP_HEADER + code_load(1, b"py::foo:/src/x.py", 1) + unwinding_info() + code_load(1, b"py::bar", 2)
    cut = len(dump) - 5
    out, used = rewrite_jitdump(dump[:cut], 0, 4242)
    assert used == len(JITDUMP_HEADER) + len(code_load(1, b"py::foo:/src/x.py", 1)) + len(unwinding_info())
    assert struct.unpack_from("<I", out, container_files.JITDUMP_HEADER_PID)[0] == 4242
    assert struct.unpack_from("<II", out, 40 + 16)[0] == 4242
    assert struct.unpack_from("<II", out, 40 + 16)[1] == 4242     # the tid: perf names the code by pid
    rest, used_rest = rewrite_jitdump(dump[used:], used, 4242)
    assert used + used_rest == len(dump)
    assert len(out) + len(rest) == len(dump)
    assert b"py::bar" in rest and struct.unpack_from("<I", rest, 16)[0] == 4242


def test_a_header_cut_short_waits():
    assert rewrite_jitdump(JITDUMP_HEADER[:30], 0, 7) == (b"", 0)


def test_kept_map_takes_whole_lines_and_starts_again_when_cut_back(tmp_path):
    kept = Kept("perf-1.map", tmp_path / "perf-99.map", False, 99)
    kept.take(b"7f00 10 py::a:x.py\n7f10 10 py::b")
    assert (tmp_path / "perf-99.map").read_bytes() == b"7f00 10 py::a:x.py\n"
    kept.take(b"7f10 10 py::b:x.py\n")
    assert kept.taken == len(b"7f00 10 py::a:x.py\n7f10 10 py::b:x.py\n")
    assert oct((tmp_path / "perf-99.map").stat().st_mode & 0o777) == oct(0o600)
    kept.restart()
    kept.take(b"7f20 10 py::c:x.py\n")
    assert (tmp_path / "perf-99.map").read_bytes() == b"7f20 10 py::c:x.py\n"


WRITER = r"""
import os, struct, sys, time
pid = os.getpid()
header, loads, seconds = bytes.fromhex(sys.argv[1]), [bytes.fromhex(x) for x in sys.argv[2].split(",")], float(sys.argv[3])
with open(f"/tmp/perf-{pid}.map", "w") as m, open(f"/tmp/jit-{pid}.dump", "wb") as d:
    d.write(header); d.flush()
    for i, load in enumerate(loads):
        m.write(f"7f{i:04x} 10 py::f{i}:/x.py\n"); m.flush()
        d.write(load); d.flush()
        time.sleep(seconds / len(loads))
print(pid, flush=True)
"""


def run_writer(seconds: float, records: int = 4) -> tuple[int, list[Path]]:
    """A child process that writes a map and a jitdump (records naming pid 1, as in a container) over
    `seconds` and exits: its pid and its two files (the caller removes them)."""
    loads = [code_load(1, f"py::f{i}".encode(), i) for i in range(records)]
    proc = subprocess.run([sys.executable, "-c", WRITER, JITDUMP_HEADER.hex(), ",".join(x.hex() for x in loads),
                           str(seconds)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    pid = int(proc.stdout)
    return pid, [Path(f"/tmp/perf-{pid}.map"), Path(f"/tmp/jit-{pid}.dump")]


@pytest.mark.parametrize("seconds", (1.0, 0.1))
def test_keeper_keeps_the_files_of_processes_that_exited(tmp_path, seconds):
    """The host's own pid namespace stands for a container's: a process that lives one second, and one that
    lives a tenth of one, leave their map and dump in /tmp; the Keeper has them under their pid, the dump's
    records naming that pid instead of 1."""
    keeper = Keeper(os.getpid(), tmp_path / "kept", interval=0.01, copy_every=0.02).start()
    files = []
    try:
        pid, files = run_writer(seconds)
        summary = keeper.stop()
        map_bytes, dump_bytes = files[0].read_bytes(), files[1].read_bytes()
    finally:
        keeper.stop()
        for path in files:
            path.unlink(missing_ok=True)
    assert pid in keeper.namespace.known, "the Keeper did not see the process"
    assert (tmp_path / "kept" / f"perf-{pid}.map").read_bytes() == map_bytes
    kept_dump = (tmp_path / "kept" / f"jit-{pid}.dump").read_bytes()
    assert len(kept_dump) == len(dump_bytes)
    assert kept_dump == rewrite_jitdump(dump_bytes, 0, pid)[0]
    assert pid in summary.maps and pid in summary.dumps
    assert keeper.renames()[pid] == (pid, pid)


def test_namespace_knows_processes_after_they_exit():
    namespace = procfs.Namespace(os.getpid())
    namespace.scan()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    deadline = time.monotonic() + 5
    while child.pid not in namespace.known and time.monotonic() < deadline:
        namespace.scan()
        time.sleep(0.01)
    child.wait()
    namespace.scan()
    found = namespace.known[child.pid]
    assert found.ns_pid == child.pid       # the host's own namespace: the same pid
    assert not procfs.alive(found)
    assert namespace.by_ns_pid(child.pid) == found


def test_mapped_objects_of_this_process():
    objects = container_files.mapped_objects(os.getpid())
    assert os.path.realpath(sys.executable) in objects or any("python" in o for o in objects)
    assert all(o.startswith("/") for o in objects)

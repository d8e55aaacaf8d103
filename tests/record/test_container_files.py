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


# -- hostile files: a child process chrooted into a directory stands for a container (its /proc/PID/root is that
# directory, as a container's is its root), and plants in its /tmp what a hostile workload would

HOSTILE = r"""
import os, sys, time
root, plant = sys.argv[1], sys.argv[2]
os.chroot(root)
os.chdir("/")
pid = os.getpid()
if plant == "link":          # its map a link to a path that exists only outside its root
    os.symlink(sys.argv[3], f"/tmp/perf-{pid}.map")
elif plant == "fifo":        # a FIFO: an open for reading blocks until a writer comes, which never does
    os.mkfifo(f"/tmp/perf-{pid}.map")
elif plant == "tmp-link":    # its whole /tmp a link to a directory outside
    os.rmdir("/tmp")
    os.symlink(sys.argv[3], "/tmp")
elif plant == "dump-link":   # a jitdump link, to choose the recording's mode for every process
    os.symlink(sys.argv[3], f"/tmp/jit-{pid}.dump")
elif plant == "long-line":   # a map whose one line never ends
    with open(f"/tmp/perf-{pid}.map", "wb") as f:
        f.truncate(int(sys.argv[3]))
elif plant == "mapped-link": # /usr/lib a link out of the root, and a mapped file read through it
    pass
print(pid, flush=True)
time.sleep(float(sys.argv[4]) if len(sys.argv) > 4 else 30)
"""

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="a chrooted child (standing for a container) needs root")


def hostile_child(root: Path, plant: str, arg: str = "", seconds: float = 30):
    (root / "tmp").mkdir(parents=True, exist_ok=True)
    child = subprocess.Popen([sys.executable, "-c", HOSTILE, str(root), plant, arg, str(seconds)],
                             stdout=subprocess.PIPE, text=True)
    pid = int(child.stdout.readline())
    return child, pid


def keep_once(child_pid: int, dest: Path, timeout: float = 20) -> Keeper:
    """A Keeper over the host's pid namespace (the chrooted child among its processes), one copy, in a thread
    that must end within timeout (a read that blocks fails the test instead of hanging it)."""
    import threading

    keeper = Keeper(os.getpid(), dest, objects=dest.parent / "root", interval=0.01, copy_every=0.02)
    done = threading.Event()

    def copy():
        keeper.namespace.scan()
        keeper.copy_all()
        done.set()

    threading.Thread(target=copy, daemon=True).start()
    assert done.wait(timeout), "the Keeper blocked on a planted file"
    assert child_pid in keeper.namespace.known
    return keeper


@needs_root
def test_a_map_linked_to_a_file_outside_the_root_is_refused(tmp_path):
    secret = tmp_path / "host-only-secret"
    secret.write_text("7f00 10 host secret\n")
    secret.chmod(0o600)
    child, pid = hostile_child(tmp_path / "container", "link", str(secret))
    try:
        keeper = keep_once(pid, tmp_path / "out" / "tmp")
    finally:
        child.kill()
        child.wait()
    copied = b"".join(p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert b"host secret" not in copied, "the host file was copied as the process's perf map"
    summary = keeper.summary()
    assert pid not in summary.maps
    assert any(f"perf-{pid}.map" in line and "link" in line for line in summary.refused), summary.refused


@needs_root
def test_a_fifo_as_a_map_neither_blocks_nor_is_read(tmp_path):
    child, pid = hostile_child(tmp_path / "container", "fifo")
    try:
        keeper = keep_once(pid, tmp_path / "out" / "tmp", timeout=10)
    finally:
        child.kill()
        child.wait()
    assert any(f"perf-{pid}.map" in line and "FIFO" in line for line in keeper.summary().refused)


@needs_root
def test_a_tmp_linked_out_of_the_root_resolves_inside_it(tmp_path):
    """The container's /tmp a link to an absolute path: resolved in the container (where it leads nowhere),
    not on the host, where a directory of that name holds a map under the child's pid."""
    outside_dir = tmp_path / "host-tmp"
    outside_dir.mkdir()
    child, pid = hostile_child(tmp_path / "container", "tmp-link", str(outside_dir), seconds=30)
    try:
        (outside_dir / f"perf-{pid}.map").write_text("7f00 10 host file\n")
        keeper = keep_once(pid, tmp_path / "out" / "tmp")
    finally:
        child.kill()
        child.wait()
    assert pid not in keeper.summary().maps
    assert not (tmp_path / "out" / "tmp" / f"perf-{pid}.map").exists()


@needs_root
def test_a_planted_dump_does_not_choose_the_mode(tmp_path):
    """A jitdump name planted by a process that does not run -X perf_jit says nothing of its mode; the mode comes
    from what it maps and was started with."""
    child, pid = hostile_child(tmp_path / "container", "dump-link", "/dev/zero")
    try:
        process = procfs.identify(pid)
        assert container_files.process_mode(process) is None
    finally:
        child.kill()
        child.wait()


def test_mode_of_a_process_started_with_perf_jit(tmp_path):
    """-X perf_jit maps the process's own dump (a real interpreter: sys.executable, if it offers perf_jit)."""
    child = subprocess.Popen([sys.executable, "-X", "perf_jit", "-c", "import time; print(1, flush=True); "
                              "time.sleep(30)"], stdout=subprocess.PIPE, text=True)
    try:
        child.stdout.readline()
        assert container_files.process_mode(procfs.identify(child.pid)) == "perf_jit"
    finally:
        child.kill()
        child.wait()
        Path(f"/tmp/jit-{child.pid}.dump").unlink(missing_ok=True)
    plain = subprocess.Popen([sys.executable, "-c", "import time; print(1, flush=True); time.sleep(30)"],
                             stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPERFSUPPORT": "1"})
    try:
        plain.stdout.readline()
        assert container_files.process_mode(procfs.identify(plain.pid)) == "perf"
    finally:
        plain.kill()
        plain.wait()
        Path(f"/tmp/perf-{plain.pid}.map").unlink(missing_ok=True)


@needs_root
def test_a_map_line_without_end_is_refused_not_read_for_ever(tmp_path):
    """A sparse map of 64 MiB with no newline: refused after one chunk, in bounded time and memory."""
    child, pid = hostile_child(tmp_path / "container", "long-line", str(64 << 20))
    try:
        keeper = keep_once(pid, tmp_path / "out" / "tmp", timeout=20)
    finally:
        child.kill()
        child.wait()
    assert any(f"perf-{pid}.map" in line and "longer than" in line for line in keeper.summary().refused)


def test_kept_files_are_created_new_never_through_a_link(tmp_path):
    """A link planted in the output directory under the name of a file to be kept is not written through."""
    victim = tmp_path / "victim"
    victim.write_text("untouched\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "perf-99.map").symlink_to(victim)
    kept = Kept("perf-1.map", out / "perf-99.map", False, 99)
    with pytest.raises(OSError):
        kept.take(b"7f00 10 py::a:x.py\n")
    assert victim.read_text() == "untouched\n"
    assert oct(out.stat().st_mode & 0o777) == oct(0o700)

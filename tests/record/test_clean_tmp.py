"""clean_tmp: which perf maps and jitdumps go, and which stay (no Docker: a directory standing for /tmp, real
processes alive, gone, and holding a file open; conformance/test_clean_tmp.py runs it in a cell container
beside a real perf record and real -X perf workers).

Then what a container or another user can plant, each with the directories standing for what root sees: a
container's root (/proc/PID/root) whose /tmp is an absolute link to a host directory, an entry replaced between
the decision and the removal, FIFOs and links named like maps and recordings, and a /proc whose perf record's
root and output are hostile (conformance/test_hostile_clean_tmp.py does the same with real containers).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from cpython_perf.errors import DriverError
from cpython_perf.record import clean_tmp
from cpython_perf.record.clean_tmp import Recordings, decide, parse_age, pid_of, recordings, remove
from cpython_perf.record import untrusted_files
from cpython_perf.record.untrusted_files import has_openat2

from .test_perf_data import comm, perf_file

HOUR = 3600
NOTHING_RECORDED = Recordings(set(), None)


def gone_pid() -> int:
    """The pid of a process that has exited (and, checked, no process has now)."""
    for _ in range(20):
        child = subprocess.Popen([sys.executable, "-c", "pass"])
        child.wait()
        if not Path(f"/proc/{child.pid}").exists():
            return child.pid
    pytest.skip("every pid of an exited child was reused at once")


def make(directory: Path, name: str, age: float = 2 * HOUR, data: bytes = b"7f00 10 py::f:x.py\n") -> Path:
    path = directory / name
    path.write_bytes(data)
    then = time.time() - age
    os.utime(path, (then, then))
    return path


def alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


@contextlib.contextmanager
def opened(directory: Path):
    """The descriptor clean-tmp judges and removes through (open_host_dir, as --dir opens it)."""
    fd = clean_tmp.open_host_dir(str(directory))
    try:
        yield fd
    finally:
        os.close(fd)


def finishes(call, fifos: list[Path], timeout: float = 20):
    """call()'s result, which must come within timeout: if it does not (blocked opening or reading one of fifos),
    each FIFO's writing end is opened and closed, which lets it end, and the test fails."""
    result: dict = {}

    def target():
        try:
            result["value"] = call()
        except BaseException as exc:   # handed to the test's thread
            result["error"] = exc
    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        for fifo in fifos:
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(10)
        pytest.fail(f"blocked for {timeout}s on a FIFO: {', '.join(map(str, fifos))}")
    if "error" in result:
        raise result["error"]
    return result["value"]


def test_names_and_ages():
    assert pid_of("perf-123.map") == 123 and pid_of("jit-7.dump") == 7 and pid_of("jitted-42-3.so") == 42
    assert pid_of("jit-42-arena-0.so") == 42
    assert pid_of("perf-123.map.bak") is None and pid_of("perf-x.map") is None and pid_of("perf.data") is None
    assert parse_age("90") == 90 and parse_age("30m") == 1800 and parse_age("1d") == 86400 and parse_age("0") == 0
    with pytest.raises(DriverError):
        parse_age("yesterday")


def test_each_rule(tmp_path):
    dead = [gone_pid() for _ in range(6)]
    make(tmp_path, f"perf-{os.getpid()}.map")                          # its process runs: kept
    make(tmp_path, f"perf-{dead[0]}.map")                              # gone: removed
    make(tmp_path, f"jit-{dead[0]}.dump")                              # gone: removed
    make(tmp_path, f"jitted-{dead[0]}-3.so")                           # perf inject's output of a gone one: removed
    make(tmp_path, f"perf-{dead[1]}.map", age=60)                      # too recent: kept
    held = make(tmp_path, f"jit-{dead[2]}.dump")                       # open in a process: kept
    make(tmp_path, f"perf-{dead[3]}.map")                              # named by a recording: kept
    (tmp_path / f"perf-{dead[4]}.map").symlink_to(tmp_path / f"perf-{dead[0]}.map")   # a link: kept
    make(tmp_path, "notes.txt")                                        # not a perf file: not looked at
    holder = subprocess.Popen(["sleep", "60"], stdin=open(held, "rb"))
    try:
        with opened(tmp_path) as fd:
            decisions = {d.name: d for d in decide(fd, 30 * 60, False, alive, Recordings({dead[3]}, None))}
    finally:
        holder.kill()
        holder.wait()
    removed = {name for name, d in decisions.items() if d.remove}
    assert removed == {f"perf-{dead[0]}.map", f"jit-{dead[0]}.dump", f"jitted-{dead[0]}-3.so"}
    assert "is running" in decisions[f"perf-{os.getpid()}.map"].why
    assert "modified" in decisions[f"perf-{dead[1]}.map"].why
    assert f"open in process {holder.pid}" in decisions[f"jit-{dead[2]}.dump"].why
    assert "a recording names" in decisions[f"perf-{dead[3]}.map"].why
    assert "not a regular file" in decisions[f"perf-{dead[4]}.map"].why
    assert "notes.txt" not in decisions

    # A running recording that cannot be read keeps everything that would have gone.
    with opened(tmp_path) as fd:
        blocked = decide(fd, 30 * 60, False, alive, Recordings(set(), "perf record (pid 1) writes to a pipe"))
    assert not any(d.remove for d in blocked)

    with opened(tmp_path) as fd:
        assert remove(fd, list(decisions.values())) == []
    left = {p.name for p in tmp_path.iterdir()}
    assert not left & removed
    assert {f"perf-{os.getpid()}.map", f"perf-{dead[1]}.map", f"jit-{dead[2]}.dump", f"perf-{dead[3]}.map",
            f"perf-{dead[4]}.map", "notes.txt"} <= left


def test_a_file_changed_after_the_decision_is_left_alone(tmp_path):
    dead = gone_pid()
    path = make(tmp_path, f"perf-{dead}.map")
    with opened(tmp_path) as fd:
        decisions = decide(fd, 0, False, alive, NOTHING_RECORDED)
        assert [d.remove for d in decisions] == [True]
        with open(path, "ab") as f:   # a writer appended since (a pid reused by a new -X perf process)
            f.write(b"7f10 10 py::g:x.py\n")
        assert "changed since" in remove(fd, decisions)[0]
    assert path.exists()


def test_only_your_own_files_unless_all_users(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to make a file of another user")
    dead = gone_pid()
    path = make(tmp_path, f"perf-{dead}.map")
    os.chown(path, 12345, 12345)
    os.utime(path, (time.time() - 2 * HOUR,) * 2)
    with opened(tmp_path) as fd:
        mine = decide(fd, 0, False, alive, NOTHING_RECORDED)
        assert not mine[0].remove and "owned by uid 12345" in mine[0].why
        assert decide(fd, 0, True, alive, NOTHING_RECORDED)[0].remove


def test_keep_for_reads_the_pids_of_perf_data_files(tmp_path):
    (tmp_path / "rec").mkdir()
    (tmp_path / "rec" / "perf.data").write_bytes(perf_file([comm(321, b"python3")]))
    (tmp_path / "rec" / "other.data").write_bytes(perf_file([comm(654, b"python3")]))
    empty_proc = tmp_path / "proc"   # a /proc with no process in it: no perf runs
    empty_proc.mkdir()
    assert recordings([str(tmp_path / "rec")], False, empty_proc).pids == {321, 654}
    assert recordings([str(tmp_path / "rec" / "perf.data")], False, empty_proc).pids == {321}
    (tmp_path / "bad.data").write_bytes(b"not perf")
    with pytest.raises(DriverError, match="cannot tell"):
        recordings([str(tmp_path / "bad.data")], False, empty_proc)
    with pytest.raises(DriverError, match="no such file"):
        recordings([str(tmp_path / "missing.data")], False, empty_proc)


def test_dry_run_removes_nothing(tmp_path, capsys):
    dead = gone_pid()
    make(tmp_path, f"perf-{dead}.map")
    assert clean_tmp.DEFAULT_OLDER_THAN == "1d"
    code = clean_tmp.main(["--dir", str(tmp_path), "--older-than", "1h", "--dry-run"])
    said = capsys.readouterr().out
    assert (tmp_path / f"perf-{dead}.map").exists()
    if code == 0 and "would remove" in said:
        assert f"perf-{dead}.map" in said
    else:   # a perf record running on this machine (another job) stops clean-tmp: it says why
        assert "perf" in said


# -- what a container or another user plants


def rules(**given) -> dict:
    """The keyword arguments of clean / clean_container_tmp: any age, your own files, removing."""
    return {"older_than": 0, "all_users": False, "dry_run": False, **given}


def container_root(tmp_path: Path, host_dir: Path) -> Path:
    """A directory standing for /proc/PID/root of a container that ran `rm -rf /tmp && ln -s HOST_DIR /tmp`."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "tmp").symlink_to(host_dir)   # absolute: through /proc/PID/root, the host's directory of that name
    return root


@pytest.fixture
def host_dir():
    """A host directory outside /tmp (a link to one under /tmp would loop inside the container's root, whose
    /tmp is the link itself)."""
    path = Path(tempfile.mkdtemp(prefix="cpython-perf-victim-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("kernel", ["openat2", "no openat2"])
def test_a_container_tmp_linking_to_a_host_directory_resolves_inside_the_container(tmp_path, host_dir, kernel,
                                                                                   monkeypatch):
    if kernel == "no openat2":   # as before Linux 5.6: no link is followed in any component
        monkeypatch.setattr(untrusted_files, "_openat2_works", False)
    elif not has_openat2():
        pytest.skip("this kernel has no openat2 (Linux 5.6 or newer)")
    dead = gone_pid()
    host_map = make(host_dir, f"perf-{dead}.map")          # the host's: a gone pid, old, and yours
    root = container_root(tmp_path, host_dir)
    said: list[str] = []
    if not has_openat2():
        with pytest.raises(DriverError, match="symbolic link.*no openat2"):
            clean_tmp.clean_container_tmp(root, "container c's /tmp", alive=lambda pid: False, log=said.append,
                                          proc=tmp_path, **rules())
        assert host_map.exists()
        return
    # The link leads nowhere inside the container: nothing to clean, and the host's file stays.
    assert clean_tmp.clean_container_tmp(root, "container c's /tmp", alive=lambda pid: False, log=said.append,
                                         proc=tmp_path, **rules()) == 0
    assert host_map.exists(), f"the host's file was removed through the container's /tmp link: {said}"
    assert any("symbolic link" in line and "inside the container" in line and "nothing to clean" in line
               for line in said), said
    # The container's own directory of that name is what its /tmp is: its file goes, the host's stays.
    inside = root / str(host_dir).lstrip("/")
    inside.mkdir(parents=True)
    own_map = make(inside, f"perf-{dead}.map")
    said.clear()
    assert clean_tmp.clean_container_tmp(root, "container c's /tmp", alive=lambda pid: False, log=said.append,
                                         proc=tmp_path, **rules()) == 0
    assert not own_map.exists(), said
    assert host_map.exists(), f"the host's file was removed through the container's /tmp link: {said}"
    assert f"container c's /tmp: 1 of 1 files removed" in said[-1], said


def test_an_entry_replaced_between_decision_and_removal_is_left_alone(tmp_path):
    dead = gone_pid()
    path = make(tmp_path, f"perf-{dead}.map")
    judged = os.stat(path)
    with opened(tmp_path) as fd:
        decisions = decide(fd, 0, False, alive, NOTHING_RECORDED)
        assert [d.remove for d in decisions] == [True]
        # Another file renamed over it: the same name, size and modification time, another inode.
        other = make(tmp_path, "replacement", data=path.read_bytes())
        os.utime(other, ns=(judged.st_atime_ns, judged.st_mtime_ns))
        os.rename(other, path)
        assert os.stat(path).st_ino != judged.st_ino
        failures = remove(fd, decisions)
    assert path.exists(), "the file renamed over the judged one was removed"
    assert failures and "changed since" in failures[0], failures


def test_a_fifo_named_like_a_map_neither_blocks_nor_is_removed(tmp_path, capsys):
    dead = gone_pid()
    fifo = tmp_path / f"perf-{dead}.map"
    os.mkfifo(fifo)
    os.utime(fifo, (time.time() - 2 * HOUR,) * 2)
    code = finishes(lambda: clean_tmp.main(["--dir", str(tmp_path), "--older-than", "0"]), [fifo])
    said = capsys.readouterr().out
    assert fifo.exists() and code == 0, said
    assert f"keep  perf-{dead}.map" in said and "not a regular file" in said, said


def test_a_dir_that_is_a_link_is_refused(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    kept = make(real, f"perf-{gone_pid()}.map")
    (tmp_path / "link").symlink_to(real)
    args = argparse.Namespace(dir=str(tmp_path / "link"), container=None, older_than="0", dry_run=False,
                              all_users=False, keep_for=[])
    with pytest.raises(DriverError, match=r"--dir .*link: a symbolic link.*give the real path"):
        clean_tmp.run(args, log=lambda line: None, proc=tmp_path / "no-proc")
    assert kept.exists()


def test_keep_for_follows_no_planted_link_and_waits_on_no_fifo(tmp_path):
    no_proc = tmp_path / "proc"
    no_proc.mkdir()
    secret = tmp_path / "elsewhere" / "secret.data"   # a recording the planted link leads to, root's to read
    secret.parent.mkdir()
    secret.write_bytes(perf_file([comm(777, b"python3")]))
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "mine.data").write_bytes(perf_file([comm(321, b"python3")]))
    (profiles / "planted.data").symlink_to(secret)
    with pytest.raises(DriverError, match=r"planted.data: a symbolic link"):
        recordings([str(profiles)], False, no_proc)
    (profiles / "planted.data").unlink()
    os.mkfifo(profiles / "pipe.data")                  # in a directory: no recording, passed over at once
    assert finishes(lambda: recordings([str(profiles)], False, no_proc).pids, [profiles / "pipe.data"]) == {321}
    # Named by itself: a link is refused (give the real path), a FIFO is neither a recording nor waited on.
    (tmp_path / "link.data").symlink_to(secret)
    with pytest.raises(DriverError, match=r"link.data: a symbolic link.*real path"):
        recordings([str(tmp_path / "link.data")], False, no_proc)
    os.mkfifo(tmp_path / "fifo.data")
    with pytest.raises(DriverError, match=r"fifo.data: neither a perf.data"):
        finishes(lambda: recordings([str(tmp_path / "fifo.data")], False, no_proc), [tmp_path / "fifo.data"])


def fake_perf_record(proc: Path, root: Path, argv: list[str], cwd: str = "/", pid: int = 4321) -> None:
    """A /proc entry of a running `perf record` whose root is root (a directory someone else controls)."""
    entry = proc / str(pid)
    entry.mkdir(parents=True)
    (entry / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (entry / "root").symlink_to(root)
    (entry / "cwd").symlink_to(cwd)


def test_a_running_perf_records_output_is_read_inside_its_root(tmp_path):
    proc, root = tmp_path / "proc", tmp_path / "perf-root"
    (root / "out").mkdir(parents=True)
    (root / "work").mkdir()
    (root / "out" / "perf.data").write_bytes(perf_file([comm(555, b"python3")]))
    (root / "work" / "perf.data").write_bytes(perf_file([comm(556, b"python3")]))
    fake_perf_record(proc, root, ["perf", "record", "-o", "/out/perf.data", "-a"])
    fake_perf_record(proc, root, ["perf", "record", "-g"], cwd="/work", pid=4322)
    found = recordings([], False, proc)
    assert found.block is None and found.pids == {555, 556}


def test_a_running_perf_records_output_planted_as_a_link_is_not_read(tmp_path):
    host = tmp_path / "host"
    host.mkdir()
    (host / "perf.data").write_bytes(perf_file([comm(666, b"python3")]))   # the host's, which root may read
    proc, root = tmp_path / "proc", tmp_path / "perf-root"
    root.mkdir()
    (root / "perf.data").symlink_to(host / "perf.data")    # absolute: the host's, read through /proc/PID/root
    (root / "out").symlink_to(host)                         # a link in the path: resolved inside the root
    fake_perf_record(proc, root, ["perf", "record", "-o", "/perf.data"])
    fake_perf_record(proc, root, ["perf", "record", "-o", "/out/perf.data"], pid=4322)
    for pid in (4321, 4322):
        only = tmp_path / f"proc-{pid}"
        only.mkdir()
        (only / str(pid)).symlink_to(proc / str(pid))
        found = recordings([], False, only)
        assert 666 not in found.pids, f"perf record {pid}'s output was read through a link to the host's file"
        assert found.block and "cannot be read" in found.block, found.block


def test_a_running_perf_record_writing_to_a_fifo_does_not_block(tmp_path):
    proc, root = tmp_path / "proc", tmp_path / "perf-root"
    root.mkdir()
    os.mkfifo(root / "perf.data")
    fake_perf_record(proc, root, ["perf", "record", "-o", "/perf.data"])
    found = finishes(lambda: recordings([], False, proc), [root / "perf.data"])
    assert found.block and "FIFO" in found.block, found.block

"""clean_tmp: which perf maps and jitdumps go, and which stay (no Docker: a directory standing for /tmp, real
processes alive, gone, and holding a file open; conformance/test_clean_tmp.py runs it in a cell container
beside a real perf record and real -X perf workers)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cpython_perf.errors import DriverError
from cpython_perf.record import clean_tmp
from cpython_perf.record.clean_tmp import Recordings, decide, parse_age, pid_of, recordings, remove

from .test_perf_data import comm, perf_file

HOUR = 3600


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
        decisions = {d.name: d for d in decide(tmp_path, 30 * 60, False, alive, Recordings({dead[3]}, None))}
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
    blocked = decide(tmp_path, 30 * 60, False, alive, Recordings(set(), "perf record (pid 1) writes to a pipe"))
    assert not any(d.remove for d in blocked)

    assert remove(tmp_path, list(decisions.values())) == []
    left = {p.name for p in tmp_path.iterdir()}
    assert not left & removed
    assert {f"perf-{os.getpid()}.map", f"perf-{dead[1]}.map", f"jit-{dead[2]}.dump", f"perf-{dead[3]}.map",
            f"perf-{dead[4]}.map", "notes.txt"} <= left


def test_a_file_changed_after_the_decision_is_left_alone(tmp_path):
    dead = gone_pid()
    path = make(tmp_path, f"perf-{dead}.map")
    decisions = decide(tmp_path, 0, False, alive, Recordings(set(), None))
    assert [d.remove for d in decisions] == [True]
    with open(path, "ab") as f:   # a writer appended since (a pid reused by a new -X perf process)
        f.write(b"7f10 10 py::g:x.py\n")
    assert "changed since" in remove(tmp_path, decisions)[0]
    assert path.exists()


def test_only_your_own_files_unless_all_users(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root to make a file of another user")
    dead = gone_pid()
    path = make(tmp_path, f"perf-{dead}.map")
    os.chown(path, 12345, 12345)
    os.utime(path, (time.time() - 2 * HOUR,) * 2)
    mine = decide(tmp_path, 0, False, alive, Recordings(set(), None))
    assert not mine[0].remove and "owned by uid 12345" in mine[0].why
    assert decide(tmp_path, 0, True, alive, Recordings(set(), None))[0].remove


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

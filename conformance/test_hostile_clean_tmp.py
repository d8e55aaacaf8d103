"""`clean-tmp` as root on the host against containers that plant files to make it remove, read or wait on the host's.

Each test starts a container of the cell's image, as root, that plants one thing, and runs clean-tmp's own
`run()` with the arguments `python -m cpython_perf clean-tmp ...` parses; the host-side files are in a
fresh /var/tmp/cpython-perf-victim-XXXX (removed after, with the container):

- the container's /tmp is a link to that host directory's path (`rm -rf /tmp && ln -s /var/tmp/... /tmp`),
  the host directory holding an old perf-4242.map of a pid the container does not have, and the
  container's own directory of that path holding an old perf-4245.map: `clean-tmp --container ID
  --all-users --older-than 0` must resolve the link inside the container (removing the container's file)
  and leave the host's file, saying what the link is;
- the container's /tmp holds perf-4243.map, a link to an old host file of that name: neither followed nor
  removed;
- the container's /tmp holds a FIFO perf-4244.map: clean-tmp ends (within BOUND) and keeps it;
- a process of the container named `perf record -o /tmp/...` (what a hostile workload can start: clean-tmp
  reads the output of every running perf record, through /proc/<pid>/root) whose output is a FIFO, or a
  link to a host perf.data: `clean-tmp --dir` of a host directory ends, reads nothing through the link,
  and removes nothing, saying why.

clean-tmp's look at running perf processes is narrowed to the container's (a perf of another job on this host
would stop clean-tmp before it looked at what the container planted, and the test could not tell).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from cpython_perf.record import clean_tmp, perf_data

from conftest import image_of, not_applicable, python_of

pytestmark = [pytest.mark.also_external]
BOUND = 60    # seconds clean-tmp may take (a blocked open of a FIFO would never end)
OLD = 2 * 86400


@pytest.fixture
def victim():
    """The host directory the containers aim at: outside /tmp, on the host only."""
    path = Path(tempfile.mkdtemp(prefix="cpython-perf-victim-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def old_file(path: Path, data: bytes = b"7f0000001000 10 py::f:/app.py\n") -> Path:
    path.write_bytes(data)
    then = time.time() - OLD
    os.utime(path, (then, then))
    return path


def gone_pid() -> int:
    """A host pid no process has now (that of a child that has exited)."""
    for _ in range(20):
        child = subprocess.Popen([sys.executable, "-c", "pass"])
        child.wait()
        if not Path(f"/proc/{child.pid}").exists():
            return child.pid
    pytest.skip("every pid of an exited child was reused at once")


def perf_data_naming(pid: int) -> bytes:
    """A perf.data (perf_data's layout) with one COMM record of pid: what clean-tmp reads of a recording."""
    name = b"python3".ljust(8, b"\0")
    body = struct.pack("<II", pid, pid) + name
    data = struct.pack("<IHH", perf_data.RECORD_COMM, 0, 8 + len(body)) + body
    return perf_data.HEADER.pack(perf_data.MAGIC, 104, 136, 104, 0, 104, len(data), 0, 0, 0, 0, 0, 0) + data


def start(docker_client, cell, shell: str, **environment):
    """A container of the cell's image running shell as root, once it has said `ready`; its host pid."""
    container = docker_client.containers.run(image_of(cell, docker_client), ["sh", "-c", shell], detach=True,
                                             user="root", environment={"PY": python_of(cell), **environment})
    deadline = time.monotonic() + 60
    while b"ready" not in container.logs():
        container.reload()
        if container.status != "running" or time.monotonic() > deadline:
            said = container.logs().decode(errors="replace")[-1500:]
            container.remove(force=True)
            pytest.fail(f"the container did not get ready: {said}")
        time.sleep(0.1)
    container.reload()
    return container, int(container.attrs["State"]["Pid"])


def arguments(*argv: str) -> argparse.Namespace:
    """The arguments `python -m cpython_perf clean-tmp ARGV` runs with."""
    parser = argparse.ArgumentParser()
    clean_tmp.add_arguments(parser)
    return parser.parse_args(list(argv))


def clean(args, fifos: list[str], **run) -> tuple[int, list[str]]:
    """clean_tmp.run(args) -> (exit status, what it said), which must end within BOUND: if it does not, each of
    fifos (host paths) is opened for writing and closed, which lets it end, and the test fails."""
    said: list[str] = []
    result: dict = {}

    def target():
        try:
            result["code"] = clean_tmp.run(args, log=said.append, **run)
        except BaseException as exc:   # handed to the test's thread
            result["error"] = exc
    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(BOUND)
    if worker.is_alive():
        for fifo in fifos:
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(10)
        pytest.fail(f"clean-tmp did not end within {BOUND} s: blocked on a planted FIFO ({said})")
    print("\n".join(said))
    if "error" in result:
        raise result["error"]
    return result["code"], said


def only_perf_of(monkeypatch, pid: int | None) -> None:
    """clean-tmp sees the container's perf record (pid), or none, not another job's perf on this host."""
    everything = clean_tmp.perf_processes
    monkeypatch.setattr(clean_tmp, "perf_processes",
                        lambda proc=clean_tmp.procfs.PROC: [(p, argv) for p, argv in everything(proc) if p == pid])


def test_a_container_tmp_linked_to_a_host_directory_cleans_the_container_own(cell, docker_client, victim,
                                                                                monkeypatch):
    host_map = old_file(victim / "perf-4242.map")
    shell = (f'mkdir -p {victim} && printf "7f 1 f\\n" > {victim}/perf-4245.map '
             f'&& touch -t 200001010000 {victim}/perf-4245.map '
             f'&& rm -rf /tmp && ln -s {victim} /tmp && echo ready && sleep 300')
    container, pid = start(docker_client, cell, shell)
    try:
        only_perf_of(monkeypatch, None)
        code, said = clean(arguments("--container", container.id, "--all-users", "--older-than", "0"), [],
                           client=docker_client)
        own_map_left = os.path.lexists(f"/proc/{pid}/root{victim}/perf-4245.map")
    finally:
        container.remove(force=True)
    assert host_map.exists(), f"the host's {host_map} was removed through the container's /tmp link: {said}"
    assert code == 0, said
    assert any("a symbolic link to" in line and str(victim) in line and "resolved inside the container" in line
               for line in said), f"clean-tmp did not say what the container's /tmp is: {said}"
    assert any(line.startswith("remove  perf-4245.map") for line in said), said
    assert not own_map_left, f"the container's own perf-4245.map (its /tmp's) was not removed: {said}"


def test_a_link_named_like_a_map_is_neither_followed_nor_removed(cell, docker_client, victim, monkeypatch):
    host_map = old_file(victim / "perf-4243.map")
    shell = f"ln -s {host_map} /tmp/perf-4243.map && echo ready && sleep 300"
    container, pid = start(docker_client, cell, shell)
    try:
        only_perf_of(monkeypatch, None)
        code, said = clean(arguments("--container", container.id, "--all-users", "--older-than", "0"), [],
                           client=docker_client)
        link_left = stat.S_ISLNK(os.lstat(f"/proc/{pid}/root/tmp/perf-4243.map").st_mode)
    finally:
        container.remove(force=True)
    assert host_map.exists() and host_map.read_bytes().startswith(b"7f0000001000"), said
    assert code == 0 and link_left, said
    assert any(line.startswith("keep  perf-4243.map") and "not a regular file" in line for line in said), said


def test_a_fifo_named_like_a_map_does_not_block(cell, docker_client, monkeypatch):
    shell = "mkfifo /tmp/perf-4244.map && touch -t 200001010000 /tmp/perf-4244.map && echo ready && sleep 300"
    container, pid = start(docker_client, cell, shell)
    fifo = f"/proc/{pid}/root/tmp/perf-4244.map"
    try:
        only_perf_of(monkeypatch, None)
        code, said = clean(arguments("--container", container.id, "--all-users", "--older-than", "0"), [fifo],
                           client=docker_client)
        fifo_left = stat.S_ISFIFO(os.lstat(fifo).st_mode)
    finally:
        container.remove(force=True)
    assert code == 0 and fifo_left, said
    assert any(line.startswith("keep  perf-4244.map") and "not a regular file" in line for line in said), said


# A process of the container that /proc shows as `perf record -o OUTPUT` (Python running the script `record`)
FAKE_PERF = r"""
mkdir /fake && cd /fake && printf 'import time\ntime.sleep(300)\n' > record
echo ready
exec "$PY" -c 'import os, sys; os.execv(sys.executable, ["perf", "record", "-o", sys.argv[1]])' "$OUTPUT"
"""


def fake_perf_applies(cell) -> None:
    if cell.foreign:
        not_applicable("foreign", f"{cell.name}: under qemu-user, /proc shows the emulator, not `perf record`")


def wait_for_perf(pid: int) -> None:
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2] != [b"perf", b"record"]:
        assert time.monotonic() < deadline, "the container's `perf record` did not start"
        time.sleep(0.1)


def test_a_container_perf_record_writing_to_a_fifo_does_not_block(cell, docker_client, tmp_path, monkeypatch):
    fake_perf_applies(cell)
    cleaned = tmp_path / "clean"
    cleaned.mkdir()
    dead = gone_pid()
    kept = old_file(cleaned / f"perf-{dead}.map")
    container, pid = start(docker_client, cell, "mkfifo /tmp/out.fifo\n" + FAKE_PERF, OUTPUT="/tmp/out.fifo")
    try:
        wait_for_perf(pid)
        only_perf_of(monkeypatch, pid)
        code, said = clean(arguments("--dir", str(cleaned), "--older-than", "0"), [f"/proc/{pid}/root/tmp/out.fifo"])
    finally:
        container.remove(force=True)
    assert code == 0 and kept.exists(), said
    assert any(line.startswith(f"keep  perf-{dead}.map") and "cannot be read" in line and "FIFO" in line
               for line in said), f"clean-tmp did not say that the running perf record's output is a FIFO: {said}"


def test_a_container_perf_record_output_linked_to_a_host_file_is_not_read(cell, docker_client, victim, tmp_path,
                                                                          monkeypatch):
    fake_perf_applies(cell)
    cleaned = tmp_path / "clean"
    cleaned.mkdir()
    dead = gone_pid()
    kept = old_file(cleaned / f"perf-{dead}.map")
    host_data = victim / "perf.data"
    host_data.write_bytes(perf_data_naming(dead))   # the host's recording: root may read it, the container not
    host_data.chmod(0o600)
    container, pid = start(docker_client, cell, f"ln -s {host_data} /tmp/perf.data\n" + FAKE_PERF,
                           OUTPUT="/tmp/perf.data")
    try:
        wait_for_perf(pid)
        only_perf_of(monkeypatch, pid)
        code, said = clean(arguments("--dir", str(cleaned), "--older-than", "0"), [])
    finally:
        container.remove(force=True)
    assert code == 0 and kept.exists(), said
    decision = next(line for line in said if line.startswith(f"keep  perf-{dead}.map"))
    assert "a recording names" not in decision, (
        f"clean-tmp read the host's {host_data} through the container's link /tmp/perf.data: {decision}")
    assert "cannot be read" in decision and "symbolic link" in decision, decision

"""`record --container` against a container that plants files to subvert it, beside a program it must still record.

The container runs, from a shell, three Python processes that do not run `-X perf` and plant in the
container's /tmp what a hostile workload would, then `exec`s the seed chain with `-X perf` as its first
process:

- the first plants its `perf-<pid>.map` as a link to an absolute path that exists only on the host (a 0600
  file there holding a marker): read through /proc/<pid>/root, such a link resolves against the host's root;
- the second plants its `perf-<pid>.map` as a FIFO, whose open and read never return;
- the third plants `jit-<pid>.dump` (a link to /dev/zero), the name that used to make the whole container
  recorded as perf_jit.

`python -m cpython_perf record --container` (cpython_perf.record.outside, perf in the tools image) records
them all for a few seconds.  Must hold: it ends (within a bound, with perf.data and its script); no output
file holds the host file's marker; the FIFO and the link are each refused with one line saying why; the mode
is perf (what the processes run, not a planted name); the chain program's samples carry its whole chain as
in every recording of the suite; every kept file is 0600 and every directory of the output 0700.
"""

from __future__ import annotations

import argparse
import os
import stat
import tempfile
import threading
import time
from pathlib import Path

import pytest

from cpython_perf.record import outside
from cpython_perf.record.perf_samples import chain_report, parse_perf_script, py_symbol

from conftest import MATRIX, SCRIPTS, assert_chain, image_of, not_applicable, python_of

pytestmark = [pytest.mark.needs_perf, pytest.mark.also_external]
PROGRAM = "/src/outside_workers.py"
CHAIN = [py_symbol(f, PROGRAM) for f in ("foo", "bar", "baz", "<module>")]
MARKER = b"HOST-ONLY-SECRET-3f9c"
RECORD_SECONDS = 5
BOUND = 240   # seconds the whole recording may take (a blocked read would never end)

SHELL = r"""
set -eu
sleeper() { "$PY" -c 'import time; time.sleep(600)' & }
sleeper; LINK=$!
ln -s "$SECRET" /tmp/perf-$LINK.map
sleeper; FIFO=$!
mkfifo /tmp/perf-$FIFO.map
sleeper; DUMP=$!
ln -s /dev/zero /tmp/jit-$DUMP.dump
echo "hostile $LINK $FIFO $DUMP"
exec "$PY" -X perf /src/outside_workers.py /gate/go 4 0
"""


def test_hostile_files_neither_leak_nor_stall_nor_choose_the_mode(cell, docker_client, tmp_path, record_property):
    if cell.foreign:
        not_applicable("foreign", f"{cell.name}: perf cannot sample under qemu-user")
    if cell.vanilla:
        not_applicable("vanilla", f"{cell.name} is a vanilla twin: its chains are not checked")
    if "perf" not in cell.backends:
        not_applicable("mode:perf", f"{cell.name}'s interpreter does not offer perf")
    image = image_of(cell, docker_client)
    secret_dir = Path(tempfile.mkdtemp(prefix="cpython-perf-hostile-", dir="/var/tmp"))
    secret = secret_dir / "secret"
    secret.write_bytes(b"7f0000000000 100 " + MARKER + b"\n")
    secret.chmod(0o600)
    gate = tmp_path / "gate"
    gate.mkdir()
    gate.chmod(0o777)
    container = docker_client.containers.run(
        image, ["sh", "-c", SHELL], detach=True,
        environment={"PY": python_of(cell), "SECRET": str(secret)},
        volumes={str(SCRIPTS): {"bind": "/src", "mode": "ro"}, str(gate): {"bind": "/gate", "mode": "rw"}})
    out = tmp_path / "out"
    lines: list[str] = []
    try:
        deadline = time.monotonic() + 60
        while b"main " not in container.logs():
            container.reload()
            assert container.status == "running" and time.monotonic() < deadline, (
                f"the program did not start: {container.logs().decode(errors='replace')[-1500:]}")
            time.sleep(0.1)
        said = container.logs().decode(errors="replace").split()
        link_pid, fifo_pid, dump_pid = (int(x) for x in said[said.index("hostile") + 1:said.index("hostile") + 4])
        started = threading.Event()

        def open_gate():
            if started.wait(300):
                (gate / "go").touch()

        threading.Thread(target=open_gate, daemon=True).start()
        args = argparse.Namespace(container=container.id, pid=[], mode=None, seconds=RECORD_SECONDS, out=str(out),
                                  frequency=999, perf_image=None, host_perf=False, perf_args=[])
        failure: list[BaseException] = []

        def record():
            try:
                outside.run(MATRIX, args, log=lines.append, client=docker_client, started=started)
            except BaseException as exc:  # noqa: BLE001 - reported below
                failure.append(exc)

        began = time.monotonic()
        worker = threading.Thread(target=record, daemon=True)
        worker.start()
        worker.join(BOUND)
        record_property("record_seconds", round(time.monotonic() - began, 1))
        print("\n".join(lines))
        assert not worker.is_alive(), f"record --container did not end within {BOUND} s (a planted file stalled it)"
        assert not failure, f"record --container failed: {failure[0]!r}"
    finally:
        container.remove(force=True)
        secret.unlink()
        secret_dir.rmdir()

    leaked = [p for p in out.rglob("*") if p.is_file() and not p.is_symlink() and MARKER in p.read_bytes()]
    assert not leaked, f"the host-only file's content was copied into the output: {leaked}"
    refused = [line for line in lines if line.startswith("refused:")]
    record_property("refused", refused)
    assert any(f"perf-{link_pid}.map" in line and "link" in line for line in refused), (
        f"the planted link was not refused with its reason: {refused}")
    assert any(f"perf-{fifo_pid}.map" in line and "FIFO" in line for line in refused), (
        f"the planted FIFO was not refused with its reason: {refused}")
    header = next(line for line in lines if line.startswith("record: container"))
    assert "mode perf;" in header, f"the planted jit-{dump_pid}.dump chose the mode: {header}"

    for path in [out / "tmp", out / outside.OBJECTS, *(out / outside.OBJECTS).rglob("*"), *(out / "tmp").iterdir()]:
        if path.is_symlink():
            continue
        mode = stat.S_IMODE(os.stat(path).st_mode)
        want = 0o700 if path.is_dir() else 0o600
        assert mode & 0o077 == 0, f"{path} is mode {oct(mode)}: readable by others (want {oct(want)})"

    samples = parse_perf_script((out / outside.SCRIPT_TEXT).read_text(errors="replace"))
    main_pid = max((s.pid for s in samples if s.python_frames()), key=lambda pid: sum(
        1 for s in samples if s.pid == pid), default=None)
    assert main_pid is not None, "no sample of the chain program has a Python frame"
    assert_chain(chain_report([s for s in samples if s.pid == main_pid], CHAIN), "perf",
                 "perf, the chain program beside the hostile ones", record_property)

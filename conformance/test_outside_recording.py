"""perf outside a container records its Python processes, and names their frames after they have exited.

A cell container runs `python3 -X MODE outside_workers.py`: the howto's chain in the container's first
process, then two short-lived workers (one second each, one after the other).  `python -m cpython_perf
record --container` (cpython_perf.record.outside) records them from outside: perf in the tools image
with the host's pid namespace, the container's processes by their host pids, their perf maps or
jitdumps kept as they appear.  The container is then removed, and `perf script` of the kept recording
must show, per sample (perf_samples), the whole chain: py::foo under py::bar under py::baz under
py::<module> in the first process, under py::work in each worker -- in at least
perf_samples.min_chain_fraction(mode) of the samples inside foo, as every recording of the suite.
For -X perf, the same recording read without the kept files names no Python frame: that is the
failure the command exists for.
"""

from __future__ import annotations

import argparse
import threading
import time
from pathlib import Path

import pytest

from cpython_perf.record import jit_inject, outside
from cpython_perf.record.perf_samples import PERF_SCRIPT_FIELDS, chain_report, parse_perf_script, py_symbol

from conftest import MATRIX, SCRIPTS, assert_chain, image_of, not_applicable, python_of, xfail_if_carried

# skipped on build-only cells; also run on an --image/--python target, e.g. a deb lane's installed package
pytestmark = [pytest.mark.needs_perf, pytest.mark.also_external]
PROGRAM = "/src/outside_workers.py"
SECONDS, WORKERS = 1.0, 2   # workers that live one second each
CHAIN = [py_symbol(f, PROGRAM) for f in ("foo", "bar", "baz", "<module>")]
WORKER_CHAIN = [py_symbol(f, PROGRAM) for f in ("foo", "bar", "baz", "work")]


def start_program(client, image: str, mode: str, gate: Path, python: str = "python3"):
    gate.mkdir()
    gate.chmod(0o777)
    return client.containers.run(
        image, [python, "-X", mode, PROGRAM, "/gate/go", str(SECONDS), str(WORKERS)], detach=True,
        volumes={str(SCRIPTS): {"bind": "/src", "mode": "ro"}, str(gate): {"bind": "/gate", "mode": "rw"}})


@pytest.mark.parametrize("mode", ("perf", "perf_jit"))
def test_recorded_from_outside_read_after_exit(cell, mode, docker_client, tmp_path, record_property, target_facts):
    if cell.foreign:
        not_applicable("foreign", f"{cell.name}: perf cannot sample under qemu-user")
    if cell.vanilla:
        not_applicable("vanilla", f"{cell.name} is a vanilla twin: its chains are not checked")
    if mode not in cell.backends:
        not_applicable(f"mode:{mode}", f"{cell.name}'s interpreter does not offer {mode}")
    image = image_of(cell, docker_client)
    container = start_program(docker_client, image, mode, tmp_path / "gate", python_of(cell))
    deadline = time.monotonic() + 60
    while b"main " not in container.logs():   # started: its jitdump or map is there for record to see
        container.reload()
        assert container.status == "running" and time.monotonic() < deadline, (
            f"the program did not start in {image}: {container.logs().decode(errors='replace')[-1500:]}")
        time.sleep(0.1)
    container.reload()
    main_pid = container.attrs["State"]["Pid"]
    started = threading.Event()

    def open_gate():   # the program starts its work once perf records
        if started.wait(300):
            time.sleep(0.5)
            (tmp_path / "gate" / "go").touch()

    threading.Thread(target=open_gate, daemon=True).start()
    out = tmp_path / "out"
    args = argparse.Namespace(container=container.id, pid=[], mode=None, seconds=None, out=str(out),
                              frequency=999, perf_image=None, host_perf=False, perf_args=[])
    began = time.monotonic()
    try:
        outside.run(MATRIX, args, log=print, client=docker_client, started=started)
        status = container.wait(timeout=120)["StatusCode"]
        said = container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)
    record_property("record_seconds", round(time.monotonic() - began, 1))
    assert status == 0, f"the program failed in {image} (exit {status}): {said[-1500:]}"
    assert said.count("worker ") == WORKERS, f"the program did not run its workers: {said[-500:]}"

    # The container is gone: read the recording again, as a user would later.
    perf_image = args.perf_image or _tools_image(docker_client)
    runner = outside.PerfRunner(docker_client, out, perf_image, log=print)
    data = outside.JIT_DATA if mode == "perf_jit" else outside.PERF_DATA
    code, err = runner.read(["perf", "script", "--symfs", f"/out/{outside.OBJECTS}", "-F", PERF_SCRIPT_FIELDS,
                             "-i", f"/out/{data}"], "again.txt")
    assert code == 0, f"perf script failed: {err}"
    samples = parse_perf_script((out / "again.txt").read_text(errors="replace"))
    by_pid: dict[int, list] = {}
    for sample in samples:
        by_pid.setdefault(sample.pid, []).append(sample)
    record_property("kept_files", len(list((out / "tmp").glob("perf-*.map")) + list((out / "tmp").glob("jit-*.dump"))))
    assert main_pid in by_pid, f"no sample of the container's first process (host pid {main_pid}): {sorted(by_pid)}"
    assert_chain(chain_report(by_pid[main_pid], CHAIN), mode, f"{mode}, the first process, read after exit",
                 record_property)
    workers = {pid: s for pid, s in by_pid.items() if pid != main_pid and any(x.python_frames() for x in s)}
    record_property("workers_with_python_frames", len(workers))
    assert len(workers) == WORKERS, (f"{WORKERS} short-lived workers ran, {len(workers)} have Python frames "
                                     f"(processes sampled: {sorted(by_pid)})")
    for pid, worker_samples in workers.items():
        try:
            assert_chain(chain_report(worker_samples, WORKER_CHAIN), mode, f"{mode}, worker {pid}, read after exit",
                         record_property)
        except AssertionError:
            if mode == "perf_jit":
                unflushed = worker_dump_lacks(out / "tmp" / f"jit-{pid}.dump", WORKER_CHAIN[0])
                if unflushed:
                    # the worker left without finalizing (a pool's worker is terminated): records still in
                    # the jitdump's stdio buffer never reached the file
                    xfail_if_carried(cell, "jitdump-fork-flush", f"worker {pid}: {unflushed}", target_facts,
                                     record_property)
            raise

    if mode == "perf":
        # The control: the same recording without the kept maps names no Python frame.
        empty = tmp_path / "empty"
        empty.mkdir()
        empty.chmod(0o1777)
        from cpython_perf.run import containers

        result = containers.run(docker_client, perf_image,
                                f"perf script -F {PERF_SCRIPT_FIELDS} -i /out/{outside.PERF_DATA} > /out/bare.txt",
                                workdir="/out", mounts={out: "/out", empty: "/tmp"})
        assert result.exit_code == 0, result.stderr[-1000:]
        bare = parse_perf_script((out / "bare.txt").read_text(errors="replace"))
        named = sum(len(s.python_frames()) for s in bare)
        record_property("python_frames_without_kept_files", named)
        assert named == 0, f"{named} Python frames named without the kept maps: the control does not hold"


def worker_dump_lacks(path: Path, function: str) -> str | None:
    """Why the worker's kept jitdump does not name `function` (None: it does)."""
    if not path.exists():
        return f"no {path.name} was kept"
    dump = jit_inject.parse_jitdump(path.read_bytes(), path.name)
    if any(load.name.decode(errors="replace") == function for load in dump.loads):
        return None
    return (f"its jitdump ({path.stat().st_size} bytes, {len(dump.loads)} code loads) has no code load for "
            f"{function}, which the worker ran")


def _tools_image(client) -> str:
    from cpython_perf.image import tools

    return tools.ensure_tools_image(client, MATRIX, print)

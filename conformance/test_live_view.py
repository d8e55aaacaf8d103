"""`record --container NAME --live`: a top-like view of a running container's Python processes from the node.

A cell container runs the seed chain under -X perf (outside_workers.py, no workers); `record --container --live`
(cpython_perf.record.outside, windows of one second for ten seconds: each window also starts two containers,
perf record's and perf script's, which on a loaded machine took the first window past four seconds) must show,
window after window, a table whose Python section names py::foo, py::bar, py::baz and py::<module> of the program, each outer function in at
least as many samples as the one it calls; and the last window's recording, kept in DIR, must carry the whole
chain in the samples inside foo as every recording of the suite (perf_samples.min_chain_fraction).
"""

from __future__ import annotations

import argparse
import re
import threading
import time

import pytest

from cpython_perf.errors import DriverError
from cpython_perf.record import outside
from cpython_perf.record.perf_samples import chain_report, parse_perf_script, py_symbol

from conftest import MATRIX, SCRIPTS, assert_chain, image_of, not_applicable, python_of

pytestmark = [pytest.mark.needs_perf]
PROGRAM = "/src/outside_workers.py"
CHAIN = [py_symbol(f, PROGRAM) for f in ("foo", "bar", "baz", "<module>")]
ROW = re.compile(r"^\s+(?P<total>[0-9.]+)%\s+(?P<self>[0-9.]+)%\s+(?P<symbol>py::\S+)$")


def _start(cell, docker_client, gate, mode="perf"):
    gate.mkdir()
    gate.chmod(0o777)
    return docker_client.containers.run(
        image_of(cell, docker_client), [python_of(cell), "-X", mode, PROGRAM, "/gate/go", "8", "0"], detach=True,
        volumes={str(SCRIPTS): {"bind": "/src", "mode": "ro"}, str(gate): {"bind": "/gate", "mode": "rw"}})


def _started(container):
    deadline = time.monotonic() + 60
    while b"main " not in container.logs():
        container.reload()
        assert container.status == "running" and time.monotonic() < deadline, container.logs()[-1500:]
        time.sleep(0.1)


def _args(container, out, **more):
    values = dict(container=container.id, pid=[], mode=None, seconds=10.0, out=str(out), frequency=999,
                  perf_image=None, host_perf=False, perf_args=[], live=True, interval=1.0, entries=15)
    values.update(more)
    return argparse.Namespace(**values)


def test_live_view_names_the_python_chain(cell, docker_client, tmp_path, record_property):
    if cell.foreign:
        not_applicable("foreign", f"{cell.name}: perf cannot sample under qemu-user")
    if cell.vanilla:
        not_applicable("vanilla", f"{cell.name} is a vanilla twin: its chains are not checked")
    if "perf" not in cell.modes:
        not_applicable("mode:perf", f"{cell.name} does not claim -X perf, which --live shows")
    container = _start(cell, docker_client, tmp_path / "gate")
    lines: list[str] = []
    try:
        _started(container)
        started = threading.Event()
        threading.Thread(target=lambda: started.wait(300) and (tmp_path / "gate" / "go").touch(), daemon=True).start()
        outside.run(MATRIX, _args(container, tmp_path / "out"), log=lines.append, client=docker_client,
                    started=started)
    finally:
        container.remove(force=True)
    text = "\n".join(lines)
    windows = [block for block in text.split("\n") if re.search(r", window \d+ \(", block)]
    record_property("live_windows", len(windows))
    assert len(windows) >= 2, f"fewer than two windows shown:\n{text[-3000:]}"
    table = (tmp_path / "out" / outside.TOP_TEXT).read_text()
    totals = {}
    for line in table.splitlines():
        m = ROW.match(line)
        if m:
            totals[m.group("symbol")] = float(m.group("total"))
    missing = [s for s in CHAIN if s not in totals]
    assert not missing, f"the live table names no {missing}:\n{table}"
    assert all(totals[outer] >= totals[inner] for inner, outer in zip(CHAIN, CHAIN[1:])), (
        f"an outer function is in fewer samples than the one it calls:\n{table}")
    samples = parse_perf_script((tmp_path / "out" / outside.SCRIPT_TEXT).read_text(errors="replace"))
    assert_chain(chain_report(samples, CHAIN), "perf", "perf, the last --live window", record_property)


def test_live_refuses_perf_jit(cell, docker_client, tmp_path):
    if cell.foreign:
        not_applicable("foreign", f"{cell.name}: perf cannot sample under qemu-user")
    if "perf_jit" not in cell.backends:
        not_applicable("backend:perf_jit", f"{cell.name}'s interpreter does not offer -X perf_jit")
    container = _start(cell, docker_client, tmp_path / "gate", "perf_jit")
    try:
        _started(container)
        with pytest.raises(DriverError, match="a perf_jit recording must be injected"):
            outside.run(MATRIX, _args(container, tmp_path / "out"), log=print, client=docker_client)
    finally:
        container.remove(force=True)
    assert not (tmp_path / "out" / outside.PERF_DATA).exists()

"""`record --container` writes, from the recording's samples, the files people open in their viewers, and the
viewers' own readers see the seed chain in them as perf script does.

A cell container runs the seed chain (outside_workers.py, no workers); `python -m cpython_perf record --container`
records it from outside and writes stacks.folded, profile.pb.gz, profile.gecko.json and
profile.speedscope.json beside perf.script.txt (cpython_perf/record/viewer_files.py).  Then, per file, the
program that reads it for users (cpython_perf/check/viewer_readers.py): Go's pprof, the Firefox Profiler's
profiler-cli, speedscope's app in headless Chromium.  Of the samples whose innermost Python frame is foo, the
share that carries foo under bar under baz under <module> must be what perf_samples.min_chain_fraction asks
of every recording, in each reader; a reader this machine lacks skips its part, saying what to install.
"""

from __future__ import annotations

import argparse
import threading
import time

import pytest

from cpython_perf.check import viewer_readers
from cpython_perf.record import outside, viewer_files
from cpython_perf.record.perf_samples import chain_report, min_chain_fraction, parse_perf_script, py_symbol

from conftest import MATRIX, SCRIPTS, image_of, not_applicable, python_of

pytestmark = [pytest.mark.needs_perf]
PROGRAM = "/src/outside_workers.py"
CHAIN = ["foo", "bar", "baz", "<module>"]       # leaf first


_RECORDED: dict[str, tuple] = {}


@pytest.fixture
def recorded(cell, docker_client, tmp_path_factory):
    """The output directory of `record --container` on the seed chain, with -X perf (perf_jit where the cell
    claims only that): one recording per cell, which each reader's test reads."""
    if cell.name not in _RECORDED:
        _RECORDED[cell.name] = _record(cell, docker_client, tmp_path_factory.mktemp(f"viewers-{cell.name}"))
    return _RECORDED[cell.name]


def _record(cell, docker_client, tmp_path):
    if cell.foreign:
        not_applicable("foreign", f"{cell.name}: perf cannot sample under qemu-user")
    if cell.vanilla:
        not_applicable("vanilla", f"{cell.name} is a vanilla twin: its chains are not checked")
    mode = "perf" if "perf" in cell.modes else (cell.modes[0] if cell.modes else None)
    if mode is None:
        not_applicable("backends", f"{cell.name} claims no perf mode")
    gate = tmp_path / "gate"
    gate.mkdir()
    gate.chmod(0o777)
    container = docker_client.containers.run(
        image_of(cell, docker_client), [python_of(cell), "-X", mode, PROGRAM, "/gate/go", "2", "0"], detach=True,
        volumes={str(SCRIPTS): {"bind": "/src", "mode": "ro"}, str(gate): {"bind": "/gate", "mode": "rw"}})
    started = threading.Event()
    try:
        deadline = time.monotonic() + 60
        while b"main " not in container.logs():
            container.reload()
            assert container.status == "running" and time.monotonic() < deadline, container.logs()[-1500:]
            time.sleep(0.1)
        threading.Thread(target=lambda: started.wait(300) and (gate / "go").touch(), daemon=True).start()
        out = tmp_path / "out"
        args = argparse.Namespace(container=container.id, pid=[], mode=None, seconds=None, out=str(out),
                                  frequency=999, perf_image=None, host_perf=False, perf_args=[])
        outside.run(MATRIX, args, log=print, client=docker_client, started=started)
        assert container.wait(timeout=120)["StatusCode"] == 0, container.logs()[-1500:]
    finally:
        container.remove(force=True)
    samples = parse_perf_script((out / outside.SCRIPT_TEXT).read_text(errors="replace"))
    report = chain_report(samples, [py_symbol(f, PROGRAM) for f in CHAIN])
    assert report.inside_samples > 100, f"too few samples in foo: {report}"
    return out, mode, samples, report


def _share(stacks: list[tuple[list[str], int]], python: set[str], chain: list[str] = CHAIN) -> tuple[int, int]:
    """(samples whose innermost Python frame is chain[0], of those the ones whose Python frames begin with the
    chain), from a reader's stacks (function names leaf first, with counts) and the names it gives Python
    frames."""
    inside = full = 0
    for stack, count in stacks:
        py = [f for f in stack if f in python]
        if py[:1] == chain[:1]:
            inside += count
            full += count if py[:len(chain)] == chain else 0
    return inside, full


def _assert_share(reader: str, inside: int, full: int, report, mode: str, record_property):
    record_property(f"{reader}_chain_fraction", round(full / inside, 4) if inside else 0)
    assert inside == report.inside_samples, (f"{reader} sees {inside} samples in foo, perf script "
                                             f"{report.inside_samples}")
    assert full / inside >= min_chain_fraction(mode), (
        f"{reader}: {full} of {inside} samples in foo carry {' < '.join(CHAIN)} (perf script: "
        f"{report.full_chain_samples})")


def test_folded_stacks(recorded, record_property):
    out, mode, samples, report = recorded
    stacks = []
    for line in (out / viewer_files.FOLDED).read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        stacks.append((stack.split(";")[::-1], int(count)))
    assert sum(c for _, c in stacks) == len(samples)
    python = {f for stack, _ in stacks for f in stack if f.startswith("py::")}
    _assert_share("folded", *_share(stacks, python, [py_symbol(f, PROGRAM) for f in CHAIN]), report, mode,
                  record_property)


def test_pprof_read_by_go_pprof(recorded, record_property):
    out, mode, samples, report = recorded
    try:
        viewer_readers.go_pprof()
    except viewer_readers.ReaderMissing as exc:
        pytest.skip(str(exc))
    python = {l["function"] for l in viewer_readers.pprof_locations(out / viewer_files.PPROF)
              if l["mapping"] is None and l["file"] == PROGRAM}
    assert set(CHAIN) <= python, f"pprof names no Python function {set(CHAIN) - python} of {PROGRAM}"
    traces = viewer_readers.pprof_traces(out / viewer_files.PPROF)
    assert sum(t["count"] for t in traces) == len(samples)
    _assert_share("pprof", *_share([(t["stack"], t["count"]) for t in traces], python), report, mode,
                  record_property)


def test_gecko_read_by_the_firefox_profiler(recorded, record_property):
    out, mode, samples, report = recorded
    try:
        modules = viewer_readers.npm_readers()
    except viewer_readers.ReaderMissing as exc:
        pytest.skip(str(exc))
    threads = viewer_readers.firefox_threads(out / viewer_files.GECKO, modules)
    stacks = [([name.split("!", 1)[-1] for name in path[::-1]], count)
              for thread in threads.values() for path, count in thread["paths"]]
    python = {name.split("!", 1)[-1] for thread in threads.values() for path, _ in thread["paths"]
              for name in path if name.startswith(PROGRAM + "!")}
    assert sum(c for _, c in stacks) == len(samples), "the Firefox Profiler counts other samples"
    _assert_share("firefox", *_share(stacks, python), report, mode, record_property)
    kernel = sum(t["categories"].get("Kernel", 0) for t in threads.values())
    record_property("firefox_kernel_samples", kernel)


def test_speedscope_loaded_by_speedscope(recorded, tmp_path):
    out, mode, samples, report = recorded
    try:
        modules = viewer_readers.npm_readers()
        viewer_readers.browser()
    except viewer_readers.ReaderMissing as exc:
        pytest.skip(str(exc))
    dom = viewer_readers.speedscope_page(out / viewer_files.SPEEDSCOPE, modules, tmp_path / "speedscope.png")
    assert "- speedscope</title>" in dom and "record --container" in dom
    threads = {}
    for s in samples:
        threads[f"{s.comm} {s.pid}/{s.tid}"] = threads.get(f"{s.comm} {s.pid}/{s.tid}", 0) + 1
    for name, count in threads.items():   # each thread a profile of its own, in the profile list
        # several: speedscope's profile list (each with its samples); one: its name in the toolbar
        shown = f"<span>{name}</span></td><td" if len(threads) > 1 else f"</div>{name}<div"
        assert shown in dom, f"speedscope shows no profile {name}"
    assert (tmp_path / "speedscope.png").stat().st_size > 5000

"""Attribution fidelity, the cost of perf itself, and map-file growth, per cell.

`python -m cpython_perf bench fidelity --cell 3.11-fp --cell 3.13-release` (`nox -s bench-fidelity -- ...`)
runs, in each cell's image (x86_64 cells; a fresh container each):

- fidelity: benchmarks/seed.py (the howto's foo -> bar -> baz -> <module>, with a
  longer loop) recorded by
    perf    for each mode the cell claims, as the conformance suite records it
            (cpython_perf.record.perf_runs: -F 9999, frame pointers or dwarf + inject);
    samply  for each mode, `samply record --save-only` (cpython_perf.record.samply);
    py-spy  from PyPI (pinned in matrix.yaml `profilers:`), which reads the
            interpreter's frames itself and needs no perf support: the reference;
  and, for each, the fraction of the samples inside foo's loop that carry the
  whole chain (targets: >= 95% with perf / frame pointers, >= 90% with perf_jit);
- cost of perf: perf.data size and the wall time of perf record, perf inject
  (perf_jit) and perf script, from the same perf runs;
- map growth: benchmarks/workloads.py (scaled down) run under a profile hook that
  lists every code object it executes (benchmarks/count_codes.py) with each
  mode on: the entries the perf map (or jitdump) got for workloads.py against
  the distinct code objects of workloads.py executed.

Writes results/bench/fidelity-<UTC timestamp>.json; BENCHMARKS.md shows the
latest such file beside the overhead runs (cpython_perf.bench.summary).
"""

from __future__ import annotations

import json
import shutil
import struct
import tempfile
import time
from collections import Counter
from pathlib import Path

from ..image import pipeline, tools
from ..run import containers
from .. import host
from ..record import perf_runs, py_spy, samply
from . import common
from ..errors import DriverError
from ..matrix import PROJECT_ROOT, Cell, Matrix
from ..record.perf_samples import CHAIN_FRACTION_TARGETS, chain_report, parse_perf_script, py_symbol

BENCH_DIR = PROJECT_ROOT / "benchmarks"
RESULTS_DIR = common.RESULTS_DIR
GROUP = "fidelity"   # results/bench/fidelity-<UTC time>.json
SEED = "/bench/seed.py"
SEED_N = 5_000_000
CHAIN = [py_symbol(f, SEED) for f in ("foo", "bar", "baz", "<module>")]
TARGETS = CHAIN_FRACTION_TARGETS   # fraction of foo's samples with the whole chain: the conformance suite's bar
PY_SPY_RATE = 999
PY_SPY_MOUNT = py_spy.MOUNT
SAMPLY_MOUNT = "/opt/samply"
MAP_SCALE = 0.05


# --------------------------------------------------------------------------
# Parsing what the profilers wrote


def py_spy_chain_counts(raw: str, chain=("foo", "bar", "baz", "<module>"), filename: str = SEED) -> dict:
    """Samples of py-spy's raw output: all, inside chain[0] of filename, and those with the whole chain."""
    return py_spy.chain_counts(raw, chain, filename)


def perf_map_entries(text: str) -> list[tuple[str, str]]:
    """(qualified name, file) of each py:: line of a perf map."""
    out = []
    for line in text.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[2].startswith("py::"):
            name, _, filename = parts[2][4:].rpartition(":")
            out.append((name, filename))
    return out


JITDUMP_MAGIC = 0x4A695444
JIT_CODE_LOAD = 0


def jitdump_entries(data: bytes) -> list[tuple[str, str]]:
    """(qualified name, file) of each py:: JIT_CODE_LOAD record of a jitdump."""
    if len(data) < 40:
        raise DriverError("jitdump shorter than its header")
    magic, _, header_size = struct.unpack_from("<III", data, 0)
    if magic != JITDUMP_MAGIC:
        raise DriverError(f"not a little-endian jitdump (magic {magic:#x})")
    out, offset = [], header_size
    while offset + 16 <= len(data):
        record_id, size, _ = struct.unpack_from("<IIQ", data, offset)
        if size < 16 or offset + size > len(data):
            break
        if record_id == JIT_CODE_LOAD:
            body = data[offset + 16 + 40: offset + size]   # pid, tid, vma, code_addr, code_size, code_index
            name = body.split(b"\0", 1)[0].decode("utf-8", "replace")
            if name.startswith("py::"):
                qual, _, filename = name[4:].rpartition(":")
                out.append((qual, filename))
        offset += size
    return out


def map_growth(entries: list[tuple[str, str]], codes: list, filename: str) -> dict:
    """Entries written for filename against the distinct code objects of filename executed."""
    mine = [e for e in entries if e[1] == filename]
    names = Counter(name for name, _ in mine)
    return {"entries_total": len(entries), "entries_for_file": len(mine), "code_objects_executed": len(codes),
            "distinct_names_written": len(names), "names_written_twice": sum(1 for n in names.values() if n > 1)}


# --------------------------------------------------------------------------
# Running


class _Workdir:
    """One measurement's directories (containers.make_workdir) and its mounts; /bench is benchmarks/."""

    def __init__(self, root: Path, name: str):
        self.path = containers.make_workdir(root / name)
        self.src, self.tmp = self.path / "src", self.path / "tmp"

    def mounts(self, **extra) -> dict:
        return {self.src: "/src", self.tmp: "/tmp", BENCH_DIR: "/bench", **{Path(k): v for k, v in extra.items()}}


def _chain_numbers(report) -> dict:
    return {"fraction": report.fraction, "inside_samples": report.inside_samples,
            "full_chain_samples": report.full_chain_samples, "process_samples": report.process_samples}


def _perf_run(client, image, cap, cell, mode, work: _Workdir) -> dict:
    run = perf_runs.perf_run(cell, mode, "xoption", SEED, args=(SEED_N,))
    result = containers.run(client, image, run.shell, mounts=work.mounts(), cap_add=[cap], timeout=1800)
    result.check(f"perf ({mode}) in {image}")
    report = chain_report(parse_perf_script((work.src / run.output).read_text(errors="replace")), CHAIN)
    phases = perf_runs.parse_phases((work.src / perf_runs.PHASES_OUTPUT).read_text())
    return {**_chain_numbers(report), "cost": phases}


def _samply_run(client, image, cap, samply_binary: Path, mode, work: _Workdir) -> dict:
    shell = samply.record_command(mode, "xoption", SEED, samply=f"{SAMPLY_MOUNT}/samply", args=(SEED_N,))
    started = time.monotonic()
    result = containers.run(client, image, shell, mounts=work.mounts(**{str(samply_binary.parent): SAMPLY_MOUNT}),
                            cap_add=[cap], timeout=1800)
    seconds = time.monotonic() - started
    result.check(f"samply ({mode}) in {image}")
    return {**_chain_numbers(chain_report(samply.read_profile(work.src), CHAIN)), "seconds": round(seconds, 2)}


def _py_spy_run(client, image, py_spy_path: Path, work: _Workdir) -> dict:
    argv, _ = perf_runs.python_command(None, "xoption", SEED, (SEED_N,))
    command = py_spy.record_command(f"{PY_SPY_MOUNT}/py-spy", argv, "/src/py-spy.txt", PY_SPY_RATE)
    result = containers.run(client, image, command, mounts=work.mounts(**{str(py_spy_path.parent): PY_SPY_MOUNT}),
                            cap_add=["SYS_PTRACE"], timeout=1800)
    result.check(f"py-spy in {image}")
    return py_spy_chain_counts((work.src / "py-spy.txt").read_text(errors="replace"))


def _map_growth_run(client, image, mode, work: _Workdir) -> dict:
    command = ["python3", "-X", mode, "/bench/count_codes.py", "--run", ",".join(common.available_workloads()), "--repeat", "1",
               "--scale", str(MAP_SCALE)]
    result = containers.run(client, image, command, mounts=work.mounts(), timeout=1800)
    result.check(f"count_codes.py (-X {mode}) in {image}")
    out = json.loads(result.stdout.strip().splitlines()[-1])
    if mode == "perf":
        entries = perf_map_entries((work.tmp / f"perf-{out['pid']}.map").read_text(errors="replace"))
    else:
        entries = jitdump_entries((work.tmp / f"jit-{out['pid']}.dump").read_bytes())
    return map_growth(entries, out["codes"], "/bench/workloads.py")


def measure(matrix: Matrix, cells: list[Cell], log=print) -> dict:
    """Every measurement of the module's docstring for the cells; the results as a dict."""
    cells = [c for c in cells if c.modes and not c.vanilla]
    foreign = [c.name for c in cells if c.foreign]
    if foreign:
        raise DriverError(f"fidelity runs need perf in a container on this host; {', '.join(foreign)} would need "
                          "the qemu-system guest (their chain fractions are in their conformance results)")
    if not cells:
        raise DriverError("no selected cell claims a perf mode")
    client = host.docker_client(log)
    samply_binary = tools.samply_binary(client, matrix, log=log)
    py_spy_path = tools.py_spy_binary(matrix, log=log)
    started = common.utc_stamp()
    out = {"created": started, "machine": common.machine_info(), "settings": {"seed_n": SEED_N, "py_spy_rate": PY_SPY_RATE,
           "perf_rate": perf_runs.SAMPLE_FREQUENCY, "samply_rate": samply.SAMPLE_RATE, "map_scale": MAP_SCALE},
           "tools": {"samply": matrix.profilers.samply, "py-spy": matrix.profilers.py_spy["version"],
                     "inferno": matrix.profilers.inferno},
           "targets": TARGETS, "cells": {}}
    root = Path(tempfile.mkdtemp(prefix="cpython-perf-fidelity-"))
    try:
        for cell in cells:
            image = pipeline.ensure_cell_image(cell, matrix, log)
            cap = containers.perf_capability(client, image)
            entry = {"python": cell.recipe.version, "support": cell.support, "modes": list(cell.modes),
                     "perf": {}, "samply": {}, "map_growth": {}}
            for mode in cell.modes:
                log(f"{cell.name}: perf, -X {mode}")
                entry["perf"][mode] = _perf_run(client, image, cap, cell, mode, _Workdir(root, f"{cell.name}-perf-{mode}"))
                log(f"{cell.name}: samply, -X {mode}")
                entry["samply"][mode] = _samply_run(client, image, cap, samply_binary, mode,
                                                    _Workdir(root, f"{cell.name}-samply-{mode}"))
            for mode in cell.backends:
                log(f"{cell.name}: map growth, -X {mode}")
                entry["map_growth"][mode] = _map_growth_run(client, image, mode, _Workdir(root, f"{cell.name}-map-{mode}"))
            log(f"{cell.name}: py-spy")
            entry["py-spy"] = _py_spy_run(client, image, py_spy_path, _Workdir(root, f"{cell.name}-py-spy"))
            out["cells"][cell.name] = entry
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


# --------------------------------------------------------------------------
# Report


def _verdict(fraction: float, target: float) -> str:
    if fraction >= target:
        return f"ok (>= {target:.0%})"
    return f"MISSED by {(target - fraction) * 100:.1f} points ({fraction:.1%} < {target:.0%})"


def _fraction(entry: dict) -> str:
    return f"{entry['fraction']:.1%} ({entry['full_chain_samples']}/{entry['inside_samples']})"


def render_markdown(results: dict, source: str = "") -> str:
    """The fidelity, perf-cost and map-growth sections of BENCHMARKS.md."""
    s = results["settings"]
    lines = [
        "## Attribution fidelity",
        "",
        f"From {source or 'a fidelity run'} ({results['created']}; `python -m cpython_perf bench fidelity`). "
        f"benchmarks/seed.py (foo's loop of {s['seed_n']:,} steps under bar, baz, <module>) recorded in each cell with "
        f"perf (-F {s['perf_rate']}, as the conformance suite records), samply {results['tools']['samply']} "
        f"(--rate {s['samply_rate']}) and py-spy {results['tools']['py-spy']} (-r {s['py_spy_rate']}, from the "
        "interpreter's own frames: the reference). Fraction = samples whose innermost Python frame is foo and that "
        "carry foo -> bar -> baz -> <module> in order / samples whose innermost Python frame is foo. "
        "Targets: >= 95% with perf (frame pointers), >= 90% with perf_jit.",
        "",
        "| cell | mode | perf | samply | py-spy (any mode) | target (perf) |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for name, cell in results["cells"].items():
        for mode in cell["modes"]:
            target = results["targets"][mode]
            lines.append(f"| {name} | {mode} | {_fraction(cell['perf'][mode])} | {_fraction(cell['samply'][mode])} | "
                         f"{_fraction(cell['py-spy'])} | {_verdict(cell['perf'][mode]['fraction'], target)} |")
    lines += [
        "",
        "## Cost of perf itself",
        "",
        "The perf runs above: perf.data (after inject for perf_jit) and the wall time of each step in the container; "
        "samply's whole record (its own unwinding and symbol lookup included).",
        "",
        "| cell | mode | perf.data | perf record | perf inject | perf script | samples | samply record |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for name, cell in results["cells"].items():
        for mode in cell["modes"]:
            cost = cell["perf"][mode]["cost"]
            inject = f"{cost['inject'] / 1000:.2f} s" if "inject" in cost else "-"
            lines.append(f"| {name} | {mode} | {cost.get('data_bytes', 0) / 1e6:.1f} MB | {cost['record'] / 1000:.2f} s | "
                         f"{inject} | {cost['script'] / 1000:.2f} s | {cell['perf'][mode]['process_samples']} | "
                         f"{cell['samply'][mode]['seconds']:.2f} s |")
    lines += [
        "",
        "## Map file growth",
        "",
        f"benchmarks/workloads.py (all workloads, --scale {s['map_scale']}) run by benchmarks/count_codes.py, which lists "
        "every code object it executes, with the mode on: the perf map (or jitdump) entries written for "
        "workloads.py against the distinct code objects of workloads.py executed. One entry per code object is "
        "the expectation; the total counts every entry of the process (startup and stdlib included). A name shared "
        "by entries of different code objects (comprehensions before 3.12 are code objects of their own, named "
        "<listcomp>, <genexpr>; 3.9 has no qualified names) is counted in the last column; it is not a second entry "
        "for one code object.",
        "",
        "| cell | mode | entries (all) | entries for workloads.py | code objects executed | names shared by entries |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for name, cell in results["cells"].items():
        for mode, growth in cell["map_growth"].items():
            lines.append(f"| {name} | {mode} | {growth['entries_total']} | {growth['entries_for_file']} | "
                         f"{growth['code_objects_executed']} | {growth['names_written_twice']} |")
    return "\n".join(lines) + "\n"


def latest_results(directory: Path = RESULTS_DIR) -> Path | None:
    return common.latest_group_results(directory, GROUP)


# The group's command line (cpython_perf.bench.command): `python -m cpython_perf bench fidelity ...`


def arguments(parser) -> None:
    pass


def run(matrix, cells, args, log) -> dict:
    return measure(matrix, cells, log)


def report(results: dict, path: Path) -> None:
    print(render_markdown(results, str(path)))

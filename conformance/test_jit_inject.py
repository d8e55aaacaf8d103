"""The project's perf_jit injector names every Python frame as `perf inject --jit` does, in each cell.

`python -m cpython_perf profile --mode perf_jit` injects a recording with cpython_perf/record/jit_inject.py
(one ELF per trampoline arena) instead of perf's own `perf inject --jit` (one ELF per code object, which
slows down with their number).  Here both inject the same perf.data of a -X perf_jit program that makes a few
hundred functions, then frees some and makes new ones (in the slots of the freed ones, on a patched 3.13),
and `perf script` of both must give the same samples with the same py:: frames in the same order.  It runs
wherever the cell's interpreter offers perf_jit, the vanilla twins too: the injector must read upstream's
jitdumps as well as the series'.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cpython_perf.record import jit_inject, perf_runs
from cpython_perf.record.perf_runs import DWARF_MMAP_FUNCTION
from cpython_perf.record.perf_samples import PERF_SCRIPT_FIELDS, parse_perf_script

from conftest import not_applicable

pytestmark = [pytest.mark.needs_perf, pytest.mark.also_external]

WORKLOAD = Path(__file__).resolve().parent.parent / "benchmarks" / "many_functions.py"


def test_jit_inject_names_every_frame_as_perf_inject_does(cell, runner_for, record_property):
    if "perf_jit" not in cell.backends:
        not_applicable("backend:perf_jit", f"{cell.name}'s interpreter writes no jitdump (no perf_jit backend)")
    if cell.foreign:
        not_applicable("foreign", f"{cell.name}: perf cannot sample a program under qemu-user; the injector is "
                                  "checked on the x86_64 cells")
    runner = runner_for(cell)
    shutil.copy(WORKLOAD, runner.src / "many_functions.py")
    shutil.copy(jit_inject.__file__, runner.src / "jit_inject.py")
    perf, python = runner.perf, runner.python
    options = " ".join(perf_runs.record_options(cell, "perf_jit", runner.event))   # as the suite records
    script = "\n".join([
        DWARF_MMAP_FUNCTION,
        "set -e",
        f"{perf} record -q {options} -o /src/perf.data -- "
        f"{python} -X perf_jit /src/many_functions.py 400 --free 10 --seconds 0.6 > /src/prog.json",
        f"{perf} inject -i /src/perf.data --jit -o /src/perf.jit.data",
        f"{python} -E /src/jit_inject.py -i /src/perf.data -o /src/perf.arena.data",
        f"{perf} script -F {PERF_SCRIPT_FIELDS} -i /src/perf.jit.data > /src/perf-inject.txt 2>/dev/null",
        f"{perf} script -F {PERF_SCRIPT_FIELDS} -i /src/perf.arena.data > /src/jit-inject.txt 2>/src/jit-inject.err",
    ])
    result = runner.run(script, timeout=600)
    assert result.exit_code == 0, result.stdout[-2000:] + result.stderr[-3000:]
    theirs = parse_perf_script((runner.src / "perf-inject.txt").read_text(errors="replace"))
    ours = parse_perf_script((runner.src / "jit-inject.txt").read_text(errors="replace"))
    record_property("samples", len(ours))
    arena_files = len(list(runner.tmp.glob("jit-*-arena-*.so")))
    record_property("arena_files", arena_files)
    record_property("perf_inject_files", len(list(runner.tmp.glob("jitted-*.so"))))
    assert "out of order" not in (runner.src / "jit-inject.err").read_text()
    assert [(s.tid, s.time) for s in ours] == [(s.tid, s.time) for s in theirs], "not the same samples"
    differ = [i for i, (a, b) in enumerate(zip(theirs, ours)) if a.python_frames() != b.python_frames()]
    assert not differ, (f"{len(differ)} of {len(ours)} samples have other py:: frames than perf inject's; the "
                        f"first: {theirs[differ[0]].python_frames()} != {ours[differ[0]].python_frames()}")
    chains = [s.python_frames() for s in ours]
    assert sum(1 for c in chains if any(f.startswith("py::f_") for f in c)) > 50, "too few samples in the chains"
    assert any(any(f.startswith("py::g_") for f in c) for c in chains), "no sample in the functions made later"
    deep = [c for c in chains if c and c[0] == "py::spin:/src/many_functions.py"]
    assert deep and all(c[-1] == "py::<module>:/src/many_functions.py" for c in deep)
    assert arena_files < 10, f"{arena_files} ELF files: not one per trampoline arena"

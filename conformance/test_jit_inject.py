"""The project's perf_jit injector names every Python frame as `perf inject --jit` does, in each cell.

`python -m cpython_perf profile --mode perf_jit` injects a recording with cpython_perf/record/jit_inject.py
(one ELF per trampoline arena) instead of perf's own `perf inject --jit` (one ELF per code object, which
slows down with their number).  Here both inject the same perf.data of a -X perf_jit program that makes a few
hundred functions, then frees some and makes new ones (in the slots of the freed ones, on a patched 3.13),
and `perf script` of both must give the same samples with the same py:: frames in the same order.  It runs
wherever the cell's interpreter offers perf_jit, the vanilla twins too: the injector must read upstream's
jitdumps as well as the series'.  A foreign (aarch64) cell runs the same script in its qemu-system guest
(conftest.jit_inject_script, one of the guest's jobs): there the jitdump's unwind info is aarch64's (an FDE
that toggles the return address's signing state, for pac-ret), and Debian's arm64 perf unwinds with
libunwind, so the injector takes its own path, not its perf inject fallback.
"""

from __future__ import annotations

import shutil

import pytest

from cpython_perf.check import external
from cpython_perf.record import jit_inject, perf_runs
from cpython_perf.record.perf_samples import parse_perf_script

from conftest import (JIT_INJECT_COUNTS, JIT_INJECT_FILES, JIT_INJECT_PERF_OPTIONS, jit_inject_not_applicable,
                      jit_inject_script,
                      not_applicable, xfail_if_carried)

pytestmark = [pytest.mark.needs_perf, pytest.mark.also_external]


def assert_chains_name_the_workload(chains) -> None:
    """The samples' py:: chains reach the workload's functions: those made first and those made later."""
    assert sum(1 for c in chains if any(f.startswith("py::f_") for f in c)) > 50, "too few samples in the chains"
    assert any(any(f.startswith("py::g_") for f in c) for c in chains), "no sample in the functions made later"


def test_jit_inject_names_every_frame_as_perf_inject_does(cell, runner_for, record_property, target_facts):
    skip = jit_inject_not_applicable(cell)
    if skip:
        not_applicable(*skip)
    runner = runner_for(cell)
    for path in JIT_INJECT_FILES:   # the guest has them in /src already (conftest.guest_files)
        shutil.copy(path, runner.src / path.name)
    # the same text as the guest's job (conftest.guest_jobs): a GuestRunner takes its results from there
    result = runner.run(jit_inject_script(cell, runner.perf, runner.python, runner.event), timeout=600)
    record_property("run_seconds", round(result.seconds, 1))
    assert result.exit_code == 0, result.stdout[-2000:] + result.stderr[-3000:]
    theirs = parse_perf_script((runner.src / "perf-inject.txt").read_text(errors="replace"))
    ours = parse_perf_script((runner.src / "jit-inject.txt").read_text(errors="replace"))
    record_property("samples", len(ours))
    counts = dict(line.split() for line in (runner.src / JIT_INJECT_COUNTS).read_text().splitlines())
    arena_files = int(counts["arena_files"])
    record_property("arena_files", arena_files)
    record_property("perf_inject_files", int(counts["perf_inject_files"]))
    options = (runner.src / JIT_INJECT_PERF_OPTIONS).read_text(errors="replace")
    if not jit_inject.unwinds_with_libunwind_text(options):
        # The driver injects with perf inject --jit there (record/outside.py: "the reading perf unwinds without
        # libunwind"), as with riscv64's perf (libdw only), whose unwinding of the arenas' FDEs this does not
        # claim: what is checked is that perf inject's chains, which users get, name the frames.
        record_property("injector", "perf inject --jit (perf unwinds without libunwind)")
        assert_chains_name_the_workload([s.python_frames() for s in theirs])
        return
    assert "out of order" not in (runner.src / "jit-inject.err").read_text()
    assert [(s.tid, s.time) for s in ours] == [(s.tid, s.time) for s in theirs], "not the same samples"
    differ = [i for i, (a, b) in enumerate(zip(theirs, ours)) if a.python_frames() != b.python_frames()]
    assert not differ, (f"{len(differ)} of {len(ours)} samples have other py:: frames than perf inject's; the "
                        f"first: {theirs[differ[0]].python_frames()} != {ours[differ[0]].python_frames()}")
    chains = [s.python_frames() for s in ours]
    assert_chains_name_the_workload(chains)
    assert arena_files < 10, f"{arena_files} ELF files: not one per trampoline arena"
    deep = [c for c in chains if c and c[0] == "py::spin:/src/many_functions.py"]
    assert deep, "no sample in spin()"
    # an image's own perf records with its default dump (8 KiB): as deep as that dump reaches, as both injectors
    reach = None
    if isinstance(cell, external.ExternalTarget):
        reach = perf_runs.dwarf_reachable_python_frames(cell, target_facts(cell).eval_loop.frame_bytes,
                                                        perf_runs.stack_dump_bytes(cell, "perf_jit"))
        record_property("dwarf_reachable_frames", reach)
    short = [c for c in deep if c[-1] != "py::<module>:/src/many_functions.py" and (reach is None or len(c) < reach)]
    if short:
        # perf inject's chains are the same (above): the unwinding info stops them, not the injector
        xfail_if_carried(cell, "jitdump-fde-epilogue", f"{len(short)} of {len(deep)} chains from spin() stop "
                         f"short (e.g. {len(short[0])} frames) with either injector", target_facts, record_property)
    assert not short, (f"{len(short)} of {len(deep)} chains from spin() stop before <module>"
                       + (f" and before the {reach} frames the dump reaches" if reach else "") + f": {short[0]}")

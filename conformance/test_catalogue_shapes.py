"""Catalogue of stack shapes: the chain perf shows must be the stack the interpreter has.

For every perf mode a cell claims (the `cell_mode` parameter, as in
test_seed_chain.py) and every shape script conformance/scripts/shape_NAME.py:

1. The oracle.  `python3 /src/shape_NAME.py --probe` runs the shape until its
   leaf and prints the interpreter's own stack there (sys._getframe walk,
   leaf first, each frame as the perf map names it:
   py::<co_qualname>:<co_filename>).  The script's EXPECTED list (its own
   frames, written next to the code) must agree with it, and frames of other
   files may only be asyncio's (the async shape: the event loop's frames
   between the coroutines and <module>); no other shape may have any.
2. The recording.  perf records the script with -X <mode> (perf_runs.perf_run,
   the same command lines as the seed) and `perf script` is parsed into
   samples (cpython_perf.record.perf_samples).  A foreign-arch cell's
   recordings come from its qemu-system guest (conftest.guest_jobs: every
   shape but recursion, with -X perf), its probes from qemu-user.
3. The assertion.  Of the samples whose innermost py:: frame is the leaf, at
   least 95% with perf, 90% with perf_jit (perf_samples.min_chain_fraction,
   as for the seed) must have py:: frames (leaf to root) beginning with the
   oracle's stack -- the whole stack, or as much of it as the unwinder can
   physically reach: frame pointers reach the root; dwarf dumps (perf_jit)
   reach as many Python frames as test_seed_chain's reasoning gives
   (perf_runs.dwarf_reachable_python_frames on the eval loop's frame size
   read from the cell's binary).  The leaf must also dominate the run
   (>= 30% of the process's samples), so the fraction is measured on enough
   samples.

Recursion (depth sys.getrecursionlimit() - 50, or what a debug build's C
recursion budget allows under a trampoline: shape_recursion.DEPTH) is special: no unwinder
reaches the root, so a sample counts when its py:: frames are a prefix of the
oracle's stack (nothing wrong, nothing skipped) holding at least
min(50, reach) nested py::rec frames, where reach is what the unwinder can
hold: for frame pointers the kernel's perf_event_max_stack (read in the
container) divided by the native frames one Python level takes (the spacing
of consecutive py::rec frames in the samples); for dwarf the dump size
divided by the stack bytes of one level, summed over the native functions
between two py::rec frames (their prologues read with objdump from the
cell's binary); both less one level for the leaf's own callees.  A chain
the kernel cut at perf_event_max_stack entries is held to the levels that
fit above its own first py::rec frame, where the leaf's callees took more
entries than one level (a debug build's allocator, nothing inlined).  Where no sample holds
two nested py::rec frames the level cannot be measured and the demand falls
back to an upper bound (two native frames a level; the seed's eval-frame-only
rule for dwarf), so broken unwinding fails instead of lowering the bar.
Such samples must be min_chain_fraction(mode) of the leaf's, as for every
other shape (measured here: 99.5% to 100% with perf and perf_jit, -O0 included).
A crash of the recorded interpreter fails the test with the C stack budget
(ulimit -s against the eval loop's frame size) in the message.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter

import pytest

from cpython_perf.record import perf_runs
from cpython_perf.record.perf_samples import chain_report, min_chain_fraction, parse_perf_script

from conftest import (MIN_COVERAGE, PYTHON, SHAPE_C_STACK_KB, SHAPES, assert_chain, dump_reach, eval_frame_bytes,
                      guest_shape_skip_reason, not_applicable, shape_path, shape_run)

FOREIGN_ALLOWED = {"async": "asyncio"}   # shape -> stdlib package whose frames may sit in its stack
MIN_NESTED_RECURSION = 50  # nested py::rec frames demanded where the unwinder can hold them


def skip_foreign(cell, mode, shape):
    """A foreign cell's shapes come from its qemu-system guest, which records some of them (conftest.GUEST_SHAPES)."""
    reason = cell.foreign and guest_shape_skip_reason(cell, mode, shape)
    if reason:
        not_applicable("foreign", reason)


def _qualname(symbol: str, filename: str) -> str:
    return symbol[len("py::"):-len(":" + filename)]


def _filename(symbol: str) -> str:
    """py::<qualname>:<filename> -> filename (a qualname has no colon)."""
    return symbol[len("py::"):].split(":", 1)[1]


def perf_map_name_before_311(qualname: str) -> str:
    """The name a backport to 3.9 writes for a qualname: co_name, its last component (patches/3.9/README.md)."""
    return qualname.rsplit(".", 1)[-1]


def probe(runner, shape: str) -> dict:
    """The interpreter's stack at the shape's leaf, checked against the script's EXPECTED."""
    result = runner.run([PYTHON, shape_path(shape), "--probe"], perf=False, timeout=300)
    assert result.exit_code == 0, f"probe of shape_{shape}.py failed:\n{result.stderr[-3000:]}"
    info = json.loads(result.stdout.strip().splitlines()[-1])
    stack, filename = info["stack"], shape_path(shape)
    assert stack and stack[-1] == f"py::<module>:{filename}", f"the probe's root is not the script's module: {stack[-3:]}"
    own = [_qualname(s, filename) for s in stack if s.endswith(":" + filename)]
    if shape == "recursion":
        depth = info["depth"] + 1   # rec(DEPTH) .. rec(0)
        assert own == ["rec"] * depth + ["main", "<module>"], f"recursion probe: {Counter(own)}"
    else:
        expected = info["expected"] if info["qualnames"] else [perf_map_name_before_311(q) for q in info["expected"]]
        assert own == expected + ["<module>"], (
            f"shape_{shape}.py's EXPECTED {expected} disagrees with the interpreter's stack {own}"
        )
    foreign = [s for s in stack if not s.endswith(":" + filename)]
    package = FOREIGN_ALLOWED.get(shape)
    prefix = f"{info['stdlib']}/{package}/" if package else None
    strays = [s for s in foreign if not (prefix and _filename(s).startswith(prefix))]
    assert not strays, f"frames of shape_{shape}.py's stack that belong to neither it nor {prefix}: {strays}"
    if package:
        # the foreign frames sit between the script's coroutines and its <module>, nowhere else
        first = stack.index(foreign[0]) if foreign else len(stack) - 1
        assert all(s.endswith(":" + filename) for s in stack[:first]), stack
        assert all(not s.endswith(":" + filename) for s in stack[first:-1]), stack
    return info


def record(runner, cell, mode, shape):
    run = shape_run(cell, mode, shape, event=runner.event)
    result = runner.run(run.shell, timeout=900)
    died = f" (python3 was killed by signal {result.exit_code - 128})" if result.exit_code > 128 else ""
    assert result.exit_code == 0, (
        f"perf run of shape_{shape}.py failed in {runner.image}, exit {result.exit_code}{died}:\n"
        f"{run.shell}\n{result.stderr[-3000:]}"
    )
    return parse_perf_script((runner.src / run.output).read_text(errors="replace"))


_versions: dict[str, tuple[str, str]] = {}


def record_versions(runner, cell, record_property) -> None:
    """perf's and the kernel's versions, as the report shows them (asked once per cell).  A foreign cell
    records in its guest, whose kernel the GuestRunner names (guest_kernel); the container would show
    the host's."""
    if cell.foreign:
        return
    if cell.name not in _versions:
        result = runner.run(["sh", "-c", "perf version; uname -r"], perf=False)
        lines = result.stdout.split()
        perf = lines[2] if len(lines) > 2 and lines[:2] == ["perf", "version"] else "unknown"
        _versions[cell.name] = (perf, lines[-1] if lines else "unknown")
    record_property("perf_version", _versions[cell.name][0])
    record_property("kernel_version", _versions[cell.name][1])


def _innermost(samples, top=4):
    """The most common innermost py:: frames of the Python process (for failure messages)."""
    seen = Counter((s.python_frames() or ["<no py:: frame>"])[0] for s in samples if s.comm.startswith("python"))
    return seen.most_common(top)


def dwarf_reach(runner, cell, mode, record_property) -> int | None:
    """Python frames perf's dump can reach in this mode (None: frame pointers, or unknown): test_seed_chain's rule."""
    return dump_reach(runner, cell, perf_runs.stack_dump_bytes(cell, mode), record_property)


@pytest.mark.parametrize("shape", [s for s in SHAPES if s != "recursion"])
def test_catalogue_shape(cell_mode, shape, runner_for, record_property):
    cell, mode = cell_mode
    skip_foreign(cell, mode, shape)
    runner = runner_for(cell)
    record_versions(runner, cell, record_property)
    stack = probe(runner, shape)["stack"]
    reach = dwarf_reach(runner, cell, mode, record_property)
    chain = stack if reach is None or reach >= len(stack) else stack[:reach]
    samples = record(runner, cell, mode, shape)
    record_property("stack_depth", len(stack))
    assert_chain(chain_report(samples, chain), mode, f"{mode}, shape {shape}", record_property,
                 hint=f"; innermost py:: frames seen: {_innermost(samples)}")


# --------------------------------------------------------------------------
# recursion close to the limit


def _level_symbols(samples, rec: str) -> list[str]:
    """The native symbols between two consecutive py::rec frames, most common sequence."""
    levels = Counter()
    for s in samples:
        idx = [i for i, f in enumerate(s.frames) if f.symbol == rec]
        for a, b in zip(idx, idx[1:]):
            levels[tuple(f.symbol for f in s.frames[a + 1:b + 1])] += 1   # one level: below rec .. the next rec
    return list(levels.most_common(1)[0][0]) if levels else []


def _frame_bytes(disassembly: str) -> int:
    """Stack bytes of one call of a function: return address + pushes + its `sub ..,%rsp` (one made before
    any call, jump or return: what runs on every call)."""
    pushes = 0
    for line in disassembly.splitlines():
        if "\tpush " in line or " push " in line:
            pushes += 1
        if perf_runs.frame_allocation(line) is not None:
            return 8 + 8 * pushes + perf_runs.frame_allocation(line)
        if "\tcall" in line or " call " in line or "\tret" in line or re.search(r"\tj[a-z]+\s", line):
            break
    return 8 + 8 * pushes


def _fp_reach(runner, samples, rec) -> tuple[int, dict]:
    result = runner.run(["cat", "/proc/sys/kernel/perf_event_max_stack"], perf=False)
    max_stack = int(result.stdout.strip())
    spacing = [b - a for s in samples
               for idx in [[i for i, f in enumerate(s.frames) if f.symbol == rec]]
               for a, b in zip(idx, idx[1:])]
    # No two nested py::rec frames in any sample: the spacing cannot be measured; a Python level is at
    # least two native frames (trampoline + eval loop), so demand what that bound allows (and fail).
    per_level = statistics.median(spacing) if spacing else 2
    reach = int(max_stack // per_level) - 1
    return reach, {"perf_event_max_stack": max_stack, "native_frames_per_level": per_level,
                   "measured": bool(spacing)}


def _dwarf_reach_levels(runner, cell, samples, rec, record_property) -> tuple[int, dict]:
    symbols = [s for s in _level_symbols(samples, rec) if not s.startswith("py::")]
    if not symbols:
        # no sample holds two nested py::rec frames: fall back to the seed's rule (eval frames only,
        # an upper bound), which fails the test wherever the dump holds two eval frames
        reach = perf_runs.dwarf_reachable_python_frames(cell, eval_frame_bytes(runner, cell, record_property)) or 1
        return reach, {"level_bytes": None, "fallback": "eval frame only"}
    sizes = {}
    for sym in symbols:
        result = runner.run(perf_runs.objdump_command(PYTHON, sym), perf=False)
        sizes[sym] = _frame_bytes(result.stdout) if result.stdout.strip() else None
    known = [v for v in sizes.values() if v]
    stack = cell.variant.dwarf_stack_size or perf_runs.DEFAULT_DWARF_STACK
    if not known:
        reach = perf_runs.dwarf_reachable_python_frames(cell, eval_frame_bytes(runner, cell, record_property)) or 1
        return reach, {"level_bytes": None, "level_functions": sizes, "fallback": "eval frame only"}
    # the trampoline (the py::rec symbol itself) keeps a frame record: 16 bytes
    per_level = sum(known) + 16
    # less one level for the leaf's own callees, as for frame pointers: the dump starts at the
    # sampled stack pointer, and the leaf's work (time.perf_counter(), the long arithmetic;
    # real calls at -O0) sits below the first eval frame (3.13 at -O0: 65528 // 18800 = 3
    # levels on paper; in one run 3600 of 3634 samples held 2)
    reach = max(1, stack // per_level - 1)
    return reach, {"dwarf_stack": stack, "level_bytes": per_level, "level_functions": sizes}


def _stack_budget(runner, cell, depth: int, record_property) -> str:
    """Why a deep recursion may have crashed: C stack limit against eval frames (each Python call
    under a perf trampoline is a C call of the eval loop, not inlined)."""
    limit = SHAPE_C_STACK_KB
    frame = eval_frame_bytes(runner, cell, record_property)
    need = f"{depth} x {frame} = {depth * frame // 1024} KiB" if frame else "unknown"
    return (f"C stack limit (ulimit -s): {limit} KiB; {depth} nested Python frames need at least "
            f"{need} of {perf_runs.EVAL_FUNCTION} frames alone")


def test_catalogue_deep_recursion(cell_mode, runner_for, record_property):
    cell, mode = cell_mode
    shape = "recursion"
    skip_foreign(cell, mode, shape)
    runner = runner_for(cell)
    record_versions(runner, cell, record_property)
    stack = probe(runner, shape)["stack"]
    rec = stack[0]
    try:
        recorded = record(runner, cell, mode, shape)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_stack_budget(runner, cell, len(stack), record_property)}") from None
    samples = [s for s in recorded if s.comm.startswith("python")]
    inside = [s for s in samples if s.python_frames()[:1] == [rec]]
    frames_reach, frames_why = _fp_reach(runner, inside, rec)
    if mode == "perf_jit":
        reach, why = _dwarf_reach_levels(runner, cell, inside, rec, record_property)
        # the callchain perf keeps is also cut at perf_event_max_stack entries, which a build with
        # more native frames per Python level (--with-pydebug: nothing inlined) reaches first
        if frames_reach < reach:
            reach, why = frames_reach, dict(why, limited_by=frames_why)
    else:
        reach, why = frames_reach, frames_why
    required = min(MIN_NESTED_RECURSION, reach)
    print(f"unwinder reach: {reach} Python levels ({why}); demanded nested py::rec frames: {required}")
    max_stack, per_level = frames_why["perf_event_max_stack"], frames_why["native_frames_per_level"]

    def own_reach(s) -> int | None:
        """The levels a chain the kernel cut at perf_event_max_stack entries holds above its first py::rec
        frame (the leaf's callees below it take more entries in some samples than in others); None for a
        chain the kernel did not cut."""
        if len(s.frames) < max_stack:
            return None
        first = next(i for i, f in enumerate(s.frames) if f.symbol == rec)
        return int((max_stack - first) // per_level) - 1

    def nested(s):
        frames = s.python_frames()
        if frames != stack[:len(frames)]:
            return False
        levels = sum(1 for f in frames if f == rec)
        cut = own_reach(s)
        return levels >= (required if cut is None else min(required, cut))

    good = [s for s in inside if nested(s)]
    fraction = len(good) / len(inside) if inside else 0.0
    required_fraction = min_chain_fraction(mode)
    depths = Counter(sum(1 for f in s.python_frames() if f == rec) for s in inside)
    record_property("required_nested", required)
    record_property("chain_fraction", round(fraction, 4))
    record_property("min_chain_fraction", required_fraction)
    record_property("inside_leaf", len(inside))
    record_property("process_samples", len(samples))
    record_property("max_nested", max(depths) if depths else 0)
    summary = (f"{len(good)} of {len(inside)} samples inside {rec} show >= {required} nested rec frames (or, "
               f"where the kernel cut the chain at {max_stack} entries, as many as fit above the leaf's callees) "
               f"and nothing else ({fraction:.1%}); {len(inside)} of {len(samples)} samples inside it; "
               f"nested-depth histogram (top): {depths.most_common(4)}")
    print(summary)
    assert len(samples) >= 50, f"too few samples of the Python process: {summary}"
    assert len(inside) >= MIN_COVERAGE * len(samples), (
        f"{rec} is missing from most samples: {summary}; innermost py:: frames seen: {_innermost(samples)}"
    )
    assert fraction >= required_fraction, (
        f"deep recursion chain broken ({mode}): {summary}; {required_fraction:.0%} demanded")

"""The profilers people pick instead of perf, side by side with it on the same workloads and interpreter.

`python -m cpython_perf bench profilers --cell 3.13-fp --cell 3.11-fp --stock sid-3.15`
(`nox -s bench-profilers -- ...`) runs benchmarks/profiler_workloads.py (the seed chain, a program whose time is
in C extensions, an asyncio service, a process pool) in each target's image, without a profiler and under each
profiler that can run there, every one sampling at RATE Hz:

    perf     `perf record -g` of `python -X perf` and, with dwarf call graphs and perf inject --jit, of
             `python -X perf_jit`, for each backend the interpreter offers (frame pointers: perf's kernel
             unwinder; perf_jit: the jitdump's unwind info)
    py-spy   (pinned in matrix.yaml `profilers:`), reading the interpreter's frames from outside, with and
             without --native (which unwinds the C stack too)
    Austin   (austin-dist, pinned likewise), reading the frames from outside as py-spy does
    profiling.sampling  CPython 3.15's own sampling profiler (`python -m profiling.sampling run --native`)

Workers are followed where the profiler can follow them (perf does by itself; py-spy --subprocesses, Austin
-C, profiling.sampling --subprocesses).  Each round runs every workload once without a profiler and once
under each profiler, one after another in one container (A B C ... per workload, ROUNDS rounds), so drift of
the machine hits every side alike; the workload times its own work (benchmarks/profiler_workloads.py), so
interpreter start-up and a profiler's attach are not in the figure.

Per target, workload and profiler:
- slowdown: per round, the workload's time under the profiler / its time without one in the same round; the
  median of those ratios and their quartiles;
- chain: of the samples whose innermost frame of the workload's file is its hot function, the share that carry
  the workload's whole chain (the file's frames, innermost first; profiler_workloads.WORKLOADS);
- C: of those samples, the share whose innermost frame is native code, i.e. the profiler shows which C
  function the hot Python function is in (named, or an unnamed `<native>` marker);
- kernel: of all samples, the share with a kernel frame.

A profiler that does not run on a target (its first run fails: an interpreter it does not read) is shown with
what it said, and not run again.  Writes results/bench/profilers-<UTC timestamp>.json; BENCHMARKS.md shows the
newest such file's table.
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import host
from ..check import viewer_readers
from ..check.external import ExternalTarget, ensure_stock_image
from ..errors import DriverError
from ..image import pipeline, tools
from ..matrix import PROJECT_ROOT, Cell, Matrix, version_tuple
from ..record import austin, perf_event, perf_runs, py_spy
from ..record.perf_samples import PERF_SCRIPT_FIELDS, parse_perf_script
from ..run import containers
from . import common

GROUP = "profilers"   # results/bench/profilers-<UTC time>.json
BENCH_DIR = PROJECT_ROOT / "benchmarks"
WORKLOAD_SCRIPT = "/bench/profiler_workloads.py"
WORKLOAD_FILE = Path(WORKLOAD_SCRIPT).name
RATE = 999            # samples a second, every profiler
ROUNDS = 10
SCALE = 1.0
RUN_TIMEOUT = 600     # seconds of one profiled run (the shell's `timeout`)
SAMPLING_SINCE = (3, 15)   # profiling.sampling is in the standard library from 3.15

# Kinds of frame in a normalised stack: (kind, function, file), innermost first
PY, NATIVE, KERNEL = "py", "native", "kernel"


def workloads() -> dict[str, tuple[str, list[str]]]:
    """profiler_workloads.WORKLOADS (workload -> (hot function, chain innermost first)), from the program the
    containers run, so that the bench and the program cannot disagree."""
    spec = importlib.util.spec_from_file_location("profiler_workloads", BENCH_DIR / WORKLOAD_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.WORKLOADS


# --------------------------------------------------------------------------
# Reading what each profiler wrote: stacks of (kind, function, file), innermost first, with a count


KERNEL_HALF = 1 << 63   # x86-64's and arm64's kernel addresses: perf in a container may not name them


def perf_stacks(text: str) -> list[tuple[list[tuple[str, str, str]], int]]:
    """The samples of perf script's text (the python processes'), each frame kinded: py:: symbols of the perf
    map or jitdump are Python (py::<qualname>:<file>); kernel frames by their dso ([kernel.kallsyms]) or, where
    the container cannot read the kernel's symbols ([unknown]), by their address; the rest native."""
    out = []
    for sample in parse_perf_script(text):
        if not sample.comm.startswith("python"):
            continue
        frames = []
        for frame in sample.frames:
            if frame.is_python:
                name, _, filename = frame.symbol[4:].rpartition(":")
                frames.append((PY, name, filename))
            elif frame.dso.startswith("[kernel") or frame.ip >= KERNEL_HALF:
                frames.append((KERNEL, frame.symbol, frame.dso))
            else:
                frames.append((NATIVE, frame.symbol, frame.dso))
        out.append((frames, 1))
    return out


def py_spy_stacks(raw: str) -> list[tuple[list[tuple[str, str, str]], int]]:
    """py-spy's raw output: `function (file:line)` is Python; with --native, `function (dso)` and
    `0xADDRESS (?)` are native."""
    return [([(PY if python else NATIVE, function, file) for function, file, python in frames], n)
            for frames, n in py_spy.raw_frames(raw)]


def austin_stacks(text: str) -> list[tuple[list[tuple[str, str, str]], int]]:
    """Austin's collapsed text (mojo2austin's): every frame is Python (this Austin does not unwind C)."""
    return [([(PY, f, file) for f, file in frames], n) for frames, n in austin.collapsed_stacks(text)]


def sampling_stacks(text: str) -> list[tuple[list[tuple[str, str, str]], int]]:
    """profiling.sampling's --collapsed text: `tid:N;frame;...;frame COUNT`, outermost first, a frame
    `file:qualname:line`, or `<native>` (with --native: a call into C, unnamed) or `<GC>`."""
    out = []
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = []
        for part in stack.split(";")[1:]:   # after tid:N
            rest, _, lineno = part.rpartition(":")
            filename, _, function = rest.rpartition(":")
            if lineno.isdigit() and filename:
                frames.append((PY, function, filename))
            else:
                frames.append((NATIVE, part, ""))
        out.append((frames[::-1], int(count)))
    return out


# Native frames that are the interpreter running Python code, not C code it calls
EVAL_LOOP = {perf_runs.EVAL_FUNCTION, perf_runs.EVAL_LOOP_BODY, "_PyEval_EvalFrame", "_PyEval_Vector"}
UNNAMED = ("<native>", "[unknown]", "0x", "?")


def attribution(stacks, hot_chain: list[str], filename: str = WORKLOAD_FILE) -> dict:
    """Counts of the module docstring's chain, C and kernel measures over stacks.  Frames of filename are
    matched by the file's base name (profiling.sampling writes base names, the others full paths).  C: the
    innermost frame is native and not the eval loop (named), or a marker or address with no name (unnamed)."""
    counts = dict.fromkeys(("samples", "inside", "full_chain", "inside_c", "inside_c_unnamed", "kernel"), 0)
    for frames, n in stacks:
        counts["samples"] += n
        if any(kind == KERNEL for kind, _, _ in frames):
            counts["kernel"] += n
        mine = [f for kind, f, file in frames if kind == PY and Path(file).name == filename]
        if not mine or mine[0] != hot_chain[0]:
            continue
        counts["inside"] += n
        if mine[:len(hot_chain)] == hot_chain:
            counts["full_chain"] += n
        kind, function, _ = frames[0]
        if kind != PY and function not in EVAL_LOOP:
            counts["inside_c_unnamed" if function.startswith(UNNAMED) else "inside_c"] += n
    return counts


def add_counts(total: dict | None, more: dict) -> dict:
    return dict(more) if total is None else {k: total[k] + more[k] for k in total}


# --------------------------------------------------------------------------
# The profilers and their command lines


@dataclass(frozen=True)
class Profiler:
    key: str          # results key, also the run's directory name
    label: str        # what the table says
    tool: str         # perf, py-spy, austin, profiling.sampling, none
    mode: str | None = None       # perf's backend (-X perf / -X perf_jit)
    native: bool = False          # py-spy --native

    @property
    def output(self) -> str:
        return {"perf": "perf.script.txt", "py-spy": "py-spy.txt", "austin": "austin.mojo",
                "profiling.sampling": "sampling.txt"}.get(self.tool, "")


BASELINE = Profiler("none", "no profiler", "none")


@dataclass
class BenchTarget:
    """An interpreter to compare the profilers on: a cell's, or a stock one's (matrix.yaml stock:)."""

    name: str
    image: str
    python: str
    version: str
    spec: object                 # the Cell or ExternalTarget perf_runs.record_options reads
    backends: tuple[str, ...]
    free_threaded: bool = False


def profilers_of(target: BenchTarget) -> tuple[list[Profiler], dict[str, str]]:
    """The profilers to run on target, and those not applicable there with why."""
    run = [BASELINE, *(Profiler(f"perf-{m}", f"perf, -X {m}", "perf", mode=m) for m in target.backends)]
    skipped = {}
    if target.free_threaded:
        # the same limits as the conformance suite's tests of these profilers (benfred/py-spy#711;
        # P403n1x87/austin#409 came after austin-dist 4.0.0)
        skipped["py-spy"] = "does not read a free-threaded build (benfred/py-spy#711)"
        skipped["austin"] = "Austin 4.0.0 does not read a free-threaded build (P403n1x87/austin#409)"
    else:
        run += [Profiler("py-spy", "py-spy", "py-spy"), Profiler("py-spy-native", "py-spy --native", "py-spy", native=True),
                Profiler("austin", "Austin", "austin")]
    if version_tuple(target.version) >= SAMPLING_SINCE:
        run.append(Profiler("profiling.sampling", "profiling.sampling --native", "profiling.sampling"))
    return run, skipped


def profiled_command(target: BenchTarget, profiler: Profiler, workload: str, out: str, event: str | None,
                     scale: float) -> str:
    """The shell commands of one run, writing into directory out (timing.json, the profiler's output)."""
    children = workload == "process_pool"
    xoption = ["-X", profiler.mode] if profiler.mode else []
    program = [WORKLOAD_SCRIPT, workload, f"{out}/timing.json", repr(scale)]
    python = [target.python, *xoption, *program]
    if profiler.tool == "none":
        return shlex.join(python)
    if profiler.tool == "perf":
        options = perf_runs.record_options(target.spec, profiler.mode, event, frequency=RATE)
        words = " ".join(o if o == "$(dwarf_mmap)" else shlex.quote(o) for o in options)
        data = f"{out}/perf.data"
        lines = [f"perf record -q {words} -o {data} -- {shlex.join(python)}"]
        if profiler.mode == "perf_jit":
            lines.append(f"perf inject -i {data} --jit --output {out}/perf.jit.data")
            data = f"{out}/perf.jit.data"
        lines.append(f"perf script -F {PERF_SCRIPT_FIELDS} -i {data} > {out}/{profiler.output}")
        lines.append(f"rm -f {out}/perf.data {out}/perf.jit.data /tmp/perf-*.map /tmp/jit-*.dump /tmp/jitted-*.so")
        return f"{perf_runs.DWARF_MMAP_FUNCTION}\n" + " && ".join(lines)
    if profiler.tool == "py-spy":
        argv = py_spy.record_command(f"{py_spy.MOUNT}/py-spy", python, f"{out}/{profiler.output}", RATE,
                                     native=profiler.native, subprocesses=children)
        return shlex.join(argv)
    if profiler.tool == "austin":
        argv = austin.record_command(f"{austin.MOUNT}/austin", python, f"{out}/{profiler.output}",
                                     round(1e6 / RATE), children=children)
        return shlex.join(argv)
    if profiler.tool == "profiling.sampling":
        argv = [target.python, "-m", "profiling.sampling", "run", "-r", str(RATE), "--native",
                *(["--subprocesses"] if children else []), "--collapsed", "-o", f"{out}/{profiler.output}", *program]
        return shlex.join(argv)
    raise ValueError(f"unknown profiler tool {profiler.tool!r}")


def round_shell(target: BenchTarget, plan: list[tuple[str, Profiler]], round_no: int, event: str | None,
                scale: float) -> str:
    """One round in one container: each (workload, profiler) of plan in order, its exit status in rc; a
    profiler whose run failed once (/src/failed/<key>) is not run again."""
    lines = ["mkdir -p /src/failed"]
    # the sides of each workload in another order each round (a rotation), so that no side is always the first
    # after another workload's runs
    order = [[(w, p) for w, p in plan if w == workload] for workload in dict.fromkeys(w for w, _ in plan)]
    plan = [side for sides in order for side in sides[round_no % len(sides):] + sides[:round_no % len(sides)]]
    for workload, profiler in plan:
        out = f"/src/r{round_no}/{workload}/{profiler.key}"
        command = profiled_command(target, profiler, workload, out, event, scale)
        lines.append(
            f"if [ ! -e /src/failed/{profiler.key} ]; then mkdir -p {out}; "
            f"( timeout {RUN_TIMEOUT} sh -c {shlex.quote(command)} ) > {out}/stdout 2> {out}/stderr; rc=$?; "
            f"echo $rc > {out}/rc; [ $rc = 0 ] || cp {out}/stderr /src/failed/{profiler.key}; fi")
    # child profilers (profiling.sampling --subprocesses) may still be writing after the last command returned
    lines.append("sleep 2")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------
# Running


def cell_target(cell: Cell) -> BenchTarget:
    if cell.foreign or cell.build_only or not cell.backends:
        raise DriverError(f"{cell.name}: the profilers are compared on cells of this host's arch that offer a "
                          "perf backend")
    return BenchTarget(cell.name, cell.image, "python3", cell.recipe.version, cell, tuple(cell.backends),
                       free_threaded="--disable-gil" in cell.configure_args())


def stock_target(client, matrix: Matrix, name: str, log) -> BenchTarget:
    stock = matrix.stock.get(name)
    if stock is None:
        raise DriverError(f"no stock interpreter {name!r} in {matrix.path} (known: {', '.join(matrix.stock)})")
    image = ensure_stock_image(client, stock.suite, stock.package, stock.perf_suite, log=log)
    return BenchTarget(name, image, stock.python, stock.version, ExternalTarget(image, stock.python),
                       tuple(stock.modes))


def _read_output(profiler: Profiler, directory: Path, scratch: Path) -> list:
    if profiler.tool == "perf":
        return perf_stacks((directory / profiler.output).read_text(errors="replace"))
    if profiler.tool == "py-spy":
        return py_spy_stacks((directory / profiler.output).read_text(errors="replace"))
    if profiler.tool == "austin":
        return austin_stacks(viewer_readers.austin_text(directory / profiler.output, scratch / "austin.txt"))
    if profiler.tool == "profiling.sampling":
        stem = Path(profiler.output).stem   # children write sampling_<pid>.txt beside it
        stacks = []
        for path in sorted(directory.glob(f"{stem}*.txt")):
            stacks += sampling_stacks(path.read_text(errors="replace"))
        return stacks
    return []


def measure_target(client, matrix: Matrix, target: BenchTarget, rounds: int, scale: float, names: list[str],
                   root: Path, log) -> dict:
    chains = workloads()
    profilers, skipped = profilers_of(target)
    cap = containers.perf_capability(client, target.image)
    event = perf_event.host_event(client, target.image, cap).event
    tool_mounts = {tools.py_spy_binary(matrix, log=log).parent: py_spy.MOUNT}
    if any(p.tool == "austin" for p in profilers):
        try:
            tool_mounts[tools.austin_binary(matrix, log=log).parent] = austin.MOUNT
            viewer_readers.mojo2austin()
        except viewer_readers.ReaderMissing as exc:
            profilers = [p for p in profilers if p.tool != "austin"]
            skipped["austin"] = str(exc)
    plan = [(w, p) for w in names for p in profilers]
    work = containers.make_workdir(root / target.name)
    src, tmp = work / "src", work / "tmp"
    entry = {"python": target.version, "image": target.image, "skipped": skipped, "failed": {},
             "profilers": {p.key: {"label": p.label, "tool": p.tool} for p in profilers},
             "workloads": {w: {p.key: {"seconds": [], "counts": None} for p in profilers} for w in names}}
    for round_no in range(1, rounds + 1):
        log(f"{target.name}: round {round_no} of {rounds}")
        result = containers.run(client, target.image, round_shell(target, plan, round_no, event, scale),
                                mounts={src: "/src", tmp: "/tmp"}, read_only={BENCH_DIR: "/bench", **tool_mounts},
                                cap_add=[cap, austin.CAPABILITY], timeout=RUN_TIMEOUT * len(plan))
        result.check(f"round {round_no} in {target.image}")
        for workload, profiler in plan:
            out = src / f"r{round_no}" / workload / profiler.key
            if not (out / "rc").is_file():
                continue   # failed in an earlier round
            rc = (out / "rc").read_text().strip()
            if rc != "0":
                said = (out / "stderr").read_text(errors="replace").strip().splitlines()
                entry["failed"][profiler.key] = f"exit {rc}: {said[-1][-300:] if said else '(nothing on stderr)'}"
                continue
            side = entry["workloads"][workload][profiler.key]
            side["seconds"].append(json.loads((out / "timing.json").read_text())["seconds"])
            if profiler.tool != "none":
                hot_chain = chains[workload][1]
                side["counts"] = add_counts(side["counts"], attribution(_read_output(profiler, out, out), hot_chain))
            shutil.rmtree(out, ignore_errors=True)
    for workload in names:   # a profiler that failed after a good round: its earlier rounds do not pair fully
        for key in entry["failed"]:
            entry["workloads"][workload].get(key, {}).update(seconds=[])
    return entry


def measure(matrix: Matrix, cells: list[Cell], stock: list[str], rounds: int = ROUNDS, scale: float = SCALE,
            only: list[str] | None = None, log=print) -> dict:
    """Every measurement of the module's docstring for the cells and stock interpreters; the results."""
    if rounds < 1:
        raise DriverError(f"--rounds must be at least 1, not {rounds}")
    names = list(workloads())
    if only:
        unknown = [w for w in only if w not in names]
        if unknown:
            raise DriverError(f"unknown workload {', '.join(unknown)} (known: {', '.join(names)})")
        names = [w for w in names if w in only]
    client = host.docker_client(log)
    targets = [cell_target(c) for c in cells]
    for cell, target in zip(cells, targets):
        target.image = pipeline.ensure_cell_image(cell, matrix, log)
    targets += [stock_target(client, matrix, name, log) for name in stock]
    if not targets:
        raise DriverError("no target: name cells (--cell) or stock interpreters (--stock)")
    out = {"created": common.utc_stamp(), "machine": common.machine_info(),
           "settings": {"rate": RATE, "rounds": rounds, "scale": scale},
           "tools": {"py-spy": matrix.profilers.py_spy["version"], "austin": matrix.profilers.austin["version"]},
           "workloads": {w: {"hot": h, "chain": c} for w, (h, c) in workloads().items() if w in names},
           "targets": {}}
    root = Path(tempfile.mkdtemp(prefix="cpython-perf-profilers-"))
    try:
        for target in targets:
            out["targets"][target.name] = measure_target(client, matrix, target, rounds, scale, names, root, log)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


# --------------------------------------------------------------------------
# Analysis and report


def slowdown(profiled: list[float], baseline: list[float]) -> dict | None:
    """Per-round ratios profiled/baseline (rounds both have), their median and quartiles."""
    ratios = common.paired_ratios(baseline, profiled)
    if not ratios:
        return None
    stats = common.summarize(ratios)
    return {"pairs": len(ratios), "median": stats["median"], "q1": stats["q1"], "q3": stats["q3"]}


def _share(part: int, whole: int) -> str:
    if not whole:
        return "-"
    return "<1%" if 0 < part / whole < 0.005 else f"{part / whole:.0%}"


def _unnamed(counts: dict) -> str:
    n = counts["inside_c_unnamed"]
    return f" (+{_share(n, counts['inside'])} unnamed)" if n else ""


TABLE_HEAD = ["| interpreter | workload | profiler | slowdown (median [quartiles], pairs) | chain | C | kernel | "
              "samples |", "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]


def table_rows(results: dict, names: list[str] | None = None) -> list[str]:
    """The side-by-side table's rows of a run: a row per target (those of names, default all), workload and
    profiler."""
    lines = []
    for name, target in results["targets"].items():
        if names is not None and name not in names:
            continue
        for workload, sides in target["workloads"].items():
            baseline = sides.get(BASELINE.key, {}).get("seconds", [])
            for key, side in sides.items():
                if key == BASELINE.key:
                    continue
                label = target["profilers"][key]["label"]
                if key in target["failed"]:
                    lines.append(f"| {name} | {workload} | {label} | does not run: {target['failed'][key]} "
                                 "| | | | |")
                    continue
                s = slowdown(side["seconds"], baseline)
                c = side["counts"] or attribution([], ["-"])
                cost = f"{s['median']:.3f} [{s['q1']:.3f}-{s['q3']:.3f}], {s['pairs']}" if s else "-"
                chain = f"{_share(c['full_chain'], c['inside'])} of {c['inside']}" if c["inside"] else \
                    "0 samples in the hot function"
                lines.append(f"| {name} | {workload} | {label} | {cost} | {chain} | {_share(c['inside_c'], c['inside'])}"
                             f"{_unnamed(c)} | {_share(c['kernel'], c['samples'])} | {c['samples']} |")
        for tool, why in target["skipped"].items():
            lines.append(f"| {name} | all | {tool} | not applicable: {why} | | | | |")
    return lines


def render_markdown(results: dict, source: str = "") -> str:
    s = results["settings"]
    chains = "; ".join(f"{w}: {' <- '.join(v['chain'])}" for w, v in results["workloads"].items())
    lines = [
        "## Side by side: perf and the profilers people pick instead",
        "",
        f"From {source or 'a profilers run'} ({results['created']}; `python -m cpython_perf bench profilers`). "
        f"benchmarks/profiler_workloads.py (--scale {s['scale']}) without a profiler and under each profiler, "
        f"every one at {s['rate']} Hz, {s['rounds']} rounds interleaved (every side of a workload once a round, in "
        f"one container), py-spy {results['tools']['py-spy']}, Austin {results['tools']['austin']}. Slowdown: "
        "the workload's own time under the profiler / without one in the same round, median and quartiles of "
        "the rounds. Chain: of the samples whose innermost frame of the workload's file is its hot function, the "
        "share carrying the whole chain (" + chains + "). C: of those, the share whose innermost frame is native "
        "code (the C function the hot one is in). Kernel: of all samples, the share with a kernel frame.",
        "",
        *TABLE_HEAD,
        *table_rows(results),
    ]
    return "\n".join(lines) + "\n"


def summary_lines(runs: list[tuple[dict, str, list[str]]], heading: str = "##") -> list[str]:
    """The table for BENCHMARKS.md from runs, newest first: (results, link to its page, the targets it gives,
    those no newer run measured)."""
    sources = "; ".join(f"[{r['created']}]({link}): {', '.join(names)}, each profiler at {r['settings']['rate']} Hz, "
                        f"{r['settings']['rounds']} interleaved rounds" for r, link, names in runs)
    return [f"{heading} Side by side: perf and the profilers people pick instead", "",
            f"Each interpreter from the newest run that measured it (`python -m cpython_perf bench profilers`; what "
            f"each column measures is on a run's page), every profiler on the same interpreter: {sources}.", "",
            *TABLE_HEAD, *(row for r, _, names in runs for row in table_rows(r, names)), ""]


def latest_results(directory: Path = common.RESULTS_DIR) -> Path | None:
    return common.latest_group_results(directory, GROUP)


# The group's command line (cpython_perf.bench.command): `python -m cpython_perf bench profilers ...`


def arguments(parser) -> None:
    parser.add_argument("--stock", action="append", default=[], metavar="NAME",
                        help="a stock interpreter of matrix.yaml stock: to compare on too (repeatable), e.g. sid-3.15")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"interleaved rounds (default {ROUNDS})")
    parser.add_argument("--scale", type=float, default=SCALE, help=f"amount of work of each workload (default {SCALE})")
    parser.add_argument("--workload", action="append", default=[], metavar="NAME",
                        help="only this workload (repeatable; default all)")


def run(matrix, cells, args, log) -> dict:
    cells = cells if args.cells or not args.stock else []
    return measure(matrix, cells, args.stock, args.rounds, args.scale, args.workload, log)


def report(results: dict, path: Path) -> None:
    print(render_markdown(results, str(path)))

"""Overhead as instruction counts (valgrind's cachegrind): what wall-clock timing on a shared host cannot resolve.

Wall-clock medians on this 2-core VM spread by 5-40% (interquartile range; BENCHMARKS.md's timing tables),
so a 1% target can be neither met nor missed there.  An instruction count is close to deterministic:
`python -m cpython_perf bench instructions --cell 3.11-fp ...` (`nox -s bench-instructions -- ...`) plans the same
comparisons as cpython_perf.bench.wallclock (mode active vs inactive, patched vs vanilla, fp vs release), and for
each configuration and workload counts the instructions of ONE run of the workload's kernel as

    I(workloads.py --run W --repeat 2) - I(workloads.py --run W --repeat 1)

under `valgrind --tool=cachegrind --cache-sim=no`, so that interpreter start-up, imports and the warm-up
run cancel out.  PYTHONHASHSEED=0 makes both runs hash alike.  The count includes the trampoline's own
instructions (valgrind translates the JIT-written trampolines like any code); it does not include what a
slower memory access or a mispredicted branch costs, which is why the wall-clock run is kept beside it.

valgrind comes from the cell's own Debian archive: a per-cell image FROM the cell's image plus
`apt-get install valgrind`, tagged cpython-perf-valgrind:<cell>-<cell image id> only when built.
Ratios and targets are cpython_perf.bench.common's (analyse / verdict), on the counts instead of the times.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

from ..image import labels, pipeline
from ..image.docker_build import docker_build, image_exists, scratch_dir
from ..run import containers
from .. import host
from . import common
from ..errors import DriverError
from ..matrix import Cell, Matrix

RESULTS_DIR = common.RESULTS_DIR
GROUP = "instructions"   # results/bench/instructions-<UTC time>.json
VALGRIND_REPOSITORY = "cpython-perf-valgrind"
DEFAULT_SCALE = 0.1
CPU_SHARES = 64   # counts do not depend on time: let timed work beside them have the CPU
_I_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def parse_instructions(stderr: str) -> int:
    """The 'I refs' total cachegrind prints at exit."""
    found = _I_REFS.findall(stderr)
    if not found:
        raise DriverError(f"cachegrind printed no 'I refs' line:\n{stderr[-1500:]}")
    return int(found[-1].replace(",", ""))


def valgrind_image(client, cell_image: str, log=print) -> str:
    image = client.images.get(cell_image)
    tag = f"{VALGRIND_REPOSITORY}:{cell_image.split(':', 1)[1]}-{image.id.split(':')[-1][:12]}"
    if image_exists(client, tag):
        return tag
    with tempfile.TemporaryDirectory(prefix="cpython-perf-valgrind-", dir=scratch_dir()) as ctx:
        Path(ctx, "Dockerfile").write_text(
            f"# valgrind beside the interpreter of {cell_image} (cpython_perf.bench.instructions)\n"
            f"FROM {image.id}\n"
            "RUN apt-get update -qq \\\n"
            " && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends valgrind \\\n"
            " && rm -rf /var/lib/apt/lists/* && valgrind --version\n")
        docker_build(client, Path(ctx), tag, log=lambda line: None)
    log(f"built {tag}")
    return tag


def cell_images(client, matrix: Matrix, cells: list[Cell], existing: bool, log=print) -> dict[str, dict]:
    """Per cell: the image measured, its id and creation time, and whether its inputs digest matches this tree.

    existing: measure the tagged image as it is (an error where there is none) instead of rebuilding a stale one,
    for a shared checkout whose patches change under a long run; the results say which images were stale."""
    out = {}
    for cell in cells:
        if existing:
            if not image_exists(client, cell.image):
                raise DriverError(f"{cell.image} does not exist: build it (nox -s build-{cell.name}) or drop --existing-images")
            inputs = pipeline.cell_inputs(cell, matrix.base_suite, None, lambda *_: None, matrix)
            current = labels.image_is_current(client, inputs)
            tag = cell.image
        else:
            tag, current = pipeline.ensure_cell_image(cell, matrix, log), True
        image = client.images.get(tag)
        out[cell.name] = {"image": tag, "image_id": image.id, "image_created": image.attrs.get("Created", ""),
                          "current": current}
        if not current:
            log(f"{tag}: built from other inputs than this tree's (measured as it is, --existing-images)")
    return out


def count(client, image: str, config: common.Configuration, workload: str, repeat: int, scale: float) -> int:
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
               *common.workload_command(config, [workload], repeat, scale)]
    result = containers.run(client, image, command, workdir="/tmp", env={"PYTHONHASHSEED": "0"},
                            mounts={common.BENCH_DIR: common.CONTAINER_BENCH_DIR}, timeout=3600,
                            cpu_shares=CPU_SHARES)
    result.check(f"cachegrind of {config.key} {workload}")
    common.parse_output(config, result.stdout)   # the trampoline is in the state the configuration says
    return parse_instructions(result.stderr)


def measure(matrix: Matrix, cells, workloads: dict[str, str], rounds: int, scale: float, kinds=common.KINDS,
            log=print, existing_images: bool = False) -> dict:
    plan = common.plan_comparisons(matrix, cells, kinds)
    if not plan:
        raise DriverError(f"nothing to compare among {', '.join(c.name for c in cells)}")
    configs = common.configurations(plan)
    client = host.docker_client(log)
    cells_used = list({c.cell.name: c.cell for c in configs}.values())
    measured = cell_images(client, matrix, cells_used, existing_images, log)
    vg_images = {name: valgrind_image(client, entry["image"], log) for name, entry in measured.items()}
    started = common.utc_stamp()
    counts = {c.key: {w: [] for w in workloads} for c in configs}
    raw = {c.key: {w: [] for w in workloads} for c in configs}
    for number in range(rounds):
        for config in configs:
            for workload in workloads:
                one = count(client, vg_images[config.cell.name], config, workload, 1, scale)
                two = count(client, vg_images[config.cell.name], config, workload, 2, scale)
                if two <= one:
                    raise DriverError(f"{config.key} {workload}: two runs counted {two:,} instructions, one {one:,}")
                counts[config.key][workload].append([two - one])
                raw[config.key][workload].append([one, two])
                log(f"round {number + 1}/{rounds} {config.key} {workload}: {two - one:,} instructions a run")
    results = {
        "created": started,
        "machine": common.machine_info(),
        "settings": {"rounds": rounds, "scale": scale, "workloads": list(workloads),
                     "order": [c.key for c in configs]},
        "workloads": dict(workloads),
        "cells": {cell.name: {"version": cell.version, "variant": cell.variant.name, "arch": cell.arch,
                              "support": cell.support, "vanilla": cell.vanilla, "image": vg_images[cell.name],
                              "image_current": measured[cell.name]["current"]}
                  for cell in cells_used},
        "configurations": {c.key: {"cell": c.cell.name, "label": c.label, "argv": list(c.argv)} for c in configs},
        "timings": counts,   # instructions of one kernel run: the shape common.analyse reads
        "raw_counts": raw,   # [I(repeat 1), I(repeat 2)] of each round
        "comparisons": [{"kind": c.kind, "a": c.a.key, "b": c.b.key} for c in plan],
    }
    results["comparisons"] = common.analyse(results)
    return results


def _spread(stats: dict) -> str:
    return f"{100 * (stats['max'] - stats['min']) / stats['median']:.2f}%"


def render_markdown(results: dict, source: str = "") -> str:
    analysed = common.analyse(results)
    s = results["settings"]
    lines = [
        '<a id="workloads-instructions"></a>',
        "## The project's own workloads as instruction counts (cachegrind)",
        "",
        f"From {source or 'an instruction-count run'} ({results['created']}; `python -m cpython_perf bench instructions`). "
        "Instructions of one run of each workload's kernel, I(--repeat 2) - I(--repeat 1) under "
        f"`valgrind --tool=cachegrind --cache-sim=no`, --scale {s['scale']}, PYTHONHASHSEED=0, {s['rounds']} round(s); "
        "ratio = B / A (above 1: B executes more instructions). Same comparisons and targets as the timing tables; "
        "spread = (max - min) / median over the rounds. Counts do not see cache or branch effects.",
        "",
        "| comparison | geometric mean B/A | target | verdict |",
        "| --- | ---: | --- | --- |",
    ]
    for entry in analysed:
        lines.append(f"| {entry['title']} | {entry['geomean']:.4f} | {entry['target']} | "
                     f"{common.verdict(entry['geomean'], entry['geomean_limit'])} |")
    lines += ["", "Geometric means B/A (instructions):", "", *common.ratio_chart(analysed, digits=4)]
    for entry in analysed:
        lines += ["", f"### {entry['title']} (instructions)", "",
                  f"A = `{entry['a']}`, B = `{entry['b']}`.", "",
                  "| workload | A | B | ratio B/A | spread A / B | target |",
                  "| --- | ---: | ---: | ---: | ---: | --- |"]
        for name, row in entry["workloads"].items():
            lines.append(f"| {name} | {row['a']['median']:,.0f} | {row['b']['median']:,.0f} | {row['ratio']:.4f} | "
                         f"{_spread(row['a'])} / {_spread(row['b'])} | {common.verdict(row['ratio'], row['limit'])} |")
        lines.append(f"| **geometric mean** | | | **{entry['geomean']:.4f}** | | "
                     f"{common.verdict(entry['geomean'], entry['geomean_limit'])} |")
    return "\n".join(lines) + "\n"


def latest_results(directory: Path = RESULTS_DIR) -> Path | None:
    return common.latest_group_results(directory, GROUP)


# The group's command line (cpython_perf.bench.command): `python -m cpython_perf bench instructions ...`


def arguments(parser) -> None:
    parser.add_argument("--rounds", type=int, default=2, help="rounds (default: 2)")
    parser.add_argument("--scale", type=float, default=DEFAULT_SCALE, help=f"workload size (default: {DEFAULT_SCALE})")
    parser.add_argument("--workloads", help="comma-separated workloads, or all (default: those the standard suite "
                                            "lacks, common.KEPT_WORKLOADS)")
    parser.add_argument("--kind", action="append", choices=common.KINDS, dest="kinds",
                        help="comparisons to make (repeatable; default: all)")
    parser.add_argument("--existing-images", action="store_true",
                        help="measure the cells' tagged images as they are, never rebuilding (results say which are "
                             "stale)")


def run(matrix, cells, args, log) -> dict:
    if args.rounds < 1 or args.scale <= 0:
        raise DriverError("--rounds must be at least 1 and --scale positive")
    workloads = common.select_workloads(args.workloads or "kept", common.available_workloads())
    return measure(matrix, cells, workloads, args.rounds, args.scale, tuple(args.kinds or common.KINDS), log=log,
                   existing_images=args.existing_images)


def report(results: dict, path: Path) -> None:
    for entry in results["comparisons"]:
        print(f"{entry['title']}: {entry['geomean']:.4f} {common.verdict(entry['geomean'], entry['geomean_limit'])}")


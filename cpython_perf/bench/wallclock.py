"""Runtime overhead of the perf trampolines, measured side by side in the cell images.

`python -m cpython_perf bench wallclock --cell 3.11-fp --cell 3.13-fp` (`nox -s bench -- ...`)
runs the stdlib-only workloads of benchmarks/workloads.py in the cell images and
compares configurations, i.e. a cell's python3 started one way:

- mode: on each selected cell that claims perf modes, every backend its
  interpreter offers (`-X perf`, `-X perf_jit`) against the same cell inactive;
- vanilla: a patched cell (inactive) against its vanilla twin, which is
  measured even when not selected;
- variant: fp against release of the same version, when both are selected.

Each round runs every configuration once, in a fresh container, in the same
order (A, B, A, B, ...), so that drift of the machine hits every side alike.
No perf record runs: `-X perf` writes /tmp/perf-PID.map in the container and
nothing reads it, so what is measured is the trampoline's own cost.

Per workload: the median and quartiles of each side's samples (rounds x
repeat), the ratio of medians B/A (above 1: B is slower), and the geometric
mean of the ratios.  Targets: patched-inactive vs vanilla <= 1.01; a
backport's `-X MODE` ratio no worse than native 3.13's on the same variant;
fp vs release <= 1.02 in geometric mean.

Writes results/bench/bench-<UTC timestamp>.json (machine, engine, interpreters,
raw timings, ratios) and BENCHMARKS.md; `--markdown FILE` rewrites
BENCHMARKS.md from such a file.
"""

from __future__ import annotations

from ..image import pipeline
from .. import host
from ..errors import DriverError
from ..matrix import Cell, Matrix
from . import common
from .common import (KINDS, NATIVE_REFERENCE, NOT_SIGNIFICANT, VANILLA_LIMIT, VARIANT_LIMIT, analyse,
                     available_workloads, configurations, machine_info, plan_comparisons, ratio_chart,
                     run_configuration, schedule, select_workloads, timed_verdict, utc_stamp, verdict)

GROUP = "bench"   # results/bench/bench-<UTC time>.json


def measure(matrix: Matrix, cells: list[Cell], workloads: dict[str, str], rounds: int, repeat: int,
            scale: float = 1.0, kinds=KINDS, log=print) -> dict:
    """Run the plan of the selected cells, interleaved, and return the results (raw timings and ratios).

    workloads maps each workload to run to its description.
    """
    plan = plan_comparisons(matrix, cells, kinds)
    if not plan:
        raise DriverError(f"nothing to compare among {', '.join(c.name for c in cells)} ({', '.join(kinds)}): "
                          "no perf mode claimed, no vanilla twin, no fp and release of one version")
    configs = configurations(plan)
    started = utc_stamp()
    client = host.docker_client(log)
    names = list(workloads)
    cells_used = list({c.cell.name: c.cell for c in configs}.values())
    images = {cell.name: pipeline.ensure_cell_image(cell, matrix, log) for cell in cells_used}
    timings: dict[str, dict[str, list[list[float]]]] = {c.key: {n: [] for n in names} for c in configs}
    seen: dict[str, dict] = {}
    for number, config in schedule(configs, rounds):
        log(f"round {number + 1}/{rounds}: {config.key}")
        out = run_configuration(client, images[config.cell.name], config, names, repeat, scale)
        seen[config.key] = out
        for name in names:
            timings[config.key][name].append(out["results"][name])
    pythons = {config.cell.name: seen[config.key]["python"] for config in configs}
    version = client.version()
    results = {
        "created": started,
        "machine": machine_info(),
        "engine": {"version": version.get("Version", "unknown"), "api_version": version.get("ApiVersion", "")},
        "settings": {"rounds": rounds, "repeat": repeat, "scale": scale, "workloads": names,
                     "order": [c.key for c in configs]},
        "workloads": dict(workloads),
        "cells": {
            cell.name: {"python": pythons[cell.name], "version": cell.version, "variant": cell.variant.name,
                        "arch": cell.arch, "support": cell.support, "vanilla": cell.vanilla,
                        "image": images[cell.name], "image_id": client.images.get(images[cell.name]).id}
            for cell in cells_used
        },
        "configurations": {c.key: {"cell": c.cell.name, "label": c.label, "argv": list(c.argv),
                                   "perf_active": seen[c.key]["perf_active"]} for c in configs},
        "timings": timings,
        "comparisons": [{"kind": c.kind, "a": c.a.key, "b": c.b.key} for c in plan],
    }
    results["comparisons"] = analyse(results)
    return results


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _iqr(stats: dict) -> str:
    return f"{100 * (stats['q3'] - stats['q1']) / stats['median']:.1f}%"


def _invocation(config: dict) -> str:
    return " ".join(["python3", *config["argv"], "workloads.py"])


def render_markdown(results: dict, source: str = "") -> str:
    """BENCHMARKS.md: method, machine, interpreters, one table per comparison, geometric means and targets."""
    analysed = analyse(results)
    settings, configs, machine = results["settings"], results["configurations"], results["machine"]
    timings = results["timings"]

    def samples(key, name):
        return [s for run in timings[key][name] for s in run]

    def row_verdict(entry, name, row):
        """A verdict only where the t-test finds a difference and the ratio's distance to the limit exceeds
        both sides' spread (interquartile range / median): drift of a shared host is not a verdict."""
        found = timed_verdict(row["ratio"], row["limit"], samples(entry["a"], name), samples(entry["b"], name))
        if found in (NOT_SIGNIFICANT, "-"):
            return found
        spread = max((st["q3"] - st["q1"]) / st["median"] for st in (row["a"], row["b"]))
        if abs(row["ratio"] / row["limit"] - 1) <= spread:
            return NOT_SIGNIFICANT
        return found

    def mean_verdict(entry):
        unresolved = [n for n, row in entry["workloads"].items() if row_verdict(entry, n, row) == NOT_SIGNIFICANT]
        if unresolved:
            return f"{NOT_SIGNIFICANT} ({len(unresolved)} of {len(entry['workloads'])} workloads)"
        return verdict(entry["geomean"], entry["geomean_limit"])

    lines = [
        '<a id="workloads-wall-clock"></a>',
        "## The project's own workloads, wall clock",
        "",
        f"From {source or 'a wall-clock run'} ({results['created']}; `python -m cpython_perf bench wallclock`).",
        "",
    ]
    if settings["scale"] != 1:
        lines += [f"**Scaled run (--scale {settings['scale']}): a check of the harness, not a measurement.**", ""]
    lines += [
        "### Method",
        "",
        "- Workloads: `benchmarks/workloads.py`, pure Python, stdlib only; "
        "each checks its result against a known value.",
    ]
    lines += [f"  - `{name}`: {text}" for name, text in results.get("workloads", {}).items()]
    lines += [
        "- A configuration is a cell's `python3` started one way: inactive, `-X perf` or `-X perf_jit`. "
        "Nothing records: the active runs write the perf map or jitdump and no perf reads them, "
        "so the cost measured is the trampoline's own.",
        f"- Each configuration runs in a fresh container of its cell's image; in it every workload runs once "
        f"to warm up, then {settings['repeat']} timed runs (time.perf_counter).",
        f"- {settings['rounds']} rounds, each running every configuration once in the same order "
        f"({', '.join(f'`{k}`' for k in settings['order'])}), so that drift of the machine hits every side alike: "
        f"{settings['rounds'] * settings['repeat']} samples per configuration and workload.",
        "- Per workload: the median of each side, ratio = median B / median A (above 1: B is slower), "
        "spread = interquartile range as a percentage of the median (A / B); "
        "the geometric mean of the ratios over the workloads.",
        f"- Targets: patched inactive vs its vanilla twin within 1% (every ratio <= {VANILLA_LIMIT}); "
        f"a backport's `-X MODE` ratios no worse than native {NATIVE_REFERENCE}'s on the same variant; "
        f"fp vs release within 2% in geometric mean (<= {VARIANT_LIMIT}).",
        "- A verdict only where Student's t-test (95%, as `pyperf compare_to`) finds the two sides' samples differ "
        "and the ratio is farther from its target than either side's spread; elsewhere \"not significant\": "
        "the measuring host (shared, 2 cores) does not resolve the difference. "
        "The geometric mean gets a verdict only when every workload's difference is significant. "
        "The instruction counts (standard suite) are the figures that resolve the targets.",
        "",
        "### Machine",
        "",
        "| | |",
        "| --- | --- |",
        f"| CPU | {machine['cpu']} ({machine['arch']}) |",
        f"| nproc | {machine['nproc']} |",
        f"| kernel | {machine['kernel']} |",
        f"| Docker engine | {results['engine']['version']} |",
        f"| run | {results['created']}, --rounds {settings['rounds']} --repeat {settings['repeat']} "
        f"--scale {settings['scale']} |",
        "",
        "### Interpreters",
        "",
        "| cell | Python | support | image |",
        "| --- | --- | --- | --- |",
    ]
    for name, cell in results["cells"].items():
        patched = "vanilla" if cell["vanilla"] else cell["support"]
        lines.append(f"| {name} | {cell['python']} | {patched} | `{cell['image']}` |")
    lines += [
        "",
        "### Summary (wall clock)",
        "",
        "| comparison | geometric mean B/A | target | verdict |",
        "| --- | ---: | --- | --- |",
    ]
    for entry in analysed:
        lines.append(f"| {entry['title']} | {entry['geomean']:.3f} | {entry['target']} | {mean_verdict(entry)} |")
    lines += ["", "Geometric means B/A (wall clock):", "", *ratio_chart(analysed)]
    for entry in analysed:
        a, b = configs[entry["a"]], configs[entry["b"]]
        lines += [
            "",
            f"### {entry['title']}",
            "",
            f"A = `{entry['a']}` (`{_invocation(a)}`), B = `{entry['b']}` (`{_invocation(b)}`). "
            f"Target: {entry['target']}.",
            "",
            "| workload | median A | median B | ratio B/A | spread A / B | target |",
            "| --- | ---: | ---: | ---: | ---: | --- |",
        ]
        for name, row in entry["workloads"].items():
            lines.append(f"| {name} | {_ms(row['a']['median'])} | {_ms(row['b']['median'])} | {row['ratio']:.3f} | "
                         f"{_iqr(row['a'])} / {_iqr(row['b'])} | {row_verdict(entry, name, row)} |")
        lines.append(f"| **geometric mean** | | | **{entry['geomean']:.3f}** | | {mean_verdict(entry)} |")
    return "\n".join(lines) + "\n"




def latest_results(directory):
    return common.latest_group_results(directory, GROUP)


# The group's command line (cpython_perf.bench.command): `python -m cpython_perf bench wallclock ...`


def arguments(parser) -> None:
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default: 5)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each workload per container (default: 3)")
    parser.add_argument("--workloads", help="comma-separated workloads (default: those the standard suite lacks, "
                                            "common.KEPT_WORKLOADS)")
    parser.add_argument("--kind", action="append", choices=KINDS, dest="kinds",
                        help="comparisons to make (repeatable; default: all): mode, vanilla, variant")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="workload size factor (default 1; less only to check the harness)")


def run(matrix, cells, args, log) -> dict:
    if args.rounds < 1 or args.repeat < 1 or args.scale <= 0:
        raise DriverError("--rounds and --repeat must be at least 1, --scale positive")
    workloads = select_workloads(args.workloads or "kept", available_workloads())
    return measure(matrix, cells, workloads, args.rounds, args.repeat, args.scale, tuple(args.kinds or KINDS), log=log)


def report(results: dict, path) -> None:
    for entry in results["comparisons"]:
        print(f"{entry['title']}: geometric mean {entry['geomean']:.3f} (wall clock; see BENCHMARKS.md for "
              "whether the spread resolves it)")

"""Runtime overhead of the perf trampolines, measured side by side in the cell images.

`python -m cpython_perf.bench --cell 3.11-fp --cell 3.13-fp` (`nox -s bench -- ...`)
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

import argparse
import importlib.util
import json
import os
import platform
import statistics
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from . import build, containers, host
from .errors import DriverError
from .matrix import PROJECT_ROOT, Cell, Matrix, load_matrix

BENCH_DIR = PROJECT_ROOT / "benchmarks"
WORKLOADS_SCRIPT = BENCH_DIR / "workloads.py"
CONTAINER_BENCH_DIR = "/bench"
RESULTS_DIR = PROJECT_ROOT / "results" / "bench"
SUMMARY = PROJECT_ROOT / "BENCHMARKS.md"
INACTIVE = "inactive"
MODE_ARGV = {"perf": ("-X", "perf"), "perf_jit": ("-X", "perf_jit")}
KINDS = ("mode", "vanilla", "variant")
VANILLA_LIMIT = 1.01   # patched inactive / vanilla, each workload and the geometric mean
VARIANT_LIMIT = 1.02   # fp / release, geometric mean
NATIVE_REFERENCE = "3.13"   # a backport's mode ratio must be no worse than this version's


@dataclass(frozen=True)
class Configuration:
    """A cell's interpreter started one way: `python3 <argv> workloads.py ...`."""

    cell: Cell
    argv: tuple[str, ...]
    label: str   # "inactive" or the perf mode ("perf", "perf_jit")

    @property
    def key(self) -> str:
        return f"{self.cell.name}:{self.label}"


@dataclass(frozen=True)
class Comparison:
    """B against A on the same workloads; ratios are median B / median A."""

    kind: str   # one of KINDS
    a: Configuration
    b: Configuration


def inactive(cell: Cell) -> Configuration:
    return Configuration(cell, (), INACTIVE)


def active(cell: Cell, mode: str) -> Configuration:
    return Configuration(cell, MODE_ARGV[mode], mode)


# --------------------------------------------------------------------------
# Planning


def plan_comparisons(matrix: Matrix, cells: list[Cell], kinds=KINDS) -> list[Comparison]:
    """The comparisons of the given kinds the selected cells call for, in the order of the cells, each once."""
    plan: list[Comparison] = []

    def add(comparison: Comparison) -> None:
        if comparison.kind in kinds and comparison not in plan:
            plan.append(comparison)

    for cell in cells:
        if cell.modes:
            for mode in cell.backends:
                add(Comparison("mode", inactive(cell), active(cell, mode)))
        twin = matrix.vanilla_twin(cell)
        if twin is not None:
            add(Comparison("vanilla", inactive(twin), inactive(cell)))
    for fp in cells:
        for release in cells:
            if (fp.variant.name, release.variant.name) == ("fp", "release") and \
                    (fp.version, fp.arch, fp.vanilla) == (release.version, release.arch, release.vanilla):
                add(Comparison("variant", inactive(release), inactive(fp)))
    return plan


def configurations(plan: list[Comparison]) -> list[Configuration]:
    """Every configuration of the plan once, in order of first appearance."""
    found: list[Configuration] = []
    for comparison in plan:
        for config in (comparison.a, comparison.b):
            if config not in found:
                found.append(config)
    return found


def schedule(configs: list[Configuration], rounds: int) -> list[tuple[int, Configuration]]:
    """(round, configuration) in running order: every configuration once per round."""
    return [(number, config) for number in range(rounds) for config in configs]


# --------------------------------------------------------------------------
# Statistics


def median(values) -> float:
    return statistics.median(values)


def ratio(a, b) -> float:
    """median(b) / median(a): above 1, B is slower."""
    return median(b) / median(a)


def geometric_mean(ratios) -> float:
    return statistics.geometric_mean(ratios)


def summarize(values) -> dict:
    """Sample count, extremes, quartiles and median of one side's timings of a workload."""
    ordered = sorted(values)
    if len(ordered) > 1:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    else:
        q1 = q3 = ordered[0]
    return {"n": len(ordered), "min": ordered[0], "q1": q1, "median": median(ordered), "q3": q3, "max": ordered[-1]}


# --------------------------------------------------------------------------
# Running


def available_workloads() -> dict[str, str]:
    """Name -> one-line description of every workload of benchmarks/workloads.py."""
    spec = importlib.util.spec_from_file_location("cpython_perf_bench_workloads", WORKLOADS_SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {name: (fn.__doc__ or "").strip().splitlines()[0] for name, (fn, _) in module.WORKLOADS.items()}


def select_workloads(names: str | None, available: dict[str, str]) -> dict[str, str]:
    """The workloads of a comma-separated list (all when None) with their descriptions; unknown names are an error."""
    if names is None:
        return dict(available)
    chosen = [n for n in names.split(",") if n]
    unknown = [n for n in chosen if n not in available]
    if unknown or not chosen:
        raise DriverError(f"unknown workload(s) {', '.join(unknown) or '(none given)'}: "
                          f"{WORKLOADS_SCRIPT} has {', '.join(available)}")
    return {name: available[name] for name in chosen}


def workload_command(config: Configuration, workloads: list[str], repeat: int, scale: float) -> list[str]:
    return ["python3", *config.argv, f"{CONTAINER_BENCH_DIR}/{WORKLOADS_SCRIPT.name}",
            "--run", ",".join(workloads), "--repeat", str(repeat), "--scale", str(scale)]


def parse_output(config: Configuration, stdout: str) -> dict:
    """The JSON line workloads.py printed, checked to come from a trampoline in the configured state."""
    lines = stdout.strip().splitlines()
    try:
        out = json.loads(lines[-1])
    except (IndexError, ValueError):
        raise DriverError(f"{config.key}: workloads.py printed no JSON line:\n{stdout[-2000:]}") from None
    expected = config.label != INACTIVE
    if bool(out.get("perf_active")) != expected:
        raise DriverError(f"{config.key}: python3 {' '.join(config.argv)} reports "
                          f"sys.is_stack_trampoline_active() = {out.get('perf_active')}, expected {expected}")
    return out


def run_configuration(client, image: str, config: Configuration, workloads: list[str], repeat: int,
                      scale: float) -> dict:
    """One container run of a configuration: the parsed JSON line of workloads.py."""
    result = containers.run(client, image, workload_command(config, workloads, repeat, scale), workdir="/tmp",
                            mounts={BENCH_DIR: CONTAINER_BENCH_DIR})
    return parse_output(config, result.check(f"the workloads of {config.key}").stdout)


def machine_info() -> dict:
    """nproc, kernel and CPU model of this host (where the engine runs the containers)."""
    cpu = "unknown"
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"nproc": len(os.sched_getaffinity(0)), "kernel": platform.release(), "cpu": cpu,
            "arch": platform.machine()}


def utc_now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def utc_stamp() -> str:
    """Now, as a results file's "created": 2026-11-22T18:09:46Z."""
    return utc_now().isoformat().replace("+00:00", "Z")


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
    images = {cell.name: build.ensure_cell_image(cell, matrix, log) for cell in cells_used}
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


# --------------------------------------------------------------------------
# Analysis


def _title(kind: str, a: str, b: str, configs: dict) -> str:
    if kind == "mode":
        return f"{configs[b]['cell']}: -X {configs[b]['label']} active vs inactive"
    if kind == "vanilla":
        return f"{configs[b]['cell']} (patched) vs {configs[a]['cell']}, inactive"
    return f"{configs[b]['cell']} vs {configs[a]['cell']} (fp vs release), inactive"


def _native_reference(entry: dict, analysed: list[dict], results: dict) -> dict | None:
    """The native 3.13 comparison of the same mode and variant as a backport's mode comparison."""
    configs, cells = results["configurations"], results["cells"]
    mine = cells[configs[entry["b"]]["cell"]]
    for other in analysed:
        cell = cells[configs[other["b"]]["cell"]]
        if (other["kind"] == "mode" and configs[other["b"]]["label"] == configs[entry["b"]]["label"]
                and cell["version"] == NATIVE_REFERENCE and cell["support"] == "native" and not cell["vanilla"]
                and (cell["variant"], cell["arch"]) == (mine["variant"], mine["arch"])):
            return other
    return None


def _set_targets(entry: dict, analysed: list[dict], results: dict) -> None:
    """Give entry its target text, the limit of each workload's ratio and of the geometric mean (None: none)."""
    rows = entry["workloads"]
    limits: dict[str, float] = {}
    geomean_limit = None
    if entry["kind"] == "vanilla":
        target = f"patched inactive within 1% of vanilla: ratio <= {VANILLA_LIMIT}"
        limits = {name: VANILLA_LIMIT for name in rows}
        geomean_limit = VANILLA_LIMIT
    elif entry["kind"] == "variant":
        target = f"fp within 2% of release: geometric mean <= {VARIANT_LIMIT}"
        geomean_limit = VARIANT_LIMIT
    else:
        config = results["configurations"][entry["b"]]
        cell = results["cells"][config["cell"]]
        mode = f"-X {config['label']}"
        if cell["support"] != "backport":
            target = "none (native: the reference for backports)" if cell["version"] == NATIVE_REFERENCE else "none"
        else:
            reference = _native_reference(entry, analysed, results)
            if reference is None:
                target = (f"no worse than native {NATIVE_REFERENCE}'s {mode} ratio: not checked, "
                          f"this run has no {NATIVE_REFERENCE} {cell['variant']} {mode} comparison")
            else:
                target = f"{mode} ratios no worse than native {results['configurations'][reference['b']]['cell']}'s"
                limits = {name: reference["workloads"][name]["ratio"]
                          for name in rows if name in reference["workloads"]}
                geomean_limit = reference["geomean"]
    entry["target"] = target
    for name, row in rows.items():
        row["limit"] = limits.get(name)
    entry["geomean_limit"] = geomean_limit


def analyse(results: dict) -> list[dict]:
    """Each comparison of results (kind, a, b) with per-workload statistics, ratios, geometric mean and targets."""
    timings, configs = results["timings"], results["configurations"]
    analysed = []
    for comparison in results["comparisons"]:
        kind, a, b = comparison["kind"], comparison["a"], comparison["b"]
        rows = {}
        for name in timings[a]:
            if name not in timings[b]:
                continue
            sa = [s for run in timings[a][name] for s in run]
            sb = [s for run in timings[b][name] for s in run]
            rows[name] = {"a": summarize(sa), "b": summarize(sb), "ratio": ratio(sa, sb)}
        analysed.append({"kind": kind, "a": a, "b": b, "title": _title(kind, a, b, configs), "workloads": rows,
                         "geomean": geometric_mean([r["ratio"] for r in rows.values()])})
    for entry in analysed:
        _set_targets(entry, analysed, results)
    return analysed


def verdict(value: float, limit: float | None) -> str:
    """ok / MISSED by how much, against a limit on a ratio ("-" without one)."""
    if limit is None:
        return "-"
    if value <= limit:
        return f"ok (<= {limit:.3f})"
    return f"MISSED by {100 * (value / limit - 1):.1f}% ({value:.3f} > {limit:.3f})"


# --------------------------------------------------------------------------
# Output


CHART_STEP = 0.005   # one character of a bar: half a percent
CHART_WIDTH = 60


def ratio_chart(analysed: list[dict], digits: int = 3) -> list[str]:
    """A text bar chart of the geometric means: '#' per half percent above 1, '-' below, '>' where cut."""
    width = max(len(e["title"]) for e in analysed)
    lines = ["```", f"{'':{width}}  ratio  1.0 at '|', one mark = {CHART_STEP:.1%}"]
    for entry in analysed:
        value = entry["geomean"]
        marks = round(abs(value - 1) / CHART_STEP)
        bar = ("#" if value >= 1 else "-") * min(marks, CHART_WIDTH) + (">" if marks > CHART_WIDTH else "")
        lines.append(f"{entry['title']:{width}}  {value:.{digits}f} |{bar}")
    return lines + ["```"]


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
    regenerate = f"`python -m cpython_perf.bench --markdown {source}`" if source else "`python -m cpython_perf.bench`"
    lines = [
        "# Benchmarks: runtime overhead of the perf trampolines",
        "",
        f"Generated by {regenerate} from the run of {results['created']}; do not edit by hand.",
        "",
    ]
    if settings["scale"] != 1:
        lines += [f"**Scaled run (--scale {settings['scale']}): a check of the harness, not a measurement.**", ""]
    lines += [
        "## Method",
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
        f"fp vs release within 2% in geometric mean (<= {VARIANT_LIMIT}). A missed target says MISSED and by how much.",
        "",
        "## Machine",
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
        "## Interpreters",
        "",
        "| cell | Python | support | image |",
        "| --- | --- | --- | --- |",
    ]
    for name, cell in results["cells"].items():
        patched = "vanilla" if cell["vanilla"] else cell["support"]
        lines.append(f"| {name} | {cell['python']} | {patched} | `{cell['image']}` |")
    lines += [
        "",
        "## Summary",
        "",
        "| comparison | geometric mean B/A | target | verdict |",
        "| --- | ---: | --- | --- |",
    ]
    for entry in analysed:
        lines.append(f"| {entry['title']} | {entry['geomean']:.3f} | {entry['target']} | "
                     f"{verdict(entry['geomean'], entry['geomean_limit'])} |")
    lines += ["", "Geometric means B/A (wall clock):", "", *ratio_chart(analysed)]
    for entry in analysed:
        a, b = configs[entry["a"]], configs[entry["b"]]
        lines += [
            "",
            f"## {entry['title']}",
            "",
            f"A = `{entry['a']}` (`{_invocation(a)}`), B = `{entry['b']}` (`{_invocation(b)}`). "
            f"Target: {entry['target']}.",
            "",
            "| workload | median A | median B | ratio B/A | spread A / B | target |",
            "| --- | ---: | ---: | ---: | ---: | --- |",
        ]
        for name, row in entry["workloads"].items():
            lines.append(f"| {name} | {_ms(row['a']['median'])} | {_ms(row['b']['median'])} | {row['ratio']:.3f} | "
                         f"{_iqr(row['a'])} / {_iqr(row['b'])} | {verdict(row['ratio'], row['limit'])} |")
        lines.append(f"| **geometric mean** | | | **{entry['geomean']:.3f}** | | "
                     f"{verdict(entry['geomean'], entry['geomean_limit'])} |")
    return "\n".join(lines) + "\n"


def write_results(results: dict, directory: Path = RESULTS_DIR, group: str = "bench") -> Path:
    """<directory>/<group>-<created, compact: 20261122T180946Z>.json."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{group}-{results['created'].replace('-', '').replace(':', '')}.json"
    path.write_text(json.dumps(results, indent=1) + "\n")
    return path


def load_results(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise DriverError(f"{path}: cannot read: {exc.strerror}") from None
    except ValueError as exc:
        raise DriverError(f"{path}: not a results file of cpython_perf.bench: {exc}") from None


def _relative(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(PROJECT_ROOT)) if path.is_relative_to(PROJECT_ROOT) else str(path)


def other_sections(directory: Path) -> str:
    """The sections of the other benchmark groups (instruction counts, fidelity) from their latest results files."""
    from . import build_cost, fidelity, instructions

    parts = []
    for group in (instructions, fidelity, build_cost):
        path = group.latest_results(directory)
        if path is not None:
            try:
                parts.append(group.render_markdown(load_results(path), _relative(path)))
            except (KeyError, TypeError) as exc:
                raise DriverError(f"{path}: not a results file of {group.__name__} (no {exc})") from None
    return "\n".join(parts)


def write_summary(results_path: Path, summary: Path = SUMMARY) -> Path:
    """Render BENCHMARKS.md (or summary) from an overhead results file and the other groups' latest files."""
    results_path = results_path.resolve()
    try:
        text = render_markdown(load_results(results_path), _relative(results_path))
    except (KeyError, TypeError) as exc:
        raise DriverError(f"{results_path}: not a results file of cpython_perf.bench (no {exc})") from None
    extra = other_sections(results_path.parent)
    summary.write_text(text + ("\n" + extra if extra else ""))
    return summary


def latest_group_results(directory: Path, group: str) -> Path | None:
    """The newest results/bench/<group>-<UTC time>.json (the names sort by time)."""
    found = sorted(Path(directory).glob(f"{group}-*.json"))
    return found[-1] if found else None


def save_group_results(results: dict, group: str, directory: Path) -> Path:
    """Write the group's results file (write_results); where that is the project's results/bench, refresh
    BENCHMARKS.md from every group's latest file (a run kept elsewhere leaves the project's summary alone)."""
    path = write_results(results, directory, group)
    if Path(directory).resolve() == RESULTS_DIR.resolve():
        refresh_summary(SUMMARY, RESULTS_DIR)
    return path


def group_main(argv, *, module: str, doc: str, group: str, add_arguments, run, report) -> int:
    """The command line of a benchmark group: --cell (repeatable) and --results, plus the group's own
    options; run(matrix, cells, args, log) -> results; report(results, path) prints the outcome."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc.splitlines()[0])
    parser.add_argument("--cell", action="append", default=[], dest="cells", metavar="NAME",
                        help="cell to measure (repeatable; default: the matrix's default cell)")
    parser.add_argument("--results", default=str(RESULTS_DIR), help="directory of the results files (default: results/bench)")
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        matrix = load_matrix()
        cells = [matrix.cell(name) for name in args.cells or [matrix.default_cell]]
        results = run(matrix, cells, args, lambda line: print(line, flush=True))
        path = save_group_results(results, group, Path(args.results))
        report(results, path)
        refreshed = path.parent.resolve() == RESULTS_DIR.resolve()
        print(f"wrote {path}" + (f"; {SUMMARY.name} refreshed" if refreshed else f" ({SUMMARY.name} left alone)"))
    except DriverError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return 0


def refresh_summary(summary: Path = SUMMARY, directory: Path = RESULTS_DIR) -> Path:
    """Rewrite BENCHMARKS.md from the latest results file of every group."""
    latest = latest_group_results(directory, "bench")
    if latest is not None:
        return write_summary(latest, summary)
    summary.write_text("# Benchmarks\n\nNo overhead run yet (`nox -s bench`).\n\n" + other_sections(directory))
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cpython_perf.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--matrix", help="path of matrix.yaml (default: the project's)")
    parser.add_argument("--cell", action="append", default=[], dest="cells", metavar="NAME",
                        help="cell to measure (repeatable; default: the matrix's default cell)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default: 5)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each workload per container (default: 3)")
    parser.add_argument("--workloads", help="comma-separated workloads (default: all of benchmarks/workloads.py)")
    parser.add_argument("--kind", action="append", choices=KINDS, dest="kinds",
                        help="comparisons to make (repeatable; default: all): mode, vanilla, variant")
    parser.add_argument("--scale", type=float, default=1.0,
                        help="workload size factor (default 1; less only to check the harness)")
    parser.add_argument("--results", default=str(RESULTS_DIR),
                        help="directory of the results files (default: results/bench)")
    parser.add_argument("--summary", default=str(SUMMARY), help="Markdown summary to write (default: BENCHMARKS.md)")
    parser.add_argument("--markdown", metavar="RESULTS_JSON", help="only rewrite the summary from this results file")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.repeat < 1 or args.scale <= 0:
        parser.error("--rounds and --repeat must be at least 1, --scale positive")

    try:
        if args.markdown:
            print(f"wrote {write_summary(Path(args.markdown), Path(args.summary))}")
            return 0
        matrix = load_matrix(args.matrix)
        cells = [matrix.cell(name) for name in args.cells or [matrix.default_cell]]
        workloads = select_workloads(args.workloads, available_workloads())
        results = measure(matrix, cells, workloads, args.rounds, args.repeat, args.scale, tuple(args.kinds or KINDS),
                          log=lambda line: print(line, flush=True))
        path = write_results(results, Path(args.results))
        summary = write_summary(path, Path(args.summary))
        for entry in results["comparisons"]:
            print(f"{entry['title']}: geometric mean {entry['geomean']:.3f}, "
                  f"{verdict(entry['geomean'], entry['geomean_limit'])}")
        print(f"wrote {path} and {summary}")
    except DriverError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())

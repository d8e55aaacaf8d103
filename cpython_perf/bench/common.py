"""What every benchmark group shares, importing none of them: configurations and the plan of comparisons,
statistics (median, ratios, geometric mean), the project's own workloads (benchmarks/workloads.py), targets
and verdicts, results files (results/bench/<group>-<UTC time>.json) and the machine's description.

The groups (wallclock, instructions, suite, fidelity, build_cost, jit_pipeline) import this module; summary writes
BENCHMARKS.md from their results; command is the command line (`python -m cpython_perf bench`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import statistics
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..run import containers
from ..errors import DriverError
from ..matrix import PROJECT_ROOT, Cell, Matrix

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
# What `-X perf` / `-X perf_jit` may cost per version (instructions, active / inactive): the geometric mean of
# the standard suite and the worst single benchmark.  Versions not listed have no target beyond the backport rule.
# Targets of the trampoline's cost (geometric mean, worst benchmark) per version; docs/trampoline-floor.md
# counts how low they can go while every Python frame keeps a trampoline frame of its own
MODE_COST_LIMITS = {"3.13": (1.05, 1.2), "3.11": (1.03, 1.1)}


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


def paired_ratios(a, b) -> list[float]:
    """The ratios b/a of the rounds both sides have (a round's missing or zero baseline, or missing b, left out):
    interleaved rounds compared pair by pair, so that the measuring host's drift hits both sides alike."""
    return [y / x for x, y in zip(a, b) if x and y is not None]


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


# The project's own workloads the standard suite (pyperformance, cpython_perf.bench.suite) lacks, and what each
# adds; the others have their counterpart in the suite (nbody -> nbody, richards -> richards, fannkuch ->
# fannkuch, generators -> generators, points -> raytrace / chaos / float) and are run only when named.
KEPT_WORKLOADS = {
    "calls": "the trampoline's worst case: every Python-to-Python call goes through it, and this workload is "
             "nothing but calls (recursive fib(25), 100,000 calls of a one-line function, 50,000 method calls); "
             "pyperformance has no call-only benchmark since call_simple / call_method were dropped",
}


def select_workloads(names: str | None, available: dict[str, str]) -> dict[str, str]:
    """The workloads of a comma-separated list with their descriptions (all when None or "all"; "kept":
    KEPT_WORKLOADS); unknown names are an error."""
    if names == "kept":
        names = ",".join(KEPT_WORKLOADS)
    if names is None or names == "all":
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


# Student's two-sample t-test at 95% (two-tailed), as pyperf's compare_to decides "Significant" / "Not
# significant!" (pyperf._utils.is_significant): critical t by degrees of freedom, the nearest tabulated
# degrees of freedom at or below the actual ones (conservative).
_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
        20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060, 26: 2.056, 27: 2.052, 28: 2.048,
        29: 2.045, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}


def significant(a, b) -> tuple[bool, float]:
    """(whether samples a and b differ at 95% by Student's t-test, t); fewer than 2 samples a side: not significant."""
    a, b = list(a), list(b)
    if len(a) < 2 or len(b) < 2:
        return False, 0.0
    df = len(a) + len(b) - 2
    pooled = ((len(a) - 1) * statistics.variance(a) + (len(b) - 1) * statistics.variance(b)) / df
    diff = statistics.fmean(a) - statistics.fmean(b)
    if pooled == 0:
        return diff != 0, (float("inf") if diff else 0.0)
    t = diff / (pooled * (1 / len(a) + 1 / len(b))) ** 0.5
    critical = _T95[max(k for k in _T95 if k <= df)]
    return abs(t) >= critical, t


NOT_SIGNIFICANT = "not significant"


def timed_verdict(value: float, limit: float | None, a, b) -> str:
    """A wall-clock verdict only where the t-test resolves the difference: else "not significant"."""
    if not significant(a, b)[0]:
        return NOT_SIGNIFICANT
    return verdict(value, limit)


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


def write_results(results: dict, directory: Path = RESULTS_DIR, group: str = "bench") -> Path:
    """<directory>/<group>-<created, compact: 20261122T180946Z>.json."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{group}-{results['created'].replace('-', '').replace(':', '')}.json"
    partial = path.with_name(f".{path.name}.partial")   # written whole, then renamed: never half a file
    partial.write_text(json.dumps(results, indent=1) + "\n")
    os.replace(partial, path)
    return path


def load_results(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise DriverError(f"{path}: cannot read: {exc.strerror}") from None
    except ValueError as exc:
        raise DriverError(f"{path}: not a results file of cpython_perf.bench: {exc}") from None


def relative(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(PROJECT_ROOT)) if path.is_relative_to(PROJECT_ROOT) else str(path)


def latest_group_results(directory: Path, group: str) -> Path | None:
    """The newest results/bench/<group>-<UTC time>.json (the names sort by time)."""
    found = sorted(Path(directory).glob(f"{group}-*.json"))
    return found[-1] if found else None


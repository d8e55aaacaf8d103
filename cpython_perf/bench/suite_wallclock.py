"""The standard suite's wall clock (`bench suite --wallclock`), timed in interleaved pairs.

Each benchmark is timed by pyperf's own run (`--fast` or `--rigorous`, worker processes, the mode activated by
PYTHONPERFSUPPORT / PYTHON_PERF_JIT_SUPPORT, inherited by the workers) in a fresh container, once per
configuration per round, the configurations of a round in rotated order (A B, then B A, ...), for --pairs rounds:
whatever drifts on the measuring host (other jobs, thermal state, the page cache) hits both sides of a pair
alike. A comparison's figure per benchmark is the median of the per-round ratios B/A with their quartiles, and
a difference is called only where the exact Wilcoxon signed-rank test over those pairs gives p < 0.05. Timing
one configuration's runs after the other's (as `pyperf compare_to` over two such files would judge them) lets
the host's drift between the two halves pass for a difference.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from pathlib import Path

from .common import INACTIVE, NOT_SIGNIFICANT, Configuration, paired_ratios, summarize
from .suite_containers import CONTAINER_PYPERF, last_error, run_benchmark
from .suite_pins import SuiteFiles
from .suite_plan import Benchmark

CONTAINER_OUT = "/out"             # pyperf's JSON files
MODE_ENV = {"perf": {"PYTHONPERFSUPPORT": "1"}, "perf_jit": {"PYTHON_PERF_JIT_SUPPORT": "1"}}


def wallclock_command(config: Configuration, benchmark: Benchmark, output: str, rigor: str) -> list[str]:
    return ["python3", "-u", benchmark.script, *benchmark.extra_opts, f"--{rigor}", "--output", output,
            "--inherit-environ", "PYTHONPERFSUPPORT,PYTHON_PERF_JIT_SUPPORT,PYTHONHASHSEED"]


def wallclock_env(config: Configuration) -> dict[str, str]:
    env = {"PYTHONPATH": CONTAINER_PYPERF}
    if config.label != INACTIVE:
        env.update(MODE_ENV[config.label])
    return env


PAIRS = 8                          # rounds: each gives every comparison one pair
ALPHA = 0.05                       # a difference is called where the signed-rank test's p is below this


def load_pyperf_means(path: Path) -> dict[str, float]:
    """Mean seconds of each benchmark of a pyperf JSON suite file."""
    data = json.loads(Path(path).read_text())
    means = {}
    for bench in data.get("benchmarks", []):
        name = bench.get("metadata", {}).get("name") or data.get("metadata", {}).get("name")
        values = [v for run in bench.get("runs", []) for v in run.get("values", [])]
        if name and values:
            means[name] = sum(values) / len(values)
    return means


def round_order(configs: list[Configuration], round_no: int) -> list[Configuration]:
    """The configurations of one round, rotated by the round: each goes first as often as the others."""
    k = round_no % len(configs) if configs else 0
    return configs[k:] + configs[:k]


def signed_rank_p(ratios: list[float]) -> float:
    """Two-sided exact p of Wilcoxon's signed-rank test that the ratios' logarithms centre on 0 (ratios of 1
    dropped, tied magnitudes given their mean rank).  The null distribution is counted exactly over the 2^n
    sign assignments, in doubled ranks so that mean ranks stay integers."""
    logs = [math.log(r) for r in ratios if r > 0 and abs(math.log(r)) > 1e-12]
    n = len(logs)
    if n == 0:
        return 1.0
    order = sorted(range(n), key=lambda i: abs(logs[i]))
    doubled = [0] * n
    i = 0
    while i < n:
        j = i
        while j + 1 < n and math.isclose(abs(logs[order[j + 1]]), abs(logs[order[i]]), rel_tol=1e-12):
            j += 1
        for k in range(i, j + 1):
            doubled[order[k]] = i + j + 2          # 2 x the mean of ranks i+1 .. j+1
        i = j + 1
    total = sum(doubled)
    positive = sum(d for d, x in zip(doubled, logs) if x > 0)
    counts = [0] * (total + 1)                     # ways to reach each sum of the positive signs' doubled ranks
    counts[0] = 1
    for d in doubled:
        for s in range(total, d - 1, -1):
            counts[s] += counts[s - d]
    extreme = min(positive, total - positive)
    tail = sum(counts[:extreme + 1])
    return min(1.0, 2 * tail / 2 ** n)


def speed(ratio: float) -> str:
    """pyperf's words for a ratio B/A: "1.10x slower", "1.05x faster" or "no change"."""
    if round(ratio, 2) == 1.0:
        return "no change"
    return f"{ratio:.2f}x slower" if ratio > 1 else f"{1 / ratio:.2f}x faster"


def pair_verdict(a: list, b: list) -> dict | None:
    """A benchmark's verdict from its timings on both sides, one per round (None where a run failed): the ratios
    B/A of the rounds both sides ran, their median and quartiles, and whether the signed-rank test calls the
    difference (its p below ALPHA)."""
    ratios = paired_ratios(a, b)
    if not ratios:
        return None
    stats = summarize(ratios)
    p = signed_rank_p(ratios)
    slower = sum(r > 1 for r in ratios)
    figures = (f"median ratio {stats['median']:.3f} (quartiles {stats['q1']:.3f}-{stats['q3']:.3f}) over "
               f"{len(ratios)} pairs, B slower in {slower}, p={p:.3f}")
    significant = p < ALPHA
    return {"significant": significant, "pairs": len(ratios), "median": stats["median"], "q1": stats["q1"],
            "q3": stats["q3"], "slower": slower, "p": p,
            "text": f"{figures}: {speed(stats['median'])}" if significant else f"{NOT_SIGNIFICANT} ({figures})"}


def measure_wallclock(client, cell_images: dict[str, str], files: SuiteFiles, configs: list[Configuration],
                      benchmarks: list[Benchmark], rigor: str, results: dict, progress, log=print,
                      pairs: int = PAIRS) -> None:
    """pyperf's run of each benchmark in each configuration, pairs rounds, the configurations of a round in
    rotated order, each run in a fresh container: its mean into results["wallclock"]["rounds"][configuration]
    [benchmark][round] (None where it failed); then every comparison's verdicts."""
    wall = results["wallclock"]
    rounds = wall.setdefault("rounds", {})
    for benchmark in benchmarks:
        for round_no in range(pairs):
            for config in round_order(configs, round_no):
                started = time.monotonic()
                slots = rounds.setdefault(config.key, {}).setdefault(benchmark.name, [None] * pairs)
                command = wallclock_command(config, benchmark, f"{CONTAINER_OUT}/part.json", rigor)
                with tempfile.TemporaryDirectory(prefix="cpython-perf-pyperf-") as tmp:
                    os.chmod(tmp, 0o777)
                    result = run_benchmark(client, cell_images[config.cell.name], command, files,
                                           env=wallclock_env(config), mounts={Path(tmp): CONTAINER_OUT})
                    part = Path(tmp) / "part.json"
                    mean = load_pyperf_means(part).get(benchmark.name) if part.is_file() else None
                wall["seconds"][config.key] = wall["seconds"].get(config.key, 0.0) + time.monotonic() - started
                if result.exit_code != 0 or mean is None:
                    wall["failures"].setdefault(config.key, {})[benchmark.name] = \
                        f"round {round_no + 1}: exited {result.exit_code}: {last_error(result.stderr)}"
                    log(f"{config.key} {benchmark.name} round {round_no + 1} (wall clock): FAILED: "
                        f"{last_error(result.stderr)}")
                else:
                    slots[round_no] = mean
                    log(f"{config.key} {benchmark.name} round {round_no + 1}/{pairs} (wall clock): "
                        f"mean {mean * 1000:.2f} ms ({time.monotonic() - started:.0f} s)")
                progress.save()
    for key, by_name in rounds.items():
        done = {name: [v for v in values if v is not None] for name, values in by_name.items()}
        wall["means"][key] = {name: summarize(values)["median"] for name, values in done.items() if values}
    compare_pairs(results)
    progress.save()


def compare_pairs(results: dict) -> None:
    """The verdict of every planned comparison and benchmark over the rounds both sides ran, into
    results["wallclock"]["compare"]."""
    wall = results["wallclock"]
    rounds = wall.get("rounds", {})
    wall["compare"] = []
    for comparison in results["comparisons_planned"]:
        a, b = rounds.get(comparison["a"], {}), rounds.get(comparison["b"], {})
        verdicts = {name: found for name in a if name in b
                    for found in [pair_verdict(a[name], b[name])] if found}
        if verdicts:
            wall["compare"].append({**comparison, "verdicts": verdicts,
                                    "text": "\n".join(f"{n}: {v['text']}" for n, v in verdicts.items())})

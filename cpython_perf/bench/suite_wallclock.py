"""The standard suite's wall clock (`bench suite --wallclock`): pyperf's own runs of each benchmark in the cell
images (`--fast` or `--rigorous`, worker processes, the mode activated by PYTHONPERFSUPPORT /
PYTHON_PERF_JIT_SUPPORT, inherited by the workers), compared with `pyperf compare_to` on this host: its t-test
decides whether a difference is significant on the measuring host.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..errors import DriverError
from .common import INACTIVE, NOT_SIGNIFICANT, Configuration
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


_ONE = re.compile(r"^(?:(?P<name>[^\s:]+): )?Mean \+- std dev: .* -> .*: (?P<speed>[\d.]+x (?:slower|faster)|no change)$")
_HIDDEN = re.compile(r"^Benchmark hidden because not significant \(\d+\): (?P<names>.*)$")
# compare_to of two one-benchmark files names each side by its path (the suite's <configuration>/<benchmark>.json)
_RESULT_FILE = re.compile(r"\S*/(?P<configuration>[^/\s]+)/[^/\s]+\.json\b")


def verdict_text(text: str) -> str:
    """A compare_to line's figures with each side named by its configuration (as compare_to names a
    multi-benchmark file) rather than by the path of its result file, which is the measuring host's."""
    return _RESULT_FILE.sub(lambda m: m.group("configuration"), text.replace("[", "").replace("]", ""))


def parse_compare_to(text: str, names: list[str] | None = None) -> dict[str, dict]:
    """Per benchmark, from `pyperf compare_to A B` (without --table): whether pyperf's t-test calls the difference
    significant ("name: Mean +- std dev: ... -> ...: 1.10x slower") or not ("Benchmark hidden because not
    significant (N): a, b", or "Not significant!").  names: the benchmarks compared, for the one-benchmark form,
    in which pyperf prints no name."""
    out = {}
    single = names[0] if names and len(names) == 1 else None
    for line in text.splitlines():
        line = line.strip()
        hidden, one = _HIDDEN.match(line), _ONE.match(line)
        if hidden:
            for name in hidden.group("names").split(", "):
                out[name.strip()] = {"significant": False, "text": NOT_SIGNIFICANT}
        elif one and (one.group("name") or single):
            out[one.group("name") or single] = {"significant": True,
                                                "text": verdict_text(line.split("Mean +- std dev: ", 1)[1])}
        elif line.endswith("Not significant!") and (":" in line or single):
            name = line.split(":", 1)[0] if line != "Not significant!" else single
            out[name] = {"significant": False, "text": NOT_SIGNIFICANT}
    return out


def pyperf_host_command(files: SuiteFiles, *args: str) -> list[str]:
    return [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(files.pyperf_root)!r}); "
            "import runpy; sys.argv[0] = 'pyperf'; runpy.run_module('pyperf', run_name='__main__')", *args]


def compare_to(files: SuiteFiles, a: Path, b: Path, names: list[str] | None = None) -> tuple[str, dict[str, dict]]:
    """`pyperf compare_to A B` with the pinned pyperf on this host: its text and its per-benchmark verdicts."""
    result = subprocess.run(pyperf_host_command(files, "compare_to", "--min-speed", "0", str(a), str(b)),
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise DriverError(f"pyperf compare_to {a.name} {b.name} failed: {result.stderr[-800:]}")
    return result.stdout, parse_compare_to(result.stdout, names)


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


def measure_wallclock(client, cell_images: dict[str, str], files: SuiteFiles, configs: list[Configuration],
                      benchmarks: list[Benchmark], rigor: str, results: dict, progress, log=print) -> None:
    """pyperf's own run of every benchmark in every configuration (its JSON kept under
    results/bench/suite-<time>-pyperf/<configuration>/<benchmark>.json), then `pyperf compare_to` per comparison
    and benchmark."""
    wall = results["wallclock"]
    out_dir = Path(progress.directory) / f"suite-{results['created'].replace('-', '').replace(':', '')}-pyperf"
    for config in configs:
        config_dir = out_dir / config.key.replace(":", "_")
        config_dir.mkdir(parents=True, exist_ok=True)
        wall["files"][config.key] = str(config_dir.relative_to(out_dir.parent))
        for benchmark in benchmarks:
            started = time.monotonic()
            command = wallclock_command(config, benchmark, f"{CONTAINER_OUT}/part.json", rigor)
            with tempfile.TemporaryDirectory(prefix="cpython-perf-pyperf-") as tmp:
                os.chmod(tmp, 0o777)
                result = run_benchmark(client, cell_images[config.cell.name], command, files,
                                       env=wallclock_env(config), mounts={Path(tmp): CONTAINER_OUT})
                part = Path(tmp) / "part.json"
                if result.exit_code != 0 or not part.exists():
                    wall["failures"].setdefault(config.key, {})[benchmark.name] = \
                        f"exited {result.exit_code}: {last_error(result.stderr)}"
                    log(f"{config.key} {benchmark.name} (wall clock): FAILED: {last_error(result.stderr)}")
                    continue
                shutil.copyfile(part, config_dir / f"{benchmark.name}.json")
            wall["means"][config.key].update(load_pyperf_means(config_dir / f"{benchmark.name}.json"))
            wall["seconds"][config.key] += time.monotonic() - started
            log(f"{config.key} {benchmark.name} (wall clock): mean {wall['means'][config.key].get(benchmark.name, 0) * 1000:.2f} ms "
                f"({time.monotonic() - started:.0f} s)")
            progress.save()
    compare_saved(results, files, out_dir.parent, [b.name for b in benchmarks])
    progress.save()


def compare_saved(results: dict, files: SuiteFiles, directory: Path, names: list[str]) -> None:
    """`pyperf compare_to` of every planned comparison and benchmark over the pyperf JSON files a wall-clock run
    kept under directory (results["wallclock"]["files"]), into results["wallclock"]["compare"]."""
    wall = results["wallclock"]
    wall["compare"] = []
    for comparison in results["comparisons_planned"]:
        texts, verdicts = [], {}
        for name in names:
            if comparison["a"] not in wall["files"] or comparison["b"] not in wall["files"]:
                continue
            a = Path(directory) / wall["files"][comparison["a"]] / f"{name}.json"
            b = Path(directory) / wall["files"][comparison["b"]] / f"{name}.json"
            if a.exists() and b.exists():
                text, found = compare_to(files, a, b, [name])
                texts.append(f"{name}: {text.strip()}")
                verdicts.update(found)
        if verdicts:
            wall["compare"].append({**comparison, "text": "\n".join(texts), "verdicts": verdicts})

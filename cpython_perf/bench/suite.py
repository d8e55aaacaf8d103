"""The standard suite: pyperformance's stdlib-only benchmarks in the cell images, counted and timed.

`python -m cpython_perf bench suite --cell 3.11-fp --cell 3.13-fp` (`nox -s bench-suite -- ...`)
plans the comparisons of cpython_perf.bench.common (mode active vs inactive, patched vs vanilla,
fp vs release) and measures them on pyperformance's benchmark files, pinned in benchmarks/suite.yaml:

- the wheels of pyperformance and pyperf are fetched with `pip download --no-deps` into a cache and
  checked against their sha256 (fetch_pinned); the benchmark directories (bm_*/run_benchmark.py and
  their data files) are used as they are, pyperf's pure-Python package is mounted read-only on the
  container's PYTHONPATH: pip is not needed in the images;
- a benchmark is in the suite if pyperformance's MANIFEST lists it, its pyproject.toml (and the
  variant's .toml) lists no dependency beyond pyperf, its directory has no requirements.txt naming
  anything else, its requires-python admits the cell's version, and suite.yaml does not exclude it;
- instructions (the default): under `valgrind --tool=cachegrind --cache-sim=no`, pyperf's worker mode
  (`--worker --warmups 0 --values 1 --loops N`) with L and 2L loops; one loop = (I(2L) - I(L)) / L,
  so interpreter start-up, pyperf's import and each benchmark's set-up cancel out.  PYTHONHASHSEED=0.
  After each run the container's /tmp is listed: a perf map or jitdump must exist exactly when the
  configuration activates a trampoline;
- wall clock (`--wallclock`): pyperf's own runs (`--fast`, worker processes, the mode activated by
  PYTHONPERFSUPPORT / PYTHON_PERF_JIT_SUPPORT, inherited by the workers), compared with
  `pyperf compare_to`: its t-test decides whether a difference is significant on the measuring host.

Writes results/bench/suite-<UTC time>.json (rewritten after every measurement, "complete": false
until the end) and refreshes BENCHMARKS.md.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..image.docker_build import image_exists
from ..run import containers
from .. import host
from ..source.sources import sha256_of
from ..errors import DriverError
from ..matrix import PROJECT_ROOT, Cell, Matrix
from .common import (INACTIVE, KINDS, NOT_SIGNIFICANT, RESULTS_DIR, Configuration, analyse, configurations, latest_group_results,
                     machine_info, plan_comparisons, utc_stamp, write_results)
from .common import _title as comparison_title
from .instructions import cell_images, parse_instructions, valgrind_image

GROUP = "suite"   # results/bench/suite-<UTC time>.json
CONFIG = PROJECT_ROOT / "benchmarks" / "suite.yaml"
CONTAINER_SUITE = "/suite"         # pyperformance's data-files/benchmarks, read-only
CONTAINER_PYPERF = "/pyperf"       # the directory holding pyperf/, read-only, on PYTHONPATH
CONTAINER_OUT = "/out"             # wall clock: pyperf's JSON files
BENCHMARKS_IN_WHEEL = "pyperformance/data-files/benchmarks"
MODE_ENV = {"perf": {"PYTHONPERFSUPPORT": "1"}, "perf_jit": {"PYTHON_PERF_JIT_SUPPORT": "1"}}
MAP_MARK = "@@cpython-perf-maps:"


def cache_dir() -> Path:
    return Path(os.environ.get("CPYTHON_PERF_SUITE_CACHE", Path.home() / ".cache" / "cpython-perf" / "suite"))


# --------------------------------------------------------------------------
# Configuration and pinned downloads


@dataclass(frozen=True)
class Pin:
    name: str      # the PyPI project
    version: str
    file: str      # the wheel's file name
    sha256: str

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


@dataclass(frozen=True)
class SuiteConfig:
    pyperformance: Pin
    pyperf: Pin
    exclude: dict[str, str]
    min_loop_instructions: int
    path: Path = CONFIG


def load_config(path: Path = CONFIG) -> SuiteConfig:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as exc:
        raise DriverError(f"{path}: cannot read the suite configuration: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise DriverError(f"{path}: not YAML: {exc}") from None
    if not isinstance(data, dict):
        raise DriverError(f"{path}: expected a mapping with pyperformance:, pyperf:, exclude:")
    known = {"pyperformance", "pyperf", "exclude", "min_loop_instructions"}
    if set(data) - known:
        raise DriverError(f"{path}: unknown key(s) {', '.join(sorted(set(data) - known))}; known: {', '.join(sorted(known))}")
    pins = {}
    for name in ("pyperformance", "pyperf"):
        entry = data.get(name)
        if not isinstance(entry, dict) or set(entry) != {"version", "file", "sha256"}:
            raise DriverError(f"{path}: {name}: needs exactly version, file and sha256 (the wheel pip downloads)")
        if not re.fullmatch(r"[0-9a-f]{64}", str(entry["sha256"])):
            raise DriverError(f"{path}: {name}: sha256 must be 64 lowercase hex digits, got {entry['sha256']!r}")
        pins[name] = Pin(name, str(entry["version"]), str(entry["file"]), str(entry["sha256"]))
    exclude = data.get("exclude") or {}
    if not isinstance(exclude, dict) or not all(isinstance(v, str) and v for v in exclude.values()):
        raise DriverError(f"{path}: exclude: a mapping of benchmark name -> the reason it is left out")
    return SuiteConfig(pins["pyperformance"], pins["pyperf"], dict(exclude),
                       int(data.get("min_loop_instructions", 50_000_000)), Path(path))


def pip_download(requirement: str, directory: Path) -> None:
    """`pip download --no-deps --only-binary=:all:` of one requirement into directory (this Python's pip)."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
               "-q", "-d", str(directory), requirement]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise DriverError(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-1500:]}\n"
                          "fix: let pip reach the package index, or put the pinned wheel into the suite cache "
                          f"({cache_dir()})")


def fetch_pinned(pin: Pin, cache: Path | None = None, download=pip_download, log=print) -> Path:
    """The pinned wheel from the cache, else downloaded; its sha256 checked every time.

    A cached file with other bytes is deleted and downloaded again; a download with other bytes is an
    error naming both hashes and is never cached (pip writes into a temporary directory)."""
    cache = Path(cache or cache_dir())
    target = cache / pin.file
    if target.exists():
        got = sha256_of(target)
        if got == pin.sha256:
            return target
        log(f"{target}: sha256 {got}, pinned {pin.sha256}: deleted, downloading again")
        target.unlink()
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".download-", dir=cache) as tmp:
        download(pin.requirement, Path(tmp))
        downloaded = Path(tmp) / pin.file
        if not downloaded.exists():
            found = ", ".join(sorted(p.name for p in Path(tmp).iterdir())) or "nothing"
            raise DriverError(f"pip download {pin.requirement} gave {found}, not {pin.file}: "
                              f"fix the file name of {pin.name} in {CONFIG.name}")
        got = sha256_of(downloaded)
        if got != pin.sha256:
            raise DriverError(f"{pin.file} downloaded with sha256 {got}, but {CONFIG.name} pins {pin.sha256}: "
                              "not used, not cached (a tampered or re-published file); "
                              "if the new bytes are trusted, pin their hash")
        os.replace(downloaded, target)
    log(f"fetched {pin.file} (sha256 verified)")
    return target


def _extract(wheel: Path, prefix: str, destination: Path) -> Path:
    """Members of wheel under prefix into destination (made atomically: a temporary directory renamed)."""
    if destination.exists():
        return destination
    tmp = Path(tempfile.mkdtemp(prefix=".extract-", dir=destination.parent))
    try:
        with zipfile.ZipFile(wheel) as zf:
            members = [m for m in zf.namelist() if m.startswith(prefix)]
            if not members:
                raise DriverError(f"{wheel.name} has no {prefix}: not the expected wheel")
            zf.extractall(tmp, members)
        os.replace(tmp, destination)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return destination


@dataclass(frozen=True)
class SuiteFiles:
    benchmarks: Path      # pyperformance's data-files/benchmarks (MANIFEST, bm_*/)
    pyperf_root: Path     # a directory holding the pyperf package


def prepare(config: SuiteConfig, cache: Path | None = None, download=pip_download, log=print) -> SuiteFiles:
    """Fetch and verify both wheels, extract the benchmark files and pyperf's package into the cache."""
    cache = Path(cache or cache_dir())
    perf_wheel = fetch_pinned(config.pyperformance, cache, download, log)
    pyperf_wheel = fetch_pinned(config.pyperf, cache, download, log)
    root = _extract(perf_wheel, BENCHMARKS_IN_WHEEL + "/", cache / f"pyperformance-{config.pyperformance.version}-{config.pyperformance.sha256[:12]}")
    # the package and its dist-info: pyperf finds its own hooks through its entry points (importlib.metadata)
    pyperf_root = _extract(pyperf_wheel, "pyperf", cache / f"pyperf-{config.pyperf.version}-{config.pyperf.sha256[:12]}-dist")
    return SuiteFiles(root / BENCHMARKS_IN_WHEEL, pyperf_root)


# --------------------------------------------------------------------------
# The suite's benchmarks and the stdlib-only selection


@dataclass(frozen=True)
class Benchmark:
    name: str
    directory: str                     # bm_<base>
    requires_python: str | None
    dependencies: tuple[str, ...]      # of pyproject.toml ([project] dependencies)
    requirements: tuple[str, ...]      # of requirements.txt, where the directory has one
    extra_opts: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()

    @property
    def script(self) -> str:
        return f"{CONTAINER_SUITE}/{self.directory}/run_benchmark.py"


def _toml(path: Path) -> dict:
    try:
        import tomllib
    except ModuleNotFoundError:   # Python 3.10: the same parser as a package
        import tomli as tomllib
    try:
        return tomllib.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DriverError(f"{path}: cannot read the benchmark's metadata: {exc}") from None


def _requirement_name(line: str) -> str:
    return re.split(r"[\s<>=!~;\[]", line.strip(), maxsplit=1)[0].lower().replace("_", "-")


def read_manifest(benchmarks: Path) -> list[Benchmark]:
    """Every benchmark of pyperformance's MANIFEST ([benchmarks] section), with its metadata."""
    manifest = Path(benchmarks) / "MANIFEST"
    try:
        text = manifest.read_text()
    except OSError as exc:
        raise DriverError(f"{manifest}: cannot read pyperformance's benchmark list: {exc.strerror}") from None
    found, section = [], None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("["):
            section = line
            continue
        if section != "[benchmarks]" or line.startswith("name\t") or line.split()[0] == "name":
            continue
        name, metafile = line.split()[:2]
        if not metafile.startswith("<local"):
            raise DriverError(f"{manifest}: {name}: metafile {metafile} is not local to the release")
        base = metafile[len("<local:"):-1] if metafile.startswith("<local:") else name
        directory = Path(benchmarks) / f"bm_{base}"
        project = _toml(directory / "pyproject.toml")
        meta = dict(project.get("tool", {}).get("pyperformance", {}))
        proj = dict(project.get("project", {}))
        if base != name:
            variant = _toml(directory / f"bm_{name}.toml")
            proj.update(variant.get("project", {}))
            meta.update(variant.get("tool", {}).get("pyperformance", {}))
        requirements_file = directory / "requirements.txt"
        requirements = tuple(r.strip() for r in requirements_file.read_text().splitlines()
                             if r.strip() and not r.strip().startswith("#")) if requirements_file.exists() else ()
        tags = meta.get("tags", ())
        found.append(Benchmark(name, directory.name, proj.get("requires-python"), tuple(proj.get("dependencies", ())),
                               requirements, tuple(meta.get("extra_opts", ())),
                               tuple(tags.split() if isinstance(tags, str) else tags)))
    if not found:
        raise DriverError(f"{manifest}: no benchmark listed")
    return found


def stdlib_only(benchmark: Benchmark) -> bool:
    """Nothing needed beyond the standard library and pyperf: pyproject.toml's dependencies and the
    requirements.txt pyperformance installs from name pyperf only."""
    return all(_requirement_name(r) == "pyperf" for r in (*benchmark.dependencies, *benchmark.requirements))


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def python_admits(requires: str | None, version: str) -> bool:
    """Whether a requires-python of the forms pyperformance uses (">=3.8", ">=3.8, <3.14") admits X.Y."""
    if not requires:
        return True
    have = _version_tuple(version)
    for clause in requires.split(","):
        m = re.fullmatch(r"\s*(>=|<=|==|!=|<|>)\s*(\d+(?:\.\d+)*)\s*", clause)
        if not m:
            raise DriverError(f"requires-python {requires!r}: clause {clause!r} not understood")
        op, want = m.group(1), _version_tuple(m.group(2))
        n = len(want)
        mine = have[:n] + (0,) * (n - len(have[:n]))
        if not {">=": mine >= want, "<=": mine <= want, "==": mine == want, "!=": mine != want,
                "<": mine < want, ">": mine > want}[op]:
            return False
    return True


def select(benchmarks: list[Benchmark], version: str, exclude: dict[str, str],
           only: list[str] | None = None) -> tuple[list[Benchmark], dict[str, str]]:
    """(the stdlib-only benchmarks that run on Python `version`, {left-out name: reason}); `only` narrows the
    selection to those names (an unknown name is an error)."""
    names = {b.name for b in benchmarks}
    unknown = [n for n in (only or []) if n not in names]
    if unknown:
        raise DriverError(f"unknown benchmark(s) {', '.join(unknown)}; the suite has {', '.join(sorted(names))}")
    chosen, left_out = [], {}
    for b in benchmarks:
        if only is not None and b.name not in only:
            continue
        if not stdlib_only(b):
            extra = sorted({_requirement_name(r) for r in (*b.dependencies, *b.requirements)} - {"pyperf"})
            left_out[b.name] = f"needs {', '.join(extra)}"
        elif not python_admits(b.requires_python, version):
            left_out[b.name] = f"requires-python {b.requires_python}"
        elif b.name in exclude:
            left_out[b.name] = exclude[b.name]
        else:
            chosen.append(b)
    return chosen, left_out


# --------------------------------------------------------------------------
# Instruction counts


def worker_command(config: Configuration, benchmark: Benchmark, loops: int) -> list[str]:
    """pyperf's worker mode in this process: no calibration, no warm-up, one value of `loops` loops."""
    return ["python3", *config.argv, "-u", benchmark.script, *benchmark.extra_opts,
            "--worker", "--loops", str(loops), "--warmups", "0", "--values", "1"]


def trampoline_check_script(command: list[str]) -> str:
    """command, then how many perf maps / jitdumps it left in /tmp (the container's own), exiting as it did."""
    quoted = " ".join("'" + part.replace("'", "'\\''") + "'" for part in command)
    return (f"{quoted}; rc=$?; echo \"{MAP_MARK}$(ls /tmp | grep -c -E '^(perf-[0-9]+[.]map|jit-[0-9]+[.]dump)$')\"; "
            "exit $rc")


def maps_written(stdout: str) -> int:
    found = [line for line in stdout.splitlines() if line.startswith(MAP_MARK)]
    if not found:
        raise DriverError(f"the run printed no {MAP_MARK} line:\n{stdout[-1000:]}")
    return int(found[-1][len(MAP_MARK):])


def check_trampoline_state(config: Configuration, maps: int) -> None:
    active = config.label != INACTIVE
    if bool(maps) != active:
        raise DriverError(f"{config.key}: {maps} perf map / jitdump file(s) written, "
                          f"expected {'some' if active else 'none'}: the trampoline is not in the configured state")


class BenchmarkFailed(DriverError):
    """A benchmark that does not run in a configuration (recorded, left out of its comparisons)."""


def count_run(client, image: str, files: SuiteFiles, config: Configuration, benchmark: Benchmark, loops: int) -> int:
    command = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
               *worker_command(config, benchmark, loops)]
    result = containers.run(client, image, trampoline_check_script(command), workdir="/tmp",
                            env={"PYTHONHASHSEED": "0", "PYTHONPATH": CONTAINER_PYPERF},
                            read_only={files.benchmarks: CONTAINER_SUITE, files.pyperf_root: CONTAINER_PYPERF},
                            timeout=3600)
    if result.exit_code != 0:
        raise BenchmarkFailed(f"{benchmark.name} in {config.key} exited {result.exit_code}: {last_error(result.stderr)}")
    check_trampoline_state(config, maps_written(result.stdout))
    return main_process_instructions(result.stderr)


_I_REFS_BY_PID = re.compile(r"^==(\d+)==\s+I\s+refs:\s+([\d,]+)", re.M)


def main_process_instructions(stderr: str) -> int:
    """The 'I refs' of the benchmark's own process.  A process it forks without exec (a subprocess whose exec
    fails, say) stays under valgrind and prints its own total, inherited counts included; the benchmark's
    process is the one started first: the lowest PID in the container."""
    found = {int(pid): int(count.replace(",", "")) for pid, count in _I_REFS_BY_PID.findall(stderr)}
    if not found:
        return parse_instructions(stderr)   # its error names the problem
    return found[min(found)]


def last_error(stderr: str) -> str:
    """The program's last line of error output, valgrind's own lines (==PID==) left out."""
    lines = [line for line in stderr.strip().splitlines() if line.strip() and not re.match(r"==\d+==", line)]
    return (lines or ["(no error output)"])[-1][:300]


def loops_for(one_loop: float, minimum: int) -> int:
    """The smallest L for which L loops count at least `minimum` instructions."""
    return max(1, math.ceil(minimum / max(one_loop, 1)))


def per_loop(low: int, high: int, loops: int, what: str) -> float:
    if high <= low:
        raise BenchmarkFailed(f"{what}: {2 * loops} loops counted {high:,} instructions, {loops} loop(s) {low:,}")
    return (high - low) / loops


# --------------------------------------------------------------------------
# Wall clock (pyperf)


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


# --------------------------------------------------------------------------
# Measuring


@dataclass
class Progress:
    """The results file, rewritten after every measurement."""

    results: dict
    directory: Path
    path: Path | None = None

    def save(self) -> Path:
        self.path = write_results(self.results, self.directory, GROUP)
        return self.path


def measure(matrix: Matrix, cells: list[Cell], *, config: SuiteConfig, only: list[str] | None, kinds=KINDS,
            instructions: bool = True, wallclock: bool = False, rigor: str = "fast", existing_images: bool = False,
            directory: Path = RESULTS_DIR, log=print, files: SuiteFiles | None = None) -> dict:
    plan = plan_comparisons(matrix, cells, kinds)
    client = host.docker_client(log)
    not_run = []
    if existing_images:   # a comparison needing a cell without an image is not run, and said so
        missing = {c.cell.name for comparison in plan for c in (comparison.a, comparison.b)
                   if not image_exists(client, c.cell.image)}
        for comparison in plan:
            lacking = sorted({comparison.a.cell.name, comparison.b.cell.name} & missing)
            if lacking:
                not_run.append({"kind": comparison.kind, "a": comparison.a.key, "b": comparison.b.key,
                                "reason": f"no image of {', '.join(lacking)} on the measuring host (not built)"})
                log(f"not run: {comparison.b.key} vs {comparison.a.key}: {not_run[-1]['reason']}")
        plan = [c for c in plan if not ({c.a.cell.name, c.b.cell.name} & missing)]
    if not plan and not not_run:
        raise DriverError(f"nothing to compare among {', '.join(c.name for c in cells)} ({', '.join(kinds)})")
    if not plan:   # every comparison lacks an image: the results say which and why
        return _nothing_run(config, not_run, kinds, only)
    configs = configurations(plan)
    files = files or prepare(config, log=log)
    manifest = read_manifest(files.benchmarks)
    cells_used = list({c.cell.name: c.cell for c in configs}.values())
    selection = {cell.name: select(manifest, cell.version, config.exclude, only) for cell in cells_used}
    order = [b.name for b in manifest if all(b.name in [x.name for x in selection[c.name][0]] for c in cells_used)]
    by_name = {b.name: b for b in manifest}
    measured = cell_images(client, matrix, cells_used, existing_images, log)
    cell_images_ = {name: m["image"] for name, m in measured.items()}
    results = {
        "created": utc_stamp(),
        "complete": False,
        "machine": machine_info(),
        "suite": {"pyperformance": config.pyperformance.__dict__, "pyperf": config.pyperf.__dict__,
                  "config": str(config.path.relative_to(PROJECT_ROOT)) if config.path.is_relative_to(PROJECT_ROOT) else str(config.path),
                  "min_loop_instructions": config.min_loop_instructions},
        "settings": {"instructions": instructions, "wallclock": wallclock, "rigor": rigor, "only": only,
                     "order": [c.key for c in configs]},
        "benchmarks": order,
        "left_out": {name: left for name, (_, left) in selection.items()},
        "stdlib_only": {cell.name: [b.name for b in select(manifest, cell.version, config.exclude)[0]] for cell in cells_used},
        "cells": {cell.name: {"version": cell.version, "variant": cell.variant.name, "arch": cell.arch,
                              "support": cell.support, "vanilla": cell.vanilla, **measured[cell.name]}
                  for cell in cells_used},
        "configurations": {c.key: {"cell": c.cell.name, "label": c.label, "argv": list(c.argv)} for c in configs},
        "comparisons_planned": [{"kind": c.kind, "a": c.a.key, "b": c.b.key} for c in plan],
        "not_run": not_run,
        "instructions": {"loops": {}, "timings": {c.key: {} for c in configs}, "raw": {c.key: {} for c in configs},
                         "failures": {}, "seconds": {c.key: 0.0 for c in configs}},
        "wallclock": {"files": {}, "means": {c.key: {} for c in configs}, "compare": [], "failures": {},
                      "seconds": {c.key: 0.0 for c in configs}},
    }
    progress = Progress(results, Path(directory))
    log(f"standard suite: {len(order)} benchmarks in every cell ({', '.join(order)}); configurations: "
        f"{', '.join(c.key for c in configs)}")
    if instructions:
        vg = {name: valgrind_image(client, image, log) for name, image in cell_images_.items()}
        ins = results["instructions"]
        for name in order:
            benchmark = by_name[name]
            for config_ in configs:
                started = time.monotonic()
                try:
                    loops = ins["loops"].get(name)
                    if loops is None:
                        low = count_run(client, vg[config_.cell.name], files, config_, benchmark, 1)
                        high = count_run(client, vg[config_.cell.name], files, config_, benchmark, 2)
                        loops = loops_for(per_loop(low, high, 1, f"{config_.key} {name}"), config.min_loop_instructions)
                        ins["loops"][name] = loops
                        while loops > 1:   # until L loops count at least min_loop_instructions
                            low = count_run(client, vg[config_.cell.name], files, config_, benchmark, loops)
                            high = count_run(client, vg[config_.cell.name], files, config_, benchmark, 2 * loops)
                            again = loops_for(per_loop(low, high, loops, f"{config_.key} {name}"), config.min_loop_instructions)
                            if again <= loops:
                                break
                            loops = ins["loops"][name] = again
                    else:
                        low = count_run(client, vg[config_.cell.name], files, config_, benchmark, loops)
                        high = count_run(client, vg[config_.cell.name], files, config_, benchmark, 2 * loops)
                    value = per_loop(low, high, loops, f"{config_.key} {name}")
                    ins["timings"][config_.key][name] = [[value]]
                    ins["raw"][config_.key][name] = [low, high]
                    log(f"{config_.key} {name}: {value:,.0f} instructions a loop (L={loops}, "
                        f"{time.monotonic() - started:.0f} s)")
                except BenchmarkFailed as exc:
                    ins["failures"].setdefault(config_.key, {})[name] = str(exc)
                    log(f"{config_.key} {name}: FAILED: {exc}")
                ins["seconds"][config_.key] += time.monotonic() - started
                progress.save()
    if wallclock:
        _measure_wallclock(client, cell_images_, files, configs, [by_name[n] for n in order], rigor, results, progress, log)
    results["complete"] = True
    results["comparisons"] = analyse_suite(results)
    progress.save()
    return results


def _nothing_run(config: SuiteConfig, not_run: list[dict], kinds, only) -> dict:
    results = {
        "created": utc_stamp(), "complete": True, "machine": machine_info(),
        "suite": {"pyperformance": config.pyperformance.__dict__, "pyperf": config.pyperf.__dict__,
                  "config": str(config.path), "min_loop_instructions": config.min_loop_instructions},
        "settings": {"instructions": False, "wallclock": False, "only": only, "order": [], "kinds": list(kinds)},
        "benchmarks": [], "left_out": {}, "cells": {}, "configurations": {}, "comparisons_planned": [],
        "not_run": not_run,
        "instructions": {"loops": {}, "timings": {}, "raw": {}, "failures": {}, "seconds": {}},
        "wallclock": {"files": {}, "means": {}, "compare": [], "failures": {}, "seconds": {}},
    }
    results["comparisons"] = []
    return results


def _measure_wallclock(client, cell_images, files, configs, benchmarks, rigor, results, progress, log) -> None:
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
                result = containers.run(client, cell_images[config.cell.name], command, workdir="/tmp",
                                        env=wallclock_env(config), mounts={Path(tmp): CONTAINER_OUT},
                                        read_only={files.benchmarks: CONTAINER_SUITE, files.pyperf_root: CONTAINER_PYPERF},
                                        timeout=3600)
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


# --------------------------------------------------------------------------
# Analysis


def analyse_suite(results: dict) -> list[dict]:
    """common.analyse over the instruction counts (benchmarks both sides counted), with pyperf's wall-clock
    verdicts attached per benchmark and comparison."""
    ins = results["instructions"]
    shaped = {"timings": ins["timings"], "configurations": results["configurations"], "cells": results["cells"],
              "comparisons": [c for c in results["comparisons_planned"]
                              if ins["timings"][c["a"]] and ins["timings"][c["b"]]
                              and set(ins["timings"][c["a"]]) & set(ins["timings"][c["b"]])]}
    analysed = analyse(shaped) if shaped["comparisons"] else []
    walls = {(c["a"], c["b"]): c for c in results["wallclock"]["compare"]}
    for entry in analysed:
        wall = walls.get((entry["a"], entry["b"]))
        entry["wallclock"] = wall["verdicts"] if wall else None
    found = {(e["a"], e["b"]) for e in analysed}
    for c in results["comparisons_planned"]:   # wall clock only
        if (c["a"], c["b"]) not in found and (c["a"], c["b"]) in walls:
            analysed.append({"kind": c["kind"], "a": c["a"], "b": c["b"], "workloads": {}, "geomean": None,
                             "wallclock": walls[(c["a"], c["b"])]["verdicts"],
                             "title": comparison_title(c["kind"], c["a"], c["b"], results["configurations"]),
                             "target": "", "geomean_limit": None})
    return analysed


def latest_results(directory: Path = RESULTS_DIR) -> Path | None:
    return latest_group_results(directory, GROUP)


# The group's command line (cpython_perf.bench.command): `python -m cpython_perf bench suite ...`


def arguments(parser) -> None:
    parser.add_argument("--benchmarks", help="comma-separated benchmarks of the suite (default: every stdlib-only one)")
    parser.add_argument("--kind", action="append", choices=KINDS, dest="kinds",
                        help="comparisons to make (repeatable; default: all): mode, vanilla, variant")
    parser.add_argument("--no-instructions", action="store_true", help="skip the cachegrind counts")
    parser.add_argument("--wallclock", action="store_true", help="also run pyperf's timing and compare_to")
    parser.add_argument("--rigor", choices=("fast", "rigorous"), default="fast",
                        help="pyperf's --fast (default) or --rigorous for the wall-clock runs")
    parser.add_argument("--existing-images", action="store_true",
                        help="measure the cells' tagged images as they are, never rebuilding (results say which are stale)")
    parser.add_argument("--config", default=str(CONFIG), help="suite configuration (default: benchmarks/suite.yaml)")


def run(matrix, cells, args, log) -> dict:
    only = [n for n in args.benchmarks.split(",") if n] if args.benchmarks else None
    if args.no_instructions and not args.wallclock:
        raise DriverError("--no-instructions without --wallclock measures nothing")
    return measure(matrix, cells, config=load_config(Path(args.config)), only=only, kinds=tuple(args.kinds or KINDS),
                   instructions=not args.no_instructions, wallclock=args.wallclock, rigor=args.rigor,
                   existing_images=args.existing_images, directory=Path(args.results), log=log)


def report(results: dict, path: Path) -> None:
    for entry in results["comparisons"]:
        gm = "-" if entry["geomean"] is None else f"{entry['geomean']:.4f}"
        print(f"{entry['title']}: instructions geometric mean {gm}")


# --------------------------------------------------------------------------
# Markdown


def anchor(entry: dict, created: str = "") -> str:
    """The id of a comparison's table on its run's page (created: the run's time)."""
    stamp = re.sub(r"[^0-9tz]+", "", created.lower())
    return "suite-" + (f"{stamp}-" if stamp else "") + re.sub(r"[^a-z0-9]+", "-", f"{entry['b']}-vs-{entry['a']}".lower()).strip("-")


def percent(ratio: float | None) -> str:
    return "-" if ratio is None else f"{100 * (ratio - 1):+.2f}%"


def instruction_verdict(value: float | None, limit: float | None) -> str:
    """ok / MISSED against a limit on an instruction ratio (four decimals: counts resolve 0.01%)."""
    if value is None or limit is None:
        return "-"
    if value <= limit:
        return f"ok ({value:.4f} <= {limit:.4f})"
    return f"MISSED by {100 * (value / limit - 1):.2f}% ({value:.4f} > {limit:.4f})"


_SPEED = re.compile(r"(?:[\d.]+x (?:slower|faster)|no change)$")


def wallclock_summary(verdicts: dict | None, names, brief: bool = False) -> str:
    """pyperf compare_to over a comparison's benchmarks: what was significant, else 'not significant' (brief:
    each significant benchmark with pyperf's speed verdict alone, "1.10x slower", without the means)."""
    if not verdicts:
        return "not measured"
    shown = [n for n in names if n in verdicts] or list(verdicts)
    sig = [n for n in shown if verdicts[n]["significant"]]
    if not sig:
        return f"not significant (0 of {len(shown)})"

    def figures(text: str) -> str:
        speed = _SPEED.search(text) if brief else None
        return speed.group(0) if speed else verdict_text(text)
    return f"{len(sig)} of {len(shown)} significant: " + "; ".join(f"{n} {figures(verdicts[n]['text'])}" for n in sig)


def _seconds(value: float) -> str:
    return f"{value / 60:.1f} min" if value >= 120 else f"{value:.0f} s"


def _subset_note(results: dict) -> str:
    full = set().union(*results.get("stdlib_only", {}).values()) if results.get("stdlib_only") else set()
    if not results["settings"].get("only") or not full:
        return ""
    rest = sorted(full - set(results["benchmarks"]))
    return (f" **A subset** (`--benchmarks`): {len(results['benchmarks'])} of the {len(full)} stdlib-only benchmarks "
            f"these cells run; not measured in this run: {', '.join(rest)}.")


def render_markdown(results: dict, source: str = "") -> str:
    """The standard suite's Markdown of a run (its page): method, machine, interpreters, one table per comparison."""
    analysed = analyse_suite(results)
    suite_, ins = results["suite"], results["instructions"]
    lines = [
        f'<a id="standard-suite-{re.sub(r"[^0-9tz]+", "", results["created"].lower())}"></a>',
        f"## The standard suite: pyperformance's stdlib-only benchmarks (run of {results['created']})",
        "",
        f"From {source or 'a standard-suite run'} ({results['created']}; `python -m cpython_perf bench suite`)"
        + ("" if results.get("complete") else " **(incomplete: the run was stopped or is still running; the tables hold what it measured)**")
        + ".",
        "",
        f"- pyperformance {suite_['pyperformance']['version']} (`{suite_['pyperformance']['file']}`, sha256 "
        f"`{suite_['pyperformance']['sha256'][:16]}...`), pyperf {suite_['pyperf']['version']} "
        f"(`{suite_['pyperf']['sha256'][:16]}...`), pinned in `{suite_['config']}`; the benchmark files run as they "
        "are in each cell's own interpreter, pyperf mounted read-only on PYTHONPATH.",
        f"- Benchmarks measured ({len(results['benchmarks'])}): {', '.join(results['benchmarks'])}."
        + _subset_note(results),
        "- Instructions: `valgrind --tool=cachegrind --cache-sim=no`, pyperf's worker mode (`--worker --warmups 0 "
        "--values 1 --loops N`) with L and 2L loops, one loop = (I(2L) - I(L)) / L: start-up, pyperf's import and "
        f"the benchmark's set-up cancel out. L: the smallest whose loops count >= {suite_['min_loop_instructions']:,} "
        "instructions, chosen on the first configuration, used for all. PYTHONHASHSEED=0. After each run the "
        "container's /tmp must hold a perf map / jitdump exactly when the configuration activates a trampoline. "
        "Ratio B/A above 1: B executes more instructions; geometric mean over the benchmarks both sides ran.",
        "- Wall clock (where run): pyperf's own runs (`--fast`: worker processes, mode activated by "
        "PYTHONPERFSUPPORT / PYTHON_PERF_JIT_SUPPORT inherited by them), `pyperf compare_to` per comparison: a "
        "difference is reported only where its t-test calls it significant, otherwise \"not significant\".",
    ]
    machine, settings = results.get("machine") or {}, results["settings"]
    if machine:
        lines.append(f"- Machine: {machine.get('cpu', 'unknown CPU')} ({machine.get('arch', '?')}), "
                     f"{machine.get('nproc', '?')} CPUs, kernel {machine.get('kernel', '?')}; measured: "
                     + ", ".join(what for what, done in (("instruction counts", settings.get("instructions", True)),
                                                         (f"wall clock (pyperf --{settings.get('rigor', 'fast')})",
                                                          settings.get("wallclock"))) if done) + ".")
    seconds = ins.get("seconds", {})
    counted = {k: len(v) for k, v in ins["timings"].items()}
    if any(seconds.values()):
        lines.append("- Time under cachegrind per configuration (both loop counts, every benchmark measured): " + ", ".join(
            f"`{k}` {_seconds(v)} ({counted.get(k, 0)} benchmarks)" for k, v in seconds.items() if v) + ".")
    lines += ["", "| cell | support | image | current with this tree |", "| --- | --- | --- | --- |"]
    for name, cell in results["cells"].items():
        lines.append(f"| {name} | {'vanilla' if cell['vanilla'] else cell['support']} | `{cell['image']}` "
                     f"({cell.get('image_id', '')[7:19]}) | {'yes' if cell.get('current', True) else 'no (measured as built)'} |")
    left = {}
    for cell, reasons in results.get("left_out", {}).items():
        for name, reason in reasons.items():
            left.setdefault((name, reason), []).append(cell)
    if left:
        lines += ["", "Left out of the suite (pyperformance's MANIFEST lists them):", ""]
        lines += [f"- `{name}`: {reason}" + ("" if len(cells) == len(results["cells"]) else f" ({', '.join(cells)})")
                  for (name, reason), cells in sorted(left.items())]
    for key, failures in ins.get("failures", {}).items():
        if len(failures) > 3:
            first = next(iter(failures.items()))
            lines.append(f"- failed under cachegrind in `{key}`: {len(failures)} benchmarks ({', '.join(failures)}); "
                         f"the first: `{first[0]}`: {first[1]}")
        else:
            for name, text in failures.items():
                lines.append(f"- failed under cachegrind in `{key}`: `{name}`: {text}")
    for entry in results.get("not_run", []):
        lines.append(f"- not run: `{entry['b']}` vs `{entry['a']}`: {entry['reason']}")
    for entry in analysed:
        lines += ["", f'<a id="{anchor(entry, results["created"])}"></a>', f"### {entry['title']}", "",
                  f"A = `{entry['a']}`, B = `{entry['b']}`. Target: {entry['target'] or '-'}.", ""]
        if entry["workloads"]:
            lines += ["| benchmark | instructions a loop A | B | ratio B/A | wall clock (pyperf compare_to) |",
                      "| --- | ---: | ---: | ---: | --- |"]
            for name, row in entry["workloads"].items():
                wall = (entry.get("wallclock") or {}).get(name)
                lines.append(f"| {name} | {row['a']['median']:,.0f} | {row['b']['median']:,.0f} | {row['ratio']:.4f} | "
                             f"{wall['text'] if wall else '-'} |")
            lines.append(f"| **geometric mean** | | | **{entry['geomean']:.4f}** | "
                         f"{instruction_verdict(entry['geomean'], entry['geomean_limit'])} |")
        if entry.get("wallclock"):
            lines += ["", f"Wall clock: {wallclock_summary(entry['wallclock'], list(entry['wallclock']))}."]
    return "\n".join(lines) + "\n"

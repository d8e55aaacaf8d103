"""The standard suite's pins: benchmarks/suite.yaml (the pinned pyperformance and pyperf wheels), the wheels
fetched with `pip download --no-deps` into a cache and checked against their sha256 every time (fetch_pinned),
and the benchmark directories and pyperf's pure-Python package extracted from them (prepare: SuiteFiles).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..errors import DriverError
from ..matrix import PROJECT_ROOT
from ..source.sources import sha256_of

CONFIG = PROJECT_ROOT / "benchmarks" / "suite.yaml"
BENCHMARKS_IN_WHEEL = "pyperformance/data-files/benchmarks"


def cache_dir() -> Path:
    return Path(os.environ.get("CPYTHON_PERF_SUITE_CACHE", Path.home() / ".cache" / "cpython-perf" / "suite"))


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

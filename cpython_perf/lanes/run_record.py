"""One run of a packaging lane: its options, where it writes (results/deb/<lane>/, the cache of built
packages), and its record, summary.json, saved as each phase ends with the phase's time."""

from __future__ import annotations

import contextlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from ..matrix import PROJECT_ROOT, Lane
from ..source import sources

RESULTS_ROOT = PROJECT_ROOT / "results" / "deb"


@dataclass
class DebOptions:
    release_grade: bool = False   # the archive's own flags: PGO, LTO, the test suite, no frame pointers added
    with_series: bool = True      # False: the baseline, Debian's package rebuilt as it is
    jobs: int = 2
    rebuild: bool = False         # build again even if the cache has the packages of these inputs
    checks: bool = True           # install images and in-image checks
    lintian: bool = True


def run_suffix(options: DebOptions) -> str:
    """What a run's results directory and its checking image's tag add to the lane's name."""
    suffix = "" if options.with_series else "-baseline"
    return suffix + ("-release-grade" if options.release_grade else "")


@dataclass
class LanePaths:
    results: Path
    cache: Path

    @classmethod
    def of(cls, lane: Lane, options: DebOptions, results_root: Path | None = None,
           cache_root: Path | None = None) -> "LanePaths":
        results = Path(results_root or RESULTS_ROOT) / f"{lane.name}{run_suffix(options)}"
        cache = Path(cache_root or default_cache_root()) / lane.name
        return cls(results, cache)


def default_cache_root() -> Path:
    return sources.default_cache_dir().parent / "deb"


def scratch_dir() -> str:
    """Where a run's temporary directories go: beside the cache (the build trees are large)."""
    root = default_cache_root()
    root.mkdir(parents=True, exist_ok=True)
    return str(root)


class RunRecord:
    """summary.json of a run: what each phase found, and its time."""

    def __init__(self, lane: Lane, options: DebOptions, paths: LanePaths, log=print):
        self.lane, self.options, self.paths, self.log = lane, options, paths, log
        self.summary: dict = {"lane": lane.name, "source_package": lane.source_package,
                              "package_version": lane.package_version, "phases": {},
                              "options": {"release_grade": options.release_grade,
                                          "with_series": options.with_series, "jobs": options.jobs}}

    @contextlib.contextmanager
    def phase(self, name: str):
        """A phase, logged as it starts and ends, its seconds recorded and the record saved (also on failure)."""
        started = time.monotonic()
        self.log(f"== {self.lane.name}: {name}")
        failed = True
        try:
            yield
            failed = False
        finally:
            seconds = round(time.monotonic() - started, 1)
            self.summary["phases"][name] = seconds
            self.log(f"== {self.lane.name}: {name} {'FAILED' if failed else 'done'} in {seconds:.0f} s")
            self.save()

    def save(self) -> None:
        self.paths.results.mkdir(parents=True, exist_ok=True)
        (self.paths.results / "summary.json").write_text(json.dumps(self.summary, indent=2, sort_keys=True) + "\n")

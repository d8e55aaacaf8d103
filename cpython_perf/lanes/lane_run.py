"""`python -m cpython_perf deb <lane>` (`nox -s deb-<lane>`): Debian's own source package of a packaging lane
built with the version's series added, installed and checked, one phase after the other:

  source          the verified source package (source_packages)
  build-image     the build image (images)
  unpack .. build the source tree prepared (source_tree) and built (deb_build), or the cache's packages
  lintian         the built packages' tags against the archive's (lintian)
  install, checks the checking images and the checks in them (install_check)

The packages stay in the cache (~/.cache/cpython-perf/deb/<lane>/<key>/); logs, lintian output and the
record of the run go to results/deb/<lane>/ (run_record)."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from .. import host
from ..matrix import Lane, Matrix
from .deb_build import AS_BUILT, BuildConditions, build_environment, build_key, build_packages
from .images import ensure_build_image
from .install_check import install_and_check
from .lintian import run_lintian
from .run_record import DebOptions, LanePaths, RunRecord, scratch_dir

RESULT_FILES = ("build.log", "lintian.txt", "lintian-archive.txt", "lintian-diff.txt", "images.log", "checks.log")


class LaneRun:
    """One run of a lane: its phases in order, each timed into results/deb/<lane>/summary.json."""

    def __init__(self, lane: Lane, matrix: Matrix, options: DebOptions, log=print,
                 results_root: Path | None = None, cache_root: Path | None = None):
        self.lane, self.matrix, self.options, self.log = lane, matrix, options, log
        self.paths = LanePaths.of(lane, options, results_root, cache_root)
        self.record = RunRecord(lane, options, self.paths, log)
        self._entries: dict | None = None

    @property
    def summary(self) -> dict:
        return self.record.summary

    @property
    def entries(self) -> dict:
        """This machine's archive entries of the lane's distribution (source_packages.archive_entries), read once."""
        if self._entries is None:
            from .source_packages import archive_entries
            self._entries = archive_entries(self.lane.distribution)
        return self._entries

    def run(self) -> dict:
        from . import series_forms

        lane, options, record = self.lane, self.options, self.record
        self.paths.results.mkdir(parents=True, exist_ok=True)
        for old in RESULT_FILES:
            (self.paths.results / old).unlink(missing_ok=True)
        host.ensure_commands({"mmdebstrap": "mmdebstrap"}, self.log)
        host.docker_client(self.log)   # a daemon answers (started if allowed)
        package, dsc_text, image, env = self.build_inputs()
        form_dir = None
        form_files: dict[str, bytes] = {}
        names: list[str] = []
        tmp = Path(tempfile.mkdtemp(prefix=f"cpython-perf-deb-{lane.name}-", dir=scratch_dir()))
        try:
            if options.with_series:
                form_dir = tmp / "form"
                names = series_forms.write_quilt_form(lane.patch_series, form_dir)
                form_files = {p.name: p.read_bytes() for p in sorted(form_dir.iterdir())}
            key = build_key(lane, package.dsc, form_files, env, image)
            out = self.paths.cache / key[:16]
            self.summary["packages_dir"] = str(out)
            if options.rebuild or not (out / "DONE").is_file():
                build_packages(record, package.dsc, image, env, form_dir, names, out, tmp)
            else:
                self.log(f"{lane.name}: the packages of these inputs are built already ({out}); --rebuild to redo")
                self.summary["phases"]["build"] = "cached (build_seconds: when it was built)"
            built = json.loads((out / "DONE").read_text())
            self.summary.update(built)
            for name in (*built["changes_files"], "build.log"):
                if not (self.paths.results / name).exists() or name != "build.log":
                    shutil.copy2(out / name, self.paths.results / name)
            self.summary["sizes"] = {name: (out / name).stat().st_size for name in built["debs"]}
            if options.lintian:
                run_lintian(record, image, out, built, dsc_text)
            if options.checks:
                install_and_check(record, self.matrix, out, built, self.entries)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self.summary["result"] = "ok"
        record.save()
        return self.summary

    def build_inputs(self):
        """The verified source package, its .dsc text, the build image (made when missing) and the build
        environment -> (package, dsc_text, image, env), each recorded in the summary."""
        from .source_packages import fetch_source_package

        with self.record.phase("source"):
            package = fetch_source_package(self.lane, log=self.log)
        dsc_text = package.dsc.read_text(errors="replace")
        with self.record.phase("build-image"):
            image = ensure_build_image(self.record, package.dsc, dsc_text, self.entries)
        self.summary["build_image"] = image
        env = build_environment(self.options, self.matrix)
        self.summary["environment"] = env
        return package, dsc_text, image, env

    def build_elsewhere(self, out: Path, conditions: BuildConditions = AS_BUILT,
                        env: dict[str, str] | None = None) -> dict:
        """Build the lane's packages (with its series) again into out under other conditions, bypassing the
        cache (the deb reproducibility check's second build); env replaces the lane's build environment.
        Returns what the build wrote to out/DONE."""
        from . import series_forms

        self.paths.results.mkdir(parents=True, exist_ok=True)
        package, _, image, lane_env = self.build_inputs()
        tmp = Path(tempfile.mkdtemp(prefix=f"cpython-perf-deb-{self.lane.name}-", dir=scratch_dir()))
        try:
            form_dir = tmp / "form"
            names = series_forms.write_quilt_form(self.lane.patch_series, form_dir)
            build_packages(self.record, package.dsc, image, env or lane_env, form_dir, names, out, tmp, conditions)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return json.loads((out / "DONE").read_text())

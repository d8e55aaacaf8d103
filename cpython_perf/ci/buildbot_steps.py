"""The buildbot steps and services of the cpython-perf master (cpython_perf/ci/buildbot_config.py).

Imported by buildmaster_config() only: this module needs buildbot (buildbot/requirements.txt).  What they
decide is in plain functions (buildbot_runs: split_by_connected, run_key, newest_run, ...), which the
unit tests check without buildbot; these classes fetch the facts (the master's data API, git) and act.

  ResolveRun      the first step of `matrix`: the run's key (its build number: results/<run>/<cell>), the one
                  revision every cell of the run checks out (the sourcestamp's, else the branch head by `git
                  ls-remote`, resolved once), the cells its selection names split into those with a connected
                  worker and those without (skipped, written to results/<run>/skipped.json for the report).
  RunTrigger      a Trigger whose builds get that revision in their sourcestamp (the report's trigger).
  CellsTrigger    triggers the cells ResolveRun kept, with the resolved revision in their sourcestamp and the
                  run in their properties; while it waits, a cell whose request is still unclaimed and whose
                  workers have all been disconnected for `offline_grace` seconds is cancelled and recorded as
                  skipped (a worker that went away mid-run no longer hangs the matrix).
  ReportsSite     serves the master's reports directory at <buildbot_url>reports/ on the web UI's own port.
  PublishReport   links the run's report (report.html, report.md) from the report build's page.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from buildbot.process import buildstep
from buildbot.process.results import FAILURE, SUCCESS, WARNINGS, worst_status
from buildbot.steps.trigger import Trigger
from buildbot.util import service
from twisted.internet import defer, reactor, task, utils
from twisted.python import log

from . import buildbot_runs as runs


class RevisionError(Exception):
    """The branch's head could not be had (git ls-remote's error)."""


@defer.inlineCallbacks
def connected_workers(master) -> set[str]:
    """Names of the workers connected to this master now (the data API's connected_to)."""
    workers = yield master.data.get(("workers",))
    return {w["name"] for w in workers if w.get("connected_to")}


def write_skipped(results_dir: str, run: str, skipped: dict[str, str]) -> Path:
    path = Path(results_dir) / str(run) / runs.SKIPPED_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(skipped, indent=1, sort_keys=True) + "\n")
    return path


class ResolveRun(buildstep.BuildStep):
    name = "run"
    description = ["resolving the run"]

    def __init__(self, *, settings, results_dir, cells_of, workers_of, **kwargs):
        kwargs.setdefault("haltOnFailure", True)
        kwargs.setdefault("warnOnWarnings", True)   # skipped cells: the run ends with warnings
        super().__init__(**kwargs)
        self.settings = settings
        self.results_dir = results_dir
        self.cells_of = cells_of
        self.workers_of = workers_of

    @defer.inlineCallbacks
    def resolve_revision(self):
        """(revision or None, how it was found)."""
        ss = self.build.getSourceStamp("")
        if ss is not None and ss.revision:
            return ss.revision, "the build's sourcestamp"
        source = self.settings.source
        if "git" in source:
            ref = f"refs/heads/{source.get('branch', 'main')}"
            out, err, code = yield utils.getProcessOutputAndValue(
                "git", ["ls-remote", source["git"], ref], env=dict(os.environ))
            revision = runs.parse_ls_remote(out.decode(errors="replace"), ref)
            if code != 0 or not revision:
                raise RevisionError(f"git ls-remote {source['git']} {ref} (exit {code}) gave no revision: "
                                              f"{(err or out).decode(errors='replace').strip()[-500:]}")
            return revision, f"git ls-remote {source['git']} {ref}"
        # a path source is a copy of a working tree, not a revision: named for the record only
        out, _, code = yield utils.getProcessOutputAndValue(
            "git", ["-C", str(source["path"]), "rev-parse", "HEAD"], env=dict(os.environ))
        if code == 0 and out.strip():
            return None, f"(path source: a copy of {source['path']}, whose HEAD is {out.decode().strip()}, " \
                         "uncommitted changes included)"
        return None, f"(path source: a copy of {source['path']})"

    @defer.inlineCallbacks
    def run(self):
        props = self.build.getProperties()
        run = str(props.getProperty("buildnumber"))
        props.setProperty("run", run, "ResolveRun", runtime=True)
        lines = [f"run {run}: uploads go to {self.results_dir}/{run}/<cell>"]
        try:
            revision, how = yield self.resolve_revision()
        except RevisionError as exc:
            yield self.addCompleteLog("run", "\n".join([*lines, f"error: {exc}"]) + "\n")
            self.descriptionDone = ["no revision"]
            return FAILURE
        if revision:
            props.setProperty("matrix_revision", revision, "ResolveRun", runtime=True)
            lines.append(f"revision {revision} ({how}): every cell of the run checks it out")
        else:
            lines.append(f"revision: none {how}")
        cells = self.cells_of(props)
        connected = yield connected_workers(self.master)
        chosen, skipped = runs.split_by_connected(cells, self.workers_of, connected)
        write_skipped(self.results_dir, run, skipped)
        props.setProperty("cells", " ".join(chosen), "ResolveRun", runtime=True)
        props.setProperty("skipped", skipped, "ResolveRun", runtime=True)
        lines.append(f"connected workers: {', '.join(sorted(connected)) or 'none'}")
        lines.append(f"cells: {' '.join(chosen) or 'none'}")
        lines += [f"skipped {cell}: {reason}" for cell, reason in skipped.items()]
        yield self.addCompleteLog("run", "\n".join(lines) + "\n")
        self.descriptionDone = [f"run {run}", f"{len(chosen)} cells"] + \
            ([f"{len(skipped)} skipped (no connected worker)"] if skipped else []) + \
            ([revision[:12]] if revision else [])
        return WARNINGS if skipped else SUCCESS


class RunTrigger(Trigger):
    """A Trigger whose builds check out the revision ResolveRun resolved (the whole sourcestamp: repository,
    branch, revision), not whatever the branch holds when each starts."""

    def __init__(self, *, settings, **kwargs):
        super().__init__(**kwargs)
        self.settings = settings

    def prepareSourcestampListForTrigger(self):
        revision = self.getProperty("matrix_revision")
        if revision and "git" in self.settings.source:
            return [{"codebase": "", "repository": self.settings.source["git"],
                     "branch": self.settings.source.get("branch", "main"), "revision": revision, "project": ""}]
        return super().prepareSourcestampListForTrigger()


class CellsTrigger(RunTrigger):
    """Triggers the cells ResolveRun kept (property `cells`) at the resolved revision; cancels a cell whose
    workers all went away while its request waited (recorded as skipped)."""

    def __init__(self, *, results_dir, workers_of, offline_grace, check_interval=10, **kwargs):
        kwargs.setdefault("warnOnWarnings", True)   # a cell cancelled for want of a worker: the run has warnings
        super().__init__(**kwargs)
        self.results_dir = results_dir
        self.workers_of = workers_of
        self.offline_grace = offline_grace
        self.check_interval = check_interval
        self._offline_since: dict[int, float] = {}
        self._cancelled: dict[int, str] = {}

    def getSchedulersAndProperties(self):
        chosen = {runs.cell_scheduler(c) for c in (self.getProperty("cells") or "").split()}
        return [entry for entry in super().getSchedulersAndProperties() if entry["sched_name"] in chosen]

    @defer.inlineCallbacks
    def run(self):
        loop = task.LoopingCall(self._watch)
        loop.start(self.check_interval, now=False)
        try:
            result = yield super().run()
        finally:
            if loop.running:
                loop.stop()
        return result

    @defer.inlineCallbacks
    def _watch(self):
        try:
            connected = yield connected_workers(self.master)
            for brid in list(self.brids):
                if brid in self._cancelled:
                    continue
                br = yield self.master.data.get(("buildrequests", brid))
                if br is None or br["claimed"] or br["complete"]:
                    self._offline_since.pop(brid, None)
                    continue
                builder = yield self.master.data.get(("builders", br["builderid"]))
                name = builder["name"]
                if any(w in connected for w in self.workers_of(name)):
                    self._offline_since.pop(brid, None)
                    continue
                since = self._offline_since.setdefault(brid, time.monotonic())
                waited = time.monotonic() - since
                if waited < self.offline_grace:
                    continue
                reason = (f"no connected worker (its workers {', '.join(self.workers_of(name))} went away during "
                          f"the run; the request waited {waited:.0f} s and was cancelled)")
                self._cancelled[brid] = name
                self.master.data.control("cancel", {"reason": reason}, ("buildrequests", brid))
                skipped = dict(self.getProperty("skipped") or {})
                skipped[name] = reason
                self.setProperty("skipped", skipped, "CellsTrigger", runtime=True)
                write_skipped(self.results_dir, self.getProperty("run"), skipped)
                log.msg(f"matrix run {self.getProperty('run')}: {name}: {reason}")
        except Exception:   # the watch must never break the wait
            log.err(None, "CellsTrigger: checking for cells without a connected worker")

    @defer.inlineCallbacks
    def worstStatus(self, overall_results, rclist, unimportant_brids):
        # a cell cancelled for want of a worker is reported (skipped), not a failure of the run
        results = yield super().worstStatus(overall_results, rclist, [*unimportant_brids, *self._cancelled])
        if self._cancelled:
            results = worst_status(results, WARNINGS)
        return results

    def getCurrentSummary(self):
        summary = super().getCurrentSummary()
        if self._cancelled:
            summary = {"step": summary["step"] + f", {len(self._cancelled)} skipped (no connected worker)"}
        return summary


def attach_reports(master, reports_dir: str) -> bool:
    """Serve reports_dir at /reports/ of the master's web server (the same root as the UI and REST API)."""
    from twisted.web.static import File

    root = getattr(getattr(master, "www", None), "root", None)
    if root is None:
        return False
    Path(reports_dir).mkdir(parents=True, exist_ok=True)
    root.putChild(b"reports", File(reports_dir))
    return True


class ReportsSite(service.BuildbotService):
    """<buildbot_url>reports/: the reports directory, served by the web UI's server (static files)."""

    name = "cpython-perf-reports"

    def checkConfig(self, reports_dir):
        pass

    @defer.inlineCallbacks
    def reconfigService(self, reports_dir):
        self.reports_dir = reports_dir
        yield super().reconfigService()
        self._attach(tries=60)

    def _attach(self, tries):
        # the www service builds its site after the services (a lower reconfig priority): try until it is there
        if not attach_reports(self.master, self.reports_dir) and tries > 0:
            reactor.callLater(1, self._attach, tries - 1)


class PublishReport(buildstep.BuildStep):
    """Links the run's report from the build page (and serves the reports directory, if not yet)."""

    name = "report links"

    def __init__(self, *, reports_dir, buildbot_url, **kwargs):
        kwargs.setdefault("alwaysRun", False)
        super().__init__(**kwargs)
        self.reports_dir = reports_dir
        self.buildbot_url = buildbot_url

    @defer.inlineCallbacks
    def run(self):
        attach_reports(self.master, self.reports_dir)
        run = self.getProperty("run")
        base = f"{self.buildbot_url.rstrip('/')}/reports/{run}"
        for name in ("report.html", "report.md"):
            if (Path(self.reports_dir) / str(run) / name).exists():
                yield self.addURL(f"{name} (run {run})", f"{base}/{name}")
        self.descriptionDone = [f"reports/{run}/report.html"]
        return SUCCESS if (Path(self.reports_dir) / str(run) / "report.html").exists() else WARNINGS


__all__ = ["ResolveRun", "RunTrigger", "CellsTrigger", "ReportsSite", "PublishReport"]

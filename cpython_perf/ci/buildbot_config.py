"""A buildbot master configuration generated from the CI plan (cpython_perf/ci/plan.py).

buildbot/master.cfg (checked in) imports this module and asks it for BuildmasterConfig, so the builders
are recomputed from matrix.yaml whenever the master loads its configuration (`buildbot reconfig`): nothing
is generated into the master's directory, nothing goes stale.  As in python/buildmaster-config, secrets
and machine facts live in a settings file beside the master (<master>/settings.yaml, or
$CPYTHON_PERF_BUILDBOT_SETTINGS; buildbot/settings.example.yaml documents it), never in the repository.

What the master gets:

  workers     one per settings entry, each declaring its arch (x86_64, aarch64, i386); a password comes from
              the environment variable password_env names, a file (password_file), or the settings file
              itself (password), and is never written here.  Each takes max_builds cells at a time (1).
              Plus a LocalWorker (`coordinator`) in the master that runs the `matrix` builder's triggers.
  builders    one per cell of the plan (every cell of matrix.yaml), on the workers whose arch is the arch the
              plan's cell job needs (`runner_arch`: aarch64 cells on x86_64 workers under qemu by default,
              as the driver builds and runs them today, or on aarch64 workers with `aarch64: native`).
              Tags: smoke (matrix.yaml smoke_cells), the arch, version, variant, vanilla, build-only.
              Steps: check the worker's arch, get the source, `nox -s build-<cell> -- --if-stale`
              (the image is rebuilt only when its inputs digest changed), `nox -s
              conformance-<cell>` (the plan's session; the build property pytest_args is passed after
              `--`), `nox -s report` for the seed flame graph, and results/<cell>/ (JUnit, perf script
              output, flame graph) uploaded to the master's results/<cell>/ even when the cell failed.
              `report`: the uploaded results of the selected cells are tarred on the master, downloaded
              to an x86_64 worker, `nox -s report` runs over them, and the report comes back to the
              master's reports/<build number>/ (reports/latest).
              `matrix`: triggers the cell builders of a selection (the plan's own selection: an event,
              labels, selectors), waits, then triggers `report` whatever the cells gave.
  runs        a `matrix` build is a run: results/<run>/<cell> and reports/<run>/ (run: its build number);
              one at a time; it resolves the revision once (every triggered build checks it out) and
              skips the cells no connected worker can take (results/<run>/skipped.json, in the report).
              buildbot_runs.py holds these decisions, buildbot_steps.py the steps that make them.
  schedulers  a Triggerable per cell builder and one for `report`; ForceSchedulers: `force-matrix` (event,
              labels, select, pytest_args) and `force` (any builder).  A nightly run of the whole matrix
              if settings say `nightly: {hour: H, minute: M}`; with a git source and `poll: SECONDS`, a
              GitPoller watches the branch and `on-push` runs the whole matrix after each new commit
              (the plan's `push` event, as a push to main does on GitHub); a documentation-only commit
              runs nothing.
  services    the reports directory served at <buildbot_url>reports/; GitHubStatusPush and MailNotifier
              when the settings configure them; a janitor (build logs older than log_horizon_days).

The description (builder_specs) is plain data, checked by the unit tests without buildbot installed;
buildmaster_config() turns it into buildbot objects and needs buildbot (pinned in buildbot/requirements.txt).
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import DriverError
from ..subcommands import Command, main_of
from ..arches import DEFAULT_ARCH, KNOWN_ARCHES
from ..matrix import PROJECT_ROOT, Matrix, load_matrix
from . import plan as ci_plan
from .buildbot_runs import (NO_WORKER, SKIPPED_FILE, cell_scheduler, is_important_change,  # noqa: F401
                            is_important_file, newest_run, parse_ls_remote, run_key, same_values, split_by_connected)

BUILDBOT_DIR = PROJECT_ROOT / "buildbot"
REQUIREMENTS = BUILDBOT_DIR / "requirements.txt"
SETTINGS_ENV = "CPYTHON_PERF_BUILDBOT_SETTINGS"
COORDINATOR = "coordinator"
MATRIX_BUILDER = "matrix"
REPORT_BUILDER = "report"
FORCE_MATRIX = "force-matrix"
FORCE = "force"
ON_PUSH = "on-push"          # a commit on the polled branch (settings source: {git, branch, poll})
REPORT_TRIGGER = "report"
SMOKE_TAG = "smoke"
# the plan's selection for a forced `matrix` build: a pull request's (smoke cells, plus its labels)
DEFAULT_EVENT = "pull_request"
# Where a run's uploads go on the master: results/<run>/<cell> (run: the `matrix` build number, or
# <builder>-<build number> for a cell forced on its own), beside the run's skipped.json; reports/<run>/.
RUN = "%(prop:run)s"
# A forced, nightly or pushed `matrix` request collapses into a newer pending one of the same selection (as
# buildbot's default, which python/buildmaster-config keeps, collapses a branch's pending requests); a cell's
# or the report's only with a request of the same run (runs never mix).
MATRIX_COLLAPSE_KEYS = ("event", "labels", "select", "pytest_args")
CELL_COLLAPSE_KEYS = ("run", "pytest_args", "cells")
# The source copy of a `path:` source leaves these out (the worker's own .nox venvs are kept between builds).
COPY_EXCLUDES = (".git", ".nox", "results", "dist", "*.egg-info", "__pycache__", ".pytest_cache")


class BuildbotConfigError(DriverError):
    """Settings the master cannot be configured from (named with the file and the key)."""


def pins() -> list[str]:
    """The pinned requirements of a master (buildbot, buildbot-www) and a worker (buildbot-worker)."""
    return [line.split("#")[0].strip() for line in REQUIREMENTS.read_text().splitlines()
            if line.split("#")[0].strip()]


# --------------------------------------------------------------------------
# settings


@dataclass(frozen=True)
class WorkerSettings:
    name: str
    arch: str
    password: str = field(repr=False)
    max_builds: int = 1


@dataclass
class Settings:
    workers: list[WorkerSettings]
    path: Path | None = None
    title: str = "cpython-perf"
    worker_port: int | str = 9989          # an int, or a Twisted strports string (tcp:9989:interface=127.0.0.1)
    www_port: int | str | None = 8010      # the web UI and REST API; null: none
    buildbot_url: str = "http://localhost:8010/"
    db_url: str = "sqlite:///state.sqlite"
    aarch64: str = "qemu"                  # the plan's --aarch64: where aarch64 cells run
    source: dict = field(default_factory=lambda: {"path": str(PROJECT_ROOT)})
    nox: list[str] = field(default_factory=lambda: ["nox"])
    env: dict[str, str] = field(default_factory=dict)   # extra environment of every worker step
    results_dir: str | None = None         # on the master; default <master>/results
    reports_dir: str | None = None         # on the master; default <master>/reports
    nightly: dict | None = None            # {hour: H, minute: M}: the whole matrix (event schedule)
    offline_grace: int = 300               # s a triggered cell may wait with none of its workers connected
    log_horizon_days: int | None = 180     # the janitor deletes build logs older than this (null: never)
    results_horizon_days: int | None = 30  # `matrix` deletes results/<run> and reports/<run> older than this
    github_status: dict | None = None      # {token_env | token_file, context}: GitHubStatusPush
    mail: dict | None = None               # {from, to, relayhost, port, mode}: MailNotifier
    github_token: str | None = field(default=None, repr=False)


_SETTINGS_KEYS = {"workers", "title", "worker_port", "www_port", "buildbot_url", "db_url", "aarch64", "source",
                  "nox", "env", "results_dir", "reports_dir", "nightly", "offline_grace", "log_horizon_days",
                  "results_horizon_days", "github_status", "mail"}
_GITHUB_KEYS = {"token_env", "token_file", "context", "base_url"}
_MAIL_KEYS = {"from", "to", "relayhost", "port", "mode"}
MAIL_MODES = ("failing", "passing", "problem", "warnings", "exception", "change", "all")
_WORKER_KEYS = {"name", "arch", "password", "password_env", "password_file", "max_builds"}


def _secret(entry: dict, where: str, environ, name: str, literal: bool) -> str:
    """A secret given as <name>_env (an environment variable of the master), <name>_file, or (where literal)
    <name> itself in the settings: exactly one of them."""
    keys = [f"{name}_env", f"{name}_file"] + ([name] if literal else [])
    given = [k for k in keys if k in entry]
    if len(given) != 1:
        raise BuildbotConfigError(f"{where}: give exactly one of {', '.join(keys)}, not {given or 'none'}")
    key = given[0]
    if key == f"{name}_env":
        value = environ.get(str(entry[key]))
        if not value:
            raise BuildbotConfigError(f"{where}: the environment variable {entry[key]} ({key}) is not set in the "
                                      "master's environment")
        return value
    if key == f"{name}_file":
        try:
            return Path(entry[key]).expanduser().read_text().strip()
        except OSError as exc:
            raise BuildbotConfigError(f"{where}: {key}: {exc}") from None
    return str(entry[key])


def _github_token(entry: dict, where: str, environ) -> str:
    return _secret(entry, where, environ, "token", literal=False)


def _password(entry: dict, where: str, environ) -> str:
    return _secret(entry, where, environ, "password", literal=True)


def parse_settings(data: dict, where: str = "settings", environ=None) -> Settings:
    environ = os.environ if environ is None else environ
    if not isinstance(data, dict):
        raise BuildbotConfigError(f"{where}: a mapping is expected")
    unknown = set(data) - _SETTINGS_KEYS
    if unknown:
        raise BuildbotConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; "
                                  f"known: {', '.join(sorted(_SETTINGS_KEYS))}")
    workers, names = [], set()
    for i, entry in enumerate(data.get("workers") or []):
        at = f"{where}: workers[{i}]"
        if not isinstance(entry, dict) or "name" not in entry or "arch" not in entry:
            raise BuildbotConfigError(f"{at}: a worker needs a name and the arch it declares")
        unknown = set(entry) - _WORKER_KEYS
        if unknown:
            raise BuildbotConfigError(f"{at}: unknown key(s) {', '.join(sorted(unknown))}")
        name, arch = str(entry["name"]), str(entry["arch"])
        if arch not in KNOWN_ARCHES:
            raise BuildbotConfigError(f"{at}: arch {arch!r} is not one of {', '.join(KNOWN_ARCHES)}")
        if name in names or name == COORDINATOR:
            raise BuildbotConfigError(f"{at}: worker name {name!r} is taken")
        names.add(name)
        workers.append(WorkerSettings(name, arch, _password(entry, f"{at} ({name})", environ),
                                      int(entry.get("max_builds", 1))))
    if not workers:
        raise BuildbotConfigError(f"{where}: no workers")
    settings = Settings(workers=workers, **{k: v for k, v in data.items() if k != "workers"})
    for key in ("offline_grace", "log_horizon_days", "results_horizon_days"):
        value = getattr(settings, key)
        if value is not None and not (isinstance(value, int) and not isinstance(value, bool) and value > 0):
            raise BuildbotConfigError(f"{where}: {key} is a positive whole number, not {value!r}")
    if settings.offline_grace is None:
        raise BuildbotConfigError(f"{where}: offline_grace is a number of seconds")
    if settings.github_status is not None:
        gh = settings.github_status
        if not isinstance(gh, dict) or set(gh) - _GITHUB_KEYS:
            raise BuildbotConfigError(f"{where}: github_status is a mapping of {', '.join(sorted(_GITHUB_KEYS))}")
        settings.github_token = _github_token(gh, f"{where}: github_status", environ)
    if settings.mail is not None:
        mail = settings.mail
        if not isinstance(mail, dict) or set(mail) - _MAIL_KEYS or not mail.get("from") or not mail.get("to"):
            raise BuildbotConfigError(f"{where}: mail is a mapping with from and to (and relayhost, port, mode)")
        if isinstance(mail["to"], str):
            mail["to"] = [mail["to"]]
        if mail.get("mode", "problem") not in MAIL_MODES:
            raise BuildbotConfigError(f"{where}: mail mode is one of {', '.join(MAIL_MODES)}")
    if settings.aarch64 not in ci_plan.AARCH64_PLACEMENTS:
        raise BuildbotConfigError(f"{where}: aarch64 must be one of {', '.join(ci_plan.AARCH64_PLACEMENTS)}")
    source = settings.source
    if not (isinstance(source, dict) and (set(source) == {"path"}
                                           or ("git" in source and set(source) <= {"git", "branch", "poll"}))):
        raise BuildbotConfigError(f"{where}: source is {{path: DIR}} or {{git: URL, branch: BRANCH, poll: SECONDS}}")
    poll = source.get("poll")
    if poll is not None and not (isinstance(poll, int) and not isinstance(poll, bool) and poll >= 60):
        raise BuildbotConfigError(f"{where}: source poll is how often (seconds, at least 60) the master asks the "
                                  f"git repository for new commits on its branch, not {poll!r}")
    if isinstance(settings.nox, str):
        settings.nox = shlex.split(settings.nox)
    return settings


def load_settings(path: Path | str | None = None, basedir: Path | str | None = None, environ=None) -> Settings:
    """The settings file: path, else $CPYTHON_PERF_BUILDBOT_SETTINGS, else <basedir>/settings.yaml."""
    environ = os.environ if environ is None else environ
    path = Path(path or environ.get(SETTINGS_ENV) or Path(basedir or ".") / "settings.yaml")
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise BuildbotConfigError(f"buildbot settings {path}: {exc.strerror}; copy buildbot/settings.example.yaml "
                                  f"there (or point ${SETTINGS_ENV} at one)") from None
    settings = parse_settings(data, str(path), environ)
    settings.path = path
    return settings


# --------------------------------------------------------------------------
# the description: builders and their steps as data


# Placeholder in a command: the build property pytest_args, passed to the nox session after `--`.
PYTEST_ARGS = "<pytest_args>"


@dataclass
class Step:
    kind: str       # worker | master | upload | download | trigger | git | arch | run | resolve | publish
    name: str
    command: list | None = None
    options: dict = field(default_factory=dict)


@dataclass
class BuilderSpec:
    name: str
    workers: list[str]
    tags: list[str]
    steps: list[Step]
    job: dict | None = None     # the plan's cell job, for a cell builder


def nox_session(settings: Settings, session: str, posargs: bool = False) -> list[str]:
    return [*settings.nox, "-s", session, *([PYTEST_ARGS] if posargs else [])]


def source_steps(settings: Settings) -> list[Step]:
    """The project's tree in the build directory: a git checkout, or a copy of a directory on the worker's
    machine (a local fleet, the buildbot-local proof) that keeps the build's .nox venvs."""
    if "git" in settings.source:
        # the revision is the sourcestamp's: the one `matrix` resolved for the whole run; a failed fetch or
        # checkout wipes the directory and clones again (clobberOnFailure, as python/buildmaster-config)
        return [Step("git", "source", options={"repourl": settings.source["git"],
                                               "branch": settings.source.get("branch", "main"),
                                               "clobberOnFailure": True}),
                Step("worker", "clean results", ["rm", "-rf", "results"])]
    excludes = " ".join(f"--exclude={shlex.quote('./' + e if '*' not in e else e)}" for e in COPY_EXCLUDES)
    script = ("find . -mindepth 1 -maxdepth 1 ! -name .nox -exec rm -rf {} + && "
              f'tar -C "$CPYTHON_PERF_SOURCE" {excludes} -cf - . | tar -xf -')
    return [Step("worker", "source", ["sh", "-c", script],
                 {"env": {"CPYTHON_PERF_SOURCE": str(settings.source["path"])}})]


def master_dirs(settings: Settings, basedir: Path | str) -> tuple[str, str]:
    base = Path(basedir).resolve()
    return (str(Path(settings.results_dir or base / "results").expanduser()),
            str(Path(settings.reports_dir or base / "reports").expanduser()))


def arch_check() -> Step:
    """The worker is what it declared: `uname -m` against its arch property."""
    return Step("arch", "worker arch", ["sh", "-c",
                'm=$(uname -m); [ "$m" = "$WORKER_ARCH" ] || '
                '{ echo "this worker declares $WORKER_ARCH but runs $m: fix settings.yaml"; exit 1; }'])


def cell_builder(matrix: Matrix, job: dict, settings: Settings, basedir) -> BuilderSpec:
    cell = job["cell"]
    results, _ = master_dirs(settings, basedir)
    workers = [w.name for w in settings.workers if w.arch == job["runner_arch"]]
    if not workers:
        raise BuildbotConfigError(
            f"{settings.path or 'settings'}: cell {cell} runs on {job['runner_arch']} (aarch64: {settings.aarch64}) "
            f"and no worker declares that arch; add one, or set aarch64: qemu to run aarch64 cells on x86_64")
    tags = [job["arch"], matrix.cell(cell).version, job["variant"]]
    tags += [SMOKE_TAG] if cell in matrix.smoke_cells else []
    tags += ["vanilla"] if job["vanilla"] else []
    tags += ["build-only"] if job["build_only"] else []
    steps = [
        arch_check(),
        # the run this build belongs to: the `matrix` build's number (a property of the trigger), or
        # <builder>-<number> when the cell was forced on its own
        Step("run", "run"),
        *source_steps(settings),
        Step("worker", "clean results", ["rm", "-rf", f"results/{cell}"]),
        # the image is kept on the worker between builds: rebuilt only when its inputs digest changed (as the
        # GitHub workflow restores an unchanged image from its cache)
        Step("worker", f"build-{cell}", [*nox_session(settings, f"build-{cell}"), "--", "--if-stale"],
             {"haltOnFailure": True}),
        Step("worker", job["session"], nox_session(settings, job["session"], posargs=True),
             {"haltOnFailure": False, "flunkOnFailure": True}),
        # the seed flame graph, as the GitHub cell job renders it before uploading (results/<cell>/)
        Step("worker", "flame graph", nox_session(settings, "report"),
             {"alwaysRun": True, "haltOnFailure": False, "flunkOnFailure": False, "warnOnFailure": True}),
        Step("master", "clear upload", ["rm", "-rf", f"{results}/{RUN}/{cell}"], {"alwaysRun": True}),
        Step("upload", "upload results", options={"workersrc": f"results/{cell}",
                                                  "masterdest": f"{results}/{RUN}/{cell}", "alwaysRun": True}),
    ]
    return BuilderSpec(cell, workers, tags, steps, job)


def report_builder(settings: Settings, basedir) -> BuilderSpec:
    results, reports = master_dirs(settings, basedir)
    workers = [w.name for w in settings.workers if w.arch == DEFAULT_ARCH]
    if not workers:
        raise BuildbotConfigError(f"{settings.path or 'settings'}: the report builder needs an {DEFAULT_ARCH} worker "
                                  "(the flame-graph renderer is the x86_64 tools image); none is declared")
    tarball = f"{reports}/inputs-{RUN}.tar"
    steps = [
        # the run whose uploads it reports: the triggering `matrix` build's, or (forced on its own) the newest
        Step("run", "run"),
        *source_steps(settings),
        Step("worker", "clean results", ["sh", "-c", "rm -rf results results.tar && mkdir results"]),
        # results/<run>/: that run's cells only, and its skipped.json (cells no connected worker could take)
        Step("master", "collect uploads", ["collect", results, tarball]),
        Step("download", "download results", options={"mastersrc": tarball, "workerdest": "results.tar"}),
        Step("master", "remove tarball", ["rm", "-f", tarball], {"alwaysRun": True, "flunkOnFailure": False}),
        Step("worker", "unpack results", ["tar", "-xf", "results.tar", "-C", "results"]),
        Step("worker", "report", nox_session(settings, "report"), {"haltOnFailure": True}),
        Step("master", "clear report", ["rm", "-rf", f"{reports}/{RUN}"]),
        Step("upload", "upload report", options={"workersrc": "results", "masterdest": f"{reports}/{RUN}"}),
        Step("master", "latest", ["ln", "-sfn", RUN, f"{reports}/latest"]),
        # links on the build page to <buildbot_url>reports/<run>/report.html (served by the web UI's server)
        Step("publish", "report links"),
    ]
    return BuilderSpec(REPORT_BUILDER, workers, ["report"], steps)


def matrix_builder(settings: Settings, basedir=".") -> BuilderSpec:
    results, reports = master_dirs(settings, basedir)
    steps = [
        # the run (its number keys results/<run>/), the revision every cell checks out, and the selected
        # cells split into those a connected worker can take and the skipped (results/<run>/skipped.json)
        Step("resolve", "run"),
        Step("trigger", "cells", options={"select": True, "waitForFinish": True, "haltOnFailure": False,
                                          "flunkOnFailure": True}),
        Step("trigger", "report", options={"schedulerNames": [REPORT_TRIGGER], "waitForFinish": True,
                                           "alwaysRun": True, "cells": True}),
    ]
    if settings.results_horizon_days:
        days = settings.results_horizon_days
        steps.append(Step("master", "prune old runs", [
            "sh", "-c", f'for d in "$0" "$1"; do [ -d "$d" ] && find "$d" -mindepth 1 -maxdepth 1 -mtime +{days} '
                        '! -name latest -exec rm -rf {} +; done; true', results, reports],
            {"alwaysRun": True, "flunkOnFailure": False, "warnOnFailure": True}))
    return BuilderSpec(MATRIX_BUILDER, [COORDINATOR], ["matrix"], steps)


def the_plan(matrix: Matrix, settings: Settings) -> dict:
    """Every cell of the matrix as the plan places it (a push's selection: the whole matrix)."""
    return ci_plan.build_plan(matrix, "push", aarch64=settings.aarch64)


def builder_specs(matrix: Matrix, settings: Settings, basedir=".", plan: dict | None = None) -> list[BuilderSpec]:
    plan = plan or the_plan(matrix, settings)
    if plan["aarch64"] != settings.aarch64:
        raise BuildbotConfigError(f"a plan of aarch64 {plan['aarch64']} for settings of aarch64 {settings.aarch64}")
    return [*(cell_builder(matrix, job, settings, basedir) for job in plan["cells"]),
            report_builder(settings, basedir), matrix_builder(settings, basedir)]


def selected_cells(matrix: Matrix, event: str | None, labels: str | None = "", select: str | None = "") -> list[str]:
    """The cells a `matrix` build triggers: the plan's selection (select_cells) for its properties."""
    return ci_plan.select_cells(matrix, event or DEFAULT_EVENT, ci_plan.parse_list(labels or ""),
                                ci_plan.parse_list(select or "")).cells


# --------------------------------------------------------------------------
# buildbot objects


def _collect_uploads(results: str, run: str, tarball: str, cells: list[str]) -> list[str]:
    """tar of results/<run>/: the uploaded <cell>/ of the selected cells (every uploaded one when none is
    named) and the run's skipped.json."""
    root = Path(results) / str(run)
    present = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    chosen = [c for c in present if not cells or c in cells]
    chosen += [SKIPPED_FILE] if (root / SKIPPED_FILE).is_file() else []
    return ["sh", "-c", f'mkdir -p "$(dirname {shlex.quote(tarball)})" && mkdir -p {shlex.quote(str(root))} && '
            + shlex.join(["tar", "-C", str(root), "-cf", tarball, "--files-from=/dev/null", *chosen])]


def _collapse(keys):
    """buildbot's default collapsing (sourcestamps, scheduler properties) and these properties equal too."""
    from buildbot.process.buildrequest import BuildRequest
    from twisted.internet import defer

    @defer.inlineCallbacks
    def collapse(master, builder, new_br, old_br):
        if new_br["buildsetid"] == old_br["buildsetid"]:
            return True
        ok = yield BuildRequest.canBeCollapsed(master, new_br, old_br)
        if not ok:
            return False
        new = yield master.data.get(("buildsets", str(new_br["buildsetid"]), "properties"))
        old = yield master.data.get(("buildsets", str(old_br["buildsetid"]), "properties"))
        return same_values(keys, new or {}, old or {})
    collapse.keys = tuple(keys)
    return collapse


def services(settings: Settings, basedir, builder_names: list[str]) -> list:
    """Reporters (GitHub commit statuses, mail) when the settings configure them, and the reports site."""
    from buildbot.plugins import reporters, util

    from .buildbot_steps import ReportsSite

    _, reports = master_dirs(settings, basedir)
    found = [ReportsSite(reports)]
    if settings.github_status is not None:
        gh = settings.github_status
        kwargs = {"baseURL": gh["base_url"]} if gh.get("base_url") else {}
        # each build of a commit the master got from GitHub (a polled or resolved revision of a github.com
        # source): pending when it starts, then its result, under context cpython-perf/<builder>
        found.append(reporters.GitHubStatusPush(
            token=settings.github_token,
            context=util.Interpolate(gh.get("context", "cpython-perf/%(prop:buildername)s")),
            generators=[reporters.BuildStartEndStatusGenerator(builders=builder_names)], **kwargs))
    if settings.mail is not None:
        mail = settings.mail
        # as python/buildmaster-config: the run's result when it is a problem, and a worker gone missing
        found.append(reporters.MailNotifier(
            fromaddr=mail["from"], relayhost=mail.get("relayhost", "localhost"), smtpPort=int(mail.get("port", 25)),
            sendToInterestedUsers=False, extraRecipients=list(mail["to"]),
            generators=[reporters.BuildSetStatusGenerator(mode=(mail.get("mode", "problem"),),
                                                          builders=[MATRIX_BUILDER]),
                        reporters.WorkerMissingGenerator(workers="all")]))
    return found


def buildmaster_config(basedir: Path | str, settings: Settings | None = None, matrix: Matrix | None = None) -> dict:
    """The BuildmasterConfig dictionary (buildbot/master.cfg)."""
    from datetime import timedelta

    from buildbot.plugins import changes, schedulers, steps, util, worker

    from . import buildbot_steps

    matrix = matrix or load_matrix()
    settings = settings or load_settings(basedir=basedir)
    specs = builder_specs(matrix, settings, basedir)
    by_name = {w.name: w for w in settings.workers}
    results_dir, reports_dir = master_dirs(settings, basedir)
    workers_of_builder = {s.name: list(s.workers) for s in specs}

    def workers_of(name):
        return workers_of_builder.get(name, [])

    def posargs(props):
        given = props.getProperty("pytest_args", "") or ""
        return ["--", *shlex.split(given)] if given.strip() else []

    def render_command(command):
        if command is None:
            return None
        if PYTEST_ARGS in command:
            head = [util.Interpolate(c) for c in command if c != PYTEST_ARGS]

            @util.renderer
            def with_args(props):
                return [*head, *posargs(props)]
            return with_args
        return [util.Interpolate(c) if "%(" in c else c for c in command]

    def cells_of(props):
        return selected_cells(matrix, props.getProperty("event"), props.getProperty("labels"),
                              props.getProperty("select"))

    cell_names = [s.name for s in specs if s.job is not None]

    def make_step(spec: Step, builder: str):
        options = dict(spec.options)
        env = {**settings.env, **options.pop("env", {})}
        if spec.kind in ("worker", "arch"):
            if spec.kind == "arch":
                env["WORKER_ARCH"] = util.Property("worker_arch")
            # a cell whose checks could not run fails its build (conformance/conftest.py --strict-cells)
            env.setdefault("CPYTHON_PERF_STRICT", "1")
            # timeout: seconds without output (a regression test module can be silent for long)
            timeout = 3600 if spec.name.startswith(("conformance-", "build-")) else 1200
            options.setdefault("haltOnFailure", True)
            return steps.ShellCommand(name=spec.name, command=render_command(spec.command), env=env,
                                      timeout=timeout, maxTime=12 * 3600, **options)
        if spec.kind == "run":
            if builder == REPORT_BUILDER:
                @util.renderer
                def run(props):
                    return str(props.getProperty("run") or newest_run(results_dir) or "none")
            else:
                @util.renderer
                def run(props):
                    return run_key({k: props.getProperty(k) for k in ("run", "buildername", "buildnumber")})
            return steps.SetProperty(name=spec.name, property="run", value=run, haltOnFailure=True)
        if spec.kind == "resolve":
            return buildbot_steps.ResolveRun(name=spec.name, settings=settings, results_dir=results_dir,
                                             cells_of=cells_of, workers_of=workers_of)
        if spec.kind == "publish":
            return buildbot_steps.PublishReport(name=spec.name, reports_dir=reports_dir,
                                                buildbot_url=settings.buildbot_url, flunkOnFailure=False,
                                                warnOnFailure=True)
        if spec.kind == "git":
            return steps.Git(name=spec.name, mode="full", method="clean", haltOnFailure=True, **options)
        if spec.kind == "master":
            if spec.command[0] == "collect":
                results, tarball = spec.command[1], spec.command[2]

                @util.renderer
                def collect(props):
                    cells = (props.getProperty("cells") or "").split()
                    run = str(props.getProperty("run"))
                    return _collect_uploads(results, run, tarball.replace(RUN, run), cells)
                return steps.MasterShellCommand(name=spec.name, command=collect, haltOnFailure=True, **options)
            return steps.MasterShellCommand(name=spec.name, command=render_command(spec.command), **options)
        if spec.kind == "upload":
            return steps.DirectoryUpload(name=spec.name, workersrc=options.pop("workersrc"),
                                         masterdest=util.Interpolate(options.pop("masterdest")), **options)
        if spec.kind == "download":
            return steps.FileDownload(name=spec.name, mastersrc=util.Interpolate(options.pop("mastersrc")),
                                      workerdest=options.pop("workerdest"), **options)
        if spec.kind == "trigger":
            run_props = {"run": util.Property("run"), "pytest_args": util.Property("pytest_args", default=""),
                         "matrix_revision": util.Property("matrix_revision", default="")}
            if options.pop("select", False):
                # every cell's Triggerable is named (checked when the master loads); a build triggers those
                # of the cells its run step kept (selected, and with a connected worker)
                options["schedulerNames"] = [cell_scheduler(n) for n in cell_names]
                options["set_properties"] = run_props
                return buildbot_steps.CellsTrigger(name=spec.name, settings=settings, results_dir=results_dir,
                                                   workers_of=workers_of, offline_grace=settings.offline_grace,
                                                   check_interval=min(10, settings.offline_grace), **options)
            if options.pop("cells", False):
                @util.renderer
                def cells(props):
                    # the selected cells, the skipped too: the report shows them "not run"
                    return " ".join(cells_of(props))
                options["set_properties"] = {**run_props, "cells": cells}
            return buildbot_steps.RunTrigger(name=spec.name, settings=settings, **options)
        raise ValueError(f"unknown step kind {spec.kind!r}")

    builders = []
    for spec in specs:
        factory = util.BuildFactory([make_step(s, spec.name) for s in spec.steps])
        keys = MATRIX_COLLAPSE_KEYS if spec.name == MATRIX_BUILDER else CELL_COLLAPSE_KEYS
        builders.append(util.BuilderConfig(name=spec.name, workernames=spec.workers, factory=factory, tags=spec.tags,
                                           collapseRequests=_collapse(keys)))
    workers = [worker.Worker(w.name, w.password, max_builds=w.max_builds, properties={"worker_arch": w.arch},
                             keepalive_interval=60)
               for w in by_name.values()]
    # one `matrix` build at a time: a second run waits for the first (and collapses with a newer one)
    workers.append(worker.LocalWorker(COORDINATOR, max_builds=1))

    all_names = [s.name for s in specs]
    scheds = [schedulers.Triggerable(name=cell_scheduler(n), builderNames=[n]) for n in cell_names]
    scheds.append(schedulers.Triggerable(name=REPORT_TRIGGER, builderNames=[REPORT_BUILDER]))
    scheds.append(schedulers.ForceScheduler(
        name=FORCE_MATRIX, builderNames=[MATRIX_BUILDER], buttonName="Run the matrix",
        properties=[
            util.ChoiceStringParameter(name="event", label="event (the plan's selection)",
                                       choices=list(ci_plan.EVENTS), default=DEFAULT_EVENT),
            util.StringParameter(name="labels", label="labels (cell:<name>, arch:<arch>, all)", default="", size=60),
            util.StringParameter(name="select", label="select (replaces the event's choice)", default="", size=60),
            util.StringParameter(name="pytest_args", label="pytest arguments of conformance-<cell>", default="",
                                 size=60),
        ]))
    scheds.append(schedulers.ForceScheduler(
        name=FORCE, builderNames=all_names,
        properties=[util.StringParameter(name="pytest_args", label="pytest arguments of conformance-<cell>",
                                         default="", size=60),
                    util.StringParameter(name="cells", label="cells (report builder; empty: every upload)",
                                         default="", size=60),
                    util.StringParameter(name="run", label="run (report builder: whose uploads; empty: the newest)",
                                         default="", size=20)]))
    change_source = []
    if settings.source.get("poll"):
        # a commit on the branch runs the whole matrix, as a push to main does on GitHub (the plan's `push`);
        # a documentation-only commit runs nothing (it goes with the next important one)
        branch = settings.source.get("branch", "main")
        change_source.append(changes.GitPoller(repourl=settings.source["git"], branches=[branch],
                                               pollInterval=settings.source["poll"], pollAtLaunch=True,
                                               workdir="gitpoller-work"))
        scheds.append(schedulers.SingleBranchScheduler(
            name=ON_PUSH, builderNames=[MATRIX_BUILDER], change_filter=util.ChangeFilter(branch=branch),
            treeStableTimer=300, fileIsImportant=is_important_change, properties={"event": "push"}))
    if settings.nightly:
        scheds.append(schedulers.Nightly(name="nightly", builderNames=[MATRIX_BUILDER],
                                         hour=int(settings.nightly.get("hour", 3)),
                                         minute=int(settings.nightly.get("minute", 23)),
                                         properties={"event": "schedule"}))

    config = {
        "title": settings.title,
        "buildbotURL": settings.buildbot_url,
        "workers": workers,
        "protocols": {"pb": {"port": settings.worker_port}},
        "builders": builders,
        "schedulers": scheds,
        "change_source": change_source,
        "db": {"db_url": settings.db_url},
        "buildbotNetUsageData": None,
        "services": services(settings, basedir, all_names),
        "configurators": [],
    }
    if settings.log_horizon_days:
        # as python/buildmaster-config: build logs older than the horizon are deleted, Sundays at noon
        config["configurators"].append(util.JanitorConfigurator(
            logHorizon=timedelta(days=settings.log_horizon_days), hour=12, dayOfWeek=6))
    if settings.www_port is not None:
        config["www"] = {"port": settings.www_port, "plugins": {}}
    return config


# --------------------------------------------------------------------------
# what a master loads: `python -m cpython_perf buildbot-config describe MASTER_DIR` (in buildbot's venv)


def _rendered(value, props):
    from twisted.internet import defer

    got = []
    defer.maybeDeferred(props.render, value).addBoth(got.append)
    result = got[0] if got else value
    if hasattr(result, "value") and hasattr(result, "getTraceback"):   # a Failure
        raise result.value
    return result


def describe(basedir: str, properties: dict | None = None) -> dict:
    """The master's configuration as buildbot loads it (its own FileLoader): workers, builders with each
    step's class and its command rendered with properties, schedulers."""
    from buildbot.config.master import FileLoader
    from buildbot.process.properties import Properties
    from buildbot.scripts.base import getConfigFileFromTac

    props = Properties(**{"buildnumber": 7, "buildername": "builder", "run": "7", "pytest_args": "", "cells": "",
                          "event": DEFAULT_EVENT, **(properties or {})})
    config = FileLoader(basedir, getConfigFileFromTac(basedir)).loadConfig()
    builders = []
    for builder in config.builders:
        steps = []
        for factory in builder.factory.steps:
            kwargs = factory.kwargs
            entry = {"class": factory.step_class.__name__, "name": kwargs.get("name")}
            for key in ("command", "workersrc", "masterdest", "mastersrc", "workerdest", "schedulerNames",
                        "alwaysRun", "haltOnFailure", "flunkOnFailure", "waitForFinish", "env", "clobberOnFailure",
                        "property", "value", "offline_grace", "logHorizon"):
                if key in kwargs:
                    entry[key] = _rendered(kwargs[key], props)
            steps.append(entry)
        builders.append({"name": builder.name, "workernames": builder.workernames, "tags": builder.tags,
                         "steps": steps, "collapse_keys": list(getattr(builder.collapseRequests, "keys", ()))
                         if callable(builder.collapseRequests) else builder.collapseRequests})
    return {
        "workers": [{"name": w.name, "class": type(w).__name__, "properties": w.properties.asDict()
                     if hasattr(w.properties, "asDict") else {}, "max_builds": getattr(w, "max_builds", None)}
                    for w in config.workers],
        "builders": builders,
        "schedulers": [{"name": s.name, "class": type(s).__name__, "builderNames": list(s.builderNames),
                        **({"fileIsImportant": important.__name__} if callable(
                            important := getattr(s, "fileIsImportant", None)
                            or getattr(s, "_config_kwargs", {}).get("fileIsImportant")) else {})}
                       for s in config.schedulers.values()],
        # a BuildbotService keeps its constructor's arguments until the master starts it (GitPoller passes
        # its repourl on positionally)
        "change_sources": [{"class": type(c).__name__,
                            **{k: {**dict(zip(["repourl"], getattr(c, "_config_args", ()))),
                                   **getattr(c, "_config_kwargs", {})}.get(k)
                               for k in ("repourl", "branches", "pollInterval")}}
                           for c in config.change_sources],
        "protocols": {k: {kk: str(vv) for kk, vv in v.items()} for k, v in config.protocols.items()},
        "services": [{"class": type(svc).__name__, "name": svc.name} for svc in config.services.values()],
    }


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    p = sub.add_parser("describe", help="the loaded configuration of a master directory as JSON (needs buildbot)")
    p.add_argument("basedir")
    p.add_argument("--property", action="append", default=[], metavar="NAME=VALUE",
                   help="a build property the commands are rendered with")


def _run_command(args) -> None:
    props = dict(item.split("=", 1) for item in args.property)
    json.dump(describe(args.basedir, props), sys.stdout, indent=1, default=str)
    sys.stdout.write("\n")


COMMAND = Command("buildbot-config", "the buildbot master's configuration as buildbot loads it "
                                     "(cpython_perf/ci/buildbot_config.py; docs/buildbot.md)",
                  add_arguments, _run_command, description=__doc__.splitlines()[0])


def main(argv=None) -> int:
    return main_of(COMMAND, argv, prog="python -m cpython_perf.ci.buildbot_config")


if __name__ == "__main__":
    raise SystemExit(main())

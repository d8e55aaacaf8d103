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
  schedulers  a Triggerable per cell builder and one for `report`; ForceSchedulers: `force-matrix` (event,
              labels, select, pytest_args) and `force` (any builder).  A nightly run of the whole matrix
              if settings say `nightly: {hour: H, minute: M}`; with a git source and `poll: SECONDS`, a
              GitPoller watches the branch and `on-push` runs the whole matrix after each new commit
              (the plan's `push` event, as a push to main does on GitHub).

The description (builder_specs) is plain data, checked by the unit tests without buildbot installed;
buildmaster_config() turns it into buildbot objects and needs buildbot (pinned in buildbot/requirements.txt).
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import DriverError
from ..matrix import DEFAULT_ARCH, KNOWN_ARCHES, PROJECT_ROOT, Matrix, load_matrix
from . import plan as ci_plan

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


_SETTINGS_KEYS = {"workers", "title", "worker_port", "www_port", "buildbot_url", "db_url", "aarch64", "source",
                  "nox", "env", "results_dir", "reports_dir", "nightly"}
_WORKER_KEYS = {"name", "arch", "password", "password_env", "password_file", "max_builds"}


def _password(entry: dict, where: str, environ) -> str:
    given = [k for k in ("password", "password_env", "password_file") if k in entry]
    if len(given) != 1:
        raise BuildbotConfigError(f"{where}: give exactly one of password_env (an environment variable), "
                                  f"password_file or password, not {given or 'none'}")
    if "password_env" in entry:
        value = environ.get(str(entry["password_env"]))
        if not value:
            raise BuildbotConfigError(f"{where}: the environment variable {entry['password_env']} (password_env) "
                                      "is not set in the master's environment")
        return value
    if "password_file" in entry:
        try:
            return Path(entry["password_file"]).expanduser().read_text().strip()
        except OSError as exc:
            raise BuildbotConfigError(f"{where}: password_file: {exc}") from None
    return str(entry["password"])


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
    kind: str       # worker | master | upload | download | trigger | git | arch
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


def cell_scheduler(cell: str) -> str:
    return f"cell-{cell}"


def nox_session(settings: Settings, session: str, posargs: bool = False) -> list[str]:
    return [*settings.nox, "-s", session, *([PYTEST_ARGS] if posargs else [])]


def source_steps(settings: Settings) -> list[Step]:
    """The project's tree in the build directory: a git checkout, or a copy of a directory on the worker's
    machine (a local fleet, the buildbot-local proof) that keeps the build's .nox venvs."""
    if "git" in settings.source:
        return [Step("git", "source", options={"repourl": settings.source["git"],
                                               "branch": settings.source.get("branch", "main")}),
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
        Step("master", "clear upload", ["rm", "-rf", f"{results}/{cell}"], {"alwaysRun": True}),
        Step("upload", "upload results", options={"workersrc": f"results/{cell}", "masterdest": f"{results}/{cell}",
                                                  "alwaysRun": True}),
    ]
    return BuilderSpec(cell, workers, tags, steps, job)


def report_builder(settings: Settings, basedir) -> BuilderSpec:
    results, reports = master_dirs(settings, basedir)
    workers = [w.name for w in settings.workers if w.arch == DEFAULT_ARCH]
    if not workers:
        raise BuildbotConfigError(f"{settings.path or 'settings'}: the report builder needs an {DEFAULT_ARCH} worker "
                                  "(the flame-graph renderer is the x86_64 tools image); none is declared")
    tarball = f"{reports}/inputs-%(prop:buildnumber)s.tar"
    steps = [
        *source_steps(settings),
        Step("worker", "clean results", ["sh", "-c", "rm -rf results results.tar && mkdir results"]),
        Step("master", "collect uploads", ["collect", results, tarball]),
        Step("download", "download results", options={"mastersrc": tarball, "workerdest": "results.tar"}),
        Step("worker", "unpack results", ["tar", "-xf", "results.tar", "-C", "results"]),
        Step("worker", "report", nox_session(settings, "report"), {"haltOnFailure": True}),
        Step("upload", "upload report", options={"workersrc": "results",
                                                 "masterdest": f"{reports}/%(prop:buildnumber)s"}),
        Step("master", "latest", ["ln", "-sfn", "%(prop:buildnumber)s", f"{reports}/latest"]),
    ]
    return BuilderSpec(REPORT_BUILDER, workers, ["report"], steps)


def matrix_builder() -> BuilderSpec:
    steps = [
        Step("trigger", "cells", options={"select": True, "waitForFinish": True, "haltOnFailure": False,
                                          "flunkOnFailure": True}),
        Step("trigger", "report", options={"schedulerNames": [REPORT_TRIGGER], "waitForFinish": True,
                                           "alwaysRun": True, "cells": True}),
    ]
    return BuilderSpec(MATRIX_BUILDER, [COORDINATOR], ["matrix"], steps)


def the_plan(matrix: Matrix, settings: Settings) -> dict:
    """Every cell of the matrix as the plan places it (a push's selection: the whole matrix)."""
    return ci_plan.build_plan(matrix, "push", aarch64=settings.aarch64)


def builder_specs(matrix: Matrix, settings: Settings, basedir=".", plan: dict | None = None) -> list[BuilderSpec]:
    plan = plan or the_plan(matrix, settings)
    if plan["aarch64"] != settings.aarch64:
        raise BuildbotConfigError(f"a plan of aarch64 {plan['aarch64']} for settings of aarch64 {settings.aarch64}")
    return [*(cell_builder(matrix, job, settings, basedir) for job in plan["cells"]),
            report_builder(settings, basedir), matrix_builder()]


def selected_cells(matrix: Matrix, event: str | None, labels: str | None = "", select: str | None = "") -> list[str]:
    """The cells a `matrix` build triggers: the plan's selection (select_cells) for its properties."""
    return ci_plan.select_cells(matrix, event or DEFAULT_EVENT, ci_plan.parse_list(labels or ""),
                                ci_plan.parse_list(select or "")).cells


# --------------------------------------------------------------------------
# buildbot objects


def _collect_uploads(results: str, tarball: str, cells: list[str]) -> list[str]:
    """tar of the uploaded results/<cell> of the selected cells (all uploaded ones when none is named)."""
    root = Path(results)
    present = sorted(p.name for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    chosen = [c for c in present if not cells or c in cells]
    return ["sh", "-c", f'mkdir -p "$(dirname {shlex.quote(tarball)})" && mkdir -p {shlex.quote(results)} && '
            + shlex.join(["tar", "-C", results, "-cf", tarball, "--files-from=/dev/null", *chosen])]


def buildmaster_config(basedir: Path | str, settings: Settings | None = None, matrix: Matrix | None = None) -> dict:
    """The BuildmasterConfig dictionary (buildbot/master.cfg)."""
    from buildbot.plugins import changes, schedulers, steps, util, worker

    matrix = matrix or load_matrix()
    settings = settings or load_settings(basedir=basedir)
    specs = builder_specs(matrix, settings, basedir)
    by_name = {w.name: w for w in settings.workers}

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

    class SelectionTrigger(steps.Trigger):
        """Triggers the cell builders the build's event/labels/select properties select (the plan's selection)."""

        def getSchedulersAndProperties(self):
            chosen = {cell_scheduler(c) for c in cells_of(self.build.getProperties())}
            return [entry for entry in super().getSchedulersAndProperties() if entry["sched_name"] in chosen]

    cell_names = [s.name for s in specs if s.job is not None]

    def make_step(spec: Step):
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
        if spec.kind == "git":
            return steps.Git(name=spec.name, mode="full", method="clean", haltOnFailure=True, **options)
        if spec.kind == "master":
            if spec.command[0] == "collect":
                results, tarball = spec.command[1], spec.command[2]

                @util.renderer
                def collect(props):
                    cells = (props.getProperty("cells") or "").split()
                    path = tarball.replace("%(prop:buildnumber)s", str(props.getProperty("buildnumber")))
                    return _collect_uploads(results, path, cells)
                return steps.MasterShellCommand(name=spec.name, command=collect, haltOnFailure=True, **options)
            return steps.MasterShellCommand(name=spec.name, command=render_command(spec.command), **options)
        if spec.kind == "upload":
            return steps.DirectoryUpload(name=spec.name, workersrc=options.pop("workersrc"),
                                         masterdest=util.Interpolate(options.pop("masterdest")), **options)
        if spec.kind == "download":
            return steps.FileDownload(name=spec.name, mastersrc=util.Interpolate(options.pop("mastersrc")),
                                      workerdest=options.pop("workerdest"), **options)
        if spec.kind == "trigger":
            if options.pop("select", False):
                # every cell's Triggerable is named (checked when the master loads); a build triggers those
                # of the cells its properties select
                options["schedulerNames"] = [cell_scheduler(n) for n in cell_names]
                options["set_properties"] = {"pytest_args": util.Property("pytest_args", default="")}
                return SelectionTrigger(name=spec.name, **options)
            if options.pop("cells", False):
                @util.renderer
                def cells(props):
                    return " ".join(cells_of(props))
                options["set_properties"] = {"cells": cells}
            return steps.Trigger(name=spec.name, **options)
        raise ValueError(f"unknown step kind {spec.kind!r}")

    builders = []
    for spec in specs:
        factory = util.BuildFactory([make_step(s) for s in spec.steps])
        builders.append(util.BuilderConfig(name=spec.name, workernames=spec.workers, factory=factory, tags=spec.tags,
                                           collapseRequests=False))
    workers = [worker.Worker(w.name, w.password, max_builds=w.max_builds, properties={"worker_arch": w.arch},
                             keepalive_interval=60)
               for w in by_name.values()]
    workers.append(worker.LocalWorker(COORDINATOR))

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
                                         default="", size=60)]))
    change_source = []
    if settings.source.get("poll"):
        # a commit on the branch runs the whole matrix, as a push to main does on GitHub (the plan's `push`)
        branch = settings.source.get("branch", "main")
        change_source.append(changes.GitPoller(repourl=settings.source["git"], branches=[branch],
                                               pollInterval=settings.source["poll"], pollAtLaunch=True,
                                               workdir="gitpoller-work"))
        scheds.append(schedulers.SingleBranchScheduler(
            name=ON_PUSH, builderNames=[MATRIX_BUILDER], change_filter=util.ChangeFilter(branch=branch),
            treeStableTimer=300, properties={"event": "push"}))
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
    }
    if settings.www_port is not None:
        config["www"] = {"port": settings.www_port, "plugins": {}}
    return config


# --------------------------------------------------------------------------
# what a master loads: `python -m cpython_perf.ci.buildbot_config describe MASTER_DIR` (in buildbot's venv)


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

    props = Properties(**{"buildnumber": 7, "pytest_args": "", "cells": "", "event": DEFAULT_EVENT,
                          **(properties or {})})
    config = FileLoader(basedir, getConfigFileFromTac(basedir)).loadConfig()
    builders = []
    for builder in config.builders:
        steps = []
        for factory in builder.factory.steps:
            kwargs = factory.kwargs
            entry = {"class": factory.step_class.__name__, "name": kwargs.get("name")}
            for key in ("command", "workersrc", "masterdest", "mastersrc", "workerdest", "schedulerNames",
                        "alwaysRun", "haltOnFailure", "flunkOnFailure", "waitForFinish", "env"):
                if key in kwargs:
                    entry[key] = _rendered(kwargs[key], props)
            steps.append(entry)
        builders.append({"name": builder.name, "workernames": builder.workernames, "tags": builder.tags,
                         "steps": steps})
    return {
        "workers": [{"name": w.name, "class": type(w).__name__, "properties": w.properties.asDict()
                     if hasattr(w.properties, "asDict") else {}, "max_builds": getattr(w, "max_builds", None)}
                    for w in config.workers],
        "builders": builders,
        "schedulers": [{"name": s.name, "class": type(s).__name__, "builderNames": list(s.builderNames)}
                       for s in config.schedulers.values()],
        # a BuildbotService keeps its constructor's arguments until the master starts it (GitPoller passes
        # its repourl on positionally)
        "change_sources": [{"class": type(c).__name__,
                            **{k: {**dict(zip(["repourl"], getattr(c, "_config_args", ()))),
                                   **getattr(c, "_config_kwargs", {})}.get(k)
                               for k in ("repourl", "branches", "pollInterval")}}
                           for c in config.change_sources],
        "protocols": {k: {kk: str(vv) for kk, vv in v.items()} for k, v in config.protocols.items()},
    }


def main(argv=None) -> int:
    import argparse
    import json
    import sys

    parser = argparse.ArgumentParser(prog="python -m cpython_perf.ci.buildbot_config",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("describe", help="the loaded configuration of a master directory as JSON (needs buildbot)")
    p.add_argument("basedir")
    p.add_argument("--property", action="append", default=[], metavar="NAME=VALUE",
                   help="a build property the commands are rendered with")
    args = parser.parse_args(argv)
    props = dict(item.split("=", 1) for item in args.property)
    json.dump(describe(args.basedir, props), sys.stdout, indent=1, default=str)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

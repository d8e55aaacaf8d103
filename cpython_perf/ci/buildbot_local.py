"""A throwaway buildbot master and two workers on localhost, running the smoke cells' builders for real.

`nox -s buildbot-local` (not in CI): `python -m cpython_perf buildbot-local run --venv DIR --out DIR`
installs the pinned buildbot (buildbot/requirements.txt) into a venv of its own, creates under a temporary
directory a master from buildbot/master.cfg (settings: two x86_64 workers whose passwords are random and
reach the master only through its environment, ports chosen free on 127.0.0.1, the source copied from
this tree) and two workers, starts them, forces the `matrix` builder (a pull request's selection: matrix.yaml
smoke_cells), which triggers the cell builders and then `report`, waits, reads every build and step back
from the master's REST API, copies the report, and stops the workers and the master.  The summary
(summary.json: which worker ran which cell, when each step ran, how long the two conformance steps
overlapped, the report's rows of the cells) is what tests/ci/test_buildbot_local.py asserts on.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import yaml

from ..errors import DriverError, RuntimeFailure
from ..subcommands import Command, main_of
from ..matrix import PROJECT_ROOT, load_matrix
from . import buildbot_config as bbc

VENV_ENV = "CPYTHON_PERF_BUILDBOT_VENV"
RESULT_NAMES = {0: "success", 1: "warnings", 2: "failure", 3: "skipped", 4: "exception", 5: "retry", 6: "cancelled"}
# the CI smoke run's choice (nox -s tests): CPython's own regression tests take minutes a cell and run in
# a plain `nox -s conformance-<cell>`; `--pytest-args ""` runs the whole suite
DEFAULT_PYTEST_ARGS = '-m "not upstream_regression"'


class BuildbotUnavailable(RuntimeFailure):
    """The pinned buildbot could not be installed here (pip's error)."""


def _log(line: str) -> None:
    print(f"[buildbot-local {datetime.now(timezone.utc):%H:%M:%S}] {line}", flush=True)


# --------------------------------------------------------------------------
# the venv


def default_venv() -> Path:
    digest = hashlib.sha256(bbc.REQUIREMENTS.read_bytes()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "cpython-perf" / f"buildbot-{digest}-py{sys.version_info[0]}{sys.version_info[1]}"


def ensure_venv(path: Path | None = None, python: str = sys.executable, log=_log) -> Path:
    """A venv with buildbot/requirements.txt installed (kept: a second call checks the stamp and returns)."""
    path = Path(path or os.environ.get(VENV_ENV) or default_venv())
    stamp = path / "cpython-perf-requirements.txt"
    if stamp.exists() and stamp.read_text() == bbc.REQUIREMENTS.read_text() and (path / "bin" / "buildbot").exists():
        return path
    log(f"installing {', '.join(bbc.pins())} into {path}")
    subprocess.run([python, "-m", "venv", "--clear", str(path)], check=True, capture_output=True)
    proc = subprocess.run([str(path / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                           "-r", str(bbc.REQUIREMENTS)], capture_output=True, text=True)
    if proc.returncode != 0:
        errors = [line for line in (proc.stderr + proc.stdout).splitlines() if line.startswith("ERROR")]
        raise BuildbotUnavailable(f"pip install -r {bbc.REQUIREMENTS.relative_to(PROJECT_ROOT)} failed: "
                                  + (errors[-1] if errors else (proc.stderr or proc.stdout).strip()[-500:]))
    stamp.write_text(bbc.REQUIREMENTS.read_text())
    return path


# --------------------------------------------------------------------------
# master, workers, REST


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run(argv, env=None, cwd=None, log=_log, check=True) -> subprocess.CompletedProcess:
    log("$ " + " ".join(str(a) for a in argv))
    proc = subprocess.run([str(a) for a in argv], env=env, cwd=cwd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeFailure(f"{' '.join(str(a) for a in argv)} failed (exit {proc.returncode}):\n"
                          f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


class Api:
    def __init__(self, url: str):
        self.url = url.rstrip("/") + "/api/v2"

    def get(self, path: str) -> dict:
        with urllib.request.urlopen(f"{self.url}/{path.lstrip('/')}", timeout=30) as resp:
            return json.load(resp)

    def rpc(self, path: str, method: str, params: dict):
        body = json.dumps({"jsonrpc": "2.0", "method": method, "params": params, "id": 1}).encode()
        req = urllib.request.Request(f"{self.url}/{path.lstrip('/')}", data=body,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=60) as resp:
                got = json.load(resp)
        except urllib.error.HTTPError as exc:
            raise RuntimeFailure(f"{path} {method}: HTTP {exc.code}: {exc.read().decode(errors='replace')[:1000]}") from None
        if "error" in got:
            raise RuntimeFailure(f"{path} {method}: {got['error']}")
        return got["result"]


def wait_for(what: str, check, timeout: float, interval: float = 2.0, log=_log):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise RuntimeFailure(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def overlap(spans) -> float:
    """Seconds during which all (start, end) spans ran at once (negative: the gap between them)."""
    return min(end for _, end in spans) - max(start for start, _ in spans)


def report_rows(report_md: str, cells) -> dict[str, dict]:
    """The report's Cells-table rows of these cells: status and counts."""
    rows, in_cells = {}, False
    for line in report_md.splitlines():
        if line.startswith("## "):
            in_cells = line.strip() == "## Cells"
        if not in_cells:
            continue
        parts = [p.strip() for p in line.strip().strip("|").split("|")]
        if len(parts) >= 7 and parts[0] in cells:
            rows[parts[0]] = {"status": parts[1], "pass": parts[2], "fail": parts[3], "error": parts[4],
                              "skip": parts[5], "seconds": parts[6], "line": line.strip()}
    return rows


class Fleet:
    """A throwaway master and its workers under root: created from buildbot/master.cfg with settings of
    this fleet (random passwords passed in the master's environment, ports chosen free on 127.0.0.1)."""

    def __init__(self, venv: Path, root: Path, workers: list[tuple[str, str]], source: dict | None = None,
                 extra: dict | None = None, log=_log):
        self.bin_dir = venv / "bin"
        self.root, self.log = root, log
        self.master, self.workers_dir = root / "master", root / "workers"
        self.pb, self.www = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.www}/"
        self.workers = dict(workers)               # name -> arch
        self.passwords = {n: secrets.token_hex(16) for n in self.workers}
        self.pw_env = {n: f"CPYTHON_PERF_BB_LOCAL_{i}" for i, n in enumerate(self.workers, 1)}
        nox = shutil.which("nox")
        if not nox:
            raise RuntimeFailure("nox is not on PATH: the workers' steps run `nox -s ...`")
        self.env = {**os.environ, **{self.pw_env[n]: self.passwords[n] for n in self.workers},
                    "PATH": os.pathsep.join([str(self.bin_dir), str(Path(nox).parent), os.environ.get("PATH", "")])}
        self.source = source or {"path": str(PROJECT_ROOT)}
        self.extra = extra or {}
        self.daemons: list[tuple[str, Path]] = []
        self.api = Api(self.url)
        self.builders: dict[str, int] = {}
        self.checkconfig = ""

    def create_master(self) -> None:
        self.workers_dir.mkdir(parents=True, exist_ok=True)
        created = _run([self.bin_dir / "buildbot", "create-master", "-r", "--config",
                        PROJECT_ROOT / "buildbot" / "master.cfg", self.master], env=self.env, log=self.log)
        if not (self.master / "buildbot.tac").exists():   # create-master exits 0 even when it failed
            raise RuntimeFailure(f"buildbot create-master {self.master} failed:\n{created.stdout}{created.stderr}")
        settings = {
            "title": "cpython-perf (buildbot-local)",
            "worker_port": f"tcp:{self.pb}:interface=127.0.0.1",
            "www_port": f"tcp:{self.www}:interface=127.0.0.1",
            "buildbot_url": self.url,
            "source": self.source,
            "nox": ["nox"],
            **self.extra,
            "workers": [{"name": n, "arch": a, "password_env": self.pw_env[n], "max_builds": 1}
                        for n, a in self.workers.items()],
        }
        (self.master / "settings.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
        check = _run([self.bin_dir / "buildbot", "checkconfig", self.master], env=self.env, log=self.log)
        self.checkconfig = check.stdout.strip().splitlines()[-1]
        _run([self.bin_dir / "buildbot", "start", self.master], env=self.env, log=self.log)
        self.daemons.append(("buildbot", self.master))

    def start_worker(self, name: str) -> None:
        path = self.workers_dir / name
        if not (path / "buildbot.tac").exists():
            _run([self.bin_dir / "buildbot-worker", "create-worker", "-r", "--keepalive", "60",
                  path, f"127.0.0.1:{self.pb}", name, self.passwords[name]], env=self.env, log=self.log)
            if not (path / "buildbot.tac").exists():
                raise RuntimeFailure(f"buildbot-worker create-worker {path} failed")
        _run([self.bin_dir / "buildbot-worker", "start", path], env=self.env, log=self.log)
        if ("buildbot-worker", path) not in self.daemons:
            self.daemons.append(("buildbot-worker", path))

    def stop_worker(self, name: str) -> None:
        path = self.workers_dir / name
        _run([self.bin_dir / "buildbot-worker", "stop", path], env=self.env, log=self.log, check=False)
        wait_for(f"{name} to stop", lambda: not _alive(path), 60, 1, log=self.log)

    def connected(self) -> set[str]:
        return {w["name"] for w in self.api.get("workers")["workers"] if w["connected_to"]}

    def start(self, workers: list[str] | None = None) -> None:
        self.create_master()
        names = list(self.workers) if workers is None else workers
        for name in names:
            self.start_worker(name)
        wait_for(f"{', '.join(names)} to connect", lambda: set(names) <= self.connected(), 120, log=self.log)
        self.builders = {b["name"]: b["builderid"] for b in self.api.get("builders")["builders"]}
        self.log(f"master {self.url} (pb {self.pb}), workers {', '.join(names)} connected")

    def force_matrix(self, event="pull_request", select="", pytest_args=DEFAULT_PYTEST_ARGS, labels="",
                     reason="buildbot-local") -> int:
        bsid, _ = self.api.rpc(f"forceschedulers/{bbc.FORCE_MATRIX}", "force", {
            "builderid": str(self.builders[bbc.MATRIX_BUILDER]), "event": event, "labels": labels, "select": select,
            "pytest_args": pytest_args, "reason": reason, "username": "buildbot-local <buildbot-local@example.org>"})
        self.log(f"forced {bbc.MATRIX_BUILDER} (buildset {bsid}): select {select or event!r}")
        return bsid

    def force_builder(self, builder: str, **props) -> int:
        bsid, _ = self.api.rpc(f"forceschedulers/{bbc.FORCE}", "force", {
            "builderid": str(self.builders[builder]), "reason": "buildbot-local",
            "username": "buildbot-local <buildbot-local@example.org>", **props})
        self.log(f"forced {builder} on its own (buildset {bsid})")
        return bsid

    def running_line(self) -> str:
        names = {v: k for k, v in self.builders.items()}
        workers = {w["workerid"]: w["name"] for w in self.api.get("workers")["workers"]}
        return "; ".join(f"{names.get(b['builderid'])} #{b['number']} on {workers.get(b['workerid'])}: "
                         f"{b['state_string']}" for b in self.api.get("builds?complete=false")["builds"])

    def wait_buildsets(self, bsids: list[int], timeout: float, while_waiting=None) -> None:
        last = [""]

        def done():
            line = self.running_line()
            if line != last[0]:
                self.log(f"running: {line or '-'}")
                last[0] = line
            if while_waiting:
                while_waiting()
            return all(self.api.get(f"buildsets/{b}")["buildsets"][0]["complete"] for b in bsids)
        wait_for(f"buildsets {bsids}", done, timeout, interval=5, log=self.log)

    def builds(self) -> list[dict]:
        names = {v: k for k, v in self.builders.items()}
        workers = {w["workerid"]: w["name"] for w in self.api.get("workers")["workers"]}
        found = []
        for build in self.api.get("builds?property=*")["builds"]:
            steps = [{"name": s["name"], "started_at": s["started_at"], "complete_at": s["complete_at"],
                      "results": RESULT_NAMES.get(s["results"], s["results"]), "state": s["state_string"]}
                     for s in self.api.get(f"builds/{build['buildid']}/steps")["steps"]]
            props = {k: v[0] for k, v in (build.get("properties") or {}).items()}
            found.append({"builder": names.get(build["builderid"]), "number": build["number"],
                          "buildid": build["buildid"], "buildrequestid": build["buildrequestid"],
                          "worker": workers.get(build["workerid"]), "started_at": build["started_at"],
                          "complete_at": build["complete_at"],
                          "results": RESULT_NAMES.get(build["results"], build["results"]),
                          "state": build["state_string"], "steps": steps,
                          "properties": {k: props.get(k) for k in ("run", "matrix_revision", "got_revision", "cells",
                                                                   "skipped", "revision", "pytest_args")
                                         if k in props}})
        return found

    def requests_of(self, bsid: int) -> list[dict]:
        names = {v: k for k, v in self.builders.items()}
        return [{"builder": names.get(r["builderid"]), "buildrequestid": r["buildrequestid"],
                 "results": RESULT_NAMES.get(r["results"], r["results"]), "complete": r["complete"]}
                for r in self.api.get(f"buildrequests?buildsetid={bsid}")["buildrequests"]]

    def report_of(self, run) -> dict:
        """What reports/<run>/ holds: the cells rows, the not-run section, the flame graphs."""
        path = self.master / "reports" / str(run)
        if not (path / "report.md").exists():
            return {"present": False}
        text = (path / "report.md").read_text()
        matrix = load_matrix()
        not_run = {}
        if "## Not run" in text:
            for line in text.split("## Not run", 1)[1].splitlines():
                parts = [p.strip() for p in line.strip().strip("|").split("|")]
                if len(parts) == 2 and parts[0] in matrix.cells:
                    not_run[parts[0]] = parts[1]
        rows = report_rows(text, list(matrix.cells))
        return {"present": True, "rows": {c: r for c, r in rows.items() if r["status"] != "not run"},
                "not_run_section": not_run,
                "flamegraphs": sorted(str(p.relative_to(path)) for p in path.glob("*/seed-flamegraph.svg"))}

    def results_tree(self) -> dict[str, list[str]]:
        root = self.master / "results"
        return {run.name: sorted(p.name for p in run.iterdir()) for run in sorted(root.iterdir())} \
            if root.is_dir() else {}

    def served(self, run) -> dict:
        """The report as the master's web server serves it (<buildbot_url>reports/<run>/report.html)."""
        url = f"{self.url}reports/{run}/report.html"
        try:
            with urllib.request.urlopen(url, timeout=30) as resp:
                body = resp.read().decode(errors="replace")
            return {"url": url, "status": resp.status, "title_ok": "<h1>cpython-perf results</h1>" in body}
        except urllib.error.URLError as exc:
            return {"url": url, "error": str(exc)}

    def stop(self) -> list[str]:
        stop(self.bin_dir, self.daemons, self.env, self.log)
        return [str(p) for _, p in self.daemons if not _alive(p)]

    def keep_logs(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        if (self.master / "twistd.log").exists():
            shutil.copy2(self.master / "twistd.log", out / "master-twistd.log")


def run_local(venv: Path, root: Path, out: Path, event: str = "pull_request", select: str = "",
              pytest_args: str = DEFAULT_PYTEST_ARGS, timeout: float = 3 * 3600, log=_log) -> dict:
    """The whole proof; returns (and writes to out/summary.json) what happened."""
    matrix = load_matrix()
    cells = bbc.selected_cells(matrix, event, "", select)
    names = ["local-worker-1", "local-worker-2"]
    fleet = Fleet(venv, root, [(n, "x86_64") for n in names], log=log)
    summary: dict = {"scenario": "default", "cells": cells, "event": event, "select": select,
                     "pytest_args": pytest_args, "root": str(root), "ports": {"pb": fleet.pb, "www": fleet.www},
                     "workers": names, "buildbot": bbc.pins()}
    t0 = time.monotonic()
    try:
        fleet.start()
        summary["checkconfig"] = fleet.checkconfig
        forced_at = time.time()
        bsid = fleet.force_matrix(event, select, pytest_args)
        fleet.wait_buildsets([bsid], timeout)
        summary["wall_seconds"] = round(time.time() - forced_at, 1)
        summary.update(collect(fleet.api, fleet.builders, fleet.master, cells))
        latest = fleet.master / "reports" / "latest"
        if latest.exists():   # the report the report builder uploaded, kept beside the summary
            # the report and the flame graphs, not the JUnit files (a report of this tree would read them again)
            shutil.copytree(latest, out / "report", dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("*.xml", "*.txt", "*.data"))
            summary["report"] = str((out / "report" / "report.md").resolve())
    finally:
        summary["stopped"] = fleet.stop()
        summary["total_seconds"] = round(time.monotonic() - t0, 1)
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        fleet.keep_logs(out)
    return summary


# --------------------------------------------------------------------------
# scenarios (`run --scenario NAME`): the run-keyed results, offline workers and the run's one revision, for real

SMOKE_SELECT = "cell:3.13-fp,cell:3.11-fp"
SCENARIO_PYTEST_ARGS = "-k seed"     # each cell's conformance step kept to the seed checks (about a minute)
SCENARIOS = ("overlap", "offline", "revision")


def _cell_builds(builds: list[dict], run) -> dict[str, dict]:
    matrix = load_matrix()
    return {b["builder"]: b for b in builds
            if b["builder"] in matrix.cells and str(b["properties"].get("run")) == str(run)}


def _run_of(builds, bsid_requests) -> str | None:
    ids = {r["buildrequestid"] for r in bsid_requests}
    return next((str(b["properties"].get("run")) for b in builds if b["buildrequestid"] in ids), None)


def _brief(build: dict) -> dict:
    return {k: build[k] for k in ("builder", "number", "worker", "results", "started_at", "complete_at", "state")} | \
        {"seconds": (build["complete_at"] - build["started_at"]) if build["complete_at"] else None,
         **build["properties"]}


def scenario_overlap(fleet: Fleet, pytest_args: str, timeout: float) -> dict:
    """Two matrix runs forced at once (and a third of the second's selection, which collapses with it), and the
    3.13-fp cell forced on its own while the first run's cells run: every run's uploads in its own
    results/<run>/, each report made from its run only; the second matrix run starts when the first ended."""
    fleet.start()
    a = fleet.force_matrix(select=SMOKE_SELECT, pytest_args=pytest_args, reason="overlap A")
    b = fleet.force_matrix(select="cell:3.11-fp", pytest_args=pytest_args, reason="overlap B")
    c = fleet.force_matrix(select="cell:3.11-fp", pytest_args=pytest_args, reason="overlap C (collapses B)")
    wait_for("run A's cells to start", lambda: any(
        b_["builder"] in ("3.13-fp", "3.11-fp") for b_ in fleet.builds()), 600, 5, log=fleet.log)
    solo = fleet.force_builder("3.13-fp", pytest_args=pytest_args)
    fleet.wait_buildsets([a, b, c, solo], timeout)
    builds = fleet.builds()
    requests = {name: fleet.requests_of(bsid) for name, bsid in (("A", a), ("B", b), ("C", c), ("solo", solo))}
    matrix_builds = {name: next((x for x in builds if x["buildrequestid"] in
                                 {r["buildrequestid"] for r in reqs}), None)
                     for name, reqs in requests.items() if name != "solo"}
    runs = {name: (str(bld["properties"].get("run")) if bld else None) for name, bld in matrix_builds.items()}
    solo_build = next((x for x in builds if x["buildrequestid"] in {r["buildrequestid"] for r in requests["solo"]}),
                      None)
    runs["solo"] = str(solo_build["properties"].get("run")) if solo_build else None
    return {
        "requests": requests,
        "runs": runs,
        "matrix_builds": {k: (_brief(v) if v else None) for k, v in matrix_builds.items()},
        "cells_by_run": {name: {cell: _brief(bld) for cell, bld in _cell_builds(builds, run).items()}
                         for name, run in runs.items() if run},
        "results_tree": fleet.results_tree(),
        "reports": {name: fleet.report_of(run) for name, run in runs.items() if run and name != "solo"},
        "served": fleet.served(runs["A"]) if runs.get("A") else None,
        "builds": [_brief(x) for x in builds],
    }


def scenario_offline(fleet: Fleet, pytest_args: str, timeout: float) -> dict:
    """An aarch64 cell whose only worker (local-arm64, declared aarch64, paused so it takes nothing) is stopped
    after the cells were triggered: its waiting request is cancelled after offline_grace and the report says
    "not run: no connected worker"; then a second run of that cell, the worker still away: skipped before the
    trigger."""
    fleet.start()
    arm = "local-arm64"
    workerid = next(w["workerid"] for w in fleet.api.get("workers")["workers"] if w["name"] == arm)
    fleet.api.rpc(f"workers/{workerid}", "pause", {"reason": "buildbot-local: takes no build, stopped mid-run"})
    first = fleet.force_matrix(select=f"{SMOKE_SELECT},cell:3.13-fp-aarch64", pytest_args=pytest_args,
                               reason="offline: worker stopped mid-run")
    def aarch64_waiting():
        return any(r["builderid"] == fleet.builders["3.13-fp-aarch64"]
                   for r in fleet.api.get("buildrequests?complete=false")["buildrequests"])
    wait_for("3.13-fp-aarch64's request", aarch64_waiting, 600, 2, log=fleet.log)
    stopped_at = time.time()
    fleet.log(f"stopping {arm} mid-run (its cell's request is waiting)")
    fleet.stop_worker(arm)
    fleet.wait_buildsets([first], timeout)
    second = fleet.force_matrix(select="cell:3.13-fp-aarch64", pytest_args=pytest_args,
                                reason="offline: worker away before the trigger")
    fleet.wait_buildsets([second], timeout)
    builds = fleet.builds()
    out = {"stopped_worker": arm, "stopped_at": stopped_at}
    for name, bsid in (("mid_run", first), ("before_trigger", second)):
        matrix_build = next(x for x in builds if x["buildrequestid"] in
                            {r["buildrequestid"] for r in fleet.requests_of(bsid)})
        run = str(matrix_build["properties"]["run"])
        aarch64_requests = [r for r in fleet.api.get("buildrequests")["buildrequests"]
                            if r["builderid"] == fleet.builders["3.13-fp-aarch64"]]
        out[name] = {"run": run, "matrix": _brief(matrix_build),
                     "cells": {c: _brief(x) for c, x in _cell_builds(builds, run).items()},
                     "skipped_json": json.loads((fleet.master / "results" / run / bbc.SKIPPED_FILE).read_text())
                     if (fleet.master / "results" / run / bbc.SKIPPED_FILE).exists() else None,
                     "report": fleet.report_of(run)}
    out["aarch64_requests"] = [{"buildrequestid": r["buildrequestid"], "buildsetid": r["buildsetid"],
                                "results": RESULT_NAMES.get(r["results"], r["results"]), "claimed": r["claimed"]}
                               for r in aarch64_requests]
    out["builds"] = [_brief(x) for x in builds]
    return out


def _git(*args, cwd: Path) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "buildbot-local", "GIT_AUTHOR_EMAIL": "buildbot-local@example.org",
           "GIT_COMMITTER_NAME": "buildbot-local", "GIT_COMMITTER_EMAIL": "buildbot-local@example.org"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout.strip()


def source_repository(root: Path) -> tuple[Path, Path]:
    """A bare repository (root/source.git, branch main) whose one commit is this tree as it is now, and a
    clone of it (root/source-work) to land commits from."""
    work, bare = root / "source-work", root / "source.git"
    work.mkdir(parents=True)
    excludes = [f"--exclude=./{e}" if "*" not in e else f"--exclude={e}" for e in bbc.COPY_EXCLUDES]
    subprocess.run(f"tar -C {shlex.quote(str(PROJECT_ROOT))} {' '.join(excludes)} -cf - . | tar -C "
                   f"{shlex.quote(str(work))} -xf -", shell=True, check=True)
    _git("init", "-q", "-b", "main", cwd=work)
    _git("add", "-A", cwd=work)
    _git("commit", "-q", "-m", "cpython-perf as the buildbot-local run found it", cwd=work)
    _git("clone", "-q", "--bare", str(work), str(bare), cwd=root)
    _git("remote", "add", "bare", str(bare), cwd=work)
    return bare, work


def scenario_revision(fleet: Fleet, pytest_args: str, timeout: float) -> dict:
    """A git source; one worker, so the two cells check out one after the other; a commit lands on the branch
    after the first cell's checkout and before the second's: both build the revision `matrix` resolved."""
    bare, work = Path(fleet.source["git"].removeprefix("file://")), fleet.root / "source-work"
    first_head = _git("rev-parse", "HEAD", cwd=work)
    fleet.start()
    bsid = fleet.force_matrix(select=SMOKE_SELECT, pytest_args=pytest_args, reason="revision")
    landed: dict = {}

    def land_after_first_checkout():
        if landed:
            return
        for build in fleet.builds():
            if build["builder"] in ("3.13-fp", "3.11-fp") and any(
                    s["name"] == "source" and s["complete_at"] for s in build["steps"]):
                (work / "LANDED-BETWEEN-CHECKOUTS").write_text("a commit of the branch after the run began\n")
                _git("add", "LANDED-BETWEEN-CHECKOUTS", cwd=work)
                _git("commit", "-q", "-m", "lands between two cells' checkouts", cwd=work)
                _git("push", "-q", "bare", "main", cwd=work)
                landed.update(after=build["builder"], at=time.time(), head=_git("rev-parse", "HEAD", cwd=work))
                fleet.log(f"landed {landed['head'][:12]} on main after {build['builder']}'s checkout")
                return
    fleet.wait_buildsets([bsid], timeout, while_waiting=land_after_first_checkout)
    builds = fleet.builds()
    matrix_build = next(x for x in builds if x["buildrequestid"] in
                        {r["buildrequestid"] for r in fleet.requests_of(bsid)})
    run = str(matrix_build["properties"]["run"])
    cells = _cell_builds(builds, run)
    checkouts = {}
    for cell, build in cells.items():
        source = next(s for s in build["steps"] if s["name"] == "source")
        tree = fleet.workers_dir / build["worker"] / cell / "build"
        checkouts[cell] = {"source_started_at": source["started_at"], "source_complete_at": source["complete_at"],
                           "got_revision": build["properties"].get("got_revision"),
                           "landed_file_in_checkout": (tree / "LANDED-BETWEEN-CHECKOUTS").exists()}
    report = next((x for x in builds if x["builder"] == bbc.REPORT_BUILDER
                   and str(x["properties"].get("run")) == run), None)
    return {"first_head": first_head, "landed": landed, "branch_head_after": _git("rev-parse", "main", cwd=bare),
            "run": run, "matrix": _brief(matrix_build), "matrix_revision": matrix_build["properties"].get(
                "matrix_revision"), "checkouts": checkouts,
            "cells": {c: _brief(x) for c, x in cells.items()},
            "report_build": _brief(report) if report else None, "report": fleet.report_of(run),
            "builds": [_brief(x) for x in builds]}


def run_scenario(name: str, venv: Path, root: Path, out: Path, pytest_args: str = SCENARIO_PYTEST_ARGS,
                 timeout: float = 3 * 3600, log=_log) -> dict:
    x86 = [("local-worker-1", "x86_64"), ("local-worker-2", "x86_64")]
    if name == "overlap":
        fleet = Fleet(venv, root, x86, log=log)
    elif name == "offline":
        fleet = Fleet(venv, root, [*x86, ("local-arm64", "aarch64")], log=log,
                      extra={"aarch64": "native", "offline_grace": 30})
    elif name == "revision":
        bare, _ = source_repository(root)
        fleet = Fleet(venv, root, x86[:1], source={"git": f"file://{bare}", "branch": "main"}, log=log)
    else:
        raise DriverError(f"unknown scenario {name!r}: one of {', '.join(SCENARIOS)}")
    summary: dict = {"scenario": name, "pytest_args": pytest_args, "root": str(root), "buildbot": bbc.pins(),
                     "workers": fleet.workers}
    t0 = time.monotonic()
    try:
        summary.update(globals()[f"scenario_{name}"](fleet, pytest_args, timeout))
    finally:
        summary["stopped"] = fleet.stop()
        summary["total_seconds"] = round(time.monotonic() - t0, 1)
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
        fleet.keep_logs(out)
    return summary


def _pid(path: Path) -> int | None:
    try:
        return int((path / "twistd.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(path: Path) -> bool:
    pid = _pid(path)
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def stop(bin_dir: Path, daemons: list[tuple[str, Path]], env, log=_log, grace: float = 30) -> None:
    """Stop what run_local started: the master first (it interrupts running steps on the workers and ends
    their builds), then the workers; a daemon still alive after grace seconds is killed by its own pid."""
    for kind, path in sorted(daemons, key=lambda d: d[0] != "buildbot"):
        proc = _run([bin_dir / kind, "stop", path], env=env, log=log, check=False)
        if proc.returncode != 0:
            log(f"{kind} stop {path}: exit {proc.returncode}: {(proc.stdout + proc.stderr).strip()[-300:]}")
    deadline = time.monotonic() + grace
    for _, path in daemons:
        while _alive(path) and time.monotonic() < deadline:
            time.sleep(1)
        if _alive(path):
            log(f"{path}: still running after {grace:.0f} s; killing pid {_pid(path)}")
            os.kill(_pid(path), 9)


def collect(api: Api, builders: dict[str, int], master: Path, cells: list[str]) -> dict:
    names = {v: k for k, v in builders.items()}
    workers = {w["workerid"]: w["name"] for w in api.get("workers")["workers"]}
    builds = []
    for build in api.get("builds")["builds"]:
        steps = [{"name": s["name"], "started_at": s["started_at"], "complete_at": s["complete_at"],
                  "results": RESULT_NAMES.get(s["results"], s["results"]), "state": s["state_string"]}
                 for s in api.get(f"builds/{build['buildid']}/steps")["steps"]]
        builds.append({"builder": names[build["builderid"]], "number": build["number"],
                       "worker": workers.get(build["workerid"]), "started_at": build["started_at"],
                       "complete_at": build["complete_at"], "results": RESULT_NAMES.get(build["results"], build["results"]),
                       "state": build["state_string"], "steps": steps})
    by_cell = {b["builder"]: b for b in builds if b["builder"] in cells}
    result: dict = {"builds": builds}
    if len(by_cell) == len(cells) and cells:
        result["build_overlap_seconds"] = round(overlap([(b["started_at"], b["complete_at"]) for b in by_cell.values()]), 1)
        spans = []
        for cell, build in by_cell.items():
            step = next((s for s in build["steps"] if s["name"] == f"conformance-{cell}"), None)
            if step and step["started_at"] and step["complete_at"]:
                spans.append((step["started_at"], step["complete_at"]))
        if len(spans) == len(cells):
            result["conformance_overlap_seconds"] = round(overlap(spans), 1)
    latest = master / "reports" / "latest"
    if (latest / "report.md").exists():
        text = (latest / "report.md").read_text()
        result["report_rows"] = report_rows(text, cells)
        result["report_flamegraphs"] = sorted(str(p.relative_to(latest)) for p in latest.glob("*/seed-flamegraph.svg"))
    # results/<run>/<cell>/... (the run: the matrix build's number)
    result["master_results"] = sorted(str(p.relative_to(master)) for p in (master / "results").glob("*/*/*")) \
        if (master / "results").exists() else []
    return result


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
    p = sub.add_parser("venv", help="create (or reuse) the venv with the pinned buildbot; print its path")
    p.add_argument("--venv", type=Path, default=None)
    p = sub.add_parser("run", help="the whole local proof")
    p.add_argument("--venv", type=Path, default=None, help="buildbot's venv (created if missing)")
    p.add_argument("--out", type=Path, default=PROJECT_ROOT / "results" / "buildbot-local",
                   help="where summary.json, the report and the master's log go")
    p.add_argument("--root", type=Path, default=None, help="the throwaway directory (default: a new temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the throwaway directory")
    p.add_argument("--event", default="pull_request", help="the plan's event (pull_request: smoke_cells)")
    p.add_argument("--select", default="", help="cells instead of the event's choice (cell:<name>,...)")
    p.add_argument("--pytest-args", default=DEFAULT_PYTEST_ARGS,
                   help=f"pytest arguments of each conformance-<cell> (default: {DEFAULT_PYTEST_ARGS})")
    p.add_argument("--timeout", type=float, default=3 * 3600)
    p.add_argument("--scenario", choices=SCENARIOS, default=None,
                   help="instead of the smoke run: overlap (two runs forced at once, a cell forced on its own), "
                        "offline (a worker stopped mid-run, then away before a run), revision (a commit landing "
                        "between two cells' checkouts); conformance steps with --pytest-args "
                        f"(default for scenarios: {SCENARIO_PYTEST_ARGS!r})")


def _run_command(args) -> int:
    venv = ensure_venv(args.venv)
    if args.action == "venv":
        print(venv)
        return 0
    root = args.root or Path(tempfile.mkdtemp(prefix="cpython-perf-buildbot-"))
    try:
        if args.scenario:
            pytest_args = SCENARIO_PYTEST_ARGS if args.pytest_args == DEFAULT_PYTEST_ARGS else args.pytest_args
            summary = run_scenario(args.scenario, venv, root, args.out, pytest_args, args.timeout)
        else:
            summary = run_local(venv, root, args.out, args.event, args.select, args.pytest_args, args.timeout)
    finally:
        if not args.keep and args.root is None:
            shutil.rmtree(root, ignore_errors=True)
    for build in summary.get("builds", []):
        _log(f"{build['builder']} #{build['number']} on {build['worker']}: {build['results']} "
             f"({build['complete_at'] - build['started_at'] if build['complete_at'] else '?'} s)"
             + (f" run {build['run']}" if build.get("run") else ""))
    if args.scenario:
        _log(f"scenario {args.scenario}: {summary['total_seconds']} s; summary in {args.out / 'summary.json'}")
        return 0
    _log(f"conformance steps overlapped {summary.get('conformance_overlap_seconds')} s; "
         f"report rows: {json.dumps({c: r['status'] for c, r in summary.get('report_rows', {}).items()})}")
    return 0


COMMAND = Command("buildbot-local", "a throwaway buildbot master and two workers on localhost running the smoke "
                                    "cells' builders for real (nox -s buildbot-local; docs/buildbot.md)",
                  add_arguments, _run_command, description=__doc__.splitlines()[0])


def main(argv=None) -> int:
    return main_of(COMMAND, argv, prog="python -m cpython_perf.ci.buildbot_local")


if __name__ == "__main__":
    raise SystemExit(main())

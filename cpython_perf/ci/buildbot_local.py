"""A throwaway buildbot master and two workers on localhost, running the smoke cells' builders for real.

`nox -s buildbot-local` (not in CI): `python -m cpython_perf.ci.buildbot_local run --venv DIR --out DIR`
installs the pinned buildbot (buildbot/requirements.txt) into a venv of its own, creates under a temporary
directory a master from buildbot/master.cfg (settings: two x86_64 workers whose passwords are random and
reach the master only through its environment, ports chosen free on 127.0.0.1, the source copied from
this tree) and two workers, starts them, forces the `matrix` builder (a pull request's selection: matrix.yaml
smoke_cells), which triggers the cell builders and then `report`, waits, reads every build and step back
from the master's REST API, copies the report, and stops the workers and the master.  The summary
(summary.json: which worker ran which cell, when each step ran, how long the two conformance steps
overlapped, the report's rows of the cells) is what tests/test_buildbot_local.py asserts on.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import secrets
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

from ..errors import DriverError
from ..matrix import PROJECT_ROOT, load_matrix
from . import buildbot_config as bbc

VENV_ENV = "CPYTHON_PERF_BUILDBOT_VENV"
RESULT_NAMES = {0: "success", 1: "warnings", 2: "failure", 3: "skipped", 4: "exception", 5: "retry", 6: "cancelled"}
# the CI smoke run's choice (nox -s tests): CPython's own regression tests take minutes a cell and run in
# a plain `nox -s conformance-<cell>`; `--pytest-args ""` runs the whole suite
DEFAULT_PYTEST_ARGS = '-m "not upstream_regression"'


class BuildbotUnavailable(DriverError):
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
        raise DriverError(f"{' '.join(str(a) for a in argv)} failed (exit {proc.returncode}):\n"
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
            raise DriverError(f"{path} {method}: HTTP {exc.code}: {exc.read().decode(errors='replace')[:1000]}") from None
        if "error" in got:
            raise DriverError(f"{path} {method}: {got['error']}")
        return got["result"]


def wait_for(what: str, check, timeout: float, interval: float = 2.0, log=_log):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise DriverError(f"timed out after {timeout:.0f} s waiting for {what}")
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


def run_local(venv: Path, root: Path, out: Path, event: str = "pull_request", select: str = "",
              pytest_args: str = DEFAULT_PYTEST_ARGS, timeout: float = 3 * 3600, log=_log) -> dict:
    """The whole proof; returns (and writes to out/summary.json) what happened."""
    bin_dir = venv / "bin"
    matrix = load_matrix()
    cells = bbc.selected_cells(matrix, event, "", select)
    nox = shutil.which("nox")
    if not nox:
        raise DriverError("nox is not on PATH: the workers' steps run `nox -s ...`")
    master, workers_dir = root / "master", root / "workers"
    pb, www = free_port(), free_port()
    url = f"http://127.0.0.1:{www}/"
    names = ["local-worker-1", "local-worker-2"]
    passwords = {n: secrets.token_hex(16) for n in names}
    pw_env = {n: f"CPYTHON_PERF_BB_LOCAL_{i}" for i, n in enumerate(names, 1)}
    env = {**os.environ, **{pw_env[n]: passwords[n] for n in names},
           "PATH": os.pathsep.join([str(bin_dir), str(Path(nox).parent), os.environ.get("PATH", "")])}
    started_daemons: list[tuple[str, Path]] = []
    summary: dict = {"cells": cells, "event": event, "select": select, "pytest_args": pytest_args, "root": str(root),
                     "ports": {"pb": pb, "www": www}, "workers": names, "buildbot": bbc.pins()}
    t0 = time.monotonic()
    try:
        workers_dir.mkdir(parents=True, exist_ok=True)
        created = _run([bin_dir / "buildbot", "create-master", "-r", "--config",
                        PROJECT_ROOT / "buildbot" / "master.cfg", master], env=env, log=log)
        if not (master / "buildbot.tac").exists():   # create-master exits 0 even when it failed
            raise DriverError(f"buildbot create-master {master} failed:\n{created.stdout}{created.stderr}")
        settings = {
            "title": "cpython-perf (buildbot-local)",
            "worker_port": f"tcp:{pb}:interface=127.0.0.1",
            "www_port": f"tcp:{www}:interface=127.0.0.1",
            "buildbot_url": url,
            "source": {"path": str(PROJECT_ROOT)},
            "nox": ["nox"],
            "workers": [{"name": n, "arch": "x86_64", "password_env": pw_env[n], "max_builds": 1} for n in names],
        }
        (master / "settings.yaml").write_text(yaml.safe_dump(settings, sort_keys=False))
        check = _run([bin_dir / "buildbot", "checkconfig", master], env=env, log=log)
        summary["checkconfig"] = check.stdout.strip().splitlines()[-1]
        _run([bin_dir / "buildbot", "start", master], env=env, log=log)
        started_daemons.append(("buildbot", master))
        for n in names:
            _run([bin_dir / "buildbot-worker", "create-worker", "-r", "--keepalive", "60",
                  workers_dir / n, f"127.0.0.1:{pb}", n, passwords[n]], env=env, log=log)
            if not (workers_dir / n / "buildbot.tac").exists():
                raise DriverError(f"buildbot-worker create-worker {workers_dir / n} failed")
            _run([bin_dir / "buildbot-worker", "start", workers_dir / n], env=env, log=log)
            started_daemons.append(("buildbot-worker", workers_dir / n))
        api = Api(url)
        wait_for("both workers to connect",
                 lambda: all(w["connected_to"] for w in api.get("workers")["workers"] if w["name"] in names)
                 and len([w for w in api.get("workers")["workers"] if w["name"] in names]) == 2, 120, log=log)
        log(f"master {url} (pb {pb}), workers {', '.join(names)} connected")
        builders = {b["name"]: b["builderid"] for b in api.get("builders")["builders"]}
        forced_at = time.time()
        bsid, _ = api.rpc(f"forceschedulers/{bbc.FORCE_MATRIX}", "force", {
            "builderid": str(builders[bbc.MATRIX_BUILDER]), "event": event, "labels": "", "select": select,
            "pytest_args": pytest_args, "reason": "buildbot-local", "username": "buildbot-local <buildbot-local@example.org>"})
        log(f"forced {bbc.MATRIX_BUILDER} (buildset {bsid}): cells {', '.join(cells)}")
        last = [""]

        builder_names = {v: k for k, v in builders.items()}
        worker_names = {w["workerid"]: w["name"] for w in api.get("workers")["workers"]}

        def done():
            bs = api.get(f"buildsets/{bsid}")["buildsets"][0]
            running = [f"{builder_names.get(b['builderid'])} on {worker_names.get(b['workerid'])}: {b['state_string']}"
                       for b in api.get("builds?complete=false")["builds"]]
            line = "; ".join(running)
            if line != last[0]:
                log(f"running: {line or '-'}")
                last[0] = line
            return bs["complete"]

        wait_for("the matrix build", done, timeout, interval=10, log=log)
        summary["wall_seconds"] = round(time.time() - forced_at, 1)
        summary.update(collect(api, builders, master, cells))
        latest = master / "reports" / "latest"
        if latest.exists():   # the report the report builder uploaded, kept beside the summary
            # the report and the flame graphs, not the JUnit files (a report of this tree would read them again)
            shutil.copytree(latest, out / "report", dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("*.xml", "*.txt", "*.data"))
            summary["report"] = str((out / "report" / "report.md").resolve())
    finally:
        stop(bin_dir, started_daemons, env, log)
        summary["total_seconds"] = round(time.monotonic() - t0, 1)
        summary["stopped"] = [str(p) for _, p in started_daemons if not _alive(p)]
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        for name in ("twistd.log",):
            if (master / name).exists():
                shutil.copy2(master / name, out / f"master-{name}")
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
    result["master_results"] = sorted(str(p.relative_to(master)) for p in (master / "results").glob("*/*")) \
        if (master / "results").exists() else []
    return result


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cpython_perf.ci.buildbot_local", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
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
    args = parser.parse_args(argv)
    try:
        venv = ensure_venv(args.venv)
        if args.command == "venv":
            print(venv)
            return 0
        root = args.root or Path(tempfile.mkdtemp(prefix="cpython-perf-buildbot-"))
        try:
            summary = run_local(venv, root, args.out, args.event, args.select, args.pytest_args, args.timeout)
        finally:
            if not args.keep and args.root is None:
                shutil.rmtree(root, ignore_errors=True)
    except DriverError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for build in summary.get("builds", []):
        _log(f"{build['builder']} #{build['number']} on {build['worker']}: {build['results']} "
             f"({build['complete_at'] - build['started_at'] if build['complete_at'] else '?'} s)")
    _log(f"conformance steps overlapped {summary.get('conformance_overlap_seconds')} s; "
         f"report rows: {json.dumps({c: r['status'] for c, r in summary.get('report_rows', {}).items()})}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

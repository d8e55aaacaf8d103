"""The buildbot master generated from the CI plan (cpython_perf/ci/buildbot_config.py, buildbot/master.cfg).

The description (builders, workers, steps as data) is checked without buildbot; then the pinned buildbot
(buildbot/requirements.txt, installed into a venv of its own: $CPYTHON_PERF_BUILDBOT_VENV, else a cached one)
runs `buildbot checkconfig` on a master created from the checked-in master.cfg, and the configuration
buildbot itself loads is compared with the plan.  Where buildbot cannot be installed those tests skip
with pip's error; they never pass without running it."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from cpython_perf.ci import buildbot_config as bbc
from cpython_perf.ci import buildbot_local
from cpython_perf.ci.plan import build_plan
from cpython_perf.matrix import PROJECT_ROOT, load_matrix

MATRIX = load_matrix()
ENV = {"PW_X1": "x1-secret", "PW_X2": "x2-secret", "PW_A1": "a1-secret"}


def settings_data(aarch64="qemu", arm=False):
    workers = [{"name": "x86-1", "arch": "x86_64", "password_env": "PW_X1"},
               {"name": "x86-2", "arch": "x86_64", "password_env": "PW_X2", "max_builds": 2}]
    if arm:
        workers.append({"name": "arm-1", "arch": "aarch64", "password_env": "PW_A1"})
    return {"source": {"path": str(PROJECT_ROOT)}, "aarch64": aarch64, "workers": workers}


def settings(**kwargs):
    return bbc.parse_settings(settings_data(**kwargs), "test-settings", ENV)


@pytest.fixture(scope="module")
def full_plan():
    return build_plan(MATRIX, "push", aarch64="qemu")   # the settings' default placement


def specs_for(plan, s=None):
    return bbc.builder_specs(MATRIX, s or settings(), "/srv/master", plan)


# --------------------------------------------------------------------------
# the description, without buildbot


def test_every_plan_cell_has_exactly_one_builder(full_plan):
    specs = specs_for(full_plan)
    names = [s.name for s in specs]
    assert len(names) == len(set(names))
    cell_builders = [s.name for s in specs if s.job is not None]
    assert sorted(cell_builders) == sorted(job["cell"] for job in full_plan["cells"]) == sorted(MATRIX.cells)
    assert {bbc.REPORT_BUILDER, bbc.MATRIX_BUILDER} <= set(names)


@pytest.mark.parametrize("placement", ["qemu", "native"])
def test_workers_match_the_arch_the_plan_gives(placement):
    plan = build_plan(MATRIX, "push", aarch64=placement)
    s = settings(aarch64=placement, arm=True)
    arch_of = {w.name: w.arch for w in s.workers}
    for spec in specs_for(plan, s):
        if spec.job is None:
            continue
        assert spec.workers, spec.name
        assert {arch_of[w] for w in spec.workers} == {spec.job["runner_arch"]}, spec.name
        assert set(spec.workers) == {w.name for w in s.workers if w.arch == spec.job["runner_arch"]}
    aarch64 = [spec for spec in specs_for(plan, s) if spec.job and spec.job["arch"] == "aarch64"]
    assert aarch64 and all(spec.workers == (["arm-1"] if placement == "native" else ["x86-1", "x86-2"])
                           for spec in aarch64)


def test_a_cell_without_a_worker_of_its_arch_is_an_error():
    plan = build_plan(MATRIX, "push", aarch64="native")
    with pytest.raises(bbc.BuildbotConfigError, match="no worker declares that arch"):
        specs_for(plan, settings(aarch64="native"))


def test_steps_call_the_plans_sessions(full_plan):
    s = settings()
    for spec in specs_for(full_plan, s):
        if spec.job is None:
            continue
        commands = {step.name: step.command for step in spec.steps}
        cell = spec.job["cell"]
        assert commands[f"build-{cell}"] == ["nox", "-s", f"build-{cell}", "--", "--if-stale"]
        assert commands[spec.job["session"]] == ["nox", "-s", f"conformance-{cell}", bbc.PYTEST_ARGS]
        upload = next(step for step in spec.steps if step.kind == "upload")
        assert upload.options["workersrc"] == f"results/{cell}"
        assert upload.options["masterdest"] == f"/srv/master/results/{cell}"
        assert upload.options["alwaysRun"] is True   # uploaded even when the cell failed
        order = [step.name for step in spec.steps]
        assert order.index(f"build-{cell}") < order.index(f"conformance-{cell}") < order.index("upload results")
        assert spec.steps[0].kind == "arch"
    report = next(spec for spec in specs_for(full_plan, s) if spec.name == bbc.REPORT_BUILDER)
    assert ["nox", "-s", "report"] in [step.command for step in report.steps]
    assert [step.kind for step in report.steps].count("download") == 1


def test_smoke_cells_are_tagged(full_plan):
    tagged = {spec.name for spec in specs_for(full_plan) if bbc.SMOKE_TAG in spec.tags}
    assert tagged == set(MATRIX.smoke_cells)


def test_matrix_triggers_the_plans_selection():
    assert bbc.selected_cells(MATRIX, "pull_request") == [c for c in MATRIX.cells if c in MATRIX.smoke_cells]
    assert bbc.selected_cells(MATRIX, "push") == list(MATRIX.cells)
    assert bbc.selected_cells(MATRIX, "pull_request", labels="cell:3.9-O0") == \
        [c for c in MATRIX.cells if c in {*MATRIX.smoke_cells, "3.9-O0"}]
    assert bbc.selected_cells(MATRIX, "push", select="arch:i386") == [c.name for c in MATRIX.cells_of_arch("i386")]


def test_passwords_come_from_the_environment_a_file_or_the_local_settings(tmp_path):
    pw = tmp_path / "pw"
    pw.write_text("from-file\n")
    data = {"workers": [{"name": "a", "arch": "x86_64", "password_env": "PW_X1"},
                        {"name": "b", "arch": "x86_64", "password_file": str(pw)},
                        {"name": "c", "arch": "x86_64", "password": "inline"}]}
    got = bbc.parse_settings(data, "s", ENV)
    assert [w.password for w in got.workers] == ["x1-secret", "from-file", "inline"]
    assert "x1-secret" not in repr(got)
    with pytest.raises(bbc.BuildbotConfigError, match="PW_NOPE .*not set"):
        bbc.parse_settings({"workers": [{"name": "a", "arch": "x86_64", "password_env": "PW_NOPE"}]}, "s", ENV)
    with pytest.raises(bbc.BuildbotConfigError, match="exactly one of"):
        bbc.parse_settings({"workers": [{"name": "a", "arch": "x86_64"}]}, "s", ENV)
    with pytest.raises(bbc.BuildbotConfigError, match="arch 'sparc'"):
        bbc.parse_settings({"workers": [{"name": "a", "arch": "sparc", "password": "p"}]}, "s", ENV)
    with pytest.raises(bbc.BuildbotConfigError, match="unknown key"):
        bbc.parse_settings({"workers": [{"name": "a", "arch": "x86_64", "password": "p"}], "wrokers": []}, "s", ENV)


def test_checked_in_files_hold_no_secret_and_the_example_loads(tmp_path):
    example = yaml.safe_load((PROJECT_ROOT / "buildbot" / "settings.example.yaml").read_text())
    assert all("password" not in w for w in example["workers"])   # only password_env / password_file
    pw = tmp_path / "pw"
    pw.write_text("p")
    for w in example["workers"]:
        if "password_file" in w:
            w["password_file"] = str(pw)
    got = bbc.parse_settings(example, "example", {"CPYTHON_PERF_WORKER_X86_64_1": "p"})
    assert [w.arch for w in got.workers] == ["x86_64", "x86_64"]
    for path in (PROJECT_ROOT / "buildbot").iterdir():
        assert not re.search(r"^\s*-?\s*password\s*:", path.read_text(), re.M), path


# --------------------------------------------------------------------------
# with the pinned buildbot


@pytest.fixture(scope="module")
def buildbot_venv():
    try:
        return buildbot_local.ensure_venv(log=lambda line: None)
    except buildbot_local.BuildbotUnavailable as exc:
        pytest.skip(f"buildbot cannot be installed here: {exc}")


def make_master(venv: Path, path: Path, data: dict) -> Path:
    subprocess.run([venv / "bin" / "buildbot", "create-master", "-q", "-r", "--config",
                    PROJECT_ROOT / "buildbot" / "master.cfg", path], check=True, capture_output=True)
    (path / "settings.yaml").write_text(yaml.safe_dump(data))
    return path


def buildbot(venv: Path, *args, env=ENV) -> subprocess.CompletedProcess:
    import os
    return subprocess.run([str(venv / "bin" / "buildbot"), *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=300)


def test_pins_are_what_is_installed(buildbot_venv):
    freeze = subprocess.run([buildbot_venv / "bin" / "python", "-m", "pip", "freeze"], capture_output=True,
                            text=True, check=True).stdout.lower().replace("_", "-").splitlines()
    for pin in bbc.pins():
        assert pin.lower() in freeze, pin


def test_buildbot_checkconfig_accepts_the_generated_master(buildbot_venv, tmp_path):
    master = make_master(buildbot_venv, tmp_path / "master", settings_data())
    proc = buildbot(buildbot_venv, "checkconfig", master)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Config file is good!" in proc.stdout


def test_buildbot_checkconfig_refuses_what_cannot_run(buildbot_venv, tmp_path):
    master = make_master(buildbot_venv, tmp_path / "master", settings_data(aarch64="native"))
    proc = buildbot(buildbot_venv, "checkconfig", master)
    assert proc.returncode != 0
    assert "no worker declares that arch" in proc.stdout + proc.stderr
    proc = buildbot(buildbot_venv, "checkconfig", master, env={})   # the password variables are not set
    assert proc.returncode != 0 and "PW_X1" in proc.stdout + proc.stderr


def test_what_buildbot_loads_is_the_plan(buildbot_venv, tmp_path, full_plan):
    import os
    master = make_master(buildbot_venv, tmp_path / "master", settings_data())
    proc = subprocess.run([buildbot_venv / "bin" / "python", "-m", "cpython_perf.ci.buildbot_config", "describe",
                           master, "--property", "pytest_args=-k seed"], capture_output=True, text=True,
                          cwd=PROJECT_ROOT, env={**os.environ, **ENV}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout)
    builders = {b["name"]: b for b in loaded["builders"]}
    jobs = {job["cell"]: job for job in full_plan["cells"]}
    assert set(builders) == set(jobs) | {bbc.REPORT_BUILDER, bbc.MATRIX_BUILDER}
    workers = {w["name"]: w for w in loaded["workers"]}
    assert workers["x86-1"]["properties"]["worker_arch"][0] == "x86_64"
    assert workers["x86-2"]["max_builds"] == 2 and workers[bbc.COORDINATOR]["class"] == "LocalWorker"
    for cell, job in jobs.items():
        b = builders[cell]
        assert {workers[w]["properties"]["worker_arch"][0] for w in b["workernames"]} == {job["runner_arch"]}
        steps = {s["name"]: s for s in b["steps"]}
        assert steps[f"build-{cell}"]["command"] == ["nox", "-s", f"build-{cell}", "--", "--if-stale"]
        assert steps[job["session"]]["command"] == ["nox", "-s", job["session"], "--", "-k", "seed"]
        assert steps["upload results"]["class"] == "DirectoryUpload"
        assert steps["upload results"]["masterdest"] == str((master / "results" / cell).resolve())
        assert (bbc.SMOKE_TAG in b["tags"]) == (cell in MATRIX.smoke_cells)
    schedulers = {s["name"]: s for s in loaded["schedulers"]}
    assert schedulers[bbc.FORCE_MATRIX]["class"] == "ForceScheduler"
    assert schedulers[bbc.FORCE_MATRIX]["builderNames"] == [bbc.MATRIX_BUILDER]
    assert set(schedulers[bbc.FORCE]["builderNames"]) == set(builders)
    assert schedulers[bbc.REPORT_TRIGGER]["class"] == "Triggerable"
    for cell in jobs:
        assert schedulers[bbc.cell_scheduler(cell)]["builderNames"] == [cell]
    assert bbc.ON_PUSH not in schedulers and loaded["change_sources"] == []   # a path source: nothing to poll
    trigger_cells, trigger_report = builders[bbc.MATRIX_BUILDER]["steps"]
    assert trigger_cells["class"] == "SelectionTrigger" and trigger_report["schedulerNames"] == [bbc.REPORT_TRIGGER]
    assert trigger_report["alwaysRun"] is True
    report_steps = [s["class"] for s in builders[bbc.REPORT_BUILDER]["steps"]]
    assert report_steps.index("FileDownload") < report_steps.index("DirectoryUpload")


def test_a_polled_git_source_runs_the_matrix_on_each_commit(buildbot_venv, tmp_path):
    import os
    data = {**settings_data(), "source": {"git": "https://example.invalid/cpython-perf.git", "branch": "main",
                                          "poll": 300}}
    master = make_master(buildbot_venv, tmp_path / "master", data)
    proc = buildbot(buildbot_venv, "checkconfig", master)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = subprocess.run([buildbot_venv / "bin" / "python", "-m", "cpython_perf.ci.buildbot_config", "describe",
                           master], capture_output=True, text=True, cwd=PROJECT_ROOT, env={**os.environ, **ENV},
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout)
    assert loaded["change_sources"] == [{"class": "GitPoller", "repourl": "https://example.invalid/cpython-perf.git",
                                         "branches": ["main"], "pollInterval": 300}]
    on_push = {s["name"]: s for s in loaded["schedulers"]}[bbc.ON_PUSH]
    assert on_push["class"] == "SingleBranchScheduler" and on_push["builderNames"] == [bbc.MATRIX_BUILDER]


@pytest.mark.parametrize("source, problem", [
    ({"git": "u", "poll": 5}, "at least 60"),
    ({"git": "u", "poll": "often"}, "not 'often'"),
    ({"path": "/x", "poll": 300}, "source is {path: DIR} or {git: URL"),
    ({"git": "u", "bogus": 1}, "source is {path: DIR} or {git: URL"),
])
def test_source_settings_are_checked(source, problem):
    with pytest.raises(bbc.BuildbotConfigError, match=re.escape(problem)):
        bbc.parse_settings({**settings_data(), "source": source}, "test-settings", ENV)

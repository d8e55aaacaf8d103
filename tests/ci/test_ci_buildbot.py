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
        assert upload.options["masterdest"] == f"/srv/master/results/%(prop:run)s/{cell}"   # keyed by run
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
    proc = subprocess.run([buildbot_venv / "bin" / "python", "-m", "cpython_perf", "buildbot-config", "describe",
                           master, "--property", "pytest_args=-k seed"], capture_output=True, text=True,
                          cwd=PROJECT_ROOT, env={**os.environ, **ENV}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout)
    # the janitor (buildbot's JanitorConfigurator) adds a builder, worker and scheduler of its own
    janitor = {b["name"]: b for b in loaded["builders"] if b["name"].startswith("__")}
    assert list(janitor) == ["__Janitor"]
    # as python/buildmaster-config's: build logs older than the horizon deleted (here 180 days, as there)
    assert [(s["class"], s["logHorizon"]) for s in janitor["__Janitor"]["steps"]] == \
        [("LogChunksJanitor", "180 days, 0:00:00")]
    builders = {b["name"]: b for b in loaded["builders"] if not b["name"].startswith("__")}
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
        assert steps["upload results"]["masterdest"] == str((master / "results" / "7" / cell).resolve())
        assert steps["run"]["class"] == "SetProperty"
        assert b["collapse_keys"] == list(bbc.CELL_COLLAPSE_KEYS)
        assert (bbc.SMOKE_TAG in b["tags"]) == (cell in MATRIX.smoke_cells)
    schedulers = {s["name"]: s for s in loaded["schedulers"]}
    assert schedulers[bbc.FORCE_MATRIX]["class"] == "ForceScheduler"
    assert schedulers[bbc.FORCE_MATRIX]["builderNames"] == [bbc.MATRIX_BUILDER]
    assert set(schedulers[bbc.FORCE]["builderNames"]) == set(builders)
    assert schedulers[bbc.REPORT_TRIGGER]["class"] == "Triggerable"
    for cell in jobs:
        assert schedulers[bbc.cell_scheduler(cell)]["builderNames"] == [cell]
    assert bbc.ON_PUSH not in schedulers and loaded["change_sources"] == []   # a path source: nothing to poll
    run, trigger_cells, trigger_report, prune = builders[bbc.MATRIX_BUILDER]["steps"]
    assert run["class"] == "ResolveRun"
    assert trigger_cells["class"] == "CellsTrigger" and trigger_report["schedulerNames"] == [bbc.REPORT_TRIGGER]
    assert trigger_cells["offline_grace"] == 300
    assert trigger_report["alwaysRun"] is True and prune["alwaysRun"] is True
    assert "-mtime +30" in prune["command"][2]
    # one matrix run at a time; its requests collapse as buildbot's default does, and only with the same selection
    assert workers[bbc.COORDINATOR]["max_builds"] == 1
    assert builders[bbc.MATRIX_BUILDER]["collapse_keys"] == list(bbc.MATRIX_COLLAPSE_KEYS)
    report_steps = [s["class"] for s in builders[bbc.REPORT_BUILDER]["steps"]]
    assert report_steps.index("FileDownload") < report_steps.index("DirectoryUpload") < \
        report_steps.index("PublishReport")
    report = {s["name"]: s for s in builders[bbc.REPORT_BUILDER]["steps"]}
    assert report["upload report"]["masterdest"] == str((master / "reports" / "7").resolve())
    assert report["latest"]["command"] == ["ln", "-sfn", "7", str((master / "reports" / "latest").resolve())]
    # the reports site; no reporter unless the settings configure one
    assert [s["class"] for s in loaded["services"]] == ["ReportsSite"]


def test_a_polled_git_source_runs_the_matrix_on_each_commit(buildbot_venv, tmp_path):
    import os
    data = {**settings_data(), "source": {"git": "https://example.invalid/cpython-perf.git", "branch": "main",
                                          "poll": 300}}
    master = make_master(buildbot_venv, tmp_path / "master", data)
    proc = buildbot(buildbot_venv, "checkconfig", master)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = subprocess.run([buildbot_venv / "bin" / "python", "-m", "cpython_perf", "buildbot-config", "describe",
                           master], capture_output=True, text=True, cwd=PROJECT_ROOT, env={**os.environ, **ENV},
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout)
    assert loaded["change_sources"] == [{"class": "GitPoller", "repourl": "https://example.invalid/cpython-perf.git",
                                         "branches": ["main"], "pollInterval": 300}]
    on_push = {s["name"]: s for s in loaded["schedulers"]}[bbc.ON_PUSH]
    assert on_push["class"] == "SingleBranchScheduler" and on_push["builderNames"] == [bbc.MATRIX_BUILDER]
    assert on_push["fileIsImportant"] == "is_important_change"
    source = {s["name"]: s for s in {b["name"]: b for b in loaded["builders"]}["3.13-fp"]["steps"]}["source"]
    assert source["class"] == "Git" and source["clobberOnFailure"] is True


@pytest.mark.parametrize("source, problem", [
    ({"git": "u", "poll": 5}, "at least 60"),
    ({"git": "u", "poll": "often"}, "not 'often'"),
    ({"path": "/x", "poll": 300}, "source is {path: DIR} or {git: URL"),
    ({"git": "u", "bogus": 1}, "source is {path: DIR} or {git: URL"),
])
def test_source_settings_are_checked(source, problem):
    with pytest.raises(bbc.BuildbotConfigError, match=re.escape(problem)):
        bbc.parse_settings({**settings_data(), "source": source}, "test-settings", ENV)


# --------------------------------------------------------------------------
# runs: results keyed by run, offline workers, one revision, documentation-only commits, reporters


def test_cells_without_a_connected_worker_are_skipped_with_the_reason():
    workers = {"3.13-fp": ["x86-1", "x86-2"], "3.11-fp": ["x86-2"], "3.13-fp-aarch64": ["arm-1"]}
    chosen, skipped = bbc.split_by_connected(list(workers), workers.get, {"x86-2"})
    assert chosen == ["3.13-fp", "3.11-fp"] and list(skipped) == ["3.13-fp-aarch64"]
    assert skipped["3.13-fp-aarch64"].startswith(bbc.NO_WORKER) and "arm-1" in skipped["3.13-fp-aarch64"]
    chosen, skipped = bbc.split_by_connected(list(workers), workers.get, set())
    assert chosen == [] and set(skipped) == set(workers)


def test_the_revision_is_the_branch_head_ls_remote_names():
    out = ("1111111111111111111111111111111111111111\trefs/heads/main-old\n"
           "2222222222222222222222222222222222222222\trefs/heads/main\n")
    assert bbc.parse_ls_remote(out, "refs/heads/main") == "2" * 40
    assert bbc.parse_ls_remote(out, "refs/heads/nope") is None and bbc.parse_ls_remote("", "refs/heads/main") is None


def test_run_keys():
    assert bbc.run_key({"run": "12", "buildername": "3.13-fp", "buildnumber": 4}) == "12"   # triggered by matrix #12
    assert bbc.run_key({"run": "", "buildername": "3.13-fp", "buildnumber": 4}) == "3.13-fp-4"   # forced on its own


def test_a_report_forced_without_a_run_reports_the_newest(tmp_path):
    import os
    assert bbc.newest_run(tmp_path / "none") is None
    for i, name in enumerate(["3", "12", "3.13-fp-4"]):
        (tmp_path / name).mkdir()
        os.utime(tmp_path / name, (1000 + i * (1 if name != "12" else 100), 1000 + i * (1 if name != "12" else 100)))
    assert bbc.newest_run(tmp_path) == "12"


def test_collect_takes_the_runs_directory_only(tmp_path):
    for run, cell in [("5", "3.13-fp"), ("5", "3.11-fp"), ("6", "3.13-fp")]:
        (tmp_path / run / cell).mkdir(parents=True)
    (tmp_path / "5" / bbc.SKIPPED_FILE).write_text("{}")
    command = bbc._collect_uploads(str(tmp_path), "5", str(tmp_path / "in-5.tar"), ["3.13-fp", "3.9-fp"])
    assert command[-1].endswith(f"-C {tmp_path / '5'} -cf {tmp_path / 'in-5.tar'} --files-from=/dev/null "
                                f"3.13-fp {bbc.SKIPPED_FILE}")
    subprocess.run(command, check=True)
    listed = subprocess.run(["tar", "-tf", tmp_path / "in-5.tar"], capture_output=True, text=True).stdout.split()
    assert sorted(listed) == sorted(["3.13-fp/", bbc.SKIPPED_FILE])


@pytest.mark.parametrize("path, important", [
    ("docs/buildbot.md", False), ("README.md", False), ("docs/img/matrix.svg", False), ("BENCHMARKS.md", False),
    ("patches/3.13/series.md", True), ("patches/3.13/0001-fp.patch", True), ("matrix.yaml", True),
    ("cpython_perf/ci/plan.py", True), ("docker/Dockerfile", True), ("/docs/x.txt", False),
])
def test_documentation_only_files(path, important):
    assert bbc.is_important_file(path) is important


def test_a_documentation_only_commit_runs_nothing():
    class Change:
        def __init__(self, *files):
            self.files = list(files)
    assert not bbc.is_important_change(Change("docs/ci.md", "README.md"))
    assert bbc.is_important_change(Change("docs/ci.md", "matrix.yaml"))
    assert bbc.is_important_change(Change("patches/3.11/notes.md"))
    assert bbc.is_important_change(Change())   # files unknown: run it


def test_requests_collapse_only_within_a_run_or_selection():
    a = {"run": ("12", "Trigger"), "pytest_args": ("", "Trigger"), "cells": ("3.13-fp", "Trigger")}
    assert bbc.same_values(bbc.CELL_COLLAPSE_KEYS, a, dict(a))
    assert not bbc.same_values(bbc.CELL_COLLAPSE_KEYS, a, {**a, "run": ("13", "Trigger")})
    m = {"event": ("pull_request", "Force Build Form"), "labels": ("", "Force Build Form")}
    assert bbc.same_values(bbc.MATRIX_COLLAPSE_KEYS, m, {**m, "owner": ("x", "Force Build Form")})
    assert not bbc.same_values(bbc.MATRIX_COLLAPSE_KEYS, m, {**m, "select": ("cell:3.9-fp", "Force Build Form")})


def test_results_and_reports_are_keyed_by_run(full_plan):
    specs = {s.name: s for s in specs_for(full_plan)}
    report = {step.name: step for step in specs[bbc.REPORT_BUILDER].steps}
    assert report["upload report"].options["masterdest"] == "/srv/master/reports/%(prop:run)s"
    assert report["collect uploads"].command[:2] == ["collect", "/srv/master/results"]
    assert [s.kind for s in specs[bbc.MATRIX_BUILDER].steps][:3] == ["resolve", "trigger", "trigger"]
    assert specs["3.13-fp"].steps[1].kind == "run"


def test_reporter_and_janitor_settings(tmp_path):
    token = tmp_path / "token"
    token.write_text("ghp_file\n")
    got = bbc.parse_settings({**settings_data(), "github_status": {"token_file": str(token)},
                              "mail": {"from": "bb@example.org", "to": "team@example.org"},
                              "log_horizon_days": 30, "results_horizon_days": None, "offline_grace": 60},
                             "s", ENV)
    assert got.github_token == "ghp_file" and "ghp_file" not in repr(got)
    assert got.mail["to"] == ["team@example.org"] and got.log_horizon_days == 30 and got.offline_grace == 60
    assert [s.kind for s in bbc.matrix_builder(got).steps] == ["resolve", "trigger", "trigger"]   # no pruning
    got = bbc.parse_settings({**settings_data(), "github_status": {"token_env": "PW_X1"}}, "s", ENV)
    assert got.github_token == "x1-secret"
    for bad, problem in [({"github_status": {}}, "exactly one of token_env"),
                         ({"github_status": {"token_env": "NOPE"}}, "NOPE .*not set"),
                         ({"github_status": {"token": "inline"}}, "github_status is a mapping"),
                         ({"mail": {"from": "a@b"}}, "mail is a mapping with from and to"),
                         ({"mail": {"from": "a@b", "to": "c@d", "mode": "often"}}, "mail mode"),
                         ({"offline_grace": 0}, "offline_grace is a positive"),
                         ({"log_horizon_days": "forever"}, "log_horizon_days is a positive")]:
        with pytest.raises(bbc.BuildbotConfigError, match=problem):
            bbc.parse_settings({**settings_data(), **bad}, "s", ENV)


def test_the_report_says_which_cells_were_not_run_and_why(tmp_path):
    from cpython_perf.report.html_page import with_skipped_html
    from cpython_perf.report.markdown_page import skipped_markdown

    (tmp_path / "skipped.json").write_text(json.dumps({"3.13-fp-aarch64": "no connected worker (arm-1)"}))
    md = skipped_markdown(tmp_path)
    assert "## Not run" in md and "| 3.13-fp-aarch64 | not run: no connected worker (arm-1) |" in md
    page = with_skipped_html("<html><body><h1>x</h1></body></html>", tmp_path)
    assert page.endswith("</table></body></html>") and "not run: no connected worker (arm-1)" in page
    assert skipped_markdown(tmp_path / "none") == "" and with_skipped_html("<p/>", tmp_path / "n") == "<p/>"


def test_checkconfig_with_reporters(buildbot_venv, tmp_path):
    import os
    data = {**settings_data(), "github_status": {"token_env": "PW_X1", "context": "perf/%(prop:buildername)s"},
            "mail": {"from": "bb@example.org", "to": ["team@example.org"], "relayhost": "smtp.example.org"}}
    master = make_master(buildbot_venv, tmp_path / "master", data)
    proc = buildbot(buildbot_venv, "checkconfig", master)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    proc = subprocess.run([buildbot_venv / "bin" / "python", "-m", "cpython_perf", "buildbot-config", "describe",
                           master], capture_output=True, text=True, cwd=PROJECT_ROOT, env={**os.environ, **ENV},
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert [s["class"] for s in json.loads(proc.stdout)["services"]] == ["ReportsSite", "GitHubStatusPush",
                                                                        "MailNotifier"]

"""The CI plan (cpython_perf/ci/plan.py): selection, images, runners, sharding.  No Docker, no network."""

from __future__ import annotations

import dataclasses

import json
import shutil
import subprocess
import sys

import pytest
import yaml

from cpython_perf import cli
from cpython_perf.image import pipeline, render, tools
from cpython_perf.source import cell_source, patches, sources
from cpython_perf.ci import plan as ci_plan
from cpython_perf.ci.plan import PlanError, build_plan
from cpython_perf.arches import ARCH_FACTS
from cpython_perf.matrix import PROJECT_ROOT, load_matrix

MATRIX = load_matrix()
FULL_EVENTS = ("push", "schedule", "workflow_dispatch")


def cells_of(plan) -> list[str]:
    return [job["cell"] for job in plan["cells"]]


@pytest.fixture(scope="module")
def full_plan():
    return build_plan(MATRIX, "push")


# --------------------------------------------------------------------------
# selection


@pytest.mark.parametrize("event", FULL_EVENTS)
def test_full_plan_has_every_cell_exactly_once(event):
    names = cells_of(build_plan(MATRIX, event))
    assert sorted(names) == sorted(MATRIX.cells)
    assert len(names) == len(set(names)) == len(MATRIX.cells)


def test_pull_request_selection_is_smoke_cells():
    plan = build_plan(MATRIX, "pull_request")
    assert sorted(cells_of(plan)) == sorted(MATRIX.smoke_cells)
    assert plan["selection"]["why"] == {name: ["smoke_cells (pull request)"] for name in MATRIX.smoke_cells}


def test_labels_select_what_they_say():
    smoke = set(MATRIX.smoke_cells)
    plan = build_plan(MATRIX, "pull_request", labels="cell:3.9-O0")
    assert set(cells_of(plan)) == smoke | {"3.9-O0"}
    plan = build_plan(MATRIX, "pull_request", labels=["arch:aarch64"])
    assert set(cells_of(plan)) == smoke | {c.name for c in MATRIX.cells_of_arch("aarch64")}
    assert all("label arch:aarch64" in plan["selection"]["why"][c.name] for c in MATRIX.cells_of_arch("aarch64"))
    plan = build_plan(MATRIX, "pull_request", labels="all")
    assert sorted(cells_of(plan)) == sorted(MATRIX.cells)


def test_labels_as_github_json_and_foreign_labels_ignored():
    # the workflow passes toJSON(github.event.pull_request.labels.*.name); labels of other uses are not ours
    plan = build_plan(MATRIX, "pull_request", labels='["bug", "cell:3.12-fp", "needs: review"]')
    assert set(cells_of(plan)) == set(MATRIX.smoke_cells) | {"3.12-fp"}
    assert plan["selection"]["ignored_labels"] == ["bug", "needs: review"]
    for empty in ("", "null", "[]", None):   # a push has no pull_request.labels
        assert sorted(cells_of(build_plan(MATRIX, "pull_request", labels=empty))) == sorted(MATRIX.smoke_cells)


def test_select_replaces_the_events_choice():
    assert cells_of(build_plan(MATRIX, "workflow_dispatch", select="cell:3.13-fp")) == ["3.13-fp"]
    plan = build_plan(MATRIX, "push", select="arch:i386,cell:3.11-O0")
    assert set(cells_of(plan)) == {c.name for c in MATRIX.cells_of_arch("i386")} | {"3.11-O0"}


@pytest.mark.parametrize("kwargs, message", [
    ({"labels": "cell:3.13-fb"}, "label 'cell:3.13-fb': unknown cell '3.13-fb'"),
    ({"labels": "arch:arm64"}, "unknown arch 'arm64'"),
    ({"select": "cell:nope"}, "--select cell:nope: unknown cell 'nope'"),
    ({"select": "3.13-fp"}, "unknown selector '3.13-fp': use cell:<name>, arch:<arch> or all"),
    ({"event": "release"}, "unknown event 'release'"),
    ({"aarch64": "rosetta"}, "--aarch64 must be one of native, qemu"),
])
def test_unknown_selector_is_a_clear_error(kwargs, message):
    with pytest.raises(PlanError) as info:
        build_plan(MATRIX, **{"event": "pull_request", **kwargs})
    assert message in str(info.value)


@pytest.mark.parametrize("argv, message", [
    (["--labels", "cell:3.13-fpp"], "Did you mean: 3.13-fp"),
    (["--select", "arch:sparc"], "unknown arch 'sparc'"),
])
def test_cli_unknown_selector_exits_nonzero(capsys, argv, message):
    assert cli.main(["plan", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: ") and message in captured.err


def test_cli_prints_the_plan_and_github_outputs(capsys, tmp_path):
    out = tmp_path / "github_output"
    assert cli.main(["plan", "--event", "pull_request", "--labels", "cell:3.12-fp", "--github-output", str(out)]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert set(plan) >= {"images", "cells", "report"}
    lines = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert set(lines) == set(ci_plan.github_outputs(plan))
    assert [job["cell"] for job in json.loads(lines["cells_0"])] == cells_of(plan)
    assert json.loads(lines["report"]) == plan["report"]


# --------------------------------------------------------------------------
# jobs


def test_names_are_unique(full_plan):
    for key, jobs in (("name", full_plan["images"]), ("artifact", full_plan["images"]),
                      ("cell", full_plan["cells"]), ("results", full_plan["cells"]), ("session", full_plan["cells"])):
        values = [job[key] for job in jobs]
        assert len(values) == len(set(values)), key
    assert not {j["artifact"] for j in full_plan["images"]} & {j["results"] for j in full_plan["cells"]}


@pytest.mark.parametrize("aarch64", ci_plan.AARCH64_PLACEMENTS)
def test_runners(aarch64):
    plan = build_plan(MATRIX, "push", aarch64=aarch64)
    for job in plan["cells"]:
        machine, runs = ci_plan.RUNNERS[job["runner"]]
        assert job["runner_arch"] == machine
        if job["execution"] == "native":
            assert job["arch"] in runs   # i386 code runs natively on the x86_64 runner (the kernel's IA32)
            if ARCH_FACTS[job["arch"]].trampoline:
                assert job["runner_arch"] == job["arch"], job
        else:
            assert job["execution"] == "qemu" and job["runner_arch"] != job["arch"] and job["qemu_user"], job
        assert job["session"] == f"conformance-{job['cell']}" and job["results"] == f"results-{job['cell']}"
    aarch64_jobs = [job for job in plan["cells"] if job["arch"] == "aarch64"]
    assert aarch64_jobs and all(job["runner"] == (ci_plan.ARM_RUNNER if aarch64 == "native" else ci_plan.X86_RUNNER)
                                for job in aarch64_jobs)
    assert {job["runner"] for job in plan["cells"] if job["arch"] != "aarch64"} == {ci_plan.X86_RUNNER}
    # images are built where their cells run: aarch64's on the arm64 runner when placed natively (no
    # cross build), everything else on x86_64
    for job in plan["images"]:
        assert job["runner"] == ci_plan.NATIVE_RUNNER[job["host"]], job
        if job["arch"] == "aarch64" and aarch64 == "native":
            assert job["host"] == "aarch64" and job["group"] != "cross_images" and not job["qemu_user"], job
        elif job["kind"] != "tools":
            assert job["host"] == "x86_64", job


def test_images_each_once_and_in_build_order(full_plan):
    by_name = {job["name"]: job for job in full_plan["images"]}
    by_artifact = {job["artifact"]: job for job in full_plan["images"]}
    tools_images = {ci_plan.tools_name(ci_plan.build_host(a, full_plan["aarch64"])) for a in MATRIX.arches}
    assert {f"cell-{name}" for name in MATRIX.cells} | tools_images | {f"base-{a}" for a in MATRIX.arches} == set(by_name)
    order = {job["name"]: i for i, job in enumerate(full_plan["images"])}
    for job in full_plan["images"]:
        for need in job["needs"]:
            assert need in by_artifact and order[by_artifact[need]["name"]] < order[job["name"]]
            assert ci_plan.GROUPS.index(by_artifact[need]["group"]) < ci_plan.GROUPS.index(job["group"]), job
        assert job["artifact"] == f"image-{job['name']}-{job['digest'][:16]}"
        assert job["needs_pattern"] == ci_plan.pattern(job["needs"])
    native = by_name["cell-3.13-fp-aarch64"]   # on GitHub's arm64 runner: built there, no cross build
    assert native["group"] == "images" and not native["qemu_user"] and native["runner"] == ci_plan.ARM_RUNNER
    assert {by_artifact[a]["name"] for a in native["needs"]} == {"base-aarch64"}
    assert by_artifact[native["needs"][0]]["tag"] == render.host_base_image_tag(MATRIX.base_suite, "aarch64")
    emulated = {job["name"]: job for job in build_plan(MATRIX, "push", aarch64="qemu")["images"]}
    cross = emulated["cell-3.13-fp-aarch64"]
    assert cross["group"] == "cross_images" and cross["qemu_user"] and cross["runner"] == ci_plan.X86_RUNNER
    assert {by_artifact.get(a, {}).get("name") or next(j["name"] for j in emulated.values() if j["artifact"] == a)
            for a in cross["needs"]} == {"base-x86_64", "base-aarch64", "cell-3.13-fp"}
    assert cross["digest"] != native["digest"]   # cross-compiled and native builds are different images
    assert by_name["cell-3.13-release-i386"]["needs"] == [by_name["base-i386"]["artifact"]]
    for job in full_plan["cells"]:
        assert set(job["images"]) <= set(by_artifact)
        assert job["image_tags"] == [by_artifact[a]["tag"] for a in job["images"]]
    twin_user = next(job for job in full_plan["cells"] if job["cell"] == "3.11-fp")
    assert by_name["cell-3.11-fp-vanilla"]["artifact"] in twin_user["images"]   # CPython's tests compared with it
    assert full_plan["report"]["images"] == [by_name["tools"]["artifact"]]


def test_pull_request_builds_only_what_its_cells_need():
    plan = build_plan(MATRIX, "pull_request")
    names = {job["name"] for job in plan["images"]}
    expected = {"base-x86_64", "tools"}
    for cell in MATRIX.smoke_cells:
        expected.add(f"cell-{cell}")
        twin = MATRIX.vanilla_twin(MATRIX.cell(cell))
        if twin:
            expected.add(f"cell-{twin.name}")
    assert names == expected


def test_cell_digest_is_the_drivers(monkeypatch, tmp_path):
    """The plan's digest of a cell image is the label the driver builds it with (pipeline.cell_inputs, which
    fetches the source): an image loaded from the artifact is current for `nox -s conformance-<cell>`."""
    plan = build_plan(MATRIX, "push")
    by_name = {job["name"]: job for job in plan["images"]}
    fetched = []

    def fake_fetch(recipe, cache_dir=None, log=print):
        fetched.append(recipe.version)
        return tmp_path / recipe.filename

    monkeypatch.setattr(sources, "fetch_source", fake_fetch)
    monkeypatch.setattr(patches, "check_cell_series",
                        lambda read, source, root, log=print: dataclasses.replace(read, applied=0))   # nothing to apply to a fake tarball
    emulated = {job["name"]: job for job in build_plan(MATRIX, "push", aarch64="qemu")["images"]}
    for name, host, plan_images in (("3.13-fp", "x86_64", by_name), ("3.11-fp-vanilla", "x86_64", by_name),
                                    ("3.13-release-i386", "x86_64", by_name),
                                    ("3.13-fp-aarch64", "x86_64", emulated),    # cross-compiled, qemu
                                    ("3.13-fp-aarch64", "aarch64", by_name)):   # on an arm64 runner
        monkeypatch.setattr(cell_source, "HOST_ARCH", host)   # the driver as it runs on that runner
        inputs = pipeline.cell_inputs(MATRIX.cell(name), MATRIX.base_suite, matrix=MATRIX, log=lambda *_: None)
        assert plan_images[f"cell-{name}"]["digest"] == inputs.digest, (name, host)
    assert fetched   # the driver's path did fetch; the plan's did not


def test_tools_digest_is_the_drivers_with_the_workflows_archive(monkeypatch):
    monkeypatch.setenv(sources.DEBIAN_ARCHIVE_ENV, "http://archive.invalid/debian")
    tag = tools.tools_image_tag(tools.tools_dockerfile(MATRIX, "http://archive.invalid/debian"))
    job = next(j for j in build_plan(MATRIX, "pull_request")["images"] if j["name"] == "tools")
    assert job["tag"] == tag and job["digest"] == tag.split(":")[1]


@pytest.mark.parametrize("runner", ["ubuntu-24.04", "ubuntu-22.04"])
def test_with_no_archive_anywhere_the_plan_takes_mmdebstraps_default(monkeypatch, tmp_path, runner):
    """A fork's pull request on an Ubuntu runner: no repository variable, and the runner's apt files (as
    GitHub's images lay them out) name Ubuntu's archive and vendors' repositories, no Debian one.  The plan
    still runs, and its tools image is the one the image job builds with the default archive (the Dockerfile
    reads the archive from the base image's own sources), not the one of a named archive."""
    from tests.source.test_apt_archive import UBUNTU_2204, UBUNTU_2404, machine
    paths, lists = machine(tmp_path, UBUNTU_2404 if runner == "ubuntu-24.04" else UBUNTU_2204)
    monkeypatch.setattr(sources, "APT_SOURCE_FILES", paths)
    monkeypatch.setattr(sources, "APT_LISTS", lists)
    monkeypatch.delenv(sources.DEBIAN_ARCHIVE_ENV, raising=False)
    assert sources.debian_archive_uri() is None
    dockerfile = tools.tools_dockerfile(MATRIX, None)
    assert "/etc/apt/sources.list" in dockerfile and "deb None" not in dockerfile
    job = next(j for j in build_plan(MATRIX, "pull_request")["images"] if j["name"] == "tools")
    assert job["tag"] == tools.tools_image_tag(dockerfile)
    assert job["tag"] != tools.tools_image_tag(tools.tools_dockerfile(MATRIX, "http://archive.invalid/debian"))


def test_size_under_githubs_matrix_limit(full_plan):
    for key, members in full_plan["shards"].items():
        assert len(members) <= ci_plan.MAX_MATRIX_JOBS, key
    assert set(full_plan["shards"]) == {f"{g}_{i}" for g, n in ci_plan.SHARDS.items() for i in range(n)}
    assert sorted(m for k, v in full_plan["shards"].items() if k.startswith("cells_") for m in v) == sorted(MATRIX.cells)
    assert full_plan["counts"]["jobs"] == 2 + len(full_plan["images"]) + len(full_plan["cells"])


def test_plan_imports_no_docker():
    code = ("import sys; from cpython_perf.ci import plan; from cpython_perf.matrix import load_matrix; "
            "plan.build_plan(load_matrix(), 'push'); assert 'docker' not in sys.modules, 'docker imported'")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=PROJECT_ROOT)


# --------------------------------------------------------------------------
# sharding, with a synthetic matrix larger than GitHub's limit


def synthetic_matrix(tmp_path, cells: int):
    """A valid matrix.yaml of `cells` x86_64 cells (3.12, one variant each), with the real profilers: pins."""
    real = yaml.safe_load((PROJECT_ROOT / "matrix.yaml").read_text())
    (tmp_path / "recipes").mkdir()
    shutil.copy2(PROJECT_ROOT / "recipes" / "3.12.yaml", tmp_path / "recipes" / "3.12.yaml")
    variants = {f"v{i:04d}": {"description": f"synthetic {i}", "cflags": f"-O2 -DSYNTH={i}"} for i in range(cells)}
    data = {
        "smoke_cells": ["3.12-v0000"], "base_suite": real["base_suite"], "arches": ["x86_64"],
        "profilers": real["profilers"], "variants": variants,
        "versions": {"3.12": {"recipe": "recipes/3.12.yaml", "support": "native", "series": None,
                              "cells": {name: {"modes": ["perf"]} for name in variants}}},
    }
    (tmp_path / "matrix.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return load_matrix(tmp_path / "matrix.yaml")


def test_sharding_above_256_jobs(tmp_path):
    matrix = synthetic_matrix(tmp_path, 300)
    plan = build_plan(matrix, "schedule")
    assert len(plan["cells"]) == 300
    assert [len(plan["shards"][f"cells_{i}"]) for i in range(2)] == [256, 44]
    assert [len(plan["shards"][f"images_{i}"]) for i in range(2)] == [256, 45]   # 300 cells + tools
    assert sorted(m for i in range(2) for m in plan["shards"][f"cells_{i}"]) == sorted(matrix.cells)
    outputs = ci_plan.github_outputs(plan)
    assert [len(json.loads(outputs[f"cells_{i}"])) for i in range(2)] == [256, 44]
    assert json.loads(outputs["cross_images_0"]) == []


def test_too_many_jobs_for_the_declared_shards(tmp_path, monkeypatch):
    matrix = synthetic_matrix(tmp_path, 300)
    monkeypatch.setitem(ci_plan.SHARDS, "cells", 1)
    with pytest.raises(PlanError, match=r"300 jobs of cells need 2 matrices of at most 256 jobs; .* declares 1: add jobs cells-1"):
        build_plan(matrix, "push")
    assert cli.main(["--matrix", str(tmp_path / "matrix.yaml"), "plan", "--event", "push"]) == 2


def test_shard_edges():
    assert ci_plan.shard(list(range(256)), "cells") == [list(range(256)), []]
    assert ci_plan.shard(list(range(257)), "cells") == [list(range(256)), [256]]
    assert ci_plan.shard([], "cells") == [[], []]
    with pytest.raises(PlanError):
        ci_plan.shard(list(range(513)), "cells")


def test_download_pattern():
    assert ci_plan.pattern([]) == ""
    assert ci_plan.pattern(["image-tools-1"]) == "image-tools-1"
    assert ci_plan.pattern(["a-1", "b-2"]) == "{a-1,b-2}"

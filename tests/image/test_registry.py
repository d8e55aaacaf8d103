"""Published cell images without Docker: the registry reference, the tag scheme, the build-time labels, and that
nothing varying with the git revision reaches the inputs digest (tests/image/test_registry_container.py pushes and
pulls for real)."""

from __future__ import annotations

import dataclasses

import subprocess

import pytest

from cpython_perf.image import cell_image, labels, pipeline, registry, sbom
from cpython_perf.image.context import BuildContext
from cpython_perf.source import patches
from cpython_perf.ci import plan as ci_plan
from cpython_perf.cli import main
from cpython_perf.errors import DriverError
from cpython_perf.matrix import load_matrix

MATRIX = load_matrix()
QUIET = {"log": lambda *_: None}


def inputs_of(name: str, matrix=MATRIX) -> BuildContext:
    return pipeline.cell_inputs(matrix.cell(name), matrix.base_suite, matrix=matrix, fetch=False, **QUIET)


@pytest.mark.parametrize("value", ["127.0.0.1:5000/cpython-perf", "registry.example/owner", "registry.example/some-owner/sub/path",
                                   "localhost:5000", "registry.example/a_b", "[::1]:5000/x", "registry.example/owner/"])
def test_registry_references_accepted(value):
    assert registry.check_registry(value) == value.rstrip("/")


@pytest.mark.parametrize("value, problem", [
    ("http://127.0.0.1:5000/x", "without a scheme"),
    ("registry.example/Owner", "not a registry reference"),            # registries want lowercase
    ("registry.example/owner/cpython-perf:3.13-fp", "not a registry reference"),   # a tag
    ("registry.example/owner@sha256:00", "not a registry reference"),
    ("someone/cpython-perf", "names no registry host"),       # docker would take Docker Hub
    ("", "not a registry reference"),
])
def test_registry_references_refused_naming_the_fix(value, problem):
    with pytest.raises(DriverError) as info:
        registry.check_registry(value)
    assert problem in str(info.value) and registry.EXAMPLE in str(info.value)


def test_the_registry_comes_from_the_argument_then_the_environment_and_has_no_default():
    env = {registry.REGISTRY_ENV: "127.0.0.1:5000/from-env"}
    assert registry.configured_registry(None, {}) is None
    assert registry.configured_registry("", {registry.REGISTRY_ENV: "  "}) is None
    assert registry.configured_registry(None, env) == "127.0.0.1:5000/from-env"
    assert registry.configured_registry("registry.example/x", env) == "registry.example/x"
    with pytest.raises(DriverError, match=r"\$CPYTHON_PERF_REGISTRY 'nohost'"):
        registry.configured_registry(None, {registry.REGISTRY_ENV: "nohost"})


def test_the_published_tag_is_the_cell_and_its_inputs_digest():
    inputs = inputs_of("3.13-fp")
    ref = registry.published_ref("127.0.0.1:5000/x", "3.13-fp", inputs.digest)
    assert ref == f"127.0.0.1:5000/x/cpython-perf:3.13-fp-{inputs.digest}"
    with pytest.raises(DriverError, match="not an inputs digest"):
        registry.published_ref("registry.example/x", "3.13-fp", inputs.digest[:16])


def test_every_cell_of_the_plan_has_a_valid_published_tag_equal_to_the_drivers():
    """The workflow pulls and pushes the plan's registry_tag; the driver looks up published_ref: the same tag,
    within the registry's 128 characters, for every cell on either aarch64 placement."""
    for placement in ci_plan.AARCH64_PLACEMENTS:
        plan = ci_plan.build_plan(MATRIX, "schedule", aarch64=placement)
        for job in plan["images"]:
            assert len(job["registry_tag"].split(":", 1)[1]) <= registry.MAX_TAG, job["registry_tag"]
            if job["kind"] == "cell":
                assert "registry.example/o/" + job["registry_tag"] == registry.published_ref(
                    "registry.example/o", job["build_arg"], job["digest"])


def test_build_labels_name_the_source_the_series_and_the_revision():
    inputs = inputs_of("3.13-fp")
    env = {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": "someone/cpython-perf",
           "GITHUB_SHA": "0123456789abcdef0123456789abcdef01234567"}
    given = labels.build_labels(inputs, env)
    cell = inputs.cell
    assert given == {
        labels.CPYTHON_URL_LABEL: cell.recipe.url, labels.CPYTHON_SHA256_LABEL: cell.recipe.sha256,
        labels.SERIES_LABEL: labels.series_digest(cell),
        labels.SOURCE_LABEL: "https://github.com/someone/cpython-perf",
        labels.REVISION_LABEL: "0123456789abcdef0123456789abcdef01234567",
    }
    assert labels.INPUTS_LABEL not in given   # the Dockerfile's, never overridden at build time
    # the project's own variable wins; without either no source label (no repository host of the driver's own)
    assert labels.build_labels(inputs, {**env, labels.SOURCE_ENV: "https://example.org/p"})[labels.SOURCE_LABEL] \
        == "https://example.org/p"
    assert labels.SOURCE_LABEL not in labels.build_labels(inputs, {}, revision="")
    # a vanilla twin has no series
    assert labels.SERIES_LABEL not in labels.build_labels(inputs_of("3.13-fp-vanilla"), {}, revision="")


def test_the_series_digest_is_what_sha256sum_gives_in_the_series_directory():
    cell = MATRIX.cell("3.13-fp")
    shell = subprocess.run("sha256sum series $(sed 's/#.*//' series) | sha256sum", shell=True, cwd=cell.series.parent,
                           capture_output=True, text=True, check=True)
    assert labels.series_digest(cell) == shell.stdout.split()[0]
    assert labels.series_digest(MATRIX.cell("3.11-fp")) != labels.series_digest(cell)


def test_the_revision_is_github_sha_or_the_checkouts_head_marked_dirty(tmp_path):
    assert labels.project_revision({"GITHUB_SHA": "abc"}, tmp_path) == "abc"
    assert labels.project_revision({}, tmp_path / "nowhere") is None   # not a checkout: no label
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (tmp_path / "f").write_text("1")
    subprocess.run([*git, "add", "f"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "c"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    assert labels.project_revision({}, tmp_path) == head
    (tmp_path / "untracked").write_text("x")   # untracked files are not part of the build's revision
    assert labels.project_revision({}, tmp_path) == head
    (tmp_path / "f").write_text("2")
    assert labels.project_revision({}, tmp_path) == head + "-dirty"


def test_nothing_that_varies_with_the_revision_enters_the_inputs_digest(monkeypatch):
    """The revision and repository labels are given to docker build beside the Dockerfile: a new commit that
    changes no input keeps every cell's digest (its image, local or published, stays current)."""
    first = {name: inputs_of(name).digest for name in ("3.13-fp", "3.11-fp", "3.9-fp-vanilla")}
    for name, value in {"GITHUB_SHA": "f" * 40, "GITHUB_SERVER_URL": "https://github.com",
                        "GITHUB_REPOSITORY": "a/b", labels.SOURCE_ENV: "https://example.org/x"}.items():
        monkeypatch.setenv(name, value)
    assert {name: inputs_of(name).digest for name in first} == first
    dockerfile = inputs_of("3.13-fp").dockerfile(first["3.13-fp"])
    for label in (labels.SOURCE_LABEL, labels.REVISION_LABEL, labels.CPYTHON_URL_LABEL, labels.SERIES_LABEL):
        assert label not in dockerfile


def test_a_changed_input_changes_the_published_tag(project_copy):
    """Lookup is by inputs digest: an edited patch is a different tag, so an image of the old series is never
    pulled for the new one."""
    edited = load_matrix(project_copy / "matrix.yaml")
    series = edited.cell("3.13-fp").series
    first = series.parent / patches.read_series(series)[0].name
    first.write_text(first.read_text() + "\n")
    before, after = inputs_of("3.13-fp"), inputs_of("3.13-fp", edited)
    assert before.digest != after.digest
    assert registry.published_ref("registry.example/o", "3.13-fp", before.digest) != registry.published_ref(
        "registry.example/o", "3.13-fp", after.digest)


@pytest.mark.parametrize("argv, message", [
    (["build", "3.13-fp", "--registry", "http://127.0.0.1:5000/x"], "without a scheme"),
    (["build", "3.13-fp", "--if-stale", "--registry", "Upper.case/x"], "not a registry reference"),
    (["push", "3.13-fp"], "push needs a registry"),
    (["push", "3.13-fp", "--registry", "someone"], "names no registry host"),
])
def test_a_bad_registry_is_a_usage_error_before_docker_is_asked(monkeypatch, capsys, argv, message):
    monkeypatch.delenv(registry.REGISTRY_ENV, raising=False)
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")   # never reached
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err


@pytest.mark.parametrize("current, published_there, expected", [
    (True, True, ["current?"]),                              # a current local image: the registry is not asked
    (False, True, ["current?", "pull", "pulled"]),            # published: pulled, not built
    (False, False, ["current?", "pull", "fetch", "build", "sbom"]),   # neither: the source is fetched and built
])
def test_build_with_a_registry_decides_current_then_pulled_then_built(monkeypatch, current, published_there,
                                                                        expected):
    """The order `build CELL --registry REF` follows (the steps themselves run against a real engine and
    registry in tests/image/test_registry_container.py)."""
    from cpython_perf import host
    from cpython_perf.source import sources

    seen = []
    monkeypatch.setattr(host, "docker_client", lambda *a, **k: object())
    monkeypatch.setattr(labels, "image_is_current", lambda client, inputs: seen.append("current?") or current)
    monkeypatch.setattr(registry, "pull_published",
                        lambda client, inputs, where, log: seen.append("pull") or published_there)
    monkeypatch.setattr(sources, "fetch_source", lambda *a, **k: seen.append("fetch") or "Python-3.13.5.tar.xz")
    monkeypatch.setattr(patches, "check_cell_series",
                        lambda read, source, root, log=print: dataclasses.replace(read, applied=0))   # nothing to apply to a fake tarball
    monkeypatch.setattr(cell_image, "build_cell_image", lambda *a, **k: seen.append("build"))
    monkeypatch.setattr(sbom, "attach_sbom", lambda *a, **k: seen.append("sbom"))
    result = pipeline.build_cell(MATRIX.cell("3.13-fp"), MATRIX, log=lambda *_: None, registry="127.0.0.1:5000/x")
    if result["how"] == "pulled":
        seen.append("pulled")
    assert seen == expected
    assert result["how"] == {("current?",): "current", ("current?", "pull", "pulled"): "pulled"}.get(
        tuple(expected), "built")
    assert result["inputs"] == inputs_of("3.13-fp").digest


def test_build_without_a_registry_never_pulls(monkeypatch):
    from cpython_perf import host
    from cpython_perf.source import sources

    seen = []
    monkeypatch.delenv(registry.REGISTRY_ENV, raising=False)
    monkeypatch.setattr(host, "docker_client", lambda *a, **k: object())
    monkeypatch.setattr(registry, "pull_published", lambda *a, **k: seen.append("pull"))
    monkeypatch.setattr(sources, "fetch_source", lambda *a, **k: "Python-3.13.5.tar.xz")
    monkeypatch.setattr(patches, "check_cell_series",
                        lambda read, source, root, log=print: dataclasses.replace(read, applied=0))   # nothing to apply to a fake tarball
    monkeypatch.setattr(labels, "image_is_current", lambda client, inputs: False)   # no local image of them
    monkeypatch.setattr(cell_image, "build_cell_image", lambda *a, **k: seen.append("build"))
    monkeypatch.setattr(sbom, "attach_sbom", lambda *a, **k: seen.append("sbom"))
    assert pipeline.build_cell(MATRIX.cell("3.13-fp"), MATRIX, log=lambda *_: None)["how"] == "built"
    assert seen == ["build", "sbom"]


def test_the_budget_counts_base_layers_once_and_extrapolates_by_kind():
    """cpython_perf.ci.budget's arithmetic: a registry stores the base's layers once, a `docker save` file per
    image carries them again; kinds are extrapolated by their measured means."""
    from cpython_perf.ci import budget

    measured = {
        "cpython-perf-base:a": {"kind": "base", "save": 100, "layers": {"b": 120}},
        "cpython-perf-tools:t": {"kind": "tools", "save": 300, "layers": {"b": 120, "t": 250}},
        "cpython-perf:x": {"kind": "cell", "save": 200, "layers": {"b": 120, "x1": 10, "x2": 60}},
        "cpython-perf:y": {"kind": "cell", "save": 220, "layers": {"b": 120, "y1": 90}},
    }
    summary = budget.summarize(measured, {"base": 2, "tools": 1, "cell": 10})
    assert summary["measured"] == {"images": 4, "save_bytes": 820, "layer_bytes": 120 + 250 + 10 + 60 + 90}
    assert summary["per_kind"]["cell"] == {"measured": 2, "mean_save_bytes": 210, "mean_own_layer_bytes": 80}
    assert summary["extrapolated"] == {"save_bytes": 2 * 100 + 300 + 10 * 210, "layer_bytes": 2 * 120 + 250 + 10 * 80}
    assert "| extrapolated to a full run (2 base, 1 tools, 10 cell) | 13 |" in budget.table(summary)
    with pytest.raises(DriverError, match="no i386 image measured"):
        budget.summarize(measured, {"i386": 1})
    assert budget.plan_counts(MATRIX) == {"base": len(MATRIX.arches), "tools": 2, "cell": len(MATRIX.cells)}

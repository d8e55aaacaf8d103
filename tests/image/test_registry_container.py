"""Published cell images for real: Debian's docker-registry on loopback and the Docker engine (tests marked
`container`).

The images pushed here are small stand-ins built FROM scratch carrying a real cell's inputs label (the digest
`build` computes from this checkout), tagged `cpython-perf-regtest:*` so that the machine's own
`cpython-perf:<cell>` images are never touched; the driver's push and pull (cpython_perf.image.registry) treat
them as they treat a cell image: by that label.  Every tag and the registry are removed afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from cpython_perf.image import labels, pipeline, registry, sbom
from cpython_perf.image.cell_image import prepare_context
from cpython_perf.image.context import BuildContext
from cpython_perf.image.docker_build import docker_build
from cpython_perf.source import patches
from cpython_perf.matrix import PROJECT_ROOT, load_matrix

pytestmark = pytest.mark.container

MATRIX = load_matrix()
CELL = "3.9-fp"
TEST_REPOSITORY = "cpython-perf-regtest"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def local_registry(tmp_path_factory):
    """docker-registry serving on 127.0.0.1:<free port> from a temporary directory; yields host:port."""
    binary = shutil.which("docker-registry") or shutil.which("registry")
    if binary is None:
        pytest.skip("Debian's docker-registry is not installed (apt-get install docker-registry)")
    root = tmp_path_factory.mktemp("registry")
    port = free_port()
    (root / "config.yml").write_text(
        f"version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {root / 'store'}\n"
        f"  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n")
    with open(root / "registry.log", "wb") as log:
        process = subprocess.Popen([binary, "serve", str(root / "config.yml")], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"docker-registry did not start: {(root / 'registry.log').read_text()[-2000:]}")
                time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=30)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def tags(docker_client):
    """Tags a test makes, and any other cpython-perf-regtest tag a failing test left: each is removed afterwards,
    untagged only where the image has other tags (a real cell's image, pulled into a test tag, keeps its own),
    deleted with it where it has none."""
    made: list[str] = []
    yield made
    leftovers = [t for image in docker_client.images.list(name=TEST_REPOSITORY) for t in image.tags
                 if t.startswith(f"{TEST_REPOSITORY}:")]
    for ref in [*reversed(made), *leftovers]:
        assert not ref.startswith(("cpython-perf:", "cpython-perf-tools:", "cpython-perf-base:")), ref
        try:
            docker_client.images.remove(ref)
        except Exception:
            pass


def stand_in(client, tags: list, tag: str, inputs_digest: str, tmp_path: Path) -> str:
    """A small image FROM scratch labelled as a cell image of inputs_digest, tagged tag."""
    ctx = tmp_path / f"ctx-{len(tags)}"
    ctx.mkdir()
    (ctx / "payload").write_text(f"{tag} {inputs_digest} {time.time_ns()}\n")
    (ctx / "Dockerfile").write_text(f'FROM scratch\nCOPY payload /payload\nLABEL {labels.INPUTS_LABEL}="{inputs_digest}"\n')
    image, _ = client.images.build(path=str(ctx), tag=tag, rm=True, forcerm=True)
    tags.append(tag)
    return image.id


def cell_inputs(name: str = CELL, matrix=MATRIX) -> BuildContext:
    return pipeline.cell_inputs(matrix.cell(name), matrix.base_suite, log=lambda *_: None, matrix=matrix, fetch=False)


def registry_tags(host_port: str, repository: str) -> list[str]:
    try:
        with urllib.request.urlopen(f"http://{host_port}/v2/{repository}/tags/list", timeout=10) as answer:
            return json.load(answer).get("tags") or []
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return []
        raise


def test_push_then_pull_by_inputs_digest(docker_client, local_registry, tags, tmp_path):
    where = f"{local_registry}/pushpull"
    inputs = cell_inputs()
    local = f"{TEST_REPOSITORY}:{CELL}"
    built = stand_in(docker_client, tags, local, inputs.digest, tmp_path)
    said: list[str] = []
    pushed = registry.push_published(docker_client, inputs, where, said.append, local=local)
    ref = registry.published_ref(where, CELL, inputs.digest)
    assert pushed.startswith(f"{where}/cpython-perf@sha256:"), pushed
    assert registry_tags(local_registry, "pushpull/cpython-perf") == [f"{CELL}-{inputs.digest}"]
    assert said == [f"pushed {local} as {ref} ({pushed.split('@')[1]})"]
    assert not docker_client.images.list(name=ref.rsplit(":", 1)[0]), "the push's own tag is left behind"

    # pull: the image is gone here; the published one is found by the checkout's inputs digest
    docker_client.images.remove(local)
    pulled_as = f"{TEST_REPOSITORY}:{CELL}-pulled"
    tags.append(pulled_as)
    said.clear()
    assert registry.pull_published(docker_client, inputs, where, said.append, local=pulled_as) is True
    assert said == [f"pulled {ref} (inputs {inputs.digest}) instead of building"]
    image = docker_client.images.get(pulled_as)
    assert image.id == built and image.labels[labels.INPUTS_LABEL] == inputs.digest
    assert not docker_client.images.list(name=ref.rsplit(":", 1)[0]), "the pulled tag is left behind"

    # the manifest digest the push reported names the same image
    by_digest = docker_client.images.pull(pushed)
    tags.append(pushed)
    assert by_digest.id == built


def test_other_inputs_are_not_pulled(docker_client, local_registry, tags, tmp_path, project_copy):
    """A published image of the series before an edit is not taken for the edited series: its tag names the
    old digest, and the lookup by the new one finds nothing."""
    where = f"{local_registry}/changed"
    old = cell_inputs()
    stand_in(docker_client, tags, f"{TEST_REPOSITORY}:old", old.digest, tmp_path)
    registry.push_published(docker_client, old, where, lambda *_: None, local=f"{TEST_REPOSITORY}:old")
    edited = load_matrix(project_copy / "matrix.yaml")
    patch = patches.read_series(edited.cell(CELL).series)[0].path
    patch.write_text(patch.read_text() + "\n")
    new = cell_inputs(CELL, edited)
    assert new.digest != old.digest
    said: list[str] = []
    local = f"{TEST_REPOSITORY}:new"
    assert registry.pull_published(docker_client, new, where, said.append, local=local) is False
    assert said[0].startswith(f"no published image {registry.published_ref(where, CELL, new.digest)} (")
    assert said[0].endswith(f"; building {local} locally") and "manifest unknown" in said[0]
    assert not docker_client.images.list(name=TEST_REPOSITORY + ":new")


def test_an_image_of_other_inputs_under_the_tag_is_not_used(docker_client, local_registry, tags, tmp_path):
    """The label decides, not the tag: an image pushed by hand under the tag of other inputs is not used."""
    where = f"{local_registry}/mislabelled"
    inputs = cell_inputs()
    other = "0" * 64
    stand_in(docker_client, tags, f"{TEST_REPOSITORY}:other", other, tmp_path)
    ref = registry.published_ref(where, CELL, inputs.digest)
    docker_client.images.get(f"{TEST_REPOSITORY}:other").tag(*ref.rsplit(":", 1))
    tags.append(ref)
    for chunk in docker_client.images.push(ref.rsplit(":", 1)[0], tag=ref.rsplit(":", 1)[1], stream=True, decode=True):
        assert "error" not in chunk, chunk
    docker_client.images.remove(ref)
    said: list[str] = []
    local = f"{TEST_REPOSITORY}:mislabelled"
    assert registry.pull_published(docker_client, inputs, where, said.append, local=local) is False
    assert said == [f"{ref} carries inputs {other}, not {inputs.digest}: not used; building {local} locally"]
    assert not docker_client.images.list(name=f"{TEST_REPOSITORY}:mislabelled")
    assert not docker_client.images.list(name=ref.rsplit(":", 1)[0])


def test_an_unreachable_registry_falls_back_to_a_local_build(docker_client, tags):
    closed = f"127.0.0.1:{free_port()}/nothing"   # nothing listens there
    inputs = cell_inputs()
    said: list[str] = []
    local = f"{TEST_REPOSITORY}:unreachable"
    started = time.monotonic()
    assert registry.pull_published(docker_client, inputs, closed, said.append, local=local) is False
    assert time.monotonic() - started < 60
    [line] = said
    assert line.startswith(f"registry {closed} did not answer (") and "connection refused" in line
    assert line.endswith(f"; building {local} locally")


def test_push_refuses_a_missing_or_stale_image(docker_client, local_registry, tags, tmp_path):
    where = f"{local_registry}/stale"
    inputs = cell_inputs()
    local = f"{TEST_REPOSITORY}:stale"
    with pytest.raises(registry.DriverError, match=f"{local} does not exist: build it first"):
        registry.push_published(docker_client, inputs, where, local=local)
    stand_in(docker_client, tags, local, "1" * 64, tmp_path)
    with pytest.raises(registry.DriverError, match=f"{local} is stale: its inputs label is 1{{64}}"):
        registry.push_published(docker_client, inputs, where, local=local)
    assert registry_tags(local_registry, "stale/cpython-perf") == []


def test_a_push_to_a_closed_port_is_a_runtime_failure(docker_client, tags, tmp_path):
    inputs = cell_inputs()
    local = f"{TEST_REPOSITORY}:closed"
    stand_in(docker_client, tags, local, inputs.digest, tmp_path)
    closed = f"127.0.0.1:{free_port()}/nothing"
    with pytest.raises(registry.PushFailed, match="connection refused") as info:
        registry.push_published(docker_client, inputs, closed, local=local)
    assert info.value.exit_code == 1
    assert not docker_client.images.list(name=f"{closed}/cpython-perf"), "the push's own tag is left behind"


def test_build_labels_reach_the_image_without_changing_its_inputs_label(docker_client, tags, tmp_path):
    """The driver's docker build adds the revision, repository, source and series labels beside the
    Dockerfile's inputs label (which stays the one the digest was computed for)."""
    inputs = cell_inputs()
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "payload").write_text("x\n")
    (ctx / "Dockerfile").write_text(f'FROM scratch\nCOPY payload /payload\nLABEL {labels.INPUTS_LABEL}="{inputs.digest}"\n')
    given = labels.build_labels(inputs, {"GITHUB_SERVER_URL": "https://example.org", "GITHUB_REPOSITORY": "o/p",
                                         "GITHUB_SHA": "a" * 40})
    tag = f"{TEST_REPOSITORY}:labels"
    tags.append(tag)
    docker_build(docker_client, ctx, tag, lambda *_: None, labels=given)
    found = docker_client.images.get(tag).labels
    assert found == {labels.INPUTS_LABEL: inputs.digest, **given}
    assert found[labels.REVISION_LABEL] == "a" * 40 and found[labels.SOURCE_LABEL] == "https://example.org/o/p"


def test_the_workflows_pull_script_pulls_what_is_published_and_lists_the_rest(docker_client, local_registry, tags,
                                                                               tmp_path):
    """.ci/pull-published, as the cell and image jobs run it: a published image is pulled and tagged as the
    driver names it; one that is not is listed for the run's artifacts."""
    where = f"{local_registry}/script"
    inputs = cell_inputs()
    built = stand_in(docker_client, tags, f"{TEST_REPOSITORY}:src", inputs.digest, tmp_path)
    registry.push_published(docker_client, inputs, where, lambda *_: None, local=f"{TEST_REPOSITORY}:src")
    tags.append(f"{TEST_REPOSITORY}:pulled-by-script")
    env = dict(os.environ, REGISTRY=where.upper(),   # the script lowercases it: a GitHub owner may have capitals
               ARTIFACTS="image-cell-a image-cell-b",
               TAGS=f"{TEST_REPOSITORY}:pulled-by-script {TEST_REPOSITORY}:never",
               PUBLISHED=f"{registry.published_tag(CELL, inputs.digest)} cpython-perf:{CELL}-{'2' * 64}")
    done = subprocess.run([str(PROJECT_ROOT / ".ci" / "pull-published")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["missing=image-cell-b", "pattern=image-cell-b"], done.stdout + done.stderr
    assert docker_client.images.get(f"{TEST_REPOSITORY}:pulled-by-script").id == built
    assert not docker_client.images.list(name=f"{TEST_REPOSITORY}:never")
    # nothing answers: every image is listed, and the script does not fail
    env["REGISTRY"] = f"127.0.0.1:{free_port()}/x"
    done = subprocess.run([str(PROJECT_ROOT / ".ci" / "pull-published")], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["missing=image-cell-a image-cell-b", "pattern={image-cell-a,image-cell-b}"]


def test_build_with_a_registry_uses_a_current_local_image_without_asking_it(tmp_path):
    """`python -m cpython_perf build CELL --registry REF` as a user runs it: where the machine's image of the cell
    is current, nothing is pulled or built (the registry given does not even answer)."""
    from cpython_perf import host

    inputs = cell_inputs()
    if not labels.image_is_current(host.docker_client(), inputs):
        pytest.skip(f"cpython-perf:{CELL} is not current here (build it first); this test only reads it")
    closed = f"127.0.0.1:{free_port()}/nothing"
    done = subprocess.run([sys.executable, "-m", "cpython_perf", "build", CELL, "--registry", closed], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT)))
    assert done.returncode == 0, done.stderr
    assert (f"cpython-perf:{CELL} is current (its label org.cpython-perf.inputs is these inputs' digest "
            f"{inputs.digest}): used as it is, not pulled or built") in done.stdout


def built_here(client, name: str):
    """The machine's current image of a cell, built here (its build cache present), or skip saying why."""
    import docker.errors

    cell = MATRIX.cell(name)
    try:
        image = client.images.get(cell.image)
    except docker.errors.ImageNotFound:
        pytest.skip(f"{cell.image} does not exist here (build it first); this test only reads it")
    if not labels.image_is_current(client, cell_inputs(name)):
        pytest.skip(f"{cell.image} is not current here (build it first); this test only reads it")
    return image


def test_a_real_cell_image_round_trips_through_push_and_pull(docker_client, local_registry, tags):
    """`python -m cpython_perf push` of a real cell image, as a user runs it, then the driver's pull of the
    published tag into a test tag: the same image, found by the checkout's inputs digest."""
    image = built_here(docker_client, CELL)
    where = f"{local_registry}/real"
    done = subprocess.run([sys.executable, "-m", "cpython_perf", "push", CELL, "--registry", where],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900,
                          env=dict(os.environ, PYTHONPATH=str(PROJECT_ROOT)))
    assert done.returncode == 0, done.stderr
    inputs = cell_inputs()
    assert done.stdout.splitlines()[-1].startswith(f"{where}/cpython-perf@sha256:"), done.stdout
    assert registry_tags(local_registry, "real/cpython-perf") == [f"{CELL}-{inputs.digest}"]
    assert docker_client.images.get(MATRIX.cell(CELL).image).id == image.id, "push changed the cell's image"
    local = f"{TEST_REPOSITORY}:{CELL}-real"
    tags.append(local)
    said: list[str] = []
    assert registry.pull_published(docker_client, inputs, where, said.append, local=local) is True
    assert said == [f"pulled {registry.published_ref(where, CELL, inputs.digest)} (inputs {inputs.digest}) "
                    "instead of building"]
    assert docker_client.images.get(local).id == image.id


def test_a_real_cell_build_carries_the_build_labels_and_keeps_its_layers(docker_client, tags):
    """The driver's build of a real cell from its build cache (its image was built here): the build-time labels
    are added, the inputs label is the digest, and the layers are the image's own: a new revision label
    rebuilds nothing."""
    import tempfile

    from cpython_perf.errors import SourceUnavailable

    image = built_here(docker_client, CELL)
    if not image.attrs.get("Parent"):
        pytest.skip(f"{image.tags[0]} was not built here (no build cache): this would be a full build")
    try:
        inputs = pipeline.cell_inputs(MATRIX.cell(CELL), MATRIX.base_suite, log=lambda *_: None, matrix=MATRIX)
    except SourceUnavailable as exc:
        pytest.skip(f"the cell's source cannot be had here: {exc}")
    given = labels.build_labels(inputs, {"GITHUB_SERVER_URL": "https://example.org", "GITHUB_REPOSITORY": "o/p",
                                         "GITHUB_SHA": "b" * 40})
    tag = f"{TEST_REPOSITORY}:{CELL}-labels"
    tags.append(tag)
    with tempfile.TemporaryDirectory(prefix="cpython-perf-regtest-") as ctx:
        prepare_context(inputs, Path(ctx))
        docker_build(docker_client, Path(ctx), tag, lambda *_: None, labels=given)
    built = docker_client.images.get(tag)
    assert built.labels[labels.INPUTS_LABEL] == inputs.digest
    assert {k: built.labels[k] for k in given} == given
    assert built.labels[labels.SERIES_LABEL] == labels.series_digest(MATRIX.cell(CELL))
    own = image.attrs["RootFS"]["Layers"]
    if image.labels.get(sbom.SBOM_LABEL):
        own = own[:-1]   # the SBOM's layer, added on top after the build (sbom.attach_sbom)
    assert built.attrs["RootFS"]["Layers"] == own

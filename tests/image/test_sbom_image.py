"""The SBOM a real cell image carries (container): the one the build attached at sbom.IMAGE_SBOM_PATH, its label, the
library's JSON-schema validation, and its Debian packages against `dpkg-query -W` run in the image.

The image is the smoke cell's, built first when it is missing or stale (as the conformance suite does);
CPYTHON_PERF_SBOM_TEST_IMAGE=IMAGE checks another image built from the same cell's inputs instead (e.g. the
reproducibility check's cpython-perf-repro:<cell>-a, kept with --keep)."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("cyclonedx.validation.json", reason="cyclonedx-python-lib is a dependency of cpython-perf: "
                                                        "pip install -e . installs it")

from cpython_perf.image import pipeline, sbom
from cpython_perf.matrix import load_matrix  # noqa: E402

MATRIX = load_matrix()
CELL = os.environ.get("CPYTHON_PERF_SBOM_TEST_CELL", MATRIX.smoke_cells[0])
IMAGE_ENV = "CPYTHON_PERF_SBOM_TEST_IMAGE"

pytestmark = pytest.mark.container


@pytest.fixture(scope="module")
def image(docker_client) -> str:
    cell = MATRIX.cell(CELL)
    if os.environ.get(IMAGE_ENV):
        return os.environ[IMAGE_ENV]
    return pipeline.ensure_cell_image(cell, MATRIX, log=lambda line: None)


def _dpkg_query(client, image: str) -> set[tuple[str, str, str]]:
    out = client.containers.run(image, ["dpkg-query", "-W", "-f", "${db:Status-Abbrev}\t${Package}\t${Version}\t"
                                        "${Architecture}\n"], remove=True, entrypoint=[])
    rows = [line.split("\t") for line in out.decode().splitlines()]
    return {(name, version, arch) for status, name, version, arch in rows if status.startswith("ii")}


def test_image_packages_are_what_dpkg_query_lists(docker_client, image):
    listed = _dpkg_query(docker_client, image)
    read = {(p.name, p.version, p.arch) for p in sbom.image_packages(docker_client, image)}
    assert len(listed) > 50 and read == listed


def test_image_carries_its_valid_sbom_with_every_package(docker_client, image):
    label, text = sbom.image_sbom(docker_client, image)
    assert text is not None, f"{image} has no {sbom.IMAGE_SBOM_PATH} (label {sbom.SBOM_LABEL}: {label})"
    assert label == sbom.label_value(text)
    assert sbom.validate(text) is None
    doc = json.loads(text)
    cell = MATRIX.cell(CELL)
    inputs = pipeline.cell_inputs(cell, MATRIX.base_suite, None, lambda *_: None, MATRIX)
    props = {p["name"]: p["value"] for p in doc["metadata"]["component"]["properties"]}
    assert props["cpython-perf:inputs-digest"] == inputs.digest
    debs = {(c["name"], c["version"]) for c in doc["components"] if c.get("purl", "").startswith("pkg:deb/")}
    assert debs == {(name, version) for name, version, _ in _dpkg_query(docker_client, image)}
    # the document is what the driver makes of this image now: deterministic, nothing stale
    assert text == sbom.cell_bom(sbom.cell_facts(inputs, sbom.image_packages(docker_client, image),
                                                 distro=sbom.distro_of(MATRIX.base_suite)))

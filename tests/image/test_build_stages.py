"""build_cell takes a cell down the stages one after the other, each once: the source (fetched, verified, its
series checked), the build context, the image, its SBOM; the context the source stage's value gives is the one
the image and the SBOM are made from.  No Docker, no network: fetching, applying the series, the image and the
SBOM are replaced by stand-ins that note their call."""

from __future__ import annotations

import dataclasses

import pytest

from cpython_perf import host
from cpython_perf.image import cell_image, context, labels, pipeline, sbom
from cpython_perf.matrix import load_matrix
from cpython_perf.source import patches, sources

MATRIX = load_matrix()


@pytest.fixture
def stages(monkeypatch, tmp_path):
    """The stages build_cell calls, each noting its call in the list returned (the source stage: `source`, or
    `source (pins)` for the look-up by digest that fetches nothing)."""
    calls: list[str] = []
    made: dict[str, object] = {}
    real_source, real_context = pipeline.cell_source, context.cell_context

    def source(cell, matrix=None, cache_dir=None, log=print, *, fetch=True, host=None):
        calls.append("source" if fetch else "source (pins)")
        return real_source(cell, matrix, cache_dir, log, fetch=fetch, host=host)

    def build_context(cell_source, suite):
        calls.append("context")
        made["context"] = real_context(cell_source, suite)
        return made["context"]

    def image(client, inputs, suite, log=print, base_mode=None, no_cache=False, **build):
        calls.append("image")
        made["image"] = inputs
        return inputs.cell.image

    def attach(client, inputs, tag, suite, log=print, save=True):
        calls.append("sbom")
        made["sbom"] = (inputs, tag, save)
        return "sha256:attached"

    tarball = tmp_path / "Python.tar.xz"
    tarball.write_bytes(b"not read")
    monkeypatch.setattr(sources, "fetch_source", lambda recipe, cache_dir=None, log=print: tarball)
    monkeypatch.setattr(patches, "check_cell_series",
                        lambda read, source, root, log=print: dataclasses.replace(read, applied=0))
    monkeypatch.setattr(host, "docker_client", lambda *a, **k: object())
    monkeypatch.setattr(pipeline, "cell_source", source)
    monkeypatch.setattr(context, "cell_context", build_context)
    monkeypatch.setattr(cell_image, "build_cell_image", image)
    monkeypatch.setattr(sbom, "attach_sbom", attach)
    monkeypatch.setattr(labels, "image_is_current", lambda client, inputs: calls.append("current?") or False)
    return calls, made


def test_build_cell_runs_source_context_image_sbom_once_each_in_order(stages):
    calls, made = stages
    result = pipeline.build_cell(MATRIX.cell("3.13-fp"), MATRIX, log=lambda *_: None, no_cache=True)
    assert calls == ["source", "context", "image", "sbom"]
    inputs = made["context"]
    assert made["image"] is inputs and made["sbom"] == (inputs, "cpython-perf:3.13-fp", True)
    assert inputs.source.verified and inputs.series.applied == 0
    assert result["how"] == "built" and result["inputs"] == inputs.digest


def test_without_no_cache_the_look_up_by_digest_fetches_nothing_before_the_stages(stages):
    """The image of the same inputs is looked for first, its digest from the pins alone; none here, no
    registry: then the stages, each once."""
    calls, made = stages
    result = pipeline.build_cell(MATRIX.cell("3.13-fp"), MATRIX, log=lambda *_: None)
    assert calls == ["source (pins)", "context", "current?", "source", "context", "image", "sbom"]
    assert result["how"] == "built" and result["inputs"] == made["context"].digest


def test_a_cross_build_makes_its_build_python_image_first(stages, monkeypatch):
    """A cross-compiled cell's build Python image is a stage of its build: missing, it is made (image and SBOM)
    before the cell's own, from the context the cell's carries."""
    from cpython_perf.arches import HOST_ARCH

    cell = MATRIX.cell("3.13-fp-aarch64")
    if not cell.foreign_on(HOST_ARCH):
        pytest.skip("aarch64 is this host's own arch: no cross build")
    calls, made = stages
    pipeline.build_cell(cell, MATRIX, log=lambda *_: None, no_cache=True)
    build_python = made["context"].build_python
    assert build_python is not None
    # its context holds its build Python's (context twice); that image is not current here
    assert calls == ["source", "context", "context", "current?", "image", "sbom", "image", "sbom"]
    assert made["sbom"][0] is made["context"] and made["image"] is made["context"]

"""An image whose inputs label matches is used as it is: the source is not fetched (python.org may be down)."""
from cpython_perf.image import cell_image, labels, pipeline
from cpython_perf import host
from cpython_perf.source import sources
from cpython_perf.errors import SourceUnavailable
from cpython_perf.matrix import load_matrix

MATRIX = load_matrix()


def _unreachable(*_args, **_kw):
    raise SourceUnavailable("python.org: unreachable")


def test_a_current_image_is_trusted_without_fetching(monkeypatch):
    cell = MATRIX.cell("3.13-fp")
    digest = pipeline.cell_inputs(cell, MATRIX.base_suite, log=lambda *_: None, matrix=MATRIX, fetch=False).digest
    monkeypatch.setattr(sources, "fetch_source", _unreachable)
    monkeypatch.setattr(host, "docker_client", lambda *a, **k: object())
    seen = []
    monkeypatch.setattr(labels, "image_is_current", lambda client, inputs: seen.append(inputs.digest) or True)
    monkeypatch.setattr(cell_image, "build_cell_image", lambda *a, **k: seen.append("built"))
    assert pipeline.ensure_cell_image(cell, MATRIX, log=lambda *_: None) == cell.image
    assert seen == [digest]


def test_a_stale_image_fetches_and_says_when_it_cannot(monkeypatch):
    cell = MATRIX.cell("3.13-fp")
    monkeypatch.setattr(sources, "fetch_source", _unreachable)
    monkeypatch.setattr(host, "docker_client", lambda *a, **k: object())
    monkeypatch.setattr(labels, "image_is_current", lambda client, inputs: False)
    try:
        pipeline.ensure_cell_image(cell, MATRIX, log=lambda *_: None)
    except SourceUnavailable as exc:
        assert "unreachable" in str(exc)
    else:
        raise AssertionError("a stale image was not rebuilt from the source")

"""The seed flame graphs (cpython_perf.report.seed_flamegraphs) and the SVG read back
(cpython_perf.report.flamegraph_svg), with a renderer standing in for inferno."""

from __future__ import annotations

from cpython_perf.check import suite_results
from cpython_perf.matrix import load_matrix
from cpython_perf.report import flamegraph_svg, pipeline, seed_flamegraphs

from tests.report.junit_files import case, junit

MATRIX = load_matrix()


def _svg_frame(name: str, y: int, x: int, w: int) -> str:
    """One frame as inferno writes it (title with the escaped name, rect with fg:x / fg:w sample positions)."""
    from html import escape
    return (f'<g><title>{escape(name)} ({w} samples, 1.00%)</title><rect x="0%" y="{y}" width="1%" height="15" '
            f'fill="rgb(1,2,3)" fg:x="{x}" fg:w="{w}"/><text x="0" y="0"></text></g>')


FOO, BAR = seed_flamegraphs.SEED_NESTING


def _svg(*frames) -> str:
    return "<svg>" + "".join(_svg_frame(*f) for f in frames) + "</svg>"


def test_svg_nesting_needs_foo_above_bar_and_inside_its_span():
    nested = _svg(("main", 100, 0, 10), (BAR, 68, 0, 8), ("_PyEval_EvalFrameDefault", 52, 0, 8), (FOO, 36, 1, 7))
    assert flamegraph_svg.svg_nests(nested, FOO, BAR)
    assert not flamegraph_svg.svg_nests(nested, BAR, FOO)                                   # bar is below foo
    assert not flamegraph_svg.svg_nests(_svg((BAR, 68, 0, 4), (FOO, 36, 4, 4)), FOO, BAR)   # beside, not inside
    assert not flamegraph_svg.svg_nests(_svg((FOO, 36, 0, 4)), FOO, BAR)                    # no bar at all
    assert flamegraph_svg.svg_frames(_svg(("py::<module>:/src/script.py", 5, 0, 1)))[0][0] == "py::<module>:/src/script.py"


def test_flame_graph_is_rendered_checked_and_linked(tmp_path):
    junit(tmp_path / "3.13-fp" / "junit.xml", case("test_seed_chain[3.13-fp-perf-xoption]"))
    junit(tmp_path / "3.13-O0" / "junit.xml", case("test_seed_chain[3.13-O0-perf-xoption]"))
    (tmp_path / "3.13-fp" / suite_results.SEED_PERF_SCRIPT).write_text("perf script text\n")
    seen = []

    def renderer(source, svg, title):
        seen.append((source.read_text(), title))
        svg.write_text(_svg((BAR, 68, 0, 8), (FOO, 36, 0, 8)))

    md, page = pipeline.write_report(tmp_path, MATRIX, renderer=renderer)
    assert seen == [("perf script text\n", "3.13-fp: the seed script")]
    row = next(line for line in md.read_text().splitlines() if line.startswith("| 3.13-fp | "))
    assert f"[svg](3.13-fp/{seed_flamegraphs.SEED_FLAMEGRAPH}): {FOO} under {BAR}" in row
    row = next(line for line in md.read_text().splitlines() if line.startswith("| 3.13-O0 | "))
    assert "no seed perf script output" in row
    assert f"href='3.13-fp/{seed_flamegraphs.SEED_FLAMEGRAPH}'" in page.read_text()


def test_flame_graph_that_lacks_the_nesting_says_so(tmp_path):
    (tmp_path / "3.13-fp").mkdir()
    (tmp_path / "3.13-fp" / suite_results.SEED_PERF_SCRIPT).write_text("x\n")
    out = seed_flamegraphs.render_flamegraphs(tmp_path, ["3.13-fp"],
                                    lambda source, svg, title: svg.write_text(_svg((FOO, 68, 0, 8), (BAR, 36, 0, 8))))
    assert out == {"3.13-fp": (f"3.13-fp/{seed_flamegraphs.SEED_FLAMEGRAPH}", f"does NOT show {FOO} under {BAR}")}


def test_flame_graph_reasons_when_renderer_missing_or_failing(tmp_path):
    (tmp_path / "3.13-fp").mkdir()
    (tmp_path / "3.13-fp" / suite_results.SEED_PERF_SCRIPT).write_text("x\n")
    assert seed_flamegraphs.render_flamegraphs(tmp_path, ["3.13-fp", "3.13-O0"], "Docker is not available") == {
        "3.13-fp": (None, "no renderer: Docker is not available")}

    def failing(source, svg, title):
        svg.write_text("half")
        raise RuntimeError("cpython-perf-flamegraph failed (exit 101): no stack in the input")

    [(svg, note)] = seed_flamegraphs.render_flamegraphs(tmp_path, ["3.13-fp"], failing).values()
    assert svg is None and note == "renderer failed: cpython-perf-flamegraph failed (exit 101): no stack in the input"
    assert not (tmp_path / "3.13-fp" / seed_flamegraphs.SEED_FLAMEGRAPH).exists()

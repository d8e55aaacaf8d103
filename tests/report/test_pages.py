"""report.md and report.html (cpython_perf.report.markdown_page, html_page) as write_report and
`python -m cpython_perf report` write them."""

from __future__ import annotations

from cpython_perf.matrix import load_matrix
from cpython_perf.report import commands, html_page, junit_results, markdown_page, model, pipeline, results_files

from tests.report.junit_files import SKIP, case, junit

MATRIX = load_matrix()


def test_every_matrix_cell_is_a_row_even_when_never_run(tmp_path):
    junit(tmp_path / "3.13-fp" / "junit.xml", case("test_variant_flags[3.13-fp]", cls="conformance.test_build_shape"))
    md, page = pipeline.write_report(tmp_path, MATRIX)
    text, markup = md.read_text(), page.read_text()
    for cell in MATRIX.cells:
        assert f"| {cell} |" in text, cell
        assert f"<td>{cell}</td>" in markup, cell
    row = next(line for line in text.splitlines() if line.startswith("| 3.11-fp | "))
    assert "not run" in row
    row = next(line for line in text.splitlines() if line.startswith("| 3.13-fp | "))
    assert "| passed |" in row


def test_skip_reason_and_properties_are_shown(tmp_path):
    junit(tmp_path / "a" / "junit.xml", "\n".join([
        case("test_seed_chain[3.13-fp-perf-xoption]", props={"chain_fraction": "0.9731", "perf_version": "6.12.43",
                                                             "kernel_version": "6.18.0"}),
        case("test_seed_chain[3.12-fp-perf-xoption]", body=SKIP),
    ]))
    rep = model.build_report(MATRIX, junit_results.latest_results(tmp_path))
    md, page = markdown_page.render_markdown(rep), html_page.render_html(rep)
    grid_row = [line for line in md.splitlines() if line.startswith("| 3.12-fp | ")][1]
    assert "skip [1]" in grid_row and "pass" not in grid_row
    assert "1. 3.12-fp test_seed_chain[perf-xoption]: skip: 3.12-fp: source not available here" in md
    assert "chain_fraction=0.9731" in md and "chain_fraction=0.9731" in page
    assert rep.versions("3.13-fp") == {"perf_version": "6.12.43", "kernel_version": "6.18.0",
                                       "perf_event": "not recorded"}
    assert rep.versions("3.12-fp") == {"perf_version": "not recorded", "kernel_version": "not recorded",
                                       "perf_event": "not recorded"}
    assert "source not available here" in page


def test_the_sampling_event_is_shown_per_cell(tmp_path):
    """The event the host's probe chose (cpython_perf.record.perf_event) is the `event` column of each cell's row, in
    the Markdown, the HTML and the cell's consolidated JUnit file."""
    fallback = "cpu-clock (default: 0 samples)"
    junit(tmp_path / "a" / "junit.xml", "\n".join([
        case("test_seed_chain[3.13-fp-perf-xoption]", props={"perf_event": fallback}),
        case("test_seed_chain[3.13-fp-perf-env]", props={"perf_event": fallback}),
        case("test_seed_chain[3.12-fp-perf-xoption]", props={"perf_event": "default (cycles:P)"}),
    ]))
    md, page = pipeline.write_report(tmp_path, MATRIX, renderer="none here")
    text, markup = md.read_text(), page.read_text()
    header = next(line for line in text.splitlines() if line.startswith("| cell | status |"))
    assert "| perf | kernel | event |" in header
    row = next(line for line in text.splitlines() if line.startswith("| 3.13-fp | "))
    assert f"| {fallback} |" in row
    row = next(line for line in text.splitlines() if line.startswith("| 3.12-fp | "))
    assert "| default (cycles:P) |" in row
    assert "<th>event</th>" in markup and f"<td>{fallback}</td>" in markup
    cell_file = (tmp_path / results_files.CELL_JUNIT_DIR / "3.13-fp.xml").read_text()
    assert f'name="perf_event" value="{fallback}"' in cell_file


def test_the_header_names_the_results_directory_read(tmp_path):
    junit(tmp_path / "elsewhere" / "3.13-fp" / "junit.xml", case("test_seed_chain[3.13-fp-perf-xoption]"))
    md, page = pipeline.write_report(tmp_path / "elsewhere", MATRIX, renderer="none here")
    where = str((tmp_path / "elsewhere").resolve())
    assert f"from the JUnit files under {where}; no plan.json there" in md.read_text()
    assert where in page.read_text()


def test_main_writes_both_files(tmp_path, capsys):
    assert commands.main(["--results", str(tmp_path)]) == 0
    assert (tmp_path / "report.md").is_file() and (tmp_path / "report.html").is_file()
    assert "wrote" in capsys.readouterr().out

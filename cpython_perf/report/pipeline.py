"""write_report: a results directory's JUnit files (and plan, lanes, seed recordings) -> the Report -> report.md,
report.html and one JUnit file per cell."""

from __future__ import annotations

from pathlib import Path

from ..matrix import Matrix, load_matrix
from .cell_junit import cell_junit
from .packaging_lanes import lane_rows
from .html_page import render_html, with_skipped_html
from .junit_results import latest_results, retired
from .markdown_page import render_markdown, skipped_markdown
from .model import build_report
from .results_files import CELL_JUNIT_DIR, PLAN_FILE, cell_files, load_plan
from .seed_flamegraphs import default_renderer, render_flamegraphs


def write_report(results_dir: Path, matrix: Matrix | None = None, renderer=None,
                 plan: Path | None = None) -> tuple[Path, Path]:
    """results_dir/report.md and report.html (and results_dir/junit/<cell>.xml).  plan: the run's plan
    (default: results_dir/plan.json where it exists)."""
    results_dir = Path(results_dir)
    matrix = matrix or load_matrix()
    cases = latest_results(results_dir)
    current = [c for c in cases if not retired(c)]
    report = build_report(matrix, current, load_plan(plan or results_dir / PLAN_FILE))
    report.retired = len(cases) - len(current)
    report.results_dir = str(results_dir.resolve())
    report.missing_images, report.perf_scripts = cell_files(results_dir, report.cells)
    report.lanes = lane_rows(results_dir, matrix)
    report.flamegraphs = render_flamegraphs(results_dir, report.cells, renderer or default_renderer(matrix))
    results_dir.mkdir(parents=True, exist_ok=True)
    junit_dir = results_dir / CELL_JUNIT_DIR
    junit_dir.mkdir(exist_ok=True)
    for cell in report.cells:
        cell_junit(report, cell).write(junit_dir / f"{cell}.xml", encoding="utf-8", xml_declaration=True)
    md, page = results_dir / "report.md", results_dir / "report.html"
    md.write_text(render_markdown(report) + skipped_markdown(results_dir))
    page.write_text(with_skipped_html(render_html(report), results_dir))
    return md, page

"""The other files of a results directory (cpython_perf.report.results_files): the run's plan, missing images,
the seed recordings' `perf script` files, a buildbot run's skipped cells."""

from __future__ import annotations

import json

from cpython_perf.check import suite_results
from cpython_perf.matrix import PROJECT_ROOT, load_matrix
from cpython_perf.report import junit_results, model, pipeline, results_files

from tests.report.junit_files import case, junit

MATRIX = load_matrix()


def plan_json(tmp_path, cells, event="pull_request"):
    path = tmp_path / results_files.PLAN_FILE
    path.write_text(json.dumps({"event": event, "selection": {"cells": cells, "why": {}},
                                "cells": [{"cell": c, "execution": "native"} for c in cells]}))
    return path


def test_not_selected_image_failed_and_no_results_are_told_apart(tmp_path):
    junit(tmp_path / "3.13-fp" / "junit.xml", case("test_seed_chain[3.13-fp-perf-xoption]"))
    (tmp_path / "3.11-fp").mkdir()
    (tmp_path / "3.11-fp" / results_files.MISSING_IMAGES).write_text("image-cell-3.11-fp-0123456789abcdef\n")
    plan_json(tmp_path, ["3.13-fp", "3.11-fp", "3.12-fp"])
    md, page = pipeline.write_report(tmp_path, MATRIX, renderer="none here")
    rep = model.build_report(MATRIX, junit_results.latest_results(tmp_path), results_files.load_plan(tmp_path / results_files.PLAN_FILE))
    rep.missing_images, _ = results_files.cell_files(tmp_path, rep.cells)
    assert rep.status("3.13-fp") == "passed"
    assert rep.status("3.11-fp") == "image failed"
    assert rep.status("3.12-fp") == "no results"
    assert rep.status("3.9-fp") == "not selected"
    text = md.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| 3.11-fp | "))
    assert "image failed: not built: image-cell-3.11-fp-0123456789abcdef" in row
    others = len(MATRIX.cells) - 3
    assert (f"**FAILED: 1 of {len(MATRIX.cells)} cells ran: 1 passed, 0 failed, 0 incomplete; {others} not selected; "
            "2 selected without results (1 image failed)**") in text
    assert "id='verdict'" in page.read_text()


def test_a_broken_plan_is_ignored_with_a_warning(tmp_path, capsys):
    (tmp_path / "plan.json").write_text("{not json")
    assert results_files.load_plan(tmp_path / "plan.json") is None
    assert "not a plan" in capsys.readouterr().err
    assert results_files.load_plan(tmp_path / "absent.json") is None


def test_each_seed_recording_s_perf_script_output_is_linked(tmp_path):
    junit(tmp_path / "3.13-fp" / "junit.xml", case("test_seed_chain[3.13-fp-perf-xoption]"))
    for activation in ("xoption", "env"):
        (tmp_path / "3.13-fp" / suite_results.seed_perf_script_name("perf", activation)).write_text("x\n")
    md, page = pipeline.write_report(tmp_path, MATRIX, renderer="none here")
    row = next(line for line in md.read_text().splitlines() if line.startswith("| 3.13-fp | "))
    assert "[perf env](3.13-fp/seed-perf-env.perf-script.txt), [perf xoption](3.13-fp/seed-perf-xoption.perf-script.txt)" in row
    assert "href='3.13-fp/seed-perf-xoption.perf-script.txt'" in page.read_text()


def test_the_seed_chain_test_saves_what_the_report_links():
    """conformance/test_seed_chain.py names its files with suite_results.seed_perf_script_name, which the
    report's glob finds."""
    import fnmatch
    source = (PROJECT_ROOT / "conformance" / "test_seed_chain.py").read_text()
    assert "keep_perf_script(runner, cell, seed_perf_script_name(mode, activation))" in source
    assert fnmatch.fnmatch(suite_results.seed_perf_script_name("perf_jit", "sys_api"), suite_results.SEED_RUN_SCRIPTS)


def test_the_report_job_reads_the_plan_and_keeps_the_perf_script_files():
    import yaml
    root = PROJECT_ROOT / ".github" / "workflows"
    steps = yaml.safe_load((root / "matrix.yml").read_text())["jobs"]["report"]["steps"]
    plan = [s for s in steps if s.get("with", {}).get("name") == "plan"]
    assert plan and plan[0]["with"]["path"] == "results", "the report job downloads plan.json into results/"
    upload = steps[-1]["with"]["path"]
    assert "results/*/*.perf-script.txt" in upload
    assert "missing-images.txt" in (root / "cell.yml").read_text() and results_files.MISSING_IMAGES == "missing-images.txt"


def test_a_buildbot_run_s_uploads_render_with_the_cells_it_skipped(tmp_path):
    run = tmp_path / "7"
    junit(run / "3.13-fp" / "junit.xml", case("test_seed_chain[3.13-fp-perf-xoption]"))
    (run / results_files.SKIPPED_FILE).write_text(json.dumps({"3.13-fp-aarch64": "no connected worker"}))
    md, page = pipeline.write_report(run, MATRIX, renderer=lambda *a: None)
    assert "| 3.13-fp-aarch64 | not run: no connected worker |" in md.read_text()
    assert "3.13-fp-aarch64" in page.read_text()

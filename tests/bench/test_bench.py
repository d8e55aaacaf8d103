"""Unit tests of cpython_perf.bench.common / wallclock / command and benchmarks/workloads.py (no Docker)."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from cpython_perf.bench import command, wallclock
from cpython_perf.bench import common as bench
from cpython_perf.matrix import load_matrix

MATRIX = load_matrix()


def plan_of(*names):
    return bench.plan_comparisons(MATRIX, [MATRIX.cell(n) for n in names])


def keys(plan):
    return [(c.kind, c.a.key, c.b.key) for c in plan]


def test_statistics():
    assert bench.median([3.0, 1.0, 2.0]) == 2.0
    assert bench.median([1.0, 2.0, 3.0, 4.0]) == 2.5
    assert bench.ratio([1.0, 2.0, 3.0], [2.0, 4.0, 6.0]) == pytest.approx(2.0)
    assert bench.geometric_mean([2.0, 0.5]) == pytest.approx(1.0)
    assert bench.geometric_mean([1.01, 1.03]) == pytest.approx(math.sqrt(1.01 * 1.03))
    stats = bench.summarize([5.0, 1.0, 3.0, 2.0, 4.0])
    assert stats == {"n": 5, "min": 1.0, "q1": 2.0, "median": 3.0, "q3": 4.0, "max": 5.0}
    assert bench.summarize([0.5]) == {"n": 1, "min": 0.5, "q1": 0.5, "median": 0.5, "q3": 0.5, "max": 0.5}


def test_plan_from_the_matrix():
    plan = plan_of("3.11-fp", "3.13-fp")
    assert keys(plan) == [
        ("mode", "3.11-fp:inactive", "3.11-fp:perf"),
        ("mode", "3.11-fp:inactive", "3.11-fp:perf_jit"),
        ("vanilla", "3.11-fp-vanilla:inactive", "3.11-fp:inactive"),
        ("mode", "3.13-fp:inactive", "3.13-fp:perf"),
        ("mode", "3.13-fp:inactive", "3.13-fp:perf_jit"),
        ("vanilla", "3.13-fp-vanilla:inactive", "3.13-fp:inactive"),
    ]
    assert MATRIX.vanilla_twin(MATRIX.cell("3.11-fp")).name == "3.11-fp-vanilla"
    perf = plan[0].b
    assert perf.argv == ("-X", "perf") and plan[1].b.argv == ("-X", "perf_jit") and plan[0].a.argv == ()
    # the workloads command is the configuration's argv before the script
    assert bench.workload_command(perf, ["calls", "nbody"], 3, 1.0) == [
        "python3", "-X", "perf", "/bench/workloads.py", "--run", "calls,nbody", "--repeat", "3", "--scale", "1.0"]


def test_plan_fp_against_release_only_when_both_are_selected():
    assert not any(c.kind == "variant" for c in plan_of("3.13-fp"))
    variant = [c for c in plan_of("3.13-fp", "3.13-release") if c.kind == "variant"]
    assert keys(variant) == [("variant", "3.13-release:inactive", "3.13-fp:inactive")]
    # a cell with no mode, no twin and no partner calls for nothing
    assert plan_of("3.10-fp") == []
    # selecting a cell twice plans its comparisons once
    assert keys(plan_of("3.13-fp", "3.13-fp")) == keys(plan_of("3.13-fp"))
    only_modes = bench.plan_comparisons(MATRIX, [MATRIX.cell("3.13-fp")], kinds=("mode",))
    assert keys(only_modes) == [("mode", "3.13-fp:inactive", "3.13-fp:perf"),
                                ("mode", "3.13-fp:inactive", "3.13-fp:perf_jit")]


def test_configurations_are_interleaved_round_robin():
    configs = bench.configurations(plan_of("3.11-fp"))
    assert [c.key for c in configs] == ["3.11-fp:inactive", "3.11-fp:perf", "3.11-fp:perf_jit",
                                        "3.11-fp-vanilla:inactive"]
    order = [(number, c.key) for number, c in bench.schedule(configs, 3)]
    assert len(order) == 12
    assert [k for _, k in order] == [c.key for c in configs] * 3
    assert [n for n, _ in order] == [0] * 4 + [1] * 4 + [2] * 4


def test_parse_output_checks_the_trampoline_state():
    cell = MATRIX.cell("3.13-fp")
    line = json.dumps({"python": "3.13.5", "perf_active": True, "results": {"calls": [0.1]}})
    assert bench.parse_output(bench.active(cell, "perf"), "noise\n" + line + "\n")["python"] == "3.13.5"
    with pytest.raises(bench.DriverError, match="expected False"):
        bench.parse_output(bench.inactive(cell), line)
    with pytest.raises(bench.DriverError, match="no JSON line"):
        bench.parse_output(bench.inactive(cell), "Traceback ...\n")


def cell_info(version, variant, support, vanilla=False):
    name = f"{version}-{variant}{'-vanilla' if vanilla else ''}"
    return {"python": f"{version}.2", "version": version, "variant": variant, "arch": "x86_64",
            "support": support, "vanilla": vanilla, "image": f"cpython-perf:{name}", "image_id": "sha256:0"}


def synthetic_results():
    """Two workloads, 2 rounds x 2 repeats: 3.11-fp's -X perf costs more than 3.13-fp's, the patch 3%."""

    def runs(calls, nbody):
        return {"calls": [[calls, calls], [calls, calls]], "nbody": [[nbody, nbody], [nbody, nbody]]}

    configs = {
        "3.11-fp:inactive": ("3.11-fp", "inactive", []),
        "3.11-fp:perf": ("3.11-fp", "perf", ["-X", "perf"]),
        "3.11-fp-vanilla:inactive": ("3.11-fp-vanilla", "inactive", []),
        "3.13-fp:inactive": ("3.13-fp", "inactive", []),
        "3.13-fp:perf": ("3.13-fp", "perf", ["-X", "perf"]),
        "3.13-release:inactive": ("3.13-release", "inactive", []),
    }
    return {
        "created": "2026-11-22T08:00:00Z",
        "machine": {"nproc": 2, "kernel": "6.12.0", "cpu": "Test CPU", "arch": "x86_64"},
        "engine": {"version": "26.1.5", "api_version": "1.45"},
        "settings": {"rounds": 2, "repeat": 2, "scale": 1.0, "workloads": ["calls", "nbody"], "order": list(configs)},
        "workloads": {"calls": "call-heavy", "nbody": "n-body"},
        "cells": {
            "3.11-fp": cell_info("3.11", "fp", "backport"),
            "3.11-fp-vanilla": cell_info("3.11", "fp", "backport", vanilla=True),
            "3.13-fp": cell_info("3.13", "fp", "native"),
            "3.13-release": cell_info("3.13", "release", "native"),
        },
        "configurations": {key: {"cell": cell, "label": label, "argv": argv, "perf_active": label != "inactive"}
                           for key, (cell, label, argv) in configs.items()},
        "timings": {
            "3.11-fp:inactive": runs(0.200, 0.300),
            "3.11-fp:perf": runs(0.300, 0.303),          # 1.5 and 1.01
            "3.11-fp-vanilla:inactive": runs(0.194, 0.3),  # patched / vanilla: 1.031 and 1.0
            "3.13-fp:inactive": runs(0.100, 0.200),
            "3.13-fp:perf": runs(0.120, 0.204),          # 1.2 and 1.02
            "3.13-release:inactive": runs(0.099, 0.199),
        },
        "comparisons": [
            {"kind": "mode", "a": "3.11-fp:inactive", "b": "3.11-fp:perf"},
            {"kind": "vanilla", "a": "3.11-fp-vanilla:inactive", "b": "3.11-fp:inactive"},
            {"kind": "mode", "a": "3.13-fp:inactive", "b": "3.13-fp:perf"},
            {"kind": "variant", "a": "3.13-release:inactive", "b": "3.13-fp:inactive"},
        ],
    }


def test_analyse_ratios_and_targets():
    mode_311, vanilla, mode_313, variant = bench.analyse(synthetic_results())
    assert mode_311["workloads"]["calls"]["ratio"] == pytest.approx(1.5)
    assert mode_311["geomean"] == pytest.approx(math.sqrt(1.5 * 1.01))
    # the backport's limits are native 3.13's ratios
    assert mode_311["workloads"]["calls"]["limit"] == pytest.approx(1.2)
    assert mode_311["geomean_limit"] == pytest.approx(mode_313["geomean"])
    assert mode_313["geomean_limit"] is None and "reference" in mode_313["target"]
    assert vanilla["workloads"]["calls"]["limit"] == bench.VANILLA_LIMIT
    assert variant["geomean_limit"] == bench.VARIANT_LIMIT
    assert variant["workloads"]["calls"]["limit"] is None


def test_backport_without_a_native_reference_is_not_checked():
    results = synthetic_results()
    results["comparisons"] = results["comparisons"][:2]
    mode_311 = bench.analyse(results)[0]
    assert mode_311["geomean_limit"] is None and "not checked" in mode_311["target"]


def test_verdict():
    assert bench.verdict(1.005, 1.01) == "ok (<= 1.010)"
    assert bench.verdict(1.0302, 1.01) == "MISSED by 2.0% (1.030 > 1.010)"
    assert bench.verdict(1.5, None) == "-"


def test_markdown_says_missed_where_a_target_is_missed():
    text = wallclock.render_markdown(synthetic_results(), "results/bench/bench-20261122T080000Z.json")
    assert "## The project's own workloads, wall clock" in text
    assert "From results/bench/bench-20261122T080000Z.json" in text
    assert "| CPU | Test CPU (x86_64) |" in text and "| Docker engine | 26.1.5 |" in text
    assert "| 3.11-fp | 3.11.2 | backport | `cpython-perf:3.11-fp` |" in text
    for title in ("### 3.11-fp: -X perf active vs inactive", "### 3.11-fp (patched) vs 3.11-fp-vanilla, inactive",
                  "### 3.13-fp: -X perf active vs inactive", "### 3.13-fp vs 3.13-release (fp vs release), inactive"):
        assert title in text
    # calls: 3.11's -X perf 1.5 against 3.13's 1.2 -> 25% over; nbody 1.01 against 1.02 is fine
    assert "| calls | 200.0 ms | 300.0 ms | 1.500 | 0.0% / 0.0% | MISSED by 25.0% (1.500 > 1.200) |" in text
    assert "| nbody | 300.0 ms | 303.0 ms | 1.010 | 0.0% / 0.0% | ok (<= 1.020) |" in text
    # patched vs vanilla: calls 0.200 / 0.194 = 1.031 > 1.01
    assert "| calls | 194.0 ms | 200.0 ms | 1.031 | 0.0% / 0.0% | MISSED by 2.1% (1.031 > 1.010) |" in text
    # fp vs release: geometric mean of 1.0101 and 1.0050 is within 2%
    assert "| 3.13-fp vs 3.13-release (fp vs release), inactive | 1.008 |" in text
    # identical samples on both sides: no verdict from them, and none for the geometric mean they enter
    assert "| nbody | 300.0 ms | 300.0 ms | 1.000 | 0.0% / 0.0% | not significant |" in text
    assert "| **geometric mean** | | | **1.015** | | not significant (1 of 2 workloads) |" in text
    assert "Scaled run" not in text


def test_wall_clock_verdict_only_where_the_t_test_resolves_it():
    """Spreads as this machine's (tens of percent) around a 27% difference of medians: no MISSED verdict."""
    results = synthetic_results()
    results["comparisons"] = [{"kind": "vanilla", "a": "3.11-fp-vanilla:inactive", "b": "3.11-fp:inactive"}]
    results["timings"]["3.11-fp-vanilla:inactive"] = {"calls": [[0.10, 0.30], [0.16, 0.24]],
                                                      "nbody": [[0.3, 0.3], [0.3, 0.3]]}
    results["timings"]["3.11-fp:inactive"] = {"calls": [[0.12, 0.42], [0.22, 0.30]],
                                              "nbody": [[0.3, 0.3], [0.3, 0.3]]}
    text = wallclock.render_markdown(results)
    assert "MISSED" not in text and "| calls | 200.0 ms | 260.0 ms | 1.300 |" in text
    assert "not significant" in text
    assert bench.significant([1.0, 1.1, 0.9, 1.0], [2.0, 2.1, 1.9, 2.0])[0]
    assert not bench.significant([0.10, 0.30, 0.16, 0.24], [0.12, 0.42, 0.22, 0.30])[0]
    assert bench.timed_verdict(1.5, 1.01, [1.0, 1.0], [1.5, 1.5]).startswith("MISSED")
    assert bench.timed_verdict(1.5, 1.01, [1.0], [1.5]) == "not significant"


def test_wall_clock_verdict_needs_a_distance_to_the_target_beyond_the_spread():
    """The old report's "MISSED by 26.8%": 1.281 against 1.01 with a wider spread is not a verdict."""
    results = synthetic_results()
    results["comparisons"] = [{"kind": "vanilla", "a": "3.11-fp-vanilla:inactive", "b": "3.11-fp:inactive"}]
    a = [0.20, 0.25, 0.30, 0.35, 0.40, 0.45, 0.50, 0.55]   # interquartile range ~45% of the median
    results["timings"]["3.11-fp-vanilla:inactive"] = {"calls": [a], "nbody": [[0.3] * 8]}
    results["timings"]["3.11-fp:inactive"] = {"calls": [[x * 1.281 for x in a]], "nbody": [[0.3] * 8]}
    text = wallclock.render_markdown(results)
    assert "MISSED" not in text and "| 1.281 |" in text


def test_markdown_of_a_run_within_targets_has_no_missed():
    results = synthetic_results()
    for runs in results["timings"].values():
        for name in runs:
            runs[name] = [[0.25, 0.25]]
    assert "MISSED by" not in wallclock.render_markdown(results)


def test_summary_cli_rewrites_the_summary(tmp_path, capsys):
    source = tmp_path / "bench-20261122T080000Z.json"
    source.write_text(json.dumps(synthetic_results()))
    summary = tmp_path / "BENCHMARKS.md"
    assert command.main(["summary", "--results", str(tmp_path), "--summary", str(summary)]) == 0
    text = " ".join(summary.read_text().split())
    assert text.startswith("# Benchmarks") and "do not edit by hand" in text
    assert "[workloads, wall clock, 2026-11-22T08:00:00Z](bench-20261122T080000Z.md)" in text
    assert "MISSED by" in (tmp_path / "bench-20261122T080000Z.md").read_text()   # the run's page
    (tmp_path / "bench-20261123T080000Z.json").write_text("{not json")
    assert command.main(["summary", "--results", str(tmp_path), "--summary", str(summary)]) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_unknown_cell_is_a_clear_error(capsys):
    assert command.main(["--cell", "3.13-nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: unknown cell '3.13-nope'") and "Traceback" not in err


def test_unknown_workload_is_a_clear_error():
    with pytest.raises(bench.DriverError, match="unknown workload"):
        bench.select_workloads("calls,nope", bench.available_workloads())
    assert list(bench.select_workloads("calls,nbody", bench.available_workloads())) == ["calls", "nbody"]


def test_workloads_run_under_the_host_python():
    listed = subprocess.run([sys.executable, str(bench.WORKLOADS_SCRIPT), "--list"],
                            capture_output=True, text=True, timeout=30, check=True).stdout.split()
    assert listed == list(bench.available_workloads())
    assert {"nbody", "richards", "fannkuch", "points", "calls", "generators"} <= set(listed)
    done = subprocess.run([sys.executable, str(bench.WORKLOADS_SCRIPT), "--run", ",".join(listed),
                           "--repeat", "1", "--scale", "0.05"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["python"] == sys.version.split()[0]
    assert out["perf_active"] in (None, False)
    assert list(out["results"]) == listed
    assert all(len(times) == 1 and times[0] > 0 for times in out["results"].values())


def test_ratio_chart_marks_half_percents_and_cuts_long_bars():
    from cpython_perf.bench.common import CHART_WIDTH, ratio_chart
    lines = ratio_chart([{"title": "a", "geomean": 1.025}, {"title": "b", "geomean": 0.99},
                         {"title": "c", "geomean": 2.0}])
    assert lines[0] == "```" and lines[-1] == "```"
    assert lines[2].endswith("1.025 |#####")
    assert lines[3].endswith("0.990 |--")
    assert lines[4].endswith("|" + "#" * CHART_WIDTH + ">")


def test_group_results_elsewhere_leave_the_project_summary_alone(tmp_path, monkeypatch):
    from cpython_perf.bench import summary
    written = []
    monkeypatch.setattr(summary, "refresh_summary", lambda *a, **k: written.append(a))
    path, refreshed = command.save_group_results({"created": "2026-11-22T18:09:46Z"}, "fidelity", tmp_path)
    assert path == tmp_path / "fidelity-20261122T180946Z.json" and path.is_file()
    assert written == [] and not refreshed

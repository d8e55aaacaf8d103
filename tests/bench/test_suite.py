"""The standard suite (cpython_perf.bench.suite and its suite_* modules) and BENCHMARKS.md's summary table
(no Docker)."""

from __future__ import annotations

import hashlib
import json
import re
import zipfile
from pathlib import Path

import pytest

from cpython_perf.bench import (command, common, suite_containers, suite_counts, suite_page, suite_pins, suite_plan,
                                suite_results_file, suite_wallclock, summary)
from cpython_perf.errors import DriverError
from cpython_perf.matrix import load_matrix

MATRIX = load_matrix()


# --------------------------------------------------------------------------
# The pinned configuration and the downloads


def test_project_config_pins_both_wheels():
    config = suite_pins.load_config()
    assert config.pyperformance.requirement == "pyperformance==1.14.0"
    assert config.pyperf.requirement == "pyperf==2.10.0"
    assert config.pyperformance.file == "pyperformance-1.14.0-py3-none-any.whl"
    assert len(config.pyperformance.sha256) == 64 and len(config.pyperf.sha256) == 64
    assert "python_startup" in config.exclude


def test_bad_config_is_a_clear_error(tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text("pyperformance: {version: 1.14.0, file: x.whl, sha256: nothex}\npyperf: {}\n")
    with pytest.raises(DriverError, match="sha256 must be 64 lowercase hex digits"):
        suite_pins.load_config(path)
    path.write_text("pyperformance: {}\nsurprise: 1\n")
    with pytest.raises(DriverError, match="unknown key"):
        suite_pins.load_config(path)


def _wheel(path: Path, members: dict[str, str]) -> bytes:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in members.items():
            zf.writestr(name, text)
    return path.read_bytes()


@pytest.fixture
def pinned(tmp_path):
    """A wheel's good bytes and a pin of them."""
    good = _wheel(tmp_path / "good.whl", {"pyperformance/data-files/benchmarks/MANIFEST": "[benchmarks]\n"})
    pin = suite_pins.Pin("pyperformance", "1.14.0", "pyperformance-1.14.0-py3-none-any.whl",
                         hashlib.sha256(good).hexdigest())
    return good, pin


def _downloader(data: bytes, calls: list):
    def download(requirement, directory):
        calls.append(requirement)
        (Path(directory) / "pyperformance-1.14.0-py3-none-any.whl").write_bytes(data)
    return download


def test_tampered_download_is_refused_and_not_cached(tmp_path, pinned):
    good, pin = pinned
    cache = tmp_path / "cache"
    tampered = good.replace(b"[benchmarks]", b"[benchmarkz]")
    calls = []
    with pytest.raises(DriverError) as info:
        suite_pins.fetch_pinned(pin, cache, _downloader(tampered, calls), log=lambda *_: None)
    message = str(info.value)
    assert hashlib.sha256(tampered).hexdigest() in message and pin.sha256 in message
    assert "not used, not cached" in message
    assert calls == ["pyperformance==1.14.0"]
    assert list(cache.iterdir()) == []   # nothing half-made: pip's temporary directory is gone too


def test_tampered_cached_file_is_replaced_by_a_verified_download(tmp_path, pinned):
    good, pin = pinned
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / pin.file).write_bytes(b"tampered")
    logged, calls = [], []
    path = suite_pins.fetch_pinned(pin, cache, _downloader(good, calls), log=logged.append)
    assert path.read_bytes() == good and calls == ["pyperformance==1.14.0"]
    assert any("deleted, downloading again" in line for line in logged)
    calls.clear()
    assert suite_pins.fetch_pinned(pin, cache, _downloader(b"never used", calls)) == path and calls == []


# --------------------------------------------------------------------------
# Selection: pyperformance's MANIFEST, stdlib-only, requires-python, exclusions


def _benchmark(root: Path, name: str, dependencies=("pyperf",), requires=">=3.8", requirements=None,
               extra=None, variants=()):
    d = root / f"bm_{name}"
    d.mkdir(parents=True)
    deps = ", ".join(f'"{x}"' for x in dependencies)
    tool = f'[tool.pyperformance]\nname = "{name}"\n' + (f"extra_opts = {json.dumps(list(extra))}\n" if extra else "")
    (d / "pyproject.toml").write_text(f'[project]\nname = "pyperformance_bm_{name}"\nrequires-python = "{requires}"\n'
                                      f"dependencies = [{deps}]\n\n{tool}")
    (d / "run_benchmark.py").write_text("")
    if requirements is not None:
        (d / "requirements.txt").write_text(requirements)
    for variant, opts in variants:
        (d / f"bm_{variant}.toml").write_text(f'[tool.pyperformance]\nname = "{variant}"\nextra_opts = {json.dumps(opts)}\n')


@pytest.fixture
def manifest(tmp_path):
    root = tmp_path / "benchmarks"
    _benchmark(root, "nbody")
    _benchmark(root, "chameleon", dependencies=("pyperf", "Chameleon"), requirements="chameleon==3.9.1\n")
    _benchmark(root, "yaml", requirements="pyperf\npyyaml==6.0.1\n")         # pyproject says pyperf only
    _benchmark(root, "dask", requires=">=3.12", requirements="dask[distributed]==2024.2.1\n")
    _benchmark(root, "newsyntax", requires=">=3.10, <3.14")
    _benchmark(root, "pickle", extra=["pickle"], variants=[("unpickle", ["unpickle"])])
    _benchmark(root, "python_startup")
    _benchmark(root, "hg_startup", dependencies=("pyperf", "mercurial"))
    (root / "MANIFEST").write_text(
        "[benchmarks]\n\nname\tmetafile\nnbody\t<local>\nchameleon\t<local>\nyaml\t<local>\ndask\t<local>\n"
        "newsyntax\t<local>\npickle\t<local>\nunpickle\t<local:pickle>\npython_startup\t<local>\n"
        "# commented out upstream:\n#hg_startup\t<local>\n\n[group default]\n[group math]\nnbody\n")
    return root


def test_manifest_lists_benchmarks_with_their_metadata(manifest):
    found = {b.name: b for b in suite_plan.read_manifest(manifest)}
    assert list(found) == ["nbody", "chameleon", "yaml", "dask", "newsyntax", "pickle", "unpickle", "python_startup"]
    assert found["unpickle"].directory == "bm_pickle" and found["unpickle"].extra_opts == ("unpickle",)
    assert found["pickle"].extra_opts == ("pickle",)
    assert found["yaml"].requirements == ("pyperf", "pyyaml==6.0.1")
    assert found["nbody"].script == "/suite/bm_nbody/run_benchmark.py"


def test_stdlib_only_selection_per_version(manifest):
    benchmarks = suite_plan.read_manifest(manifest)
    exclude = {"python_startup": "times a child interpreter's start-up"}
    chosen, left = suite_plan.select(benchmarks, "3.9", exclude)
    assert [b.name for b in chosen] == ["nbody", "pickle", "unpickle"]
    assert left == {"chameleon": "needs chameleon", "yaml": "needs pyyaml",
                    "dask": "needs dask", "newsyntax": "requires-python >=3.10, <3.14",
                    "python_startup": "times a child interpreter's start-up"}
    chosen, left = suite_plan.select(benchmarks, "3.13", exclude)
    assert [b.name for b in chosen] == ["nbody", "newsyntax", "pickle", "unpickle"]
    assert suite_plan.select(benchmarks, "3.14", exclude)[1]["newsyntax"] == "requires-python >=3.10, <3.14"
    chosen, _ = suite_plan.select(benchmarks, "3.13", exclude, only=["nbody", "unpickle"])
    assert [b.name for b in chosen] == ["nbody", "unpickle"]
    with pytest.raises(DriverError, match="unknown benchmark"):
        suite_plan.select(benchmarks, "3.13", exclude, only=["nbody", "nope"])


def test_requires_python_forms():
    assert suite_plan.python_admits(">=3.8", "3.9") and not suite_plan.python_admits(">=3.10", "3.9")
    assert suite_plan.python_admits(None, "3.9") and suite_plan.python_admits(">=3.10, <3.14", "3.13")
    assert not suite_plan.python_admits(">=3.10,<3.14", "3.14")
    with pytest.raises(DriverError, match="not understood"):
        suite_plan.python_admits("~=3.8", "3.9")


def test_real_pyperformance_release_selection():
    """On the pinned release itself, where a previous run cached it (no network in unit tests)."""
    config = suite_pins.load_config()
    root = next(iter(suite_pins.cache_dir().glob(f"pyperformance-{config.pyperformance.version}-{config.pyperformance.sha256[:12]}")), None)
    if root is None:
        pytest.skip(f"pyperformance {config.pyperformance.version} not in {suite_pins.cache_dir()} (run the suite once)")
    benchmarks = suite_plan.read_manifest(root / suite_pins.BENCHMARKS_IN_WHEEL)
    chosen, left = suite_plan.select(benchmarks, "3.9", config.exclude)
    names = {b.name for b in chosen}
    assert {"nbody", "richards", "go", "deltablue", "json_dumps", "unpickle_pure_python"} <= names
    # dask: pyproject.toml names pyperf only, its requirements.txt dask; bm_yaml and hg_startup: not in the MANIFEST
    assert left["dask"] == "needs dask" and left["chameleon"] == "needs chameleon"
    assert left["async_tree_eager"] == "requires-python >=3.12"
    assert not {"yaml", "hg_startup"} & (names | set(left))
    assert len(names) == 57 and len(suite_plan.select(benchmarks, "3.13", config.exclude)[0]) == 69


# --------------------------------------------------------------------------
# Commands and parsing of what the runs print


def test_worker_command_and_trampoline_check():
    cell = MATRIX.cell("3.11-fp")
    bench = suite_plan.Benchmark("unpickle", "bm_pickle", ">=3.8", ("pyperf",), (), ("unpickle",))
    assert suite_counts.worker_command(common.active(cell, "perf"), bench, 4) == [
        "python3", "-X", "perf", "-u", "/suite/bm_pickle/run_benchmark.py", "unpickle",
        "--worker", "--loops", "4", "--warmups", "0", "--values", "1"]
    script = suite_counts.trampoline_check_script(["valgrind", "python3", "it's"])
    assert script.startswith("'valgrind' 'python3' 'it'\\''s'; rc=$?;") and script.endswith("exit $rc")
    assert suite_counts.maps_written("nbody: 1.3 sec\n@@cpython-perf-maps:1\n") == 1
    with pytest.raises(DriverError, match="printed no"):
        suite_counts.maps_written("Traceback ...")
    suite_counts.check_trampoline_state(common.active(cell, "perf_jit"), 1)
    suite_counts.check_trampoline_state(common.inactive(cell), 0)
    with pytest.raises(DriverError, match="expected none"):
        suite_counts.check_trampoline_state(common.inactive(cell), 1)
    with pytest.raises(DriverError, match="expected some"):
        suite_counts.check_trampoline_state(common.active(cell, "perf"), 0)
    assert suite_wallclock.wallclock_env(common.active(cell, "perf_jit")) == {"PYTHONPATH": "/pyperf", "PYTHON_PERF_JIT_SUPPORT": "1"}


def test_instructions_of_the_benchmark_process_not_a_forked_child():
    # 3.13.5 coroutines, --loops 1: a child forked late prints its total (inherited counts) before the parent
    stderr = "==8== \n==8== I refs:        801,244,181\n==7== \n==7== I refs:        833,336,737\n"
    assert suite_counts.main_process_instructions(stderr) == 833_336_737
    assert suite_counts.main_process_instructions("==7== I refs:        1,082,919,283\n") == 1_082_919_283
    with pytest.raises(DriverError, match="no 'I refs' line"):
        suite_counts.main_process_instructions("valgrind: command not found")


def test_loop_arithmetic_and_errors():
    assert suite_counts.per_loop(589_133_890, 1_623_000_000, 1, "x") == pytest.approx(1_033_866_110)
    assert suite_counts.per_loop(100, 300, 2, "x") == 100
    with pytest.raises(DriverError, match="2 loops counted 100 instructions, 1 loop"):
        suite_counts.per_loop(200, 100, 1, "x")
    assert suite_counts.loops_for(1_033_866_247, 50_000_000) == 1
    assert suite_counts.loops_for(257_477, 50_000_000) == 195
    assert suite_containers.last_error("Traceback\nKeyError: 'pyperf.hook'\n==7== \n==7== I refs:   409,461,051\n") == \
        "KeyError: 'pyperf.hook'"


def rounds(a, b):
    """The rounds dict of a wall-clock run: benchmark -> per-round means of sides a and b."""
    return {"3.13-fp:inactive": {n: v[0] for n, v in a.items()}, "3.13-fp:perf": {n: v for n, v in b.items()}}


SLOWER = [0.100, 0.102, 0.098, 0.101, 0.099, 0.100, 0.103, 0.097]   # nbody, A's rounds


def pair_wall(pair=None, **extra):
    """A wall clock timed in pairs: nbody 10% slower in every round, go unchanged but for noise."""
    pair = pair or {"kind": "mode", "a": "3.13-fp:inactive", "b": "3.13-fp:perf"}
    go_a = [0.05, 0.051, 0.049, 0.05, 0.052, 0.048, 0.05, 0.05]
    go_b = [0.0505, 0.0505, 0.0495, 0.0497, 0.0515, 0.0485, 0.0498, 0.0502]
    results = {"comparisons_planned": [pair],
               "wallclock": {"rounds": {pair["a"]: {"nbody": SLOWER, "go": go_a},
                                        pair["b"]: {"nbody": [v * 1.1 for v in SLOWER], "go": go_b}}}}
    suite_wallclock.compare_pairs(results)
    return results["wallclock"]["compare"]


def test_signed_rank_test_counts_the_exact_distribution():
    p = suite_wallclock.signed_rank_p
    assert p([1.1] * 8) == pytest.approx(2 / 256)           # every pair slower: the smallest p of 8 pairs
    assert p([0.9] * 6) == pytest.approx(2 / 64) and p([0.9] * 6) < 0.05 < p([1.1] * 5) == pytest.approx(2 / 32)
    assert p([1.0] * 8) == 1.0 and p([]) == 1.0               # ties with 1 carry no sign
    # one faster pair, the largest in size, against seven slower tied ones (mean rank 4): W- = 8 of 36; by
    # enumeration of the 256 sign assignments over the ranks [4] * 7 + [8]
    ranks = [4] * 7 + [8]
    tail = sum(1 for m in range(256) if sum(r for i, r in enumerate(ranks) if m >> i & 1) <= 8)
    assert p([1.1] * 7 + [0.85]) == pytest.approx(2 * tail / 256)
    # as scipy.stats.wilcoxon(method="exact") gives on the logarithms of these ratios
    assert p([1.02, 1.05, 0.99, 1.04, 1.08, 1.01, 1.03, 0.97]) == pytest.approx(0.1484375)
    assert p([1.02, 1.05, 0.995, 1.04, 1.08, 1.01, 1.03, 1.06]) == pytest.approx(0.015625)


def test_rounds_rotate_the_configurations():
    configs = ["a", "b", "c"]
    orders = [suite_wallclock.round_order(configs, n) for n in range(6)]
    assert orders[0] == ["a", "b", "c"] and orders[1] == ["b", "c", "a"] and orders[3] == orders[0]
    assert all(sorted(o) == configs for o in orders)
    assert [o[0] for o in orders].count("a") == 2   # each first as often as the others


def test_pair_verdicts_call_only_what_the_pairs_show():
    verdicts = pair_wall()[0]["verdicts"]
    nbody, go = verdicts["nbody"], verdicts["go"]
    assert nbody["significant"] and nbody["pairs"] == 8 and nbody["slower"] == 8
    assert nbody["median"] == pytest.approx(1.1) and nbody["text"].endswith(": 1.10x slower")
    assert not go["significant"] and go["text"].startswith("not significant (median ratio 1.000 (quartiles 0.993-1.010) over 8 pairs, B slower in 4")
    assert suite_page.wallclock_summary(verdicts, ["nbody", "go"], brief=True) == "1 of 2 significant: nbody 1.10x slower"
    assert suite_page.wallclock_summary({"go": go}, ["go"]) == "not significant (0 of 1)"
    # a failed run leaves its round out of the pairs, not a zero in them
    b = [v * 1.1 for v in SLOWER]
    b[3] = None
    one = suite_wallclock.pair_verdict(SLOWER, b)
    assert one["pairs"] == 7 and one["significant"] and suite_wallclock.pair_verdict([None], [0.1]) is None
    assert suite_wallclock.speed(0.95) == "1.05x faster" and suite_wallclock.speed(1.004) == "no change"


def test_stored_compare_to_verdicts_name_configurations_not_paths():
    # runs timed before the pairs kept pyperf compare_to's lines, with the paths of its result files
    line = ("Mean +- std dev: [/work/results/bench/suite-20261127T212041Z-pyperf/3.13-fp_inactive/coroutines.json] "
            "23.2 ms +- 2.5 ms -> [/work/results/bench/suite-20261127T212041Z-pyperf/3.13-fp_perf/coroutines.json] "
            "29.0 ms +- 5.4 ms: 1.25x slower")
    stored = {"coroutines": {"significant": True, "text": line.split("Mean +- std dev: ", 1)[1]
                             .replace("[", "").replace("]", "")}}
    assert suite_page.wallclock_summary(stored, ["coroutines"]) == (
        "1 of 1 significant: coroutines 3.13-fp_inactive 23.2 ms +- 2.5 ms -> 3.13-fp_perf 29.0 ms +- 5.4 ms: 1.25x slower")


def test_pyperf_json_means(tmp_path):
    path = tmp_path / "x.json"
    path.write_text(json.dumps({"version": "1.0", "metadata": {}, "benchmarks": [
        {"metadata": {"name": "nbody"}, "runs": [{"values": [0.1, 0.3]}, {"warmups": [[1, 9.0]], "values": [0.2]}]}]}))
    assert suite_wallclock.load_pyperf_means(path) == {"nbody": pytest.approx(0.2)}


# --------------------------------------------------------------------------
# Geometric means and the summary table


def suite_results(created="2026-11-23T16:00:00Z", counts=None, planned=None, not_run=(), wall=(),
                  method="interleaved pairs"):
    cells = {name: {"version": name[:4], "variant": "fp", "arch": "x86_64", "support": support, "vanilla": vanilla,
                    "image": f"cpython-perf:{name}", "image_id": "sha256:" + "0" * 64, "current": True}
             for name, support, vanilla in [("3.11-fp", "backport", False), ("3.11-fp-vanilla", "backport", True),
                                            ("3.13-fp", "native", False)]}
    counts = counts or {
        "3.11-fp:inactive": {"go": 1000.0, "nbody": 2000.0},
        "3.11-fp:perf": {"go": 1300.0, "nbody": 2002.0},
        "3.11-fp-vanilla:inactive": {"go": 990.0, "nbody": 1990.0},
        "3.13-fp:inactive": {"go": 800.0, "nbody": 1000.0},
        "3.13-fp:perf": {"go": 1600.0, "nbody": 1001.0},
    }
    configs = {k: {"cell": k.split(":")[0], "label": k.split(":")[1], "argv": []} for k in counts}
    planned = planned or [{"kind": "mode", "a": "3.11-fp:inactive", "b": "3.11-fp:perf"},
                          {"kind": "vanilla", "a": "3.11-fp-vanilla:inactive", "b": "3.11-fp:inactive"},
                          {"kind": "mode", "a": "3.13-fp:inactive", "b": "3.13-fp:perf"}]
    return {
        "created": created, "complete": True, "machine": {},
        "settings": {"only": None, **({"wallclock_method": method, "pairs": 8} if wall else {})},
        "suite": {"pyperformance": {"version": "1.14.0", "file": "p.whl", "sha256": "a" * 64},
                  "pyperf": {"version": "2.10.0", "file": "q.whl", "sha256": "b" * 64}, "config": "benchmarks/suite.yaml",
                  "min_loop_instructions": 50_000_000},
        "benchmarks": ["go", "nbody"], "left_out": {}, "cells": cells, "configurations": configs,
        "comparisons_planned": planned, "not_run": list(not_run),
        "instructions": {"loops": {}, "timings": {k: {n: [[v]] for n, v in c.items()} for k, c in counts.items()},
                         "raw": {}, "failures": {}, "seconds": {k: 60.0 for k in counts}},
        "wallclock": {"files": {}, "means": {}, "compare": list(wall), "failures": {}, "seconds": {}},
    }


def test_suite_geometric_means_and_targets():
    analysed = {(e["a"], e["b"]): e for e in suite_results_file.analyse_suite(suite_results())}
    mode_311 = analysed[("3.11-fp:inactive", "3.11-fp:perf")]
    assert mode_311["workloads"]["go"]["ratio"] == pytest.approx(1.3)
    assert mode_311["geomean"] == pytest.approx((1.3 * 1.001) ** 0.5)
    native = analysed[("3.13-fp:inactive", "3.13-fp:perf")]["geomean"]
    assert native == pytest.approx((2.0 * 1.001) ** 0.5)
    assert mode_311["geomean_limit"] == pytest.approx(native)      # backport no worse than native 3.13
    vanilla = analysed[("3.11-fp-vanilla:inactive", "3.11-fp:inactive")]
    assert vanilla["geomean"] == pytest.approx((1000 / 990 * 2000 / 1990) ** 0.5) and vanilla["geomean_limit"] == 1.01
    assert suite_page.instruction_verdict(vanilla["geomean"], 1.01) == f"ok ({vanilla['geomean']:.4f} <= 1.0100)"
    assert suite_page.instruction_verdict(1.0302, 1.01) == "MISSED by 2.00% (1.0302 > 1.0100)"


def test_benchmark_failed_on_one_side_is_left_out_of_its_comparison():
    results = suite_results()
    del results["instructions"]["timings"]["3.11-fp:perf"]["go"]
    results["instructions"]["failures"] = {"3.11-fp:perf": {"go": "go in 3.11-fp:perf exited 1: KeyError"}}
    mode_311 = next(e for e in suite_results_file.analyse_suite(results) if e["b"] == "3.11-fp:perf")
    assert list(mode_311["workloads"]) == ["nbody"]
    assert "failed under cachegrind in `3.11-fp:perf`: `go`" in suite_page.render_markdown(results)


def test_summary_table_sets_figures_beside_anchors_and_links_details(tmp_path):
    wall = pair_wall()
    old = suite_results("2026-11-23T10:00:00Z", not_run=[{"kind": "variant", "a": "3.13-release:inactive",
                                                           "b": "3.13-fp:inactive", "reason": "no image of 3.13-release on the measuring host (not built)"}])
    (tmp_path / "suite-20261123T100000Z.json").write_text(json.dumps(old))
    new = suite_results("2026-11-23T16:00:00Z", wall=wall)
    new["instructions"]["timings"]["3.13-fp:perf"] = {"go": [[960.0]], "nbody": [[1000.0]]}
    (tmp_path / "suite-20261123T160000Z.json").write_text(json.dumps(new))
    written = summary.refresh_summary(tmp_path / "BENCHMARKS.md", tmp_path)
    text = written.read_text()
    lines = text.splitlines()
    flat = " ".join(text.split())
    assert lines[0] == "# Benchmarks: runtime overhead of the perf trampolines" and "do not edit by hand" in flat
    table = [line for line in lines[lines.index("## Summary"):] if line.startswith("| ")]
    assert table[0].startswith("| comparison | benchmarks | measured (B/A) | wall clock (interleaved pairs) | published anchor")
    native = next(line for line in table if "3.13-fp: -X perf active vs inactive" in line)
    # the newest file wins: 1.2 and 1.0 -> geometric mean 1.0954; the link leads to the table on the run's page
    assert "(suite-20261123T160000Z.md#suite-20261123t160000z-3-13-fp-perf-vs-3-13-fp-inactive)" in native
    assert "| 1.0954 (+9.54%) |" in native and "| 2 |" in native   # the instruction counts' geometric mean of 2 benchmarks
    # the wall clock in brief: the speed of each significant benchmark, its pairs' figures on the run's page
    assert "| 1 of 2 significant: nbody 1.10x slower |" in native and "gh-109587" in native
    backport = next(line for line in table if "3.11-fp: -X perf active vs inactive" in line)
    assert "MISSED by 4.14% (1.1407 > 1.0954)" in backport
    vanilla = next(line for line in table if "3.11-fp (patched) vs 3.11-fp-vanilla" in line)
    assert "| none published |" in vanilla and "ok (1.0076 <= 1.0100)" in vanilla and "not measured" in vanilla
    variant = next(line for line in table if "3.13-release" in line)
    assert "PEP 831: +1.5 to +1.9% (x86-64), wall clock" in variant and "not run: no image of 3.13-release" in variant
    assert "https://peps.python.org/pep-0831/#performance" in text
    # each run in detail on its own page beside its results file: every comparison of the run, the newest run's
    # linked from BENCHMARKS.md, the older one linked from the newer run's page, saying what was measured again
    new_page = (tmp_path / "suite-20261123T160000Z.md").read_text()
    old_page = (tmp_path / "suite-20261123T100000Z.md").read_text()
    assert '<a id="suite-20261123t160000z-3-13-fp-perf-vs-3-13-fp-inactive"></a>' in new_page
    assert "# The standard suite: pyperformance's stdlib-only benchmarks (run of 2026-11-23T16:00:00Z)" in new_page
    assert "[BENCHMARKS.md](BENCHMARKS.md)" in new_page and "1.10x slower" in new_page
    assert "## The standard suite" not in text and "(suite-20261123T160000Z.md)" in text
    assert "(suite-20261123T100000Z.md)" not in text and "[suite-20261123T100000Z](suite-20261123T100000Z.md)" in new_page
    assert "run of 2026-11-23T10:00:00Z" in old_page and '<a id="suite-20261123t100000z-3-13-fp-perf-vs-3-13-fp-inactive"></a>' in old_page
    assert ("Measured again since by [suite-20261123T160000Z](suite-20261123T160000Z.md): 3.11-fp (patched) vs "
            "3.11-fp-vanilla, inactive; 3.11-fp: -X perf active vs inactive; 3.13-fp: -X perf active vs inactive."
            in " ".join(old_page.split()))
    assert not (tmp_path / "BENCHMARKS-archive.md").exists()
    # the user-level verdict under the summary, with the figures of the table
    verdict = " ".join(text[text.index("## What it costs you"):text.index("## Each run in detail")].split())
    assert "+10% on 3.13" in verdict and "### Why the cost differs by version" in verdict
    assert "**Built in, not turned on: +0.8% at most, on average.**" in verdict and "(geometric mean; the most affected benchmark, go on 3.11-fp, +1.0%)" in verdict
    # a guide, not a log: prose wrapped, a page gone with its results file
    assert all(len(line) <= summary.WIDTH for line in lines if not line.startswith("|"))
    (tmp_path / "suite-20261123T100000Z.json").unlink()
    summary.refresh_summary(tmp_path / "BENCHMARKS.md", tmp_path)
    assert not (tmp_path / "suite-20261123T100000Z.md").exists() and (tmp_path / "suite-20261123T160000Z.md").exists()


def test_wrapped_markdown_starts_no_line_with_a_block_marker():
    """Prose is wrapped, tables and fenced blocks are not, no wrapped line begins with a word Markdown reads as a
    list item, quote or heading (it would change the text's meaning), and no code span is broken."""
    prose = "one loop = (I(2L) - I(L)) / L, 22.4 ms +- 2.3 ms, # of runs > 3, * 2, `a code span` " * 8
    text = "\n".join([prose, "- " + prose, "| " + prose + " |", "```", prose, "```"])
    for width in range(20, 61):   # every width: some put a marker at a line's start unless the wrapper avoids it
        wrapped = summary.wrap_markdown(text, width=width)
        lines = wrapped.split("\n")
        assert " ".join(wrapped.split()) == " ".join(text.split())
        assert ("| " + prose + " |") in lines and lines.count(prose) == 1   # the table row and the fenced line kept
        body = [line for line in lines if not line.startswith(("|", "```")) and line != prose]
        assert all(len(line) <= width for line in body if "`" not in line), width
        assert all(line.count("`") % 2 == 0 for line in body), width   # no code span broken across lines
        assert not [line for line in body[1:] if re.match(r"\s*(?:[-+*>#]|\+-)(?:\s|$)", line)
                    and not line.startswith("- one")], width


def test_a_wall_clock_timed_in_another_run_links_that_runs_page(tmp_path):
    """A comparison counted in one run and timed in a newer one: its row links the counts' table and, beside the
    wall clock, the page of the run that timed it."""
    counted = suite_results("2026-11-23T10:00:00Z")
    (tmp_path / "suite-20261123T100000Z.json").write_text(json.dumps(counted))
    pair = {"kind": "mode", "a": "3.13-fp:inactive", "b": "3.13-fp:perf"}
    timed = suite_results("2026-11-23T16:00:00Z", counts={"3.13-fp:inactive": {}, "3.13-fp:perf": {}}, planned=[pair],
                          wall=pair_wall(pair))
    (tmp_path / "suite-20261123T160000Z.json").write_text(json.dumps(timed))
    summary.refresh_summary(tmp_path / "BENCHMARKS.md", tmp_path)
    row = next(line for line in (tmp_path / "BENCHMARKS.md").read_text().splitlines()
               if line.startswith("| [3.13-fp: -X perf active vs inactive]"))
    assert "(suite-20261123T100000Z.md#suite-20261123t100000z-3-13-fp-perf-vs-3-13-fp-inactive)" in row
    assert "| 1 of 2 significant: nbody 1.10x slower (timed: [suite-20261123T160000Z](suite-20261123T160000Z.md)) |" in row
    page = (tmp_path / "suite-20261123T160000Z.md").read_text()
    assert '<a id="suite-20261123t160000z-3-13-fp-perf-vs-3-13-fp-inactive"></a>' in page and "1.10x slower" in page
    # the timing run's page has each benchmark's figures, the ones not called different too
    assert "| benchmark | wall clock (interleaved pairs) |" in page
    assert "| go | not significant (median ratio 1.000 (quartiles 0.993-1.010) over 8 pairs, B slower in 4" in page


def test_a_wall_clock_not_timed_in_pairs_stays_on_its_page(tmp_path):
    """A run that timed one configuration's runs after the other's (pyperf compare_to): its page shows those
    verdicts, under their own heading; BENCHMARKS.md's table says "not measured" until a run times it in pairs."""
    stored = {"nbody": {"significant": True, "text": "3.13-fp_inactive 100 ms +- 1 ms -> 3.13-fp_perf 110 ms +- 1 ms: 1.10x slower"}}
    wall = [{"kind": "mode", "a": "3.13-fp:inactive", "b": "3.13-fp:perf", "text": "", "verdicts": stored}]
    (tmp_path / "suite-20261123T100000Z.json").write_text(json.dumps(suite_results(wall=wall, method=None)))
    summary.refresh_summary(tmp_path / "BENCHMARKS.md", tmp_path)
    row = next(line for line in (tmp_path / "BENCHMARKS.md").read_text().splitlines()
               if line.startswith("| [3.13-fp: -X perf active vs inactive]"))
    assert "| not measured |" in row and "1.10x" not in row
    page = " ".join((tmp_path / "suite-20261123T100000Z.md").read_text().split())
    assert "| wall clock (pyperf compare_to) |" in page and "1.10x slower" in page
    assert "BENCHMARKS.md's table shows only wall clock timed in interleaved pairs" in page


def test_summary_without_any_run_says_so(tmp_path):
    text = summary.render(tmp_path)
    assert "No standard-suite run yet" in text
    assert "| frame pointers: fp vs release | - | not run |" in text
    assert "## Each run in detail" in text and "- none yet" in text


def test_suite_command_line_errors(capsys):
    assert command.main(["suite", "--cell", "3.13-nope"]) == 2
    assert "unknown cell" in capsys.readouterr().err
    assert command.main(["suite", "--no-instructions"]) == 2
    assert "--no-instructions without --wallclock measures nothing" in capsys.readouterr().err
    assert command.main(["suite", "--wallclock", "--pairs", "5"]) == 2
    assert "fewer than 6 pairs; give --pairs 6 or more" in capsys.readouterr().err


def test_the_cost_table_puts_now_beside_before_and_upstream(tmp_path):
    """BENCHMARKS.md leads with each patched cell's -X perf cost: now, on the previous build, and in CPython as
    released (the vanilla twin), with the per-version targets."""
    def run(created, image, perf_go):
        results = suite_results(created, counts={
            "3.13-fp:inactive": {"go": 1000.0, "nbody": 1000.0}, "3.13-fp:perf": {"go": perf_go, "nbody": 1010.0},
            "3.13-fp-vanilla:inactive": {"go": 1000.0, "nbody": 1000.0},
            "3.13-fp-vanilla:perf": {"go": 2000.0, "nbody": 1010.0},
            "3.11-fp:inactive": {"go": 1000.0, "nbody": 1000.0}, "3.11-fp:perf": {"go": 1100.0, "nbody": 1000.0}},
            planned=[{"kind": "mode", "a": "3.13-fp:inactive", "b": "3.13-fp:perf"},
                     {"kind": "mode", "a": "3.13-fp-vanilla:inactive", "b": "3.13-fp-vanilla:perf"},
                     {"kind": "mode", "a": "3.11-fp:inactive", "b": "3.11-fp:perf"}])
        results["cells"]["3.13-fp-vanilla"] = dict(results["cells"]["3.13-fp"], vanilla=True)
        results["cells"]["3.13-fp"]["image_id"] = image
        return results
    # the same build measured twice, then a new build: "before" is the newest run of another build
    for created, image, go in [("2026-11-20T10:00:00Z", "sha256:old", 2000.0), ("2026-11-21T10:00:00Z", "sha256:old", 1990.0),
                               ("2026-11-25T10:00:00Z", "sha256:new", 1200.0)]:
        (tmp_path / f"suite-{created.replace('-', '').replace(':', '')}.json").write_text(json.dumps(run(created, image, go)))
    rows = {(r["cell"], r["mode"]): r for r in summary.mode_costs(tmp_path)}
    assert set(rows) == {("3.13-fp", "perf"), ("3.11-fp", "perf")}   # vanilla cells are upstream, not rows
    native = rows[("3.13-fp", "perf")]
    assert native["after"]["created"].startswith("2026-11-25") and native["before"]["created"].startswith("2026-11-21")
    assert native["upstream"]["geomean"] == pytest.approx((2.0 * 1.01) ** 0.5)
    assert rows[("3.11-fp", "perf")]["before"] is None   # the same build in every run
    table = "\n".join(summary.cost_table(tmp_path))
    line = next(x for x in table.splitlines() if x.startswith("| 3.13-fp | perf |"))
    assert "| 1.421 (worst go 2.00x; 2026-11-25) |" in line and "| 1.418 (worst go 1.99x; 2026-11-21) |" in line
    assert "**1.101 (worst go 1.20x; 2026-11-25)**" in line
    assert line.endswith("| <= 1.05, <= 1.2x: MISSED (mean 1.101 > 1.05) |")   # go at 1.20x is not above 1.2x
    line = next(x for x in table.splitlines() if x.startswith("| 3.11-fp | perf |"))
    assert "no `-X perf` in CPython 3.11" in line
    assert line.endswith("| <= 1.03, <= 1.1x: MISSED (mean 1.049 > 1.03) |")
    assert summary.render(tmp_path).index("## What -X perf costs") < summary.render(tmp_path).index("## Summary")


def test_the_cost_table_shows_the_calls_workload_beside_upstreams(tmp_path):
    """The cost table's calls column: the newest instruction count of the project's `calls` workload per cell and
    mode, CPython as released (the vanilla twin) beside it for native versions; '-' where none was counted."""
    test_the_cost_table_puts_now_beside_before_and_upstream(tmp_path)   # the suite runs the rows come from
    cell = {"version": "3.13", "variant": "fp", "arch": "x86_64", "support": "native", "vanilla": False}

    def instructions_run(created, perf_calls):
        configs = {f"{name}:{label}": {"cell": name, "label": label, "argv": []}
                   for name in ("3.13-fp", "3.13-fp-vanilla") for label in ("inactive", "perf")}
        timings = {"3.13-fp:inactive": {"calls": [[1000.0]]}, "3.13-fp:perf": {"calls": [[perf_calls]]},
                   "3.13-fp-vanilla:inactive": {"calls": [[1000.0]]}, "3.13-fp-vanilla:perf": {"calls": [[1500.0]]}}
        return {"created": created, "cells": {"3.13-fp": cell, "3.13-fp-vanilla": dict(cell, vanilla=True)},
                "configurations": configs, "timings": timings,
                "comparisons": [{"kind": "mode", "a": "3.13-fp:inactive", "b": "3.13-fp:perf"},
                                {"kind": "mode", "a": "3.13-fp-vanilla:inactive", "b": "3.13-fp-vanilla:perf"}]}
    (tmp_path / "instructions-20261120T100000Z.json").write_text(json.dumps(instructions_run("2026-11-20T10:00:00Z", 1400.0)))
    (tmp_path / "instructions-20261125T100000Z.json").write_text(json.dumps(instructions_run("2026-11-25T10:00:00Z", 1150.0)))
    table = "\n".join(summary.cost_table(tmp_path))
    assert "| calls (upstream / now) |" in table
    line = next(x for x in table.splitlines() if x.startswith("| 3.13-fp | perf |"))
    assert "| 1.500 (2026-11-25) / 1.150 (2026-11-25) |" in line   # the newest run, not the 1.400 of 2026-11-20
    line = next(x for x in table.splitlines() if x.startswith("| 3.11-fp | perf |"))
    assert "| - / - |" in line   # never counted

"""The side-by-side bench of perf and the other profilers: its readers, counts, command lines and table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cpython_perf.bench import profilers, summary
from cpython_perf.check.external import ExternalTarget
from cpython_perf.errors import DriverError
from cpython_perf.matrix import load_matrix

MATRIX = load_matrix()
FILE = "/bench/profiler_workloads.py"
SEED_CHAIN = profilers.workloads()["seed"][1]

PERF_TEXT = f"""python3 10/10 1.000000: task-clock:ppp:
\tffffffff81bdc7ad [unknown] ([unknown])
\t7f0000001000 deflate_slow (/usr/lib/x86_64-linux-gnu/libz.so.1.3.1)
\t7f0000002000 py::checksum_block:{FILE} (/tmp/perf-10.map)
\t7f0000003000 _PyEval_EvalFrameDefault (/usr/local/bin/python3.13)
\t7f0000004000 py::encode_batch:{FILE} (/tmp/perf-10.map)

python3 10/10 1.001000: task-clock:ppp:
\t55000001000 _PyEval_EvalFrameDefault (/usr/local/bin/python3.13)
\t7f0000002000 py::checksum_block:{FILE} (/tmp/perf-10.map)
\t7f0000005000 py::main:{FILE} (/tmp/perf-10.map)

perf 11/11 1.002000: task-clock:ppp:
\t7f0000002000 py::checksum_block:{FILE} (/tmp/perf-10.map)
"""


def test_the_workloads_chains_name_functions_of_the_program():
    import importlib.util

    spec = importlib.util.spec_from_file_location("w", profilers.BENCH_DIR / profilers.WORKLOAD_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, (hot, chain) in profilers.workloads().items():
        assert chain[0] == hot and callable(getattr(module, name))
        assert all(callable(getattr(module, f)) for f in chain if f != "<module>")


STACK_PROBE = """
import runpy, sys
file, workload, hot, out, timing = sys.argv[1:6]

def hook(frame, event, arg):   # the first call of the hot function in each process writes its file's frames
    if event == "call" and frame.f_code.co_name == hot and frame.f_code.co_filename == file:
        names, f = [], frame
        while f is not None:
            if f.f_code.co_filename == file:
                names.append(f.f_code.co_name)
            f = f.f_back
        with open(out, "a") as fh:
            fh.write(" ".join(names) + chr(10))
        sys.setprofile(None)

sys.argv = [file, workload, timing, "0.1"]
sys.setprofile(hook)
runpy.run_path(file, run_name="__main__")
"""


def test_each_workloads_chain_is_the_stack_its_hot_function_runs_in(tmp_path):
    """The chain a profiler must show is the real stack on this interpreter, e.g. no comprehension frame
    between two of its functions on the versions where a comprehension is a frame of its own (before 3.12)."""
    file = str(profilers.BENCH_DIR / profilers.WORKLOAD_FILE)
    for name, (hot, chain) in profilers.workloads().items():
        out = tmp_path / f"{name}.stacks"
        subprocess.run([sys.executable, "-c", STACK_PROBE, file, name, hot, str(out), str(tmp_path / "t.json")],
                       check=True, timeout=120)
        stacks = out.read_text().splitlines()
        assert stacks and all(line.split()[:len(chain)] == chain for line in stacks), (name, stacks[:3])


def test_each_workload_runs_and_times_its_work(tmp_path):
    for name in profilers.workloads():
        timing = tmp_path / f"{name}.json"
        subprocess.run([sys.executable, str(profilers.BENCH_DIR / profilers.WORKLOAD_FILE), name, str(timing), "0.02"],
                       check=True, timeout=120)
        assert json.loads(timing.read_text())["workload"] == name
        assert json.loads(timing.read_text())["seconds"] > 0
    done = subprocess.run([sys.executable, str(profilers.BENCH_DIR / profilers.WORKLOAD_FILE), "nope", "x"],
                          capture_output=True, text=True)
    assert done.returncode != 0 and "unknown workload 'nope'" in done.stderr


def test_perf_samples_are_kinded_and_counted():
    stacks = profilers.perf_stacks(PERF_TEXT)
    assert len(stacks) == 2   # perf's own sample is not the program's
    first = stacks[0][0]
    assert first[0][0] == profilers.KERNEL   # an unnamed kernel address
    assert [k for k, _, _ in first[1:]] == ["native", "py", "native", "py"]
    counts = profilers.attribution(stacks, ["checksum_block", "encode_batch"])
    # both samples are inside checksum_block; only the first carries encode_batch; the second is in the eval
    # loop (not C); the first is innermost in the kernel, at an address without a name (unnamed C)
    assert counts == {"samples": 2, "inside": 2, "full_chain": 1, "inside_c": 0, "inside_c_unnamed": 1, "kernel": 1}
    named = profilers.attribution(profilers.perf_stacks(PERF_TEXT.replace("[unknown] ([unknown])",
                                                                          "do_syscall_64 ([kernel.kallsyms])")),
                                  ["checksum_block"])
    assert named["inside_c"] == 1 and named["inside_c_unnamed"] == 0 and named["kernel"] == 1


def test_py_spy_native_frames_and_python_frames():
    raw = (f"<module> ({FILE}:160);main ({FILE}:154);seed ({FILE}:60);baz ({FILE}:56);bar ({FILE}:52);"
           f"foo ({FILE}:47) 7\n"
           f"<module> ({FILE}:160);main ({FILE}:154);seed ({FILE}:60);baz ({FILE}:56);bar ({FILE}:52);"
           f"foo ({FILE}:47);_PyLong_Add (/usr/local/bin/python3.13) 3\n"
           f"<module> ({FILE}:160);foo ({FILE}:47);0x7f00 (?) 2\n")
    stacks = profilers.py_spy_stacks(raw)
    assert stacks[1][0][0] == ("native", "_PyLong_Add", "/usr/local/bin/python3.13")
    counts = profilers.attribution(stacks, SEED_CHAIN)
    assert counts["inside"] == 12 and counts["full_chain"] == 10
    assert counts["inside_c"] == 3 and counts["inside_c_unnamed"] == 2 and counts["kernel"] == 0


def test_profiling_sampling_collapsed_text_with_base_names_and_native_markers():
    text = ("tid:14;<native>;<string>:<module>:1;pool.py:worker:125;<native>;"
            "profiler_workloads.py:work_item:139;profiler_workloads.py:crunch:134 74\n"
            "tid:14;<native>;profiler_workloads.py:work_item:139;profiler_workloads.py:crunch:134;<native> 6\n"
            "tid:8;<frozen runpy>:_run_code:87;profiler_workloads.py:main:154 5\n")
    stacks = profilers.sampling_stacks(text)
    assert stacks[0][0][0] == ("py", "crunch", "profiler_workloads.py")
    assert stacks[2][0][1] == ("py", "_run_code", "<frozen runpy>")
    counts = profilers.attribution(stacks, ["crunch", "work_item"])
    assert counts == {"samples": 85, "inside": 80, "full_chain": 80, "inside_c": 0, "inside_c_unnamed": 6, "kernel": 0}


def test_austin_frames_are_python():
    text = f"# austin: 4.0.0\nP1;T0:1;{FILE}:<module>:160;{FILE}:process_pool:140;{FILE}:crunch:134 1000\n"
    stacks = profilers.austin_stacks(text)
    assert stacks == [([("py", "crunch", FILE), ("py", "process_pool", FILE), ("py", "<module>", FILE)], 1)]
    assert profilers.attribution(stacks, ["crunch", "work_item"])["full_chain"] == 0


def _target(version="3.13", backends=("perf", "perf_jit"), free_threaded=False):
    cell = MATRIX.cell("3.13-fp")
    return profilers.BenchTarget("t", "image", "python3", version, cell, backends, free_threaded)


def test_profilers_of_a_target():
    run, skipped = profilers.profilers_of(_target())
    assert [p.key for p in run] == ["none", "perf-perf", "perf-perf_jit", "py-spy", "py-spy-native", "austin"]
    assert not skipped
    run, skipped = profilers.profilers_of(_target("3.15", ("perf",), free_threaded=True))
    assert [p.key for p in run] == ["none", "perf-perf", "profiling.sampling"]
    assert set(skipped) == {"py-spy", "austin"} and "py-spy#711" in skipped["py-spy"]


def test_command_lines_sample_at_one_rate_and_follow_workers():
    target = _target()
    run, _ = profilers.profilers_of(target)
    by_key = {p.key: p for p in run}
    rate = str(profilers.RATE)
    pool = {k: profilers.profiled_command(target, p, "process_pool", "/src/o", None, 0.5) for k, p in by_key.items()}
    seed = {k: profilers.profiled_command(target, p, "seed", "/src/o", None, 0.5) for k, p in by_key.items()}
    assert pool["none"] == f"python3 {FILE} process_pool /src/o/timing.json 0.5"
    assert f"-F {rate} -g" in pool["perf-perf"] and "-X perf " in pool["perf-perf"]
    assert "perf inject -i /src/o/perf.data --jit" in pool["perf-perf_jit"] and "dwarf_mmap()" in pool["perf-perf_jit"]
    assert "--subprocesses" in pool["py-spy"] and "--subprocesses" not in seed["py-spy"]
    assert "--native" in pool["py-spy-native"] and "--native" not in pool["py-spy"]
    assert " -C " in pool["austin"] and " -C " not in seed["austin"] and "-i 1001us" in pool["austin"]
    stock = profilers.BenchTarget("sid-3.15", "img", "/usr/bin/python3.15", "3.15",
                                  ExternalTarget("img", "/usr/bin/python3.15"), ("perf",))
    sampling = profilers.Profiler("profiling.sampling", "profiling.sampling", "profiling.sampling")
    command = profilers.profiled_command(stock, sampling, "process_pool", "/src/o", None, 1.0)
    assert command.startswith(f"/usr/bin/python3.15 -m profiling.sampling run -r {rate} --native --subprocesses "
                              "--collapsed -o /src/o/sampling.txt")


def test_rounds_rotate_the_order_of_each_workloads_sides():
    target = _target()
    run, _ = profilers.profilers_of(target)
    plan = [(w, p) for w in ("seed", "c_extensions") for p in run]

    def order(round_no):
        shell = profilers.round_shell(target, plan, round_no, None, 1.0)
        return [line.split("/src/failed/")[1].split(" ")[0] for line in shell.splitlines() if line.startswith("if ")]

    one, two = order(1), order(2)
    assert one != two and sorted(one) == sorted(two) == sorted(p.key for _, p in plan)
    assert order(len(run)) == order(2 * len(run))
    assert one[:len(run)] == [p.key for p in run[1:] + run[:1]]   # each workload's sides stay together


def test_slowdown_pairs_rounds():
    assert profilers.slowdown([2.0, 3.0, 4.4], [2.0, 2.0, 4.0]) == {"pairs": 3, "median": 1.1, "q1": 1.05,
                                                                      "q3": 1.3}
    assert profilers.slowdown([], [1.0]) is None


def _results():
    counts = {"samples": 100, "inside": 50, "full_chain": 49, "inside_c": 10, "inside_c_unnamed": 0, "kernel": 3}
    return {"created": "2026-12-03T00:00:00Z", "settings": {"rate": 999, "rounds": 2, "scale": 0.5},
            "tools": {"py-spy": "0.4.3", "austin": "4.0.0"},
            "workloads": {"seed": {"hot": "foo", "chain": SEED_CHAIN}},
            "targets": {"3.13-fp": {
                "python": "3.13", "image": "i", "skipped": {"austin": "not here"}, "failed": {"py-spy": "exit 1: no"},
                "profilers": {"none": {"label": "no profiler", "tool": "none"},
                              "perf-perf": {"label": "perf, -X perf", "tool": "perf"},
                              "py-spy": {"label": "py-spy", "tool": "py-spy"}},
                "workloads": {"seed": {"none": {"seconds": [1.0, 2.0], "counts": None},
                                       "perf-perf": {"seconds": [1.1, 2.0], "counts": counts},
                                       "py-spy": {"seconds": [], "counts": None}}}}}}


def test_the_table_shows_measures_failures_and_what_does_not_apply():
    rows = profilers.table_rows(_results())
    assert "| 3.13-fp | seed | perf, -X perf | 1.050 [1.025-1.075], 2 | 98% of 50 | 20% | 3% | 100 |" in rows
    assert any("py-spy | does not run: exit 1: no" in r for r in rows)
    assert any("| all | austin | not applicable: not here" in r for r in rows)


def test_benchmarks_md_has_the_newest_table(tmp_path):
    (tmp_path / "profilers-20261203T000000Z.json").write_text(json.dumps(_results()))
    text = summary.render(tmp_path, tmp_path / "BENCHMARKS.md")
    assert "## Side by side: perf and the profilers people pick instead" in text
    assert "98% of 50" in text


def test_each_interpreter_comes_from_the_newest_run_that_measured_it(tmp_path):
    older = _results()
    older["targets"]["3.11-fp"] = json.loads(json.dumps(older["targets"]["3.13-fp"]))
    newer = json.loads(json.dumps(_results()))
    newer["created"] = "2026-12-04T00:00:00Z"
    del newer["targets"]["3.13-fp"]
    newer["targets"]["3.11-fp"] = json.loads(json.dumps(older["targets"]["3.13-fp"]))
    newer["targets"]["3.11-fp"]["workloads"]["seed"]["perf-perf"]["counts"]["full_chain"] = 25
    (tmp_path / "profilers-20261203T000000Z.json").write_text(json.dumps(older))
    (tmp_path / "profilers-20261204T000000Z.json").write_text(json.dumps(newer))
    text = summary.render(tmp_path, tmp_path / "BENCHMARKS.md")
    rows = [line for line in text.splitlines() if line.startswith("| 3.1")]
    assert [r.split(" | ")[0] for r in rows if "perf, -X perf" in r] == ["| 3.11-fp", "| 3.13-fp"]
    assert any(r.startswith("| 3.11-fp | seed | perf, -X perf |") and "50% of 50" in r for r in rows)
    assert any(r.startswith("| 3.13-fp | seed | perf, -X perf |") and "98% of 50" in r for r in rows)
    flat = " ".join(text.split())
    assert "[2026-12-04T00:00:00Z](profilers-20261204T000000Z.md): 3.11-fp," in flat
    assert "[2026-12-03T00:00:00Z](profilers-20261203T000000Z.md): 3.13-fp," in flat
    # both pages are current (the index links them); the newer one links the older run of 3.11-fp
    assert "(profilers-20261203T000000Z.md): 3.13-fp" in flat


def test_bad_arguments_fail_before_anything_runs():
    with pytest.raises(DriverError, match="--rounds must be at least 1"):
        profilers.measure(MATRIX, [], [], rounds=0)
    with pytest.raises(DriverError, match="unknown workload nope"):
        profilers.measure(MATRIX, [], [], only=["nope"])
    with pytest.raises(DriverError, match="offer a perf backend"):
        profilers.cell_target(MATRIX.cell("3.11-fp-aarch64"))

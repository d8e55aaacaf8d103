"""cpython_perf.bench.jit_pipeline: what a run's container leaves read back, its analysis and its tables (no Docker)."""

from __future__ import annotations

import json
import struct
import subprocess

import pytest

from cpython_perf.bench import command, jit_pipeline as jp, summary
from cpython_perf.errors import DriverError
from cpython_perf.matrix import load_matrix
from cpython_perf.record import jit_inject as ji
from cpython_perf.record.perf_samples import parse_perf_script

MATRIX = load_matrix()
CAP = 300
F = "py::f_{}:/src/many_functions.py"
SPIN, MODULE = "py::spin:/src/many_functions.py", "py::<module>:/src/many_functions.py"


def script_text(chains: list[list[str]], start: float = 1.0) -> str:
    """perf script -F comm,pid,tid,time,event,ip,sym,dso text: one sample a chain (leaf first), a native frame
    under each."""
    out = []
    for i, chain in enumerate(chains):
        out.append(f"python3 42/42 {start + i / 1000:.6f}: 1001001 cycles:P:")
        out += [f"\t    7f00{j:04x} {sym}+0x10 (/tmp/jit-42-arena-0.so)" for j, sym in enumerate(chain)]
        out += ["\t    55550000 main+0x1 (/opt/cpython/bin/python3.13)", ""]
    return "\n".join(out)


def phases(**steps) -> str:
    """name=(milliseconds, status) -> phases.txt"""
    return "".join(f"{name} {ms} {rc}\n" for name, (ms, rc) in steps.items())


def step(seconds=None, status="done", cap=CAP):
    if status == "done":
        return {"status": "done", "seconds": seconds, "exit": 0}
    if status == "capped":
        return {"status": "capped", "seconds": None, "capped_at": cap, "exit": 124}
    if status == "failed":
        return {"status": "failed", "seconds": None, "elapsed": 1.0, "exit": 1}
    return {"status": "not run", "seconds": None}


def run_of(record=2.0, new=(0.1, 0.6), perf=(7.5, 1.6), map_script=0.05, loads=4000, agreement=True) -> dict:
    steps = {"record_jit": step(record) if record is not None else step(status="failed"),
             "new_inject": step(new[0]), "new_script": step(new[1]),
             "perf_inject": step(perf[0]) if perf[0] is not None else step(status="capped"),
             "perf_script": (step(perf[1]) if perf[1] is not None else
                             step(status="capped") if perf[0] is not None else step(status="not run")),
             "record_map": step(1.0), "map_script": step(map_script)}
    agree = {"compared": 1000, "agree": 1000, "differ": 0, "with_py": 990, "only_perf": 0, "only_new": 0,
             "examples": []} if agreement else None
    return {"steps": steps, "scripts": {}, "jitdump": {"code_loads": loads, "addresses": loads // 2},
            "agreement": agree, "workload_jit": {"functions": 2000}, "load_before": [1.0, 1.0, 1.0],
            "load_after": [1.5, 1.1, 1.0]}


def results_of(runs: dict, counts=(2000, 20000, 100000)) -> dict:
    return {"created": "2026-11-28T17:00:00Z", "cell": "3.13-fp", "machine": {"nproc": 2, "cpu": "x", "arch": "x86_64",
                                                                            "kernel": "6"},
            "cells": {"3.13-fp": {}},
            "settings": {"counts": list(counts), "cap_seconds": CAP, "frequency": 999,
                         "record_jit": "-F 999 -g -k 1 --call-graph dwarf -m $(dwarf_mmap)", "record_map": "-F 999 -g",
                         "script_fields": "comm,pid,tid,time,event,ip,sym,dso",
                         "workload": "benchmarks/many_functions.py N"},
            "target": {"count": 100000, "seconds": 20.0}, "runs": {str(k): v for k, v in runs.items()}}


def jitdump_bytes(addresses: list[int]) -> bytes:
    out = bytearray(ji.JITDUMP_HEADER.pack(ji.JITDUMP_MAGIC, 1, 40, 62, 0, 42, 1, 0))
    for index, addr in enumerate(addresses):
        body = ji.CODE_LOAD.pack(42, 42, addr, addr, 8, index) + f"py::f_{index}:/src/x.py".encode() + b"\0" + b"\xc3" * 8
        out += ji.JIT_RECORD.pack(ji.JIT_CODE_LOAD, 16 + len(body), 10 + index) + body
    return bytes(out)


# ---------------------------------------------------------------- what the container leaves


def test_phases_say_done_capped_failed_and_not_run():
    text = phases(record_jit=(2100, 0), new_inject=(90, 0), new_script=(600, 0), perf_inject=(139000, 0),
                  perf_script=(300004, 124), record_map=(1500, 2)) + "garbage line\n"
    got = jp.parse_phases(text, CAP)
    assert got["record_jit"] == {"status": "done", "seconds": 2.1, "exit": 0}
    assert got["perf_inject"]["seconds"] == 139.0
    assert got["perf_script"] == {"status": "capped", "seconds": None, "capped_at": CAP, "exit": 124}
    assert got["record_map"]["status"] == "failed" and got["record_map"]["seconds"] is None
    assert got["map_script"] == {"status": "not run", "seconds": None}
    # killed after timeout's grace period: capped too; a 124 well before the cap is the command's own failure
    assert jp.parse_phases("perf_script 310000 137\n", CAP)["perf_script"]["status"] == "capped"
    assert jp.parse_phases("perf_script 2000 124\n", CAP)["perf_script"]["status"] == "failed"


def test_chains_compared_per_sample():
    chain = [SPIN, F.format(7), F.format(6), MODULE]
    old = parse_perf_script(script_text([chain, chain, [], chain]))
    new = parse_perf_script(script_text([chain, [SPIN, F.format(9), MODULE], [], chain, chain]))
    got = jp.compare_chains(old, new)
    assert (got["compared"], got["agree"], got["differ"], got["with_py"]) == (4, 3, 1, 3)
    assert (got["only_perf"], got["only_new"]) == (0, 1)
    assert got["examples"] == [{"time": 1.001, "perf": chain, "new": [SPIN, F.format(9), MODULE]}]
    assert jp.script_counts(old) == {"samples": 4, "py_samples": 3}


def test_code_loads_of_a_jitdump(tmp_path):
    path = tmp_path / "jit-42.dump"
    path.write_bytes(jitdump_bytes([0x1000, 0x1110, 0x1000, 0x1220]))   # one slot reused
    assert jp.code_loads(path) == {"code_loads": 4, "addresses": 3}


def _container_dirs(tmp_path, phase_text: str, texts: dict[str, str]):
    src, tmp = tmp_path / "src", tmp_path / "tmp"
    src.mkdir()
    tmp.mkdir()
    (src / jp.PHASES).write_text(phase_text)
    (src / jp.RING_BUFFER).write_text("4096K\n")
    (src / "workload-jit.json").write_text(json.dumps({"pid": 42, "functions": 16}) + "\n")
    (src / "new_inject.err").write_text("jit-inject: 1 jitdump(s), 4 code loads -> 1 ELF file(s)\n")
    (tmp / "jit-42.dump").write_bytes(jitdump_bytes([0x1000, 0x1110]))
    for path, text in texts.items():
        (src / jp.OUTPUTS[path]).write_text(text)
    return src, tmp


def test_a_run_read_back_where_both_paths_finished(tmp_path):
    chain = [SPIN, F.format(1), MODULE]
    text = script_text([chain, chain, []])
    src, tmp = _container_dirs(tmp_path, phases(**{k: (100, 0) for k in jp.STEPS}),
                               {"new": text, "perf": text, "map": script_text([chain])})
    run = jp.read_run(src, tmp, CAP)
    assert run["jitdump"] == {"code_loads": 2, "addresses": 2} and run["ring_buffer"] == "4096K"
    assert run["scripts"] == {"new": {"samples": 3, "py_samples": 2}, "perf": {"samples": 3, "py_samples": 2},
                              "map": {"samples": 1, "py_samples": 1}}
    assert run["agreement"]["agree"] == run["agreement"]["compared"] == 3
    assert run["workload_jit"]["functions"] == 16 and run["workload_map"] is None


def test_a_run_read_back_where_perfs_path_was_stopped(tmp_path):
    chain = [SPIN, F.format(1), MODULE]
    steps = {k: (100, 0) for k in jp.STEPS}
    steps["perf_inject"] = (300002, 124)
    del steps["perf_script"]
    (tmp_path / "x").mkdir()
    src, tmp = _container_dirs(tmp_path / "x", phases(**steps), {"new": script_text([chain]), "map": ""})
    (src / "perf.txt").write_text("half a sampl")        # what a stopped perf script leaves is never read
    run = jp.read_run(src, tmp, CAP)
    assert run["steps"]["perf_inject"]["status"] == "capped" and run["steps"]["perf_script"]["status"] == "not run"
    assert "perf" not in run["scripts"] and run["agreement"] is None
    row = jp.analyse_run(run)
    assert row["perf"] is None and row["perf_text"] == "inject stopped at the 300 s cap"
    assert row["agree_text"] == "not compared: perf's path stopped at the cap"
    assert row["end_to_end"] == pytest.approx(0.3)


# ---------------------------------------------------------------- analysis


def test_a_capped_step_never_reads_as_a_finished_figure():
    row = jp.analyse_run(run_of(perf=(139.0, None), agreement=False))
    assert row["perf"] is None
    assert row["perf_text"] == "139 s + script stopped at the 300 s cap (> 439 s)"
    assert row["agree_text"] == "not compared: perf's path stopped at the cap"
    done = jp.analyse_run(run_of())
    assert done["perf"] == pytest.approx(9.1) and done["perf_text"] == "7.50 + 1.60 = 9.10 s"
    assert done["new_text"] == "0.10 + 0.60 = 0.70 s" and done["end_to_end"] == pytest.approx(2.7)
    assert done["agree_text"] == "1,000 of 1,000" and done["agree"]


def test_disagreement_and_unmatched_samples_are_said():
    run = run_of()
    run["agreement"].update(agree=990, differ=10, only_new=2)
    row = jp.analyse_run(run)
    assert row["agree_text"] == "990 of 1,000 (10 differ); 2 in one path only" and not row["agree"]


def test_target_met_not_met_and_not_measured():
    fast = results_of({100000: run_of(record=5.0, new=(1.5, 1.9))})
    assert jp.target_verdict(fast) == ("N=100k end to end (record + jit-inject + perf script) < 20 s: met (8.40 s)")
    slow = results_of({100000: run_of(record=5.0, new=(1.5, 19.0))})
    assert jp.target_verdict(slow).endswith(": not met (25.5 s)")
    broken = run_of()
    broken["steps"]["new_script"] = step(status="capped")
    assert "not met (the new path did not finish: 0.10 s + script stopped at the 300 s cap" in \
        jp.target_verdict(results_of({100000: broken}))
    assert jp.target_verdict(results_of({2000: run_of()}, counts=(2000,))).endswith(
        "not measured (no N=100,000 in this run)")


# ---------------------------------------------------------------- tables


def measured() -> dict:
    return results_of({2000: run_of(record=2.1, new=(0.09, 0.6), perf=(7.5, 1.6), loads=4486),
                       20000: run_of(record=3.0, new=(0.33, 0.94), perf=(57.0, 131.0), loads=44000),
                       100000: run_of(record=5.0, new=(1.5, 1.9), perf=(139.0, None), loads=220000,
                                      agreement=False)})


def test_summary_table_has_a_row_per_n_and_the_target():
    lines = jp.summary_lines(measured(), "results/bench/jit-pipeline-20261128T170000Z.md")
    assert lines[0] == "### perf_jit pipeline: seconds against code objects"
    assert "[3.13-fp, 2026-11-28T17:00:00Z](results/bench/jit-pipeline-20261128T170000Z.md)" in lines[2]
    header = lines.index(next(line for line in lines if line.startswith("| N")))
    assert [c.strip() for c in lines[header].strip("|").split("|")] == [
        "N (code loads)", "record", "perf inject --jit + script", "jit-inject + script", "end to end (new)",
        "-X perf script", "samples agree"]
    rows = lines[header + 2:header + 5]
    assert rows[0] == ("| 2k (4,486) | 2.10 s | 7.50 + 1.60 = 9.10 s | 0.09 + 0.60 = 0.69 s | **2.79 s** | 0.05 s | "
                       "1,000 of 1,000 |")
    assert rows[1].startswith("| 20k (44,000) | 3.00 s | 57.0 + 131 = 188 s | 0.33 + 0.94 = 1.27 s | **4.27 s** |")
    assert rows[2] == ("| 100k (220,000) | 5.00 s | 139 s + script stopped at the 300 s cap (> 439 s) | "
                       "1.50 + 1.90 = 3.40 s | **8.40 s** | 0.05 s | not compared: perf's path stopped at the cap |")
    assert "Target: N=100k end to end (record + jit-inject + perf script) < 20 s: met (8.40 s)." in lines


def test_page_of_a_run_lists_every_step_and_the_load():
    text = jp.render_markdown(measured(), "results/bench/jit-pipeline-20261128T170000Z.json")
    assert text.startswith("## perf_jit pipeline: seconds against code objects")
    assert "](" not in text.split("### Each step")[0].split("\n", 3)[3].split("|")[0]   # no link to itself
    assert "| 100,000 | 5.00 s | 1.50 s | 1.90 s | 139 s | stopped at the 300 s cap | 1.00 s | 0.05 s |" in text
    assert "| 2,000 | 2,000 | 4,486 (2,243) |" in text and "1.0, 1.0, 1.0 | 1.5, 1.1, 1.0 |" in text


def test_benchmarks_md_shows_the_newest_run_in_its_first_section(tmp_path):
    older = measured()
    older["created"] = "2026-11-27T10:00:00Z"
    older["runs"]["100000"]["steps"]["new_script"]["seconds"] = 40.0
    (tmp_path / "jit-pipeline-20261127T100000Z.json").write_text(json.dumps(older))
    (tmp_path / "jit-pipeline-20261128T170000Z.json").write_text(json.dumps(measured()))
    target = tmp_path / "BENCHMARKS.md"
    summary.refresh_summary(target, tmp_path)
    text = target.read_text()
    assert "## perf_jit pipeline: seconds against code objects" in text      # no cost table here: a section
    assert "[3.13-fp, 2026-11-28T17:00:00Z](jit-pipeline-20261128T170000Z.md)" in text
    assert ": met (8.40 s)." in text and "43.5" not in text
    assert "- [perf_jit pipeline, 2026-11-28T17:00:00Z](jit-pipeline-20261128T170000Z.md): 3.13-fp" in text
    page = (tmp_path / "jit-pipeline-20261128T170000Z.md").read_text()
    assert page.startswith("# perf_jit pipeline") and "do not edit by hand" in page
    assert "[jit-pipeline-20261127T100000Z](jit-pipeline-20261127T100000Z.md)" in page   # earlier runs linked
    assert text.index("perf_jit pipeline: seconds") < text.index("## Summary")


# ---------------------------------------------------------------- the command and the container's script


def test_the_group_and_its_options():
    assert command.GROUPS["jit-pipeline"] is jp
    assert jp._counts("2000, 20000,100000") == [2000, 20000, 100000]
    for bad in ("", "2k", "0,5"):
        with pytest.raises(DriverError, match="--counts"):
            jp._counts(bad)


def test_the_container_script_caps_every_step_in_order():
    cell = MATRIX.cell("3.13-fp")
    script = jp.shell_script(cell, 20000, 123)
    assert subprocess.run(["sh", "-n"], input=script, text=True).returncode == 0
    assert 'timeout -k 10 123 "$@"' in script
    assert [script.index(f"step {name} ") for name in jp.STEPS] == sorted(script.index(f"step {name} ")
                                                                        for name in jp.STEPS)
    assert "-F 999 -g -k 1 --call-graph dwarf -m $(dwarf_mmap) -o /src/perf.data -- python3 -X perf_jit " \
           "/src/many_functions.py 20000" in script
    assert "perf record -q -F 999 -g -o /src/perf.map.data -- python3 -X perf /src/many_functions.py 20000" in script
    assert "python3 -E /src/jit_inject.py -i /src/perf.data -o /src/perf.arena.data" in script
    assert "perf inject -i /src/perf.data --jit -o /src/perf.jit.data" in script

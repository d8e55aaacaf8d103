"""Parsers of the fidelity / map-growth / instruction-count benchmarks (no Docker)."""

from __future__ import annotations

import struct

import pytest

from cpython_perf.bench import fidelity, instructions
from cpython_perf.errors import DriverError


def test_py_spy_raw_output_is_measured_leaf_first():
    raw = "\n".join([
        "<module> (/bench/seed.py:26);baz (/bench/seed.py:22);bar (/bench/seed.py:18);foo (/bench/seed.py:13) 90",
        "<module> (/bench/seed.py:26);baz (/bench/seed.py:22);foo (/bench/seed.py:13) 10",   # bar missing
        "<module> (/bench/seed.py:26);baz (/bench/seed.py:22) 5",                           # not inside foo
        "_find_and_load (<frozen importlib._bootstrap>:1007) 3",
    ])
    got = fidelity.py_spy_chain_counts(raw)
    assert got == {"process_samples": 108, "inside_samples": 100, "full_chain_samples": 90, "fraction": 0.9}


def test_py_spy_foo_of_another_file_is_not_inside():
    got = fidelity.py_spy_chain_counts("<module> (/x.py:1);foo (/x.py:2) 7")
    assert got["inside_samples"] == 0 and got["fraction"] == 0.0


def test_perf_map_entries_and_growth():
    text = "\n".join(["7f00 8 py::foo:/bench/workloads.py", "7f10 8 py::Klass.method:/bench/workloads.py",
                      "7f20 8 py::foo:/bench/workloads.py", "7f30 8 py::<module>:<frozen site>", "garbage"])
    entries = fidelity.perf_map_entries(text)
    assert entries[3] == ("<module>", "<frozen site>")
    growth = fidelity.map_growth(entries, [["foo", "/bench/workloads.py", 1], ["Klass.method", "/bench/workloads.py", 5]],
                                 "/bench/workloads.py")
    assert growth == {"entries_total": 4, "entries_for_file": 3, "code_objects_executed": 2,
                      "distinct_names_written": 2, "names_written_twice": 1}


def _jitdump(names: list[str]) -> bytes:
    header = struct.pack("<IIIIIIQQ", fidelity.JITDUMP_MAGIC, 1, 40, 62, 0, 7, 0, 0)
    records = b""
    for i, name in enumerate(names):
        body = struct.pack("<IIQQQQ", 7, 7, 0x1000 + i, 0x1000 + i, 16, i) + name.encode() + b"\0" + b"\xcc" * 16
        records += struct.pack("<IIQ", fidelity.JIT_CODE_LOAD, 16 + len(body), i) + body
    unwind = struct.pack("<IIQ", 4, 24, 9) + b"\0" * 8    # another record kind is skipped
    return header + records + unwind


def test_jitdump_code_load_names():
    data = _jitdump(["py::foo:/bench/workloads.py", "py::<lambda>:/bench/workloads.py", "not-python"])
    assert fidelity.jitdump_entries(data) == [("foo", "/bench/workloads.py"), ("<lambda>", "/bench/workloads.py")]
    with pytest.raises(DriverError, match="magic"):
        fidelity.jitdump_entries(b"\0" * 64)


def test_cachegrind_total_is_read():
    stderr = "==1== Cachegrind, a high-precision tracing profiler\n==1== \n==1== I refs:        676,798,258\n"
    assert instructions.parse_instructions(stderr) == 676798258
    with pytest.raises(DriverError, match="I refs"):
        instructions.parse_instructions("valgrind: command not found")


def test_fidelity_markdown_names_misses(tmp_path):
    cell = {"modes": ["perf_jit"], "python": "3.11.2", "support": "backport",
            "perf": {"perf_jit": {"fraction": 0.8, "inside_samples": 10, "full_chain_samples": 8, "process_samples": 20,
                                  "cost": {"record": 1000, "inject": 200, "script": 900, "data_bytes": 5_000_000}}},
            "samply": {"perf_jit": {"fraction": 1.0, "inside_samples": 9, "full_chain_samples": 9, "process_samples": 12,
                                    "seconds": 2.0}},
            "py-spy": {"fraction": 1.0, "inside_samples": 50, "full_chain_samples": 50, "process_samples": 60},
            "map_growth": {"perf_jit": {"entries_total": 300, "entries_for_file": 70, "code_objects_executed": 70,
                                        "distinct_names_written": 70, "names_written_twice": 0}}}
    results = {"created": "2026-11-22T18:00:00Z", "settings": {"seed_n": 5, "py_spy_rate": 999, "perf_rate": 9999,
               "samply_rate": 9999, "map_scale": 0.05}, "tools": {"samply": "s", "py-spy": "p", "inferno": "i"},
               "targets": fidelity.TARGETS, "cells": {"3.11-release": cell}}
    text = fidelity.render_markdown(results)
    assert "MISSED by 10.0 points (80.0% < 90%)" in text
    assert "| 3.11-release | perf_jit | 300 | 70 | 70 | 0 |" in text


def test_host_build_lists_the_modules_make_could_not_build():
    from cpython_perf.bench import build_cost

    output = ("building extensions\n\nThe necessary bits to build these optional modules were not found:\n"
              "_bz2                  _dbm                  _tkinter\n_uuid\nTo find the necessary bits, look in setup.py"
              "\n\nmore\n")
    assert build_cost.missing_modules(output) == ["_bz2", "_dbm", "_tkinter", "_uuid"]
    assert build_cost.missing_modules("all good\n") == []

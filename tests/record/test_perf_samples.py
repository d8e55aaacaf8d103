from __future__ import annotations

import pytest

from cpython_perf.bench import fidelity
from cpython_perf.matrix import PERF_MODES
from cpython_perf.record.perf_samples import (PerfScriptError, chain_report, min_chain_fraction, parse_perf_script,
                                              py_symbol, python_frame_count)

from ..conftest import dedent

S = "/src/script.py"
CHAIN = [py_symbol(f, S) for f in ("foo", "bar", "baz", "<module>")]

# Shaped like `perf script -F comm,pid,tid,time,event,ip,sym,dso` prints it.
TEXT = dedent(f"""
    python3    42/42    100.000001: cpu-clock:ppp: 
    \t    55d0c0a1b2c3 _PyEval_EvalFrameDefault (/opt/cpython/bin/python3.13)
    \t    7f00000010a0 py::foo:{S} (/tmp/perf-42.map)
    \t    55d0c0a1b000 _PyEval_EvalFrameDefault (/opt/cpython/bin/python3.13)
    \t    7f0000001080 py::bar:{S} (/tmp/perf-42.map)
    \t    7f0000001060 py::baz:{S} (/tmp/perf-42.map)
    \t    7f0000001040 py::<module>:{S} (/tmp/perf-42.map)
    \t    55d0c0a00000 main (/opt/cpython/bin/python3.13)

    python3    42/42    100.000002: cpu-clock:ppp: 
    \t    55d0c0a1b2c3 _PyLong_Add+0x13 (/opt/cpython/bin/python3.13)
    \t    7f00000010a0 py::foo:{S} (/tmp/perf-42.map)
    \t    7f0000001040 py::<module>:{S} (/tmp/perf-42.map)

    python3    42/42    100.000003: cpu-clock:ppp: 
    \t    ffffffff8100 do_syscall_64 ([kernel.kallsyms])
    \t    55d0c0a00000 [unknown] ([unknown])

    perf-exec  41/41    100.000000: cpu-clock:ppp: 
    \t    ffffffff8100 do_syscall_64 ([kernel.kallsyms])
    """)


def test_parse_frames_leaf_first():
    samples = parse_perf_script(TEXT)
    assert [s.comm for s in samples] == ["python3", "python3", "python3", "perf-exec"]
    first = samples[0]
    assert (first.pid, first.tid, first.event) == (42, 42, "cpu-clock:ppp")
    assert first.frames[0].symbol == "_PyEval_EvalFrameDefault"
    assert first.frames[1].dso == "/tmp/perf-42.map"
    assert first.python_frames() == CHAIN
    assert samples[1].frames[0].symbol == "_PyLong_Add"  # symbol offsets are dropped


def test_a_mapping_of_a_deleted_file():
    """perf script names a file deleted since it was mapped (a memfd, a replaced library) `(PATH (deleted))`:
    seen in whole-machine recordings (record --container -- -a)."""
    text = ("node  7/7  1.000000: cycles: \n"
            "\t    7f301b3d2035 [unknown] (/memfd:sealed-91173221a7ea (deleted))\n"
            "\t    55d0c0a00000 main (/usr/bin/node)\n")
    frames = parse_perf_script(text)[0].frames
    assert [f.dso for f in frames] == ["/memfd:sealed-91173221a7ea (deleted)", "/usr/bin/node"]


def test_chain_report_counts_only_samples_inside_foo():
    report = chain_report(parse_perf_script(TEXT), CHAIN)
    assert report.process_samples == 3
    assert report.inside_samples == 2
    assert report.full_chain_samples == 1
    assert report.fraction == 0.5
    assert report.example_bad == [[CHAIN[0], CHAIN[3]]]
    assert "1 of 2 samples" in report.summary()


def test_min_chain_fraction_per_mode():
    assert min_chain_fraction("perf") == 0.95
    assert min_chain_fraction("perf_jit") == 0.90
    # every mode the matrix knows has a bar; the fidelity benchmark's targets are the same table
    assert {m: min_chain_fraction(m) for m in PERF_MODES} == fidelity.TARGETS
    with pytest.raises(ValueError, match="perf_jitt.*known: perf, perf_jit"):
        min_chain_fraction("perf_jitt")


def test_min_chain_fraction_fails_one_broken_stack_in_three():
    """The bar is what makes the seed test able to fail: 2 of 3 good stacks (the old 50% bar passed
    it) fails both modes; 19 of 20 passes frame pointers, 9 of 10 passes perf_jit."""
    assert 2 / 3 < min_chain_fraction("perf_jit") < min_chain_fraction("perf")
    assert 19 / 20 >= min_chain_fraction("perf") and 18 / 20 < min_chain_fraction("perf")
    assert 9 / 10 >= min_chain_fraction("perf_jit") and 17 / 20 < min_chain_fraction("perf_jit")


def test_chain_must_be_in_order():
    reversed_text = TEXT.replace("py::bar", "py::TMP").replace("py::baz", "py::bar").replace("py::TMP", "py::baz")
    report = chain_report(parse_perf_script(reversed_text), CHAIN)
    assert report.full_chain_samples == 0


def test_negative_control_counts_python_frames():
    samples = parse_perf_script(TEXT)
    assert python_frame_count(samples) == 6
    assert python_frame_count(samples[2:]) == 0


def test_comm_with_spaces_and_symbols_with_parentheses():
    text = "Thread 1 (x)  7/9  1.5: task-clock: \n\t  10 operator()(int) (/usr/lib/libfoo.so (gone))\n"
    with pytest.raises(PerfScriptError):
        parse_perf_script(text)  # a dso with parentheses other than " (deleted)" is not something perf prints
    text = "Thread 1 (x)  7/9  1.5: task-clock: \n\t  10 operator()(int) (/usr/lib/libfoo.so (deleted))\n"
    assert parse_perf_script(text)[0].frames[0].dso == "/usr/lib/libfoo.so (deleted)"   # a file deleted since
    text = "Thread 1 (x)  7/9  1.5: task-clock: \n\t  10 operator()(int) (/usr/lib/libfoo.so)\n"
    [sample] = parse_perf_script(text)
    assert sample.comm == "Thread 1 (x)" and sample.tid == 9
    assert sample.frames[0].symbol == "operator()(int)"


def test_garbage_is_an_error_not_an_empty_result():
    with pytest.raises(PerfScriptError, match="line 1"):
        parse_perf_script("this is not perf output\n")

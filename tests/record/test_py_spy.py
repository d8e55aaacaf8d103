"""py-spy's command and raw output (cpython_perf.record.py_spy; no Docker)."""

from __future__ import annotations

from cpython_perf.record import py_spy

NATIVE = "\n".join([
    # --native under -X perf with frame records: trampolines as '0x.. (?)' where a C call entered the frame
    "0x7f2c (libc.so.6);0x7f2caf6 (?);<module> (/src/p.py:15);0x7f2cb06 (?);calls (/src/p.py:14);"
    "top (/src/p.py:10);mid (/src/p.py:8);leaf (/src/p.py:5) 270",
    # a C function called from leaf is innermost
    "0x7f2c (libc.so.6);<module> (/src/p.py:15);calls (/src/p.py:14);top (/src/p.py:10);mid (/src/p.py:8);"
    "leaf (/src/p.py:5);PyLong_FromLong (python3.13) 20",
    # mid missing
    "0x7f2c (libc.so.6);<module> (/src/p.py:15);calls (/src/p.py:14);top (/src/p.py:10);leaf (/src/p.py:5) 10",
    "unicode_dealloc (python3.13) 1",
])
CHAIN = ("leaf", "mid", "top", "calls", "<module>")


def test_native_stacks_compare_the_files_frames_only():
    got = py_spy.chain_counts(NATIVE, CHAIN, "/src/p.py", file_frames_only=True)
    assert got == {"process_samples": 301, "inside_samples": 300, "full_chain_samples": 290,
                   "fraction": 290 / 300}


def test_without_file_frames_only_the_innermost_frame_must_be_the_leaf():
    got = py_spy.chain_counts(NATIVE, CHAIN, "/src/p.py")
    # the trampolines' '0x.. (?)' frames break the chain, and the C-innermost stack is not inside leaf
    assert got["inside_samples"] == 280 and got["full_chain_samples"] == 0


def test_raw_stacks_are_innermost_first_and_skip_malformed_lines():
    stacks = py_spy.raw_stacks("<module> (/a.py:1);f (/a.py:2) 3\nno count here\n\n")
    assert stacks == [([("f", "/a.py"), ("<module>", "/a.py")], 3)]


def test_record_command():
    assert py_spy.record_command("/opt/py-spy/py-spy", ["python3", "/src/p.py"], "/src/out.txt", 199, native=True) == [
        "/opt/py-spy/py-spy", "record", "-r", "199", "-f", "raw", "--full-filenames", "--native", "-o",
        "/src/out.txt", "--", "python3", "/src/p.py"]

"""Austin's command and its collapsed text (cpython_perf.record.austin; no Docker), and its pin in matrix.yaml."""

from __future__ import annotations

from cpython_perf.matrix import load_matrix
from cpython_perf.record import austin, py_spy

TEXT = """\
# austin: 4.0.0
# mode: wall
P7;T0:7;/src/p.py:<module>:13;/src/p.py:top:10;/src/p.py:mid:8;/src/p.py:leaf:5 1065
P7;T0:7;/src/p.py:<module>:13;/src/p.py:top:10;/src/p.py:leaf:5 1002
P7;T0:7;C:\\\\odd:name.py:f:3 998
P7;T0:7 79
"""


def test_the_command_samples_the_program_into_a_mojo_file():
    assert austin.record_command("/opt/austin/austin", ["python3", "/src/p.py"], "/src/a.mojo", 1000) == [
        "/opt/austin/austin", "-i", "1000us", "-o", "/src/a.mojo", "python3", "/src/p.py"]


def test_collapsed_text_is_read_innermost_first_one_sample_a_line():
    stacks = austin.collapsed_stacks(TEXT)
    assert stacks[0] == ([("leaf", "/src/p.py"), ("mid", "/src/p.py"), ("top", "/src/p.py"),
                          ("<module>", "/src/p.py")], 1)
    assert stacks[2][0] == [("f", "C:\\\\odd:name.py")]      # a file with colons keeps them
    assert stacks[3] == ([], 1)                              # a sample without Python frames
    counts = py_spy.stack_chain_counts(stacks, ("leaf", "mid", "top", "<module>"), "/src/p.py")
    assert (counts["process_samples"], counts["inside_samples"], counts["full_chain_samples"]) == (4, 2, 1)


def test_austin_is_pinned_by_version_and_hash():
    pin = load_matrix().profilers.austin
    assert pin["version"] and len(pin["sha256"]) == 64

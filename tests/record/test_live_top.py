"""The table of `record --container --live` (cpython_perf/record/live_top.py), from parsed samples."""

from __future__ import annotations

from cpython_perf.record.live_top import top_table
from cpython_perf.record.perf_samples import parse_perf_script

SCRIPT = "".join(
    f"python3    7/7    {10 + i / 1000:.6f}:    1001001 cpu-clock:\n"
    + (f"\t    7f00000010{i % 2:02x} {'builtin_id' if i % 4 else 'mi_free'}+0x4 (/usr/bin/python3.13)\n")
    + "\t    7f0000002000 py::foo:/src/app.py (/tmp/perf-7.map)\n"
    + ("\t    7f0000002100 py::bar:/src/app.py (/tmp/perf-7.map)\n" if i % 3 else "")
    + "\t    7f0000002200 py::<module>:/src/app.py (/tmp/perf-7.map)\n\n"
    for i in range(12))


def test_the_table_ranks_innermost_functions_then_python_ones_by_total():
    lines = top_table(parse_perf_script(SCRIPT), entries=5, title="t, window 1: ")
    assert lines[0] == "t, window 1: 12 samples, 12 with Python frames"
    c_rows = lines[lines.index("   self   total  function (innermost)") + 2:]
    assert c_rows[0].split() == ["75.0%", "75.0%", "builtin_id", "(/usr/bin/python3.13)"]
    assert c_rows[1].split() == ["25.0%", "25.0%", "mi_free", "(/usr/bin/python3.13)"]
    py_rows = [l.split() for l in lines[lines.index("  total    self  Python function (anywhere in the stack)") + 2:]]
    assert [r[2] for r in py_rows] == ["py::<module>:/src/app.py", "py::foo:/src/app.py", "py::bar:/src/app.py"]
    assert py_rows[2][:2] == ["66.7%", "0.0%"]


def test_an_empty_window_says_so():
    assert top_table([], title="w: ") == ["w: 0 samples, 0 with Python frames"]

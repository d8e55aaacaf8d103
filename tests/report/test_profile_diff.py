"""`python -m cpython_perf diff BASELINE NEW` (cpython_perf/report/profile_diff.py): the functions whose share
moved, from two profile directories, and the differential flame graph drawn by inferno in the tools image
(that test is marked container)."""

from __future__ import annotations

import argparse
import re

import pytest

from cpython_perf import cli
from cpython_perf.errors import DriverError
from cpython_perf.report import profile_diff

BEFORE = """\
python3;main;py::<module>:/src/app.py;py::handle:/src/app.py;py::parse:/src/app.py 60
python3;main;py::<module>:/src/app.py;py::handle:/src/app.py;py::render:/src/app.py 40
"""
# parse got faster, render slower, and a new function appeared
AFTER = """\
python3;main;py::<module>:/src/app.py;py::handle:/src/app.py;py::parse:/src/app.py 20
python3;main;py::<module>:/src/app.py;py::handle:/src/app.py;py::render:/src/app.py 70
python3;main;py::<module>:/src/app.py;py::handle:/src/app.py;py::cache:/src/app.py;__memcpy_avx2 10
"""


def _dirs(tmp_path, before=BEFORE, after=AFTER):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    (a / "stacks.folded").write_text(before)
    (b / "stacks.folded").write_text(after)
    return a, b


def test_the_most_moved_functions_come_first():
    rows = profile_diff.shifts(profile_diff.parse_folded(BEFORE), profile_diff.parse_folded(AFTER))
    by_name = {r.function: r for r in rows}
    assert rows[0].function == "py::parse:/src/app.py"
    assert by_name["py::parse:/src/app.py"].total_before == pytest.approx(0.6)
    assert by_name["py::parse:/src/app.py"].total_after == pytest.approx(0.2)
    assert by_name["py::render:/src/app.py"].self_after == pytest.approx(0.7)
    assert by_name["py::cache:/src/app.py"].total_before == 0 and by_name["py::cache:/src/app.py"].total_after == pytest.approx(0.1)
    assert by_name["py::handle:/src/app.py"].moved == pytest.approx(0)      # in every stack, before and after
    assert "python3" not in by_name                                        # the process name is no function


def test_the_table_is_written_and_printed(tmp_path):
    a, b = _dirs(tmp_path)
    said = []
    args = argparse.Namespace(baseline=str(a), new=str(b), out=None, top=3, no_flamegraph=True)
    assert profile_diff.run(args, log=said.append) == 0
    table = (b / "diff" / "diff.md").read_text()
    assert "| `py::parse:/src/app.py` | 60.0% | 20.0% | 60.0% | 20.0% | -40.0 |" in table
    assert table.count("\n| `") == 3
    assert any("baseline" in line and "100 samples" in line for line in said)


def test_a_directory_with_only_perf_script_is_folded_first(tmp_path):
    a, b = _dirs(tmp_path)
    (a / "stacks.folded").unlink()
    (a / "perf.script.txt").write_text(
        "python3    7/7    10.000000:    1001001 cpu-clock:\n"
        "\t    7f0000002000 py::parse:/src/app.py (/tmp/perf-7.map)\n"
        "\t    55555555a000 main+0x20 (/usr/bin/python3)\n\n")
    stacks = profile_diff.parse_folded(profile_diff.folded_of(a))
    assert stacks == {("python3", "main", "py::parse:/src/app.py"): 1}


@pytest.mark.parametrize("setup, message", [
    (lambda a: a.rename(a.with_name("gone")), "not a directory"),
    (lambda a: (a / "stacks.folded").unlink(), "neither stacks.folded nor perf.script.txt"),
    (lambda a: (a / "stacks.folded").write_text("no count here\n"), "is not `frame;frame;... COUNT`"),
    (lambda a: (a / "stacks.folded").write_text(""), "holds no sample"),
])
def test_bad_input_is_a_clear_error(tmp_path, setup, message):
    a, b = _dirs(tmp_path)
    setup(a)
    args = argparse.Namespace(baseline=str(a), new=str(b), out=None, top=3, no_flamegraph=True)
    with pytest.raises(DriverError, match=re.escape(message)):
        profile_diff.run(args, log=lambda *_: None)
    assert not (b / "diff" / "diff.md").exists()


def test_diff_is_a_subcommand(tmp_path, capsys):
    a, b = _dirs(tmp_path)
    assert cli.main(["diff", str(a), str(b), "--no-flamegraph", "--top", "2"]) == 0
    assert "py::parse:/src/app.py" in capsys.readouterr().out


@pytest.mark.container
def test_the_differential_flame_graph_colours_what_grew_and_shrank(tmp_path):
    from cpython_perf import host

    a, b = _dirs(tmp_path)
    args = argparse.Namespace(baseline=str(a), new=str(b), out=None, top=5, no_flamegraph=False)
    profile_diff.run(args, client=host.docker_client(print), log=print)
    svg = (b / "diff" / "diff.svg").read_text()
    fills = {}
    for title, fill in re.findall(r"<title>([^<]*)</title>\s*<rect[^>]*fill=\"rgb\((\d+,\d+,\d+)\)\"", svg):
        fills[title.split(" (")[0]] = tuple(int(x) for x in fill.split(","))
    # inferno's differential colours: red (more samples than the baseline), blue (fewer)
    render, parse = fills["py::render:/src/app.py"], fills["py::parse:/src/app.py"]
    assert render[0] > render[2], f"render grew but is not red: {render}"
    assert parse[2] > parse[0], f"parse shrank but is not blue: {parse}"

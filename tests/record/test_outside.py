"""record --container: its perf command lines, its choices and its command line (no Docker; the recording itself
is conformance/test_outside_recording.py's)."""

from __future__ import annotations

import pytest

from cpython_perf import cli
from cpython_perf.errors import DriverError
from cpython_perf.record import outside


def test_record_options_per_mode():
    assert outside.record_options("perf", 999, None, []) == ["-F", "999", "-g"]
    jit = outside.record_options("perf_jit", 499, "cpu-clock", ["--call-graph", "dwarf,32768"])
    assert jit[:4] == ["-e", "cpu-clock", "-F", "499"]
    assert jit[4:10] == ["-k", "1", "--call-graph", "dwarf", "-m", "$(dwarf_mmap)"]
    assert jit[-2:] == ["--call-graph", "dwarf,32768"]   # the user's options last: perf takes the last one
    assert outside.record_options("perf", 999, "cpu-clock", ["-e", "cycles"])[:2] == ["-F", "999"]
    with pytest.raises(DriverError):
        outside.record_options("perf", 0, None, [])


def test_the_shell_records_the_pids_and_stops_after_seconds():
    shell = outside.record_shell("perf", ["-F", "999", "-m", "$(dwarf_mmap)", "-e", "cycles:u"], [12, 345],
                                 "/out/perf.data", 30)
    last = shell.strip().splitlines()[-1]
    assert last == "exec perf record -F 999 -m $(dwarf_mmap) -e cycles:u -p 12,345 -o /out/perf.data -- sleep 30"
    assert "dwarf_mmap()" in shell
    assert "-p" not in outside.record_shell("perf", ["-a"], [], "/out/perf.data", None).splitlines()[-1]


def test_options_that_choose_the_target():
    assert outside.names_target(["-a"]) and outside.names_target(["--pid=5"]) and outside.names_target(["-G", "x"])
    assert not outside.names_target(["-e", "cycles", "--call-graph", "dwarf"])


def test_mode_from_the_files():
    assert outside.choose_mode(None, ["perf-1.map"]) == "perf"
    assert outside.choose_mode(None, ["perf-1.map", "jit-7.dump"]) == "perf_jit"
    assert outside.choose_mode(None, []) == "perf"
    assert outside.choose_mode("perf", ["jit-7.dump"]) == "perf"


def test_perf_version():
    assert outside.perf_version("perf version 6.1.187\n") == (6, 1)
    assert outside.perf_version("perf version 6.12.48+deb13-amd64") == (6, 12)
    assert outside.perf_version("") is None


def test_summary_counts_unnamed_map_frames():
    text = ("python3  101/101  1.000000: cycles: \n"
            "\t    7f00 py::foo:/src/x.py (/tmp/perf-101.map)\n"
            "\t    5600 _PyEval_EvalFrameDefault (/opt/cpython/bin/python3.13)\n\n"
            "python3  102/102  1.100000: cycles: \n"
            "\t    7f10 [unknown] (/tmp/perf-102.map)\n\n")
    lines = outside.summarise(text)
    assert lines[0] == "2 samples, 1 with Python frames, 2 processes"
    assert "1 frames in a perf map perf could not read" in lines[1]
    assert "py::foo:/src/x.py" in lines[2]


def test_output_directory_layout(tmp_path):
    out = tmp_path / "out"
    (out / "tmp").mkdir(parents=True)
    (out / "tmp" / "perf-1.map").write_text("old")
    (out / outside.SCRIPT_TEXT).write_text("old")
    outside.prepare_out(out)
    assert not (out / outside.SCRIPT_TEXT).exists() and not list((out / "tmp").iterdir())
    assert (out / "tmp").stat().st_mode & 0o1777 == 0o1777
    assert (out / outside.OBJECTS / "tmp").resolve() == (out / "tmp").resolve()


def test_command_line(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["record", "--help"])
    assert exc.value.code == 0
    said = capsys.readouterr().out
    assert "--container" in said and "--host-perf" in said and "PERF RECORD OPTIONS" in said
    with pytest.raises(SystemExit) as exc:
        cli.main(["record"])   # --container is required
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        cli.main(["record", "--container", "x", "--host-perf", "--perf-image", "y"])
    assert exc.value.code == 2


def test_clean_tmp_command_line(tmp_path, capsys):
    assert cli.main(["clean-tmp", "--dir", str(tmp_path), "--dry-run"]) == 0
    assert "0 of 0 files would be removed" in capsys.readouterr().out
    assert cli.main(["clean-tmp", "--dir", str(tmp_path / "missing")]) == 2
    assert cli.main(["clean-tmp", "--dir", str(tmp_path), "--older-than", "soon"]) == 2

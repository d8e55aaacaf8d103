"""record --container: its perf command lines, its choices and its command line (no Docker; the recording itself
is conformance/test_outside_recording.py's)."""

from __future__ import annotations

import os
from pathlib import Path

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


def test_mode_from_what_the_processes_run():
    assert outside.choose_mode(None, ["perf", None]) == "perf"
    assert outside.choose_mode(None, ["perf", "perf_jit"]) == "perf_jit"
    assert outside.choose_mode(None, []) == "perf"
    assert outside.choose_mode("perf", ["perf_jit"]) == "perf"


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
    # the kept files are for this user alone: no other user reads them or plants a link among them
    assert (out / "tmp").stat().st_mode & 0o7777 == 0o700
    assert (out / outside.OBJECTS).stat().st_mode & 0o7777 == 0o700
    assert not out.stat().st_mode & 0o022
    assert (out / outside.OBJECTS / "tmp").resolve() == (out / "tmp").resolve()


def test_output_directory_tmp_planted_as_a_link_is_replaced(tmp_path):
    """A tmp/ that is a link (planted by whoever could write DIR) is removed, not followed: the new tmp/ is a
    directory of DIR's own, and the link's target is untouched."""
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("mine")
    out.mkdir()
    out.chmod(0o777)
    (out / "tmp").symlink_to(elsewhere)
    outside.prepare_out(out)
    assert not (out / "tmp").is_symlink() and (out / "tmp").is_dir()
    assert (elsewhere / "keep.txt").read_text() == "mine"
    assert not out.stat().st_mode & 0o022


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


@pytest.mark.skipif(os.geteuid() != 0, reason="another user (nobody) is played by a child that root makes")
def test_another_user_cannot_aim_the_kept_files(tmp_path):
    """Another local user who can reach DIR (here: nobody, DIR's parents searchable by all) plants a link under
    the name of a map about to be kept, to make root append map lines to a file of root's choosing: the
    planting is refused (tmp/ is 0700), and a link there would not be written through anyway."""
    import shutil
    import subprocess
    import sys
    import tempfile

    from cpython_perf.record.container_files import Kept

    base = Path(tempfile.mkdtemp(prefix="cpython-perf-out-"))
    try:
        base.chmod(0o755)
        victim = base / "victim"
        victim.write_text("root's file\n")
        out = outside.prepare_out(base / "out")
        out.chmod(0o755)     # even where the operator opens DIR itself to everyone
        plant = subprocess.run(
            [sys.executable, "-c", "import os, sys; os.setgid(65534); os.setuid(65534); "
             "os.symlink(sys.argv[1], sys.argv[2])", str(victim), str(out / "tmp" / "perf-4242.map")],
            capture_output=True, text=True)
        assert plant.returncode != 0 and "Permission denied" in plant.stderr, (
            f"another user planted a link in DIR/tmp: {plant.returncode} {plant.stderr}")
        os.symlink(victim, out / "tmp" / "perf-4243.map")   # as if planted all the same
        with pytest.raises(OSError):
            Kept("perf-1.map", out / "tmp" / "perf-4243.map", False, 4243).take(b"7f00 10 py::a:x.py\n")
        assert victim.read_text() == "root's file\n"
    finally:
        shutil.rmtree(base)


def test_summary_shows_no_escape_sequence_a_map_holds():
    """A symbol name comes from a file the profiled program wrote: what the summary prints of it is printable."""
    text = ("python3  101/101  1.000000: cycles: \n"
            "\t    7f00 py::\x1b]0;pwned\x07foo:/src/x.py (/tmp/perf-101.map)\n\n")
    lines = outside.summarise(text)
    assert all(c.isprintable() for line in lines for c in line), lines
    assert any("py::?]0;pwned?foo" in line for line in lines), lines


@pytest.mark.skipif(os.geteuid() != 0, reason="a directory of another user is made by root")
def test_an_output_directory_of_another_user_is_refused(tmp_path, monkeypatch):
    """Its owner could rename or replace what root writes there: refused, naming the fix; nothing is removed."""
    out = tmp_path / "theirs"
    out.mkdir()
    (out / outside.SCRIPT_TEXT).write_text("theirs")
    os.chown(out, 65534, 65534)
    monkeypatch.delenv("SUDO_UID", raising=False)
    with pytest.raises(DriverError, match="belongs to uid 65534"):
        outside.prepare_out(out)
    assert (out / outside.SCRIPT_TEXT).read_text() == "theirs"

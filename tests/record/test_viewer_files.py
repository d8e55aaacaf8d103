"""The viewers' files (cpython_perf/record/viewer_files.py), written from a `perf script` text and read back by
the real readers (cpython_perf/check/viewer_readers.py): Go's pprof, the Firefox Profiler's profiler-cli and
speedscope's app in headless Chromium.  Each reader must see the samples' stacks in their order, Python
frames by name and file, native frames in their DSO and kernel frames marked.  A reader this machine does
not have skips its test, saying what to install."""

from __future__ import annotations

import gzip
import json
import os
import re

import pytest

from cpython_perf.check import viewer_readers
from cpython_perf.record import viewer_files
from cpython_perf.record.perf_samples import parse_perf_script
from cpython_perf.record.untrusted_files import Refused

# two threads of one process: a C function called three Python levels deep (through a C entry of the eval
# loop), a system call from the same Python chain, and a worker thread's frame on an unknown caller
SCRIPT = """\
python3.13    42/42    1000.000100:    1001001 cpu-clock:
\t    7f0000001234 builtin_id+0x14 (/usr/lib/libpython3.13.so.1.0)
\t    7f0000002000 py::leaf:/src/script.py (/tmp/perf-42.map)
\t    7f0000002100 py::Mid.run:/src/script.py (/tmp/perf-42.map)
\t    7f0000002200 py::top:/src/script.py (/tmp/perf-42.map)
\t    7f0000003000 _PyEval_EvalFrameDefault+0x10 (/usr/lib/libpython3.13.so.1.0)
\t    55555555a000 main+0x20 (/usr/local/bin/python3.13)

python3.13    42/42    1000.001100:    1001001 cpu-clock:
\tffffffff81000000 do_syscall_64+0x10 ([kernel.kallsyms])
\t    7f0000004000 __write+0x5 (/usr/lib/x86_64-linux-gnu/libc.so.6)
\t    7f0000002000 py::leaf:/src/script.py (/tmp/perf-42.map)
\t    7f0000002100 py::Mid.run:/src/script.py (/tmp/perf-42.map)
\t    7f0000002200 py::top:/src/script.py (/tmp/perf-42.map)
\t    55555555a000 main+0x20 (/usr/local/bin/python3.13)

python3.13    42/42    1000.002100:    1001001 cpu-clock:
\t    7f0000001234 builtin_id+0x14 (/usr/lib/libpython3.13.so.1.0)
\t    7f0000002000 py::leaf:/src/script.py (/tmp/perf-42.map)
\t    7f0000002100 py::Mid.run:/src/script.py (/tmp/perf-42.map)
\t    7f0000002200 py::top:/src/script.py (/tmp/perf-42.map)
\t    7f0000003000 _PyEval_EvalFrameDefault+0x10 (/usr/lib/libpython3.13.so.1.0)
\t    55555555a000 main+0x20 (/usr/local/bin/python3.13)

python3.13    42/43    1000.002600:    1001001 cpu-clock:
\t    7f0000002300 py::worker:/src/script.py (/tmp/perf-42.map)
\t    7f0000005000 [unknown] ([unknown])
"""
C_CALL = ["builtin_id", "leaf", "Mid.run", "top", "_PyEval_EvalFrameDefault", "main"]        # leaf first
SYSCALL = ["do_syscall_64", "__write", "leaf", "Mid.run", "top", "main"]


@pytest.fixture
def written(tmp_path):
    samples = parse_perf_script(SCRIPT)
    paths = viewer_files.write_viewer_files(samples, tmp_path, "script.py (3.13-fp, perf)", period_ns=1001001)
    assert sorted(p.name for p in paths) == sorted(viewer_files.VIEWER_FILES)
    assert not list(tmp_path.glob("*.partial"))
    return tmp_path


def _have(reader):
    try:
        return reader()
    except viewer_readers.ReaderMissing as exc:
        pytest.skip(str(exc))


def test_frames_are_named_by_kind():
    frames = [viewer_files.viewer_frame(f) for s in parse_perf_script(SCRIPT) for f in s.frames]
    by_symbol = {f.symbol: f for f in frames}
    assert by_symbol["py::Mid.run:/src/script.py"] == viewer_files.ViewerFrame(
        "python", "Mid.run", "/src/script.py", "py::Mid.run:/src/script.py")
    assert by_symbol["do_syscall_64"].kind == "kernel"
    assert by_symbol["__write"].kind == "native" and by_symbol["__write"].file.endswith("libc.so.6")
    assert "0x7f0000005000" in by_symbol          # an unknown symbol is named by its address


def test_folded_stacks_are_root_first_with_counts(written):
    lines = (written / viewer_files.FOLDED).read_text().splitlines()
    assert ("python3.13;main;_PyEval_EvalFrameDefault;py::top:/src/script.py;py::Mid.run:/src/script.py;"
            "py::leaf:/src/script.py;builtin_id 2") in lines
    assert any(l.endswith("__write;do_syscall_64_[k] 1") for l in lines)
    assert sum(int(l.rsplit(" ", 1)[1]) for l in lines) == 4


def test_pprof_read_by_go_pprof(written):
    _have(viewer_readers.go_pprof)
    traces = viewer_readers.pprof_traces(written / viewer_files.PPROF)
    by_stack = {tuple(t["stack"]): t for t in traces}
    assert by_stack[tuple(C_CALL)]["count"] == 2
    assert by_stack[tuple(SYSCALL)]["count"] == 1
    assert by_stack[tuple(C_CALL)]["labels"] == {"comm": "python3.13", "pid": "42", "tid": "42"}
    assert by_stack[("worker", "0x7f0000005000")]["labels"]["tid"] == "43"
    locations = {l["function"]: l for l in viewer_readers.pprof_locations(written / viewer_files.PPROF)}
    assert locations["Mid.run"]["file"] == "/src/script.py" and locations["Mid.run"]["mapping"] is None
    assert locations["builtin_id"]["mapping"] == "/usr/lib/libpython3.13.so.1.0"
    assert locations["do_syscall_64"]["mapping"] == "[kernel.kallsyms]"


def test_pprof_is_gzipped_profile_proto(written):
    raw = gzip.decompress((written / viewer_files.PPROF).read_bytes())
    assert raw == viewer_files.pprof_bytes(parse_perf_script(SCRIPT), 1001001)
    assert raw[:1] == b"\x0a"      # field 1 (sample_type), length-delimited, first


def test_gecko_read_by_the_firefox_profiler(written):
    modules = _have(viewer_readers.npm_readers)
    threads = viewer_readers.firefox_threads(written / viewer_files.GECKO, modules)
    assert sorted(threads) == ["python3.13 42/42", "python3.13 42/43"]
    main = dict(threads["python3.13 42/42"]["paths"])
    libpython, script = "/usr/lib/libpython3.13.so.1.0", "/src/script.py"
    c_call = (f"/usr/local/bin/python3.13!main", f"{libpython}!_PyEval_EvalFrameDefault", f"{script}!top",
              f"{script}!Mid.run", f"{script}!leaf", f"{libpython}!builtin_id")
    assert main[c_call] == 2
    syscall = next(p for p in main if p[-1].endswith("do_syscall_64"))
    assert syscall[-1] == "[kernel.kallsyms]!do_syscall_64" and syscall[1:4] == c_call[2:5]
    assert threads["python3.13 42/42"]["categories"] == {"Native": 2, "Kernel": 1}
    assert threads["python3.13 42/43"]["categories"] == {"Python": 1}


def test_speedscope_loaded_by_speedscope(written, tmp_path):
    modules = _have(viewer_readers.npm_readers)
    _have(viewer_readers.browser)
    document = json.loads((written / viewer_files.SPEEDSCOPE).read_text())
    assert [p["name"] for p in document["profiles"]] == ["python3.13 42/42", "python3.13 42/43"]
    shot = tmp_path / "speedscope.png"
    dom = viewer_readers.speedscope_page(written / viewer_files.SPEEDSCOPE, modules, shot)
    assert "<title>script.py (3.13-fp, perf) - speedscope</title>" in dom
    # the profile list speedscope made from the file: each thread with its sample count
    rows = re.findall(r"<span>(python3\.13 42/4[23])</span></td><td[^>]*>(\d+)</td>", dom)
    assert rows == [("python3.13 42/42", "3"), ("python3.13 42/43", "1")], dom[-3000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 5000


def test_written_through_no_link(tmp_path):
    """The output directory may be the recorded user's while root writes: a link planted at a file's name or
    at its partial name is replaced, never written through."""
    victim = tmp_path / "victim"
    victim.write_text("keep")
    os.symlink(victim, tmp_path / viewer_files.PPROF)
    os.symlink(victim, tmp_path / (viewer_files.GECKO + ".partial"))
    viewer_files.write_viewer_files(parse_perf_script(SCRIPT), tmp_path, "x")
    assert victim.read_text() == "keep"
    assert not (tmp_path / viewer_files.PPROF).is_symlink()


def test_a_linked_script_is_refused(tmp_path):
    (tmp_path / "real.txt").write_text(SCRIPT)
    os.symlink(tmp_path / "real.txt", tmp_path / "perf.script.txt")
    with pytest.raises(Refused):
        viewer_files.write_viewer_files_of_script(tmp_path / "perf.script.txt", "x", 999, 1 << 20)
    assert not any((tmp_path / name).exists() for name in viewer_files.VIEWER_FILES)

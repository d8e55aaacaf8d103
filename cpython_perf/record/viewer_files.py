"""The files profile viewers open, written from the samples of one `perf script` output.

`profile` and `record --container` write these beside `perf.script.txt`, from the same samples:

- `stacks.folded`: collapsed stacks, one line per distinct stack, root first, `;`-separated, then its
  count (Brendan Gregg's format, which inferno, flamegraph.pl, speedscope and the Firefox Profiler read);
- `profile.speedscope.json`: speedscope's file format, one sampled profile per thread;
- `profile.pb.gz`: a pprof profile (profile.proto, gzipped) for `go tool pprof`, Pyroscope and Parca;
- `profile.gecko.json`: the Firefox Profiler's Gecko format, one thread per perf thread.

Every format names a frame the same way (`viewer_frame`): a Python frame by its qualified name with
its file, a native frame by its symbol with its DSO, a kernel frame by its symbol, marked as kernel.
"""

from __future__ import annotations

import gzip
import json
import os
from collections import Counter
from typing import NamedTuple
from pathlib import Path

from .perf_samples import Frame, Sample, parse_perf_script
from .untrusted_files import read_regular_file, write_new_file

FOLDED, SPEEDSCOPE, PPROF, GECKO = "stacks.folded", "profile.speedscope.json", "profile.pb.gz", "profile.gecko.json"
VIEWER_FILES = (FOLDED, SPEEDSCOPE, PPROF, GECKO)

PYTHON, NATIVE, KERNEL = "python", "native", "kernel"
# x86-64 and arm64 Linux put the kernel in the upper half of the address space
_KERNEL_START = 0xFFFF_0000_0000_0000


class ViewerFrame(NamedTuple):
    kind: str        # PYTHON, NATIVE or KERNEL
    name: str        # qualified name (Python) or symbol
    file: str        # the Python file, or the DSO perf names
    symbol: str      # what perf script printed: the perf map's py::<qualname>:<file> for Python frames

    @property
    def folded(self) -> str:
        """The frame in collapsed stacks: perf's own symbol, `_[k]` after a kernel one (inferno's mark)."""
        return f"{self.symbol}_[k]" if self.kind == KERNEL else self.symbol


def viewer_frame(frame: Frame) -> ViewerFrame:
    symbol = frame.symbol or "[unknown]"
    if frame.is_python:
        qualname, _, filename = frame.symbol[len("py::"):].partition(":")
        return ViewerFrame(PYTHON, qualname, filename, symbol)
    if frame.dso.startswith("[kernel") or frame.dso.endswith(".ko") or frame.ip >= _KERNEL_START:
        return ViewerFrame(KERNEL, symbol, frame.dso, symbol)
    if symbol == "[unknown]":
        symbol = f"0x{frame.ip:x}"
    return ViewerFrame(NATIVE, symbol, frame.dso, symbol)


def _stacks(samples: list[Sample]) -> list[tuple[Sample, list[ViewerFrame]]]:
    """Each sample with its frames root first (a frame named once per symbol and DSO: the address matters
    only to frames without a symbol and to the kernel's)."""
    named: dict[tuple, ViewerFrame] = {}
    out = []
    for sample in samples:
        stack = []
        for frame in reversed(sample.frames):
            key = (frame.symbol, frame.dso) if frame.symbol and frame.symbol != "[unknown]" and \
                frame.ip < _KERNEL_START else (frame.symbol, frame.dso, frame.ip)
            found = named.get(key)
            if found is None:
                found = named[key] = viewer_frame(frame)
            stack.append(found)
        out.append((sample, stack))
    return out


def _thread_key(sample: Sample) -> tuple[int, int, str]:
    return sample.pid, sample.tid, sample.comm


def _thread_name(pid: int, tid: int, comm: str) -> str:
    return f"{comm} {pid}/{tid}"


def folded_text(samples: list[Sample], stacks=None) -> str:
    """Collapsed stacks, the process name first as stackcollapse-perf writes it, sorted.  stacks: _stacks of
    the samples, where the caller has them."""
    counts = Counter(";".join([s.comm.replace(";", ":").replace(" ", "_")]
                              + [f.folded.replace(";", ":") for f in frames])
                     for s, frames in (stacks or _stacks(samples)))
    return "".join(f"{stack} {n}\n" for stack, n in sorted(counts.items()))


def speedscope_document(samples: list[Sample], name: str, stacks=None) -> dict:
    """speedscope's file format (https://www.speedscope.app/file-format-schema.json): one sampled
    profile per thread, each sample weighing one; frames shared."""
    frames: list[dict] = []
    index: dict[ViewerFrame, int] = {}
    threads: dict[tuple[int, int, str], tuple[list[list[int]], list[int]]] = {}
    for sample, stack in stacks or _stacks(samples):
        ids = []
        for frame in stack:
            if frame not in index:
                index[frame] = len(frames)
                shown = f"{frame.name} [kernel]" if frame.kind == KERNEL else frame.name
                frames.append({"name": shown, "file": frame.file})
            ids.append(index[frame])
        stacks, weights = threads.setdefault(_thread_key(sample), ([], []))
        stacks.append(ids)
        weights.append(1)
    profiles = [{"type": "sampled", "name": _thread_name(*key), "unit": "none", "startValue": 0,
                 "endValue": len(stacks), "samples": stacks, "weights": weights}
                for key, (stacks, weights) in sorted(threads.items())]
    return {"$schema": "https://www.speedscope.app/file-format-schema.json", "name": name,
            "exporter": "cpython-perf", "activeProfileIndex": 0, "shared": {"frames": frames},
            "profiles": profiles}


# --- pprof: profile.proto, encoded here (no protobuf dependency; the wire format is small) ---

def _varint(value: int) -> bytes:
    if 0 <= value < 0x80:
        return bytes((value,))
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field_varint(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value) if value else b""


def _field_bytes(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _field_packed(number: int, values: list[int]) -> bytes:
    return _field_bytes(number, b"".join(_varint(v) for v in values)) if values else b""


class _Strings:
    def __init__(self):
        self.table = [""]
        self.index = {"": 0}

    def __call__(self, text: str) -> int:
        if text not in self.index:
            self.index[text] = len(self.table)
            self.table.append(text)
        return self.index[text]


def pprof_bytes(samples: list[Sample], period_ns: int = 0, stacks=None) -> bytes:
    """A pprof Profile message (not gzipped): one sample type `samples/count`; a Python frame is a
    function named by its qualified name in its file (system name: perf's py:: symbol), a native frame a
    function in the mapping of its DSO, a kernel frame a function in the mapping `[kernel.kallsyms]`.
    Each sample carries the labels pid, tid and comm.  period_ns: the sampling period, when known."""
    strings = _Strings()
    mappings: dict[str, int] = {}
    functions: dict[ViewerFrame, int] = {}
    locations: dict[ViewerFrame, int] = {}
    body = bytearray()
    body += _field_bytes(1, _field_varint(1, strings("samples")) + _field_varint(2, strings("count")))
    merged: Counter = Counter()           # identical stacks of one thread are one pprof sample, their count its value
    for sample, stack in stacks or _stacks(samples):
        location_ids = []
        for frame in reversed(stack):            # pprof lists a sample's locations leaf first
            if frame not in locations:
                functions.setdefault(frame, len(functions) + 1)
                mapping_file = "[kernel.kallsyms]" if frame.kind == KERNEL else frame.file
                if frame.kind != PYTHON:
                    mappings.setdefault(mapping_file, len(mappings) + 1)
                locations[frame] = len(locations) + 1
            location_ids.append(locations[frame])
        merged[(tuple(location_ids), sample.pid, sample.tid, sample.comm)] += 1
    for (location_ids, pid, tid, comm), count in merged.items():
        labels = (_field_bytes(3, _field_varint(1, strings("pid")) + _field_varint(3, pid))
                  + _field_bytes(3, _field_varint(1, strings("tid")) + _field_varint(3, tid))
                  + _field_bytes(3, _field_varint(1, strings("comm")) + _field_varint(2, strings(comm))))
        body += _field_bytes(2, _field_packed(1, list(location_ids)) + _field_packed(2, [count]) + labels)
    for filename, mapping_id in mappings.items():
        body += _field_bytes(3, _field_varint(1, mapping_id) + _field_varint(5, strings(filename))
                             + _field_varint(7, 1))
    for frame, location_id in locations.items():
        mapping_id = 0
        if frame.kind != PYTHON:
            mapping_id = mappings["[kernel.kallsyms]" if frame.kind == KERNEL else frame.file]
        line = _field_varint(1, functions[frame])
        body += _field_bytes(4, _field_varint(1, location_id) + _field_varint(2, mapping_id) + _field_bytes(4, line))
    for frame, function_id in functions.items():
        body += _field_bytes(5, _field_varint(1, function_id) + _field_varint(2, strings(frame.name))
                             + _field_varint(3, strings(frame.symbol)) + _field_varint(4, strings(frame.file)))
    times = [s.time for s in samples]
    tail = bytearray()
    if times:   # perf's times count from the machine's boot, not the epoch: the duration only, no time_nanos
        tail += _field_varint(10, int((max(times) - min(times)) * 1e9))
    if period_ns:
        tail += _field_bytes(11, _field_varint(1, strings("cpu")) + _field_varint(2, strings("nanoseconds")))
        tail += _field_varint(12, period_ns)
    for text in strings.table:                 # after the last use of strings()
        body += _field_bytes(6, text.encode())
    return bytes(body + tail)


# --- Firefox Profiler: the Gecko format (what Firefox itself writes; the profiler upgrades it) ---

GECKO_VERSION = 24
_GECKO_CATEGORIES = [
    {"name": "Python", "color": "yellow", "subcategories": ["Other"]},
    {"name": "Native", "color": "blue", "subcategories": ["Other"]},
    {"name": "Kernel", "color": "orange", "subcategories": ["Other"]},
]
_GECKO_CATEGORY = {PYTHON: 0, NATIVE: 1, KERNEL: 2}


def gecko_document(samples: list[Sample], name: str, stacks=None) -> dict:
    """A Gecko-format profile: one thread per perf thread, times in milliseconds from the first
    sample; a frame's location is `name (in file)`, its category Python, Native or Kernel."""
    start = min((s.time for s in samples), default=0.0)
    threads: dict[tuple[int, int, str], dict] = {}
    for sample, stack in stacks or _stacks(samples):
        key = _thread_key(sample)
        thread = threads.get(key)
        if thread is None:
            thread = threads[key] = {
                "frames": {}, "stacks": {}, "strings": [],
                "samples": [], "frame_rows": [], "stack_rows": [],
            }
        prefix = None
        for frame in stack:
            frame_id = thread["frames"].get(frame)
            if frame_id is None:
                frame_id = thread["frames"][frame] = len(thread["frame_rows"])
                thread["strings"].append(f"{frame.name} (in {frame.file})" if frame.file else frame.name)
                thread["frame_rows"].append([len(thread["strings"]) - 1, False, 0, None, None, None, None,
                                             _GECKO_CATEGORY[frame.kind], 0])
            stack_key = (prefix, frame_id)
            stack_id = thread["stacks"].get(stack_key)
            if stack_id is None:
                stack_id = thread["stacks"][stack_key] = len(thread["stack_rows"])
                thread["stack_rows"].append([prefix, frame_id])
            prefix = stack_id
        thread["samples"].append([prefix, round((sample.time - start) * 1000.0, 6), 0])
    gecko_threads = []
    for (pid, tid, comm), thread in sorted(threads.items()):
        thread["samples"].sort(key=lambda row: row[1])
        gecko_threads.append({
            "name": _thread_name(pid, tid, comm), "processName": comm, "processType": "default",
            "pid": pid, "tid": tid, "registerTime": 0, "unregisterTime": None,
            "markers": {"schema": {"name": 0, "startTime": 1, "endTime": 2, "phase": 3, "category": 4, "data": 5},
                        "data": []},
            "samples": {"schema": {"stack": 0, "time": 1, "responsiveness": 2}, "data": thread["samples"]},
            "frameTable": {"schema": {"location": 0, "relevantForJS": 1, "innerWindowID": 2, "implementation": 3,
                                      "optimizations": 4, "line": 5, "column": 6, "category": 7, "subcategory": 8},
                           "data": thread["frame_rows"]},
            "stackTable": {"schema": {"prefix": 0, "frame": 1}, "data": thread["stack_rows"]},
            "stringTable": thread["strings"],
        })
    return {"meta": {"version": GECKO_VERSION, "interval": _interval_ms(samples), "startTime": start * 1000.0,
                     "shutdownTime": None, "processType": 0, "product": name, "stackwalk": 1, "debug": 0,
                     "gcpoison": 0, "asyncstack": 0, "presymbolicated": True, "categories": _GECKO_CATEGORIES,
                     "markerSchema": []},
            "libs": [], "threads": gecko_threads, "processes": [], "pausedRanges": []}


def _interval_ms(samples: list[Sample]) -> float:
    """The median gap between one thread's consecutive samples, in milliseconds (1 when unknown)."""
    gaps = []
    by_thread: dict[int, list[float]] = {}
    for s in samples:
        by_thread.setdefault(s.tid, []).append(s.time)
    for times in by_thread.values():
        times.sort()
        gaps += [b - a for a, b in zip(times, times[1:]) if b > a]
    if not gaps:
        return 1.0
    gaps.sort()
    return round(gaps[len(gaps) // 2] * 1000.0, 6)


def _write(path: Path, data: bytes) -> None:
    """path whole or not at all, never written through a link planted at its name or at the partial one
    (the output directory may be the recorded user's, the recorder root)."""
    partial = path.with_name(path.name + ".partial")
    write_new_file(partial, data)
    os.replace(partial, path)


def write_viewer_files(samples: list[Sample], out: Path, name: str, period_ns: int = 0) -> list[Path]:
    """Write the four files into out (each whole or not at all); returns their paths.  period_ns: the
    nominal sampling period (1e9 / perf's -F), which pprof's period carries; 0 when not known."""
    written = []
    stacks = _stacks(samples)
    for filename, data in (
        (FOLDED, folded_text(samples, stacks).encode()),
        (SPEEDSCOPE, json.dumps(speedscope_document(samples, name, stacks), separators=(",", ":")).encode()),
        (PPROF, gzip.compress(pprof_bytes(samples, period_ns, stacks), mtime=0)),
        (GECKO, json.dumps(gecko_document(samples, name, stacks), separators=(",", ":")).encode()),
    ):
        _write(out / filename, data)
        written.append(out / filename)
    return written


def write_viewer_files_of_script(script: Path, name: str, frequency: int | None, limit: int) -> list[Path]:
    """The viewer files beside a `perf script` output (script: a file the recorded container could write, read
    without following a link, at most limit bytes).  Raises Refused (untrusted_files), PerfScriptError or
    OSError; nothing half-written is left either way."""
    samples = parse_perf_script(read_regular_file(script, limit).decode(errors="replace"))
    period_ns = round(1e9 / frequency) if frequency else 0
    return write_viewer_files(samples, script.parent, name, period_ns)

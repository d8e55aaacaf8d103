"""samply's recording command and the parsing of its saved profile (no Docker)."""

from __future__ import annotations

import json

import pytest

from cpython_perf.record import samply
from cpython_perf.record.perf_samples import chain_report, py_symbol

CHAIN = [py_symbol(f, "/src/script.py") for f in ("foo", "bar", "baz", "<module>")]


def _profile(stacks: list[list[str]], lib_of=lambda name: 0 if name.startswith("py::") else 1) -> dict:
    """A processed-format profile as samply writes it: one thread, stacks given root first."""
    strings, funcs, frames, stack_frame, stack_prefix, samples = [], {}, {}, [], [], []
    func_table = {"name": [], "resource": []}
    frame_table = {"func": [], "address": [], "inlineDepth": []}
    index: dict[tuple, int] = {}
    for stack in stacks:
        prefix = None
        for name in stack:
            if name not in frames:
                strings.append(name)
                funcs[name] = len(func_table["name"])
                func_table["name"].append(len(strings) - 1)
                func_table["resource"].append(lib_of(name))
                frames[name] = len(frame_table["func"])
                frame_table["func"].append(funcs[name])
                frame_table["address"].append(0x1000 + frames[name] * 16)
                frame_table["inlineDepth"].append(0)
            key = (prefix, frames[name])
            if key not in index:
                index[key] = len(stack_frame)
                stack_frame.append(frames[name])
                stack_prefix.append(prefix)
            prefix = index[key]
        samples.append(prefix)
    return {
        "meta": {"version": 24},
        "libs": [{"name": "perf-7.map", "debugName": "perf-7.map"}, {"name": "python3.13", "debugName": "python3.13"}],
        "threads": [{
            "name": "python3", "processName": "python3", "pid": "7", "tid": 7, "stringArray": strings,
            "frameTable": frame_table, "funcTable": func_table,
            "stackTable": {"frame": stack_frame, "prefix": stack_prefix},
            "resourceTable": {"lib": [0, 1], "name": [0, 0]},
            "samples": {"stack": samples, "time": [float(i) for i in range(len(samples))]},
        }],
    }


def test_profile_frames_are_leaf_first_and_carry_the_chain():
    root = ["_start", "py::<module>:/src/script.py", "py::baz:/src/script.py", "py::bar:/src/script.py"]
    profile = _profile([root + ["py::foo:/src/script.py", "0x1010"]] * 3 + [root] + [["_start", "main"]])
    samples = samply.parse_profile(profile)
    assert [f.symbol for f in samples[0].frames][:2] == ["0x1010", "py::foo:/src/script.py"]
    assert samples[0].pid == 7 and samples[0].comm == "python3"
    report = chain_report(samples, CHAIN)
    assert (report.process_samples, report.inside_samples, report.full_chain_samples) == (5, 3, 3)


def test_a_broken_chain_is_counted_as_broken():
    profile = _profile([["_start", "py::<module>:/src/script.py", "py::foo:/src/script.py"]] * 4)
    report = chain_report(samply.parse_profile(profile), CHAIN)
    assert report.inside_samples == 4 and report.full_chain_samples == 0


def test_addresses_are_named_from_the_sidecar(tmp_path):
    profile = _profile([["0x1000", "py::foo:/src/script.py", "0x1020"]])
    (tmp_path / samply.PROFILE).write_text(json.dumps(profile))
    address = profile["threads"][0]["frameTable"]["address"][2]
    (tmp_path / samply.SIDECAR).write_text(json.dumps({
        "string_table": ["_PyEval_EvalFrameDefault"],
        "data": [{"debug_name": "python3.13", "symbol_table": [{"rva": address - 4, "size": 64, "symbol": 0}]}]}))
    [sample] = samply.read_profile(tmp_path)
    assert sample.frames[0].symbol == "_PyEval_EvalFrameDefault"
    assert sample.frames[-1].symbol == "0x1000"        # outside every symbol: left as samply gave it


def test_missing_or_malformed_profile_is_a_clear_error(tmp_path):
    with pytest.raises(samply.SamplyProfileError, match="wrote no profile"):
        samply.read_profile(tmp_path)
    with pytest.raises(samply.SamplyProfileError, match="missing"):
        samply.parse_profile({"meta": {}})


@pytest.mark.parametrize("mode, expect", [("perf", "python3 -X perf /src/script.py"),
                                          ("perf_jit", "python3 -X perf_jit /src/script.py"),
                                          (None, "-- python3 /src/script.py")])
def test_record_command(mode, expect):
    command = samply.record_command(mode)
    assert expect in command
    assert "record --save-only --unstable-presymbolicate" in command
    assert "/proc/sys/kernel/perf_event_paranoid" in command   # the container-local view samply needs here

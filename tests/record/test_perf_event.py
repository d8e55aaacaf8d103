"""The host's sampling event (cpython_perf.record.perf_event): the decision, with fake recordings (no Docker)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cpython_perf.record import perf_event, perf_runs
from cpython_perf.matrix import load_matrix
from cpython_perf.record.perf_event import Attempt, NoSamples, choose_event

MATRIX = load_matrix()


def recorder(samples: dict, errors: dict | None = None):
    """A fake recording: samples per event asked (None: perf's default), and the calls made."""
    calls = []

    def record(event):
        calls.append(event)
        return Attempt(event, {None: "cycles:P"}.get(event, event or "?"), samples.get(event, 0),
                       (errors or {}).get(event, ""))
    record.calls = calls
    return record


def test_the_default_event_is_kept_where_it_samples():
    record = recorder({None: 290, "cpu-clock": 300})
    choice = choose_event(record)
    assert choice.event is None and choice.record_options() == [] and not choice.fell_back
    assert record.calls == [None]   # no second recording
    assert choice.label == "default (cycles:P)"


def test_no_sample_with_the_default_event_falls_back_to_cpu_clock():
    """The arm runners' case: cycles opens, and delivers nothing."""
    record = recorder({None: 0, "cpu-clock": 280})
    choice = choose_event(record)
    assert record.calls == [None, "cpu-clock"]
    assert choice.event == "cpu-clock" and choice.record_options() == ["-e", "cpu-clock"] and choice.fell_back
    assert choice.chosen.samples == 280
    assert choice.label == "cpu-clock (default: 0 samples)"


def test_an_event_that_cannot_be_opened_falls_back_too():
    record = recorder({"cpu-clock": 10}, errors={"cycles": "exit 129: event syntax error"})
    choice = choose_event(record, first="cycles")
    assert choice.event == "cpu-clock"
    assert choice.label.startswith("cpu-clock (cycles: exit 129: event syntax error")


def test_neither_event_sampling_is_an_error_naming_both():
    with pytest.raises(NoSamples) as info:
        choose_event(recorder({}))
    message = str(info.value)
    assert "perf's default event: 0 samples" in message and "cpu-clock: 0 samples" in message
    assert "Fix:" in message and info.value.exit_code == 1


def test_a_forced_event_that_samples_is_used_as_forced():
    choice = choose_event(recorder({"cpu-clock": 5}), first="cpu-clock")
    assert choice.event == "cpu-clock" and choice.label == "cpu-clock (forced)"
    with pytest.raises(NoSamples):   # forced cpu-clock that gives nothing: no second try of the same
        choose_event(recorder({}), first="cpu-clock")


def test_the_override_names_the_first_event(monkeypatch):
    monkeypatch.delenv(perf_event.PROBE_EVENT_ENV, raising=False)
    assert perf_event.first_event() is None
    monkeypatch.setenv(perf_event.PROBE_EVENT_ENV, " dummy ")
    assert perf_event.first_event() == "dummy"


def test_probe_output_is_parsed():
    assert perf_event.parse_probe(None, "event task-clock:ppp\nsamples 581\n") == Attempt(None, "task-clock:ppp", 581)
    got = perf_event.parse_probe("nope", "error exit 129: event syntax error:   'nope'\nsamples 0\n")
    assert got.samples == 0 and got.error == "exit 129: event syntax error: 'nope'"


def test_probe_in_runs_the_probe_command_and_falls_back():
    """probe_in with a fake container: the scripts it runs, and the choice from what they print."""
    scripts = []

    def run(shell):
        scripts.append(shell)
        if "-e cpu-clock" in shell:
            return SimpleNamespace(exit_code=0, stdout="event cpu-clock\nsamples 300\n", stderr="")
        return SimpleNamespace(exit_code=0, stdout="event dummy\nsamples 0\n", stderr="")

    choice = perf_event.probe_in(run, first="dummy")
    assert choice.event == "cpu-clock" and choice.label == "cpu-clock (dummy: 0 samples)"
    assert "perf record -q -e dummy -o" in scripts[0] and "timeout 0.3" in scripts[0]
    assert "perf record -q -e cpu-clock -o" in scripts[1]


def test_a_failed_probe_container_counts_as_no_sample():
    runs = iter([SimpleNamespace(exit_code=125, stdout="", stderr="docker: no such image"),
                 SimpleNamespace(exit_code=0, stdout="event cpu-clock\nsamples 3\n", stderr="")])
    choice = perf_event.probe_in(lambda shell: next(runs))
    assert choice.event == "cpu-clock" and "no such image" in choice.attempts[0].error


def test_default_probe_command_names_no_event():
    script = perf_event.probe_command(None, perf="perf_6.12")
    assert "perf_6.12 record -q -o" in script and " -e " not in script


def test_recordings_take_the_hosts_event():
    cell = MATRIX.cell("3.13-fp")
    assert perf_runs.record_options(cell, "perf")[:2] == ["-F", str(perf_runs.SAMPLE_FREQUENCY)]
    assert perf_runs.record_options(cell, "perf", "cpu-clock")[:2] == ["-e", "cpu-clock"]
    assert "record -e cpu-clock -F" in perf_runs.perf_run(cell, "perf_jit", event="cpu-clock").shell
    assert " -e " not in perf_runs.perf_run(cell, "perf").shell


def test_a_foreign_cell_keeps_its_guest_event():
    foreign = next(c for c in MATRIX.cells.values() if c.foreign)
    options = perf_runs.record_options(foreign, "perf", "cycles")
    assert options[:2] == ["-e", perf_runs.guest_event(foreign)] == ["-e", "cpu-clock"]
    assert "cycles" not in options

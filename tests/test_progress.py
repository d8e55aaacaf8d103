"""Long steps' heartbeat (cpython_perf.progress) and its users: docker build, the deb lanes' commands."""

from __future__ import annotations

import time

import pytest

from cpython_perf.image.docker_build import docker_build
from cpython_perf import progress
from cpython_perf.lanes import docker_run
from cpython_perf.errors import ImageBuildFailed


def test_quiet_step_logs_every_line_and_prints_a_heartbeat(tmp_path):
    said = []
    log = tmp_path / "step.log"
    with progress.Progress("building x", log, said.append, every=0.05, verbose=False) as step:
        for i in range(5):
            step.line(f"make line {i}")
        step.line("Step 2/9 : RUN build", show=True)
        step.line("gcc -c foo.c")
        time.sleep(0.3)
    assert log.read_text().splitlines() == [*(f"make line {i}" for i in range(5)), "Step 2/9 : RUN build",
                                            "gcc -c foo.c"]
    assert said[0] == f"building x: output in {log} (a line every 0 s; --verbose for all)"
    assert "make line 0" not in "\n".join(said)            # no make line on the console
    assert "Step 2/9 : RUN build" in said                   # landmarks are
    beats = [s for s in said if s.startswith("  ... building x: ")]
    assert beats and all("elapsed" in b and f"(log: {log})" in b for b in beats)
    assert "last: gcc -c foo.c" in beats[-1]
    assert said[-1].startswith("building x: done in ")


def test_verbose_streams_every_line_without_heartbeat(tmp_path):
    said = []
    with progress.Progress("building x", tmp_path / "a.log", said.append, every=0.01, verbose=True) as step:
        step.line("make line")
        time.sleep(0.1)
    assert "make line" in said and not [s for s in said if s.startswith("  ... ")]


def test_verbose_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(progress.VERBOSE_ENV, "1")
    assert progress.Progress("x", tmp_path / "x.log", print).verbose
    monkeypatch.setenv(progress.VERBOSE_ENV, "")
    assert not progress.Progress("x", tmp_path / "x.log", print).verbose
    monkeypatch.setenv(progress.HEARTBEAT_ENV, "7")
    assert progress.Progress("x", tmp_path / "x.log", print).every == 7


def test_run_records_a_commands_output_and_the_failure_tail(tmp_path):
    said = []
    with progress.Progress("a command", tmp_path / "c.log", said.append, every=60, verbose=False) as step:
        rc = step.run(["sh", "-c", "for i in $(seq 1 100); do echo line $i; done; echo oops >&2; exit 3"])
        step.ok = rc == 0
    assert rc == 3
    assert said[-1].startswith("a command: FAILED in ")
    tail = step.tail(3).splitlines()
    assert tail == ["line 99", "line 100", "oops"]
    failure = step.failure(2)
    assert failure.startswith(f"log: {tmp_path / 'c.log'}\nlast 2 lines:\nline 100\noops")


def test_run_kills_a_command_past_its_timeout(tmp_path):
    with progress.Progress("slow", tmp_path / "s.log", lambda s: None, every=60) as step:
        started = time.monotonic()
        rc = step.run(["sleep", "30"], timeout=0.3)
    assert rc != 0 and time.monotonic() - started < 10


def test_an_exception_in_the_step_is_reported_failed(tmp_path):
    said = []
    with pytest.raises(RuntimeError):
        with progress.Progress("x", tmp_path / "x.log", said.append, every=60):
            raise RuntimeError("boom")
    assert said[-1].startswith("x: FAILED in ")


def test_log_paths_are_under_results_logs(monkeypatch, tmp_path):
    monkeypatch.delenv(progress.LOGS_ENV, raising=False)
    monkeypatch.setenv("CPYTHON_PERF_RESULTS", str(tmp_path))
    assert progress.log_path("build-cpython-perf:3.13-fp") == tmp_path / "logs" / "build-cpython-perf_3.13-fp.log"
    monkeypatch.setenv(progress.LOGS_ENV, str(tmp_path / "elsewhere"))
    assert progress.log_path("x").parent == tmp_path / "elsewhere"


class FakeAPI:
    """The Docker SDK's low-level build stream, as decoded chunks."""

    def __init__(self, chunks):
        self.chunks = chunks

    def build(self, **kwargs):
        yield from self.chunks


def test_docker_build_shows_steps_not_make_lines_and_fails_with_the_tail(monkeypatch, tmp_path):
    monkeypatch.setenv(progress.LOGS_ENV, str(tmp_path))
    monkeypatch.delenv(progress.VERBOSE_ENV, raising=False)
    chunks = [{"stream": "Step 1/3 : FROM base\n"}, {"stream": "Step 2/3 : RUN ./build-cpython.sh\n"},
              *({"stream": f"gcc -c Objects/obj{i}.c\n"} for i in range(50)),
              {"error": "The command '/bin/sh -c ./build-cpython.sh' returned a non-zero code: 2"}]
    said = []
    client = type("Client", (), {"api": FakeAPI(chunks)})()
    with pytest.raises(ImageBuildFailed) as info:
        docker_build(client, tmp_path, "cpython-perf:3.13-fp", said.append)
    message = str(info.value)
    log = tmp_path / "build-cpython-perf_3.13-fp.log"
    assert f"log: {log}" in message and "gcc -c Objects/obj49.c" in message and "returned a non-zero code: 2" in message
    assert "gcc -c Objects/obj0.c" in log.read_text()
    assert "Step 2/3 : RUN ./build-cpython.sh" in said and not any(s.startswith("gcc") for s in said)
    assert said[-1].startswith("docker build cpython-perf:3.13-fp: FAILED")
    assert info.value.exit_code == 1   # a runtime failure


def test_docker_build_verbose_streams_everything(monkeypatch, tmp_path):
    monkeypatch.setenv(progress.LOGS_ENV, str(tmp_path))
    monkeypatch.setenv(progress.VERBOSE_ENV, "1")
    said = []
    client = type("Client", (), {"api": FakeAPI([{"stream": "gcc -c a.c\n"}, {"aux": {"ID": "sha256:abc"}}])})()
    assert docker_build(client, tmp_path, "t:1", said.append) == "sha256:abc"
    assert "gcc -c a.c" in said


def test_deb_commands_append_to_their_log_with_a_heartbeat(monkeypatch, tmp_path):
    monkeypatch.setenv(progress.HEARTBEAT_ENV, "0.05")
    monkeypatch.delenv(progress.VERBOSE_ENV, raising=False)
    log = tmp_path / "build.log"
    log.write_text("earlier phase\n")
    said = []
    rc = docker_run.run_logged(["sh", "-c", "echo building; sleep 0.3; echo built"], log, log=said.append,
                               what="bookworm-3.11: build")
    assert rc == 0
    assert log.read_text().splitlines() == ["earlier phase", "$ sh -c 'echo building; sleep 0.3; echo built'",
                                            "building", "built"]
    assert any(s.startswith("  ... bookworm-3.11: build: ") for s in said)


def test_cli_verbose_reaches_the_long_steps(monkeypatch):
    from cpython_perf import cli
    from cpython_perf.image import pipeline

    monkeypatch.setenv(progress.VERBOSE_ENV, "")
    seen = []
    monkeypatch.setattr(pipeline, "build_cell", lambda *a, **k: seen.append(progress.verbose()))
    assert cli.main(["build", "3.13-fp", "--verbose"]) == 0
    assert seen == [True]

"""The trampoline of a running process is switched on and off from outside it, and perf then sees the chain.

A cell container runs remote_targets.py without -X perf: a busy target (always in Python code), a
sleeping one (idle in select() between short bursts) and a multi-threaded one (the main thread waits in
join() for ever, one thread runs the chain, another holds the GIL in long C calls).
`python -m cpython_perf activate --container` (cpython_perf.record.activate: gdb in the tools image,
in the container's pid namespace, with CAP_SYS_PTRACE) asks its interpreter to switch the trampoline on.
Must hold: the request is answered "done" within the timeout with the trampoline active, the program
says so itself (sys.is_stack_trampoline_active(), printed by the target), the program is still running
(no crash, no deadlock), perf record -g in the container then finds baz under bar under foo in the
samples inside baz (perf_samples.chain_report, as every recording of the suite), and a second request
switches it off again.  perf_jit is switched on in the busy target, with its jitdump then mapped.  On a
vanilla twin (CPython as released) the request must be refused, saying the interpreter lacks the series.
"""

from __future__ import annotations

import shutil
import time

import pytest

from cpython_perf.run import containers
from cpython_perf.check import external
from cpython_perf.record import activate
from cpython_perf.record.remote_request import NO_SERIES, XSAVE_REFUSED
from cpython_perf.record.perf_samples import PERF_SCRIPT_FIELDS, chain_report, parse_perf_script, py_symbol

from conftest import (MATRIX, SCRIPTS, assert_chain, cannot_run, image_of, not_applicable, perf_event_for, perf_of,
                      python_of)

# skipped on build-only cells; also run on an --image/--python target, e.g. a deb lane's installed package
pytestmark = [pytest.mark.needs_perf, pytest.mark.also_external]
PROGRAM = "/src/remote_targets.py"
CHAIN = [py_symbol(f, PROGRAM) for f in ("baz", "bar", "foo")]
TIMEOUT = 20.0
RECORD_SECONDS = 2


def start_target(client, image: str, target: str, python: str = "python3", pid_mode: str | None = None):
    container = client.containers.run(
        image, [python, PROGRAM, target], detach=True, pid_mode=pid_mode,
        cap_add=containers.container_capabilities(["SYS_ADMIN"]),
        volumes={str(SCRIPTS): {"bind": "/src", "mode": "ro"}})
    deadline = time.monotonic() + 60
    while b"ready" not in container.logs():
        container.reload()
        if container.status != "running" or time.monotonic() > deadline:
            raise AssertionError(f"the {target} target did not start: {container.logs().decode(errors='replace')}")
        time.sleep(0.2)
    time.sleep(0.5)
    return container


def said(container) -> list[str]:
    return container.logs().decode(errors="replace").split()


def wait_for_line(container, word: str, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if word in said(container):
            return True
        time.sleep(0.1)
    return False


def gate(cell, target_facts=None) -> None:
    if cell.foreign:
        not_applicable("foreign", f"{cell.name}: gdb and perf cannot work on a program under qemu-user")
    if target_facts is not None and isinstance(cell, external.ExternalTarget):
        facts = target_facts(cell)
        if not facts.python.get("sys_api"):
            pytest.skip(f"{cell.name}: Python {facts.version_text} has no trampoline to switch (no "
                        "sys.activate_stack_trampoline: native from 3.12, the series adds it to 3.9 and 3.11)")


def switch(client, container, cell, mode: str, pid: int | None = None, host_gdb: bool = False) -> tuple[int, dict]:
    """activate --container (or, with pid, activate --pid of this machine): its exit status and report.  An
    external target whose interpreter lacks the series (a stock image) is skipped with the command's reason;
    a cell without it fails."""
    if pid is None:
        status, report = activate.activate(client, MATRIX, container.id, None, mode, TIMEOUT)
    else:
        status, report = activate.activate(None if host_gdb else client, MATRIX, None, str(pid), mode, TIMEOUT,
                                           host_gdb=host_gdb)
    if isinstance(cell, external.ExternalTarget) and status == 2 and NO_SERIES in report.get("error", ""):
        pytest.skip(f"{cell.name}: {report['error']}")
    return status, report


def switched_off_and_running(client, container, cell, what: str, pid: int | None = None,
                             host_gdb: bool = False) -> None:
    """Switch the trampoline off again: the request must be done, the program must say so itself and keep
    running."""
    status, report = switch(client, container, cell, "off", pid, host_gdb)
    assert status == 0 and report.get("active") is False, f"activate --mode off, {what}: exit {status}, {report}"
    assert wait_for_line(container, "inactive"), f"{what} still says active: {said(container)}"
    container.reload()
    assert container.status == "running", f"{what} stopped: {container.logs()[-1500:]!r}"


@pytest.mark.parametrize("target", ("busy", "sleeping", "threads"))
def test_switched_on_from_outside_then_recorded(cell, target, docker_client, tmp_path_factory, record_property,
                                                target_facts):
    gate(cell, target_facts)
    if cell.vanilla:
        not_applicable("vanilla", f"{cell.name} is a vanilla twin: test_refused_without_the_series covers it")
    # an interpreter of an image claims what --expect-modes (its stock: modes) says
    claimed = cell.backends if isinstance(cell, external.ExternalTarget) else cell.modes
    if "perf" not in claimed:
        not_applicable("mode:perf", f"{cell.name} does not claim perf (frame pointers): its chain is not "
                       "recorded with perf -g here")
    image = image_of(cell, docker_client)
    perf = perf_of(cell, docker_client, tmp_path_factory)
    container = start_target(docker_client, image, target, python_of(cell))
    try:
        began = time.monotonic()
        status, report = switch(docker_client, container, cell, "perf")
        record_property("activate_seconds", round(time.monotonic() - began, 2))
        print(report)
        if report.get("via") == "sys.remote_exec" and target == "threads" and status == 3:
            pytest.skip(f"{cell.name}: sys.remote_exec() runs its script in the interpreter's main thread, and this "
                        "target's main thread waits in join() for ever: the switch stays pending until it runs "
                        f"Python code ({report.get('message')}); the series' request is taken by any thread")
        assert status == 0 and report.get("state") == "done" and report.get("active") is True, (
            f"activate --mode perf in the {target} target: exit {status}, {report}")
        assert wait_for_line(container, "active"), f"the {target} target never saw its trampoline active: {said(container)}"
        container.reload()
        assert container.status == "running", f"the {target} target stopped: {container.logs()[-1500:]!r}"

        event = perf_event_for(image, "SYS_ADMIN", docker_client, perf)
        options = " ".join(event.record_options())
        shell = (f"{perf} record {options} -F 999 -g -p 1 -o /tmp/remote.data -- sleep {RECORD_SECONDS} >/dev/null "
                 f"2>&1 && {perf} script -F {PERF_SCRIPT_FIELDS} -i /tmp/remote.data 2>/dev/null")
        code, output = container.exec_run(["sh", "-c", shell])
        assert code == 0, f"perf in the {target} target failed: {output.decode(errors='replace')[-1500:]}"
        samples = parse_perf_script(output.decode(errors="replace"))
        if target == "threads":
            # the chain's share is measured in the thread that runs it: the GIL-holding sorter takes the rest
            # of the process's samples, more of them the slower the build's sort (a debug build, Debian's)
            chain_threads = {s.tid for s in samples if s.python_frames()[:1] == CHAIN[:1]}
            record_property("process_samples", len(samples))
            samples = [s for s in samples if s.tid in chain_threads]
        assert_chain(chain_report(samples, CHAIN), "perf", f"{target} target, switched on from outside",
                     record_property)

        switched_off_and_running(docker_client, container, cell, f"the {target} target")
    finally:
        container.remove(force=True)


@pytest.mark.parametrize("gdb", ("tools-image", "host-gdb"))
def test_switched_on_by_its_pid_on_this_machine(cell, gdb, docker_client, target_facts):
    """activate --pid PID of a process of this machine (no --container): gdb from the tools image with the
    host's pid namespace, or this machine's gdb (--host-gdb).  The program runs in the cell's image with the
    host's pid namespace, so that its pid there is its pid here (its perf map is named by it)."""
    gate(cell, target_facts)
    if cell.vanilla:
        not_applicable("vanilla", f"{cell.name} is a vanilla twin: test_refused_without_the_series covers it")
    if gdb == "host-gdb" and shutil.which("gdb") is None:
        cannot_run("no gdb on this machine for activate --host-gdb (apt-get install gdb; .ci/run installs it)")
    image = image_of(cell, docker_client)
    container = start_target(docker_client, image, "busy", python_of(cell), pid_mode="host")
    try:
        container.reload()
        pid = container.attrs["State"]["Pid"]
        status, report = switch(docker_client, container, cell, "perf", pid, gdb == "host-gdb")
        if gdb == "host-gdb" and XSAVE_REFUSED in report.get("error", ""):
            pytest.skip(f"this machine's gdb: {report['error']} (the tools-image case of this test switches the "
                        "same process)")
        assert status == 0 and report.get("state") == "done" and report.get("active") is True, (
            f"activate --pid {pid} --mode perf ({gdb}): exit {status}, {report}")
        assert report.get("pid") == pid, f"the request answered for process {report.get('pid')}, not {pid}"
        assert wait_for_line(container, "active"), f"the target never saw its trampoline active: {said(container)}"
        code, _ = container.exec_run(["test", "-s", f"/tmp/perf-{pid}.map"])
        assert code == 0, f"no /tmp/perf-{pid}.map written after the switch"
        switched_off_and_running(docker_client, container, cell, f"process {pid} ({gdb})", pid, gdb == "host-gdb")
    finally:
        container.remove(force=True)


def test_perf_jit_switched_on_from_outside(cell, docker_client, target_facts):
    gate(cell, target_facts)
    if cell.vanilla or "perf_jit" not in cell.backends:
        not_applicable("mode:perf_jit", f"{cell.name}'s interpreter does not offer perf_jit")
    image = image_of(cell, docker_client)
    container = start_target(docker_client, image, "busy", python_of(cell))
    try:
        status, report = switch(docker_client, container, cell, "perf_jit")
        assert status == 0 and report.get("state") == "done" and report.get("active") is True, (
            f"activate --mode perf_jit: exit {status}, {report}")
        code, maps = container.exec_run(["cat", "/proc/1/maps"])
        assert b"/tmp/jit-1.dump" in maps, "the jitdump is not mapped (perf inject --jit would not find it)"
        status, report = switch(docker_client, container, cell, "off")
        assert status == 0 and report.get("active") is False, f"activate --mode off: exit {status}, {report}"
    finally:
        container.remove(force=True)


def test_refused_without_the_series(cell, docker_client):
    gate(cell)
    if isinstance(cell, external.ExternalTarget):
        pytest.skip(f"{cell.name} is an interpreter of an image: the other tests switch it (with the series' request "
                    "where it has the series, with sys.remote_exec() on 3.14 and later) or skip saying why they cannot")
    if not cell.vanilla:
        not_applicable("patched", f"{cell.name} has the series: the other tests switch it")
    image = image_of(cell, docker_client)
    container = start_target(docker_client, image, "busy", python_of(cell))
    try:
        status, report = activate.activate(docker_client, MATRIX, container.id, None, "perf", TIMEOUT)
        assert status == 2 and NO_SERIES in report.get("error", ""), (
            f"activate on {cell.name} (no series): exit {status}, {report}")
        container.reload()
        assert container.status == "running", "the target stopped after gdb attached"
    finally:
        container.remove(force=True)

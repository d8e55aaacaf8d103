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

import time

import pytest

from cpython_perf.build import containers
from cpython_perf.record import activate
from cpython_perf.record.perf_samples import PERF_SCRIPT_FIELDS, chain_report, parse_perf_script, py_symbol

from conftest import MATRIX, SCRIPTS, assert_chain, image_for, not_applicable, perf_event_for

pytestmark = pytest.mark.needs_perf   # skipped on build-only cells (conftest)
PROGRAM = "/src/remote_targets.py"
CHAIN = [py_symbol(f, PROGRAM) for f in ("baz", "bar", "foo")]
TIMEOUT = 20.0
RECORD_SECONDS = 2


def start_target(client, image: str, target: str):
    container = client.containers.run(
        image, ["python3", PROGRAM, target], detach=True,
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


def gate(cell) -> None:
    if cell.foreign:
        not_applicable("foreign", f"{cell.name}: gdb and perf cannot work on a program under qemu-user")


@pytest.mark.parametrize("target", ("busy", "sleeping", "threads"))
def test_switched_on_from_outside_then_recorded(cell, target, docker_client, record_property):
    gate(cell)
    if cell.vanilla:
        not_applicable("vanilla", f"{cell.name} is a vanilla twin: test_refused_without_the_series covers it")
    if "perf" not in cell.modes:
        not_applicable("mode:perf", f"{cell.name} does not claim perf (frame pointers): its chain is not "
                       "recorded with perf -g here")
    image = image_for(cell, docker_client)
    container = start_target(docker_client, image, target)
    try:
        began = time.monotonic()
        status, report = activate.activate(docker_client, MATRIX, container.id, None, "perf", TIMEOUT)
        record_property("activate_seconds", round(time.monotonic() - began, 2))
        print(report)
        assert status == 0 and report.get("state") == "done" and report.get("active") is True, (
            f"activate --mode perf in the {target} target: exit {status}, {report}")
        assert wait_for_line(container, "active"), f"the {target} target never saw its trampoline active: {said(container)}"
        container.reload()
        assert container.status == "running", f"the {target} target stopped: {container.logs()[-1500:]!r}"

        event = perf_event_for(image, "SYS_ADMIN", docker_client)
        options = " ".join(event.record_options())
        shell = (f"perf record {options} -F 999 -g -p 1 -o /tmp/remote.data -- sleep {RECORD_SECONDS} >/dev/null "
                 f"2>&1 && perf script -F {PERF_SCRIPT_FIELDS} -i /tmp/remote.data 2>/dev/null")
        code, output = container.exec_run(["sh", "-c", shell])
        assert code == 0, f"perf in the {target} target failed: {output.decode(errors='replace')[-1500:]}"
        samples = parse_perf_script(output.decode(errors="replace"))
        assert_chain(chain_report(samples, CHAIN), "perf", f"{target} target, switched on from outside",
                     record_property)

        status, report = activate.activate(docker_client, MATRIX, container.id, None, "off", TIMEOUT)
        assert status == 0 and report.get("active") is False, f"activate --mode off: exit {status}, {report}"
        assert wait_for_line(container, "inactive"), f"the {target} target still says active: {said(container)}"
        container.reload()
        assert container.status == "running", f"the {target} target stopped: {container.logs()[-1500:]!r}"
    finally:
        container.remove(force=True)


def test_perf_jit_switched_on_from_outside(cell, docker_client):
    gate(cell)
    if cell.vanilla or "perf_jit" not in cell.backends:
        not_applicable("mode:perf_jit", f"{cell.name}'s interpreter does not offer perf_jit")
    image = image_for(cell, docker_client)
    container = start_target(docker_client, image, "busy")
    try:
        status, report = activate.activate(docker_client, MATRIX, container.id, None, "perf_jit", TIMEOUT)
        assert status == 0 and report.get("state") == "done" and report.get("active") is True, (
            f"activate --mode perf_jit: exit {status}, {report}")
        code, maps = container.exec_run(["cat", "/proc/1/maps"])
        assert b"/tmp/jit-1.dump" in maps, "the jitdump is not mapped (perf inject --jit would not find it)"
        status, report = activate.activate(docker_client, MATRIX, container.id, None, "off", TIMEOUT)
        assert status == 0 and report.get("active") is False, f"activate --mode off: exit {status}, {report}"
    finally:
        container.remove(force=True)


def test_refused_without_the_series(cell, docker_client):
    gate(cell)
    if not cell.vanilla:
        not_applicable("patched", f"{cell.name} has the series: the other tests switch it")
    image = image_for(cell, docker_client)
    container = start_target(docker_client, image, "busy")
    try:
        status, report = activate.activate(docker_client, MATRIX, container.id, None, "perf", TIMEOUT)
        assert status == 2 and "not built with the cpython-perf series" in report.get("error", ""), (
            f"activate on {cell.name} (no series): exit {status}, {report}")
        container.reload()
        assert container.status == "running", "the target stopped after gdb attached"
    finally:
        container.remove(force=True)

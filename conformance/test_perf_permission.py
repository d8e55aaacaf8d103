"""The capability probe: perf works with the least capability, and a refusal is named."""

from __future__ import annotations

import pytest

from cpython_perf.run import containers
from cpython_perf.record import perf_event
from cpython_perf.errors import PerfNotPermitted

from conftest import image_for, not_applicable

pytestmark = pytest.mark.needs_perf   # skipped on build-only cells (conftest)


def skip_foreign(cell):
    if cell.foreign:
        not_applicable("foreign", f"{cell.name}: perf cannot sample under qemu-user; it runs in a qemu-system guest as root "
                    "with perf_event_paranoid -1, where no container capability is involved")


def test_probe_finds_a_capability(cell, docker_client, record_property):
    skip_foreign(cell)
    cap = containers.perf_capability(docker_client, image_for(cell, docker_client))
    record_property("perf_capability", cap)
    assert cap in containers.PERF_CAPABILITIES


def test_refusal_names_the_missing_capability(cell, docker_client):
    skip_foreign(cell)
    """With a capability that does not cover perf_event_open, the probe must refuse, not pass."""
    image = image_for(cell, docker_client)
    if containers.host_perf_paranoid() in ("-1", "0", "1"):
        pytest.skip("kernel.perf_event_paranoid <= 1 lets perf run without capabilities here")
    with pytest.raises(PerfNotPermitted) as info:
        containers.perf_capability(docker_client, image, capabilities=("NET_ADMIN",))
    message = str(info.value)
    assert "with --cap-add NET_ADMIN:" in message
    assert "CAP_PERFMON (engines that know it) or CAP_SYS_ADMIN" in message


def test_event_probe_chooses_an_event_that_samples(cell, docker_client, record_property):
    """The host's event probe (cpython_perf.record.perf_event) finds an event whose busy loop has samples."""
    skip_foreign(cell)
    image = image_for(cell, docker_client)
    cap = containers.perf_capability(docker_client, image)
    choice = perf_event.probe_in(lambda shell: containers.run(docker_client, image, shell, workdir="/tmp",
                                                               cap_add=[cap], timeout=120))
    record_property("default_probe", choice.label)   # not perf_event: what this test's own probe found
    assert choice.chosen.samples > 0, choice


def test_event_probe_falls_back_to_cpu_clock_when_the_event_yields_nothing(cell, docker_client, record_property,
                                                                           monkeypatch):
    """The arm runners' case made here: the probe's first event is `dummy`, which opens and never fires (as
    cycles there), through $CPYTHON_PERF_PROBE_EVENT as a user would set it; cpu-clock must be chosen, and it
    must sample."""
    skip_foreign(cell)
    image = image_for(cell, docker_client)
    cap = containers.perf_capability(docker_client, image)
    monkeypatch.setenv(perf_event.PROBE_EVENT_ENV, "dummy")
    choice = perf_event.host_event(docker_client, image, cap)
    record_property("forced_probe", choice.label)
    assert [a.event for a in choice.attempts] == ["dummy", perf_event.FALLBACK_EVENT], choice
    assert choice.attempts[0].samples == 0 and choice.attempts[0].name == "dummy"
    assert choice.event == perf_event.FALLBACK_EVENT and choice.chosen.samples > 0
    assert choice.record_options() == ["-e", "cpu-clock"]

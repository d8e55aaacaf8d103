"""The capability probe: perf works with the least capability, and a refusal is named."""

from __future__ import annotations

import pytest

from cpython_perf import containers
from cpython_perf.errors import PerfNotPermitted

from conftest import image_for

pytestmark = pytest.mark.needs_perf   # skipped on build-only cells (conftest)


def skip_foreign(cell):
    if cell.foreign:
        pytest.skip(f"{cell.name}: perf cannot sample under qemu-user; it runs in a qemu-system guest as root "
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

"""Container options of the driver (cpython_perf.run.containers): CAP_IPC_LOCK beside perf's capability, so that
several perf suites can record on one machine at once.  No Docker: a fake client records what is created."""

from __future__ import annotations

import pytest

from cpython_perf.run import containers


class FakeContainer:
    def start(self):
        pass

    def wait(self, timeout=None):
        return {"StatusCode": 0}

    def logs(self, stdout=True, stderr=True):
        return b""

    def remove(self, force=False):
        pass


class FakeClient:
    def __init__(self):
        self.created = []

        class Containers:
            def create(inner, image, argv, **kwargs):
                self.created.append(kwargs)
                return FakeContainer()

        self.containers = Containers()


@pytest.mark.parametrize("cap", containers.PERF_CAPABILITIES)
def test_a_perf_container_gets_cap_ipc_lock(cap):
    client = FakeClient()
    containers.run(client, "img", ["true"], cap_add=[cap])
    assert client.created[0]["cap_add"] == [cap, "IPC_LOCK"]


@pytest.mark.parametrize("cap_add", [None, [], ["SYS_PTRACE"]])
def test_other_containers_do_not(cap_add):
    client = FakeClient()
    containers.run(client, "img", ["true"], cap_add=cap_add)
    assert "IPC_LOCK" not in client.created[0]["cap_add"]


def test_the_reproducers_control_leaves_it_out_and_nothing_is_doubled():
    assert containers.container_capabilities(["SYS_ADMIN"], mlock=False) == ["SYS_ADMIN"]
    assert containers.container_capabilities(["PERFMON", "IPC_LOCK"]) == ["PERFMON", "IPC_LOCK"]
    client = FakeClient()
    containers.run(client, "img", ["true"], cap_add=["SYS_ADMIN"], mlock=False)
    assert client.created[0]["cap_add"] == ["SYS_ADMIN"]


def test_perf_mmap_arithmetic_matches_what_was_seen_here():
    """This machine: perf_event_mlock_kb 516, 2 CPUs, Docker's 8 MiB memlock, the suite's 4 MiB perf_jit
    buffers: one recording fits (258 pages of the user's budget, the rest pinned), a second beside it does
    not (2 x 1025 pages > 2048), while perf's default 512 KiB buffers fit beside it (conformance/
    test_concurrent_perf.py records both)."""
    alone, held = containers.perf_mmap_refused(516, 2, 8192, 4096)
    assert (alone, held) == (False, 258)
    assert containers.perf_mmap_refused(516, 2, 8192, 4096, held_pages=held)[0] is True
    assert containers.perf_mmap_refused(516, 2, 8192, 512, held_pages=held)[0] is False
    # a bigger per-user budget (the sysctl raised) lets both through without the capability
    assert containers.perf_mmap_refused(16384, 2, 8192, 4096, held_pages=held)[0] is False
    # kernel.perf_event_paranoid=-1: the kernel checks no locked-memory limit at all
    assert containers.perf_mmap_refused(516, 2, 8192, 4096, held_pages=held, paranoid=-1)[0] is False

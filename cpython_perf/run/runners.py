"""Runners: one image's commands run with a test's directory mounted, as the conformance suite runs its checks.

A CellRunner runs each command in a fresh container of its image (containers.run) with /src and /tmp mounted
from its work directory (containers.make_workdir), and, for a perf command, the perf capability it was given
and what a check script that runs perf itself reads: the host's sampling event (RECORD_EVENT_ENV) and the
dwarf dump size (RECORD_DWARF_STACK_ENV).  A GuestRunner, a foreign-arch cell's, takes the perf recordings
planned for its qemu-system guest (guest.py) from the guest's one boot, and runs everything else in the
container under qemu-user, where perf cannot sample.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..errors import DriverError
from . import containers
from .guest import GuestJob, GuestRun

# What a check script running perf itself reads: the host's sampling event for `perf record -e`
# (cpython_perf.record.perf_event), and the dump size of `--call-graph dwarf` (perf_runs.stack_dump_bytes: a
# check that hard-coded a size would see no Python frame where one eval-loop frame is larger, -O0's 18 KiB)
RECORD_EVENT_ENV = "CPYTHON_PERF_EVENT"
RECORD_DWARF_STACK_ENV = "CPYTHON_PERF_DWARF_STACK"


class CellRunner:
    """Runs commands in one image with /src and /tmp mounted from workdir (containers.make_workdir's)."""

    python = "python3"   # the interpreter of the image (an external target's: its --python)
    perf = "perf"        # the perf command of the image (an external image's may be perf_X.Y)
    event = None         # the host's sampling event for perf record -e (None: perf's default)
    dwarf_stack = None   # the cell's dwarf dump size for perf_jit recordings (perf_runs.stack_dump_bytes)

    def __init__(self, client, image: str, workdir: Path, cap: str | None):
        self.client, self.image, self.workdir, self.cap = client, image, workdir, cap
        self.src = workdir / "src"
        self.tmp = workdir / "tmp"
        self.extra_mounts: dict[Path, str] = {}   # e.g. a tool's binary, read by the command
        self.extra_caps: list[str] = []           # e.g. SYS_PTRACE for a profiler that reads another process

    def run(self, command, env=None, timeout=900, perf=True) -> containers.RunResult:
        """command (a list, or a string for `sh -c`) in a fresh container; perf: with the perf capability and
        the event and dump size a check script's own perf record reads."""
        if perf and self.event:   # for the check scripts that run perf record themselves
            env = {RECORD_EVENT_ENV: self.event, **(env or {})}
        if perf and self.dwarf_stack:
            env = {RECORD_DWARF_STACK_ENV: str(self.dwarf_stack), **(env or {})}
        return containers.run(
            self.client, self.image, command,
            mounts={self.src: "/src", self.tmp: "/tmp", **self.extra_mounts},
            cap_add=([self.cap] if (perf and self.cap) else []) + self.extra_caps,
            env=env, timeout=timeout,
        )


class UnplannedGuestRecording(DriverError):
    """A perf recording asked of a foreign cell that its guest's jobs do not include."""


class GuestRunner(CellRunner):
    """A foreign cell's runner: the perf recordings among jobs (each asked for by its shell text) come from the
    cell's guest, booted on first use by boot (once a session: the caller keeps its GuestRun), their outputs
    written to /src; everything else runs in the container under qemu-user.  record_property(name, value) is
    given the guest's boot and run times and its kernel."""

    def __init__(self, client, image: str, workdir: Path, cell_name: str, jobs: list[GuestJob],
                 boot: Callable[[], GuestRun], record_property: Callable[[str, object], None]):
        super().__init__(client, image, workdir, None)
        self.cell_name, self.boot, self.record_property = cell_name, boot, record_property
        self.jobs = {job.shell: job for job in jobs}

    def run(self, command, env=None, timeout=900, perf=True) -> containers.RunResult:
        job = self.jobs.get(command) if perf and isinstance(command, str) and not env else None
        if job is None:
            if perf and "perf record" in (command if isinstance(command, str) else " ".join(command)):
                raise UnplannedGuestRecording(
                    f"{self.cell_name}: this perf recording is not planned for the guest (conftest.guest_jobs), "
                    "and perf cannot sample under qemu-user")
            return super().run(command, env=env, timeout=timeout, perf=False)
        run = self.boot()
        for key, value in (("guest_boot_seconds", round(run.boot_seconds, 1)),
                           ("guest_total_seconds", round(run.total_seconds, 1)),
                           ("guest_disk_seconds", round(run.disk_seconds, 1)),
                           ("guest_kernel", run.uname)):
            self.record_property(key, value)
        result = run.jobs[job.name]
        for name, data in result.files.items():
            (self.src / name).write_bytes(data)
        return containers.RunResult(["guest", job.name], result.exit_code, result.stdout, result.stderr,
                                    result.seconds)

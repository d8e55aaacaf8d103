"""Run commands in a fresh container of an image, with the least privilege that lets perf work.

perf_event_open needs CAP_PERFMON (engines that know it) or CAP_SYS_ADMIN
(Docker 20.10, which rejects the PERFMON name).  The probe tries PERFMON
first, then SYS_ADMIN, and says which capability was missing if neither works.

Several perf suites on one machine: perf's ring buffers are locked memory, charged first to one budget per
user (kernel.perf_event_mlock_kb per CPU) and beyond it to the recording process's RLIMIT_MEMLOCK, and
every container's root is the same user.  With one recording holding that budget, a second one's whole
buffer falls on its RLIMIT_MEMLOCK (8 MiB in Docker's containers), and the suite's perf_jit buffers, sized
to that limit (4 MiB a CPU on two CPUs, plus a page each), no longer fit: "Permission error mapping pages".  perf_mmap lets a mapping beyond the
limit through when `capable(CAP_IPC_LOCK)` (kernel/events/core.c, perf_mmap_calc_limits), so every
container given a perf capability also gets CAP_IPC_LOCK (container_capabilities).  `--ulimit memlock=-1`
would do too, where the engine may raise the hard limit; dockerd without CAP_SYS_RESOURCE (as here) cannot.
The buffers stay sized from the memlock limit (perf_runs.DWARF_MMAP_FUNCTION), which bounds what one
recording pins.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import DriverError, PerfNotPermitted

PERF_CAPABILITIES = ("PERFMON", "SYS_ADMIN")
# Lifts the locked-memory limit of perf's ring buffers (see above); added beside any perf capability.
PERF_MLOCK_CAPABILITY = "IPC_LOCK"
PERF_PROBE = ["perf", "record", "-q", "-o", "/tmp/perf-probe.data", "--", "true"]
_probe_cache: dict[tuple, str] = {}


@dataclass
class RunResult:
    command: list[str]
    exit_code: int
    stdout: str
    stderr: str
    seconds: float

    def check(self, what: str = "command") -> "RunResult":
        if self.exit_code != 0:
            raise DriverError(
                f"{what} failed in the container (exit {self.exit_code}): {' '.join(self.command)}\n"
                f"--- stdout (tail)\n{self.stdout[-3000:]}\n--- stderr (tail)\n{self.stderr[-3000:]}"
            )
        return self


def make_workdir(path: Path) -> Path:
    """A run's directory on the host: path/src (mounted at /src: scripts, perf data) and path/tmp (mounted at
    /tmp, world-writable and sticky like /tmp: perf-PID.map, jit-PID.dump, perf inject's jitted-*.so)."""
    (path / "src").mkdir(parents=True)
    (path / "tmp").mkdir()
    (path / "tmp").chmod(0o1777)
    return path


def container_capabilities(cap_add, mlock: bool = True) -> list[str]:
    """The capabilities a container is created with: cap_add, plus CAP_IPC_LOCK where it holds a perf
    capability (mlock=False: not, the reproducer's control of the concurrency note above)."""
    caps = list(cap_add or [])
    if mlock and any(cap in PERF_CAPABILITIES for cap in caps) and PERF_MLOCK_CAPABILITY not in caps:
        caps.append(PERF_MLOCK_CAPABILITY)
    return caps


def run(client, image: str, command, *, workdir: str = "/src", mounts: dict[Path, str] | None = None,
        cap_add: list[str] | None = None, env: dict[str, str] | None = None, timeout: float = 900,
        cpu_shares: int | None = None, mlock: bool = True, read_only: dict[Path, str] | None = None) -> RunResult:
    """Run command (a list, or a string for `sh -c`) in a fresh container and collect its output.

    mounts are bind-mounted read-write, read_only (host path -> container path) read-only.

    cpu_shares (default 1024 a container) below the default yields the CPU to other containers: for work
    whose result does not depend on time, such as instruction counts.  mlock: give a perf container
    CAP_IPC_LOCK (container_capabilities)."""
    argv = ["sh", "-c", command] if isinstance(command, str) else list(command)
    volumes = {str(h): {"bind": c, "mode": "rw"} for h, c in (mounts or {}).items()}
    volumes.update({str(h): {"bind": c, "mode": "ro"} for h, c in (read_only or {}).items()})
    started = time.monotonic()
    container = client.containers.create(
        image, argv, working_dir=workdir, volumes=volumes, cap_add=container_capabilities(cap_add, mlock),
        environment=env or {}, detach=True, **({"cpu_shares": cpu_shares} if cpu_shares else {}),
    )
    try:
        container.start()
        try:
            status = container.wait(timeout=timeout)
        except Exception as exc:  # requests' ReadTimeout
            container.kill()
            raise DriverError(f"{' '.join(argv)} did not finish within {timeout:.0f} s in {image}") from exc
        stdout = container.logs(stdout=True, stderr=False).decode(errors="replace")
        stderr = container.logs(stdout=False, stderr=True).decode(errors="replace")
        return RunResult(argv, status.get("StatusCode", -1), stdout, stderr, time.monotonic() - started)
    finally:
        container.remove(force=True)


def explain_perf_failure(attempts: dict[str, str], paranoid: str | None) -> str:
    """Message for a container in which perf_event_open is refused.

    attempts maps each capability tried to what perf (or the engine) said.
    """
    lines = ["perf cannot sample inside the container: perf_event_open was refused."]
    for cap, said in attempts.items():
        first = next((l.strip() for l in said.splitlines() if l.strip()), "no output")
        lines.append(f"  with --cap-add {cap}: {first}")
    tried = ", ".join(f"CAP_{c}" for c in attempts) or "none"
    lines.append(
        "The container lacks the capability perf needs: CAP_PERFMON (engines that know it) or "
        f"CAP_SYS_ADMIN, granted and allowed by the engine's seccomp profile (tried: {tried})."
    )
    if paranoid is not None:
        lines.append(f"Host kernel.perf_event_paranoid = {paranoid} (4 or more, as some kernels patch it, forbids perf for everyone).")
    lines.append("Fix: run with a Docker engine that lets the container add one of these capabilities "
                 "(rootless or restricted engines cannot), or lower kernel.perf_event_paranoid on the host.")
    return "\n".join(lines)


def host_perf_paranoid() -> str | None:
    try:
        return Path("/proc/sys/kernel/perf_event_paranoid").read_text().strip()
    except OSError:
        return None


def perf_capability(client, image: str, capabilities=PERF_CAPABILITIES, perf: str = "perf") -> str:
    """The least capability that lets perf record inside image; raises PerfNotPermitted.
    perf: the perf command of the image (an external image's may be a versioned perf_X.Y)."""
    key = (client.api.base_url, image, tuple(capabilities), perf)
    if key in _probe_cache:
        return _probe_cache[key]
    attempts: dict[str, str] = {}
    for cap in capabilities:
        try:
            result = run(client, image, [perf, *PERF_PROBE[1:]], workdir="/tmp", cap_add=[cap], timeout=120)
        except Exception as exc:  # the engine rejects an unknown capability name
            if isinstance(exc, DriverError):
                raise
            attempts[cap] = f"engine refused the capability: {exc}"
            continue
        if result.exit_code == 0:
            _probe_cache[key] = cap
            return cap
        attempts[cap] = result.stderr or result.stdout
    raise PerfNotPermitted(explain_perf_failure(attempts, host_perf_paranoid()))


def perf_mmap_refused(mlock_kb: int, cpus: int, rlimit_kb: int, buffer_kb: int, held_pages: int = 0,
                      page_kb: int = 4, paranoid: int = 2) -> tuple[bool, int]:
    """Whether the kernel refuses a recording's ring buffers without CAP_IPC_LOCK, and the pages of the
    per-user budget it then holds: perf_mmap_calc_limits of kernel/events/core.c, one mapping of
    buffer_kb + a page per CPU.  held_pages: the budget other recordings of the same user already hold
    (perf_event_mlock_kb per CPU in all); beyond it a mapping is charged to the process's pinned memory,
    which RLIMIT_MEMLOCK (rlimit_kb) bounds.  With kernel.perf_event_paranoid at -1 the kernel enforces
    neither limit (perf_is_paranoid() is false): nothing is refused."""
    user_limit = mlock_kb // page_kb * cpus
    user_locked, pinned = held_pages, 0
    for _ in range(cpus):
        pages = buffer_kb // page_kb + 1
        extra = max(0, min(user_locked, user_limit) + pages - user_limit)
        if pinned + extra > rlimit_kb // page_kb and paranoid > -1:
            return True, user_locked - held_pages
        user_locked += pages - extra
        pinned += extra
    return False, user_locked - held_pages


# --------------------------------------------------------------------------
# Whether the engine sees this machine's paths

ENGINE_PROBE = "engine-probe"


def engine_path_problem(client, image: str, directory: Path) -> str | None:
    """None where the Docker engine sees directory as this process does, else what to do, in one line.

    The suite bind-mounts directories it made (pytest's temporary directory) into containers.  Run from a
    container that talks to another machine's engine through its socket (docker-outside-of-docker: GitLab's
    Docker executor, CI workers in containers, devcontainers, act), the engine mounts its own host's path of
    that name, which holds something else or nothing.  The probe writes a random token under directory and
    reads it back through a bind mount in image (any image with cat)."""
    import uuid

    import docker.errors

    directory = Path(directory)
    token = uuid.uuid4().hex
    (directory / ENGINE_PROBE).write_text(token + "\n")
    try:
        seen = client.containers.run(image, entrypoint=["cat", f"/probe/{ENGINE_PROBE}"], user="0",
                                     volumes={str(directory): {"bind": "/probe", "mode": "ro"}},
                                     network_disabled=True, remove=True, stdout=True, stderr=True)
    except docker.errors.ContainerError as exc:
        seen = exc.stderr or b""
    if seen.decode(errors="replace").strip() == token:
        return None
    return (f"the Docker engine does not see this machine's {directory} (a bind mount of it in a container "
            "holds other files): this runs in a container using another host's engine, so give pytest a "
            "directory mounted at the same path here and on the engine's host: --basetemp=DIR (nox: -- "
            "--basetemp=DIR) with `-v DIR:DIR` on this container")

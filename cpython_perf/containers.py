"""Run commands inside a cell image, with the least privilege that lets perf work.

perf_event_open needs CAP_PERFMON (engines that know it) or CAP_SYS_ADMIN
(Docker 20.10, which rejects the PERFMON name).  The probe tries PERFMON
first, then SYS_ADMIN, and says which capability was missing if neither works.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from .errors import DriverError, PerfNotPermitted

PERF_CAPABILITIES = ("PERFMON", "SYS_ADMIN")
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


def run(client, image: str, command, *, workdir: str = "/src", mounts: dict[Path, str] | None = None,
        cap_add: list[str] | None = None, env: dict[str, str] | None = None, timeout: float = 900,
        cpu_shares: int | None = None) -> RunResult:
    """Run command (a list, or a string for `sh -c`) in a fresh container and collect its output.

    cpu_shares (default 1024 a container) below the default yields the CPU to other containers: for work
    whose result does not depend on time, such as instruction counts."""
    argv = ["sh", "-c", command] if isinstance(command, str) else list(command)
    volumes = {str(h): {"bind": c, "mode": "rw"} for h, c in (mounts or {}).items()}
    started = time.monotonic()
    container = client.containers.create(
        image, argv, working_dir=workdir, volumes=volumes, cap_add=cap_add or [],
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


def perf_capability(client, image: str, capabilities=PERF_CAPABILITIES) -> str:
    """The least capability that lets perf record inside image; raises PerfNotPermitted."""
    key = (client.api.base_url, image, tuple(capabilities))
    if key in _probe_cache:
        return _probe_cache[key]
    attempts: dict[str, str] = {}
    for cap in capabilities:
        try:
            result = run(client, image, PERF_PROBE, workdir="/tmp", cap_add=[cap], timeout=120)
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

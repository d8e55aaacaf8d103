"""`python -m cpython_perf doctor`: can this machine run the default job, in one screen, before 10-40 minutes of it?

The default job is the README's test command: build the smoke cells' images (and the base and tools images
they start from) and record them with real perf in containers.  Each check prints a status (ok / warn /
fail), a short finding and, when not ok, the fix.  The exit status is 1 when a check the default job needs
fails, else 0.  Doctor diagnoses only: it installs, starts, pulls and builds nothing; where the driver would
install or start something itself (as root on Debian, cpython_perf.host) the finding says so.

What it looks at goes through Machine, so the unit tests give fakes (tests/test_doctor.py); the real one asks
Docker, runs perf in a container of an image that is already here (the capability probe of
cpython_perf.run.containers, the event probe of cpython_perf.record.perf_event) and reads /proc.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .image import render
from .run import containers
from . import host
from .record import perf_event
from .source import sources
from .errors import DriverError
from .arches import HOST_ARCH
from .matrix import Matrix, load_matrix
from .subcommands import Command, no_arguments

OK, WARN, FAIL = "ok", "warn", "fail"

# The figures the estimate uses (measured on this project's 2-core machines; README, BENCHMARKS.md)
CELL_IMAGE_GB = 1.3        # a cell image: 1 to 1.3 GB
TOOLS_IMAGE_GB = 2.4       # the tools image (samply, inferno)
BASE_IMAGE_GB = 0.6        # the base image
BUILD_SCRATCH_GB = 2.0     # a build's context, layers and source tree while it runs
COLD_BUILD_MINUTES = 3.0   # a cold cell build on 2 cores


@dataclass
class Check:
    name: str
    status: str
    finding: str
    fix: str = ""
    required: bool = True   # a failure of it makes the default job impossible (exit 1)


@dataclass
class Machine:
    """What doctor reads; each field a callable, so a test gives fakes (no Docker, no /proc)."""

    which: Callable[[str], str | None] = shutil.which
    docker: Callable[[], object] = lambda: host.docker_client(log=lambda *_: None, start_daemon=False)
    setup_allowed: Callable[[], bool] = host.host_setup_allowed
    paranoid: Callable[[], str | None] = containers.host_perf_paranoid
    perf_capability: Callable[[object, str], str] = containers.perf_capability
    perf_event: Callable[[object, str, str], perf_event.EventChoice] = perf_event.host_event
    images: Callable[[object], set[str]] = lambda client: {t for i in client.images.list() for t in i.tags}
    docker_root: Callable[[object], str] = lambda client: client.info().get("DockerRootDir", "/var/lib/docker")
    disk_free: Callable[[str], int] = lambda path: shutil.disk_usage(_existing(path)).free
    binfmt_entry: Callable[[str], str | None] = lambda handler: _read(host.BINFMT_DIR / handler)
    archive: Callable[[], str | None] = sources.debian_archive_uri
    cpus: Callable[[], int] = lambda: os.cpu_count() or 1


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _existing(path: str) -> str:
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    return str(p)


@dataclass
class Plan:
    """What the default job would make here: the images missing, and the image doctor can run perf in."""

    smoke: list[str]
    missing: list[str] = field(default_factory=list)    # image tags the job would build
    base_present: bool = False
    perf_image: str | None = None                        # an image here with perf in it


def plan_images(matrix: Matrix, present: set[str],
                archive: Callable[[], str | None] = sources.debian_archive_uri) -> Plan:
    """The smoke cells' images (by tag: doctor does not fetch sources to digest them), the tools image and the
    base image, each present or missing, and an image with perf to probe in (a cell's, else the base)."""
    from .image import tools

    base = render.host_base_image_tag(matrix.base_suite)
    cells = [matrix.cell(name) for name in matrix.smoke_cells]
    plan = Plan([c.name for c in cells], base_present=base in present)
    wanted = [c.image for c in cells]
    wanted.append(tools.tools_image_tag(tools.tools_dockerfile(matrix, archive())))
    plan.missing = [tag for tag in wanted if tag not in present] + ([] if plan.base_present else [base])
    perf_images = [c.image for c in cells if c.image in present and not c.build_only]
    perf_images += sorted(t for t in present if t.startswith("cpython-perf:") and t not in perf_images)
    plan.perf_image = (perf_images or ([base] if plan.base_present else [None]))[0]
    return plan


def _install_or_fail(name: str, command: str, package: str, what: str, machine: Machine, required=True) -> Check:
    if machine.which(command):
        return Check(name, OK, f"{machine.which(command)}")
    if machine.setup_allowed():
        return Check(name, WARN, f"not installed; {what}: the driver will install {package} with apt-get "
                                 "when it needs it (root on Debian)", f"apt-get install {package}", required=False)
    return Check(name, FAIL if required else WARN, f"not installed; {what}",
                 f"apt-get install {package} (as root), or run the driver as root on Debian", required=required)


def check_engine(machine: Machine) -> tuple[Check, object | None]:
    try:
        client = machine.docker()
    except ImportError as exc:
        return Check("docker engine", FAIL, f"the Docker SDK for Python is missing ({exc})",
                     "pip install -e . (or run through ./nox)"), None
    except DriverError as exc:
        first = str(exc).splitlines()[0]
        if machine.setup_allowed() and "DOCKER_HOST" not in os.environ:
            package = "" if machine.which("dockerd") else "install docker.io and "
            return Check("docker engine", WARN, f"{first}; the driver will {package}start dockerd itself",
                         "systemctl start docker (or dockerd &)", required=False), None
        return Check("docker engine", FAIL, first, "install docker.io and start dockerd (systemctl start docker)"), None
    version = client.version()
    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    return Check("docker engine", OK, f"Docker {version.get('Version', '?')} (API {version.get('ApiVersion', '?')}) "
                                      f"answers at {where}"), client


def check_perf(machine: Machine, client, plan: Plan) -> list[Check]:
    """The capability Docker grants perf, and the event perf samples with (both probed in plan.perf_image)."""
    if client is None:
        return [Check("perf capability", WARN, "not probed: no Docker engine", required=False),
                Check("sampling event", WARN, "not probed: no Docker engine", required=False)]
    if plan.perf_image is None:
        why = "not probed: no image with perf here yet (the first build makes the base image)"
        fix = "python -m cpython_perf base-image, then doctor again"
        return [Check("perf capability", WARN, why, fix, required=False),
                Check("sampling event", WARN, why, fix, required=False)]
    try:
        cap = machine.perf_capability(client, plan.perf_image)
    except DriverError as exc:
        lines = str(exc).splitlines()
        fix = next((l for l in lines if l.startswith("Fix:")), "").removeprefix("Fix: ")
        return [Check("perf capability", FAIL, f"{lines[0]} ({'; '.join(l.strip() for l in lines[1:3])})", fix),
                Check("sampling event", WARN, "not probed: perf is not permitted", required=False)]
    known = "" if cap == "PERFMON" else " (this engine does not know CAP_PERFMON)"
    checks = [Check("perf capability", OK, f"CAP_{cap}{known}, probed in {plan.perf_image}")]
    try:
        choice = machine.perf_event(client, plan.perf_image, cap)
    except DriverError as exc:
        checks.append(Check("sampling event", FAIL, str(exc).split(". Fix:")[0],
                            "perf record -e cpu-clock -- sleep 1 as root on the host: if that records nothing, "
                            "the kernel's perf events do not work here"))
        return checks
    first = choice.attempts[0]
    if not choice.fell_back:
        pmu = "" if "cycles" in first.name or choice.event else " (no hardware PMU: perf falls back to a timer itself)"
        checks.append(Check("sampling event", OK, f"{choice.label}: {first.samples} samples of a "
                                                  f"{perf_event.PROBE_SECONDS} s loop{pmu}"))
    else:
        checks.append(Check("sampling event", WARN,
                            f"{first.asked} gave {first.error or '0 samples'}; the suite records with -e "
                            f"{choice.event} ({choice.chosen.samples} samples); samply cannot be told an event and "
                            "falls back only when opening cycles fails, so it may record nothing here",
                            "nothing for perf (the suite falls back itself); where samply records nothing its "
                            "tests fail, saying why",
                            required=False))
    return checks


def check_paranoid(machine: Machine) -> Check:
    value = machine.paranoid()
    if value is None:
        return Check("perf_event_paranoid", WARN, "cannot read /proc/sys/kernel/perf_event_paranoid", required=False)
    try:
        level = int(value)
    except ValueError:
        return Check("perf_event_paranoid", WARN, f"reads {value!r}", required=False)
    if level >= 4:
        return Check("perf_event_paranoid", WARN, f"{level}: some kernels (Ubuntu's) forbid perf to everyone at 4, "
                                                  "capabilities or not", "sysctl -w kernel.perf_event_paranoid=1",
                     required=False)
    return Check("perf_event_paranoid", OK, f"{level} (the containers' perf capability is what counts below 4)")


def check_binfmt(machine: Machine, matrix: Matrix) -> Check:
    """Programs of the matrix's arches this host cross-builds, under qemu-user (their cells only: not the
    default job's)."""
    described = [matrix.arch_facts[a] for a in matrix.arches]
    foreign = [f for f in described if HOST_ARCH in f.cross_built_on and f.qemu_user]
    names = ", ".join(f.name for f in foreign)
    if not foreign:
        return Check("binfmt", OK, f"not needed: this host ({HOST_ARCH}) emulates no arch", required=False)
    problems = [(f, p) for f in foreign
                if (p := host.binfmt_problem(machine.binfmt_entry(f.qemu_user), f.qemu_user)) is not None]
    if not problems:
        return Check(f"binfmt {names}", OK, f"{', '.join(f.qemu_user for f in foreign)} registered with the F flag",
                     required=False)
    missing = ", ".join(f.name for f, _ in problems)
    then = (f"the driver will install qemu-user-static and binfmt-support and register it when a cell of {missing} "
            f"is built" if machine.setup_allowed() else f"cells of {missing} cannot be built or checked here")
    return Check(f"binfmt {names}", WARN, f"{'; '.join(p for _, p in problems)}; {then} ({missing} cells only)",
                 "apt-get install qemu-user-static binfmt-support && "
                 + " && ".join(f"update-binfmts --enable {f.qemu_user}" for f, _ in problems),
                 required=False)


def check_archive(machine: Machine, matrix: Matrix, plan: Plan) -> Check:
    suite = matrix.base_suite
    mode = os.environ.get("CPYTHON_PERF_BASE_MODE", "auto")
    uri = sources.describe_archive(machine.archive())
    if plan.base_present:
        return Check("debian archive", OK, f"{uri} (the tools image and other arches' bases; the {suite} base is here)")
    how = {"registry": f"debian:{suite}-slim from an image registry",
           "bootstrap": f"mmdebstrap {suite} from {uri}"}.get(mode, f"debian:{suite}-slim if a registry answers, "
                                                                  f"else mmdebstrap {suite} from {uri}")
    return Check("debian archive", OK, f"the base image will come from {how} (CPYTHON_PERF_BASE_MODE={mode})")


def check_disk(machine: Machine, client, plan: Plan) -> list[Check]:
    root = machine.docker_root(client) if client is not None else "/var/lib/docker"
    cells = sum(1 for t in plan.missing if t.startswith("cpython-perf:"))
    need = (cells * CELL_IMAGE_GB + any(t.startswith("cpython-perf-tools:") for t in plan.missing) * TOOLS_IMAGE_GB
            + (not plan.base_present) * BASE_IMAGE_GB + (BUILD_SCRATCH_GB if plan.missing else 0))
    free = machine.disk_free(root) / 1e9
    finding = (f"{free:.0f} GB free under {root}; "
               + (f"the default job needs about {need:.1f} GB more (to build: {', '.join(plan.missing)})"
                  if plan.missing else "every image the default job needs is here (by tag)"))
    if free < need:
        check = Check("disk", FAIL, finding, f"free {need - free:.1f} GB under {root} (docker image prune, "
                                             "docker builder prune)")
    elif free < 2 * need:
        check = Check("disk", WARN, finding, "little room left after it: docker image prune", required=False)
    else:
        check = Check("disk", OK, finding)
    cpus = machine.cpus()
    minutes = cells * COLD_BUILD_MINUTES * 2 / max(cpus, 1)
    per_cell = f"a cold build: about {COLD_BUILD_MINUTES:.0f} min a cell on 2 cores"
    estimate = Check("build time", OK, (f"{cells} cell image(s) to build: about {minutes:.0f} min on {cpus} cores "
                                        f"({per_cell})" if cells else f"no cell image to build ({per_cell})")
                     + ("; the base and tools images add some minutes" if len(plan.missing) > cells else ""),
                     required=False)
    return [check, estimate]


def diagnose(matrix: Matrix, machine: Machine | None = None) -> list[Check]:
    machine = machine or Machine()
    engine, client = check_engine(machine)
    present = machine.images(client) if client is not None else set()
    plan = plan_images(matrix, present, machine.archive)
    checks = [engine, *check_perf(machine, client, plan), check_paranoid(machine)]
    checks.append(_install_or_fail("patch", "patch", "patch", "applies the series before every build", machine))
    checks.append(_install_or_fail("gpgv", "gpgv", "gpgv", "checks the releases' OpenPGP signatures (without it "
                                   "the sha256 pin is the only check)", machine, required=False))
    needs_bootstrap = not plan.base_present and os.environ.get("CPYTHON_PERF_BASE_MODE", "auto") != "registry"
    checks.append(_install_or_fail("mmdebstrap", "mmdebstrap", "mmdebstrap",
                                   "bootstraps the base image where no image registry answers", machine,
                                   required=needs_bootstrap)
                  if machine.which("mmdebstrap") or needs_bootstrap else
                  Check("mmdebstrap", OK, "not needed: the base image is here", required=False))
    checks.append(check_binfmt(machine, matrix))
    checks += check_disk(machine, client, plan)
    checks.append(check_archive(machine, matrix, plan))
    return checks


def failed(checks: list[Check]) -> list[Check]:
    return [c for c in checks if c.status == FAIL and c.required]


def format_checks(checks: list[Check], smoke: tuple[str, ...] | list[str]) -> str:
    width = max(len(c.name) for c in checks)
    lines = [f"cpython-perf doctor: can this machine build and check the smoke cells ({', '.join(smoke)})?"]
    for c in checks:
        lines.append(f"  {c.status:<4}  {c.name:<{width}}  {c.finding}")
        if c.status != OK and c.fix:
            lines.append(f"  {'':<4}  {'':<{width}}  fix: {c.fix}")
    bad = failed(checks)
    counts = {s: sum(1 for c in checks if c.status == s) for s in (OK, WARN, FAIL)}
    verdict = (f"NO: {', '.join(c.name for c in bad)} must be fixed first" if bad
               else "yes" + (" (see the warnings)" if counts[WARN] or counts[FAIL] else ""))
    lines.append(f"{counts[OK]} ok, {counts[WARN]} warn, {counts[FAIL]} fail: {verdict}")
    return "\n".join(lines)


def main(matrix: Matrix, machine: Machine | None = None, out=print) -> int:
    checks = diagnose(matrix, machine)
    out(format_checks(checks, matrix.smoke_cells))
    return 1 if failed(checks) else 0


def _run_command(args) -> int:
    return main(load_matrix(args.matrix))


COMMAND = Command("doctor", "can this machine run the default job? Docker, perf, tools, disk, archive; each "
                            "problem with its fix (exit 1: something the job needs is missing)",
                  no_arguments, _run_command)

"""What the driver knows of each arch, from matrix.yaml's `arch_facts:`, and which arch this host is.

Debian's and the toolchain's names of an arch, whether upstream has the perf trampoline there, which host
arches run its code natively or cross-compile and emulate it, and the qemu-system guest its perf runs in.
Adding an arch is an entry of arch_facts (plus its base package list and its trampoline in the series).
"""

from __future__ import annotations

import os
import platform
import re
from dataclasses import dataclass
from pathlib import Path

from .errors import MatrixError
from .yaml_lines import Where, load_yaml

PROJECT_ROOT = Path(__file__).resolve().parent.parent


# The arch whose cell names carry no suffix (3.13-fp, not 3.13-fp-x86_64), the arches of a cell that lists
# none, and the machine the whole matrix must build on (the reference host: x86_64 and i386 natively,
# aarch64 cross-compiled).  Cell names and the matrix's validity are the same on every machine.
DEFAULT_ARCH = "x86_64"
HOST_ARCH_ENV = "CPYTHON_PERF_HOST_ARCH"
_ARCH_NAME = re.compile(r"[a-z][a-z0-9_]*")
_ARCH_KEYS = {"debian", "triplet", "trampoline", "runs_on", "cross_built_on", "qemu_user", "personality",
              "multiarch", "pointer_bits", "github_runner", "guest", "perf_arch", "unknown_cflags"}
_GUEST_KEYS = {"qemu", "package", "machine", "cpu", "console", "kernel", "kernel_file", "event"}
# perf events a TCG guest can sample with: software ones (an emulated CPU has no usable PMU)
_GUEST_EVENTS = ("cpu-clock", "task-clock")


@dataclass(frozen=True)
class GuestFacts:
    """The qemu-system guest a foreign arch's perf runs in."""

    qemu: str        # full-system emulator
    package: str     # the Debian package that has it
    machine: str     # -M
    cpu: str         # -cpu
    console: str     # the kernel's console= device
    kernel: str      # the Debian kernel package the arch's base image carries and the guest boots
    kernel_file: str  # the name its image has in /boot, before -<version>: vmlinuz (compressed), vmlinux
    event: str       # the perf event that samples there


@dataclass(frozen=True)
class ArchFacts:
    """How Debian and the GNU toolchain name an arch, which hosts run its code, and its guest (matrix.yaml)."""

    name: str
    debian: str            # dpkg architecture (multiarch packages, mmdebstrap --architectures)
    triplet: str           # GNU triplet (configure --host, cross compiler prefix)
    # Upstream's configure enables the perf trampoline (PY_HAVE_PERF_TRAMPOLINE) there; elsewhere a cell of
    # the arch claims no perf mode: it is build-only.
    trampoline: bool = False
    runs_on: tuple[str, ...] = ()         # host arches whose kernel runs its code (i386 on x86_64)
    cross_built_on: tuple[str, ...] = ()  # host arches that cross-compile it and emulate it
    qemu_user: str = ""    # binfmt handler name for running the image's programs (where the arch is foreign)
    # setarch personality every step and command of the image runs under: a
    # 32-bit userland on the 64-bit kernel, where uname -m (and so configure's
    # build triplet and platform.machine()) would otherwise say x86_64.
    personality: str = ""
    # CPython's PLATFORM_TRIPLET (sys.implementation._multiarch), where it is not the GNU triplet
    multiarch: str = ""
    pointer_bits: int = 64
    github_runner: str = ""  # GitHub-hosted runner label, for a host arch
    guest: GuestFacts | None = None
    # The name perf's dwarf unwinder knows the arch's registers by, where the perf of the arch's base image
    # does not map uname's name to it: each dwarf recording's perf.data is renamed to it before perf inject
    # and perf script (cpython_perf/record/perf_data.py, set_arch).  "" where perf needs nothing.
    perf_arch: str = ""
    # Options of a variant's cflags the arch's GCC does not have (ppc64le: -mno-omit-leaf-frame-pointer), left
    # out of its cells' CFLAGS.
    unknown_cflags: tuple[str, ...] = ()

    @property
    def machine(self) -> str:
        """What uname -m and platform.machine() say inside the arch's images."""
        return self.personality or self.name

    @property
    def platform_triplet(self) -> str:
        return self.multiarch or self.triplet

    @property
    def qemu_system(self) -> str:
        """The full-system emulator its perf runs in, or "" (no guest: not emulated anywhere)."""
        return self.guest.qemu if self.guest else ""

    def required_guest(self) -> GuestFacts:
        """The guest its perf runs in where the arch is emulated; an error naming the missing entry if none."""
        if self.guest is None:
            raise MatrixError(f"{self.name} has no guest: in matrix.yaml's arch_facts (its emulator, machine, "
                              "CPU, console, kernel and perf event), so its cells cannot be recorded where it "
                              "is emulated")
        return self.guest


def load_arch_facts(path: Path | None = None) -> dict[str, ArchFacts]:
    """matrix.yaml's `arch_facts:`, validated: {arch: ArchFacts}."""
    path = Path(path) if path else PROJECT_ROOT / "matrix.yaml"
    data = load_yaml(path)
    return parse_arch_facts(Where(path), data)


def parse_arch_facts(where: Where, data) -> dict[str, ArchFacts]:
    spec = where.require(data, "arch_facts", "matrix.yaml")
    if not isinstance(spec, dict) or not spec:
        raise where.error(data, "arch_facts", "arch_facts must map each arch name to what the driver knows of it")
    if DEFAULT_ARCH not in spec:
        raise where.error(data, "arch_facts", f"arch_facts must describe {DEFAULT_ARCH}, the reference host")

    def text(mapping, key, what, required=True, pattern=r"[A-Za-z0-9][A-Za-z0-9._+-]*"):
        if key not in mapping:
            if required:
                where.require(mapping, key, what)
            return ""
        value = mapping[key]
        if not isinstance(value, str) or not re.fullmatch(pattern, value):
            raise where.error(mapping, key, f"{key} of {what} must be a plain name ({pattern}), not {value!r}")
        return value

    facts: dict[str, ArchFacts] = {}
    for name, entry in spec.items():
        what = f"arch_facts.{name}"
        if not isinstance(name, str) or not _ARCH_NAME.fullmatch(name):
            raise where.error(spec, name, f"arch name {name!r} must be lower-case letters, digits and _ "
                                          "(what uname -m says, e.g. riscv64)")
        where.check_keys(entry, _ARCH_KEYS, what)
        trampoline = entry.get("trampoline", False)
        if not isinstance(trampoline, bool):
            raise where.error(entry, "trampoline", f"trampoline of {what} must be true or false")
        bits = entry.get("pointer_bits", 64)
        if bits not in (32, 64):
            raise where.error(entry, "pointer_bits", f"pointer_bits of {what} must be 32 or 64")
        unknown = entry.get("unknown_cflags") or []
        if not isinstance(unknown, list) or not all(isinstance(o, str) and re.fullmatch(r"-[A-Za-z0-9][\w=.,+-]*", o)
                                                    for o in unknown):
            raise where.error(entry, "unknown_cflags", f"unknown_cflags of {what} must be a list of compiler "
                                                       "options (each one word beginning with -)")
        host_lists = {}
        for key in ("runs_on", "cross_built_on"):
            value = entry.get(key) or []
            if not isinstance(value, list) or not all(isinstance(h, str) for h in value):
                raise where.error(entry, key, f"{key} of {what} must be a list of host arches")
            host_lists[key] = tuple(value)
        guest = None
        if "guest" in entry:
            g = entry["guest"]
            where.check_keys(g, _GUEST_KEYS, f"{what}.guest")
            guest = GuestFacts(*(text(g, k, f"{what}.guest") for k in ("qemu", "package", "machine", "cpu",
                                                                        "console", "kernel", "kernel_file",
                                                                        "event")))
            if guest.event not in _GUEST_EVENTS:
                raise where.error(g, "event", f"event of {what}.guest must be a software event a TCG guest "
                                              f"samples with ({', '.join(_GUEST_EVENTS)}), not {guest.event!r}")
        facts[name] = ArchFacts(
            name, text(entry, "debian", what), text(entry, "triplet", what), trampoline,
            host_lists["runs_on"], host_lists["cross_built_on"], text(entry, "qemu_user", what, required=False),
            text(entry, "personality", what, required=False), text(entry, "multiarch", what, required=False),
            bits, text(entry, "github_runner", what, required=False), guest,
            text(entry, "perf_arch", what, required=False), tuple(unknown))
    host_arches = {h for f in facts.values() for h in f.runs_on}
    for name, f in facts.items():
        entry = spec[name]
        for key, hosts in (("runs_on", f.runs_on), ("cross_built_on", f.cross_built_on)):
            for h in hosts:
                if h not in facts:
                    raise where.error(entry, key, f"{key} of arch_facts.{name} names {h!r}, which arch_facts "
                                                  "does not describe")
                if h not in facts[h].runs_on:
                    raise where.error(entry, key, f"{key} of arch_facts.{name} names {h!r}, which is no host: a "
                                                  f"host arch runs its own code (runs_on: [{h}] in arch_facts.{h})")
        if set(f.runs_on) & set(f.cross_built_on):
            raise where.error(entry, "cross_built_on", f"arch_facts.{name}: a host cannot both run "
                                                       f"{name} natively and cross-compile it")
        if f.cross_built_on and not (f.qemu_user and f.guest):
            raise where.error(entry, "cross_built_on", f"arch_facts.{name} is cross-built and emulated on "
                                                       f"{', '.join(f.cross_built_on)}: it needs qemu_user (the "
                                                       "binfmt handler) and guest: (where its perf runs)")
        if name in host_arches and not f.github_runner:
            raise where.error(entry, "runs_on" if "runs_on" in entry else name,
                              f"arch_facts.{name} is a host arch: give its github_runner")
    return facts


# What the project's matrix.yaml says of the arches.  Read at import: the host's arch decides what this
# process builds natively (runs_natively) and names cells' images.
ARCH_FACTS = load_arch_facts()
KNOWN_ARCHES = tuple(ARCH_FACTS)
# Host machine -> the arches its kernel runs itself (cells built in a container of the arch's own base and
# run there, perf recording in Docker) and the arches the driver cross-compiles there (built on the host's
# base, run under qemu-user, recorded in a qemu-system guest).  An arm64 host (a GitHub ubuntu-24.04-arm
# runner, an arm64 buildbot worker) builds and records its aarch64 cells natively, without qemu; x86_64
# and i386 cells need an x86_64 host.
HOST_NATIVE_ARCHES = {host: tuple(a for a, f in ARCH_FACTS.items() if host in f.runs_on)
                      for host in ARCH_FACTS if host in ARCH_FACTS[host].runs_on}
HOST_CROSS_ARCHES = {host: tuple(a for a, f in ARCH_FACTS.items() if host in f.cross_built_on)
                     for host in HOST_NATIVE_ARCHES}
# platform.machine() (or a Debian architecture) -> the arch: x86_64 and amd64, aarch64 and arm64
_MACHINE_ARCHES = {**{f.debian: a for a, f in ARCH_FACTS.items()}, **{a: a for a in ARCH_FACTS}}


def detect_host_arch(machine: str | None = None, environ=None) -> str:
    """The host's arch: $CPYTHON_PERF_HOST_ARCH if set (a host arch of arch_facts), else platform.machine()'s.
    A machine the driver does not build on keeps its own name: runs_natively() and can_build() are then
    False for every arch, and building says so (HostArchUnsupported)."""
    environ = os.environ if environ is None else environ
    override = environ.get(HOST_ARCH_ENV, "").strip()
    if override:
        if override not in HOST_NATIVE_ARCHES:
            raise MatrixError(f"${HOST_ARCH_ENV}={override!r} is not a host arch the driver knows: use one of "
                              f"{', '.join(HOST_NATIVE_ARCHES)}, or unset it to use this machine's")
        return override
    machine = (machine if machine is not None else platform.machine()).lower()
    return _MACHINE_ARCHES.get(machine, machine)


# The machine this process runs on: what runs natively here, what is cross-compiled and emulated.
HOST_ARCH = detect_host_arch()


def runs_natively(arch: str, host: str | None = None, facts: dict[str, ArchFacts] | None = None) -> bool:
    """The host's kernel executes arch's code itself (x86_64 and i386 on x86_64; aarch64 on aarch64).
    facts: a matrix's arch_facts (default: the project's)."""
    known = (facts or ARCH_FACTS).get(arch)
    return known is not None and (host or HOST_ARCH) in known.runs_on


def can_build(arch: str, host: str | None = None, facts: dict[str, ArchFacts] | None = None) -> bool:
    """The driver can build and check cells of arch on host: natively, or cross-compiled under qemu."""
    host = host or HOST_ARCH
    known = (facts or ARCH_FACTS).get(arch)
    return known is not None and (host in known.runs_on or host in known.cross_built_on)


def cannot_build_reason(arch: str, host: str | None = None) -> str | None:
    """Why a cell of arch cannot be built on host (None: it can)."""
    host = host or HOST_ARCH
    if can_build(arch, host):
        return None
    able = [h for h in HOST_NATIVE_ARCHES if can_build(arch, h)]
    where = f"an {' or '.join(able)} host" if able else "no host the driver knows"
    if host not in HOST_NATIVE_ARCHES:
        return (f"this machine is {host}, which the driver does not build on (hosts: "
                f"{', '.join(HOST_NATIVE_ARCHES)}); {arch} cells need {where}")
    return (f"{arch} cells need {where}; this host is {host}, which builds "
            f"{', '.join(a for a in KNOWN_ARCHES if can_build(a, host))} cells (run the others on a machine of "
            f"their arch: the CI plan places them on one)")

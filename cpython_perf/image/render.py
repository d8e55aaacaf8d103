"""Render the Jinja-templated Dockerfiles of docker/ for a cell or the base image."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import jinja2

from ..arches import ARCH_FACTS, DEFAULT_ARCH, HOST_ARCH, runs_natively
from ..matrix import PROJECT_ROOT, Cell, version_tuple

DOCKER_DIR = PROJECT_ROOT / "docker"
BASE_PACKAGES = DOCKER_DIR / "base-packages.txt"
BUILD_SCRIPT = DOCKER_DIR / "build-cpython.sh"


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(DOCKER_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def base_packages(path: Path = BASE_PACKAGES) -> list[str]:
    """The one package list of the base image (comments and blank lines skipped)."""
    packages = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            packages.append(line)
    return packages


def base_image_tag(suite: str, packages: list[str], arch: str | None = None) -> str:
    """Tag of the base image: changes whenever the suite or the package list does.

    An arch's base is tagged with its Debian name (cpython-perf-base:trixie-arm64-...), except x86_64's
    (arch None or DEFAULT_ARCH): the host base of an arm64 host and the arm64 runtime base of an x86_64
    host have different package lists, so different digests.
    """
    digest = hashlib.sha256(("\n".join([suite, *sorted(packages)])).encode()).hexdigest()[:12]
    middle = f"{ARCH_FACTS[arch].debian}-" if arch and arch != DEFAULT_ARCH else ""
    return f"cpython-perf-base:{suite}-{middle}{digest}"


def host_base_image_tag(suite: str, host: str | None = None) -> str:
    """Tag of the host's base image (docker/base-packages.txt), for a host of that arch (default: this one)."""
    return base_image_tag(suite, base_packages(), host or HOST_ARCH)


def foreign_base_image_tag(suite: str, arch: str, host: str | None = None) -> str:
    """Tag of a foreign arch's base image (foreign_base_packages)."""
    if runs_natively(arch, host):
        raise ValueError(f"{arch} runs natively on an {host or HOST_ARCH} host: it has no foreign base image")
    return base_image_tag(suite, foreign_base_packages(arch), arch)


def build_dependency_packages(packages: list[str] | None = None) -> list[str]:
    """CPython's build dependencies in the base list: its -dev packages."""
    return [p for p in (packages if packages is not None else base_packages()) if p.endswith("-dev")]


def foreign_base_packages(arch: str) -> list[str]:
    """Packages of a foreign arch's base image: the base list's -dev packages, base-packages-<arch>.txt and
    the kernel its guest boots (arch_facts' guest.kernel)."""
    own = DOCKER_DIR / f"base-packages-{arch}.txt"
    if not own.is_file():
        raise FileNotFoundError(f"{own} is missing: the package list of the {arch} base image")
    guest = ARCH_FACTS[arch].guest
    kernel = [guest.kernel] if guest else []
    return build_dependency_packages() + base_packages(own) + kernel


# Packages of the host list that only perf recordings use: left out of the base of an arch without the trampoline
PERF_ONLY_PACKAGES = ("linux-perf",)


def native_base_packages(arch: str) -> list[str]:
    """Packages of the base image of a non-host arch the host runs natively (i386 on x86_64).

    Its cells are built inside it as the host's are in the host base, so it has
    the whole host list (toolchain, build dependencies, binutils for nm and
    readelf), less linux-perf where the arch has no perf trampoline (nothing is
    recorded there), plus docker/base-packages-<arch>.txt where one exists.
    """
    facts = ARCH_FACTS[arch]
    packages = [p for p in base_packages() if facts.trampoline or p not in PERF_ONLY_PACKAGES]
    own = DOCKER_DIR / f"base-packages-{arch}.txt"
    return packages + (base_packages(own) if own.is_file() else [])


def arch_base_packages(arch: str, host: str | None = None) -> list[str]:
    """Packages of a non-host arch's base image: built natively in it, or a foreign arch's runtime."""
    return native_base_packages(arch) if runs_natively(arch, host) else foreign_base_packages(arch)


def arch_base_image_tag(suite: str, arch: str, host: str | None = None) -> str:
    """Tag of an arch's base image on a host of that arch (default: this one): the host's own base for the
    host's arch, else cpython-perf-base:trixie-i386-..., -arm64-... (a native or a foreign arch's)."""
    if arch == (host or HOST_ARCH):
        return host_base_image_tag(suite, arch)
    return base_image_tag(suite, arch_base_packages(arch, host), arch)


def build_base_image_tag(suite: str, arch: str, host: str | None = None) -> str:
    """The image a cell of arch is built on: its own arch's base for one the host runs natively (i386 on
    x86_64), else the host's (host cells, and the cross stage of foreign ones)."""
    host = host or HOST_ARCH
    if arch != host and runs_natively(arch, host):
        return arch_base_image_tag(suite, arch, host)
    return host_base_image_tag(suite, host)


def cross_packages(arch: str) -> list[str]:
    """What the cross-build stage adds to the host base: the cross toolchain and the foreign -dev packages."""
    debian = ARCH_FACTS[arch].debian
    return [f"crossbuild-essential-{debian}", *(f"{p}:{debian}" for p in build_dependency_packages())]


def render_base_dockerfile(suite: str, packages: list[str]) -> str:
    return _environment().get_template("base.Dockerfile.j2").render(suite=suite, packages=packages)


def render_tools_dockerfile(base_image: str, base_suite: str, archive_uri: str | None, suite: str, samply: str,
                            inferno: str) -> str:
    """docker/tools.Dockerfile.j2: samply and the inferno flame-graph command (cpython_perf.image.tools)."""
    return _environment().get_template("tools.Dockerfile.j2").render(
        base_image=base_image, base_suite=base_suite, archive_uri=archive_uri, suite=suite, samply=samply,
        inferno=inferno)


BUILD_PYTHON = "/opt/build-python/bin/python3"
# What configure cannot find out without running target code (as Debian's and
# python-build-standalone's cross builds set them).
CROSS_CACHE_VARIABLES = {"ac_cv_file__dev_ptmx": "yes", "ac_cv_file__dev_ptc": "no", "ac_cv_buggy_getaddrinfo": "no"}


def cross_configure_args(cell: Cell, host: str | None = None) -> list[str]:
    """configure options of a cross build: build and host triplets, and the build Python where configure
    takes it (3.11+; 3.9 and 3.10 look for python3.X on PATH)."""
    args = [f"--build={ARCH_FACTS[host or HOST_ARCH].triplet}", f"--host={cell.arch_facts.triplet}"]
    if version_tuple(cell.version) >= (3, 11):
        args.append(f"--with-build-python={BUILD_PYTHON}")
    return args


def cross_environment(cell: Cell) -> dict[str, str]:
    """Environment of a cross build's build-cpython.sh run."""
    return {
        "PATH": f"{BUILD_PYTHON.rsplit('/', 1)[0]}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "PKG_CONFIG_LIBDIR": f"/usr/lib/{cell.arch_facts.triplet}/pkgconfig:/usr/share/pkgconfig",
        **CROSS_CACHE_VARIABLES,
    }


# where a cell's source tree is built, and stays (CPython's own tests run there)
DEFAULT_WORK_DIR = "/usr/src"


@dataclass(frozen=True)
class BuildVariation:
    """A cell build run under other conditions than the image's own (cpython_perf.image.reproducibility): a shell
    prefix of the build command (umask, locale, time zone) and another build directory."""

    prefix: str
    work_dir: str


def render_cell_dockerfile(cell: Cell, base_image: str, inputs_digest: str = "unset", *,
                           target_base_image: str = "", build_python_image: str = "",
                           host: str | None = None, variation: "BuildVariation | None" = None) -> str:
    """The cell's Dockerfile.  A cell of an arch the host runs natively builds on
    base_image (build_base_image_tag: the host's, or i386's own, under its
    personality); a foreign-arch cell is cross-compiled on base_image (with
    build_python_image's interpreter as the build Python) and installed on
    target_base_image.  host: the arch of the machine that builds it (default: this one).  variation: the
    build run under other conditions (cpython_perf.image.reproducibility; a natively built cell only); without
    it, the Dockerfile every build uses."""
    if not cell.foreign_on(host or HOST_ARCH):
        return _environment().get_template("cell.Dockerfile.j2").render(
            build_prefix=variation.prefix if variation else "",
            work_dir=variation.work_dir if variation else DEFAULT_WORK_DIR,
            cell=cell,
            arch=cell.arch_facts,
            base_image=base_image,
            additions=bool(cell.additions),
            patches=cell.series is not None,
            inputs_digest=inputs_digest,
        )
    if variation is not None:
        raise ValueError(f"{cell.name} is cross-compiled: a varied build is only made of a natively built cell")
    if not (target_base_image and build_python_image):
        raise ValueError(f"{cell.name} is cross-compiled: its target base and build Python images are needed")
    return _environment().get_template("cell-cross.Dockerfile.j2").render(
        cell=cell,
        arch=cell.arch_facts,
        base_image=base_image,
        target_base_image=target_base_image,
        build_python_image=build_python_image,
        cross_packages=cross_packages(cell.arch),
        cross_configure_args=cross_configure_args(cell, host),
        cross_environment=cross_environment(cell),
        additions=bool(cell.additions),
        patches=cell.series is not None,
        inputs_digest=inputs_digest,
    )

"""Load and validate matrix.yaml and the recipes it names.

The matrix is the single source of truth: versions, variants, arches, the
patch series and additions of each version, and the perf modes each cell
must pass.  Every error names the file and line it comes from.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

# HOST_ARCH is read here at each call (Cell.foreign), so that it can be set for a test
from .arches import ARCH_FACTS, DEFAULT_ARCH, HOST_ARCH, ArchFacts, can_build, parse_arch_facts, runs_natively
from .errors import MatrixError, UnknownCell
from .yaml_lines import LineDict as _LineDict
from .yaml_lines import Where as _Where
from .yaml_lines import load_yaml as _load_yaml

PROJECT_ROOT = Path(__file__).resolve().parent.parent

PERF_MODES = ("perf", "perf_jit")
# The perf map C API every patched interpreter exports (CPython 3.12's names; the backports add them, 3.13
# has them): what the build-only cells check and what a distribution's libpython symbols file must list.
PERF_C_API = (
    "PyUnstable_PerfMapState_Init",
    "PyUnstable_WritePerfMapEntry",
    "PyUnstable_PerfMapState_Fini",
    "PyUnstable_CopyPerfMapFile",
    "PyUnstable_PerfTrampoline_CompileCode",
    "PyUnstable_PerfTrampoline_SetPersistAfterFork",
)
SUPPORT_KINDS = ("native", "backport", "none")
# Upstream facts: the trampoline is native from 3.12, perf_jit from 3.13.
NATIVE_SINCE = {"perf": (3, 12), "perf_jit": (3, 13)}
IMAGE_REPOSITORY = "cpython-perf"

_TOP_KEYS = {"smoke_cells", "smoke_stock", "default_cell", "base_suite", "arch_facts", "arches", "default_arches", "variants", "versions", "lanes",
             "distributions", "regression_tests", "profilers", "arch_cflags", "stock", "defects"}
_STOCK_KEYS = {"distribution", "suite", "package", "python", "perf_suite", "modes", "description", "defects", "jit",
               "not_given"}
_PROFILER_KEYS = {"suite", "samply", "inferno", "py_spy", "austin"}
_PY_SPY_KEYS = {"version", "sha256"}
_VARIANT_KEYS = {"description", "cflags", "configure", "configure_since", "dwarf_stack_size", "environment"}
_VERSION_KEYS = {"recipe", "support", "series", "additions", "additions_header", "cells", "prerelease"}
_CELL_KEYS = {"modes", "modes_on", "arches", "vanilla", "build_only"}
_RECIPE_KEYS = {"version", "url", "sha256", "size", "debian", "configure"}
_DEBIAN_KEYS = {"package", "suite", "file"}
_LANE_KEYS = {"distribution", "source_package", "package_version", "suites", "perf_suite", "modes", "description",
              "perf_revision"}
_DISTRIBUTION_KEYS = {"name", "origin", "keyring", "keyring_sha256", "security_suite", "releases", "revision",
                      "purl_namespace"}


# --------------------------------------------------------------------------
# The model


@dataclass(frozen=True)
class DebianSource:
    package: str
    suite: str
    file: str


@dataclass(frozen=True)
class Recipe:
    version: str
    url: str
    sha256: str
    size: int | None
    debian: DebianSource | None
    configure: tuple[str, ...]
    path: Path

    @property
    def filename(self) -> str:
        return self.url.rsplit("/", 1)[-1]

    @property
    def srcdir(self) -> str:
        return f"Python-{self.version}"


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    cflags: str
    configure_since: tuple[tuple[tuple[int, int], tuple[str, ...]], ...] = ()
    dwarf_stack_size: int | None = None
    # configure options of every cell of the variant, before the version-dependent ones
    # (e.g. distro: --enable-optimizations --with-lto)
    configure: tuple[str, ...] = ()
    # environment variables set in the image, for its build and every run in it
    # (e.g. ftasan: ASAN_OPTIONS)
    environment: tuple[tuple[str, str], ...] = ()

    def configure_args(self, version: str) -> list[str]:
        have = version_tuple(version)
        args: list[str] = list(self.configure)
        for since, extra in self.configure_since:
            if have >= since:
                args.extend(extra)
        return args


@dataclass(frozen=True)
class Cell:
    version: str
    variant: Variant
    arch: str
    modes: tuple[str, ...]
    support: str
    recipe: Recipe
    series: Path | None
    additions: tuple[str, ...]
    # Backends the interpreter offers (what check scripts may use): the
    # native ones of its version plus every mode a cell of its version claims.
    backends: tuple[str, ...] = ()
    # A vanilla cell builds the pinned source without the version's series and
    # additions: the unpatched twin on which fix reproducers must fail, and
    # against which CPython's own regression tests of the patched cell are
    # compared.  A backport's twin claims no modes and offers no backends.
    vanilla: bool = False
    # Extra CFLAGS of every cell of its arch (matrix.yaml `arch_cflags:`),
    # e.g. aarch64's -mbranch-protection=standard
    arch_cflags: str = ""
    # What its matrix's arch_facts: say of its arch
    arch_facts: ArchFacts | None = None

    @property
    def check_backends(self) -> tuple[str, ...]:
        """What the check scripts may use: the backends it offers (an external target's differ: check.external)."""
        return self.backends

    @property
    def cflags(self) -> str:
        """The CFLAGS the cell is configured with: its variant's (but for the options its arch's GCC does not
        have), then its arch's."""
        unknown = set(self.arch_facts.unknown_cflags) if self.arch_facts else set()
        variant = " ".join(o for o in self.variant.cflags.split() if o not in unknown)
        return " ".join(f for f in (variant, self.arch_cflags) if f)

    @property
    def foreign(self) -> bool:
        """Built by cross-compiling on this host; run under qemu (user mode in Docker, system mode for perf).
        False for the host's arch and for arches the host kernel runs natively (i386 on x86_64)."""
        return self.foreign_on(HOST_ARCH)

    def foreign_on(self, host: str) -> bool:
        """Whether the cell is foreign (cross-compiled, emulated) on a host of that arch."""
        if self.arch_facts is not None:
            return host not in self.arch_facts.runs_on
        return not runs_natively(self.arch, host)

    @property
    def build_only(self) -> bool:
        """The arch has no perf trampoline upstream (i386): the cell claims no mode, nothing is recorded
        with perf; its build, exported C API, refused activation and CPython's test_sys are checked."""
        return not self.arch_facts.trampoline

    @property
    def name(self) -> str:
        suffix = "" if self.arch == DEFAULT_ARCH else f"-{self.arch}"
        return f"{self.version}-{self.variant.name}{'-vanilla' if self.vanilla else ''}{suffix}"

    @property
    def image(self) -> str:
        return f"{IMAGE_REPOSITORY}:{self.name}"

    def configure_args(self) -> list[str]:
        return list(self.recipe.configure) + self.variant.configure_args(self.version)

    def has_mode(self, mode: str) -> bool:
        return mode in self.modes


@dataclass(frozen=True)
class VersionSeries:
    """What a version adds to CPython's source: its quilt series, the new whole files (Python-additions/)
    and the DEP-3 header of the generated patch that creates them (packager forms, lanes.series_forms)."""

    version: str
    series: Path
    additions: tuple[str, ...]
    additions_header: Path | None


@dataclass(frozen=True)
class Distribution:
    """A distribution the packaging lanes build for (matrix.yaml `distributions:`): everything the driver says
    or does that is particular to it."""

    key: str                     # its key in matrix.yaml, e.g. debian
    name: str                    # as shown, e.g. Debian
    origin: str                  # the Origin: of its archive's Release files (how its apt entries are known)
    keyring: Path                # its archive keyring, under keys/
    keyring_sha256: str
    security_suite: str          # the security suite of a release, {suite} the release: {suite}-security
    releases: tuple[tuple[str, str], ...]   # (codename, number), e.g. (bookworm, 12)
    revision: str                # the version suffix of an update of a package, {release} and {n}: +deb{release}u{n}
    purl_namespace: str          # pkg:deb/<this>/...

    def release_number(self, suite: str) -> str | None:
        """The number of a release (bookworm: 12), None if the distribution does not list it."""
        return dict(self.releases).get(suite)

    def release_title(self, suite: str) -> str:
        """The release as shown: Debian 12 (bookworm)."""
        number = self.release_number(suite)
        return f"{self.name} {number} ({suite})" if number else f"{self.name} {suite}"

    def security_suite_of(self, suite: str) -> str:
        return self.security_suite.format(suite=suite)

    def is_security_suite(self, suite: str) -> bool:
        return any(suite == self.security_suite_of(codename) for codename, _ in self.releases)

    def owns_suite(self, suite: str) -> bool:
        """suite is one of the distribution's releases or a suite of one (bookworm-updates)."""
        return self.is_security_suite(suite) or any(suite == c or suite.startswith(c + "-") for c, _ in self.releases)

    @property
    def update_pattern(self) -> re.Pattern:
        """The revision rule as a pattern at the end of a version: groups release and n."""
        parts = re.split(r"(\{release\}|\{n\})", self.revision)
        groups = {"{release}": r"(?P<release>[0-9][0-9.]*?)", "{n}": r"(?P<n>[0-9]+)"}
        pattern = "".join(groups.get(part, re.escape(part)) for part in parts)
        return re.compile(pattern + "$")

    @property
    def revision_shape(self) -> str:
        """The revision rule as people read it: +debNNuK."""
        return self.revision.format(release="NN", n="K")

    def update_revision(self, package_version: str, suite: str) -> str:
        """The version the distribution's next update of this revision gets: n + 1 of the rule where the
        revision has it, else the rule's first update of the release (n = 1)."""
        m = self.update_pattern.search(package_version)
        if m:
            return package_version[:m.start()] + self.revision.format(release=m["release"], n=int(m["n"]) + 1)
        return package_version + self.revision.format(release=self.release_number(suite) or "NN", n=1)

    def purl_distro(self, suite: str) -> str:
        """The purl `distro` qualifier of a release's packages: debian-bookworm."""
        return f"{self.purl_namespace}-{suite}"


@dataclass(frozen=True)
class Lane:
    """A packaging lane (matrix.yaml `lanes:`): the version's series added to a distribution's source
    package, built with its own debian/rules in a container of that release, installed with apt into
    a clean one and checked there (`nox -s deb-<suite>-<version>`)."""

    name: str                    # <suite>-<version>, e.g. bookworm-3.11
    suite: str                   # the distribution's release, e.g. bookworm
    version: str                 # the matrix version whose series is added, e.g. 3.11
    description: str
    source_package: str          # e.g. python3.11
    package_version: str         # the distribution's version the series is proven on, e.g. 3.11.2-6+deb12u8
    suites: tuple[str, ...]      # apt suites searched for that version (e.g. bookworm, bookworm-security)
    perf_suite: str              # suite of the checking container's linux-perf (e.g. bookworm-backports)
    modes: tuple[str, ...]       # perf modes the installed packages must pass
    series: Path
    additions: tuple[str, ...]
    distribution: Distribution
    additions_header: Path | None = None
    perf_revision: int = 1       # N of the built packages' <package_version>+perfN (docs/packagers.md)

    @property
    def perf_version(self) -> str:
        """The version of the lane's built packages: the distribution's, +perfN (sorts right above it)."""
        return f"{self.package_version}+perf{self.perf_revision}"

    @property
    def patch_series(self) -> VersionSeries:
        return VersionSeries(self.version, self.series, self.additions, self.additions_header)

    @property
    def session(self) -> str:
        return f"deb-{self.name}"

    @property
    def python(self) -> str:
        """The interpreter the binary packages install."""
        return f"/usr/bin/python{self.version}"

    @property
    def upstream_version(self) -> str:
        return self.package_version.split("-", 1)[0]


@dataclass(frozen=True)
class StockTarget:
    """An interpreter as a distribution ships it, without the series (matrix.yaml `stock:`): its image bootstrapped
    from the machine's archive, the conformance suite run on it (`nox -s stock-<name>`)."""

    name: str                    # <suite>-<version>, e.g. sid-3.15
    suite: str
    version: str
    description: str
    package: str                 # e.g. python3.15
    python: str                  # e.g. /usr/bin/python3.15
    perf_suite: str
    modes: tuple[str, ...]       # the perf modes it must give (the rest are diagnosed, not required)
    distribution: Distribution
    defects: tuple[str, ...] = ()   # the catalogued defects (matrix.yaml `defects:`) it is known to carry
    jit: bool = False            # built with --enable-experimental-jit=yes-off: every mode with PYTHON_JIT=1 too
    # mode -> the diagnosis (cpython_perf.check.external's reason code) of why it does not give that mode
    not_given: dict = field(default_factory=dict)

    @property
    def session(self) -> str:
        return f"stock-{self.name}"


@dataclass(frozen=True)
class Defect:
    """A defect of CPython as released that a check script sees (matrix.yaml `defects:`): its reproducer's
    `# fixes:` names it, and a check whose failure it explains names it in `# hits:`."""

    id: str                      # gh-NNN, patches/<version>/NNNN or a name (jitdump-fork-flush)
    title: str
    upstream: str                # gh-NNN, or "not reported"
    patch: str                   # the series patch that fixes it, relative to the project
    means: str                   # what it means for someone running an interpreter that carries it
    fixed_upstream: str | None = None   # the first release upstream fixed it in, where it did
    report: str | None = None    # where upstream has no issue: a report ready to send
    instead: str | None = None   # what to do on an interpreter that carries it (the stock tables' last column)

    @property
    def reported(self) -> bool:
        return self.upstream != NOT_REPORTED


@dataclass(frozen=True)
class ProfilerPins:
    """The Debian suite and package versions of the tools image (matrix.yaml `profilers:`)."""

    suite: str
    samply: str
    inferno: str
    py_spy: dict   # {"version": ..., "sha256": ...} of the PyPI wheel (x86_64)
    austin: dict | None = None   # the same of austin-dist's wheel, where pinned


@dataclass
class Matrix:
    path: Path
    root: Path
    base_suite: str
    arches: tuple[str, ...]
    variants: dict[str, Variant]
    # arches of a cell that does not list its own
    default_arches: tuple[str, ...] = (DEFAULT_ARCH,)
    cells: dict[str, Cell] = field(default_factory=dict)
    smoke_cells: tuple[str, ...] = ()
    # stock interpreters `nox -s tests` (and so CI) checks for real, by name
    smoke_stock: tuple[str, ...] = ()
    default_cell: str = ""
    # CPython's own tests compared between a patched cell and its vanilla twin
    regression_tests: tuple[str, ...] = ()
    # Debian packages of the tools image, pinned
    profilers: "ProfilerPins | None" = None
    # arch -> extra CFLAGS of every cell of that arch
    arch_cflags: dict[str, str] = field(default_factory=dict)
    # arch -> what the driver knows of it (arch_facts:; the project's where the file has none)
    arch_facts: dict[str, ArchFacts] = field(default_factory=lambda: dict(ARCH_FACTS))
    # packaging lanes, by name (<suite>-<version>)
    lanes: dict[str, Lane] = field(default_factory=dict)
    # the distributions the lanes build for, by key (debian)
    distributions: dict[str, Distribution] = field(default_factory=dict)
    # stock interpreters, by name (<suite>-<version>)
    stock: dict[str, StockTarget] = field(default_factory=dict)
    # defects of CPython as released that the check scripts see, by id
    defects: dict[str, Defect] = field(default_factory=dict)
    # version -> its series, additions and additions header (versions with a series only)
    series: dict[str, VersionSeries] = field(default_factory=dict)
    # versions whose recipe may pin a pre-release (a, b, rc): `prerelease: true` (cpython_perf/source/pins.py)
    prerelease_versions: frozenset = frozenset()

    def series_of(self, version: str) -> VersionSeries:
        try:
            return self.series[version]
        except KeyError:
            raise UnknownCell(f"{version} has no patch series in {self.path} "
                              f"(versions with one: {', '.join(self.series) or 'none'})") from None

    def lane(self, name: str) -> Lane:
        try:
            return self.lanes[name]
        except KeyError:
            raise UnknownCell(f"unknown packaging lane {name!r}: {self.path} defines "
                              f"{', '.join(self.lanes) or 'none'} under lanes:") from None

    def cell(self, name: str) -> Cell:
        try:
            return self.cells[name]
        except KeyError:
            close = difflib.get_close_matches(name, list(self.cells), n=3)
            hint = f" Did you mean: {', '.join(close)}?" if close else ""
            raise UnknownCell(
                f"unknown cell {name!r}: {self.path} defines {', '.join(self.cells)}.{hint}"
            ) from None

    def vanilla_twin(self, cell: Cell) -> Cell | None:
        """The unpatched build of the same version, variant and arch, if matrix.yaml asks for one."""
        if cell.vanilla:
            return None
        return next((c for c in self.cells.values() if c.vanilla and c.version == cell.version
                     and c.variant == cell.variant and c.arch == cell.arch), None)

    def build_python_cell(self, cell: Cell) -> Cell | None:
        """The host-arch cell whose interpreter runs the build of a cross-compiled cell.

        A cross build of CPython needs a Python of the same version on the
        build machine (--with-build-python from 3.11, python3.X on PATH
        before).  The host twin of the same variant and vanilla-ness is
        preferred, any host cell of the version will do.  None for host cells.
        """
        return self.build_python_cell_on(cell, HOST_ARCH)

    def build_python_cell_on(self, cell: Cell, host: str) -> Cell | None:
        """build_python_cell for a host of that arch: a cell of the host's own arch."""
        if not cell.foreign_on(host) or not can_build(cell.arch, host, self.arch_facts):
            return None
        same_version = [c for c in self.cells.values() if c.version == cell.version and c.arch == host]
        same_version.sort(key=lambda c: (c.variant != cell.variant, c.vanilla != cell.vanilla))
        return same_version[0] if same_version else None

    def cells_of_arch(self, arch: str) -> list[Cell]:
        return [c for c in self.cells.values() if c.arch == arch]

    def cells_with_mode(self, mode: str) -> list[Cell]:
        return [c for c in self.cells.values() if c.has_mode(mode)]


def version_tuple(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(re.match(r"\d+", minor).group())


# --------------------------------------------------------------------------
# Loading


def load_recipe(path: Path, version_key: str) -> Recipe:
    data = _load_yaml(path)
    where = _Where(path)
    where.check_keys(data, _RECIPE_KEYS, "a recipe")
    version = str(where.require(data, "version", "the recipe"))
    if not re.fullmatch(r"3\.\d+\.\d+([abc]|rc)?\d*", version):
        raise where.error(data, "version", f"version {version!r} is not a CPython release number")
    if not version.startswith(version_key + "."):
        raise where.error(data, "version", f"recipe pins {version} but matrix.yaml uses it for {version_key}")
    url = str(where.require(data, "url", "the recipe"))
    if not re.fullmatch(r"https://www\.python\.org/ftp/python/[^/]+/Python-[^/]+\.(tgz|tar\.xz)", url):
        raise where.error(data, "url", f"url {url!r} is not a python.org release tarball URL")
    if f"Python-{version}." not in url:
        raise where.error(data, "url", f"url {url!r} does not name Python-{version}")
    sha256 = str(where.require(data, "sha256", "the recipe"))
    if not re.fullmatch(r"[0-9a-f]{64}", sha256):
        raise where.error(data, "sha256", "sha256 must be 64 lower-case hex digits")
    size = data.get("size")
    if size is not None and (not isinstance(size, int) or size <= 0):
        raise where.error(data, "size", "size must be a positive number of bytes or null")
    debian = data.get("debian")
    debian_source = None
    if debian is not None:
        where.check_keys(debian, _DEBIAN_KEYS, "the debian entry")
        debian_source = DebianSource(
            package=str(where.require(debian, "package", "the debian entry")),
            suite=str(where.require(debian, "suite", "the debian entry")),
            file=str(where.require(debian, "file", "the debian entry")),
        )
    configure = data.get("configure") or []
    if not isinstance(configure, list) or not all(isinstance(a, str) for a in configure):
        raise where.error(data, "configure", "configure must be a list of strings")
    return Recipe(version, url, sha256, size, debian_source, tuple(configure), path)


# one configure option: --name or --name=value, nothing the shell would read
_CONFIGURE_OPTION = re.compile(r"--[a-z][a-z0-9-]*(=[A-Za-z0-9_.,:/+=-]*)?")
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
_ENV_VALUE = re.compile(r"[A-Za-z0-9_.,:/=+-]*")


def _load_variant(where: _Where, name, data) -> Variant:
    where.check_keys(data, _VARIANT_KEYS, f"variant {name!r}")
    cflags = data.get("cflags") or ""
    if not isinstance(cflags, str):
        raise where.error(data, "cflags", f"cflags of variant {name!r} must be a string")
    configure = data.get("configure") or []
    if not isinstance(configure, list) or not all(isinstance(o, str) for o in configure):
        raise where.error(data, "configure", f"configure of variant {name!r} must be a list of configure options, "
                                             "e.g. [--enable-optimizations, --with-lto]")
    for option in configure:
        if not _CONFIGURE_OPTION.fullmatch(option):
            raise where.error(data, "configure",
                              f"configure option {option!r} of variant {name!r} must be one plain --option or "
                              "--option=value (no spaces, quotes, $, ` or \\): it is written into a shell command "
                              "of the Dockerfile; put compiler flags in cflags")
    since_raw = data.get("configure_since") or {}
    if not isinstance(since_raw, dict):
        raise where.error(data, "configure_since", "configure_since must map a version to a list of options")
    since = []
    for ver, opts in since_raw.items():
        if not isinstance(ver, str) or not re.fullmatch(r"3\.\d+", ver):
            raise where.error(since_raw, ver, f"configure_since key {ver!r} must be a quoted version like '3.15'")
        if not isinstance(opts, list) or not all(isinstance(o, str) for o in opts):
            raise where.error(since_raw, ver, "configure_since values must be lists of configure options")
        since.append((version_tuple(ver), tuple(opts)))
    stack = data.get("dwarf_stack_size")
    if stack is not None and (not isinstance(stack, int) or not 8 <= stack <= 65528 or stack % 8):
        raise where.error(data, "dwarf_stack_size", "dwarf_stack_size must be a multiple of 8 from 8 to 65528")
    environment_raw = data.get("environment") or {}
    if not isinstance(environment_raw, dict):
        raise where.error(data, "environment", f"environment of variant {name!r} must map NAME: value")
    for key, value in environment_raw.items():
        if not isinstance(key, str) or not _ENV_NAME.fullmatch(key):
            raise where.error(environment_raw, key, f"environment variable {key!r} of variant {name!r} must be an "
                                                    "upper-case NAME (A-Z, 0-9, _)")
        if not isinstance(value, str) or not _ENV_VALUE.fullmatch(value):
            raise where.error(environment_raw, key, f"the value of {key} in variant {name!r} must be a string of "
                                                    "A-Z a-z 0-9 _ . , : / = + - (it is written into the Dockerfile)")
    return Variant(name, str(data.get("description") or ""), cflags, tuple(since), stack, tuple(configure),
                   tuple(sorted(environment_raw.items())))


def load_matrix(path: Path | None = None) -> Matrix:
    path = Path(path) if path else PROJECT_ROOT / "matrix.yaml"
    root = path.resolve().parent
    data = _load_yaml(path)
    where = _Where(path)
    if isinstance(data, dict) and "distros" in data:
        raise where.error(data, "distros", "the packaging lanes' key is lanes: now (distro names the PGO + LTO "
                                           "variant only): rename distros: to lanes:")
    where.check_keys(data, _TOP_KEYS, "matrix.yaml")

    # a matrix file without arch_facts: (a test's, a user's excerpt) uses the project's
    arch_facts = parse_arch_facts(where, data) if "arch_facts" in data else dict(ARCH_FACTS)
    arches = where.require(data, "arches", "matrix.yaml")
    if not isinstance(arches, list) or not arches:
        raise where.error(data, "arches", "arches must be a non-empty list")
    for arch in arches:
        if arch not in arch_facts:
            raise where.error(data, "arches", f"unknown arch {arch!r}: arch_facts describes "
                                              f"{', '.join(arch_facts)}; describe it there first")

    variants_raw = where.require(data, "variants", "matrix.yaml")
    if not isinstance(variants_raw, dict) or not variants_raw:
        raise where.error(data, "variants", "variants must be a non-empty mapping")
    variants = {name: _load_variant(where, name, spec) for name, spec in variants_raw.items()}

    if DEFAULT_ARCH not in arches:
        raise where.error(data, "arches", f"arches must include {DEFAULT_ARCH}: the whole matrix builds on an "
                                          f"{DEFAULT_ARCH} host")
    default_arches = data.get("default_arches") or [DEFAULT_ARCH]
    if not isinstance(default_arches, list) or not all(a in arches for a in default_arches):
        raise where.error(data, "default_arches", f"default_arches must be a list of arches from arches ({', '.join(arches)})")

    matrix = Matrix(path, root, str(data.get("base_suite") or "trixie"), tuple(arches), variants,
                    default_arches=tuple(default_arches), arch_cflags=_load_arch_cflags(where, data, arch_facts),
                    arch_facts=arch_facts)

    versions = where.require(data, "versions", "matrix.yaml")
    if not isinstance(versions, dict) or not versions:
        raise where.error(data, "versions", "versions must be a non-empty mapping")
    for version, spec in versions.items():
        if not isinstance(version, str):
            raise where.error(versions, version, f"version key {version!r} must be a quoted string such as '3.10'")
        if not re.fullmatch(r"3\.(9|1[0-9])", version):
            raise where.error(versions, version, f"unknown version {version!r} (supported: 3.9 to 3.19)")
        _load_version(matrix, where, versions, version, spec)

    smoke = data.get("smoke_cells") or []
    for name in smoke:
        if name not in matrix.cells:
            raise where.error(data, "smoke_cells", f"smoke cell {name!r} is not a cell of the matrix")
    matrix.smoke_cells = tuple(smoke)
    default = data.get("default_cell") or (smoke[0] if smoke else "")
    if default not in matrix.cells:
        raise where.error(data, "default_cell", f"default cell {default!r} is not a cell of the matrix")
    matrix.default_cell = default

    tests = data.get("regression_tests") or []
    if not isinstance(tests, list) or not all(isinstance(t, str) and re.fullmatch(r"test_\w+", t) for t in tests):
        raise where.error(data, "regression_tests", "regression_tests must be a list of CPython test module names (test_xxx)")
    matrix.regression_tests = tuple(tests)
    matrix.profilers = _load_profilers(where, data)
    matrix.distributions = _load_distributions(where, data, matrix.root)
    matrix.lanes = _load_lanes(where, data, matrix, versions)
    matrix.defects = _load_defects(where, data, matrix.root)
    matrix.stock = _load_stock(where, data, matrix)
    smoke_stock = data.get("smoke_stock") or []
    if not isinstance(smoke_stock, list) or any(name not in matrix.stock for name in smoke_stock):
        raise where.error(data, "smoke_stock", f"smoke_stock must list stock interpreters of stock: "
                                               f"({', '.join(matrix.stock) or 'none'})")
    matrix.smoke_stock = tuple(smoke_stock)
    for cell in matrix.cells.values():
        if cell.foreign_on(DEFAULT_ARCH) and matrix.build_python_cell_on(cell, DEFAULT_ARCH) is None:
            raise MatrixError(f"{path}: {cell.name} is cross-compiled on an {DEFAULT_ARCH} host, which needs an "
                              f"{DEFAULT_ARCH} cell of "
                              f"{cell.version} to provide the build Python; {cell.version} has none")
    return matrix


def _load_arch_cflags(where: _Where, data, arch_facts: dict[str, ArchFacts]) -> dict[str, str]:
    """matrix.yaml `arch_cflags:` {arch: extra CFLAGS of every cell of that arch}."""
    spec = data.get("arch_cflags")
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise where.error(data, "arch_cflags", "arch_cflags must map an arch to a string of extra CFLAGS")
    for arch, flags in spec.items():
        # a known arch the matrix does not build (now) may keep its flags
        if arch not in arch_facts:
            raise where.error(spec, arch, f"unknown arch {arch!r} in arch_cflags (arch_facts describes "
                                          f"{', '.join(arch_facts)})")
        if not isinstance(flags, str) or not flags.strip():
            raise where.error(spec, arch, f"arch_cflags of {arch} must be a non-empty string of CFLAGS")
        if any(c in flags for c in "\"'$`\\\n"):
            raise where.error(spec, arch, f"arch_cflags of {arch} must be plain options (no quotes, $, ` or \\): "
                                          "they are written into a shell command of the Dockerfile")
    return {arch: " ".join(flags.split()) for arch, flags in spec.items()}


# dpkg's rules for package and suite names and for a version with a revision (any deb-based distribution's)
_PACKAGE_NAME = re.compile(r"[a-z0-9][a-z0-9.+-]*")
_PACKAGE_VERSION = re.compile(r"[0-9][A-Za-z0-9.+~:-]*-[A-Za-z0-9.+~]+")


def _suite_version_entries(where: _Where, data, section: str, what: str, short: str, example: str, keys: set[str],
                           matrix: Matrix):
    """Each entry of a matrix.yaml section keyed <suite>-<version> (`lanes:`, `stock:`), checked alike: (the
    section, the name, the entry, its suite, its version, its distribution).  what names an entry in messages
    (e.g. "packaging lane"), short in the section's own (e.g. "lane")."""
    spec = data.get(section)
    if spec is None:
        return
    if not isinstance(spec, dict):
        raise where.error(data, section, f"{section} must map <suite>-<version> (e.g. {example}) to a {short}")
    for name, entry in spec.items():
        m = re.fullmatch(r"([a-z]+)-(3\.\d+)", str(name))
        if not m:
            raise where.error(spec, name, f"{what} {name!r} must be named <suite>-<version>, e.g. {example}")
        suite, version = m.groups()
        if not isinstance(entry, dict):
            raise where.error(spec, name, f"{what} {name} must be a mapping")
        where.check_keys(entry, keys, f"{section}.{name}")
        dist_key = where.require(entry, "distribution", f"{section}.{name}")
        if dist_key not in matrix.distributions:
            raise where.error(entry, "distribution", f"{section}.{name}.distribution {dist_key!r} is not a key of "
                                                     f"distributions: ({', '.join(matrix.distributions) or 'none'}): "
                                                     "name one of them or add it there")
        yield spec, name, entry, suite, version, matrix.distributions[dist_key]


def _perf_suite_and_modes(where: _Where, entry, label: str, suite: str) -> tuple[str, tuple[str, ...]]:
    """An entry's perf_suite (default: its suite; else one of that suite's, e.g. bookworm-backports) and modes."""
    perf_suite = str(entry.get("perf_suite") or suite)
    if not (perf_suite == suite or perf_suite.startswith(suite + "-")):
        raise where.error(entry, "perf_suite", f"perf_suite of {label} must be {suite} or one of its suites "
                                               f"(e.g. {suite}-backports)")
    modes = entry.get("modes") or []
    if not isinstance(modes, list) or not all(mode in PERF_MODES for mode in modes):
        raise where.error(entry, "modes", f"modes of {label} must be a list of {', '.join(PERF_MODES)}")
    return perf_suite, tuple(modes)


def _load_lanes(where: _Where, data, matrix: Matrix, versions) -> dict[str, Lane]:
    """matrix.yaml `lanes:` {<suite>-<version>: {source_package, package_version, suites, perf_suite, modes}}."""
    lanes = {}
    for spec, name, lane, suite, version, distribution in _suite_version_entries(
            where, data, "lanes", "packaging lane", "lane", "bookworm-3.11", _LANE_KEYS, matrix):
        dist_key = lane["distribution"]
        if distribution.release_number(suite) is None:
            raise where.error(spec, name, f"lane {name}: {suite} is not a release of distributions.{dist_key} "
                                          f"({', '.join(c for c, _ in distribution.releases)}): add it to its "
                                          "releases: with its number")
        if version not in versions:
            raise where.error(spec, name, f"packaging lane {name}: {version} is not a version of the matrix")
        vspec = versions[version]
        if not vspec.get("series"):
            raise where.error(spec, name, f"packaging lane {name}: {version} has no patch series to add")
        package = where.require(lane, "source_package", f"lanes.{name}")
        if not isinstance(package, str) or not _PACKAGE_NAME.fullmatch(package):
            raise where.error(lane, "source_package", f"source_package of {name} must be a package name (dpkg's rules)")
        pversion = str(where.require(lane, "package_version", f"lanes.{name}"))
        if not _PACKAGE_VERSION.fullmatch(pversion):
            raise where.error(lane, "package_version",
                              f"package_version of {name} must be a version with a revision such as 3.11.2-6+deb12u8, "
                              f"not {pversion!r}")
        if not pversion.startswith(version + "."):
            raise where.error(lane, "package_version", f"package_version {pversion} of {name} is not a {version} release")
        suites = lane.get("suites") or [suite]
        if not isinstance(suites, list) or not all(isinstance(s, str) and _PACKAGE_NAME.fullmatch(s) for s in suites
                                                   if s != distribution.security_suite_of(suite)):
            raise where.error(lane, "suites", f"suites of {name} must be a list of apt suites")
        if not all(s == suite or s.startswith(suite + "-") or s == distribution.security_suite_of(suite)
                   for s in suites):
            raise where.error(lane, "suites", f"suites of {name} must be {suite} or its -security/-updates suites")
        perf_suite, modes = _perf_suite_and_modes(where, lane, name, suite)
        perf_revision = lane.get("perf_revision", 1)
        if not isinstance(perf_revision, int) or isinstance(perf_revision, bool) or perf_revision < 1:
            raise where.error(lane, "perf_revision", f"perf_revision of {name} must be a whole number from 1 (the N "
                                                     f"of {pversion}+perfN), not {perf_revision!r}")
        lanes[name] = Lane(
            name=name, suite=suite, version=version, description=str(lane.get("description") or ""),
            source_package=package, package_version=pversion, suites=tuple(suites), perf_suite=perf_suite,
            modes=modes, series=matrix.root / vspec["series"],
            additions=tuple(vspec.get("additions") or ()), distribution=distribution,
            additions_header=matrix.series_of(version).additions_header, perf_revision=perf_revision)
    return lanes


def _load_stock(where: _Where, data, matrix: Matrix) -> dict[str, StockTarget]:
    """matrix.yaml `stock:` {<suite>-<version>: {distribution, package, python, perf_suite, modes, description}}."""
    found = {}
    for _, name, entry, suite, version, distribution in _suite_version_entries(
            where, data, "stock", "stock interpreter", "stock interpreter", "sid-3.15", _STOCK_KEYS, matrix):
        package = str(entry.get("package") or f"python{version}")
        if not _PACKAGE_NAME.fullmatch(package):
            raise where.error(entry, "package", f"package of stock.{name} must be a package name (dpkg's rules)")
        python = str(entry.get("python") or f"/usr/bin/python{version}")
        if not re.fullmatch(r"/[A-Za-z0-9._/+-]+", python):
            raise where.error(entry, "python", f"python of stock.{name} must be an absolute path, not {python!r}")
        perf_suite, modes = _perf_suite_and_modes(where, entry, f"stock.{name}", suite)
        defects = entry.get("defects") or []
        if not isinstance(defects, list) or not all(isinstance(d, str) for d in defects):
            raise where.error(entry, "defects", f"defects of stock.{name} must be a list of ids of defects:")
        unknown = [d for d in defects if d not in matrix.defects]
        if unknown:
            raise where.error(entry, "defects", f"stock.{name} lists {', '.join(unknown)}, which defects: does "
                                                f"not describe (it has {', '.join(matrix.defects) or 'none'})")
        jit = entry.get("jit", False)
        if not isinstance(jit, bool):
            raise where.error(entry, "jit", f"jit of stock.{name} must be true or false (built with "
                                            "--enable-experimental-jit, so PYTHON_JIT=1 turns it on)")
        not_given = entry.get("not_given") or {}
        if not isinstance(not_given, dict) or set(not_given) != set(PERF_MODES) - set(modes) or not all(
                isinstance(v, str) and v in STOCK_DIAGNOSES for v in not_given.values()):
            raise where.error(entry, "not_given" if "not_given" in entry else "modes",
                              f"stock.{name} must say for each mode it does not give ("
                              f"{', '.join(m for m in PERF_MODES if m not in modes) or 'none'}) why, in not_given: "
                              f"{{mode: one of {', '.join(STOCK_DIAGNOSES)}}}")
        found[name] = StockTarget(name=name, suite=suite, version=version,
                                  description=str(entry.get("description") or ""), package=package, python=python,
                                  perf_suite=perf_suite, modes=modes, distribution=distribution,
                                  defects=tuple(defects), jit=jit, not_given=dict(not_given))
    return found


# why a stock interpreter does not give a mode: the codes of cpython_perf.check.external's diagnosis
STOCK_DIAGNOSES = ("no-trampoline", "backend-not-available", "no-frame-pointers", "perf-too-old")
_DEFECT_ID = re.compile(r"gh-[0-9]+|patches/[0-9]+\.[0-9]+/[0-9]{4}|[a-z][a-z0-9-]*")
_DEFECT_KEYS = {"title", "upstream", "patch", "means", "fixed_upstream", "report", "instead"}
NOT_REPORTED = "not reported"


def _keyed_entries(where: _Where, spec, section: str, key_pattern, key_rule: str, keys: set[str]):
    """(key, entry, what) of a mapping section whose keys follow key_pattern and whose entries have keys."""
    for key, entry in spec.items():
        what = f"{section}.{key}"
        if not isinstance(key, str) or not key_pattern.fullmatch(key):
            raise where.error(spec, key, f"{section[:-1]} key {key!r} must be {key_rule}")
        where.check_keys(entry, keys, what)
        yield key, entry, what


def _required_strings(where: _Where, entry, names, what: str, clean=str.strip) -> dict[str, str]:
    values = {}
    for name in names:
        value = where.require(entry, name, what)
        if not isinstance(value, str) or not value.strip():
            raise where.error(entry, name, f"{what}.{name} must be a non-empty string")
        values[name] = clean(value)
    return values


def _load_defects(where: _Where, data, root: Path) -> dict[str, Defect]:
    """matrix.yaml `defects:` {id: {title, upstream, patch, means, fixed_upstream, report}}."""
    spec = data.get("defects") or {}
    if not isinstance(spec, dict):
        raise where.error(data, "defects", "defects must map an id (gh-NNN, patches/3.13/NNNN, a name) to a defect")
    found = {}
    for key, entry, what in _keyed_entries(where, spec, "defects", _DEFECT_ID, "gh-NNN, patches/<version>/NNNN "
                                           "or a lower-case name (jitdump-fork-flush)", _DEFECT_KEYS):
        values = _required_strings(where, entry, ("title", "upstream", "patch", "means"), what,
                                   clean=lambda v: " ".join(v.split()))
        if not (values["upstream"] == NOT_REPORTED or re.fullmatch(r"gh-[0-9]+", values["upstream"])):
            raise where.error(entry, "upstream", f"{what}.upstream must be gh-NNN or {NOT_REPORTED!r}")
        if key.startswith("gh-") and values["upstream"] != key:
            raise where.error(entry, "upstream", f"{what}.upstream must be {key} (the id names the issue)")
        if not (root / values["patch"]).is_file():
            raise where.error(entry, "patch", f"{what}.patch {values['patch']} is not a file of the project")
        report = entry.get("report")
        if values["upstream"] == NOT_REPORTED and not (isinstance(report, str) and report.strip()):
            raise where.error(entry, "report", f"{what} is not reported upstream: give the report ready to send "
                                               "(report:)")
        fixed = entry.get("fixed_upstream")
        if fixed is not None and not (isinstance(fixed, str) and re.fullmatch(r"3\.[0-9]+\.[0-9]+", fixed)):
            raise where.error(entry, "fixed_upstream", f"{what}.fixed_upstream must be a release (\"3.13.10\")")
        instead = entry.get("instead")
        if instead is not None and not (isinstance(instead, str) and instead.strip()):
            raise where.error(entry, "instead", f"{what}.instead must be a non-empty string (what to do instead)")
        found[key] = Defect(id=key, fixed_upstream=fixed, report=" ".join(report.split()) if report else None,
                            instead=" ".join(instead.split()) if instead else None, **values)
    return found


_DISTRIBUTION_KEY = re.compile(r"[a-z][a-z0-9-]*")
_CODENAME = re.compile(r"[a-z][a-z0-9]*")


def _load_distributions(where: _Where, data, root: Path) -> dict[str, Distribution]:
    """matrix.yaml `distributions:` {key: {name, origin, keyring, keyring_sha256, security_suite, releases,
    revision, purl_namespace}}."""
    spec = data.get("distributions")
    if spec is None:
        return {}
    if not isinstance(spec, dict):
        raise where.error(data, "distributions", "distributions must map a key (e.g. debian) to a distribution")
    found = {}
    for key, entry, what in _keyed_entries(where, spec, "distributions", _DISTRIBUTION_KEY,
                                           "lower-case letters, digits and -, e.g. debian", _DISTRIBUTION_KEYS):
        values = _required_strings(where, entry, ("name", "origin", "keyring", "keyring_sha256", "security_suite",
                                                  "revision", "purl_namespace"), what)
        keyring = Path(values["keyring"])
        if keyring.is_absolute() or keyring.parts[:1] != ("keys",) or ".." in keyring.parts:
            raise where.error(entry, "keyring", f"{what}.keyring must be a file under keys/ (e.g. "
                                                f"keys/{key}-archive-keyring.gpg), not {values['keyring']!r}")
        if not (root / keyring).is_file():
            raise where.error(entry, "keyring", f"{what}.keyring {keyring} does not exist: put the distribution's "
                                                "archive keyring there (keys/README.md says how the keys are kept)")
        if not re.fullmatch(r"[0-9a-f]{64}", values["keyring_sha256"]):
            raise where.error(entry, "keyring_sha256", f"{what}.keyring_sha256 must be the 64 hex digits of "
                                                       f"sha256sum {keyring}")
        actual = hashlib.sha256((root / keyring).read_bytes()).hexdigest()
        if actual != values["keyring_sha256"]:
            raise where.error(entry, "keyring_sha256", f"{keyring} has sha256 {actual}, {what}.keyring_sha256 says "
                                                       f"{values['keyring_sha256']}: a changed keyring is a reviewed "
                                                       "change of both")
        security = values["security_suite"]
        if re.sub(r"\{suite\}", "", security) == security or not re.fullmatch(r"[a-z0-9.+-]+",
                                                                              security.replace("{suite}", "x")):
            raise where.error(entry, "security_suite", f"{what}.security_suite must name a release's security "
                                                       f"suite with {{suite}} for the release, e.g. "
                                                       f"\"{{suite}}-security\", not {security!r}")
        revision = values["revision"]
        placeholders = re.findall(r"\{[^}]*\}", revision)
        if (sorted(set(placeholders)) != ["{n}", "{release}"] or len(placeholders) != 2
                or not re.fullmatch(r"[A-Za-z0-9.+~]+", re.sub(r"\{[^}]*\}", "1", revision))):
            raise where.error(entry, "revision", f"{what}.revision must be the version suffix of an update, with "
                                                 "{release} (the release's number) and {n} (the update's) once each "
                                                 f"and only A-Z a-z 0-9 . + ~ besides, e.g. \"+deb{{release}}u{{n}}\", "
                                                 f"not {revision!r}")
        if not re.fullmatch(r"[a-z0-9][a-z0-9.-]*", values["purl_namespace"]):
            raise where.error(entry, "purl_namespace", f"{what}.purl_namespace must be a lower-case purl namespace, "
                                                       f"e.g. {key}")
        releases = where.require(entry, "releases", what)
        if not isinstance(releases, dict) or not releases:
            raise where.error(entry, "releases", f"{what}.releases must map each codename to its number, e.g. "
                                                 "{bookworm: \"12\"}")
        for codename, number in releases.items():
            if not isinstance(codename, str) or not _CODENAME.fullmatch(codename):
                raise where.error(releases, codename, f"{what}.releases: {codename!r} is not a codename (lower-case "
                                                      "letters and digits)")
            if isinstance(number, bool) or not isinstance(number, (int, str)) or \
                    not re.fullmatch(r"[0-9]+(\.[0-9]+)*", str(number)):
                raise where.error(releases, codename, f"{what}.releases.{codename} must be the release's number, "
                                                      f"e.g. \"12\" or \"22.04\" (quoted), not {number!r}")
        found[key] = Distribution(
            key=key, name=values["name"], origin=values["origin"], keyring=root / keyring,
            keyring_sha256=values["keyring_sha256"], security_suite=security,
            releases=tuple((c, str(n)) for c, n in releases.items()), revision=revision,
            purl_namespace=values["purl_namespace"])
    return found


def _load_profilers(where: _Where, data) -> ProfilerPins | None:
    spec = data.get("profilers")
    if spec is None:
        return None
    if not isinstance(spec, dict):
        raise where.error(data, "profilers", "profilers must be a mapping {suite, samply, inferno, py_spy[, austin]}")
    where.check_keys(spec, _PROFILER_KEYS, "profilers")
    values = {}
    for key in ("suite", "samply", "inferno"):
        value = where.require(spec, key, "profilers")
        if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.+~:-]*", value):
            raise where.error(spec, key, f"profilers.{key} must be a Debian suite or version string, not {value!r}")
        values[key] = value
    for key, required in (("py_spy", True), ("austin", False)):
        if key not in spec and not required:
            continue
        pin = where.require(spec, key, "profilers")
        if not isinstance(pin, dict):
            raise where.error(spec, key, f"profilers.{key} must be a mapping {{version, sha256}} of the PyPI wheel")
        where.check_keys(pin, _PY_SPY_KEYS, f"profilers.{key}")
        version, sha256 = (str(where.require(pin, k, f"profilers.{key}")) for k in ("version", "sha256"))
        if not re.fullmatch(r"[0-9][0-9a-z.]*", version) or not re.fullmatch(r"[0-9a-f]{64}", sha256):
            raise where.error(spec, key, f"profilers.{key} needs a release version and the wheel's 64-hex sha256")
        values[key] = {"version": version, "sha256": sha256}
    return ProfilerPins(**values)


def _claimed_modes(cell_spec) -> list:
    """Every mode a cell's spec claims: its modes, and those of modes_on (what it claims on one arch); entries
    of the wrong shape are left for the validation to name."""
    modes_on = cell_spec.get("modes_on")
    per_arch = modes_on.values() if isinstance(modes_on, dict) else ()
    return [*(cell_spec.get("modes") or []), *(m for ms in per_arch if isinstance(ms, list) for m in ms)]


def _load_version(matrix: Matrix, where: _Where, versions, version: str, spec) -> None:
    where.check_keys(spec, _VERSION_KEYS, f"version {version}")
    recipe_rel = where.require(spec, "recipe", f"version {version}")
    recipe_path = matrix.root / recipe_rel
    if not recipe_path.is_file():
        raise where.error(spec, "recipe", f"recipe {recipe_rel} of {version} does not exist")
    recipe = load_recipe(recipe_path, version)
    prerelease = spec.get("prerelease", False)
    if not isinstance(prerelease, bool):
        raise where.error(spec, "prerelease", f"prerelease of {version} must be true or false, not {prerelease!r}")
    if prerelease:   # (a pre-release pin without it is refused by `pin` and caught by tests/source/test_pins.py)
        matrix.prerelease_versions = matrix.prerelease_versions | {version}
    support = spec.get("support", "native")
    if support not in SUPPORT_KINDS:
        raise where.error(spec, "support", f"support must be one of {', '.join(SUPPORT_KINDS)}, not {support!r}")

    series = spec.get("series")
    series_path = None
    if series is not None:
        series_path = matrix.root / series
        if not series_path.is_file():
            raise where.error(spec, "series", f"patch series {series} of {version} does not exist")
    additions = spec.get("additions") or []
    if not isinstance(additions, list):
        raise where.error(spec, "additions", "additions must be a list of paths under Python-additions/")
    for rel in additions:
        if not (matrix.root / "Python-additions" / rel).is_file():
            raise where.error(spec, "additions", f"addition {rel} of {version} is not a file under Python-additions/")

    header = spec.get("additions_header")
    header_path = None
    if header is not None:
        header_path = matrix.root / header
        if not header_path.is_file():
            raise where.error(spec, "additions_header", f"additions_header {header} of {version} does not exist")
    elif additions:
        raise where.error(spec, "additions", f"{version} has additions but no additions_header: the packager forms "
                                             "of its series need the DEP-3 header of the patch that creates them")
    if series_path is not None:
        matrix.series[version] = VersionSeries(version, series_path, tuple(additions), header_path)

    cells = where.require(spec, "cells", f"version {version}")
    if not isinstance(cells, dict) or not cells:
        raise where.error(spec, "cells", f"cells of {version} must be a non-empty mapping")
    claimed = {m for c in cells.values() if isinstance(c, dict) for m in _claimed_modes(c)}
    native = {m for m, since in NATIVE_SINCE.items() if support == "native" and version_tuple(version) >= since}
    backends = tuple(m for m in PERF_MODES if m in claimed | native)
    for variant_name, cell_spec in cells.items():
        if variant_name not in matrix.variants:
            raise where.error(
                cells, variant_name,
                f"unknown variant {variant_name!r} in {version} (variants: {', '.join(matrix.variants)})",
            )
        cell_spec = cell_spec if cell_spec is not None else _LineDict()
        where.check_keys(cell_spec, _CELL_KEYS, f"cell {version}-{variant_name}")
        modes = cell_spec.get("modes") or []
        # modes_on: {arch: [modes]}, what the cell claims on an arch where it is not `modes` (an arch whose
        # perf cannot unwind one of them)
        modes_on = cell_spec.get("modes_on") or {}
        if not isinstance(modes_on, dict) or not all(isinstance(v, list) for v in modes_on.values()):
            raise where.error(cell_spec, "modes_on", f"modes_on of {version}-{variant_name} must map arches to "
                                                      "lists of modes")
        for mode in _claimed_modes(cell_spec):
            if mode not in PERF_MODES:
                raise where.error(cells, variant_name, f"unknown perf mode {mode!r} (known: {', '.join(PERF_MODES)})")
            if support == "none":
                raise where.error(cells, variant_name, f"{version} has support: none but its {variant_name} cell claims {mode}")
            if support == "native" and version_tuple(version) < NATIVE_SINCE[mode]:
                since = ".".join(map(str, NATIVE_SINCE[mode]))
                raise where.error(
                    cells, variant_name,
                    f"{version} is native but {mode} is upstream only from {since}: use support: backport with a series",
                )
            if support == "backport" and series_path is None:
                raise where.error(cells, variant_name, f"{version}-{variant_name} claims {mode} but {version} has no patch series")
        cell_arches = cell_spec.get("arches") or list(matrix.default_arches)
        if not isinstance(cell_arches, list):
            raise where.error(cell_spec, "arches", "arches must be a list of arches")
        for arch in cell_arches:
            if arch not in matrix.arches:
                raise where.error(cell_spec if "arches" in cell_spec else cells,
                                  "arches" if "arches" in cell_spec else variant_name,
                                  f"arch {arch!r} of {version}-{variant_name} is not in the matrix's arches "
                                  f"({', '.join(matrix.arches)})")
            if not matrix.arch_facts[arch].trampoline:
                raise where.error(cell_spec if "arches" in cell_spec else cells,
                                  "arches" if "arches" in cell_spec else variant_name,
                                  f"{arch} has no perf trampoline upstream (trampoline: false in arch_facts): "
                                  f"list it under build_only of {version}-{variant_name}")
        for arch in modes_on:
            if arch not in cell_arches:
                raise where.error(cell_spec, "modes_on", f"modes_on of {version}-{variant_name} names {arch!r}, "
                                                          f"which is not among its arches ({', '.join(cell_arches)})")
        # build_only: arches without the trampoline where the cell is built and
        # its interpreter checked, with no perf mode (e.g. i386)
        build_only = cell_spec.get("build_only") or []
        if not isinstance(build_only, list):
            raise where.error(cell_spec, "build_only", "build_only must be a list of arches")
        for arch in build_only:
            if arch not in matrix.arches:
                raise where.error(cell_spec, "build_only",
                                  f"build-only arch {arch!r} of {version}-{variant_name} is not in the matrix's "
                                  f"arches ({', '.join(matrix.arches)})")
            if matrix.arch_facts[arch].trampoline:
                raise where.error(cell_spec, "build_only",
                                  f"{arch} has the perf trampoline: list it under arches of "
                                  f"{version}-{variant_name}, where the cell's modes are checked")
            if not runs_natively(arch, DEFAULT_ARCH, matrix.arch_facts):
                raise where.error(cell_spec, "build_only",
                                  f"build-only cells are built natively; an {DEFAULT_ARCH} host does not run "
                                  f"{arch} code")
        # vanilla: true (a twin on every arch of the cell) or a list of arches
        vanilla = cell_spec.get("vanilla", False)
        if isinstance(vanilla, bool):
            vanilla_arches = set(cell_arches) if vanilla else set()
        elif isinstance(vanilla, list) and all(a in cell_arches for a in vanilla):
            vanilla_arches = set(vanilla)
        else:
            raise where.error(cell_spec, "vanilla",
                              f"vanilla must be true, false or a list of the cell's arches ({', '.join(cell_arches)})")
        if vanilla_arches and series_path is None:
            raise where.error(cell_spec, "vanilla",
                              f"a vanilla twin is the unpatched build of a version with a patch series; {version} has none")
        for arch in cell_arches:
            cell = Cell(
                version=version,
                variant=matrix.variants[variant_name],
                arch=arch,
                modes=tuple(modes_on.get(arch, modes)),
                support=support,
                recipe=recipe,
                series=series_path,
                additions=tuple(additions),
                backends=backends,
                arch_cflags=matrix.arch_cflags.get(arch, ""),
                arch_facts=matrix.arch_facts[arch],
            )
            matrix.cells[cell.name] = cell
            if arch in vanilla_arches:
                # The pinned source as released: a native version keeps its
                # upstream support (with the defects the series fixes); a
                # backport's twin has no perf support at all.
                native_only = support == "native"
                twin = replace(cell, series=None, additions=(), vanilla=True,
                               modes=cell.modes if native_only else (),
                               backends=tuple(sorted(native, key=PERF_MODES.index)) if native_only else ())
                matrix.cells[twin.name] = twin
        for arch in build_only:
            # the patched build (series and additions), with no mode and no backend: the interpreter offers none
            cell = Cell(version=version, variant=matrix.variants[variant_name], arch=arch, modes=(),
                        support=support, recipe=recipe, series=series_path, additions=tuple(additions),
                        arch_cflags=matrix.arch_cflags.get(arch, ""), arch_facts=matrix.arch_facts[arch])
            matrix.cells[cell.name] = cell

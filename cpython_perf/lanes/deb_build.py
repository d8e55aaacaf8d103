"""Build Debian's own source package of a packaging lane with the version's series added, install it, check it.

`nox -s deb-<suite>-<version>` (`python -m cpython_perf deb <lane>`), for each lane of matrix.yaml `lanes:`:

  image     the build container of the lane's release: bootstrapped with mmdebstrap from this machine's
            archive entry (the lane's suites, the security archive for -security), with build-essential,
            dpkg-dev, devscripts, fakeroot, lintian, quilt and the .dsc's build dependencies
            (`apt-get build-dep` on the .dsc in a customize hook: everything comes in at bootstrap, the
            container needs no network to build).  Tagged cpython-perf-debbuild:<suite>-<hash of suites,
            tools and the .dsc's Build-Depends*>, only once imported whole, and reused while that holds.
  unpack    `dpkg-source -x` of the verified .dsc (Debian's own patches applied at fuzz 0).
  prepare   the quilt form of the series into debian/patches/cpython-perf/, its names APPENDED to
            debian/patches/series (after Debian's own patches), a `<package_version>+perf1` changelog
            entry, and the six PyUnstable_Perf* functions (and, as Debian's 3.13 lists them,
            `(arch=amd64 arm64)_Py_trampoline_func_start/_end`) added to debian/libpython.symbols.in
            where missing (trixie's 3.13 has them all: nothing is added there).
  patch     `dpkg-source --before-build`: the series applied at fuzz 0, as dpkg-buildpackage would.
  build     `dpkg-buildpackage -b -uc -us` with Debian's own debian/rules.  Default
            DEB_BUILD_OPTIONS="nocheck nopgo nolto parallel=N" and the fp variant's frame-pointer flags
            through DEB_CFLAGS_APPEND (dpkg-buildflags appends them to the CFLAGS every configuration of
            Debian's rules is configured with: static, nopie, shared, debug, shared-debug), and
            MAKEFLAGS=JOBS=1 and PYTHONHASHSEED=0 so that the documentation is the same on every build
            (DOC_BUILD_MAKEFLAGS, DOC_BUILD_HASH_SEED).
            --release-grade keeps the archive's own flags (PGO, LTO, the test suite) and adds nothing.
  lintian   `lintian` on the .changes in the same container, and on the archive's binary packages of the
            same source version (apt-get download in that container), tag sets compared with the
            version normalised: what the series brings that the archive's build does not have.
  install   two clean containers of the release (mmdebstrap: the lane's suites and perf_suite, linux-perf
            from perf_suite): cpython-perf-deb:<lane> with the built .debs installed with apt (their
            dependencies resolve from the archive) and cpython-perf-deb:<lane>-archive with the archive's
            .debs of the same version.  Both carry libpython3.X-testsuite (Lib/test).
  checks    in both: `-X perf` activates the trampoline, sysconfig's CFLAGS and the prologue of
            _PyEval_EvalFrameDefault (objdump) show the frame pointer, and matrix.yaml's regression_tests
            run with `python3.X -m test`; failures of the built packages are compared with the archive's.

The .debs, .changes and .buildinfo stay in the cache (~/.cache/cpython-perf/deb/<lane>/<key>/, reused
while the inputs are the same); logs, lintian output, the comparison and the phase times go to
results/deb/<lane>/ (gitignored).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from .. import host, progress
from ..check import regrtest
from ..source import sources
from ..errors import DriverError, RuntimeFailure
from ..image.bootstrap import bootstrap_image
from ..image.labels import INPUTS_LABEL
from ..matrix import PERF_C_API, PROJECT_ROOT, Lane, Matrix
from ..run import containers

NEW_SYMBOLS = PERF_C_API
# the trampoline's code range, global in the assembly on the arches that build it: Debian's own python3.13
# symbols file lists them so, `(arch=amd64 arm64)_Py_trampoline_func_start@Base`
ARCH_SYMBOLS = {"_Py_trampoline_func_start": "amd64 arm64", "_Py_trampoline_func_end": "amd64 arm64"}
PERF_SUFFIX = "+perf1"
# Minimal version of the added symbols: `<package_version>+perf1~`, satisfied by every +perf1 build and by
# none of the archive's.  Without the `~` (the package's own version) lintian reports
# symbols-file-contains-current-version-with-debian-revision (E), which the archive's bullseye package does
# not have.
SYMBOLS_VERSION_SUFFIX = "~"
DEFAULT_BUILD_OPTIONS = ("nocheck", "nopgo", "nolto")
# CPython's Doc/Makefile (3.10 and later) runs Sphinx with `-j $(JOBS)`, JOBS = auto.  Sphinx's parallel
# reading merges what its workers collect in the order they finish: Sphinx 5.3's html search index
# (`alltitles`) came out in another order on each build; one process reads the documents in name order.
# A variable in MAKEFLAGS is a command-line definition for every make below dpkg-buildpackage, Debian's
# `$(MAKE) -C Doc html|texinfo` included; nothing else in the packages' builds reads JOBS.
DOC_BUILD_MAKEFLAGS = "JOBS=1"
# Even read by one process, Sphinx's Texinfo output depends on the interpreter's string hash seed: an
# anchor of the index moves between two runs (random seed), and stays put with a fixed one.  Nothing else
# in the packages differed between two builds with random seeds.
DOC_BUILD_HASH_SEED = "0"
FRAME_POINTER_VARIANT = "fp"          # matrix.yaml variant whose cflags go into DEB_CFLAGS_APPEND
BUILD_TOOLS = ("build-essential", "dpkg-dev", "devscripts", "fakeroot", "lintian", "quilt", "ca-certificates")
RUNTIME_TOOLS = ("binutils", "procps", "ca-certificates", "gcc", "libc6-dev")   # cc: the suite's C checks
BUILD_IMAGE_REPOSITORY = "cpython-perf-debbuild"
IMAGE_REPOSITORY = "cpython-perf-deb"
MAINTAINER = "cpython-perf project <cpython-perf@users.noreply.github.com>"
PATCH_SUBDIR = "cpython-perf"          # debian/patches/<this>/ (series_forms.DEBIAN_SUBDIR)
MMDEBSTRAP_DEB_HOOK = "/usr/share/mmdebstrap/hooks/file-mirror-automount"
RESULTS_ROOT = PROJECT_ROOT / "results" / "deb"
REGRTEST_TIMEOUT = 1200
TRAMPOLINE_CHECK = "import sys; print(sys.is_stack_trampoline_active())"


# --------------------------------------------------------------------------
# what the lane builds and installs


def perf_version(package_version: str, revision: int = 1) -> str:
    """The version of the built packages: the archive's, +perfN (sorts right after it; matrix.yaml's
    lanes.<lane>.perf_revision is N, Lane.perf_version)."""
    return f"{package_version}+perf{revision}"


def symbols_version(package_version: str) -> str:
    """The minimal version the added symbols carry in the symbols file: that of the first +perf build of the
    revision (+perf1~), which every later +perfN satisfies too."""
    return package_version + PERF_SUFFIX + SYMBOLS_VERSION_SUFFIX


def install_packages(lane: Lane) -> list[str]:
    """Binary packages installed into the checking images (the interpreter, its library, headers, Lib/test)."""
    v = lane.version
    return [f"python{v}", f"python{v}-minimal", f"libpython{v}", f"libpython{v}-minimal", f"libpython{v}-stdlib",
            f"python{v}-dev", f"libpython{v}-dev", f"libpython{v}-testsuite"]


def dsc_field(dsc_text: str, name: str) -> str:
    """A field of a .dsc (continuation lines joined), '' if absent."""
    value, inside = [], False
    for line in dsc_text.splitlines():
        if inside and line[:1] in (" ", "\t"):
            value.append(line.strip())
            continue
        inside = False
        if line.lower().startswith(name.lower() + ":"):
            value.append(line.split(":", 1)[1].strip())
            inside = True
    return " ".join(v for v in value if v)


def binary_packages(dsc_text: str) -> list[str]:
    return [p.strip() for p in dsc_field(dsc_text, "Binary").split(",") if p.strip()]


# --------------------------------------------------------------------------
# the edits of the unpacked source package


def append_series(series_text: str, names: list[str], subdir: str = PATCH_SUBDIR) -> str:
    """debian/patches/series with names (under subdir/) appended after the distribution's own patches."""
    if not series_text.endswith("\n") and series_text:
        series_text += "\n"
    present = {line.strip() for line in series_text.splitlines()}
    lines = [f"{subdir}/{name}" for name in names]
    already = [line for line in lines if line in present]
    if already:
        raise DriverError(f"debian/patches/series already names {', '.join(already)}: the tree is not pristine")
    return series_text + "".join(line + "\n" for line in lines)


_SYMBOL_LINE = re.compile(r"^ (?:\([^)]*\))?([^\s(@]+)@(\S+) (\S+)")   # ` (tags)NAME@Base VERSION`


def add_symbols(text: str, version: str, names=NEW_SYMBOLS, arch_names: dict[str, str] | None = None
                ) -> tuple[str, list[str]]:
    """A Debian symbols file (template) with the missing names added as ` NAME@Base VERSION` (arch_names:
    ` (arch=ARCHES)NAME@Base VERSION`), each before the first symbol line whose name sorts after it (the
    files are sorted by name); returns (text, names added)."""
    lines = text.splitlines(keepends=True)
    present = {m.group(1) for m in map(_SYMBOL_LINE.match, lines) if m}
    wanted = [(name, "") for name in names] + [(n, f"(arch={a})") for n, a in (arch_names or {}).items()]
    added = []
    for name, tag in wanted:
        if name in present:
            continue
        where = next((i for i, line in enumerate(lines)
                      if (m := _SYMBOL_LINE.match(line)) and m.group(1) > name), None)
        if where is None:   # after the last symbol line
            where = max((i + 1 for i, line in enumerate(lines) if _SYMBOL_LINE.match(line)), default=len(lines))
        lines.insert(where, f" {tag}{name}@Base {version}\n")
        present.add(name)
        added.append(name)
    return "".join(lines), added


def symbols_file(debian: Path, version: str) -> Path:
    """The symbols template of libpython<version>: debian/libpython.symbols.in, which every
    libPVER*.symbols*.in includes (the shared and the debug library, every arch), else libPVER.symbols.in."""
    shared = debian / "libpython.symbols.in"
    if shared.is_file():
        includers = [p for p in debian.glob("libPVER*.symbols*.in") if '#include "libpython.symbols"' in p.read_text()]
        if includers:
            return shared
    own = debian / "libPVER.symbols.in"
    if own.is_file():
        return own
    raise DriverError(f"no libpython{version} symbols file in {debian} (looked for libpython.symbols.in, "
                      "libPVER.symbols.in)")


def changelog_date(when: datetime) -> str:
    """RFC 5322 date as debian/changelog wants it (numeric zone)."""
    return when.astimezone(timezone.utc).strftime("%a, %d %b %Y %H:%M:%S +0000")


_TRAILER = re.compile(r"^ -- .*?  (?P<date>\S.*\S)\s*$", re.M)
_LAST_UPDATE = re.compile(r"^Last-Update:\s*(\d{4}-\d{2}-\d{2})\s*$", re.M)


def entry_date(changelog: str, patch_texts) -> datetime:
    """When the `+perfN` entry is dated: the later of Debian's newest entry and the newest Last-Update
    among the patches (midnight UTC).  Both are inputs of the build, so two builds of the same inputs
    write the same entry and dpkg derives the same SOURCE_DATE_EPOCH from it (the packages' file times,
    the compressed changelogs); the build's own clock would differ on every run."""
    from email.utils import parsedate_to_datetime
    dates = []
    found = _TRAILER.search(changelog)
    if found:
        try:
            dates.append(parsedate_to_datetime(found.group("date")).astimezone(timezone.utc))
        except (TypeError, ValueError):
            pass
    for text in patch_texts:
        update = _LAST_UPDATE.search(text)
        if update:
            dates.append(datetime.strptime(update.group(1), "%Y-%m-%d").replace(tzinfo=timezone.utc))
    if not dates:
        raise DriverError("debian/changelog has no dated entry and no patch a Last-Update: the +perf entry "
                          "would have no date that two builds agree on")
    return max(dates)


def changelog_entry(lane: Lane, names: list[str], symbols_added: list[str], symbols_path: str,
                    when: datetime, distribution: str | None = None) -> str:
    """The `+perf1` entry put on top of debian/changelog."""
    version = lane.perf_version
    patches_text = ", ".join(names)
    what = (f"Add CPython 3.12/3.13's perf profiler support (perf trampoline, -X perf, -X perf_jit), "
            f"backported to {lane.upstream_version}" if lane.additions else
            f"Fix the perf profiler support (perf trampoline, perf_jit) of {lane.upstream_version}")
    items = [f"{what}, from the cpython-perf project: the {lane.version} series in "
             f"debian/patches/{PATCH_SUBDIR}/, applied after Debian's own patches ({patches_text})."]
    if symbols_added:
        items.append(f"{symbols_path}: add {', '.join(symbols_added)}.")
    body = "".join(_wrap_item(item) for item in items)
    return (f"{lane.source_package} ({version}) {distribution or lane.suite}; urgency=medium\n\n{body}\n"
            f" -- {MAINTAINER}  {changelog_date(when)}\n\n")


def _wrap_item(text: str, width: int = 78) -> str:
    words, lines, line = text.split(), [], "  *"
    for word in words:
        if len(line) + 1 + len(word) > width and line.strip() != "*":
            lines.append(line)
            line = "   "
        line += " " + word
    lines.append(line)
    return "\n".join(lines) + "\n"


@dataclass
class Prepared:
    names: list[str]              # patch names appended (under debian/patches/cpython-perf/)
    symbols_added: list[str]
    symbols_path: str             # relative to the source tree
    version: str                  # version of the built packages


def prepare_tree(tree: Path, lane: Lane, form_dir: Path | None, names: list[str],
                 when: datetime | None = None) -> Prepared:
    """Apply the lane's edits to an unpacked source package (form_dir None: the baseline, left as is).
    The new changelog entry is dated by entry_date unless `when` is given."""
    debian = tree / "debian"
    if form_dir is None:
        return Prepared([], [], "", lane.package_version)
    version = lane.perf_version
    target = debian / "patches" / PATCH_SUBDIR
    if target.exists():
        raise DriverError(f"{target} exists already: the tree is not pristine")
    shutil.copytree(form_dir, target)
    series = debian / "patches" / "series"
    series.write_text(append_series(series.read_text() if series.exists() else "", names))
    sym = symbols_file(debian, lane.version)
    text, added = add_symbols(sym.read_text(), symbols_version(lane.package_version), NEW_SYMBOLS, ARCH_SYMBOLS)
    if added:
        sym.write_text(text)
    rel = str(sym.relative_to(tree))
    changelog = debian / "changelog"
    old = changelog.read_text()
    if when is None:
        when = entry_date(old, (p.read_text(errors="replace") for p in sorted(target.glob("*.patch"))))
    changelog.write_text(changelog_entry(lane, names, added, rel, when) + old)
    return Prepared(list(names), added, rel, version)


# --------------------------------------------------------------------------
# build options


@dataclass
class DebOptions:
    release_grade: bool = False   # the archive's own flags: PGO, LTO, the test suite, no frame pointers added
    with_series: bool = True      # False: the baseline, Debian's package rebuilt as it is
    jobs: int = 2
    rebuild: bool = False         # build again even if the cache has the packages of these inputs
    checks: bool = True           # install images and in-image checks
    lintian: bool = True


def build_environment(options: DebOptions, matrix: Matrix) -> dict[str, str]:
    """DEB_BUILD_OPTIONS of dpkg-buildpackage; by default also the frame-pointer flags and the documentation
    built by one Sphinx process with a fixed hash seed (DOC_BUILD_MAKEFLAGS, DOC_BUILD_HASH_SEED).
    --release-grade adds none of them: the archive's build."""
    env = {"DEB_BUILD_OPTIONS": " ".join(
        ([] if options.release_grade else list(DEFAULT_BUILD_OPTIONS)) + [f"parallel={options.jobs}"])}
    if not options.release_grade:
        env["DEB_CFLAGS_APPEND"] = matrix.variants[FRAME_POINTER_VARIANT].cflags
        env["MAKEFLAGS"] = DOC_BUILD_MAKEFLAGS
        env["PYTHONHASHSEED"] = DOC_BUILD_HASH_SEED
    return env


def dpkg_buildpackage_command() -> list[str]:
    return ["dpkg-buildpackage", "-b", "-uc", "-us"]


@dataclass(frozen=True)
class BuildConditions:
    """What a build varies that its inputs do not name (the deb reproducibility check's second build): where the
    source is unpacked, the environment, the umask, the `docker run` options (host name, CPUs), and a command
    dpkg-buildpackage runs under (setarch)."""
    src_dir: str = "src"                       # under the build's work directory (/w)
    env: tuple[tuple[str, str], ...] = ()      # added to (and overriding) the lane's build environment
    umask: str | None = None
    docker_options: tuple[str, ...] = ()
    wrapper: tuple[str, ...] = ()

    def command(self, argv: list[str]) -> list[str]:
        argv = [*self.wrapper, *argv]
        if self.umask:
            return ["sh", "-c", f"umask {self.umask} && exec {shlex.join(argv)}"]
        return argv


AS_BUILT = BuildConditions()


def lintian_command(*paths: str) -> list[str]:
    """lintian on a .changes (binaries, .buildinfo, .changes) or on .debs: every tag, none hidden."""
    return ["lintian", "--display-info", "--display-experimental", "--pedantic", "--tag-display-limit", "0",
            "--fail-on", "none", *paths]


LINTIAN_USER = "65534:65534"   # nobody: lintian warns against running as root


# --------------------------------------------------------------------------
# lintian comparison

_LINTIAN_LINE = re.compile(r"^(?P<sev>[EWIPXCO]): (?P<pkg>[a-z0-9][a-z0-9.+-]*)"
                           r"(?: (?P<kind>changes|source|buildinfo|udeb|binary))?: (?P<tag>[a-z0-9][a-z0-9.+-]*)"
                           r"(?: (?P<info>.*))?$")


@dataclass(frozen=True)
class LintianTag:
    severity: str
    package: str
    kind: str        # binary, changes, buildinfo, source
    tag: str
    info: str

    def key(self) -> tuple[str, str, str, str]:
        return (self.package, self.kind, self.tag, self.info)

    def __str__(self) -> str:
        kind = "" if self.kind == "binary" else f" {self.kind}"
        return f"{self.severity}: {self.package}{kind}: {self.tag}{' ' + self.info if self.info else ''}"


def parse_lintian(text: str, versions=()) -> list[LintianTag]:
    """lintian output lines -> tags, every one of versions in an info replaced by <version>."""
    tags = []
    for line in text.splitlines():
        m = _LINTIAN_LINE.match(line.strip())
        if not m or m["sev"] == "N":
            continue
        info = (m["info"] or "").strip()
        for v in sorted(versions, key=len, reverse=True):
            if v:
                info = info.replace(v, "<version>").replace(v.split(":", 1)[-1], "<version>")
        tags.append(LintianTag(m["sev"], m["pkg"], m["kind"] or "binary", m["tag"], info))
    return tags


@dataclass
class LintianDiff:
    new: list[LintianTag]        # a tag the archive's package does not have at all
    changed: list[tuple[LintianTag, LintianTag]]   # (built, archive): the same tag, another info
    gone: list[LintianTag]       # on the archive's binaries only
    changes_only: list[LintianTag] = field(default_factory=list)   # .changes / .buildinfo tags (no archive twin)
    compared_packages: list[str] = field(default_factory=list)
    more: list[LintianTag] = field(default_factory=list)   # more instances of a tag the archive's package has

    def summary(self) -> str:
        return (f"{len(self.new)} tags new against the archive's binaries ({len(self.compared_packages)} packages), "
                f"{len(self.more)} more instances of tags the archive's package has, "
                f"{len(self.changed)} the same with another info, {len(self.gone)} gone; "
                f"{len(self.changes_only)} on the .changes/.buildinfo")

    def report(self, built_version: str, archive_version: str) -> str:
        lines = [f"# lintian: built {built_version} against the archive's {archive_version}", self.summary(), "",
                 "## new (a tag the archive's package does not have)", *map(str, self.new), "",
                 "## more instances of a tag the archive's package has", *map(str, self.more), "",
                 "## the same tag, another info (built, then archive)"]
        for built, archive in self.changed:
            lines += [f"+ {built}", f"- {archive}"]
        lines += ["", "## gone (on the archive's binaries only)", *map(str, self.gone), "",
                  "## on the .changes / .buildinfo (the archive's are not compared)", *map(str, self.changes_only)]
        return "\n".join(lines) + "\n"


def compare_lintian(built: list[LintianTag], archive: list[LintianTag]) -> LintianDiff:
    """Tags of the built binaries against the archive's (versions already normalised by parse_lintian).
    A tag both emit for a package with other info (a symbol count, an object list that now names the
    series' files) is `changed`, not new."""
    built_bin = [t for t in built if t.kind in ("binary", "udeb")]
    built_pkgs = {t.package for t in built_bin}
    archive_keys = {t.key() for t in archive}
    built_keys = {t.key() for t in built_bin}
    extra = sorted({t for t in built_bin if t.key() not in archive_keys}, key=str)
    missing = sorted({t for t in archive if t.key() not in built_keys and t.package in built_pkgs}, key=str)
    archive_tags = {(a.package, a.kind, a.tag) for a in archive}
    new, more, changed = [], [], []
    for tag in extra:
        twin = next((a for a in missing if (a.package, a.kind, a.tag) == (tag.package, tag.kind, tag.tag)), None)
        if twin is not None:
            missing.remove(twin)
            changed.append((tag, twin))
        elif (tag.package, tag.kind, tag.tag) in archive_tags:
            more.append(tag)
        else:
            new.append(tag)
    return LintianDiff(new, changed, missing, sorted({t for t in built if t.kind not in ("binary", "udeb")}, key=str),
                       sorted({t.package for t in archive}), more)


# --------------------------------------------------------------------------
# images


def archive_lines(suites, entries: dict[str, dict]) -> list[str]:
    """One-line apt entries for mmdebstrap: each suite from this machine's archive (-security from its
    security archive); the keyring is the host's, as mmdebstrap uses it."""
    lines = []
    for suite in dict.fromkeys(suites):
        entry = entries.get("security", entries["main"]) if suite.endswith("-security") else entries["main"]
        lines.append(f"deb {entry['uri']} {suite} main")
    return lines


def build_image_tag(lane: Lane, dsc_text: str) -> str:
    """cpython-perf-debbuild:<suite>-<hash of the suites, the tools and the .dsc's build relations>."""
    relations = [dsc_field(dsc_text, f) for f in ("Build-Depends", "Build-Depends-Arch", "Build-Depends-Indep",
                                                   "Build-Conflicts", "Build-Conflicts-Arch", "Build-Conflicts-Indep")]
    digest = hashlib.sha256("\n".join([*lane.suites, *BUILD_TOOLS, *relations]).encode()).hexdigest()[:12]
    return f"{BUILD_IMAGE_REPOSITORY}:{lane.suite}-{digest}"


# `apt-get build-dep` on the .dsc.  An archive whose index lists a version its pool does not serve (here:
# bullseye-security's libbluetooth-dev 5.55-3.1+deb11u2, 404) fails it: then that source package's binaries
# are pinned to the release suite (apt_preferences, `Package: src:NAME`, kept in the image and said in the
# log) and build-dep runs again; nothing else changes version.
BUILD_DEP_SCRIPT = """\
export DEBIAN_FRONTEND=noninteractive
for attempt in 1 2 3 4 5 6; do
  if apt-get build-dep -y "$1" > /tmp/build-dep.log 2>&1; then cat /tmp/build-dep.log; exit 0; fi
  cat /tmp/build-dep.log
  sources=$(sed -n 's,^E: Failed to fetch .*/\\([^/ ]*\\)/[^/ ]*[.]deb  *404.*,\\1,p' /tmp/build-dep.log | sort -u)
  [ -n "$sources" ] || exit 1
  for s in $sources; do
    echo "cpython-perf: the pool does not serve the $s packages its index lists (404): pinning src:$s to $2"
    printf 'Package: src:%s\\nPin: release n=%s\\nPin-Priority: 990\\n\\n' "$s" "$2" \\
      >> /etc/apt/preferences.d/cpython-perf-unserved
  done
done
exit 1
"""


def build_image_command(lane: Lane, dsc: Path, tar: Path, entries: dict[str, dict]) -> list[str]:
    """mmdebstrap of the build container: the tools, then `apt-get build-dep` on the .dsc (its
    Build-Depends and Build-Depends-Indep, every profile's: the same image serves --release-grade)."""
    inside = f"/tmp/cpython-perf-dsc/{dsc.name}"
    return ["mmdebstrap", "--variant=apt", f"--include={','.join(BUILD_TOOLS)}",
            "--customize-hook=mkdir -p \"$1/tmp/cpython-perf-dsc\"",
            f"--customize-hook=copy-in {dsc} /tmp/cpython-perf-dsc",
            f"--customize-hook=chroot \"$1\" sh -c {shlex.quote(BUILD_DEP_SCRIPT)} build-dep "
            f"{shlex.quote(inside)} {shlex.quote(lane.suite)}",
            "--customize-hook=rm -rf \"$1/tmp/cpython-perf-dsc\"",
            lane.suite, str(tar), *archive_lines(lane.suites, entries)]


# bullseye's linux-perf-5.10 ships only /usr/bin/perf_5.10 (the /usr/bin/perf wrapper of linux-base, not
# installed, would refuse this kernel anyway): `perf` on PATH for CPython's test_perf_profiler
PERF_LINK_HOOK = ('[ -e "$1/usr/bin/perf" ] || for p in "$1"/usr/bin/perf_[0-9]*; do '
                  '[ -e "$p" ] && ln -s "/usr/bin/${p##*/}" "$1/usr/local/bin/perf"; break; done')


def install_image_command(lane: Lane, debs: list[Path], tar: Path, entries: dict[str, dict]) -> list[str]:
    """mmdebstrap of a checking container: linux-perf from perf_suite, binutils, and the given .debs
    installed by apt (as `apt-get install ./x.deb`: their dependencies come from the archive)."""
    # `linux-perf/SUITE` makes apt take perf's dependencies from SUITE too where it can (bullseye's
    # linux-perf-5.10 depends on libpython3.9: the archive's 3.9.2-1, not the .debs given): only
    # name the suite when perf comes from one the lane does not otherwise use (bookworm-backports)
    perf = "linux-perf" if lane.perf_suite in lane.suites else f"linux-perf/{lane.perf_suite}"
    return ["mmdebstrap", "--variant=apt", f"--include={','.join(RUNTIME_TOOLS)},{perf}",
            *[f"--include={deb}" for deb in debs], f"--hook-dir={MMDEBSTRAP_DEB_HOOK}",
            f"--customize-hook={PERF_LINK_HOOK}",
            lane.suite, str(tar), *archive_lines([*lane.suites, lane.perf_suite], entries)]


def image_label(tag: str) -> str | None:
    proc = subprocess.run(["docker", "image", "inspect", "--format",
                           "{{index .Config.Labels \"" + INPUTS_LABEL + "\"}}", tag], capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def _tail_of(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# --------------------------------------------------------------------------
# containers


def docker_run_command(image: str, argv: list[str], *, mounts: dict[Path, str] | None = None,
                       env: dict[str, str] | None = None, workdir: str | None = None, name: str | None = None,
                       cap_add: list[str] | None = None, network: bool = True, user: str | None = None,
                       options: list[str] | tuple[str, ...] = ()) -> list[str]:
    """options: more `docker run` options (a BuildConditions' host name, CPU set)."""
    cmd = ["docker", "run", "--rm", *options]
    if name:
        cmd += ["--name", name]
    if user:
        cmd += ["--user", user]
    for host_path, inside in (mounts or {}).items():
        cmd += ["-v", f"{host_path}:{inside}"]
    for key, value in (env or {}).items():
        cmd += ["-e", f"{key}={value}"]
    if workdir:
        cmd += ["-w", workdir]
    # a perf capability comes with CAP_IPC_LOCK, as in every container of the driver (containers.py: perf's
    # ring buffers outside the per-user locked-memory budget, so several suites can record at once)
    for cap in containers.container_capabilities(cap_add):
        cmd += ["--cap-add", cap]
    if not network:
        cmd += ["--network", "none"]
    return cmd + [image, *argv]


def run_logged(cmd: list[str], log_file: Path, name: str | None = None, timeout: float | None = None,
               log=lambda line: None, what: str | None = None) -> int:
    """Run a command with its output appended to log_file, a heartbeat on log (cpython_perf.progress: every line
    with --verbose); the named container is removed if interrupted."""
    with progress.Progress(what or shlex.join(cmd[-3:]), log_file, log, append=True) as step:
        try:
            rc = step.run(cmd, timeout=timeout)
        except BaseException:
            if name:
                subprocess.run(["docker", "rm", "-f", name], capture_output=True)
            raise
        step.ok = rc == 0
        return rc


def run_captured(cmd: list[str], timeout: float = 3600) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)


@contextlib.contextmanager
def build_lock(path: Path, log):
    """One deb build at a time on this machine (they take both cores)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another deb build holds {path}; waiting for it")
            fcntl.flock(f, fcntl.LOCK_EX)
        yield


# --------------------------------------------------------------------------
# checks in the installed images

FP_CHECK = r"""
set -e
py=$1
$py -c 'import sysconfig; [print(k, sysconfig.get_config_var(k)) for k in ("CFLAGS", "PY_CORE_CFLAGS", "CONFIG_ARGS")]'
for f in $py $($py -c 'import sysconfig as s, os; print(" ".join({os.path.join(d, s.get_config_var("INSTSONAME")) for d in (s.get_config_var("LIBDIR"), "/usr/lib/" + (s.get_config_var("MULTIARCH") or ""))}))'); do
  [ -e "$f" ] || continue
  addr=$(nm -D --defined-only "$f" | awk '$3 == "_PyEval_EvalFrameDefault" {print $1}')
  [ -n "$addr" ] || { echo "PROLOGUE $f none"; continue; }
  start=$((0x$addr)); echo "PROLOGUE $f $addr"
  objdump -d --no-show-raw-insn --start-address=$start --stop-address=$((start + 48)) "$f" | sed -n '/>:$/,$p'
done
"""


def frame_pointer_prologues(text: str) -> dict[str, bool]:
    """{file: whether _PyEval_EvalFrameDefault sets up %rbp as frame pointer} from FP_CHECK's output."""
    result: dict[str, bool] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("PROLOGUE "):
            _, path, addr = line.split(None, 2)
            current = path if addr != "none" else None
            if current:
                result[current] = False
            continue
        if current and re.search(r"\bmov\s+%rsp,%rbp\b", line):
            result[current] = True
    return result


def sysconfig_cflags(text: str, var: str = "CFLAGS") -> str:
    """A sysconfig variable from FP_CHECK's output (Debian's 3.13 keeps the build's flags in PY_CORE_CFLAGS
    only: its CFLAGS, which extensions inherit, are scrubbed)."""
    for line in text.splitlines():
        if line.startswith(var + " "):
            return line[len(var) + 1:]
    return ""


def regrtest_argv(python: str, tests: list[str], junit: str, jobs: int = 2) -> list[str]:
    return [python, "-m", "test", f"-j{jobs}", f"--timeout={REGRTEST_TIMEOUT}", "--junit-xml", junit, *tests]


def shipped_tests_argv(python: str, tests: list[str]) -> list[str]:
    code = ("import os, sys, test\nbase = os.path.dirname(test.__file__)\nfor name in sys.argv[1:]:\n"
            "    p = os.path.join(base, name)\n    if os.path.isfile(p + '.py') or os.path.isdir(p):\n"
            "        print(name)\n")
    return [python, "-c", code, *tests]


# --------------------------------------------------------------------------
# the lane


@dataclass
class LanePaths:
    results: Path
    cache: Path

    @classmethod
    def of(cls, lane: Lane, options: DebOptions, results_root: Path | None = None,
           cache_root: Path | None = None) -> "LanePaths":
        suffix = "" if options.with_series else "-baseline"
        suffix += "-release-grade" if options.release_grade else ""
        results = Path(results_root or RESULTS_ROOT) / f"{lane.name}{suffix}"
        cache = Path(cache_root or default_cache_root()) / lane.name
        return cls(results, cache)


def default_cache_root() -> Path:
    return sources.default_cache_dir().parent / "deb"


def build_key(lane: Lane, dsc: Path, form_files: dict[str, bytes], env: dict[str, str], image: str) -> str:
    """Digest of everything the built packages are made from (the changelog entry's date too: entry_date takes
    it from the .dsc's changelog and the patches)."""
    digest = hashlib.sha256()
    for part in (lane.name.encode(), lane.package_version.encode(), sources.sha256_of(dsc).encode(),
                 json.dumps(env, sort_keys=True).encode(), image.encode(),
                 " ".join([*NEW_SYMBOLS, *ARCH_SYMBOLS]).encode(),
                 # the symbols' version only where the series adds them (the backports: lanes with additions)
                 *([symbols_version(lane.package_version).encode()] if lane.additions else []),
                 # N of +perfN where it is not 1 (the keys of +perf1 builds stay as they were)
                 *([f"+perf{lane.perf_revision}".encode()] if lane.perf_revision != 1 else []),
                 *(name.encode() + b"\0" + data for name, data in sorted(form_files.items()))):
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()


def current_build_key(lane: Lane, dsc: Path, env: dict[str, str]) -> str:
    """The build key (build_key) of a build with the series of the lane's inputs as they are now (the .dsc, the
    series' quilt form, the build image's tag, env): the cache directory of such a build is named after it."""
    from . import series_forms

    with tempfile.TemporaryDirectory(prefix=f"cpython-perf-key-{lane.name}-") as tmp:
        series_forms.write_quilt_form(lane.patch_series, Path(tmp))
        form_files = {p.name: p.read_bytes() for p in sorted(Path(tmp).iterdir())}
    return build_key(lane, dsc, form_files, env, build_image_tag(lane, dsc.read_text(errors="replace")))


class LaneRun:
    """One run of `python -m cpython_perf deb <lane>`: phases timed into results/deb/<lane>/summary.json."""

    def __init__(self, lane: Lane, matrix: Matrix, options: DebOptions, log=print,
                 results_root: Path | None = None, cache_root: Path | None = None):
        self.lane, self.matrix, self.options, self.log = lane, matrix, options, log
        self.paths = LanePaths.of(lane, options, results_root, cache_root)
        self.summary: dict = {"lane": lane.name, "source_package": lane.source_package,
                              "package_version": lane.package_version, "phases": {},
                              "options": {"release_grade": options.release_grade,
                                          "with_series": options.with_series, "jobs": options.jobs}}
        self._entries: dict | None = None

    # -- helpers

    def phase(self, name: str):
        run = self

        class _Phase:
            def __enter__(self):
                self.started = time.monotonic()
                run.log(f"== {run.lane.name}: {name}")

            def __exit__(self, *exc):
                seconds = round(time.monotonic() - self.started, 1)
                run.summary["phases"][name] = seconds
                run.log(f"== {run.lane.name}: {name} {'done' if exc[0] is None else 'FAILED'} in {seconds:.0f} s")
                run.save()
                return False

        return _Phase()

    def save(self) -> None:
        self.paths.results.mkdir(parents=True, exist_ok=True)
        (self.paths.results / "summary.json").write_text(json.dumps(self.summary, indent=2, sort_keys=True) + "\n")

    @property
    def entries(self) -> dict:
        if self._entries is None:
            from .source_packages import archive_entries
            self._entries = archive_entries()
        return self._entries

    # -- the run

    def run(self) -> dict:
        from . import series_forms

        lane, options = self.lane, self.options
        self.paths.results.mkdir(parents=True, exist_ok=True)
        for old in ("build.log", "lintian.txt", "lintian-archive.txt", "lintian-diff.txt", "images.log",
                    "checks.log"):
            (self.paths.results / old).unlink(missing_ok=True)
        host.ensure_commands({"mmdebstrap": "mmdebstrap"}, self.log)
        host.docker_client(self.log)   # a daemon answers (started if allowed)
        package, dsc_text, image, env = self.build_inputs()
        form_dir = None
        form_files: dict[str, bytes] = {}
        names: list[str] = []
        tmp = Path(tempfile.mkdtemp(prefix=f"cpython-perf-deb-{lane.name}-", dir=self._scratch()))
        try:
            if options.with_series:
                form_dir = tmp / "form"
                names = series_forms.write_quilt_form(lane.patch_series, form_dir)
                form_files = {p.name: p.read_bytes() for p in sorted(form_dir.iterdir())}
            key = build_key(lane, package.dsc, form_files, env, image)
            out = self.paths.cache / key[:16]
            self.summary["packages_dir"] = str(out)
            if options.rebuild or not (out / "DONE").is_file():
                self.build(package.dsc, image, env, form_dir, names, out, tmp)
            else:
                self.log(f"{lane.name}: the packages of these inputs are built already ({out}); --rebuild to redo")
                self.summary["phases"]["build"] = "cached (build_seconds: when it was built)"
            built = json.loads((out / "DONE").read_text())
            self.summary.update(built)
            for name in (*built["changes_files"], "build.log"):
                if not (self.paths.results / name).exists() or name != "build.log":
                    shutil.copy2(out / name, self.paths.results / name)
            self.summary["sizes"] = self.sizes(out, built["debs"])
            if options.lintian:
                self.lintian(image, out, built, dsc_text)
            if options.checks:
                self.install_and_check(out, built)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self.summary["result"] = "ok"
        self.save()
        return self.summary

    def build_inputs(self):
        """The verified source package, its .dsc text, the build image (made when missing) and the build
        environment -> (package, dsc_text, image, env), each recorded in the summary."""
        from .source_packages import fetch_source_package

        with self.phase("source"):
            package = fetch_source_package(self.lane, log=self.log)
        dsc_text = package.dsc.read_text(errors="replace")
        with self.phase("build-image"):
            image = self.ensure_build_image(package.dsc, dsc_text)
        self.summary["build_image"] = image
        env = build_environment(self.options, self.matrix)
        self.summary["environment"] = env
        return package, dsc_text, image, env

    def build_elsewhere(self, out: Path, conditions: BuildConditions, env: dict[str, str] | None = None) -> dict:
        """Build the lane's packages (with its series) again into out under other conditions, bypassing the
        cache (the deb reproducibility check's second build); env replaces the lane's build environment.
        Returns what the build wrote to out/DONE."""
        from . import series_forms

        self.paths.results.mkdir(parents=True, exist_ok=True)
        package, _, image, lane_env = self.build_inputs()
        tmp = Path(tempfile.mkdtemp(prefix=f"cpython-perf-deb-{self.lane.name}-", dir=self._scratch()))
        try:
            form_dir = tmp / "form"
            names = series_forms.write_quilt_form(self.lane.patch_series, form_dir)
            self.build(package.dsc, image, env or lane_env, form_dir, names, out, tmp, conditions)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return json.loads((out / "DONE").read_text())

    def _scratch(self) -> str:
        root = default_cache_root()
        root.mkdir(parents=True, exist_ok=True)
        return str(root)

    def ensure_build_image(self, dsc: Path, dsc_text: str) -> str:
        tag = build_image_tag(self.lane, dsc_text)
        digest = tag.rsplit("-", 1)[1]
        if image_label(tag) == digest:
            self.log(f"build image {tag} exists")
            return tag
        with tempfile.TemporaryDirectory(prefix="cpython-perf-debbuild-", dir=self._scratch()) as tmp:
            tar = Path(tmp) / "rootfs.tar"
            bootstrap_image(host.docker_client(self.log), build_image_command(self.lane, dsc, tar, self.entries),
                            tar, tag, self.log, log_file=self.paths.results / "images.log",
                            labels={INPUTS_LABEL: digest})
        return tag

    def build(self, dsc: Path, image: str, env: dict[str, str], form_dir: Path | None, names: list[str],
              out: Path, tmp: Path, conditions: BuildConditions = AS_BUILT) -> None:
        lane = self.lane
        work = tmp / "work"
        work.mkdir()
        log_file = self.paths.results / "build.log"   # followed live; kept with the packages too
        mounts = {dsc.parent: "/in:ro", work: "/w"}
        src = f"/w/{conditions.src_dir}"
        (work / conditions.src_dir).parent.mkdir(parents=True, exist_ok=True)
        env = {**env, **dict(conditions.env)}
        with build_lock(default_cache_root() / "build.lock", self.log):
            with self.phase("unpack"):
                self._container(image, ["dpkg-source", "-x", f"/in/{dsc.name}", src], mounts, log_file, "unpack")
            with self.phase("prepare"):
                prepared = prepare_tree(work / conditions.src_dir, lane, form_dir, names)
                self.log(f"{lane.name}: {len(prepared.names)} patches appended to debian/patches/series under "
                         f"{PATCH_SUBDIR}/; symbols added to {prepared.symbols_path or '-'}: "
                         f"{', '.join(prepared.symbols_added) or 'none (all present)'}; version {prepared.version}")
            with self.phase("patch"):
                # the series at fuzz 0 as dpkg-buildpackage applies it; a failure names the patch
                self._container(image, ["dpkg-source", "--before-build", "."], mounts, log_file, "patch",
                                workdir=src)
            with self.phase("build"):
                argv = conditions.command(dpkg_buildpackage_command())
                self.log(f"$ {' '.join(f'{k}={shlex.quote(v)}' for k, v in env.items())} "
                         f"{shlex.join(argv)}  (log: {log_file})")
                self._container(image, argv, mounts, log_file, "build", env=env, workdir=src, network=False,
                                options=conditions.docker_options)
        made = (work / conditions.src_dir).parent   # dpkg-buildpackage writes beside the source tree
        changes = sorted(p.name for p in made.glob("*.changes")) + sorted(p.name for p in made.glob("*.buildinfo"))
        debs = sorted(p.name for p in made.glob("*.deb")) + sorted(p.name for p in made.glob("*.udeb"))
        if not debs:
            raise DriverError(f"dpkg-buildpackage made no .deb in {made}")
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        for name in (*debs, *changes):
            shutil.move(str(made / name), out / name)
        shutil.copy2(log_file, out / "build.log")
        flavour = {"environment": env, "with_series": form_dir is not None}
        for old in out.parent.iterdir():   # superseded builds: same options (flavour), other inputs
            try:
                superseded = (old != out and re.fullmatch(r"[0-9a-f]{16}", old.name) is not None
                              and json.loads((old / "DONE").read_text()).get("flavour") == flavour)
            except (OSError, ValueError):
                superseded = False
            if superseded:
                shutil.rmtree(old, ignore_errors=True)
        (out / "DONE").write_text(json.dumps({"flavour": flavour,
            "debs": debs, "changes_files": changes, "version": prepared.version,
            "patches": prepared.names, "symbols_added": prepared.symbols_added,
            "symbols_file": prepared.symbols_path,
            "build_seconds": {k: self.summary["phases"][k] for k in ("unpack", "prepare", "patch", "build")},
            "built_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}, indent=2) + "\n")

    def _container(self, image, argv, mounts, log_file, what, env=None, workdir=None, network=True, options=()):
        name = f"cpython-perf-deb-{self.lane.name}-{what}-{os.getpid()}"
        cmd = docker_run_command(image, argv, mounts=mounts, env=env, workdir=workdir, name=name, network=network,
                                 options=options)
        rc = run_logged(cmd, log_file, name, log=self.log, what=f"{self.lane.name}: {what}")
        if rc != 0:
            raise RuntimeFailure(f"{self.lane.name}: {what} failed (exit {rc}) in {image}; log: {log_file}\n"
                              f"{_tail_of(log_file, 40)}")

    def sizes(self, out: Path, debs: list[str]) -> dict[str, int]:
        return {name: (out / name).stat().st_size for name in debs}

    # -- lintian

    def lintian(self, image: str, out: Path, built: dict, dsc_text: str) -> None:
        lane = self.lane
        changes = next(n for n in built["changes_files"] if n.endswith(".changes"))
        archive_dir = self.paths.cache / f"archive-{lane.package_version}"
        with self.phase("lintian"):
            proc = run_captured(docker_run_command(image, lintian_command(f"/out/{changes}"), user=LINTIAN_USER,
                                                   env={"HOME": "/tmp"}, mounts={out: "/out:ro"}, network=False))
            (self.paths.results / "lintian.txt").write_text(proc.stdout + proc.stderr)
            if proc.returncode != 0:   # with --fail-on none, only a run-time error
                raise DriverError(f"lintian failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
        with self.phase("archive-packages"):
            self.archive_debs(image, archive_dir, binary_packages(dsc_text))
        archive_debs = sorted(p.name for p in archive_dir.glob("*.deb"))
        with self.phase("lintian-archive"):
            proc = run_captured(docker_run_command(
                image, lintian_command(*[f"/a/{n}" for n in archive_debs]), user=LINTIAN_USER,
                env={"HOME": "/tmp"}, mounts={archive_dir: "/a:ro"}, network=False))
            (self.paths.results / "lintian-archive.txt").write_text(proc.stdout + proc.stderr)
            if proc.returncode != 0:
                raise DriverError(f"lintian on the archive's packages failed (exit {proc.returncode}): "
                                  f"{proc.stderr[-2000:]}")
        versions = (built["version"], lane.package_version)
        diff = compare_lintian(parse_lintian((self.paths.results / "lintian.txt").read_text(), versions),
                               parse_lintian((self.paths.results / "lintian-archive.txt").read_text(), versions))
        (self.paths.results / "lintian-diff.txt").write_text(diff.report(built["version"], lane.package_version))
        self.summary["lintian"] = {"new": [str(t) for t in diff.new], "gone": [str(t) for t in diff.gone],
                                   "changed": [f"{b.package}: {b.tag}" for b, _ in diff.changed],
                                   "more": [str(t) for t in diff.more],
                                   "changes_only": [str(t) for t in diff.changes_only],
                                   "baseline": "the archive's binary packages of the same version"}
        self.summary["archive_sizes"] = {n: (archive_dir / n).stat().st_size for n in archive_debs}
        self.log(f"{lane.name}: lintian: {diff.summary()}")

    def archive_debs(self, image: str, archive_dir: Path, names: list[str]) -> None:
        """The archive's binary packages of the lane's exact version (apt verifies them against the signed
        indices), downloaded in the build container, kept in the cache."""
        lane = self.lane
        wanted = [n for n in names if not n.endswith("-udeb")]
        have = {p.name.split("_", 1)[0] for p in archive_dir.glob("*.deb")}
        if archive_dir.is_dir() and set(wanted) <= have:
            return
        archive_dir.mkdir(parents=True, exist_ok=True)
        script = ("apt-get update -qq && for p in " + " ".join(shlex.quote(f"{n}={lane.package_version}")
                                                               for n in wanted)
                  + "; do apt-get download -q \"$p\" || echo \"MISSING $p\"; done")
        proc = run_captured(docker_run_command(image, ["sh", "-c", script], mounts={archive_dir: "/a"},
                                               workdir="/a"))
        missing = re.findall(r"^MISSING (\S+)", proc.stdout, re.M)
        if missing:
            self.log(f"{lane.name}: the archive does not serve {', '.join(missing)}")
        if proc.returncode != 0 or not any(archive_dir.glob("*.deb")):
            raise DriverError(f"downloading the archive's {lane.source_package} {lane.package_version} binaries "
                              f"failed: {(proc.stderr or proc.stdout)[-2000:]}")

    # -- install images and checks

    def install_and_check(self, out: Path, built: dict) -> None:
        lane = self.lane
        wanted = install_packages(lane)
        archive_dir = self.paths.cache / f"archive-{lane.package_version}"
        pick = lambda d, names: [d / n for n in names if n.split("_", 1)[0] in wanted]  # noqa: E731
        built_debs = pick(out, built["debs"])
        if not archive_dir.is_dir():
            image = self.summary["build_image"]
            self.archive_debs(image, archive_dir, wanted)
        archive_debs = pick(archive_dir, sorted(p.name for p in archive_dir.glob("*.deb")))
        for what, debs in (("built", built_debs), ("archive", archive_debs)):
            missing = set(wanted) - {p.name.split("_", 1)[0] for p in debs}
            if missing:
                raise DriverError(f"{lane.name}: no {what} .deb of {', '.join(sorted(missing))}")
        suffix = "" if self.options.with_series else "-baseline"
        suffix += "-release-grade" if self.options.release_grade else ""
        tags = {"built": f"{IMAGE_REPOSITORY}:{lane.name}{suffix}", "archive": f"{IMAGE_REPOSITORY}:{lane.name}-archive"}
        with self.phase("install-images"):
            for what, debs in (("built", built_debs), ("archive", archive_debs)):
                self.ensure_install_image(tags[what], debs)
        self.summary["images"] = tags
        with self.phase("checks"):
            requested = list(self.matrix.regression_tests)
            shipped = {what: run_captured(docker_run_command(tag, shipped_tests_argv(lane.python, requested)))
                       .stdout.split() for what, tag in tags.items()}
            selection = regrtest.select_tests(requested, shipped["built"], shipped["archive"])
            self.log(f"{lane.name}: regrtest: {selection.describe(tags['built'], tags['archive'])}")
            results = {"built": self.check_image(tags["built"], selection.patched_tests),
                       "archive": self.check_image(tags["archive"], selection.vanilla_tests)}
        self.summary["checks"] = {what: {k: v for k, v in r.items() if k != "regrtest_result"}
                                  for what, r in results.items()}
        comparison = regrtest.Comparison(results["built"]["regrtest_result"], results["archive"]["regrtest_result"],
                                         added=selection.added)
        self.summary["regrtest"] = {"summary": comparison.summary(), "new_failures": comparison.new_failures,
                                    "compared": list(selection.compared), "added": list(selection.added),
                                    "not_shipped": list(selection.not_shipped), "dropped": list(selection.dropped),
                                    "added_not_run": comparison.added_not_run}
        self.log(f"{lane.name}: regrtest {comparison.summary()}")
        problems = []
        if self.options.with_series and results["built"]["trampoline_active"] is not True:
            problems.append(f"`{lane.python} -X perf` did not activate the trampoline")
        if not self.options.release_grade and not all(results["built"]["frame_pointer"].values() or [False]):
            problems.append(f"_PyEval_EvalFrameDefault has no frame pointer: {results['built']['frame_pointer']}")
        if comparison.new_failures:
            problems.append(f"regrtest failures the archive's packages do not have: {comparison.new_failures}")
        if comparison.added_not_run:
            problems.append(f"tests the series adds ran no test case: {comparison.added_not_run}")
        if selection.dropped:
            problems.append(f"tests the archive's packages ship and the built ones do not: {list(selection.dropped)}")
        self.summary["problems"] = problems
        self.save()
        if problems:
            raise DriverError(f"{lane.name}: " + "; ".join(problems))

    def ensure_install_image(self, tag: str, debs: list[Path]) -> None:
        digest = hashlib.sha256("\n".join([*self.lane.suites, self.lane.perf_suite, *RUNTIME_TOOLS, PERF_LINK_HOOK,
                                           *(sources.sha256_of(d) for d in debs)]).encode()).hexdigest()
        if image_label(tag) == digest:
            self.log(f"image {tag} is current")
            return
        with tempfile.TemporaryDirectory(prefix="cpython-perf-debinstall-", dir=self._scratch()) as tmp:
            tar = Path(tmp) / "rootfs.tar"
            bootstrap_image(host.docker_client(self.log), install_image_command(self.lane, debs, tar, self.entries),
                            tar, tag, self.log, log_file=self.paths.results / "images.log",
                            labels={INPUTS_LABEL: digest})

    def check_image(self, tag: str, tests: list[str]) -> dict:
        py = self.lane.python
        log_file = self.paths.results / "checks.log"
        result: dict = {"image": tag}
        proc = run_captured(docker_run_command(tag, [py, "-X", "perf", "-c", TRAMPOLINE_CHECK]))
        said = (proc.stdout + proc.stderr).strip()
        result["trampoline_output"] = said[-500:]
        result["trampoline_active"] = proc.stdout.strip() == "True"
        proc = run_captured(docker_run_command(tag, ["sh", "-c", FP_CHECK, "fp-check", py]))
        with open(log_file, "a") as f:
            f.write(f"### {tag}: frame pointer\n{proc.stdout}{proc.stderr}\n")
        result["sysconfig_cflags"] = sysconfig_cflags(proc.stdout)
        result["sysconfig_core_cflags"] = sysconfig_cflags(proc.stdout, "PY_CORE_CFLAGS")
        result["frame_pointer"] = frame_pointer_prologues(proc.stdout)
        result["regrtest_tests"] = tests
        cap = []
        try:
            cap = [containers.perf_capability(host.docker_client(self.log), tag)]
        except Exception as exc:   # perf not permitted: test_perf_profiler skips itself
            self.log(f"{tag}: perf not permitted ({str(exc).splitlines()[0]}); test_perf_profiler will skip")
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="cpython-perf-regrtest-", dir=self._scratch()) as tmp:
            os.chmod(tmp, 0o1777)
            proc = run_captured(docker_run_command(tag, regrtest_argv(py, tests, "/out/junit.xml"),
                                                   mounts={Path(tmp): "/out"}, cap_add=cap, workdir="/tmp"),
                                timeout=4 * REGRTEST_TIMEOUT)
            junit = Path(tmp, "junit.xml").read_text() if Path(tmp, "junit.xml").exists() else ""
        name = tag.split(":", 1)[1]
        (self.paths.results / f"regrtest-{name}.txt").write_text(proc.stdout + proc.stderr)
        (self.paths.results / f"regrtest-{name}-junit.xml").write_text(junit)
        parsed = regrtest.parse_run(junit, proc.stdout + proc.stderr)
        result["regrtest_seconds"] = round(time.monotonic() - started, 1)
        result["regrtest_exit"] = proc.returncode
        result["regrtest"] = {"cases": parsed.cases, "failures": sorted(parsed.failures()),
                              "skipped": parsed.skipped_cases}
        result["regrtest_result"] = parsed
        return result

"""The lane's edits of Debian's unpacked source package: the series' quilt form appended to
debian/patches/series, the perf C API's symbols added to the libpython symbols file where missing, and a
`+perfN` changelog entry dated by the inputs (so two builds of the same inputs are the same)."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..errors import DriverError
from ..matrix import PERF_C_API, Lane

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
MAINTAINER = "cpython-perf project <cpython-perf@users.noreply.github.com>"
PATCH_SUBDIR = "cpython-perf"          # debian/patches/<this>/ (series_forms.DEBIAN_SUBDIR)


def perf_version(package_version: str, revision: int = 1) -> str:
    """The version of the built packages: the archive's, +perfN (sorts right after it; matrix.yaml's
    lanes.<lane>.perf_revision is N, Lane.perf_version)."""
    return f"{package_version}+perf{revision}"


def symbols_version(package_version: str) -> str:
    """The minimal version the added symbols carry in the symbols file: that of the first +perf build of the
    revision (+perf1~), which every later +perfN satisfies too."""
    return package_version + PERF_SUFFIX + SYMBOLS_VERSION_SUFFIX


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

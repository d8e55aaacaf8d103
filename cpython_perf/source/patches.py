"""Patch series: quilt `series` files, DEP-3 headers, and applying them.

A series is applied to a pristine tree after the version's additions (new
whole files from Python-additions/) are copied in, each patch with
`patch -p1 --forward --batch`, exactly as docker/build-cpython.sh does inside
the image.  Applying on the host first turns a patch that no longer applies
into an error naming the patch, the file and the hunk, before Docker starts.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .. import host
from ..errors import PatchFailed
from ..matrix import PROJECT_ROOT

# The whole new files a version adds to CPython's source (matrix.yaml's additions are paths under it)
ADDITIONS_ROOT = PROJECT_ROOT / "Python-additions"
DEP3_REQUIRED = ("Description", "Origin", "Forwarded", "Last-Update")
# DEP-3 allows Subject as an alias of Description.
DEP3_ALIASES = {"Subject": "Description"}


@dataclass(frozen=True)
class Patch:
    name: str
    path: Path


def read_series(series: Path) -> list[Patch]:
    """Patches named by a quilt series file, in order (comments and blank lines skipped)."""
    patches = []
    for lineno, line in enumerate(series.read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name = line.split()[0]
        path = series.parent / name
        if not path.is_file():
            raise PatchFailed(f"{series}:{lineno}: series names {name}, which does not exist in {series.parent}")
        patches.append(Patch(name, path))
    return patches


def dep3_header(patch: Path) -> dict[str, str]:
    """The DEP-3 fields of a patch file (the header ends at the first line starting '---' or 'diff ')."""
    return dep3_header_text(patch.read_text(errors="replace"))


def dep3_header_text(text: str) -> dict[str, str]:
    """The DEP-3 fields of a patch's text (a repeated field keeps its last value)."""
    fields: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        if line.startswith(("---", "diff ", "Index: ")):
            break
        m = re.match(r"([A-Za-z][A-Za-z0-9-]*):\s?(.*)$", line)
        if m:
            key = DEP3_ALIASES.get(m.group(1), m.group(1))
            fields[key] = m.group(2).strip()
        elif key and line.startswith(" "):
            fields[key] += "\n" + line.strip()
    return fields


def missing_dep3_fields(patch: Path) -> list[str]:
    header = dep3_header(patch)
    return [f for f in DEP3_REQUIRED if not header.get(f)]


def dep3_problems(text: str) -> list[str]:
    """What a packager would miss in a patch's DEP-3 header (empty: complete).

    Beyond the required fields: Forwarded is `no`, `not-needed` or a URL, and
    a patch not forwarded says why in a Description paragraph starting
    "Not forwarded"; a patch whose Origin is `backport` or `upstream` says
    where upstream has it (Applied-Upstream); Last-Update is a YYYY-MM-DD date.
    """
    header = dep3_header_text(text)
    problems = [f"no {f} field" for f in DEP3_REQUIRED if not header.get(f)]
    forwarded = header.get("Forwarded", "")
    if forwarded and not (forwarded in ("no", "not-needed") or forwarded.startswith(("http://", "https://"))):
        problems.append(f"Forwarded is {forwarded.splitlines()[0]!r}: DEP-3 wants no, not-needed or a URL "
                        "(put the reason in the Description)")
    if forwarded in ("no", "not-needed") and not re.search(r"^Not forwarded", header.get("Description", ""), re.M):
        problems.append(f"Forwarded: {forwarded} without a Description paragraph starting 'Not forwarded' that says why")
    origin = header.get("Origin", "")
    if origin.split(",")[0].strip() in ("backport", "upstream") and not header.get("Applied-Upstream"):
        problems.append(f"Origin: {origin.split(',')[0]} without Applied-Upstream (the upstream version that has it)")
    if header.get("Last-Update") and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", header["Last-Update"]):
        problems.append(f"Last-Update {header['Last-Update']!r} is not a YYYY-MM-DD date")
    return problems


def copy_additions(additions, additions_root: Path, tree: Path) -> None:
    for rel in additions:
        dest = tree / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(additions_root / rel, dest)


def apply_series(patches: list[Patch], tree: Path) -> None:
    """Apply patches in order to tree; raise PatchFailed naming patch, file and hunk.  patch(1) is installed
    with apt where the driver may set up the host, else its absence is an error saying how to get it."""
    if patches:
        host.ensure_commands({"patch": "patch"})
    for patch in patches:
        proc = subprocess.run(
            ["patch", "-p1", "--forward", "--batch", "--no-backup-if-mismatch", "-r", "-", "-i", str(patch.path)],
            cwd=tree, capture_output=True, text=True,
        )
        if proc.returncode != 0:
            raise PatchFailed(describe_patch_failure(patch, proc.stdout + proc.stderr))


# GNU patch's report of what it did, one line per file and per hunk
_PATCHED_FILE = re.compile(r"^(?:patching|checking) file '?(.+?)'?$")
_HUNK_APPLIED = re.compile(r"Hunk #(\d+) succeeded at (\d+)(?: with fuzz (\d+))?(?: \(offset (-?\d+) lines?\))?\.")
_HUNK_FAILED = re.compile(r"Hunk #(\d+) FAILED at (\d+)")


@dataclass(frozen=True)
class PatchOutput:
    """What patch(1) said it did to each file (read_patch_output)."""

    fuzz: int = 0                    # the largest fuzz a hunk needed
    offsets: tuple[str, ...] = ()    # "FILE #N +K": hunk N applied K lines from where the patch puts it
    failures: tuple[str, ...] = ()   # "FILE: hunk #N FAILED at line L", "FILE: no such file", ...


def read_patch_output(output: str) -> PatchOutput:
    """patch(1)'s output (stdout and stderr) read hunk by hunk."""
    fuzz, offsets, failures = 0, [], []
    current = "?"
    for raw in output.splitlines():
        line = raw.strip()
        m = _PATCHED_FILE.match(line)
        if m:
            current = m.group(1)
            continue
        m = _HUNK_APPLIED.search(line)
        if m:
            if m.group(3):
                fuzz = max(fuzz, int(m.group(3)))
            if m.group(4):
                offsets.append(f"{current} #{m.group(1)} {int(m.group(4)):+d}")
            continue
        m = _HUNK_FAILED.search(line)
        if m:
            failures.append(f"{current}: hunk #{m.group(1)} FAILED at line {m.group(2)}")
        elif "can't find file to patch" in line or "No file to patch" in line:
            failures.append(f"{current}: no such file")
        elif "which already exists" in line:
            failures.append(f"{current}: already exists")
        elif "Reversed (or previously applied) patch detected" in line:
            failures.append(f"{current}: already has the change (reversed or previously applied patch)")
    return PatchOutput(fuzz, tuple(offsets), tuple(failures))


def describe_patch_failure(patch: Patch, output: str) -> str:
    """Turn patch(1)'s output into 'patch X: file Y: hunk #N FAILED at L' lines."""
    failures = read_patch_output(output).failures
    detail = "\n".join(f"  {failure}" for failure in failures) or "\n".join(
        "  " + line for line in output.strip().splitlines()[-8:])
    return (
        f"patch {patch.name} does not apply ({patch.path}):\n{detail}\n"
        f"Refresh it against the pristine source (e.g. `quilt push -f {patch.name}`, fix the rejects, "
        "`quilt refresh`) or drop it from the series."
    )


def check_series_applies(tarball: Path, srcdir: str, additions, additions_root: Path, series: Path | None) -> int:
    """Extract the tarball to a scratch directory and apply the series there.

    Returns the number of patches applied; raises PatchFailed on the first
    that does not apply.  The scratch tree is always removed.
    """
    if series is None and not additions:
        return 0
    return _apply_to_pristine(tarball, srcdir, additions, additions_root, read_series(series) if series else [])


def _apply_to_pristine(tarball: Path, srcdir: str, additions, additions_root: Path, patches: list[Patch]) -> int:
    with tempfile.TemporaryDirectory(prefix="cpython-perf-patchcheck-") as tmp:
        with tarfile.open(tarball) as tar:
            tar.extractall(tmp, filter="tar") if hasattr(tarfile, "data_filter") else tar.extractall(tmp)
        tree = Path(tmp) / srcdir
        copy_additions(additions, additions_root, tree)
        apply_series(patches, tree)
    return len(patches)


@dataclass(frozen=True)
class CheckedSeries:
    """The source stage's value for a cell's patches: the series file, the patches it names in order, the
    additions (whole files from Python-additions/), and how many patches applied to the verified pristine
    source on the host (applied; None: read only, no source at hand: the inputs digest needs only their
    bytes, a build needs them applied first)."""

    series: Path | None
    patches: tuple[Patch, ...]
    additions: tuple[str, ...]
    applied: int | None = None


def read_cell_series(series: Path | None, additions=()) -> CheckedSeries:
    """A cell's series and additions, read and not applied."""
    return CheckedSeries(series, tuple(read_series(series)) if series else (), tuple(additions))


def check_cell_series(read: CheckedSeries, source, additions_root: Path, log=print) -> CheckedSeries:
    """Apply the series (after the additions) to source (a verified sources.VerifiedSource) in a scratch tree:
    a patch that does not apply is a PatchFailed naming it, before Docker starts."""
    if not source.verified:
        raise ValueError(f"{source.recipe.filename} was not fetched and verified: the series is checked on the "
                         "verified source")
    applied = 0
    if read.series is not None or read.additions:
        applied = _apply_to_pristine(source.tarball, source.recipe.srcdir, read.additions, additions_root,
                                     list(read.patches))
    if read.series:
        log(f"series {_shown(read.series)}: {applied} patches apply to {source.recipe.srcdir}")
    return CheckedSeries(read.series, read.patches, read.additions, applied)


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(PROJECT_ROOT))
    except ValueError:
        return str(path)

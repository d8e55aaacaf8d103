"""Apply a version's series to a source a packager supplies and say, patch by patch, how it went.

`python -m cpython_perf check-series VERSION --source PATH` takes

  * a release tarball (.tar.xz, .tgz, .tar.gz, .tar.bz2, .tar): extracted as it is;
  * a Debian source package (.dsc): unpacked with `dpkg-source -x`, which
    checks the files' checksums and applies the package's own patches
    (debian/patches/series), so the series is tried on what a Debian packager
    starts from, after the distribution's patches;
  * an unpacked source tree (a directory): copied, never changed.

The series is taken in its quilt form (lanes/series_forms: for 3.9 and 3.11
the new whole files are its first patch), and each patch, in order, is tried
hunk by hunk with GNU patch, forward and, where that fails, backwards
(`patch -R --dry-run`: the tree already has the change):

  applies          forward at fuzz 0 with every hunk where the patch says
  offset           forward at fuzz 0, some hunks some lines away
  fuzz N           forward only with fuzz N (context lines ignored): dpkg-source
                   and `git am` apply at fuzz 0, so this patch needs a refresh
  already applied  every hunk only backwards: the tree already has the change
                   (upstream took it, or the distribution carries it); drop it
  partly applied   some hunks forward, the others only backwards: the tree has
                   part of the change; refresh the patch to the rest
  FAILS            a hunk neither way: the failed hunks are named (and those
                   the tree already has)

A patch that applies (partly applied too: its missing hunks) is applied
before the next is tried; one that fails leaves the tree as it was, so a
later patch that builds on it may fail too: fix the first failure first.
With --alone each patch is tried on the unpacked source as it is, none
applied: which changes the source already has, whatever happened to the
patches before (a patch whose context is an earlier patch's code cannot
match there, so read its FAILS as "not shown either way").
The exit status is 1 when a patch FAILS, needs fuzz or is partly applied
(none of them would go through dpkg-source or `git am` as it is); a patch
that is already applied as a whole does not count as a failure: the report
says so, and it is dropped.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tarfile
import tempfile
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import host
from ..errors import DriverError, RuntimeFailure
from ..source.patches import read_patch_output

TARBALL_SUFFIXES = (".tar.xz", ".txz", ".tgz", ".tar.gz", ".tar.bz2", ".tbz2", ".tar")
MAX_FUZZ = 2     # GNU patch's own default

APPLIES, OFFSET, FUZZ, ALREADY, PARTLY, FAILS = ("applies", "offset", "fuzz", "already applied", "partly applied",
                                                 "FAILS")


class SourceCheckError(RuntimeFailure):
    """The supplied source cannot be unpacked."""


@dataclass
class PatchResult:
    number: int
    name: str
    status: str                  # APPLIES, OFFSET, FUZZ, ALREADY or FAILS
    fuzz: int = 0                # the largest fuzz a hunk needed
    offsets: list[str] = field(default_factory=list)   # "file hunk #n: +k lines"
    failed: list[str] = field(default_factory=list)    # "file hunk #n"
    note: str = ""

    @property
    def label(self) -> str:
        return f"fuzz {self.fuzz}" if self.status == FUZZ else self.status

    @property
    def is_failure(self) -> bool:
        return self.status in (FAILS, FUZZ, PARTLY)

    def detail(self) -> str:
        parts = []
        if self.failed:
            parts.append("failed: " + ", ".join(self.failed))
        if self.offsets:
            parts.append("offsets: " + ", ".join(self.offsets))
        if self.note:
            parts.append(self.note)
        return "; ".join(parts)


# --------------------------------------------------------------------------
# the source


def source_kind(path: Path) -> str:
    """'dsc', 'tarball' or 'tree' (raises SourceCheckError for anything else)."""
    path = Path(path)
    if path.is_dir():
        return "tree"
    if not path.is_file():
        raise SourceCheckError(f"{path}: no such file or directory")
    if path.name.endswith(".dsc"):
        return "dsc"
    if path.name.endswith(TARBALL_SUFFIXES):
        return "tarball"
    raise SourceCheckError(f"{path}: not a tarball ({', '.join(TARBALL_SUFFIXES)}), a Debian .dsc or a directory")


def unpack(path: Path, where: Path) -> Path:
    """The source tree of path, made inside the (empty, scratch) directory where."""
    path = Path(path).resolve()
    kind = source_kind(path)
    if kind == "tree":
        dest = where / path.name
        shutil.copytree(path, dest, symlinks=True)
        return dest
    if kind == "dsc":
        host.ensure_commands({"dpkg-source": "dpkg-dev"})
        dest = where / "src"
        # checksums of the .dsc's files are checked; its OpenPGP signature only where a keyring has the key
        proc = subprocess.run(["dpkg-source", "-x", str(path), str(dest)], capture_output=True, text=True,
                              cwd=where)
        if proc.returncode != 0:
            tail = "\n  ".join((proc.stderr or proc.stdout).strip().splitlines()[-6:])
            raise SourceCheckError(f"dpkg-source -x {path} failed:\n  {tail}")
        return dest
    try:
        with tarfile.open(path) as tar:
            tops = {name.split("/", 1)[0] for name in tar.getnames() if name not in ("", ".")}
            if hasattr(tarfile, "data_filter"):
                tar.extractall(where, filter="tar")
            else:   # Python < 3.10.12 without extraction filters
                tar.extractall(where)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise SourceCheckError(f"{path}: cannot extract: {exc}") from None
    if len(tops) == 1 and (where / next(iter(tops))).is_dir():
        return where / next(iter(tops))
    return where


@contextmanager
def unpacked(path: Path):
    """The source tree of path in a scratch directory, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="cpython-perf-source-check-") as tmp:
        yield unpack(path, Path(tmp))


# --------------------------------------------------------------------------
# patch(1), one patch at a time

def _patch(tree: Path, patch: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["patch", "-p1", "--batch", "--no-backup-if-mismatch", "-r", "-", *args, "-i", str(patch)],
                          cwd=tree, capture_output=True, text=True)


def split_hunks(text: str) -> list[tuple[str, str]]:
    """(label, one-hunk patch) for every hunk of a patch: each file's header lines with one of its hunks
    (a diff that creates or deletes a file is one unit).  Hunks of a diff never overlap, so each can be
    tried on its own."""
    units: list[tuple[str, str]] = []
    header: list[str] = []
    hunk: list[str] = []
    path, number = "?", 0
    in_header = False

    def flush():
        if hunk:
            units.append((f"{path} #{number}", "".join(header + hunk)))

    for line in text.splitlines(keepends=True):
        if line.startswith("diff ") or (line.startswith("--- ") and not in_header and not hunk_open(hunk)):
            flush()
            hunk = []
            header = [line]
            in_header = True
            number = 0
            continue
        if in_header and not line.startswith("@@"):
            header.append(line)
            if line.startswith("+++ "):
                name = line[4:].split("\t")[0].strip()
                path = name[2:] if name.startswith(("a/", "b/")) else name
            elif line.startswith("--- ") and path == "?":
                pass
            continue
        if line.startswith("@@"):
            flush()
            in_header = False
            number += 1
            hunk = [line]
            continue
        if hunk:
            hunk.append(line)
    flush()
    return units


def hunk_open(hunk: list[str]) -> bool:
    """Whether the hunk being read still expects lines (its @@ counts not yet used up)."""
    if not hunk:
        return False
    m = re.match(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@", hunk[0])
    if not m:
        return False
    old = int(m.group(1)) if m.group(1) is not None else 1
    new = int(m.group(2)) if m.group(2) is not None else 1
    for line in hunk[1:]:
        if line.startswith(" "):
            old, new = old - 1, new - 1
        elif line.startswith("-"):
            old -= 1
        elif line.startswith("+"):
            new -= 1
    return old > 0 or new > 0


def check_one(tree: Path, number: int, name: str, patch: Path, max_fuzz: int = MAX_FUZZ,
              apply: bool = True) -> PatchResult:
    """Try every hunk of patch on tree, forward and else backwards; apply the patch's hunks that apply
    forward when none fails (and apply is true); classify the patch."""
    text = patch.read_text(errors="replace")
    units = split_hunks(text)
    fuzz, offsets, failed, already, forward_units = 0, [], [], [], []
    scratch = patch.with_name(patch.name + ".hunk")
    for label, unit in units:
        scratch.write_text(unit)
        forward = _patch(tree, scratch, "--forward", "--dry-run", f"--fuzz={max_fuzz}")
        if forward.returncode == 0:
            said = read_patch_output(forward.stdout + forward.stderr)
            fuzz = max(fuzz, said.fuzz)
            offsets += [f"{label} {x.rsplit(' ', 1)[1]}" for x in said.offsets]
            forward_units.append(unit)
            continue
        reverse = _patch(tree, scratch, "--reverse", "--forward", "--dry-run", f"--fuzz={max_fuzz}")
        if reverse.returncode == 0:
            already.append(label)
        else:
            failed.append(label)
    scratch.unlink(missing_ok=True)
    if not units:
        return PatchResult(number, name, FAILS, failed=["no hunk found in the patch"])
    if failed:
        note = f"{len(already)} of {len(units)} hunks already in the tree: {', '.join(already)}" if already else ""
        return PatchResult(number, name, FAILS, failed=failed, offsets=offsets, note=note)
    if not forward_units:
        return PatchResult(number, name, ALREADY, note=f"all {len(units)} hunks reverse-apply")
    if not apply:
        status = PARTLY if already else (FUZZ if fuzz else (OFFSET if offsets else APPLIES))
        note = f"{len(already)} of {len(units)} hunks already in the tree: {', '.join(already)}" if already else ""
        return PatchResult(number, name, status, fuzz=fuzz, offsets=offsets, note=note)
    # apply what applies forward (all of the patch, or the hunks the tree does not have yet)
    scratch.write_text(text if not already else "".join(forward_units))
    done = _patch(tree, scratch, "--forward", f"--fuzz={max_fuzz}")
    scratch.unlink(missing_ok=True)
    if done.returncode != 0:   # the hunks passed one by one and not together: report it, never hide it
        return PatchResult(number, name, FAILS, failed=["each hunk applies alone, not all together"],
                           note=" | ".join((done.stdout + done.stderr).strip().splitlines()[-3:]))
    if already:
        return PatchResult(number, name, PARTLY, fuzz=fuzz, offsets=offsets,
                           note=f"{len(already)} of {len(units)} hunks already in the tree: {', '.join(already)}")
    status = FUZZ if fuzz else (OFFSET if offsets else APPLIES)
    return PatchResult(number, name, status, fuzz=fuzz, offsets=offsets)


def check_patches(named: list[tuple[str, str]], tree: Path, max_fuzz: int = MAX_FUZZ,
                  alone: bool = False) -> list[PatchResult]:
    """Each (name, text) in order against tree: patches that apply are applied before the next is tried,
    or (alone) each is tried on the tree as it is, nothing applied."""
    host.ensure_commands({"patch": "patch"})
    results = []
    with tempfile.TemporaryDirectory(prefix="cpython-perf-patch-") as tmp:
        for number, (name, text) in enumerate(named, 1):
            path = Path(tmp) / name
            path.write_text(text)
            results.append(check_one(tree, number, name, path, max_fuzz, apply=not alone))
    return results


def check_source(named: list[tuple[str, str]], source: Path, max_fuzz: int = MAX_FUZZ,
                 alone: bool = False) -> list[PatchResult]:
    with unpacked(source) as tree:
        return check_patches(named, tree, max_fuzz, alone)


# --------------------------------------------------------------------------
# the report


def summary(results: list[PatchResult]) -> str:
    counts: dict[str, int] = {}
    for r in results:
        key = "fuzz" if r.status == FUZZ else r.status
        counts[key] = counts.get(key, 0) + 1
    order = (APPLIES, OFFSET, "fuzz", ALREADY, PARTLY, FAILS)
    return ", ".join(f"{counts[k]} {k}" for k in order if counts.get(k))


def table(results: list[PatchResult]) -> str:
    """A plain-text table: one line per patch, the detail wrapped under it."""
    width = max((len(r.name) for r in results), default=5)
    lines = [f"{'#':>3}  {'patch':<{width}}  result           detail", f"{'-' * 3}  {'-' * width}  ---------------  ------"]
    for r in results:
        lines.append(f"{r.number:>3}  {r.name:<{width}}  {r.label:<15}  {r.detail()}".rstrip())
    return "\n".join(lines)


def as_json(results: list[PatchResult], source: Path, version: str) -> str:
    return json.dumps({"version": version, "source": str(source), "summary": summary(results),
                       "patches": [dict(asdict(r), label=r.label) for r in results]}, indent=2)


def exit_status(results: list[PatchResult]) -> int:
    return 1 if any(r.is_failure for r in results) else 0


def describe_source(path: Path) -> str:
    kind = source_kind(path)
    if kind == "dsc":
        return f"{path} (Debian source package: unpacked with dpkg-source -x, Debian's own patches applied)"
    if kind == "tarball":
        return f"{path} (tarball, as extracted)"
    return f"{path} (source tree, copied)"


def version_argument(matrix, name: str):
    """The series to check: a version with a series (3.13) or a cell's (3.13-fp)."""
    if name in matrix.series:
        return matrix.series_of(name)
    cell = matrix.cell(name)
    if cell.version not in matrix.series:
        raise DriverError(f"cell {name} carries no series (its version {cell.version} has none)")
    return matrix.series_of(cell.version)

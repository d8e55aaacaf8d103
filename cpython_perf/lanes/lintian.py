"""lintian on the built packages and on the archive's packages of the same version, the tags compared with
the version normalised: what the series brings that the archive's build does not have."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DriverError
from .archive_binaries import archive_dir, download_archive_debs
from .docker_run import docker_run_command, run_captured
from .source_packages import binary_packages


def lintian_command(*paths: str) -> list[str]:
    """lintian on a .changes (binaries, .buildinfo, .changes) or on .debs: every tag, none hidden."""
    return ["lintian", "--display-info", "--display-experimental", "--pedantic", "--tag-display-limit", "0",
            "--fail-on", "none", *paths]


LINTIAN_USER = "65534:65534"   # nobody: lintian warns against running as root

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


def run_lintian(record, image: str, out: Path, built: dict, dsc_text: str) -> None:
    """The lintian phases of a run (record: run_record.RunRecord): lintian on the .changes in the build image,
    the archive's binary packages downloaded and linted too, the comparison into the results."""
    lane, results = record.lane, record.paths.results
    changes = next(n for n in built["changes_files"] if n.endswith(".changes"))
    archive = archive_dir(record.paths.cache, lane)
    with record.phase("lintian"):
        proc = run_captured(docker_run_command(image, lintian_command(f"/out/{changes}"), user=LINTIAN_USER,
                                               env={"HOME": "/tmp"}, mounts={out: "/out:ro"}, network=False))
        (results / "lintian.txt").write_text(proc.stdout + proc.stderr)
        if proc.returncode != 0:   # with --fail-on none, only a run-time error
            raise DriverError(f"lintian failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    with record.phase("archive-packages"):
        download_archive_debs(lane, image, archive, binary_packages(dsc_text), record.log)
    archive_debs = sorted(p.name for p in archive.glob("*.deb"))
    with record.phase("lintian-archive"):
        proc = run_captured(docker_run_command(
            image, lintian_command(*[f"/a/{n}" for n in archive_debs]), user=LINTIAN_USER,
            env={"HOME": "/tmp"}, mounts={archive: "/a:ro"}, network=False))
        (results / "lintian-archive.txt").write_text(proc.stdout + proc.stderr)
        if proc.returncode != 0:
            raise DriverError(f"lintian on the archive's packages failed (exit {proc.returncode}): "
                              f"{proc.stderr[-2000:]}")
    versions = (built["version"], lane.package_version)
    diff = compare_lintian(parse_lintian((results / "lintian.txt").read_text(), versions),
                           parse_lintian((results / "lintian-archive.txt").read_text(), versions))
    (results / "lintian-diff.txt").write_text(diff.report(built["version"], lane.package_version))
    record.summary["lintian"] = {"new": [str(t) for t in diff.new], "gone": [str(t) for t in diff.gone],
                                 "changed": [f"{b.package}: {b.tag}" for b, _ in diff.changed],
                                 "more": [str(t) for t in diff.more],
                                 "changes_only": [str(t) for t in diff.changes_only],
                                 "baseline": "the archive's binary packages of the same version"}
    record.summary["archive_sizes"] = {n: (archive / n).stat().st_size for n in archive_debs}
    record.log(f"{lane.name}: lintian: {diff.summary()}")

"""The lane's images, bootstrapped with mmdebstrap from this machine's archive: the build image (the tools
and the .dsc's build dependencies: the build needs no network) and the two checking images (the built
packages, and the archive's of the same version, each with linux-perf); their tags and commands."""

from __future__ import annotations

import hashlib
import shlex
import tempfile
from pathlib import Path

from .. import host
from ..image.bootstrap import bootstrap_image
from ..image.labels import INPUTS_LABEL
from ..matrix import Distribution, Lane
from ..source import sources
from .docker_run import image_label
from .run_record import DebOptions, run_suffix, scratch_dir
from .source_packages import dsc_field, entry_for

BUILD_TOOLS = ("build-essential", "dpkg-dev", "devscripts", "fakeroot", "lintian", "quilt", "ca-certificates")
RUNTIME_TOOLS = ("binutils", "procps", "ca-certificates", "gcc", "libc6-dev")   # cc: the suite's C checks
BUILD_IMAGE_REPOSITORY = "cpython-perf-debbuild"
IMAGE_REPOSITORY = "cpython-perf-deb"
MMDEBSTRAP_DEB_HOOK = "/usr/share/mmdebstrap/hooks/file-mirror-automount"


def archive_lines(distribution: Distribution, suites, entries: dict[str, dict]) -> list[str]:
    """One-line apt entries for mmdebstrap: each suite from this machine's archive of the distribution (a
    security suite from its security archive); the keyring is the host's, as mmdebstrap uses it."""
    return [f"deb {entry_for(distribution, suite, entries)['uri']} {suite} main" for suite in dict.fromkeys(suites)]


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
            lane.suite, str(tar), *archive_lines(lane.distribution, lane.suites, entries)]


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
            lane.suite, str(tar), *archive_lines(lane.distribution, [*lane.suites, lane.perf_suite], entries)]


def install_image_tags(lane: Lane, options: DebOptions) -> dict[str, str]:
    """The checking images: "built" (the run's packages; -baseline, -release-grade as the run is) and
    "archive" (the archive's packages of the same version)."""
    return {"built": f"{IMAGE_REPOSITORY}:{lane.name}{run_suffix(options)}",
            "archive": f"{IMAGE_REPOSITORY}:{lane.name}-archive"}


def ensure_build_image(record, dsc: Path, dsc_text: str, entries: dict[str, dict]) -> str:
    """The lane's build image (record: run_record.RunRecord), bootstrapped unless one of these inputs exists."""
    tag = build_image_tag(record.lane, dsc_text)
    digest = tag.rsplit("-", 1)[1]
    if image_label(tag) == digest:
        record.log(f"build image {tag} exists")
        return tag
    with tempfile.TemporaryDirectory(prefix="cpython-perf-debbuild-", dir=scratch_dir()) as tmp:
        tar = Path(tmp) / "rootfs.tar"
        bootstrap_image(host.docker_client(record.log), build_image_command(record.lane, dsc, tar, entries),
                        tar, tag, record.log, log_file=record.paths.results / "images.log",
                        labels={INPUTS_LABEL: digest})
    return tag


def ensure_install_image(record, tag: str, debs: list[Path], entries: dict[str, dict]) -> None:
    """A checking image with debs installed, bootstrapped unless the image of the same inputs exists."""
    lane = record.lane
    digest = hashlib.sha256("\n".join([*lane.suites, lane.perf_suite, *RUNTIME_TOOLS, PERF_LINK_HOOK,
                                       *(sources.sha256_of(d) for d in debs)]).encode()).hexdigest()
    if image_label(tag) == digest:
        record.log(f"image {tag} is current")
        return
    with tempfile.TemporaryDirectory(prefix="cpython-perf-debinstall-", dir=scratch_dir()) as tmp:
        tar = Path(tmp) / "rootfs.tar"
        bootstrap_image(host.docker_client(record.log), install_image_command(lane, debs, tar, entries),
                        tar, tag, record.log, log_file=record.paths.results / "images.log",
                        labels={INPUTS_LABEL: digest})

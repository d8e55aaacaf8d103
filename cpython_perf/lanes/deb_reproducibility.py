"""Are a deb lane's packages reproducible?  Debian's own build of the lane, twice, under different conditions.

`python -m cpython_perf deb-reproducibility LANE` (`nox -s deb-reproducibility-<lane>`):

  a  the lane's packages as `deb LANE` builds them (Debian's rules, the series appended; the cache's packages
     when its inputs are current, built otherwise);
  b  the same inputs built again, later, in a fresh container under what reprotest varies by default
     (VARIATION): umask 0002, another locale, LANGUAGE and time zone, another HOME, PATH with one more
     directory, an extra environment variable, another host and domain name, the kernel version uname reports
     (setarch --uname-2.6) and one CPU (the container on CPU 0, DEB_BUILD_OPTIONS parallel=1; --same-cpus
     keeps a's); with --other-build-path another build directory too.

The build directory is an input, as for the cell images (cpython_perf/image/reproducibility.py): CPython
records it (sysconfig's abs_builddir and the installed Makefile), and the objects `dtrace -G` compiles for the
SystemTap probes name it in their debug information, since dtrace compiles them without the build's
-ffile-prefix-map; the build IDs cover that debug information.  The lanes always build in /w/src.  What
--other-build-path changes is reported with those reasons (BUILD_PATH_DIFFERENCES).

Not varied, and why: the file order of the build tree (reprotest's disorderfs needs FUSE in the container),
address space randomisation (Docker's default seccomp profile refuses personality(ADDR_NO_RANDOMIZE)), the
user and group (both builds run as root, as the lane's do) and the clock (b is simply built later; faketime is
not in the build image).

Each .deb of a is compared with b's of the same name by sha256: the same is "identical".  A pair that differs
is read member by member as the archive stores it (the data and the control members; unpacked trees showed the
unpacking's own times on their top directory and on four directories of bookworm-3.11's doc package), every path
whose contents, mode, owner, link target or modification time differ is listed in
results/deb-reproducibility/<lane>/summary.json, and diffoscope explains the files (diffoscope.txt).  The
check exits 1 on a difference without a known reason (with --other-build-path, the build directory's, above).
The scratch trees and b's packages are removed afterwards; a's stay in the lane's cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

from .. import host
from ..image import reproducibility
from ..errors import RuntimeFailure
from ..matrix import PROJECT_ROOT, Lane, Matrix
from ..source import sources
from .deb_build import BuildConditions, build_environment
from .lane_run import LaneRun
from .run_record import DebOptions, default_cache_root

RESULTS_ROOT = PROJECT_ROOT / "results" / "deb-reproducibility"
CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# reprotest's defaults for its `environment`, `home`, `exec_path`, `locales`, `timezone` variations
VARIED_ENV = (("CAPTURE_ENVIRONMENT", "i_capture_the_environment"),
              ("HOME", "/nonexistent/second-build"),
              ("PATH", CONTAINER_PATH + ":/i_capture_the_path"),
              ("LANG", "C.UTF-8"), ("LC_ALL", "C.UTF-8"), ("LANGUAGE", "fr_CH:fr"),
              ("TZ", "Etc/GMT-14"))
OTHER_BUILD_PATH = "cpython-perf-reprotest/other-build-path/src"   # build_path (under /w)
VARIATION = BuildConditions(
    env=VARIED_ENV,
    umask="0002",                                                # umask (a: the container's 0022)
    docker_options=("--hostname", "i-capture-the-hostname",      # domain_host
                    "--domainname", "i-capture-the-domainname"),
    wrapper=("setarch", "--uname-2.6"))                          # kernel
ONE_CPU = ("--cpuset-cpus", "0")                                 # num_cpus
# What another build directory changes (--other-build-path), as measured on bookworm-3.11: fnmatch patterns of
# "<package>.deb/<path in the package>", each with its reason.  A difference not listed fails the check.
_DEBUG_INFO = ("the objects dtrace -G compiles for the SystemTap probes name the build directory in their "
               "debug information (DW_AT_comp_dir: dtrace compiles them without the build's -ffile-prefix-map)")
BUILD_PATH_DIFFERENCES: dict[str, str] = {
    "*.deb/usr/lib/python3.*/_sysconfigdata_*.py":
        "sysconfig records the build directory (abs_builddir, abs_srcdir, RUNSHARED and the paths made from them)",
    "*.deb/usr/lib/python3.*/config-3.*/Makefile": "the installed Makefile records the build directory",
    "*.deb/usr/lib/debug/.build-id/*": f"debug files are named by build ID, which covers the debug information: {_DEBUG_INFO}",
    "*.deb/usr/bin/python3.*": f"the build ID and .gnu_debuglink cover the debug information: {_DEBUG_INFO}",
    "*.deb/usr/lib/*/libpython3.*.so.*": f"the build ID and .gnu_debuglink cover the debug information: {_DEBUG_INFO}",
    "*.deb/usr/lib/python3.*/config-3.*/libpython3.*.a": _DEBUG_INFO,
    "*-dbg_*.deb/DEBIAN/control": "Build-Ids: the build IDs above",
    "*.deb/DEBIAN/md5sums": "the checksums of the package's files, some of which differ (above)",
}


def variation(same_cpus: bool = False, other_build_path: bool = False) -> BuildConditions:
    return dataclasses.replace(VARIATION, src_dir=OTHER_BUILD_PATH if other_build_path else VARIATION.src_dir,
                               docker_options=VARIATION.docker_options + (() if same_cpus else ONE_CPU))


def known_reason(path: str, other_build_path: bool) -> str | None:
    return reproducibility.reason_for(path, BUILD_PATH_DIFFERENCES) if other_build_path else None


def unpack_deb(deb: Path, dest: Path) -> None:
    """The package's data and control members as a tree (dpkg-deb -R: DEBIAN/ holds the control member)."""
    proc = subprocess.run(["dpkg-deb", "-R", str(deb), str(dest)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeFailure(f"dpkg-deb -R {deb} failed: {proc.stderr.strip()[-1000:]}")


def _member_entries(tar_bytes: bytes, prefix: str = "") -> dict[str, reproducibility.Entry]:
    """Each member of a package's tar member as stored: its kind, mode, owner, time and content digest."""
    entries = {}
    with tarfile.open(fileobj=io.BytesIO(tar_bytes), mode="r:") as tar:
        for member in tar:
            path = prefix + (member.name[2:] if member.name.startswith("./") else member.name).rstrip("/")
            if member.isdir():
                kind, digest = "dir", ""
            elif member.issym() or member.islnk():
                kind, digest = ("symlink" if member.issym() else "hardlink"), member.linkname
            else:
                kind, digest = "file", hashlib.sha256(tar.extractfile(member).read()).hexdigest()
            entries[path or "."] = reproducibility.Entry(kind, member.mode & 0o7777, f"{member.uid}:{member.gid}",
                                                         int(member.mtime), digest)
    return entries


def archive_listing(deb: Path) -> dict[str, reproducibility.Entry]:
    """The package's members as dpkg-deb stored them (the data member's paths, the control member's under
    DEBIAN/), read from the archive itself: an unpacked tree would show the unpacking's own directory times."""
    listing = {}
    for option, prefix in (("--fsys-tarfile", ""), ("--ctrl-tarfile", "DEBIAN/")):
        proc = subprocess.run(["dpkg-deb", option, str(deb)], capture_output=True)
        if proc.returncode != 0:
            raise RuntimeFailure(f"dpkg-deb {option} {deb} failed: {proc.stderr.decode(errors='replace')[-1000:]}")
        entries = _member_entries(proc.stdout, prefix)
        if prefix:
            entries.pop(prefix + ".", None)
        listing.update(entries)
    return listing


def compare_packages(a: Path, b: Path, a_debs: list[str], b_debs: list[str], scratch: Path) -> dict:
    """Each .deb of a against b's of the same name -> {"packages": {name: sha256s and verdict},
    "differences": [{"path": "<deb>/<path in the package>", "what": [...]}, ...]}; differing packages are left
    unpacked under scratch/a/<deb>/ and scratch/b/<deb>/ (the paths' roots)."""
    packages, differences = {}, []
    for name in sorted(set(a_debs) | set(b_debs)):
        if name not in a_debs or name not in b_debs:
            differences.append({"path": name, "what": ["only in " + ("b" if name not in a_debs else "a")]})
            packages[name] = {"identical": False}
            continue
        sha = {"a": sources.sha256_of(a / name), "b": sources.sha256_of(b / name)}
        packages[name] = {"sha256": sha, "identical": sha["a"] == sha["b"]}
        if sha["a"] == sha["b"]:
            continue
        for which, root in (("a", a), ("b", b)):   # for diffoscope
            (scratch / which).mkdir(parents=True, exist_ok=True)
            unpack_deb(root / name, scratch / which / name)
        inside = reproducibility.compare(archive_listing(a / name), archive_listing(b / name))
        for d in inside:
            d["path"] = f"{name}/{d['path']}"
        if not inside:   # the same members, another ar container (member times, order)
            inside = [{"path": name, "what": ["archive container"]}]
        differences += inside
    return {"packages": packages, "differences": differences}


def run(lane: Lane, matrix: Matrix, log=print, out: Path | None = None, same_cpus: bool = False,
        other_build_path: bool = False) -> dict:
    """Build lane twice (a: as `deb` builds it; b: VARIATION), compare their .debs; return (and write) the summary
    ("unexplained": the differing paths without a known reason)."""
    out = Path(out or RESULTS_ROOT / lane.name)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    host.ensure_commands({"dpkg-deb": "dpkg"}, log)
    conditions = variation(same_cpus, other_build_path)
    env_b = build_environment(DebOptions() if same_cpus else DebOptions(jobs=1), matrix)
    summary: dict = {"lane": lane.name, "package_version": lane.package_version, "seconds": {}, "variation": {
        "a": "the lane's own build (`deb`; the cache's packages when its inputs are current)",
        "b": {"build_dir": f"/w/{conditions.src_dir}", "umask": conditions.umask, "environment": dict(conditions.env),
              "docker_run": list(conditions.docker_options), "wrapper": list(conditions.wrapper),
              "DEB_BUILD_OPTIONS": env_b["DEB_BUILD_OPTIONS"], "time": "built after a"},
        "not_varied": {"fileordering": "disorderfs needs FUSE in the build container",
                       "aslr": "Docker's default seccomp profile refuses personality(ADDR_NO_RANDOMIZE)",
                       "user_group": "both builds run as root, as the lane's do",
                       "time": "no faketime in the build image: b is built later instead"}}}
    default_cache_root().mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"cpython-perf-deb-repro-{lane.name}-", dir=default_cache_root()))
    try:
        # both builds keep their logs and summaries out of results/deb/<lane>/, which stays the lane's last `deb` run
        started = time.monotonic()
        log(f"== build a: {lane.name} as `deb` builds it")
        a_run = LaneRun(lane, matrix, DebOptions(checks=False, lintian=False), log=log,
                        results_root=scratch / "results-a")
        a_summary = a_run.run()
        summary["seconds"]["a"] = round(time.monotonic() - started, 1)
        summary["a_build_seconds"] = a_summary.get("build_seconds")
        a_dir = Path(a_summary["packages_dir"])
        a_done = json.loads((a_dir / "DONE").read_text())
        shutil.copy2(a_dir / "build.log", out / "build-a.log")
        started = time.monotonic()
        log(f"== build b: {lane.name} again, varied ({json.dumps(summary['variation']['b'])})")
        b_run = LaneRun(lane, matrix, DebOptions(checks=False, lintian=False), log=log,
                        results_root=scratch / "results-b")
        b_done = b_run.build_elsewhere(scratch / "b-packages", conditions, env_b)
        summary["seconds"]["b"] = round(time.monotonic() - started, 1)
        shutil.copy2(scratch / "b-packages" / "build.log", out / "build-b.log")
        result = compare_packages(a_dir, scratch / "b-packages", a_done["debs"], b_done["debs"], scratch / "trees")
        for d in result["differences"]:
            d["reason"] = known_reason(d["path"], other_build_path)
        summary.update(result)
        summary["identical"] = not result["differences"]
        summary["unexplained"] = [d["path"] for d in result["differences"] if not d["reason"]]
        if result["differences"]:
            summary["diffoscope"] = reproducibility.explain_with_diffoscope(
                scratch / "trees" / "a", scratch / "trees" / "b", result["differences"], out, log)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    same = sum(1 for p in summary["packages"].values() if p["identical"])
    log(f"{lane.name}: {same} of {len(summary['packages'])} packages identical"
        + ("" if summary["identical"] else f"; {len(summary['differences'])} paths differ, "
                                            f"{len(summary['unexplained'])} without a known reason")
        + f" ({out / 'summary.json'})")
    reproducibility.log_differences(summary["differences"], log)
    return summary

"""Are a deb lane's packages reproducible?  Debian's own build of the lane, twice, under different conditions.

`python -m cpython_perf deb-reproducibility LANE` (`nox -s deb-reproducibility-<lane>`):

  a  the lane's packages as `deb LANE` builds them (Debian's rules, the series appended; the cache's packages
     when its inputs are current, built otherwise);
  b  the same inputs built again, later, in a fresh container under what reprotest varies by default
     (VARIATION): another build path, umask 0002, another locale, LANGUAGE and time zone, another HOME, PATH
     with one more directory, an extra environment variable, another host and domain name, the kernel version
     uname reports (setarch --uname-2.6) and one CPU (the container on CPU 0, DEB_BUILD_OPTIONS parallel=1;
     --same-cpus keeps a's).

Not varied, and why: the file order of the build tree (reprotest's disorderfs needs FUSE in the container),
address space randomisation (Docker's default seccomp profile refuses personality(ADDR_NO_RANDOMIZE)), the
user and group (both builds run as root, as the lane's do) and the clock (b is simply built later; faketime is
not in the build image).

Each .deb of a is compared with b's of the same name by sha256: the same is "identical".  A pair that differs
is unpacked (dpkg-deb -R: the data and the control members), every path whose contents, mode, owner, link
target or modification time differ is listed in results/deb-reproducibility/<lane>/summary.json, and
diffoscope explains the files (diffoscope.txt).  The check exits 1 on any difference: Debian's build of these
source packages is reproducible (its reproducible-builds results), so a difference is the series' or this
project's to fix.  The scratch trees and b's packages are removed afterwards; a's stay in the lane's cache.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from .. import host
from ..build import reproducibility
from ..errors import RuntimeFailure
from ..matrix import PROJECT_ROOT, DistroLane, Matrix
from .deb_build import BuildConditions, DebOptions, LaneRun, build_environment, default_cache_root

RESULTS_ROOT = PROJECT_ROOT / "results" / "deb-reproducibility"
CONTAINER_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# reprotest's defaults for its `environment`, `home`, `exec_path`, `locales`, `timezone` variations
VARIED_ENV = (("CAPTURE_ENVIRONMENT", "i_capture_the_environment"),
              ("HOME", "/nonexistent/second-build"),
              ("PATH", CONTAINER_PATH + ":/i_capture_the_path"),
              ("LANG", "C.UTF-8"), ("LC_ALL", "C.UTF-8"), ("LANGUAGE", "fr_CH:fr"),
              ("TZ", "Etc/GMT-14"))
VARIATION = BuildConditions(
    src_dir="cpython-perf-reprotest/other-build-path/src",       # build_path
    env=VARIED_ENV,
    umask="0002",                                                # umask (a: the container's 0022)
    docker_options=("--hostname", "i-capture-the-hostname",      # domain_host
                    "--domainname", "i-capture-the-domainname"),
    wrapper=("setarch", "--uname-2.6"))                          # kernel
ONE_CPU = ("--cpuset-cpus", "0")                                 # num_cpus


def variation(same_cpus: bool = False) -> BuildConditions:
    if same_cpus:
        return VARIATION
    return BuildConditions(VARIATION.src_dir, VARIATION.env, VARIATION.umask,
                           VARIATION.docker_options + ONE_CPU, VARIATION.wrapper)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def unpack_deb(deb: Path, dest: Path) -> None:
    """The package's data and control members as a tree (dpkg-deb -R: DEBIAN/ holds the control member)."""
    proc = subprocess.run(["dpkg-deb", "-R", str(deb), str(dest)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeFailure(f"dpkg-deb -R {deb} failed: {proc.stderr.strip()[-1000:]}")


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
        sha = {"a": sha256_file(a / name), "b": sha256_file(b / name)}
        packages[name] = {"sha256": sha, "identical": sha["a"] == sha["b"]}
        if sha["a"] == sha["b"]:
            continue
        for which, root in (("a", a), ("b", b)):
            (scratch / which).mkdir(parents=True, exist_ok=True)
            unpack_deb(root / name, scratch / which / name)
        inside = reproducibility.compare(reproducibility.listing(scratch / "a" / name),
                                         reproducibility.listing(scratch / "b" / name))
        for d in inside:
            d["path"] = f"{name}/{d['path']}"
        if not inside:   # the same members, another ar container (member times, order)
            inside = [{"path": name, "what": ["archive container"]}]
        differences += inside
    return {"packages": packages, "differences": differences}


def run(lane: DistroLane, matrix: Matrix, log=print, out: Path | None = None, same_cpus: bool = False) -> dict:
    """Build lane twice (a: as `deb` builds it; b: VARIATION), compare their .debs; return (and write) the summary."""
    out = Path(out or RESULTS_ROOT / lane.name)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    host.ensure_commands({"dpkg-deb": "dpkg"}, log)
    conditions = variation(same_cpus)
    env_b = build_environment(DebOptions(jobs=1 if not same_cpus else DebOptions().jobs), matrix)
    summary: dict = {"lane": lane.name, "package_version": lane.package_version, "seconds": {}, "variation": {
        "a": "the lane's own build (`deb`; the cache's packages when its inputs are current)",
        "b": {"build_dir": f"/w/{conditions.src_dir}", "umask": conditions.umask, "environment": dict(conditions.env),
              "docker_run": list(conditions.docker_options), "wrapper": list(conditions.wrapper),
              "DEB_BUILD_OPTIONS": env_b["DEB_BUILD_OPTIONS"], "time": "built after a"},
        "not_varied": {"fileordering": "disorderfs needs FUSE in the build container",
                       "aslr": "Docker's default seccomp profile refuses personality(ADDR_NO_RANDOMIZE)",
                       "user_group": "both builds run as root, as the lane's do",
                       "time": "no faketime in the build image: b is built later instead"}}}
    started = time.monotonic()
    log(f"== build a: {lane.name} as `deb` builds it")
    a_run = LaneRun(lane, matrix, DebOptions(checks=False, lintian=False), log=log)
    a_summary = a_run.run()
    summary["seconds"]["a"] = round(time.monotonic() - started, 1)
    summary["a_build_seconds"] = a_summary.get("build_seconds")
    a_dir = Path(a_summary["packages_dir"])
    a_done = json.loads((a_dir / "DONE").read_text())
    default_cache_root().mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"cpython-perf-deb-repro-{lane.name}-", dir=default_cache_root()))
    try:
        started = time.monotonic()
        log(f"== build b: {lane.name} again, varied ({json.dumps(summary['variation']['b'])})")
        b_run = LaneRun(lane, matrix, DebOptions(checks=False, lintian=False), log=log,
                        results_root=scratch / "results")
        b_done = b_run.build_elsewhere(scratch / "b-packages", conditions, env_b)
        summary["seconds"]["b"] = round(time.monotonic() - started, 1)
        shutil.copy2(scratch / "b-packages" / "build.log", out / "build-b.log")
        result = compare_packages(a_dir, scratch / "b-packages", a_done["debs"], b_done["debs"], scratch / "trees")
        summary.update(result)
        summary["identical"] = not result["differences"]
        if result["differences"]:
            host.ensure_commands({"diffoscope": "diffoscope-minimal"}, log)
            report = out / "diffoscope.txt"
            log(f"diffoscope on the files that differ (report: {report})")
            shown = reproducibility.diffoscope_report(scratch / "trees" / "a", scratch / "trees" / "b",
                                                      result["differences"], report)
            summary["diffoscope"] = {"report": str(report.relative_to(PROJECT_ROOT))
                                     if report.is_relative_to(PROJECT_ROOT) else str(report), "files": shown}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    same = sum(1 for p in summary["packages"].values() if p["identical"])
    log(f"{lane.name}: {same} of {len(summary['packages'])} packages identical"
        + ("" if summary["identical"] else f"; {len(summary['differences'])} paths differ") + f" ({out / 'summary.json'})")
    for d in summary["differences"]:
        log(f"  {d['path']}: {', '.join(d['what'])}")
    return summary

"""Is a cell's /opt/cpython reproducible?  Two builds of the same inputs under different conditions, compared.

`python -m cpython_perf reproducibility CELL` (`nox -s reproducibility-<cell>`):

  a  the cell's image as every build makes it (docker/cell.Dockerfile.j2 as is; Docker's layer cache makes
     this the cell's own image when that is current), tagged cpython-perf-repro:<cell>-a-<pid>;
  b  the same inputs built again, later, under what reprotest varies (VARIATION): umask 0002 instead of 0022,
     another locale and time zone, one CPU instead of all (make -j1), and the build container's own host name;
     with --other-build-path another build directory too; tagged cpython-perf-repro:<cell>-b-<pid>.

/opt/cpython of each is copied out (`docker create` + the archive API, as `docker cp` does), unpacked, packed
again as a canonical tar (members sorted by name, numeric owners, modification times kept) and the two
compared: the same sha256 is "identical".  Otherwise every path whose contents, mode, owner, link target or
modification time differ is listed, each with the reason when it is a known one (KNOWN_DIFFERENCES), and
diffoscope (diffoscope-minimal, installed with apt where the driver may) says how, in
results/reproducibility/<cell>/diffoscope.txt; summary.json has the verdict and the list.

Two `docker build`s rather than reprotest itself: reprotest builds a source tree with a command in one of
autopkgtest's virtualisation back-ends (none of them Docker), so it would build /opt/cpython elsewhere than the
image does; the same variations applied to the project's own Dockerfile test the artifact that is shipped.
The build time is varied by building later (the second build runs minutes, or days, after the first), not
with faketime, which the base image does not have.

Afterwards the unpacked trees and the images this check made are removed, and nothing else: not an image the
engine had before it started (the cell's own image and its layers, which build a reuses from the cache), not
one still tagged or the parent of another (remove_own_images).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .. import host
from . import sbom
from .cell_image import build_cell_image
from .docker_build import scratch_dir
from .pipeline import cell_inputs
from ..errors import DriverError, RuntimeFailure
from ..matrix import PROJECT_ROOT
from .render import DEFAULT_WORK_DIR, BuildVariation

REPOSITORY = "cpython-perf-repro"
TREE = "/opt/cpython"
VARIATION = BuildVariation(prefix="umask 0002 && export LANG=C.UTF-8 LC_ALL=C.UTF-8 TZ=Etc/GMT-14 && ",
                           work_dir=DEFAULT_WORK_DIR)
# --other-build-path: build b in another directory too.  The build directory is recorded by design (sysconfig's
# abs_builddir and abs_srcdir, the debug info's DW_AT_comp_dir), so it is one of the image's inputs (always
# /usr/src/<srcdir>, where the tree stays); this variation shows what it changes.
OTHER_BUILD_PATH = "/usr/src/cpython-perf-reprotest/other-build-path"
VARIED_LIMITS = {"cpusetcpus": "0"}    # one CPU: nproc 1, make -j1 (reprotest's num_cpus)
RESULTS_ROOT = PROJECT_ROOT / "results" / "reproducibility"
# Differences that remain, each with its reason (fnmatch patterns of paths under /opt/cpython).  A difference
# not listed is new: the check fails on it.
KNOWN_DIFFERENCES: dict[str, str] = {}
# What another build directory changes (--other-build-path): CPython records where it was built.
BUILD_PATH_DIFFERENCES: dict[str, str] = {
    "lib/python3.*/_sysconfigdata_*.py":
        "sysconfig records the build directory (abs_builddir, abs_srcdir and the paths made from them; "
        "sysconfig.is_python_build() and CPython's Tools read them)",
    "lib/python3.*/__pycache__/_sysconfigdata_*.pyc": "the compiled form of the _sysconfigdata module",
    "lib/python3.*/config-3.*/Makefile":
        "the installed Makefile records the build directory (abs_srcdir, abs_builddir)",
    "lib/python3.*/config-3.*/python.o": "the debug information names the build directory (DW_AT_comp_dir)",
    "lib/python3.*/config-3.*/libpython3.*.a": "the debug information names the build directory (DW_AT_comp_dir)",
    "lib/libpython3.*": "the debug information names the build directory (DW_AT_comp_dir)",
    "bin/python3.*": "the debug information names the build directory (DW_AT_comp_dir)",
    "lib/python3.*/lib-dynload/*.so": "the debug information names the build directory (DW_AT_comp_dir)",
}


@dataclass
class Entry:
    kind: str        # file, dir, symlink
    mode: int
    owner: str
    mtime: int
    digest: str      # sha256 of a file, the target of a link, "" for a directory


def export_tree(client, image: str, dest: Path, tree: str = TREE) -> None:
    """Unpack an image's tree into dest (as `docker cp`: from a created, never started, container)."""
    container = client.containers.create(image, command=["true"])
    archive = dest.parent / f"{dest.name}.tar"
    try:
        stream, _ = container.get_archive(tree)
        with open(archive, "wb") as f:
            for chunk in stream:
                f.write(chunk)
    finally:
        container.remove(force=True)
    try:
        unpack_tree(archive, dest)
    finally:
        archive.unlink()


def unpack_tree(archive: Path, dest: Path) -> None:
    """Unpack a `docker cp` archive (its one top directory, the tree) as dest, the top directory's own owner, mode
    and modification time kept: tar as root keeps them, and a rename changes none of them."""
    staging = dest.parent / f".{dest.name}.unpack"
    staging.mkdir()
    proc = subprocess.run(["tar", "-xf", str(archive), "-C", str(staging), "--same-owner", "--numeric-owner"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeFailure(f"unpacking {archive} failed: {proc.stderr.strip()[-1000:]}")
    (top,) = staging.iterdir()
    top.rename(dest)
    staging.rmdir()


def canonical_tar_sha256(tree: Path) -> str:
    """sha256 of the tree packed as a canonical tar: names sorted, numeric owners, mtimes kept, no atime/ctime."""
    proc = subprocess.run(["tar", "--sort=name", "--format=gnu", "--numeric-owner", "-cf", "-", "-C", str(tree),
                           "."], capture_output=True)
    if proc.returncode != 0:
        raise RuntimeFailure(f"tar of {tree} failed: {proc.stderr.decode(errors='replace')[-1000:]}")
    return hashlib.sha256(proc.stdout).hexdigest()


def listing(tree: Path) -> dict[str, Entry]:
    entries = {}
    for root, dirs, files in os.walk(tree):
        dirs.sort()
        for name in [*dirs, *sorted(files)]:
            path = Path(root, name)
            st = path.lstat()
            rel = str(path.relative_to(tree))
            if path.is_symlink():
                entries[rel] = Entry("symlink", st.st_mode & 0o7777, f"{st.st_uid}:{st.st_gid}", int(st.st_mtime),
                                     os.readlink(path))
            elif path.is_dir():
                entries[rel] = Entry("dir", st.st_mode & 0o7777, f"{st.st_uid}:{st.st_gid}", int(st.st_mtime), "")
            else:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
                entries[rel] = Entry("file", st.st_mode & 0o7777, f"{st.st_uid}:{st.st_gid}", int(st.st_mtime),
                                     digest)
    root_st = tree.lstat()
    entries["."] = Entry("dir", root_st.st_mode & 0o7777, f"{root_st.st_uid}:{root_st.st_gid}",
                         int(root_st.st_mtime), "")
    return entries


def compare(a: dict[str, Entry], b: dict[str, Entry]) -> list[dict]:
    """Every path that differs, with what differs."""
    out = []
    for path in sorted(set(a) | set(b)):
        x, y = a.get(path), b.get(path)
        if x is None or y is None:
            out.append({"path": path, "what": ["only in " + ("b" if x is None else "a")]})
            continue
        what = [name for name, left, right in (("kind", x.kind, y.kind), ("contents", x.digest, y.digest),
                                               ("mode", x.mode, y.mode), ("owner", x.owner, y.owner),
                                               ("mtime", x.mtime, y.mtime)) if left != right]
        if what:
            detail = {"path": path, "what": what}
            if "mode" in what:
                detail["modes"] = [oct(x.mode), oct(y.mode)]
            if "mtime" in what:
                detail["mtimes"] = [x.mtime, y.mtime]
            out.append(detail)
    return out


DIFFOSCOPE_FILES = 40              # files diffoscope explains (one of each kind first)
DIFFOSCOPE_FILE_BYTES = 64 << 10   # of report per file


def diffoscope_selection(differences: list[dict], limit: int = DIFFOSCOPE_FILES) -> list[str]:
    """The files whose contents differ that diffoscope explains: one of each kind (suffix) first, in path
    order, then the rest, up to limit (thousands of .pyc files would take diffoscope an hour)."""
    files = [d["path"] for d in differences if "contents" in d["what"]]
    kinds: dict[str, str] = {}
    for path in files:
        kinds.setdefault(Path(path).suffix or Path(path).name, path)
    first = list(kinds.values())
    return (first + [p for p in files if p not in first])[:limit]


def diffoscope_report(a: Path, b: Path, differences: list[dict], report: Path) -> list[str]:
    """diffoscope's text report of each selected file (a/ against b/), one after the other, with a header
    saying which files it left out; returns the files shown."""
    chosen = diffoscope_selection(differences)
    contents = [d["path"] for d in differences if "contents" in d["what"]]
    metadata = [d for d in differences if "contents" not in d["what"]]
    parts = [f"# {len(differences)} paths differ: {len(contents)} in contents, {len(metadata)} in metadata only "
             f"(summary.json lists them); diffoscope on {len(chosen)} of the files whose contents differ\n"]
    for path in chosen:
        proc = subprocess.run(["diffoscope", "--no-progress", "--text", "-", "--max-text-report-size",
                               str(DIFFOSCOPE_FILE_BYTES), str(a / path), str(b / path)],
                              capture_output=True, text=True, timeout=900)
        parts.append(f"\n# ---- {path} (diffoscope exit {proc.returncode})\n{proc.stdout}{proc.stderr[-2000:]}")
    report.write_text("".join(parts))
    return chosen


def image_ids(client) -> set[str]:
    """Every image ID the engine has, intermediate ones too."""
    return set(client.api.images(all=True, quiet=True))


def remove_own_images(client, tags: list[str], existing: set[str]) -> list[str]:
    """Remove the tags and the images of their chains that this check made (not in existing, the IDs the
    engine had before it started): never an image that was there before (the cell's own image and its
    layers, which build a reuses from Docker's cache), never one still tagged or the parent of another
    (the engine refuses that).  Returns the IDs removed."""
    import docker.errors

    removed = []
    for tag in tags:
        try:
            chain = [h["Id"] for h in client.api.history(tag) if h.get("Id", "").startswith("sha256:")]
            client.api.remove_image(tag, noprune=True)
        except docker.errors.APIError:
            continue
        for image_id in chain[1:]:   # the first is the tag's own image, gone with the tag unless tagged twice
            if image_id in existing:
                break
            try:
                if client.api.inspect_image(image_id).get("RepoTags"):
                    break
                client.api.remove_image(image_id, noprune=True)
                removed.append(image_id)
            except docker.errors.APIError:   # gone already, used by a container, or another image's parent
                break
    return removed


def reason_for(path: str, reasons: dict[str, str]) -> str | None:
    """The reason of the first fnmatch pattern of reasons that path matches (None: no known reason)."""
    return next((why for pattern, why in reasons.items() if fnmatch.fnmatchcase(path, pattern)), None)


def known_reason(path: str, other_build_path: bool = False) -> str | None:
    return reason_for(path, {**KNOWN_DIFFERENCES, **(BUILD_PATH_DIFFERENCES if other_build_path else {})})


def explain_with_diffoscope(a: Path, b: Path, differences: list[dict], out: Path, log) -> dict:
    """diffoscope (installed where the driver may) on the differing files under a/ and b/, its report in
    out/diffoscope.txt -> the summary's "diffoscope" entry: the report's path and the files it shows."""
    host.ensure_commands({"diffoscope": "diffoscope-minimal"}, log)
    report = out / "diffoscope.txt"
    log(f"diffoscope on the files that differ (report: {report})")
    shown = diffoscope_report(a, b, differences, report)
    return {"report": str(report.relative_to(PROJECT_ROOT)) if report.is_relative_to(PROJECT_ROOT) else str(report),
            "files": shown}


def log_differences(differences: list[dict], log) -> None:
    for d in differences:
        log(f"  {d['path']}: {', '.join(d['what'])}" + (f" -- {d['reason']}" if d["reason"] else ""))


def run(cell, matrix, log=print, out: Path | None = None, keep: bool = False, other_build_path: bool = False) -> dict:
    """Build the cell twice (a, b), compare their /opt/cpython; return (and write) the summary."""
    if cell.foreign:
        raise DriverError(f"{cell.name} is cross-compiled: the reproducibility check builds a natively built cell")
    out = Path(out or RESULTS_ROOT / cell.name)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    client = host.docker_client(log)
    existing = image_ids(client)   # never removed afterwards: only what this check made goes
    inputs = cell_inputs(cell, matrix.base_suite, None, log, matrix)
    run_id = f"{os.getpid()}"   # two checks at once do not share (or remove) each other's images
    tags = {"a": f"{REPOSITORY}:{cell.name}-a-{run_id}", "b": f"{REPOSITORY}:{cell.name}-b-{run_id}"}
    summary: dict = {"cell": cell.name, "inputs": inputs.digest, "variation": {
        "a": "the image's own build (docker/cell.Dockerfile.j2; the layer cache reuses the cell's image when current)",
        "b": {"prefix": VARIATION.prefix.strip(" &"),
              "cpus": VARIED_LIMITS["cpusetcpus"], "time": "built after a",
              "hostname": "each build container's own"}}, "seconds": {}}
    variation = VARIATION
    if other_build_path:
        variation = BuildVariation(VARIATION.prefix, OTHER_BUILD_PATH)
    summary["variation"]["b"]["build_dir"] = variation.work_dir
    scratch = Path(tempfile.mkdtemp(prefix=f"cpython-perf-repro-{cell.name}-", dir=scratch_dir()))
    try:
        for which in ("a", "b"):
            started = time.monotonic()
            log(f"== build {which}: {tags[which]}")
            build_cell_image(client, inputs, matrix.base_suite, log, tag=tags[which],
                             variation=variation if which == "b" else None,
                             container_limits=VARIED_LIMITS if which == "b" else None)
            sbom.attach_sbom(client, inputs, tags[which], matrix.base_suite, log, save=False)
            summary["seconds"][f"build_{which}"] = round(time.monotonic() - started, 1)
        trees = {}
        for which in ("a", "b"):
            trees[which] = scratch / which
            export_tree(client, tags[which], trees[which])
        sha = {which: canonical_tar_sha256(tree) for which, tree in trees.items()}
        summary["canonical_tar_sha256"] = sha
        differences = compare(listing(trees["a"]), listing(trees["b"]))
        for d in differences:
            d["reason"] = known_reason(d["path"], other_build_path)
        summary["identical"] = sha["a"] == sha["b"]
        summary["differences"] = differences
        summary["unexplained"] = [d["path"] for d in differences if not d["reason"]]
        if differences:
            summary["diffoscope"] = explain_with_diffoscope(trees["a"], trees["b"], differences, out, log)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if not keep:
            remove_own_images(client, list(tags.values()), existing)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    verdict = "identical" if summary["identical"] else (
        f"{len(summary['differences'])} paths differ, {len(summary['unexplained'])} without a known reason")
    log(f"{cell.name}: /opt/cpython of the two builds: {verdict} ({out / 'summary.json'})")
    log_differences(summary["differences"], log)
    return summary

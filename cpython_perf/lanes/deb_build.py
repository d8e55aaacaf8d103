"""The build of a lane's binary packages: `dpkg-source -x`, the lane's edits, `dpkg-source --before-build`
(the series at fuzz 0) and `dpkg-buildpackage` with Debian's own debian/rules in the build image, without
network; its environment and conditions, the build key naming its cache directory, one build at a time."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..errors import DriverError, RuntimeFailure
from ..matrix import Lane, Matrix
from ..source import sources
from .docker_run import docker_run_command, run_logged, tail_of
from .images import build_image_tag
from .run_record import DebOptions, default_cache_root
from .source_tree import ARCH_SYMBOLS, NEW_SYMBOLS, PATCH_SUBDIR, prepare_tree, symbols_version

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


def build_packages(record, dsc: Path, image: str, env: dict[str, str], form_dir: Path | None, names: list[str],
                   out: Path, tmp: Path, conditions: BuildConditions = AS_BUILT) -> None:
    """Build the lane's packages (record: run_record.RunRecord) into out: the .debs, .changes, .buildinfo,
    build.log and DONE (what was built, from what, in how long); superseded builds of the same flavour go."""
    lane = record.lane
    work = tmp / "work"
    work.mkdir()
    log_file = record.paths.results / "build.log"   # followed live; kept with the packages too
    mounts = {dsc.parent: "/in:ro", work: "/w"}
    src = f"/w/{conditions.src_dir}"
    (work / conditions.src_dir).parent.mkdir(parents=True, exist_ok=True)
    env = {**env, **dict(conditions.env)}
    with build_lock(default_cache_root() / "build.lock", record.log):
        with record.phase("unpack"):
            _container(record, image, ["dpkg-source", "-x", f"/in/{dsc.name}", src], mounts, log_file, "unpack")
        with record.phase("prepare"):
            prepared = prepare_tree(work / conditions.src_dir, lane, form_dir, names)
            record.log(f"{lane.name}: {len(prepared.names)} patches appended to debian/patches/series under "
                       f"{PATCH_SUBDIR}/; symbols added to {prepared.symbols_path or '-'}: "
                       f"{', '.join(prepared.symbols_added) or 'none (all present)'}; version {prepared.version}")
        with record.phase("patch"):
            # the series at fuzz 0 as dpkg-buildpackage applies it; a failure names the patch
            _container(record, image, ["dpkg-source", "--before-build", "."], mounts, log_file, "patch",
                       workdir=src)
        with record.phase("build"):
            argv = conditions.command(dpkg_buildpackage_command())
            record.log(f"$ {' '.join(f'{k}={shlex.quote(v)}' for k, v in env.items())} "
                       f"{shlex.join(argv)}  (log: {log_file})")
            _container(record, image, argv, mounts, log_file, "build", env=env, workdir=src, network=False,
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
    phases = record.summary["phases"]
    (out / "DONE").write_text(json.dumps({"flavour": flavour,
        "debs": debs, "changes_files": changes, "version": prepared.version,
        "patches": prepared.names, "symbols_added": prepared.symbols_added,
        "symbols_file": prepared.symbols_path,
        "build_seconds": {k: phases[k] for k in ("unpack", "prepare", "patch", "build")},
        "built_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}, indent=2) + "\n")


def _container(record, image, argv, mounts, log_file, what, env=None, workdir=None, network=True, options=()):
    lane = record.lane
    name = f"cpython-perf-deb-{lane.name}-{what}-{os.getpid()}"
    cmd = docker_run_command(image, argv, mounts=mounts, env=env, workdir=workdir, name=name, network=network,
                             options=options)
    rc = run_logged(cmd, log_file, name, log=record.log, what=f"{lane.name}: {what}")
    if rc != 0:
        raise RuntimeFailure(f"{lane.name}: {what} failed (exit {rc}) in {image}; log: {log_file}\n"
                             f"{tail_of(log_file, 40)}")

"""`python -m cpython_perf apt-repo`: the deb lanes' packages as one signed apt repository.

Users add one source line and get `python3.X -X perf` from apt:

    deb [signed-by=/etc/apt/keyrings/cpython-perf.gpg] URL bookworm main

One suite per Debian release of matrix.yaml `lanes:` (bullseye, bookworm, trixie), component `main`, the
packages of every lane of that release that is built.  What goes in is what the lanes built
(~/.cache/cpython-perf/deb/<lane>/<key>/, listed by the build's DONE file): the build with the series and
the frame-pointer flags (not --without-series, not --release-grade) whose version is the lane's
`perf_version` (`<package_version>+perfN`), the newest if there are several; every .deb is checked against the sha256 its
.changes lists, and its control fields against the lane's version.

The repository is made by reprepro (Debian's own, packaged): its conf/distributions is the whole
configuration (written here, one stanza per suite), it writes the Packages indices, Release, InRelease and
Release.gpg the way Debian's archive has them, and it signs with gpgme from a GNUPGHOME.  aptly does the same
from a database of its own (snapshots, publish points, mirrors) that a repository rebuilt from scratch on
every run has no use for; reprepro's state (conf/, db/) stays in the temporary directory and only dists/ and
pool/ are published.

The signing key: `--key FINGERPRINT` (a secret key in $GNUPGHOME, or --gnupghome), or the armored secret key
from `--key-file FILE` or `--key-env VARIABLE` (imported into a temporary GNUPGHOME, deleted afterwards, its
gpg-agent stopped).  Before anything is built the key must sign a test message (an expired, revoked,
encryption-only or passphrase-locked key is refused there, with gpg's words); `--expect-fingerprint` refuses
any other key than the one users were told of.  The public key is published beside dists/ as
cpython-perf-archive-keyring.gpg (for signed-by) and .asc, and every suite's InRelease and Release.gpg are
checked with gpgv against that keyring before the repository is moved into place.

Every suite's Release carries Valid-Until, its Date plus --valid-for days (default 14): apt refuses a
Release past it ("is expired"), so a mirror or a man in the middle cannot keep serving an old, validly signed
repository (one without a later fix) for longer than that.  The repository must therefore be signed again
before then: `--refresh-from SOURCE` takes a repository this tool made (a directory, or the URL it is served
from), checks every suite's InRelease against the signing key itself (only what this key signed is signed
again), every Packages index against the verified Release and every .deb against its Packages entry, and makes
the same suites of the same packages again with a new Date and Valid-Until, without building anything: users
get new signatures, never other bytes under a version they already have.

The repository is made in a temporary directory beside --out and renamed into place at the end: a failed
run leaves the previous repository (or nothing) there, never half of a new one.
"""

from __future__ import annotations

import contextlib
import html
import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..errors import DriverError, RuntimeFailure
from ..matrix import PROJECT_ROOT, Lane, Matrix

ORIGIN = "cpython-perf"
LABEL = "cpython-perf"
COMPONENT = "main"
KEYRING = "cpython-perf-archive-keyring.gpg"
KEY_ASC = "cpython-perf-archive-keyring.asc"
MANIFEST = "cpython-perf-repository.json"
DEFAULT_OUT = PROJECT_ROOT / "dist" / "apt"
MADE_BY_US = (MANIFEST, "dists", "pool")   # an existing --out must look like a repository made here
# Valid-Until of every Release: Date plus this many days.  The publishing workflow signs the repository again
# every week (--refresh-from), so one failed weekly run is tolerated before apt calls it expired.
DEFAULT_VALID_FOR_DAYS = 14


class AptRepoError(DriverError):
    """Bad input to apt-repo: no lane built, no key, a directory that is not a repository (exit 2)."""


class SigningKeyError(AptRepoError):
    """The signing key is missing, cannot be found or cannot sign."""


# --------------------------------------------------------------------------
# what goes in: each lane's build from the cache


@dataclass
class LaneBuild:
    lane: Lane
    directory: Path
    version: str
    debs: list[Path]
    built_at: str
    archive_version: str | None = None   # the Debian revision it was built on (default: the lane's, in matrix.yaml)


def wanted_build(done: dict, lane: Lane) -> bool:
    """Whether a DONE file describes the build users get: the series added, the frame-pointer flags
    (DEB_CFLAGS_APPEND; --release-grade builds have none), the lane's +perf version."""
    flavour = done.get("flavour") or {}
    return (flavour.get("with_series") is True and "DEB_CFLAGS_APPEND" in (flavour.get("environment") or {})
            and done.get("version") == lane.perf_version)


def find_lane_build(lane: Lane, cache_root: Path | None = None, current=None) -> LaneBuild | None:
    """The newest wanted build of the lane in the cache, or None.  current: a function of the build's
    environment giving the lane's build key now (deb_build.current_build_key); with it, builds of other
    inputs (an older series or .dsc) are not taken."""
    from .run_record import default_cache_root

    found = []
    for done_file in sorted(Path(cache_root or default_cache_root()).joinpath(lane.name).glob("*/DONE")):
        try:
            done = json.loads(done_file.read_text())
        except (OSError, ValueError):
            continue
        env = (done.get("flavour") or {}).get("environment") or {}
        if wanted_build(done, lane) and (current is None or done_file.parent.name == current(env)[:16]):
            found.append(LaneBuild(lane, done_file.parent, done["version"],
                                   [done_file.parent / n for n in done.get("debs", []) if n.endswith(".deb")],
                                   str(done.get("built_at", ""))))
    return max(found, key=lambda b: b.built_at) if found else None


def select_builds(matrix: Matrix, lanes: list[str] | None, cache_root: Path | None = None,
                  log=print, current_of=None) -> list[LaneBuild]:
    """The builds to publish: of the named lanes (each must be built), else of every lane that is built
    (the others named in the log).  None built: AptRepoError naming the sessions that build them.
    current_of: a function of the lane giving find_lane_build's `current` (current_keys): a build of older
    inputs counts as not built."""
    names = lanes or list(matrix.lanes)
    for name in names:
        matrix.lane(name)   # an unknown lane: its own error, listing the lanes
    builds, missing = [], []
    for name in names:
        lane = matrix.lanes[name]
        build = find_lane_build(lane, cache_root)
        if build is not None and current_of is not None:
            build = find_lane_build(lane, cache_root, current_of(lane))
            if build is None:
                log(f"{name}: its packages in the cache were built from other inputs than the lane's current ones "
                    "(the series, the .dsc or the build image changed since)")
        (builds if build else missing).append(build or lane)
    if lanes and missing:
        raise AptRepoError(f"not built: {', '.join(lane.name for lane in missing)}; run "
                           + " and ".join(f"`nox -s {lane.session}`" for lane in missing)
                           + " first (`-- --no-checks` builds without the checks)")
    if not builds:
        raise AptRepoError("no deb lane is built, so there is nothing to publish: run one of "
                           + ", ".join(f"`nox -s {lane.session}`" for lane in missing)
                           + " first (about 20 minutes each on 2 cores)")
    for lane in missing:
        log(f"{lane.name}: not built, not in the repository (`nox -s {lane.session}` builds it)")
    return builds


def changes_checksums(text: str) -> dict[str, tuple[int, str]]:
    """The Checksums-Sha256 field of a .changes -> {file name: (size, sha256)}."""
    from .source_packages import dsc_checksums

    return dsc_checksums(text)


def verify_build(build: LaneBuild) -> list[str]:
    """Problems (empty: none) of a build's .debs: each listed in its .changes with that sha256 and size, and
    Version: the lane's +perf version."""
    from .source_packages import verify_files

    changes = sorted(build.directory.glob("*.changes"))
    if not changes:
        return [f"no .changes in {build.directory}"]
    listed = changes_checksums(changes[0].read_text(errors="replace"))
    unlisted = [d.name for d in build.debs if d.name not in listed]
    problems = [f"{name}: not in {changes[0].name}" for name in unlisted]
    problems += verify_files(build.directory, {d.name: listed[d.name] for d in build.debs if d.name in listed},
                             changes[0].name)
    if not problems:
        for deb in build.debs:
            version = deb_field(deb, "Version")
            if version != build.version:
                problems.append(f"{deb.name}: Version {version}, the lane's packages are {build.version}")
    return problems


def deb_field(deb: Path, name: str) -> str:
    proc = subprocess.run(["dpkg-deb", "--field", str(deb), name], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeFailure(f"dpkg-deb cannot read {deb}: {proc.stderr.strip()}")
    return proc.stdout.strip()


# --------------------------------------------------------------------------
# reprepro's configuration


def suites_of(builds: list[LaneBuild]) -> dict[str, list[LaneBuild]]:
    """{suite: its lanes' builds}, in the order of matrix.yaml's lanes."""
    suites: dict[str, list[LaneBuild]] = {}
    for build in builds:
        suites.setdefault(build.lane.suite, []).append(build)
    return suites


def suite_description(suite: str, builds: list[LaneBuild]) -> str:
    release = builds[0].lane.distribution.release_title(suite)
    packages = ", ".join(f"{b.lane.source_package} {b.version}" for b in builds)
    return f"CPython with perf profiler support (-X perf, -X perf_jit) for {release}: {packages}"


def check_valid_for(days) -> int:
    """--valid-for: a whole number of days, at least 1 (reprepro's ValidFor counts in days)."""
    if isinstance(days, bool) or not isinstance(days, int) or days < 1:
        raise AptRepoError(f"--valid-for {days!r}: give the days a Release stays valid, a whole number of at least 1 "
                           f"(default {DEFAULT_VALID_FOR_DAYS}); sign again (--refresh-from) before they have passed")
    return days


def distributions_conf(builds: list[LaneBuild], fingerprint: str, architectures: dict[str, list[str]],
                       valid_for_days: int = DEFAULT_VALID_FOR_DAYS) -> str:
    """reprepro's conf/distributions: one stanza per suite, signed with the key's fingerprint, each Release
    valid for valid_for_days (Valid-Until)."""
    if not re.fullmatch(r"[0-9A-F]{40}|[0-9A-F]{64}", fingerprint):
        raise SigningKeyError(f"{fingerprint!r} is not an OpenPGP fingerprint (40 or 64 hex digits)")
    check_valid_for(valid_for_days)
    stanzas = []
    for suite, suite_builds in suites_of(builds).items():
        stanzas.append("\n".join([
            f"Origin: {ORIGIN}", f"Label: {LABEL}", f"Codename: {suite}",
            f"Architectures: {' '.join(architectures[suite])}", f"Components: {COMPONENT}",
            f"Description: {suite_description(suite, suite_builds)}", f"ValidFor: {valid_for_days}d",
            f"SignWith: {fingerprint}"]) + "\n")
    return "\n".join(stanzas)


def architectures_of(debs: list[Path]) -> list[str]:
    """The architectures of a suite's indices: those of its .debs (Architecture: all goes into each)."""
    arches = sorted({deb_field(deb, "Architecture") for deb in debs} - {"all"})
    if not arches:
        raise AptRepoError(f"only Architecture: all packages among {', '.join(d.name for d in debs)}")
    return arches


def source_line(url: str, suite: str, keyring: str = "/etc/apt/keyrings/cpython-perf.gpg") -> str:
    return f"deb [signed-by={keyring}] {url.rstrip('/')}/ {suite} {COMPONENT}"


# --------------------------------------------------------------------------
# the signing key


NO_KEY_HELP = ("give the signing key: --key FINGERPRINT (a secret key in $GNUPGHOME or --gnupghome), or the "
               "armored secret key in --key-file FILE or --key-env VARIABLE. A throwaway key for trying it: "
               "GNUPGHOME=$(mktemp -d) gpg --batch --passphrase '' --quick-gen-key 'apt test <apt@example.invalid>' "
               "ed25519 sign 1d")


@dataclass
class SigningKey:
    gnupghome: Path
    fingerprint: str


def gpg(home: Path, *args: str, data: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["gpg", "--homedir", str(home), "--batch", "--no-tty", *args], input=data,
                          capture_output=True)


def secret_fingerprints(home: Path, selector: str | None = None) -> list[str]:
    """Primary fingerprints of the secret keys in home (matching selector)."""
    proc = gpg(home, "--with-colons", "--list-secret-keys", *(["--", selector] if selector else []))
    if proc.returncode != 0:
        return []
    fprs, primary = [], False
    for line in proc.stdout.decode(errors="replace").splitlines():
        fields = line.split(":")
        if fields[0] in ("sec", "ssb"):
            primary = fields[0] == "sec"
        elif fields[0] == "fpr" and primary:
            fprs.append(fields[9])
            primary = False
    return fprs


def _gpg_said(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in proc.stderr.decode(errors="replace").splitlines() if line.strip()]
    return " | ".join(lines[-3:]) or f"exit {proc.returncode}"


def check_can_sign(home: Path, fingerprint: str) -> None:
    """Sign a test message with the key as reprepro will (no passphrase prompt): SigningKeyError if it cannot."""
    proc = gpg(home, "--pinentry-mode", "error", "--local-user", fingerprint, "--detach-sign", "--armor",
               "--output", "-", data=b"cpython-perf apt repository: can this key sign?\n")
    if proc.returncode != 0 or b"BEGIN PGP SIGNATURE" not in proc.stdout:
        raise SigningKeyError(
            f"the key {fingerprint} (in {home}) cannot sign: {_gpg_said(proc)}. The repository's key needs a "
            "usable signing (sub)key that is neither expired nor revoked, and no passphrase (or a gpg-agent "
            "that has it)")


@contextlib.contextmanager
def signing_key(key: str | None = None, key_file: str | None = None, key_env: str | None = None,
                gnupghome: str | None = None, expect: str | None = None, environ=None):
    """The key to sign with, checked (see the module's docstring); a temporary GNUPGHOME is removed after."""
    environ = os.environ if environ is None else environ
    if key_file and key_env:
        raise SigningKeyError("give --key-file or --key-env, not both")
    armored = None
    if key_file:
        try:
            armored = Path(key_file).expanduser().read_bytes()
        except OSError as exc:
            raise SigningKeyError(f"--key-file: {exc}") from None
    elif key_env:
        value = environ.get(key_env, "")
        if not value.strip():
            raise SigningKeyError(f"--key-env {key_env}: the environment variable is not set or empty (it should "
                                  "hold the armored secret key, gpg --armor --export-secret-keys)")
        armored = value.encode()
    elif not key:
        raise SigningKeyError(f"no signing key: {NO_KEY_HELP}")
    temporary = armored is not None
    home = (Path(tempfile.mkdtemp(prefix="cpython-perf-gpg-")) if temporary
            else Path(gnupghome or environ.get("GNUPGHOME") or Path.home() / ".gnupg"))
    try:
        if temporary:
            os.chmod(home, 0o700)
            proc = gpg(home, "--import", data=armored)
            where = f"--key-file {key_file}" if key_file else f"--key-env {key_env}"
            if proc.returncode != 0:
                raise SigningKeyError(f"{where}: gpg cannot import it: {_gpg_said(proc)}")
            if not secret_fingerprints(home):
                raise SigningKeyError(f"{where}: no secret key in it (a public key only?): export it with "
                                      "gpg --armor --export-secret-keys FINGERPRINT")
        fprs = secret_fingerprints(home, key)
        if not fprs:
            raise SigningKeyError(f"no secret key {key!r} in {home}" if key else f"no secret key in {home}")
        if len(fprs) > 1:
            raise SigningKeyError(f"{len(fprs)} secret keys match {key or 'in ' + str(home)} ({', '.join(fprs)}): "
                                  "name one with --key FINGERPRINT")
        fingerprint = fprs[0]
        if expect and fingerprint != expect.replace(" ", "").upper():
            raise SigningKeyError(f"the signing key is {fingerprint}, not the expected {expect} "
                                  "(--expect-fingerprint: the key users were told of)")
        check_can_sign(home, fingerprint)
        yield SigningKey(home, fingerprint)
    finally:
        if temporary:
            subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], capture_output=True)
            shutil.rmtree(home, ignore_errors=True)


# --------------------------------------------------------------------------
# the repository


def check_out_dir(out: Path) -> None:
    """An existing --out is replaced only if it is a repository made by apt-repo (or empty)."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise AptRepoError(f"{out} exists and is not a directory: choose another --out")
    if out.is_dir() and any(out.iterdir()) and not (out / MANIFEST).is_file():
        raise AptRepoError(f"{out} exists and is not a repository made by apt-repo (no {MANIFEST}); it is "
                           "replaced as a whole, so choose another --out or remove it")


def reprepro(state: Path, outdir: Path, key: SigningKey, *args: str) -> None:
    env = dict(os.environ, GNUPGHOME=str(key.gnupghome))
    proc = subprocess.run(["reprepro", "--basedir", str(state), "--outdir", str(outdir), *args], env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeFailure(f"reprepro {' '.join(args[:2])} failed (exit {proc.returncode}): "
                             f"{(proc.stderr or proc.stdout).strip()[-2000:]}")


def verify_signatures(repo: Path, suites) -> None:
    """gpgv of every suite's InRelease and Release.gpg against the published keyring."""
    for suite in suites:
        d = repo / "dists" / suite
        for args in ([str(d / "InRelease")], [str(d / "Release.gpg"), str(d / "Release")]):
            proc = subprocess.run(["gpgv", "--keyring", str(repo / KEYRING), *args], capture_output=True, text=True)
            if proc.returncode != 0:
                raise RuntimeFailure(f"{args[0]} does not verify against {KEYRING}: {proc.stderr.strip()[-800:]}")


def index_html(manifest: dict, url: str | None) -> str:
    where = url.rstrip("/") if url else "URL-OF-THIS-PAGE"
    lines = [f"sudo install -d -m 0755 /etc/apt/keyrings",
             f"sudo curl -fsSLo /etc/apt/keyrings/cpython-perf.gpg {where}/{KEYRING}",
             "gpg --show-keys /etc/apt/keyrings/cpython-perf.gpg   # the fingerprint below"]
    rows = []
    for suite, info in manifest["suites"].items():
        lines.append(f"# {suite}: echo '{source_line(where, suite)}' | sudo tee /etc/apt/sources.list.d/cpython-perf.list")
        rows += [f"<li>{html.escape(suite)}: {html.escape(p['source_package'])} {html.escape(p['version'])}</li>"
                 for p in info["lanes"]]
    fpr = manifest["fingerprint"]
    return ("<!doctype html><meta charset=utf-8><title>cpython-perf apt repository</title>\n"
            "<h1>cpython-perf apt repository</h1>\n"
            "<p>Debian's own CPython packages with the perf profiler support (<code>-X perf</code>, "
            "<code>-X perf_jit</code>) added, one suite per Debian release:</p>\n"
            f"<ul>{''.join(rows)}</ul>\n<p>Signing key fingerprint: <code>{html.escape(fpr)}</code> (compare it "
            "with the one in the project's README before trusting the key)</p>\n"
            f"<pre>{html.escape(chr(10).join(lines))}\nsudo apt-get update &amp;&amp; sudo apt-get install python3.X</pre>\n")


def build_repository(builds: list[LaneBuild], key: SigningKey, out: Path, url: str | None = None,
                     log=print, valid_for_days: int = DEFAULT_VALID_FOR_DAYS, verified: bool = False) -> dict:
    """Make the signed repository of builds in a temporary directory beside out and move it into place.
    verified: the builds' .debs were checked already (published_builds: against the signed indices they were
    published with), instead of against their .changes."""
    from .. import host

    host.ensure_commands({"reprepro": "reprepro", "gpgv": "gpgv", "dpkg-deb": "dpkg"}, log)
    check_out_dir(out)
    check_valid_for(valid_for_days)
    for build in builds if not verified else ():
        problems = verify_build(build)
        if problems:
            raise RuntimeFailure(f"{build.lane.name}: the built packages in {build.directory} do not verify: "
                                 + "; ".join(problems) + f". Rebuild them: nox -s {build.lane.session} -- --rebuild")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-new-", dir=out.parent))
    try:
        state, repo = tmp / "state", tmp / "repo"
        (state / "conf").mkdir(parents=True)
        suites = suites_of(builds)
        arches = {suite: architectures_of([d for b in sb for d in b.debs]) for suite, sb in suites.items()}
        (state / "conf" / "distributions").write_text(distributions_conf(builds, key.fingerprint, arches,
                                                                         valid_for_days))
        for suite, suite_builds in suites.items():
            debs = [str(d) for b in suite_builds for d in b.debs]
            log(f"{suite}: {len(debs)} packages of {', '.join(b.lane.name + ' ' + b.version for b in suite_builds)}")
            reprepro(state, repo, key, "includedeb", suite, *debs)
        reprepro(state, repo, key, "export")   # every suite signed, also a suite that got nothing new
        for name, armor in ((KEYRING, []), (KEY_ASC, ["--armor"])):
            proc = gpg(key.gnupghome, "--export-options", "export-minimal", *armor, "--export", key.fingerprint)
            if proc.returncode != 0 or not proc.stdout:
                raise RuntimeFailure(f"gpg --export {key.fingerprint} failed: {_gpg_said(proc)}")
            (repo / name).write_bytes(proc.stdout)
        verify_signatures(repo, suites)
        manifest = {"fingerprint": key.fingerprint, "made_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    "valid_for_days": valid_for_days,
                    "valid_until": {suite: release_field((repo / "dists" / suite / "Release").read_text(), "Valid-Until")
                                    for suite in suites},
                    "component": COMPONENT, "keyring": KEYRING,
                    "suites": {suite: {"architectures": arches[suite], "lanes": [
                        {"lane": b.lane.name, "source_package": b.lane.source_package, "version": b.version,
                         "archive_version": b.archive_version or b.lane.package_version, "built_at": b.built_at,
                         "packages": sorted(d.name for d in b.debs)} for b in sb]} for suite, sb in suites.items()}}
        (repo / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        (repo / "index.html").write_text(index_html(manifest, url))
        if out.exists():
            os.rename(out, tmp / "old")
        os.rename(repo, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"apt repository in {out}: suites {', '.join(suites)}, signed by {key.fingerprint}")
    return manifest


# --------------------------------------------------------------------------
# signing a published repository again (Valid-Until)


def release_field(text: str, name: str) -> str | None:
    """A single-line field of a Release file."""
    m = re.search(rf"^{re.escape(name)}: *(.*)$", text, re.M)
    return m[1].strip() if m else None


def release_sha256(text: str) -> dict[str, tuple[int, str]]:
    """The SHA256 field of a Release file -> {path under the suite: (size, sha256)}."""
    files: dict[str, tuple[int, str]] = {}
    inside = False
    for line in text.splitlines():
        if line.startswith("SHA256:"):
            inside = True
        elif inside and line.startswith(" "):
            sha256, size, path = line.split()
            files[path] = (int(size), sha256)
        elif inside:
            break
    return files


def packages_stanzas(text: str) -> list[dict[str, str]]:
    """A Packages index -> one {field: value} per package (continuation lines left out)."""
    stanzas = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines()
                      if line and not line.startswith(" ") and ": " in line)
        if fields:
            stanzas.append(fields)
    return stanzas


_POOL_PATH = re.compile(r"pool/[A-Za-z0-9][A-Za-z0-9._+~-]*(/[A-Za-z0-9][A-Za-z0-9._+~-]*)*\.deb")


def _fetch(source: str, relative: str, dest: Path) -> Path:
    """A file of the repository at source (a directory, or the http(s) URL it is served from), copied to dest."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if re.match(r"https?://", source):
        url = f"{source.rstrip('/')}/{urllib.parse.quote(relative)}"
        try:
            with urllib.request.urlopen(url, timeout=120) as response, open(dest, "wb") as f:
                shutil.copyfileobj(response, f)
        except (OSError, urllib.error.URLError) as exc:   # HTTPError (404, ...) is a URLError
            raise RuntimeFailure(f"--refresh-from: {url}: {exc}") from None
    else:
        path = Path(source) / relative
        if not path.is_file():
            raise AptRepoError(f"--refresh-from {source}: {relative} is missing: it must be a repository made by "
                               "apt-repo (its directory, or the URL it is served from)")
        shutil.copyfile(path, dest)
    return dest


def published_builds(source: str, matrix: Matrix, key: SigningKey, work: Path, log=print) -> list[LaneBuild]:
    """The packages of the repository at source, each verified, as builds to publish again (into work).

    Every suite's InRelease must verify with the signing key's own public key (gpgv: a repository another key
    signed is refused, whatever keyring it ships; an expired Valid-Until is no reason to refuse it, that is
    what a refresh is for), its Packages indices must have the sha256 the verified Release lists, and each .deb
    the sha256 and size of its Packages entry; the packages must be exactly those the manifest lists per lane."""
    from .source_packages import verify_files

    manifest_path = _fetch(source, MANIFEST, work / MANIFEST)
    try:
        manifest = json.loads(manifest_path.read_text())
        suites = manifest["suites"]
    except (ValueError, KeyError, TypeError) as exc:
        raise AptRepoError(f"--refresh-from {source}: {MANIFEST} is not apt-repo's manifest ({exc})") from None
    keyring = work / "signing-key.gpg"
    proc = gpg(key.gnupghome, "--export", key.fingerprint)
    if proc.returncode != 0 or not proc.stdout:
        raise RuntimeFailure(f"gpg --export {key.fingerprint} failed: {_gpg_said(proc)}")
    keyring.write_bytes(proc.stdout)
    builds = []
    for suite, info in suites.items():
        d = work / "dists" / suite
        inrelease = _fetch(source, f"dists/{suite}/InRelease", d / "InRelease")
        release_file = d / "Release.verified"
        proc = subprocess.run(["gpgv", "--keyring", str(keyring), "--output", str(release_file), str(inrelease)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            said = " | ".join(line for line in proc.stderr.splitlines() if line.strip())[-600:]
            raise AptRepoError(f"--refresh-from {source}: dists/{suite}/InRelease is not signed by the signing key "
                               f"{key.fingerprint} ({said}): only a repository this key signed is signed again")
        release = release_file.read_text()
        if release_field(release, "Codename") != suite:
            raise AptRepoError(f"--refresh-from {source}: dists/{suite}/InRelease is the Release of "
                               f"{release_field(release, 'Codename')!r}, not of {suite}")
        listed = release_sha256(release)
        debs: dict[str, dict[str, Path]] = {}   # version -> {file name: path}
        for arch in info.get("architectures", []):
            index = f"{COMPONENT}/binary-{arch}/Packages"
            if index not in listed:
                raise AptRepoError(f"--refresh-from {source}: dists/{suite}/Release lists no {index}")
            packages = _fetch(source, f"dists/{suite}/{index}", d / index)
            problems = verify_files(packages.parent, {"Packages": listed[index]}, f"dists/{suite}/Release")
            if problems:
                raise RuntimeFailure(f"--refresh-from {source}: dists/{suite}/{index}: {'; '.join(problems)}")
            for stanza in packages_stanzas(packages.read_text()):
                filename = stanza.get("Filename", "")
                if not _POOL_PATH.fullmatch(filename) or "/../" in f"/{filename}/":
                    raise AptRepoError(f"--refresh-from {source}: dists/{suite}/{index} names the file "
                                       f"{filename!r}, not a .deb in pool/")
                deb = work / filename
                if not deb.is_file():
                    _fetch(source, filename, deb)
                problems = verify_files(deb.parent, {deb.name: (int(stanza["Size"]), stanza["SHA256"])},
                                        f"dists/{suite}/{index}")
                if problems:
                    raise RuntimeFailure(f"--refresh-from {source}: {'; '.join(problems)}")
                debs.setdefault(stanza.get("Version", ""), {})[deb.name] = deb
        for published in info.get("lanes", []):
            lane = matrix.lanes.get(published.get("lane"))
            if lane is None:
                raise AptRepoError(f"--refresh-from {source}: the published lane {published.get('lane')!r} is not "
                                   "in matrix.yaml lanes: publish the lanes again (apt-repo without --refresh-from)")
            found = debs.get(published["version"], {})
            if sorted(found) != sorted(published["packages"]):
                raise AptRepoError(f"--refresh-from {source}: {suite}'s indices list {sorted(found)} for "
                                   f"{lane.name} {published['version']}, its manifest {sorted(published['packages'])}")
            builds.append(LaneBuild(lane, work, published["version"], [found[n] for n in sorted(found)],
                                    str(published.get("built_at", "")), published.get("archive_version")))
            log(f"{suite}: {lane.name} {published['version']}: {len(found)} packages verified against the signed "
                "indices")
    if not builds:
        raise AptRepoError(f"--refresh-from {source}: the repository has no packages")
    return builds


def current_keys(log=print):
    """select_builds' current_of: the lane's build key now, from its verified source package (fetched or
    cached as the lane fetches it) and the series as it is."""
    from .deb_build import current_build_key
    from .source_packages import fetch_source_package

    def current_of(lane: Lane):
        dsc = fetch_source_package(lane, log=log).dsc
        return lambda env: current_build_key(lane, dsc, env)
    return current_of


def main(matrix: Matrix, args, log=print) -> int:
    """The `apt-repo` command."""
    out = Path(args.out) if args.out else DEFAULT_OUT
    valid_for = check_valid_for(args.valid_for)
    if args.refresh_from:
        if args.lane:
            raise AptRepoError("--refresh-from signs the published repository again as a whole: leave out --lane")
        with signing_key(args.key, args.key_file, args.key_env, args.gnupghome, args.expect_fingerprint) as key:
            out.parent.mkdir(parents=True, exist_ok=True)
            work = Path(tempfile.mkdtemp(prefix=f".{out.name}-refresh-", dir=out.parent))
            try:
                builds = published_builds(args.refresh_from, matrix, key, work, log)
                build_repository(builds, key, out, args.url, log, valid_for, verified=True)
            finally:
                shutil.rmtree(work, ignore_errors=True)
        return 0
    builds = select_builds(matrix, args.lane, log=log, current_of=current_keys(log))
    with signing_key(args.key, args.key_file, args.key_env, args.gnupghome, args.expect_fingerprint) as key:
        build_repository(builds, key, out, args.url, log, valid_for)
    return 0


def add_arguments(parser) -> None:
    parser.add_argument("--lane", action="append", default=None,
                        help="a lane to publish (repeatable; each must be built); default: every built lane")
    parser.add_argument("--out", default=None, help="the repository's directory (default: dist/apt)")
    parser.add_argument("--key", default=None, help="fingerprint (or user id) of the secret signing key")
    parser.add_argument("--gnupghome", default=None, help="where --key is (default: $GNUPGHOME, ~/.gnupg)")
    parser.add_argument("--key-file", default=None, help="a file with the armored secret key (gpg --armor "
                                                         "--export-secret-keys), imported into a temporary GNUPGHOME")
    parser.add_argument("--key-env", default=None, metavar="VARIABLE",
                        help="an environment variable holding the armored secret key (a CI secret)")
    parser.add_argument("--expect-fingerprint", default=None,
                        help="refuse any signing key but this one (the fingerprint users were given)")
    parser.add_argument("--url", default=None, help="where the repository will be served (for its index.html)")
    parser.add_argument("--valid-for", type=int, default=DEFAULT_VALID_FOR_DAYS, metavar="DAYS",
                        help="days each Release stays valid (its Valid-Until; apt refuses it afterwards; default "
                             f"{DEFAULT_VALID_FOR_DAYS}): sign again before then")
    parser.add_argument("--refresh-from", default=None, metavar="SOURCE",
                        help="sign again, with new Valid-Until, the repository at SOURCE (a directory or the URL "
                             "it is served from, made by apt-repo and signed by this key): its packages, verified, "
                             "nothing built")

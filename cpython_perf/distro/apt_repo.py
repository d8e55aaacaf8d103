"""`python -m cpython_perf apt-repo`: the deb lanes' packages as one signed apt repository.

Users add one source line and get `python3.X -X perf` from apt:

    deb [signed-by=/etc/apt/keyrings/cpython-perf.gpg] URL bookworm main

One suite per Debian release of matrix.yaml `distros:` (bullseye, bookworm, trixie), component `main`, the
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
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..errors import DriverError, RuntimeFailure
from ..matrix import PROJECT_ROOT, DistroLane, Matrix
from .deb_check import DEBIAN_RELEASES

ORIGIN = "cpython-perf"
LABEL = "cpython-perf"
COMPONENT = "main"
KEYRING = "cpython-perf-archive-keyring.gpg"
KEY_ASC = "cpython-perf-archive-keyring.asc"
MANIFEST = "cpython-perf-repository.json"
DEFAULT_OUT = PROJECT_ROOT / "dist" / "apt"
MADE_BY_US = (MANIFEST, "dists", "pool")   # an existing --out must look like a repository made here


class AptRepoError(DriverError):
    """Bad input to apt-repo: no lane built, no key, a directory that is not a repository (exit 2)."""


class SigningKeyError(AptRepoError):
    """The signing key is missing, cannot be found or cannot sign."""


# --------------------------------------------------------------------------
# what goes in: each lane's build from the cache


@dataclass
class LaneBuild:
    lane: DistroLane
    directory: Path
    version: str
    debs: list[Path]
    built_at: str


def wanted_build(done: dict, lane: DistroLane) -> bool:
    """Whether a DONE file describes the build users get: the series added, the frame-pointer flags
    (DEB_CFLAGS_APPEND; --release-grade builds have none), the lane's +perf version."""
    flavour = done.get("flavour") or {}
    return (flavour.get("with_series") is True and "DEB_CFLAGS_APPEND" in (flavour.get("environment") or {})
            and done.get("version") == lane.perf_version)


def find_lane_build(lane: DistroLane, cache_root: Path | None = None, current=None) -> LaneBuild | None:
    """The newest wanted build of the lane in the cache, or None.  current: a function of the build's
    environment giving the lane's build key now (deb_build.current_build_key); with it, builds of other
    inputs (an older series or .dsc) are not taken."""
    from .deb_build import default_cache_root

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
    names = lanes or list(matrix.distros)
    for name in names:
        matrix.distro(name)   # an unknown lane: its own error, listing the lanes
    builds, missing = [], []
    for name in names:
        lane = matrix.distros[name]
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
    release = f"Debian {DEBIAN_RELEASES[suite]} ({suite})" if suite in DEBIAN_RELEASES else f"Debian {suite}"
    packages = ", ".join(f"{b.lane.source_package} {b.version}" for b in builds)
    return f"CPython with perf profiler support (-X perf, -X perf_jit) for {release}: {packages}"


def distributions_conf(builds: list[LaneBuild], fingerprint: str, architectures: dict[str, list[str]]) -> str:
    """reprepro's conf/distributions: one stanza per suite, signed with the key's fingerprint."""
    if not re.fullmatch(r"[0-9A-F]{40}|[0-9A-F]{64}", fingerprint):
        raise SigningKeyError(f"{fingerprint!r} is not an OpenPGP fingerprint (40 or 64 hex digits)")
    stanzas = []
    for suite, suite_builds in suites_of(builds).items():
        stanzas.append("\n".join([
            f"Origin: {ORIGIN}", f"Label: {LABEL}", f"Codename: {suite}",
            f"Architectures: {' '.join(architectures[suite])}", f"Components: {COMPONENT}",
            f"Description: {suite_description(suite, suite_builds)}", f"SignWith: {fingerprint}"]) + "\n")
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
                     log=print) -> dict:
    """Make the signed repository of builds in a temporary directory beside out and move it into place."""
    from .. import host

    host.ensure_commands({"reprepro": "reprepro", "gpgv": "gpgv", "dpkg-deb": "dpkg"}, log)
    check_out_dir(out)
    for build in builds:
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
        (state / "conf" / "distributions").write_text(distributions_conf(builds, key.fingerprint, arches))
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
                    "component": COMPONENT, "keyring": KEYRING,
                    "suites": {suite: {"architectures": arches[suite], "lanes": [
                        {"lane": b.lane.name, "source_package": b.lane.source_package, "version": b.version,
                         "archive_version": b.lane.package_version, "built_at": b.built_at,
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


def current_keys(log=print):
    """select_builds' current_of: the lane's build key now, from its verified source package (fetched or
    cached as the lane fetches it) and the series as it is."""
    from .deb_build import current_build_key
    from .source_packages import fetch_source_package

    def current_of(lane: DistroLane):
        dsc = fetch_source_package(lane, log=log).dsc
        return lambda env: current_build_key(lane, dsc, env)
    return current_of


def main(matrix: Matrix, args, log=print) -> int:
    """The `apt-repo` command."""
    out = Path(args.out) if args.out else DEFAULT_OUT
    builds = select_builds(matrix, args.lane, log=log, current_of=current_keys(log))
    with signing_key(args.key, args.key_file, args.key_env, args.gnupghome, args.expect_fingerprint) as key:
        build_repository(builds, key, out, args.url, log)
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

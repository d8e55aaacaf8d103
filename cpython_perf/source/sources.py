"""Fetch a recipe's source tarball, check its sha256, and cache it.

Order: the local source cache, then python.org, then the Debian source
package that mirrors the release (`apt-get source --download-only`, with
deb-src entries derived from this machine's own apt sources).  Every file is
checked against the pinned sha256 before use: a cached file with other bytes
is deleted (the log names both hashes) and the next source is tried; a
download with other bytes is discarded.  Only when no source has the pinned
bytes does the fetch fail, naming every source tried and what it gave.
Nothing half-downloaded ever sits under the final name: files are written
under a temporary name in the cache and renamed once verified.

The release's signature (cpython_perf/source/signatures.py) is checked whenever one
is at hand: the `.asc` (up to 3.13) or `.sigstore` (3.14 on) fetched with the
tarball from python.org or carried by the Debian source package, kept next to
the tarball in the cache, or one in the Debian source package cache
(~/.cache/cpython-perf/debian-sources/, lanes/source_packages.py).  The log
says what was checked, or that no signature was at hand; a bad signature is a
SignatureError and nothing is cached.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from . import signatures
from ..errors import HashMismatch, SourceUnavailable
from ..matrix import Recipe

CACHE_ENV = "CPYTHON_PERF_SOURCE_CACHE"
# A mirror of https://www.python.org/ftp/python (same layout), for machines
# that reach python.org only through a proxy or an internal mirror.
MIRROR_ENV = "CPYTHON_PERF_PYTHON_ORG_MIRROR"
PYTHON_ORG_FTP = "https://www.python.org/ftp/python"
APT_SOURCE_FILES = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))
# apt's downloaded indices: an entry's Release/InRelease file there names its Origin ("Debian" for Debian's
# archive and its security archive), which decides whether the entry is Debian's where apt has run.
APT_LISTS = Path("/var/lib/apt/lists")
# Debian's codenames (1.1 to the ones after trixie) and suite names.  An entry is taken for Debian's archive by
# these where apt's lists say nothing: an Ubuntu runner's noble/jammy entries, and a vendor's "prod", are not.
DEBIAN_CODENAMES = frozenset(
    "buzz rex bo hamm slink potato woody sarge etch lenny squeeze wheezy jessie stretch buster bullseye "
    "bookworm trixie forky duke sid".split())
DEBIAN_SUITE_NAMES = frozenset("oldoldstable oldstable stable testing unstable experimental rc-buggy".split())
DEBIAN_SUITE_SUFFIXES = ("-security", "-proposed-updates", "-updates", "-backports-sloppy", "-backports")
# The Debian archive to bootstrap from; wins over the apt sources when set.  Where neither names one (a
# GitHub Actions runner is Ubuntu), mmdebstrap's own default archive is used (debian_archive_uri()).
DEBIAN_ARCHIVE_ENV = "CPYTHON_PERF_DEBIAN_ARCHIVE"
# The verified Debian source packages' cache (lanes/source_packages.py keeps them there).
DEBIAN_SOURCE_CACHE_ENV = "CPYTHON_PERF_DEBIAN_SOURCE_CACHE"


def default_cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "cpython-perf" / "sources"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def mismatch(path: Path, recipe: Recipe) -> str | None:
    """How the file at path differs from the recipe's pins, both hashes named (None: the pinned bytes)."""
    actual = sha256_of(path)
    size = path.stat().st_size
    problems = []
    if actual != recipe.sha256:
        problems.append(f"sha256 {actual}, expected {recipe.sha256}")
    if recipe.size is not None and size != recipe.size:
        problems.append(f"{size} bytes, expected {recipe.size}")
    return "; ".join(problems) or None


def _remote_sources():
    """The places a source is fetched from after the cache, in order (looked up at call time)."""
    return (("python.org", _from_python_org), ("Debian", _from_debian))


@dataclass(frozen=True)
class VerifiedSource:
    """The source stage's value for a recipe: its tarball, and whether it was fetched and verified.

    verified: the file in the source cache has the pinned sha256 (and size), and the release's signature
    was checked where one was at hand (fetch_source).  Not verified (pinned_source): only the file's name
    is known.  The inputs digest takes the tarball by its pinned sha256, so both give the same digest; only
    a build needs the verified file."""

    recipe: Recipe
    tarball: Path
    verified: bool


def verified_source(recipe: Recipe, cache_dir: Path | None = None, log=print) -> VerifiedSource:
    """The recipe's tarball from the cache or fetched (fetch_source), its bytes and signature checked."""
    return VerifiedSource(recipe, fetch_source(recipe, cache_dir, log), True)


def pinned_source(recipe: Recipe) -> VerifiedSource:
    """The recipe's source as its pins name it, nothing fetched: what the inputs digest and the CI plan need."""
    return VerifiedSource(recipe, Path(recipe.filename), False)


def fetch_source(recipe: Recipe, cache_dir: Path | None = None, log=print) -> Path:
    """Return the path of the verified tarball in the source cache, fetching and caching it if needed.

    Tried in order: the cache, python.org (or $CPYTHON_PERF_PYTHON_ORG_MIRROR),
    the Debian source package.  A cached file without the pinned bytes is
    deleted and the next source tried; a download without them is discarded,
    never cached.  A download is written in a temporary directory inside the
    cache, verified, then renamed into place, so the cache never holds a
    half-made or unverified file under the final name.

    Raises HashMismatch when some source answered with other bytes (a wrong pin
    or a bad mirror: not a matter of reachability), else SourceUnavailable;
    either names every source tried, what each gave, and how to provide the file.
    """
    cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
    cache_dir.mkdir(parents=True, exist_ok=True)
    final = cache_dir / recipe.filename
    tried: list[str] = []
    wrong: list[str] = []   # sources that answered with other bytes
    remotes = _remote_sources()
    if final.exists():
        problem = mismatch(final, recipe)
        if problem is None:
            check_signature(recipe, final, signature_candidates(recipe, cache_dir), log)
            return final
        final.unlink(missing_ok=True)
        tried.append(f"source cache: {final} had other bytes ({problem}); deleted")
        log(f"source cache: {final} does not have the pinned bytes ({problem}): deleted it; "
            f"trying {', then '.join(name for name, _ in remotes)}")
    else:
        tried.append(f"source cache: {final} does not exist")
    for name, method in remotes:
        with tempfile.TemporaryDirectory(prefix=".fetch-", dir=cache_dir) as tmp:
            try:
                got = method(recipe, Path(tmp), log)
            except _NotHere as exc:
                tried.append(f"{name}: {exc}")
                log(f"{name}: cannot provide {recipe.filename}: {exc}")
                continue
            problem = mismatch(got, recipe)
            if problem is not None:
                tried.append(f"{name}: gave other bytes ({problem}); discarded, not cached")
                log(f"{name}: {recipe.filename} does not have the pinned bytes ({problem}): discarded, not cached")
                wrong.append(name)
                continue
            # a bad signature raises here: the temporary directory goes, nothing is cached
            fetched = [(p, f"fetched with it from {name}") for p in _signatures_in(Path(tmp), recipe)]
            used = check_signature(recipe, got, fetched + signature_candidates(recipe, cache_dir), log)
            if used is not None and used.parent == Path(tmp):
                os.replace(used, cache_dir / (recipe.filename + signatures.signature_suffix(recipe.version)))
            os.replace(got, final)
            log(f"cached {recipe.filename} from {name} in {cache_dir} (sha256 {recipe.sha256})")
            return final
    if wrong:
        headline = f"no source has the pinned bytes of CPython {recipe.version} ({recipe.filename}, sha256 {recipe.sha256})"
    else:
        headline = f"the source of CPython {recipe.version} ({recipe.filename}) is not reachable from this machine"
    message = (
        f"{headline}; tried, in order:\n"
        + "\n".join(f"  - {line}" for line in tried)
        + f"\nTo provide it, download {recipe.url} where it can be fetched, check that its sha256 is "
        f"{recipe.sha256}, and put it in {cache_dir}/ (or point {CACHE_ENV} at a directory holding it)."
    )
    if wrong:
        raise HashMismatch(
            message + f"\n{' and '.join(wrong)} answered with other bytes: if python.org re-published the release, "
            f"check upstream's hash before changing the pin in {recipe.path}; otherwise do not trust that source "
            "for this file.")
    raise SourceUnavailable(message)


class _NotHere(Exception):
    """A source method cannot provide the file (reason in the message)."""


# --------------------------------------------------------------------------
# Signatures


def debian_source_cache_dir() -> Path:
    env = os.environ.get(DEBIAN_SOURCE_CACHE_ENV)
    return Path(env) if env else default_cache_dir().parent / "debian-sources"


def _signatures_in(directory: Path, recipe: Recipe) -> list[Path]:
    suffix = signatures.signature_suffix(recipe.version)
    return [p for p in (directory / (recipe.filename + suffix),) if p.is_file()]


def signature_candidates(recipe: Recipe, cache_dir: Path) -> list[tuple[Path, str]]:
    """(path, where it was found) of every signature of recipe's tarball at hand on this machine: next to
    the tarball in the source cache, and in a cached Debian source package of the release."""
    found = [(p, "the source cache") for p in _signatures_in(cache_dir, recipe)]
    if recipe.debian is not None:
        debian = debian_source_cache_dir()
        name = recipe.debian.file + signatures.signature_suffix(recipe.version)
        for path in sorted(debian.glob(f"{recipe.debian.package}_*/{name}")) if debian.is_dir() else ():
            found.append((path, f"Debian source package {path.parent.name.replace('_', ' ', 1)}, "
                                "verified against the archive's signed index"))
    return found


def check_signature(recipe: Recipe, tarball: Path, candidates: list[tuple[Path, str]], log) -> Path | None:
    """Check tarball against the first signature at hand; log what was checked (or that none was at hand,
    or why it could not be checked).  Returns the signature used, None if none was.  A signature that does
    not verify raises signatures.SignatureError."""
    if not candidates:
        log(f"signature: none at hand for {recipe.filename} (looked for its "
            f"{signatures.signature_suffix(recipe.version)} in the source cache and the Debian source package "
            "cache); the sha256 pin is the only check")
        return None
    path, where = candidates[0]
    try:
        result = signatures.verify_release(recipe.version, tarball, path)
    except signatures.SignatureError as exc:
        raise signatures.SignatureError(
            f"{exc}. The signature is from {where}; the tarball has the sha256 {recipe.path.name} pins, so "
            f"either that pin or the signature is wrong: nothing was cached or built") from None
    log(f"signature: {result} (from {where})")
    return path


def download_url(recipe: Recipe) -> str:
    mirror = os.environ.get(MIRROR_ENV)
    if mirror and recipe.url.startswith(PYTHON_ORG_FTP + "/"):
        return mirror.rstrip("/") + recipe.url[len(PYTHON_ORG_FTP):]
    return recipe.url


def download(url: str, dest: Path, timeout: float = 20) -> None:
    """url's bytes into dest, streamed (urllib's errors propagate)."""
    with urllib.request.urlopen(url, timeout=timeout) as response, open(dest, "wb") as out:
        shutil.copyfileobj(response, out, 1 << 20)


def _from_python_org(recipe: Recipe, tmp: Path, log) -> Path:
    dest = tmp / recipe.filename
    url = download_url(recipe)
    try:
        log(f"downloading {url}")
        download(url, dest)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        raise _NotHere(f"{url}: {getattr(exc, 'reason', exc)}") from None
    # the release's signature, published next to it (checked by fetch_source)
    suffix = signatures.signature_suffix(recipe.version)
    try:
        with urllib.request.urlopen(url + suffix, timeout=20) as response:
            (tmp / (recipe.filename + suffix)).write_bytes(response.read())
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        log(f"python.org: no signature {recipe.filename + suffix} ({getattr(exc, 'reason', exc)})")
    return dest


# --------------------------------------------------------------------------
# Debian source packages


def is_debian_suite(suite: str) -> bool:
    """suite is one of Debian's (a codename or suite name, with or without -security, -updates, ...)."""
    return _suite_base(suite) in DEBIAN_CODENAMES | DEBIAN_SUITE_NAMES


def _suite_base(suite: str) -> str:
    for suffix in DEBIAN_SUITE_SUFFIXES:
        if suite.endswith(suffix):
            return suite[:-len(suffix)]
    return suite


def release_origin(uri: str, suite: str, lists: Path | None = None) -> str | None:
    """The Origin of the Release (or InRelease) file apt downloaded for uri's suite, None where apt's lists
    do not have it.  apt names the file after the URI without its scheme, '/' made '_'."""
    lists = APT_LISTS if lists is None else Path(lists)
    base = uri.split("://", 1)[-1].rstrip("/") + f"/dists/{suite}/"
    for name in ("InRelease", "Release"):
        try:
            text = (lists / (base + name).replace("/", "_")).read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if line.lower().startswith("origin:"):
                return line.partition(":")[2].strip()
    return None


def is_debian_entry(entry: dict, lists: Path | None = None) -> bool:
    """The entry is Debian's archive (or its security archive): the Origin of its Release file where apt's
    lists have one decides; else its suites must be Debian's and its keyring must not name ubuntu."""
    for suite in entry["suites"]:
        origin = release_origin(entry["uris"][0], suite, lists)
        if origin is not None:
            return origin.lower() == "debian"
    keyring = (entry.get("signed_by") or "").lower()
    if "ubuntu" in keyring:
        return False
    # a codename is Debian's; a bare suite name ("stable", as a browser vendor's repository has) only with
    # Debian's keyring
    bases = [_suite_base(s) for s in entry["suites"]]
    return bool(bases) and all(b in DEBIAN_CODENAMES or (b in DEBIAN_SUITE_NAMES and "debian" in keyring)
                               for b in bases)


def debian_entries(paths=None, lists: Path | None = None):
    """The `deb` entries of the apt sources under paths (the machine's when None) that are Debian's."""
    for entry in apt_entries(APT_SOURCE_FILES if paths is None else paths):
        if "deb" in entry["types"] and entry["uris"] and is_debian_entry(entry, lists):
            yield entry


def machine_archive_entry(paths=None, lists: Path | None = None) -> dict:
    """The URI and keyring of this machine's main Debian archive entry.

    Reads deb822 `.sources` and one-line `sources.list` files (the machine's own when paths is None, with
    apt's lists in lists); the first `deb` entry that is Debian's (is_debian_entry: an Ubuntu runner's
    archive and a vendor's repository are not) and whose suites are not all -security/-updates/-backports
    wins.  $CPYTHON_PERF_DEBIAN_ARCHIVE, when set, is taken instead of the machine's files (keys: apt's own).
    """
    override = os.environ.get(DEBIAN_ARCHIVE_ENV, "").strip()
    if override and paths is None:
        return {"uri": override, "signed_by": None}
    for entry in debian_entries(paths, lists):
        if all(s.endswith(DEBIAN_SUITE_SUFFIXES) or "/" in s for s in entry["suites"]):
            continue
        return {"uri": entry["uris"][0], "signed_by": entry.get("signed_by")}
    raise _NotHere("this machine has no Debian archive entry in its apt sources")


def debian_archive_uri() -> str | None:
    """The Debian archive the images are bootstrapped from: $CPYTHON_PERF_DEBIAN_ARCHIVE, else this machine's
    main Debian archive entry, else None: the archive mmdebstrap chooses by default for a Debian suite (and
    writes into the image's apt sources, from which the images' later apt steps take it)."""
    try:
        return machine_archive_entry()["uri"]
    except _NotHere:
        return None


def describe_archive(uri: str | None) -> str:
    """The archive in words, for logs and reports."""
    if uri is not None:
        return uri
    return f"mmdebstrap's default Debian archive (no ${DEBIAN_ARCHIVE_ENV}, no Debian entry in the apt sources)"


def apt_entries(paths=None):
    """Every entry of the apt source files under paths (deb822 `.sources` and one-line `.list` files; the
    machine's own when None)."""
    files: list[Path] = []
    for p in map(Path, APT_SOURCE_FILES if paths is None else paths):
        if p.is_dir():
            files += sorted(f for f in p.iterdir() if f.suffix in (".sources", ".list"))
        elif p.is_file():
            files.append(p)
    for f in files:
        try:
            text = f.read_text()
        except OSError:
            continue
        yield from _parse_apt_entries(text, deb822=f.suffix == ".sources")


def _parse_apt_entries(text: str, deb822: bool):
    if deb822:
        for stanza in text.split("\n\n"):
            fields: dict[str, str] = {}
            for line in stanza.splitlines():
                if line.startswith("#") or ":" not in line or line[:1].isspace():
                    continue
                key, _, value = line.partition(":")
                fields[key.strip().lower()] = value.strip()
            if fields.get("enabled", "yes").lower() == "no" or "uris" not in fields:
                continue
            yield {
                "types": fields.get("types", "").split(),
                "uris": fields["uris"].split(),
                "suites": fields.get("suites", "").split(),
                "signed_by": fields.get("signed-by"),
            }
    else:
        for line in text.splitlines():
            words = line.split("#", 1)[0].split()
            if len(words) < 3:
                continue
            options = {}
            if words[1].startswith("["):
                end = next(i for i, w in enumerate(words) if w.endswith("]"))
                for opt in " ".join(words[1:end + 1]).strip("[]").split():
                    k, _, v = opt.partition("=")
                    options[k] = v
                words = [words[0]] + words[end + 1:]
            if len(words) >= 3:
                yield {"types": [words[0]], "uris": [words[1]], "suites": [words[2]],
                       "signed_by": options.get("signed-by")}


def deb_src_stanza(suite: str, entry: dict) -> str:
    lines = ["Types: deb-src", f"URIs: {entry['uri']}", f"Suites: {suite}", "Components: main"]
    if entry.get("signed_by"):
        lines.append(f"Signed-By: {entry['signed_by']}")
    return "\n".join(lines) + "\n"


def _from_debian(recipe: Recipe, tmp: Path, log) -> Path:
    deb = recipe.debian
    if deb is None:
        raise _NotHere(f"no Debian source package mirrors {recipe.version} ({recipe.path.name} has debian: null)")
    if not shutil.which("apt-get"):
        raise _NotHere("apt-get is not installed on this machine")
    entry = machine_archive_entry()
    apt = tmp / "apt"
    for d in ("parts", "lists/partial", "cache/archives/partial", "dl"):
        (apt / d).mkdir(parents=True, exist_ok=True)
    (apt / "parts" / "cpython-perf-src.sources").write_text(deb_src_stanza(deb.suite, entry))
    options = [
        "-o", "Dir::Etc::SourceList=/dev/null",
        "-o", f"Dir::Etc::SourceParts={apt / 'parts'}",
        "-o", f"Dir::State::Lists={apt / 'lists'}",
        "-o", f"Dir::Cache={apt / 'cache'}",
        "-o", "APT::Sandbox::User=root",
        "-qq",
    ]
    log(f"fetching Debian source package {deb.package}/{deb.suite} from this machine's archive")
    for args in (["update"], ["source", "--download-only", f"{deb.package}/{deb.suite}"]):
        proc = subprocess.run(["apt-get", *options, *args], cwd=apt / "dl", capture_output=True, text=True)
        if proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            raise _NotHere(f"apt-get {' '.join(args)} failed: {' | '.join(detail)}")
    orig = apt / "dl" / deb.file
    if not orig.exists():
        found = ", ".join(p.name for p in (apt / "dl").iterdir()) or "nothing"
        raise _NotHere(f"{deb.package}/{deb.suite} no longer carries {deb.file} (got {found})")
    dest = tmp / recipe.filename
    os.replace(orig, dest)
    # the upstream signature Debian carries (python3.13's .orig.tar.xz.asc), checked by fetch_source
    suffix = signatures.signature_suffix(recipe.version)
    if (apt / "dl" / (deb.file + suffix)).is_file():
        os.replace(apt / "dl" / (deb.file + suffix), tmp / (recipe.filename + suffix))
    return dest

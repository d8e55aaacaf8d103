"""Fetch a packaging lane's source package, verify it, and cache it.

The package comes from this machine's own apt archive of the lane's
distribution (deb-src entries derived from its apt sources for the lane's
suites, the security archive for a security suite; no mirror host is written
into the project), exactly the
version matrix.yaml pins (`lanes.<lane>.package_version`).  Two checks, both
on every use:

  1. the signed index: `apt-get source --print-uris` gives, from the Sources
     index apt verified against the archive's signed InRelease, the sha256 and
     size of every file of the package (.dsc, orig tarball, debian tarball,
     upstream signature); the files must have exactly those bytes;
  2. the .dsc: every file it names (Checksums-Sha256) must be present with
     that sha256 and size.

A download is made in a temporary directory inside the cache and renamed into
place once both checks pass, so the cache never holds a half-made or
unverified package under its final name; a cached package whose files no
longer verify is deleted and fetched again.  The signed-index hashes are kept
beside the files (INDEX-SHA256) so a cache hit is checked against them too.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..source import sources
from ..errors import HashMismatch, SourceUnavailable
from ..matrix import Distribution, Lane

CACHE_ENV = "CPYTHON_PERF_DEBIAN_SOURCE_CACHE"
INDEX_FILE = "INDEX-SHA256"
_PRINT_URI = re.compile(r"^'(?P<uri>[^']+)' (?P<name>\S+) (?P<size>\d+) SHA256:(?P<sha256>[0-9a-f]{64})$")


@dataclass(frozen=True)
class SourcePackage:
    """A verified source package in the cache."""

    name: str
    version: str
    dsc: Path
    files: tuple[Path, ...]

    @property
    def directory(self) -> Path:
        return self.dsc.parent


def default_cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env)
    return sources.default_cache_dir().parent / "debian-sources"


def dsc_name(package: str, version: str) -> str:
    """The .dsc's file name (the epoch, if any, is not part of it)."""
    return f"{package}_{version.split(':', 1)[-1]}.dsc"


def parse_print_uris(text: str) -> dict[str, tuple[int, str]]:
    """`apt-get source --print-uris` lines -> {file name: (size, sha256)}."""
    files = {}
    for line in text.splitlines():
        m = _PRINT_URI.match(line.strip())
        if m:
            files[m["name"]] = (int(m["size"]), m["sha256"])
    return files


def dsc_checksums(dsc_text: str) -> dict[str, tuple[int, str]]:
    """The Checksums-Sha256 field of a .dsc -> {file name: (size, sha256)} (an OpenPGP-signed .dsc too)."""
    files: dict[str, tuple[int, str]] = {}
    inside = False
    for line in dsc_text.splitlines():
        if line.startswith("Checksums-Sha256:"):
            inside = True
            continue
        if inside:
            if not line.startswith(" "):
                break
            parts = line.split()
            if len(parts) == 3:
                files[parts[2]] = (int(parts[1]), parts[0])
    return files


def dsc_field(dsc_text: str, name: str) -> str:
    """A field of a .dsc (continuation lines joined), '' if absent."""
    value, inside = [], False
    for line in dsc_text.splitlines():
        if inside and line[:1] in (" ", "\t"):
            value.append(line.strip())
            continue
        inside = False
        if line.lower().startswith(name.lower() + ":"):
            value.append(line.split(":", 1)[1].strip())
            inside = True
    return " ".join(v for v in value if v)


def binary_packages(dsc_text: str) -> list[str]:
    return [p.strip() for p in dsc_field(dsc_text, "Binary").split(",") if p.strip()]


def verify_files(directory: Path, expected: dict[str, tuple[int, str]], what: str) -> list[str]:
    """Problems (empty: none) of the files in directory against {name: (size, sha256)}."""
    problems = []
    for name, (size, sha256) in sorted(expected.items()):
        path = directory / name
        if not path.is_file():
            problems.append(f"{name}: missing ({what} names it)")
            continue
        actual = sources.sha256_of(path)
        if actual != sha256 or path.stat().st_size != size:
            problems.append(f"{name}: sha256 {actual} ({path.stat().st_size} bytes), {what} says {sha256} ({size} bytes)")
    return problems


def _read_index(directory: Path) -> dict[str, tuple[int, str]]:
    files = {}
    for line in (directory / INDEX_FILE).read_text().splitlines():
        sha256, size, name = line.split()
        files[name] = (int(size), sha256)
    return files


def _write_index(directory: Path, files: dict[str, tuple[int, str]]) -> None:
    (directory / INDEX_FILE).write_text("".join(f"{sha} {size} {name}\n" for name, (size, sha) in sorted(files.items())))


def check_cached(directory: Path, package: str, version: str) -> list[str]:
    """Why a cached package directory is not usable (empty: it verifies)."""
    if not (directory / INDEX_FILE).is_file():
        return [f"{INDEX_FILE} missing"]
    index = _read_index(directory)
    problems = verify_files(directory, index, "the signed Sources index")
    dsc = directory / dsc_name(package, version)
    if dsc.is_file():
        problems += verify_files(directory, dsc_checksums(dsc.read_text(errors="replace")), "the .dsc")
    else:
        problems.append(f"{dsc.name} missing")
    return problems


def archive_env(distribution: Distribution, security: bool = False) -> str:
    """The variable naming the distribution's archive (or its security archive) where the machine's apt
    sources do not: CPYTHON_PERF_DEBIAN_ARCHIVE, CPYTHON_PERF_DEBIAN_SECURITY_ARCHIVE."""
    key = distribution.key.upper().replace("-", "_")
    return f"CPYTHON_PERF_{key}_{'SECURITY_' if security else ''}ARCHIVE"


def is_distribution_entry(entry: dict, distribution: Distribution, lists: Path | None = None) -> bool:
    """The apt entry is the distribution's archive (or its security archive): the Origin of its Release file
    where apt's lists have one decides; else its suites must all be of the distribution's releases, or its
    keyring be one of the same name as the distribution's (matrix.yaml distributions.<key>.keyring)."""
    for suite in entry["suites"]:
        origin = sources.release_origin(entry["uris"][0], suite, lists)
        if origin is not None:
            return origin.lower() == distribution.origin.lower()
    signed_by = entry.get("signed_by") or ""
    if signed_by and Path(signed_by).stem == distribution.keyring.stem:
        return True
    return bool(entry["suites"]) and all(distribution.owns_suite(s) for s in entry["suites"])


def archive_entries(distribution: Distribution, paths=None, environ=None, lists=None) -> dict[str, dict]:
    """This machine's archive entries of the distribution: {"main": {...}, "security": {...}} (uri,
    signed_by).  The main archive is $CPYTHON_PERF_<KEY>_ARCHIVE where set (a machine whose own apt sources
    are not the distribution's, a CI runner), else the first of the machine's `deb` entries that is the
    distribution's (is_distribution_entry) and names a release itself; the security archive likewise
    $CPYTHON_PERF_<KEY>_SECURITY_ARCHIVE, else the distribution's entry of a security suite, if the machine
    has one.  paths and lists: the machine's own apt files when None."""
    environ = os.environ if environ is None else environ
    entries = [e for e in sources.apt_entries(sources.APT_SOURCE_FILES if paths is None else paths)
               if "deb" in e["types"] and e["uris"] and is_distribution_entry(e, distribution, lists)]
    found = {}
    override = environ.get(archive_env(distribution), "").strip()
    if override and paths is None:
        found["main"] = {"uri": override, "signed_by": None}
    else:
        main = next((e for e in entries if any(distribution.release_number(s) for s in e["suites"])), None)
        if main is None:
            raise SourceUnavailable(f"this machine has no {distribution.name} archive entry in its apt sources "
                                    f"(set ${archive_env(distribution)} to name one)")
        found["main"] = {"uri": main["uris"][0], "signed_by": main.get("signed_by")}
    override = environ.get(archive_env(distribution, security=True), "").strip()
    if override and paths is None:
        found["security"] = {"uri": override, "signed_by": None}
    for entry in entries:
        if any(distribution.is_security_suite(s) for s in entry["suites"]):
            found.setdefault("security", {"uri": entry["uris"][0], "signed_by": entry.get("signed_by")})
    return found


def entry_for(distribution: Distribution, suite: str, entries: dict[str, dict]) -> dict:
    """The archive entry a suite comes from: a security suite from the security archive (if the machine has
    one), every other from the main archive."""
    if distribution.is_security_suite(suite):
        return entries.get("security", entries["main"])
    return entries["main"]


def deb_src_stanzas(distribution: Distribution, suites, entries: dict[str, dict]) -> str:
    """deb-src stanzas for suites, each from its archive (entry_for)."""
    return "\n".join(sources.deb_src_stanza(suite, entry_for(distribution, suite, entries)) for suite in suites)


def apt_sandbox(apt: Path, distribution: Distribution, suites, entries: dict[str, dict], cwd: Path | None = None):
    """apt-get (or, with tool=, apt-cache) with only the deb-src entries of suites, its lists and cache
    under apt (a directory of the caller's): `apt_get("update")`, `apt_get("showsrc", p, tool="apt-cache")`."""
    for d in ("parts", "lists/partial", "cache/archives/partial"):
        (apt / d).mkdir(parents=True, exist_ok=True)
    (apt / "parts" / "cpython-perf-lanes.sources").write_text(deb_src_stanzas(distribution, suites, entries))
    options = ["-o", "Dir::Etc::SourceList=/dev/null", "-o", f"Dir::Etc::SourceParts={apt / 'parts'}",
               "-o", f"Dir::State::Lists={apt / 'lists'}", "-o", f"Dir::Cache={apt / 'cache'}",
               "-o", "APT::Sandbox::User=root", "-q"]

    def apt_get(*args, tool="apt-get"):
        return subprocess.run([tool, *options, *args], cwd=cwd or apt, capture_output=True, text=True)

    return apt_get


def _apt_archive(distribution: Distribution, entries: dict[str, dict] | None, what: str = "") -> dict[str, dict]:
    """This machine's archive entries of the distribution (entries when given), or SourceUnavailable naming
    what is missing (prefixed with what, e.g. "python3.11 3.11.2-6: ")."""
    if not shutil.which("apt-get"):
        raise SourceUnavailable(f"{what}apt-get is not installed on this machine")
    if entries is not None:
        return entries
    try:
        return archive_entries(distribution)
    except Exception as exc:   # no archive entry
        raise SourceUnavailable(f"{what}{exc}") from None


def archive_source_versions(package: str, suites, distribution: Distribution,
                            entries: dict[str, dict] | None = None) -> list[tuple[str, str]]:
    """[(version, suite)] of a source package in suites of this machine's archive, from the Sources indices
    apt verified against the signed InRelease files.  SourceUnavailable when the archive cannot be read."""
    entries = _apt_archive(distribution, entries)
    with tempfile.TemporaryDirectory(prefix="cpython-perf-apt-") as tmp:
        apt_get = apt_sandbox(Path(tmp), distribution, suites, entries)
        proc = apt_get("update")
        if proc.returncode != 0 or re.search(r"^(W|E): Failed to fetch", proc.stderr, re.M):
            raise SourceUnavailable(f"apt-get update failed for {', '.join(suites)}: {_tail(proc)}")
        proc = apt_get("madison", package, tool="apt-cache")
    return parse_madison(proc.stdout)


def source_served(package: str, version: str, suites, distribution: Distribution,
                  entries: dict[str, dict] | None = None) -> bool:
    """Whether the archive's pool serves the .dsc of a source package version its signed Sources index lists
    (an archive can list a revision before its pool has it).  Only the .dsc is downloaded, with apt's own
    transport and configuration (apt-helper download-file, checked against the index's size and sha256).
    SourceUnavailable when the archive cannot be read or does not list the version."""
    entries = _apt_archive(distribution, entries)
    with tempfile.TemporaryDirectory(prefix="cpython-perf-apt-") as tmp:
        apt_get = apt_sandbox(Path(tmp), distribution, suites, entries)
        proc = apt_get("update")
        if proc.returncode != 0:
            raise SourceUnavailable(f"apt-get update failed for {', '.join(suites)}: {_tail(proc)}")
        proc = apt_get("source", "--print-uris", f"{package}={version}")
        dsc = dsc_name(package, version)
        uri = next((m.group(1) for m in re.finditer(r"^'(\S+)' (\S+) ", proc.stdout, re.M) if m.group(2) == dsc),
                   None)
        if proc.returncode != 0 or uri is None:
            raise SourceUnavailable(f"{package} {version} is not listed in {', '.join(suites)}: {_tail(proc)}")
        size, sha256 = parse_print_uris(proc.stdout)[dsc]
        target = Path(tmp) / dsc
        fetched = subprocess.run(["/usr/lib/apt/apt-helper", "-o", "APT::Sandbox::User=root", "download-file", uri,
                                  str(target), f"SHA256:{sha256}"], capture_output=True, text=True)
        return fetched.returncode == 0 and target.is_file() and target.stat().st_size == size


def parse_madison(text: str) -> list[tuple[str, str]]:
    """`apt-cache madison` lines of Sources indices -> [(version, suite)]."""
    found = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split("|")]
        if len(parts) == 3 and parts[2].endswith(" Sources"):
            found.append((parts[1], parts[2].split()[-2].split("/", 1)[0]))
    return found


def fetch_source_package(lane: Lane, cache_dir: Path | None = None, log=print) -> SourcePackage:
    """The lane's source package (package_version exactly), verified, from the cache or the archive.

    Raises SourceUnavailable when the archive cannot be reached or no longer
    carries that version (naming the versions it does carry and the fix), and
    HashMismatch when a download does not have the signed index's bytes.
    """
    cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
    cache_dir.mkdir(parents=True, exist_ok=True)
    package, version = lane.source_package, lane.package_version
    final = cache_dir / f"{package}_{version}"
    if final.is_dir():
        problems = check_cached(final, package, version)
        if not problems:
            return _package(final, package, version)
        log(f"cached {package} {version} does not verify ({'; '.join(problems)}): deleted it, fetching again")
        shutil.rmtree(final)
    entries = _apt_archive(lane.distribution, None, f"{package} {version}: ")
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=cache_dir) as tmp:
        download = Path(tmp) / f"{package}_{version}"
        download.mkdir()
        apt_get = apt_sandbox(Path(tmp) / "apt", lane.distribution, lane.suites, entries, cwd=download)

        log(f"fetching {lane.distribution.name} source package {package} {version} from this machine's archive "
            f"({', '.join(lane.suites)})")
        proc = apt_get("update")
        if proc.returncode != 0:
            raise SourceUnavailable(f"{package} {version}: apt-get update failed for {', '.join(lane.suites)}: "
                                    f"{_tail(proc)}")
        spec = f"{package}={version}"
        proc = apt_get("source", "--print-uris", spec)
        index = parse_print_uris(proc.stdout)
        if proc.returncode != 0 or dsc_name(package, version) not in index:
            listed = re.findall(r"^Version: (\S+)$", apt_get("showsrc", package, tool="apt-cache").stdout, re.M)
            raise SourceUnavailable(
                f"{lane.distribution.name} source package {package} {version} is not in {', '.join(lane.suites)} "
                f"of this machine's archive (it lists {', '.join(sorted(set(listed))) or 'no version'}). Prove the "
                f"series on a version the archive carries and set lanes.{lane.name}.package_version in matrix.yaml to it.")
        proc = apt_get("source", "--download-only", spec)
        if proc.returncode != 0:
            raise SourceUnavailable(f"{package} {version}: apt-get source failed (the index lists it, the pool "
                                    f"did not serve it): {_tail(proc)}")
        problems = verify_files(download, index, "the signed Sources index")
        dsc = download / dsc_name(package, version)
        if not problems:
            problems = verify_files(download, dsc_checksums(dsc.read_text(errors="replace")), "the .dsc")
        if problems:
            raise HashMismatch(f"{lane.distribution.name} source package {package} {version} does not verify; "
                               "nothing cached:\n  "
                               + "\n  ".join(problems))
        for extra in download.iterdir():
            if extra.name not in index:
                extra.unlink()
        _write_index(download, index)
        os.replace(download, final)
    log(f"cached {package} {version} in {final} ({len(index)} files, verified against the signed index and the .dsc)")
    return _package(final, package, version)


def _package(directory: Path, package: str, version: str) -> SourcePackage:
    index = _read_index(directory)
    return SourcePackage(package, version, directory / dsc_name(package, version),
                         tuple(directory / name for name in sorted(index)))


def _tail(proc) -> str:
    return " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()

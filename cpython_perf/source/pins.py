"""`python -m cpython_perf pin`: keep the recipes' python.org pins current.

  pin [VERSION ...]            for each version (default: every pin that no
                               distro ships), find the newest final release
                               of the series on python.org, download it and
                               its signature, verify the signature
                               (signatures.py), and rewrite recipes/<version>.yaml
                               (version, url, sha256, size), its comments kept
  pin --check [VERSION ...]    list every pin with a newer release; exit 1 if
                               there is one, 0 if not; nothing is changed
  pin ... --releases-from FILE take the releases from FILE (YAML: version ->
                               {sha256, size, sources}) instead of python.org:
                               release data gathered elsewhere (pyenv's
                               python-build, Debian's signed Sources index);
                               a pin made from it says its signature was not
                               checked

Versions whose recipe names a Debian source package (`debian:`, the versions
pinned because distros ship them: 3.9.2, 3.11.2, 3.13.5) are left alone unless
named.  Pre-releases (a, b, rc) are never chosen, and a pre-release pin is
refused, unless matrix.yaml allows it for the version (`prerelease: true`).

Where python.org cannot be reached the command says so and exits 3 (Offline),
changing nothing.  The network is one object (PythonOrg, its `fetch_text` and
`download` injectable), so the tests exercise listing parsing, the choice of
release, the recipe rewriting and the offline error without a network.
"""

from __future__ import annotations

import datetime
import html.parser
import os
import re
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import yaml

from . import signatures, sources
from ..errors import DriverError, MatrixError
from ..matrix import Matrix, Recipe, load_recipe

_RELEASE = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:(a|b|rc)(\d+))?")
_LEVELS = {"a": 0, "b": 1, "rc": 2, None: 3}
EXIT_NEWER = 1
EXIT_OFFLINE = 3


class Offline(DriverError):
    """python.org (or the configured mirror) cannot be reached."""

    exit_code = EXIT_OFFLINE


class PinError(DriverError):
    """A pin cannot be made (pre-release not allowed, signature not checkable, ...)."""


def release_key(version: str) -> tuple[int, int, int, int, int]:
    """Sort key of a CPython release number: 3.15.0a1 < 3.15.0b1 < 3.15.0rc1 < 3.15.0 < 3.15.1."""
    m = _RELEASE.fullmatch(version)
    if not m:
        raise ValueError(f"{version!r} is not a CPython release number")
    major, minor, micro, level, serial = m.groups()
    return int(major), int(minor), int(micro), _LEVELS[level], int(serial or 0)


def is_prerelease(version: str) -> bool:
    return release_key(version)[3] != _LEVELS[None]


def series_of(version: str) -> str:
    return ".".join(version.split(".")[:2])


# --------------------------------------------------------------------------
# python.org's download tree: https://www.python.org/ftp/python/<X.Y.Z>/Python-<version>.tar.xz


class _Links(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.hrefs += [value for name, value in attrs if name == "href" and value]


def parse_listing(text: str) -> list[str]:
    """The link targets of a directory listing page (python.org's FTP tree is served as one)."""
    parser = _Links()
    parser.feed(text)
    return [href.split("?")[0] for href in parser.hrefs]


def release_dirs(listing: str, series: str) -> list[str]:
    """The X.Y.Z directories of series in the root listing, newest first."""
    dirs = {h.rstrip("/").rsplit("/", 1)[-1] for h in parse_listing(listing)}
    found = [d for d in dirs if re.fullmatch(re.escape(series) + r"\.\d+", d)]
    return sorted(found, key=release_key, reverse=True)


def tarballs_in(listing: str, directory: str) -> list[str]:
    """Release numbers of the `Python-<version>.tar.xz` files of one X.Y.Z directory listing."""
    versions = set()
    for href in parse_listing(listing):
        m = re.fullmatch(r"Python-(" + re.escape(directory) + r"(?:(?:a|b|rc)\d+)?)\.tar\.xz", href.rsplit("/", 1)[-1])
        if m:
            versions.add(m.group(1))
    return sorted(versions, key=release_key, reverse=True)


@dataclass(frozen=True)
class Release:
    version: str
    url: str
    sha256: str | None = None      # known without downloading (a releases file), else None
    size: int | None = None
    sources: tuple[str, ...] = ()


class PythonOrg:
    """python.org's FTP tree (or $CPYTHON_PERF_PYTHON_ORG_MIRROR): listings and downloads.

    fetch_text(url) -> str and download(url, dest) are the network; tests pass their own.  Every network
    failure becomes Offline, naming the URL and the reason."""

    def __init__(self, base: str | None = None, fetch_text=None, download=None, timeout: float = 20):
        self.base = (base or os.environ.get(sources.MIRROR_ENV) or sources.PYTHON_ORG_FTP).rstrip("/")
        self.timeout = timeout
        self._fetch_text = fetch_text or self._urlopen_text
        self._download = download or self._urlopen_download

    def describe(self) -> str:
        return self.base

    def _urlopen_text(self, url: str) -> str:
        with urllib.request.urlopen(url, timeout=self.timeout) as response:
            return response.read().decode("utf-8", "replace")

    def _urlopen_download(self, url: str, dest: Path) -> None:
        sources.download(url, dest, self.timeout)

    def _offline(self, url: str, exc: BaseException) -> Offline:
        reason = getattr(exc, "reason", None) or exc
        return Offline(f"python.org cannot be reached from this machine ({url}: {reason}). `pin` needs "
                       f"{sources.PYTHON_ORG_FTP}/ (or a mirror of it in ${sources.MIRROR_ENV}); "
                       "nothing was changed. Run it where python.org answers (the weekly CI job does), or "
                       "give release data gathered elsewhere with --releases-from FILE.")

    def _get(self, url: str, get):
        """get() with python.org's failures sorted: a 404 is FileNotFoundError, anything else is Offline."""
        try:
            return get()
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                raise FileNotFoundError(url) from None
            raise self._offline(url, exc) from None
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            raise self._offline(url, exc) from None

    def text(self, url: str) -> str:
        return self._get(url, lambda: self._fetch_text(url))

    def download(self, url: str, dest: Path) -> None:
        self._get(url, lambda: self._download(url, dest))

    def newest(self, series: str, allow_prerelease: bool) -> Release | None:
        """The newest release of series (final only, unless allow_prerelease), or None if there is none."""
        try:
            root = self.text(self.base + "/")
        except FileNotFoundError:
            raise PinError(f"{self.base}/ answers 404: not python.org's download tree (check "
                           f"${sources.MIRROR_ENV})") from None
        best: str | None = None
        for directory in release_dirs(root, series):
            try:
                listing = self.text(f"{self.base}/{directory}/")
            except FileNotFoundError:
                continue
            for version in tarballs_in(listing, directory):
                if is_prerelease(version) and not allow_prerelease:
                    continue
                if best is None or release_key(version) > release_key(best):
                    best = version
            if best is not None:
                break     # every release in an older X.Y.Z directory is older
        if best is None:
            return None
        directory = ".".join(str(n) for n in release_key(best)[:3])
        return Release(best, f"{sources.PYTHON_ORG_FTP}/{directory}/Python-{best}.tar.xz")


class ReleasesFile:
    """Release data gathered elsewhere: a YAML mapping `"3.15.0": {sha256, size, sources: [...]}`."""

    def __init__(self, path: Path):
        self.path = Path(path)
        try:
            data = yaml.safe_load(self.path.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise DriverError(f"--releases-from {self.path}: cannot read it: {exc}") from None
        if not isinstance(data, dict):
            raise DriverError(f"--releases-from {self.path}: must be a mapping of release numbers to "
                              "{sha256, size, sources}")
        self.releases: dict[str, Release] = {}
        for version, spec in data.items():
            version = str(version)
            if not _RELEASE.fullmatch(version) or not isinstance(spec, dict):
                raise DriverError(f"--releases-from {self.path}: {version!r} is not a release number with a "
                                  "mapping {sha256, size, sources}")
            sha256 = str(spec.get("sha256", ""))
            if not re.fullmatch(r"[0-9a-f]{64}", sha256):
                raise DriverError(f"--releases-from {self.path}: {version}: sha256 must be 64 lower-case hex digits")
            size = spec.get("size")
            if size is not None and (not isinstance(size, int) or size <= 0):
                raise DriverError(f"--releases-from {self.path}: {version}: size must be a number of bytes or null")
            directory = ".".join(str(n) for n in release_key(version)[:3])
            self.releases[version] = Release(version, f"{sources.PYTHON_ORG_FTP}/{directory}/Python-{version}.tar.xz",
                                             sha256, size, tuple(str(s) for s in spec.get("sources") or ()))

    def describe(self) -> str:
        return str(self.path)

    def newest(self, series: str, allow_prerelease: bool) -> Release | None:
        found = [r for v, r in self.releases.items() if series_of(v) == series
                 and (allow_prerelease or not is_prerelease(v))]
        return max(found, key=lambda r: release_key(r.version), default=None)


# --------------------------------------------------------------------------
# The recipe file, edited as text (its comments kept)


def rewrite_recipe(text: str, version: str, url: str, sha256: str, size: int | None, note: str | None = None) -> str:
    """The recipe's text with version, url, sha256 and size replaced; every other line, comments included,
    as it was.  note, if given, becomes the comment at the end of the sha256 line."""
    values = {"version": version, "url": url, "sha256": sha256, "size": "null" if size is None else str(size)}
    out, seen = [], set()
    for line in text.splitlines(keepends=True):
        m = re.match(r"^(version|url|sha256|size):(\s*)(\S+)(\s*#.*)?(\r?\n)?$", line)
        if m and m.group(1) not in seen:
            key, space, _old, comment, eol = m.groups()
            seen.add(key)
            if key == "sha256" and note:
                comment = f"   # {note}"
            line = f"{key}:{space or ' '}{values[key]}{comment or ''}{eol or ''}"
        out.append(line)
    missing = set(values) - seen - {"size"}
    if missing:
        raise PinError(f"the recipe has no top-level {', '.join(sorted(missing))} line to rewrite")
    if "size" not in seen:
        # after the sha256 line
        index = next(i for i, line in enumerate(out) if line.startswith("sha256:"))
        out.insert(index + 1, f"size: {values['size']}\n")
    return "".join(out)


def write_recipe(recipe: Recipe, version_key: str, new_text: str) -> Recipe:
    """Replace recipe's file with new_text once it loads as a valid recipe (atomically: a temporary file
    in the same directory, renamed)."""
    path = recipe.path
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(new_text)
        loaded = load_recipe(Path(tmp), version_key)
        os.replace(tmp, path)
    except MatrixError as exc:
        raise PinError(f"the rewritten {path.name} does not load ({exc}); left unchanged") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return Recipe(loaded.version, loaded.url, loaded.sha256, loaded.size, loaded.debian, loaded.configure, path)


# --------------------------------------------------------------------------
# The command


def recipes_of(matrix: Matrix) -> dict[str, Recipe]:
    """version key (3.15) -> its recipe, from the matrix's cells."""
    found: dict[str, Recipe] = {}
    for cell in matrix.cells.values():
        found.setdefault(cell.version, cell.recipe)
    return dict(sorted(found.items(), key=lambda kv: tuple(int(n) for n in kv[0].split("."))))


def selected(matrix: Matrix, names: list[str]) -> dict[str, Recipe]:
    recipes = recipes_of(matrix)
    unknown = [n for n in names if n not in recipes]
    if unknown:
        raise DriverError(f"unknown version {', '.join(unknown)} (versions of {matrix.path.name}: {', '.join(recipes)})")
    if names:
        return {n: recipes[n] for n in names}
    return {v: r for v, r in recipes.items() if r.debian is None}


def check(matrix: Matrix, names: list[str], source, log=print) -> list[str]:
    """Lines `3.15: pinned 3.15.0b1, newest 3.15.2` for every selected pin with a newer release."""
    newer = []
    for version, recipe in selected(matrix, names).items():
        allow = version in matrix.prerelease_versions
        release = source.newest(version, allow)
        if release is None:
            log(f"{version}: pinned {recipe.version}; {source.describe()} lists no "
                f"{'' if allow else 'final '}release of {version}")
            continue
        if release_key(release.version) > release_key(recipe.version):
            line = f"{version}: pinned {recipe.version}, newest {release.version} ({recipe.path.name})"
            newer.append(line)
            log(line)
        else:
            log(f"{version}: pinned {recipe.version}, the newest{' final' if not allow else ''} release")
        if is_prerelease(recipe.version) and not allow:
            line = (f"{version}: pinned {recipe.version} is a pre-release, which matrix.yaml does not allow for "
                    f"{version} (prerelease: true)")
            newer.append(line)
            log(line)
    return newer


def pin(matrix: Matrix, names: list[str], source, log=print, cache_dir: Path | None = None) -> list[str]:
    """Bring the selected pins to their newest release; return what changed (lines)."""
    changed = []
    for version, recipe in selected(matrix, names).items():
        allow = version in matrix.prerelease_versions
        release = source.newest(version, allow)
        if release is None:
            raise PinError(f"{source.describe()} lists no {'' if allow else 'final '}release of {version}; "
                           f"{recipe.path.name} left at {recipe.version}")
        if is_prerelease(release.version) and not allow:
            raise PinError(f"{release.version} is a pre-release; matrix.yaml does not allow one for {version} "
                           f"(add `prerelease: true` to versions.\"{version}\")")
        if release_key(release.version) <= release_key(recipe.version) and not (
                is_prerelease(recipe.version) and not allow):
            log(f"{version}: {recipe.version} is the newest release; {recipe.path.name} unchanged")
            continue
        if isinstance(source, PythonOrg):
            sha256, size, note = _download_and_verify(source, release, cache_dir, log)
        else:
            sha256, size = release.sha256, release.size
            note = (f"sha256 as {', '.join(release.sources) or source.describe()} give it; signature not checked "
                    f"(python.org not reached; pin {datetime.date.today().isoformat()})")
        text = rewrite_recipe(recipe.path.read_text(), release.version, release.url, sha256, size, note)
        if recipe.debian is not None:
            # the Debian source package mirrors the old release only
            text = re.sub(r"(?m)^debian:.*$", "debian: null", text, count=1)
            log(f"{version}: {recipe.path.name} named {recipe.debian.package}/{recipe.debian.suite}'s "
                f"{recipe.debian.file}, which mirrors {recipe.version}, not {release.version}: set to debian: null "
                "(this version was pinned because a distro ships it: check its series and packaging lanes)")
        write_recipe(recipe, version, text)
        line = f"{version}: {recipe.version} -> {release.version} (sha256 {sha256}, {size or '?'} bytes) in {recipe.path.name}"
        changed.append(line)
        log(line)
    return changed


def _download_and_verify(source: PythonOrg, release: Release, cache_dir: Path | None, log):
    """Download the release and its signature into the source cache (temporary names), verify the
    signature, and keep both under their final names; return (sha256, size, note)."""
    cache_dir = Path(cache_dir) if cache_dir else sources.default_cache_dir()
    cache_dir.mkdir(parents=True, exist_ok=True)
    name = release.url.rsplit("/", 1)[-1]
    suffix = signatures.signature_suffix(release.version)
    url = source.base + release.url[len(sources.PYTHON_ORG_FTP):]
    with tempfile.TemporaryDirectory(prefix=".pin-", dir=cache_dir) as tmp:
        tarball, signature = Path(tmp) / name, Path(tmp) / (name + suffix)
        log(f"downloading {url}")
        try:
            source.download(url, tarball)
        except FileNotFoundError:
            raise PinError(f"{url} answers 404 though its directory lists it: not pinned") from None
        try:
            source.download(url + suffix, signature)
        except FileNotFoundError:
            raise PinError(f"python.org publishes no {name + suffix} for {release.version}: not pinned "
                           "without its signature") from None
        result = signatures.verify_release(release.version, tarball, signature)
        if not result.verified:
            raise PinError(f"{release.version} not pinned: {result}")
        log(f"signature: {result}")
        sha256, size = sources.sha256_of(tarball), tarball.stat().st_size
        os.replace(signature, cache_dir / signature.name)
        os.replace(tarball, cache_dir / name)
    kind = "OpenPGP" if suffix == ".asc" else "Sigstore"
    return sha256, size, (f"python.org, {kind} signature checked ({signatures.signer_for(release.version).name}); "
                          f"pin {datetime.date.today().isoformat()}")


def main(matrix: Matrix, args, log=print) -> int:
    """The `pin` command: returns the exit status (0, EXIT_NEWER with --check when a pin is stale)."""
    source = ReleasesFile(Path(args.releases_from)) if args.releases_from else PythonOrg()
    if args.check:
        newer = check(matrix, args.versions, source, log)
        if newer:
            log(f"{len(newer)} pin(s) behind {source.describe()}; run `python -m cpython_perf pin "
                f"{' '.join(dict.fromkeys(line.split(':')[0] for line in newer))}`")
            return EXIT_NEWER
        log(f"every checked pin is the newest release ({source.describe()})")
        return 0
    pin(matrix, args.versions, source, log)
    return 0


def add_arguments(parser) -> None:
    parser.add_argument("versions", nargs="*", metavar="VERSION",
                        help="series to pin (e.g. 3.15); default: every pin no distro ships")
    parser.add_argument("--check", action="store_true",
                        help="list pins with a newer release and exit 1 if any; change nothing")
    parser.add_argument("--releases-from", metavar="FILE", default=None,
                        help="release data (YAML: version -> {sha256, size, sources}) instead of python.org")

"""Release signatures (cpython_perf/source/signatures.py) and `build`'s use of them (sources.fetch_source).

OpenPGP for real: CPython 3.13.5's tarball with the upstream signature Debian's python3.13 source package
carries, checked with gpgv against keys/thomas-wouters.asc; a tampered tarball and a wrong key must fail.
Sigstore for real: a real bundle of a real artefact from PyPI (tests/data/sigstore/README.md), through the
same verify_sigstore python.org's 3.14+ bundles take; python.org's own bundles cannot be fetched here, so
that path runs for real only where python.org is reached (`pin`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from cpython_perf.source import signatures, sources
from cpython_perf.errors import SourceUnavailable
from cpython_perf.matrix import PROJECT_ROOT, load_matrix

DATA = PROJECT_ROOT / "tests" / "data" / "sigstore"
WHEEL = "rfc8785-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "c4e92e9ecc828bef2aa7dba1de8ac983511f7532a0df11c770d39099a25cf201"
WHEEL_IDENTITY = "https://github.com/trailofbits/rfc8785.py/.github/workflows/release.yml@refs/tags/v0.1.2"
WHEEL_ISSUER = "https://token.actions.githubusercontent.com"


# --------------------------------------------------------------------------
# the keys kept in the repository


def test_every_kept_key_has_the_recorded_fingerprint():
    kept = 0
    for signer in signatures.RELEASE_MANAGERS:
        if signer.key_path and signer.key_path.is_file():
            data = signatures.check_key_file(signer)       # raises if the file holds another key
            assert signatures.primary_fingerprint(data) == signer.fingerprint
            kept += 1
    assert kept >= 2, "keys/ should hold Thomas Wouters' and Łukasz Langa's keys"
    assert {p.name for p in (PROJECT_ROOT / "keys").glob("*.asc")} <= {
        s.key_file for s in signatures.RELEASE_MANAGERS if s.key_file}, "a key file no release manager names"


def test_a_key_file_with_another_key_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(signatures, "KEYS_DIR", tmp_path)
    shutil.copy(PROJECT_ROOT / "keys" / "lukasz-langa.asc", tmp_path / "thomas-wouters.asc")
    with pytest.raises(signatures.SignatureError, match="holds the key E3FF2839C048B25C084DEBE9B26995E310250568, "
                                                        "not Thomas Wouters's 7169605F62C751356D054A26A821E680E5FA6305"):
        signatures.check_key_file(signatures.signer_for("3.13.5"))


def test_signers_per_series():
    assert signatures.signer_for("3.9.2").fingerprint == "E3FF2839C048B25C084DEBE9B26995E310250568"
    assert signatures.signer_for("3.11.2").fingerprint == "A035C8C19219BA821ECEA86B64E628F8D684696D"
    assert signatures.signer_for("3.13.5").fingerprint == "7169605F62C751356D054A26A821E680E5FA6305"
    assert (signatures.signer_for("3.14.8").identity, signatures.signer_for("3.14.8").issuer) == \
        ("hugo@python.org", "https://github.com/login/oauth")
    assert signatures.signer_for("3.15.0").identity == "hugo@python.org"      # PEP 790: Hugo van Kemenade
    assert signatures.signer_for("3.16.0a1").identity == "savannah@python.org"
    assert [signatures.signature_suffix(v) for v in ("3.9.2", "3.13.5", "3.14.8", "3.15.0")] == \
        [".asc", ".asc", ".sigstore", ".sigstore"]
    with pytest.raises(signatures.SignatureError, match="no release manager is recorded for CPython 3.7"):
        signatures.signer_for("3.7.17")


# --------------------------------------------------------------------------
# OpenPGP, for real: 3.13.5 and the .asc from Debian's python3.13 source package


@pytest.fixture(scope="module")
def release_3135():
    """(tarball, .asc): the tarball through the project's source fetch, the signature from Debian's verified
    python3.13 source package (lanes/source_packages.py, its cache or the archive)."""
    if not shutil.which("gpgv"):
        pytest.skip("gpgv is not installed (apt-get install gpgv)")
    from cpython_perf.lanes import source_packages

    matrix = load_matrix()
    try:
        tarball = sources.fetch_source(matrix.cell("3.13-fp").recipe, log=lambda *_: None)
        package = source_packages.fetch_source_package(matrix.lane("trixie-3.13"), log=lambda *_: None)
    except SourceUnavailable as exc:
        pytest.skip(f"3.13.5's tarball or Debian's python3.13 source package cannot be had here: {exc}")
    asc = package.directory / "python3.13_3.13.5.orig.tar.xz.asc"
    assert asc.is_file(), f"{package.directory} has no upstream signature"
    return tarball, asc


def test_openpgp_good_signature(release_3135):
    tarball, asc = release_3135
    result = signatures.verify_release("3.13.5", tarball, asc)
    assert result.verified
    assert "good: Thomas Wouters, key 7169605F62C751356D054A26A821E680E5FA6305" in str(result)
    assert "signed 2025-06-11" in str(result)


def test_openpgp_tampered_tarball_fails(release_3135, tmp_path):
    tarball, asc = release_3135
    data = bytearray(tarball.read_bytes())
    data[12345] ^= 0x20
    tampered = tmp_path / tarball.name
    tampered.write_bytes(bytes(data))
    with pytest.raises(signatures.SignatureError, match=r"does not verify Python-3\.13\.5\.tar\.xz as signed by "
                                                        r"Thomas Wouters .*BADSIG A821E680E5FA6305"):
        signatures.verify_release("3.13.5", tampered, asc)


def test_openpgp_wrong_key_fails(release_3135):
    tarball, asc = release_3135
    langa = signatures.signer_for("3.9.2")
    with pytest.raises(signatures.SignatureError, match="NO_PUBKEY A821E680E5FA6305"):
        signatures.verify_openpgp(tarball, asc, langa)


def test_openpgp_key_not_kept_is_reported_not_passed(release_3135):
    tarball, asc = release_3135
    pablo = signatures.signer_for("3.11.2")
    if pablo.key_path.is_file():
        pytest.skip("Pablo Galindo Salgado's key is kept now")
    result = signatures.verify_openpgp(tarball, asc, pablo)
    assert not result.verified and "NOT checked" in str(result) and "A035C8C19219BA821ECEA86B64E628F8D684696D" in str(result)


# --------------------------------------------------------------------------
# build's source fetch: a signature at hand is checked, a bad one stops everything


def fake_remote(monkeypatch, tarball_bytes: bytes, asc: Path | None):
    """python.org answering with tarball_bytes (and asc next to it); Debian never asked."""
    def from_python_org(recipe, tmp, log):
        (tmp / recipe.filename).write_bytes(tarball_bytes)
        if asc is not None:
            shutil.copy(asc, tmp / (recipe.filename + ".asc"))
        return tmp / recipe.filename

    def from_debian(recipe, tmp, log):
        raise AssertionError("Debian must not be asked")

    monkeypatch.setattr(sources, "_from_python_org", from_python_org)
    monkeypatch.setattr(sources, "_from_debian", from_debian)


def test_fetch_checks_the_signature_and_keeps_it(release_3135, tmp_path, monkeypatch):
    tarball, asc = release_3135
    fake_remote(monkeypatch, tarball.read_bytes(), asc)
    monkeypatch.setenv(sources.DEBIAN_SOURCE_CACHE_ENV, str(tmp_path / "no-debian-cache"))
    recipe = load_matrix().cell("3.13-fp").recipe
    cache, log = tmp_path / "cache", []
    path = sources.fetch_source(recipe, cache, log=log.append)
    assert sorted(p.name for p in cache.iterdir()) == ["Python-3.13.5.tar.xz", "Python-3.13.5.tar.xz.asc"]
    said = "\n".join(log)
    assert "signature: OpenPGP signature Python-3.13.5.tar.xz.asc good: Thomas Wouters" in said
    assert "(from fetched with it from python.org)" in said
    # the next fetch is from the cache, and checks the kept signature again
    log.clear()
    assert sources.fetch_source(recipe, cache, log=log.append) == path
    assert "good: Thomas Wouters" in log[0] and "(from the source cache)" in log[0]


def test_fetch_with_a_bad_signature_caches_nothing(release_3135, tmp_path, monkeypatch):
    """A tarball with the pinned sha256 (a wrong pin) whose signature does not verify: SignatureError, and the
    cache stays empty, so nothing is built from it."""
    tarball, asc = release_3135
    bad = b"a tarball nobody signed\n" * 1000
    fake_remote(monkeypatch, bad, asc)
    monkeypatch.setenv(sources.DEBIAN_SOURCE_CACHE_ENV, str(tmp_path / "no-debian-cache"))
    recipe = dataclasses.replace(load_matrix().cell("3.13-fp").recipe, sha256=hashlib.sha256(bad).hexdigest(),
                                 size=len(bad))
    cache = tmp_path / "cache"
    with pytest.raises(signatures.SignatureError, match="does not verify Python-3.13.5.tar.xz"):
        sources.fetch_source(recipe, cache, log=lambda *_: None)
    assert list(cache.iterdir()) == []


def test_cached_tarball_is_checked_against_debian_s_signature(release_3135, tmp_path, monkeypatch):
    """The tarball in the source cache, the .asc only in Debian's source package cache: found and checked."""
    tarball, asc = release_3135
    cache, debian = tmp_path / "cache", tmp_path / "debian-sources"
    cache.mkdir()
    (debian / "python3.13_3.13.5-2+deb13u5").mkdir(parents=True)
    shutil.copy(asc, debian / "python3.13_3.13.5-2+deb13u5" / asc.name)
    shutil.copy(tarball, cache / tarball.name)
    monkeypatch.setenv(sources.DEBIAN_SOURCE_CACHE_ENV, str(debian))
    log = []
    sources.fetch_source(load_matrix().cell("3.13-fp").recipe, cache, log=log.append)
    assert "good: Thomas Wouters" in log[0] and "Debian source package python3.13 3.13.5-2+deb13u5" in log[0]


def test_no_signature_at_hand_is_said(tmp_path, monkeypatch):
    payload = b"x" * 100
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "Python-3.9.2.tar.xz").write_bytes(payload)
    monkeypatch.setenv(sources.DEBIAN_SOURCE_CACHE_ENV, str(tmp_path / "none"))
    recipe = dataclasses.replace(load_matrix().cell("3.9-fp").recipe, sha256=hashlib.sha256(payload).hexdigest(),
                                 size=len(payload))
    log = []
    sources.fetch_source(recipe, cache, log=log.append)
    assert log == ["signature: none at hand for Python-3.9.2.tar.xz (looked for its .asc in the source cache and "
                   "the Debian source package cache); the sha256 pin is the only check"]


# --------------------------------------------------------------------------
# Sigstore, for real, on a real bundle of a real artefact (python.org's bundles cannot be fetched here)


@pytest.fixture(scope="module")
def sigstore_wheel(tmp_path_factory):
    pytest.importorskip("sigstore", reason="the sigstore package is not installed (pip install "
                                           "'cpython-perf[signatures]')")
    cache = sources.default_cache_dir().parent / "test-assets"
    wheel = cache / WHEEL
    if not wheel.is_file() or hashlib.sha256(wheel.read_bytes()).hexdigest() != WHEEL_SHA256:
        download = tmp_path_factory.mktemp("pip")
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:",
                               "-d", str(download), "rfc8785==0.1.2"], capture_output=True, text=True)
        got = download / WHEEL
        if proc.returncode != 0 or not got.is_file():
            pytest.skip(f"rfc8785 0.1.2's wheel cannot be had from PyPI here: {proc.stderr.strip()[-300:]}")
        cache.mkdir(parents=True, exist_ok=True)
        shutil.move(got, wheel)
    return wheel


def test_sigstore_good_bundle(sigstore_wheel):
    result = signatures.verify_sigstore(sigstore_wheel, DATA / f"{WHEEL}.sigstore", WHEEL_IDENTITY, WHEEL_ISSUER)
    assert result.verified and f"good: {WHEEL_IDENTITY}, issuer {WHEEL_ISSUER}" in str(result)


def test_sigstore_tampered_artefact_fails(sigstore_wheel, tmp_path):
    data = bytearray(sigstore_wheel.read_bytes())
    data[-1] ^= 0x01
    with pytest.raises(signatures.SignatureError, match="message digest mismatch"):
        signatures.verify_sigstore(bytes(data), DATA / f"{WHEEL}.sigstore", WHEEL_IDENTITY, WHEEL_ISSUER)


@pytest.mark.parametrize("identity, issuer, said", [
    ("hugo@python.org", WHEEL_ISSUER, "SANs do not match hugo@python.org"),
    (WHEEL_IDENTITY, "https://github.com/login/oauth", "OIDCIssuer does not match"),
])
def test_sigstore_wrong_identity_or_issuer_fails(sigstore_wheel, identity, issuer, said):
    with pytest.raises(signatures.SignatureError, match=said):
        signatures.verify_sigstore(sigstore_wheel, DATA / f"{WHEEL}.sigstore", identity, issuer)


def test_python_org_path_demands_the_release_manager(sigstore_wheel, tmp_path):
    """verify_release for a 3.14 tarball uses python.org's identity for the series: a bundle by anyone else
    (here the wheel's GitHub workflow) is refused, naming hugo@python.org."""
    bundle = tmp_path / "Python-3.14.8.tar.xz.sigstore"
    shutil.copy(DATA / f"{WHEEL}.sigstore", bundle)
    with pytest.raises(signatures.SignatureError, match="as signed by hugo@python.org \\(https://github.com/login/oauth\\)"):
        signatures.verify_release("3.14.8", sigstore_wheel, bundle)


def test_sigstore_missing_package_is_reported_not_passed(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "sigstore", None)
    monkeypatch.setitem(sys.modules, "sigstore.verify", None)
    result = signatures.verify_sigstore(b"x", DATA / f"{WHEEL}.sigstore", WHEEL_IDENTITY, WHEEL_ISSUER)
    assert not result.verified and "NOT checked" in str(result) and "cpython-perf[signatures]" in str(result)

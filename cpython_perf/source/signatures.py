"""Check a CPython release tarball's signature the way python.org publishes it.

  - releases up to 3.13: an OpenPGP signature (`.asc`) by the series' release
    manager, checked with gpgv against that manager's key kept in this
    repository (keys/<name>.asc), whose primary-key fingerprint must be the
    one python.org lists (RELEASE_MANAGERS below);
  - 3.14 and later (PEP 761: no more OpenPGP): a Sigstore bundle
    (`.sigstore`), checked with the `sigstore` package (pyproject's
    `signatures` extra) against the release manager's identity and OIDC
    issuer as python.org documents them (https://www.python.org/downloads/metadata/sigstore/).

Sources (checked 2026-11-23): fingerprints as python.org's download pages and
docker-library/python's GPG_KEY list them; Sigstore identities as python.org's
Sigstore page and the release PEPs (peps.python.org/api/release-cycle.json:
3.14 and 3.15 Hugo van Kemenade, 3.16 and 3.17 Savannah Ostrowski) give them.

A bad signature raises SignatureError (a DriverError: clear message, exit
status 2).  Where no checker can run (gpgv not installed, sigstore not
installed, the key of a release manager not in the repository) the result
says so: `Checked.verified` is False with the reason, never a pass.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import DriverError
from ..matrix import PROJECT_ROOT, version_tuple

KEYS_DIR = PROJECT_ROOT / "keys"
SIGSTORE_EXTRA = "pip install 'cpython-perf[signatures]' (the sigstore package)"


class SignatureError(DriverError):
    """A release's signature does not verify (or names the wrong signer)."""


@dataclass(frozen=True)
class Signer:
    """Who signs a series' releases and how they are checked."""

    name: str
    series: tuple[str, ...]
    fingerprint: str | None = None        # OpenPGP primary key, as python.org lists it
    key_file: str | None = None           # under keys/
    identity: str | None = None           # Sigstore certificate identity
    issuer: str | None = None             # Sigstore OIDC issuer

    @property
    def key_path(self) -> Path | None:
        return KEYS_DIR / self.key_file if self.key_file else None


RELEASE_MANAGERS = (
    Signer("Łukasz Langa", ("3.8", "3.9"), fingerprint="E3FF2839C048B25C084DEBE9B26995E310250568",
           key_file="lukasz-langa.asc"),
    Signer("Pablo Galindo Salgado", ("3.10", "3.11"), fingerprint="A035C8C19219BA821ECEA86B64E628F8D684696D",
           key_file="pablo-galindo-salgado.asc"),
    Signer("Thomas Wouters", ("3.12", "3.13"), fingerprint="7169605F62C751356D054A26A821E680E5FA6305",
           key_file="thomas-wouters.asc"),
    Signer("Hugo van Kemenade", ("3.14", "3.15"), identity="hugo@python.org",
           issuer="https://github.com/login/oauth"),
    Signer("Savannah Ostrowski", ("3.16", "3.17"), identity="savannah@python.org",
           issuer="https://github.com/login/oauth"),
)


def signature_kind(version: str) -> str:
    """'openpgp' (.asc) for releases up to 3.13, 'sigstore' (.sigstore) from 3.14 on."""
    return "openpgp" if version_tuple(version) <= (3, 13) else "sigstore"


def signature_suffix(version: str) -> str:
    return ".asc" if signature_kind(version) == "openpgp" else ".sigstore"


def signer_for(version: str) -> Signer:
    series = ".".join(version.split(".")[:2])
    for signer in RELEASE_MANAGERS:
        if series in signer.series:
            return signer
    raise SignatureError(f"no release manager is recorded for CPython {series} in cpython_perf/source/signatures.py "
                         "(RELEASE_MANAGERS): add the one python.org lists for that series")


@dataclass(frozen=True)
class Checked:
    """The outcome of a signature check that did not fail: verified, or why it could not run."""

    verified: bool
    what: str

    def __str__(self) -> str:
        return self.what


# --------------------------------------------------------------------------
# OpenPGP


def dearmor(text: str) -> bytes:
    """The binary packets of an ASCII-armored OpenPGP block (its CRC line and headers dropped)."""
    lines = text.strip().splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith("-----BEGIN PGP "))
        end = next(i for i, line in enumerate(lines) if line.startswith("-----END PGP ") and i > start)
    except StopIteration:
        raise SignatureError("not an ASCII-armored OpenPGP block (no BEGIN/END PGP lines)") from None
    body = lines[start + 1:end]
    while body and body[0].strip():      # armor headers (Version:, Comment:) up to the blank line
        if ":" not in body[0]:
            break
        body = body[1:]
    data = "".join(line.strip() for line in body if line.strip() and not line.startswith("="))
    try:
        return base64.b64decode(data, validate=True)
    except ValueError as exc:
        raise SignatureError(f"the armored OpenPGP block is not valid base64: {exc}") from None


def _packets(data: bytes):
    """(tag, body) of each OpenPGP packet in data (RFC 4880 old and new formats)."""
    pos = 0
    while pos < len(data):
        head = data[pos]
        if not head & 0x80:
            raise SignatureError(f"malformed OpenPGP packet header at byte {pos}")
        if head & 0x40:                       # new format
            tag = head & 0x3F
            first = data[pos + 1]
            if first < 192:
                length, pos = first, pos + 2
            elif first < 224:
                length, pos = ((first - 192) << 8) + data[pos + 2] + 192, pos + 3
            elif first == 255:
                length, pos = int.from_bytes(data[pos + 2:pos + 6], "big"), pos + 6
            else:
                raise SignatureError("partial-length OpenPGP packets are not expected in a public key")
        else:                                 # old format
            tag, kind = (head >> 2) & 0x0F, head & 0x03
            size = {0: 1, 1: 2, 2: 4}.get(kind)
            if size is None:
                raise SignatureError("indeterminate-length OpenPGP packets are not expected in a public key")
            length, pos = int.from_bytes(data[pos + 1:pos + 1 + size], "big"), pos + 1 + size
        yield tag, data[pos:pos + length]
        pos += length


def primary_fingerprint(key_data: bytes) -> str:
    """The v4 fingerprint of the first public key packet: SHA-1 of 0x99, its 2-byte length and its body."""
    for tag, body in _packets(key_data):
        if tag == 6:
            if not body or body[0] != 4:
                raise SignatureError(f"the primary key is an OpenPGP v{body[0] if body else '?'} key; only v4 "
                                     "keys (every CPython release manager's) are handled")
            return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper()
    raise SignatureError("no public key packet in the key file")


def check_key_file(signer: Signer) -> bytes:
    """The binary key of signer from keys/, after checking its primary fingerprint is the recorded one."""
    path = signer.key_path
    if path is None or not path.is_file():
        raise _KeyMissing(f"{signer.name}'s key is not in the repository ({path}); add it there from python.org's "
                          f"list (fingerprint {signer.fingerprint}), checking the fingerprint")
    data = dearmor(path.read_text())
    actual = primary_fingerprint(data)
    if actual != signer.fingerprint:
        raise SignatureError(f"{path} holds the key {actual}, not {signer.name}'s {signer.fingerprint} as python.org "
                             "lists it: replace the file with the right key")
    return data


class _KeyMissing(Exception):
    pass


def verify_openpgp(artifact: Path, signature: Path, signer: Signer, gpgv: str | None = None) -> Checked:
    """Check an .asc signature of artifact by signer with gpgv and a keyring holding only signer's key.

    The signature must be good (gpgv's VALIDSIG) and made by a key whose primary fingerprint is the
    recorded one.  A signature made while the key was valid stays good after the key expires (gpgv says
    EXPKEYSIG and VALIDSIG); that is reported.  Raises SignatureError otherwise.
    """
    gpgv = gpgv or shutil.which("gpgv")
    if not gpgv:
        return Checked(False, f"OpenPGP signature {signature.name} NOT checked: gpgv is not installed "
                              "(apt-get install gpgv)")
    try:
        key = check_key_file(signer)
    except _KeyMissing as exc:
        return Checked(False, f"OpenPGP signature {signature.name} NOT checked: {exc}")
    with tempfile.TemporaryDirectory(prefix="cpython-perf-gpgv-") as tmp:
        keyring = Path(tmp) / "release-manager.gpg"
        keyring.write_bytes(key)
        proc = subprocess.run([gpgv, "--status-fd", "1", "--keyring", str(keyring), str(signature), str(artifact)],
                              capture_output=True, text=True, env={"LC_ALL": "C", "GNUPGHOME": tmp, "PATH": "/usr/bin:/bin"})
    status = [line.split() for line in proc.stdout.splitlines() if line.startswith("[GNUPG:] ")]
    valid = [words for words in status if words[1] == "VALIDSIG"]
    if proc.returncode != 0 or not valid:
        said = "; ".join(" ".join(w[1:3]) for w in status if w[1] in ("BADSIG", "ERRSIG", "NO_PUBKEY", "NODATA",
                                                                       "EXPSIG", "REVKEYSIG")) \
            or (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise SignatureError(f"OpenPGP signature {signature} does not verify {artifact.name} as signed by "
                             f"{signer.name} ({signer.fingerprint}): gpgv exit {proc.returncode}, {said}. The file "
                             "is not the release python.org published (or the signature is not its): do not use it")
    primary = valid[0][-1].upper()
    if primary != signer.fingerprint:
        raise SignatureError(f"{signature} was made by key {primary}, not {signer.name}'s {signer.fingerprint}")
    made = valid[0][3] if len(valid[0]) > 3 else "?"
    expired = any(w[1] == "EXPKEYSIG" for w in status)
    return Checked(True, f"OpenPGP signature {signature.name} good: {signer.name}, key {signer.fingerprint} "
                         f"({signer.key_file}), signed {made}" + (" (the key has expired since; the signature "
                                                                   "predates that)" if expired else ""))


# --------------------------------------------------------------------------
# Sigstore


def verify_sigstore(artifact: Path | bytes, bundle: Path, identity: str, issuer: str,
                    what: str | None = None) -> Checked:
    """Check a Sigstore bundle of artifact against identity and OIDC issuer with the sigstore package,
    offline (Sigstore's production trust root as the package ships it; the bundle's transparency-log
    inclusion proof is checked, no log is queried).  Raises SignatureError when it does not verify."""
    what = what or (artifact.name if isinstance(artifact, Path) else "the artefact")
    try:
        from sigstore.errors import Error as SigstoreError
        from sigstore.models import Bundle, InvalidBundle
        from sigstore.verify import Verifier, policy
    except ImportError:
        return Checked(False, f"Sigstore bundle {bundle.name} NOT checked: the sigstore package is not installed "
                              f"({SIGSTORE_EXTRA})")
    import logging

    logging.getLogger("sigstore").setLevel(logging.ERROR)   # "offline mode" notice
    data = artifact.read_bytes() if isinstance(artifact, Path) else artifact
    try:
        parsed = Bundle.from_json(bundle.read_bytes())
        Verifier.production(offline=True).verify_artifact(data, parsed, policy.Identity(identity=identity,
                                                                                      issuer=issuer))
    except (SigstoreError, InvalidBundle, ValueError) as exc:
        raise SignatureError(f"Sigstore bundle {bundle} does not verify {what} as signed by {identity} "
                             f"({issuer}): {exc}. Do not use the file") from None
    return Checked(True, f"Sigstore bundle {bundle.name} good: {identity}, issuer {issuer}")


# --------------------------------------------------------------------------
# A release tarball


def verify_release(version: str, artifact: Path, signature: Path) -> Checked:
    """Check signature (.asc or .sigstore, by its suffix) of CPython version's tarball artifact."""
    signer = signer_for(version)
    if signature.name.endswith(".asc"):
        if signer.fingerprint is None:
            raise SignatureError(f"{signature.name}: CPython {version} is not OpenPGP-signed (from 3.14 on "
                                 "python.org publishes Sigstore bundles only)")
        return verify_openpgp(artifact, signature, signer)
    if signature.name.endswith((".sigstore", ".sigstore.json")):
        if signer.identity is None:
            raise SignatureError(f"{signature.name}: no Sigstore identity is recorded for {signer.name}'s series "
                                 "(OpenPGP is checked up to 3.13)")
        return verify_sigstore(artifact, signature, signer.identity, signer.issuer)
    raise SignatureError(f"{signature}: not a signature this project checks (.asc or .sigstore)")

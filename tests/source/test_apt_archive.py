"""Which apt entry is Debian's archive, read from the apt files as the machines ship them.

The layouts are those of GitHub's ubuntu-24.04 runner (deb822 ubuntu.sources, third-party .list files beside
it), its ubuntu-22.04 runner (one-line sources.list with deb-src comments), Debian 11 (one-line, the security
archive under its own path) and Debian 12 and 13 (deb822 debian.sources); the hosts are placeholders.  Where
the machine has apt's lists, the Release file's Origin decides; else the suites' names (Debian's codenames and
suite names), with a keyring naming ubuntu as a hint."""

from __future__ import annotations

from pathlib import Path
from textwrap import dedent

import pytest

from cpython_perf.lanes import source_packages
from cpython_perf.matrix import load_matrix
from cpython_perf.source import sources

DEBIAN_LANES = load_matrix().distributions["debian"]   # the lanes' distribution

UBUNTU = "http://ubuntu-archive.invalid/ubuntu/"
UBUNTU_SECURITY = "http://ubuntu-security.invalid/ubuntu/"
THIRD_PARTY = "https://vendor-packages.invalid/ubuntu/24.04/prod"
DEBIAN = "http://debian-archive.invalid/debian"
DEBIAN_SECURITY = "http://debian-security.invalid/debian-security"

UBUNTU_2404 = {
    "etc/apt/sources.list": "# Ubuntu sources have moved to /etc/apt/sources.list.d/ubuntu.sources\n",
    "etc/apt/sources.list.d/ubuntu.sources": dedent(f"""\
        Types: deb
        URIs: {UBUNTU}
        Suites: noble noble-updates noble-backports
        Components: main universe restricted multiverse
        Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg

        ## Ubuntu security updates. Aside from URIs and Suites,
        ## this should mirror your choices in the previous section.
        Types: deb
        URIs: {UBUNTU_SECURITY}
        Suites: noble-security
        Components: main universe restricted multiverse
        Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg
        """),
    "etc/apt/sources.list.d/microsoft-prod.list":
        f"deb [arch=amd64,armhf,arm64] {THIRD_PARTY} noble main\n",
    # a vendor's repository with a bare suite name and no keyring in the line, as a browser's has
    "etc/apt/sources.list.d/vendor-tools.list":
        "deb [arch=amd64 signed-by=/usr/share/keyrings/vendor.gpg] https://tools.invalid/apt stable main\n",
}
UBUNTU_2404_LISTS = {
    "ubuntu-archive.invalid_ubuntu_dists_noble_InRelease": "Origin: Ubuntu\nLabel: Ubuntu\nSuite: noble\n",
    "ubuntu-security.invalid_ubuntu_dists_noble-security_InRelease": "Origin: Ubuntu\nSuite: noble-security\n",
    "tools.invalid_apt_dists_stable_InRelease": "Origin: vendor-tools\nSuite: stable\n",
}

UBUNTU_2204 = {
    "etc/apt/sources.list": dedent(f"""\
        ## Note, this file is written by cloud-init on first boot of an instance
        deb {UBUNTU} jammy main restricted
        # deb-src {UBUNTU} jammy main restricted
        deb {UBUNTU} jammy-updates main restricted
        # deb-src {UBUNTU} jammy-updates main restricted
        deb {UBUNTU} jammy universe
        deb {UBUNTU} jammy-backports main restricted universe multiverse
        deb {UBUNTU_SECURITY} jammy-security main restricted
        # deb-src {UBUNTU_SECURITY} jammy-security main restricted
        """),
    "etc/apt/sources.list.d/microsoft-prod.list":
        f"deb [arch=amd64,armhf,arm64] {THIRD_PARTY.replace('24.04', '22.04')} jammy main\n",
}

DEBIAN_11 = {
    "etc/apt/sources.list": dedent(f"""\
        # deb http://snapshot.invalid/archive/debian/20240101T000000Z bullseye main
        deb {DEBIAN} bullseye main
        # deb http://snapshot.invalid/archive/debian-security/20240101T000000Z bullseye-security main
        deb {DEBIAN_SECURITY} bullseye-security main
        deb {DEBIAN} bullseye-updates main
        """),
}


def _deb822(suite: str, keyring: str) -> dict:
    return {"etc/apt/sources.list.d/debian.sources": dedent(f"""\
        Types: deb
        URIs: {DEBIAN}
        Suites: {suite} {suite}-updates
        Components: main
        Signed-By: {keyring}

        Types: deb
        URIs: {DEBIAN_SECURITY}
        Suites: {suite}-security
        Components: main
        Signed-By: {keyring}
        """)}


DEBIAN_12 = _deb822("bookworm", "/usr/share/keyrings/debian-archive-keyring.gpg")
DEBIAN_13 = _deb822("trixie", "/usr/share/keyrings/debian-archive-keyring.pgp")


def machine(root: Path, files: dict, lists: dict | None = None):
    """root laid out as the machine: its apt source files, and apt's lists where given."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    (root / "etc/apt/sources.list.d").mkdir(parents=True, exist_ok=True)
    (root / "var/lib/apt/lists").mkdir(parents=True, exist_ok=True)
    for name, text in (lists or {}).items():
        (root / "var/lib/apt/lists" / name).write_text(text)
    return (root / "etc/apt/sources.list", root / "etc/apt/sources.list.d"), root / "var/lib/apt/lists"


@pytest.fixture
def as_machine(tmp_path, monkeypatch):
    """Make root's files the machine's own apt files (what the driver and the plan read)."""
    def lay_out(files, lists=None):
        paths, lists_dir = machine(tmp_path, files, lists)
        monkeypatch.setattr(sources, "APT_SOURCE_FILES", paths)
        monkeypatch.setattr(sources, "APT_LISTS", lists_dir)
        monkeypatch.delenv(sources.DEBIAN_ARCHIVE_ENV, raising=False)
        monkeypatch.delenv(source_packages.archive_env(DEBIAN_LANES, security=True), raising=False)
        return paths, lists_dir
    return lay_out


@pytest.mark.parametrize("files, lists", [(UBUNTU_2404, None), (UBUNTU_2404, UBUNTU_2404_LISTS),
                                          (UBUNTU_2204, None)], ids=["24.04", "24.04-lists", "22.04"])
def test_ubuntu_runner_has_no_debian_archive(as_machine, files, lists):
    """The bases are then bootstrapped from mmdebstrap's default archive, never `deb <ubuntu> trixie`."""
    as_machine(files, lists)
    with pytest.raises(sources._NotHere):
        sources.machine_archive_entry()
    assert sources.debian_archive_uri() is None
    assert "mmdebstrap's default" in sources.describe_archive(sources.debian_archive_uri())


def test_ubuntu_runner_security_archive_is_never_ubuntus(as_machine, monkeypatch):
    """With the main archive named by the variable, Ubuntu's noble-security is not taken as Debian's."""
    as_machine(UBUNTU_2404)
    monkeypatch.setenv(sources.DEBIAN_ARCHIVE_ENV, DEBIAN)
    entries = source_packages.archive_entries(DEBIAN_LANES)
    assert entries["main"]["uri"] == DEBIAN
    assert "security" not in entries
    monkeypatch.setenv(source_packages.archive_env(DEBIAN_LANES, security=True), DEBIAN_SECURITY)
    assert source_packages.archive_entries(DEBIAN_LANES)["security"]["uri"] == DEBIAN_SECURITY


@pytest.mark.parametrize("files, keyring", [
    (DEBIAN_11, None),
    (DEBIAN_12, "/usr/share/keyrings/debian-archive-keyring.gpg"),
    (DEBIAN_13, "/usr/share/keyrings/debian-archive-keyring.pgp"),
], ids=["11", "12", "13"])
def test_debian_machines_archive_and_security_archive(as_machine, files, keyring):
    as_machine(files)
    assert sources.machine_archive_entry() == {"uri": DEBIAN, "signed_by": keyring}
    assert sources.debian_archive_uri() == DEBIAN
    entries = source_packages.archive_entries(DEBIAN_LANES)
    assert entries["security"] == {"uri": DEBIAN_SECURITY, "signed_by": keyring}


def test_release_origin_decides_where_apts_lists_exist(as_machine):
    """A third-party repository named after a Debian codename is not Debian's archive when its Release says
    so; the Debian entry after it is taken."""
    files = dict(DEBIAN_12)
    files["etc/apt/sources.list"] = "deb https://vendor-packages.invalid/debian/12/prod bookworm main\n"
    lists = {"vendor-packages.invalid_debian_12_prod_dists_bookworm_InRelease":
             "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\nOrigin: vendor bookworm\nSuite: bookworm\n",
             "debian-archive.invalid_debian_dists_bookworm_InRelease": "Origin: Debian\nLabel: Debian\n"}
    as_machine(files, lists)
    assert sources.machine_archive_entry()["uri"] == DEBIAN


def test_debian_suite_names():
    for suite in ("bullseye", "bookworm-updates", "trixie-security", "stable", "sid", "forky-backports",
                  "bookworm-proposed-updates", "oldstable-security"):
        assert sources.is_debian_suite(suite), suite
    for suite in ("noble", "jammy-security", "noble-backports", "focal", "prod", "stable-ish"):
        assert not sources.is_debian_suite(suite), suite


def test_a_bare_suite_name_is_debians_only_with_debians_keyring(tmp_path):
    line = "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://debian-archive.invalid/debian stable main\n"
    paths, lists = machine(tmp_path, {"etc/apt/sources.list": line})
    assert sources.machine_archive_entry(paths, lists)["uri"] == DEBIAN
    (tmp_path / "etc/apt/sources.list").write_text("deb https://tools.invalid/apt stable main\n")
    with pytest.raises(sources._NotHere):
        sources.machine_archive_entry(paths, lists)

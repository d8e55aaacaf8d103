"""matrix.yaml `distributions:`: a distribution is data.  A newcomer's lane of a new distribution is its entry
in matrix.yaml, its lane, and its keyring in keys/; the driver derives the rest from them.  And the errors a
wrong entry gets, each naming the line and the fix."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from cpython_perf import cli
from cpython_perf.errors import MatrixError, SourceUnavailable
from cpython_perf.lanes import apt_repo, deb_check, images, source_packages
from cpython_perf.matrix import load_matrix

from ..conftest import edit, expect_error
from ..source.test_apt_archive import DEBIAN, DEBIAN_12, machine

UBUNTU = "http://ubuntu-archive.invalid/ubuntu/"
UBUNTU_SECURITY = "http://ubuntu-security.invalid/ubuntu/"
KEYRING = b"a made-up keyring: the driver checks its sha256, apt would check its keys\n"
UBUNTU_DISTRIBUTION = """\
  ubuntu:
    name: Ubuntu
    origin: Ubuntu
    keyring: keys/ubuntu-archive-keyring.gpg
    keyring_sha256: {sha256}
    security_suite: "{{suite}}-security"
    releases: {{focal: "20.04", jammy: "22.04"}}
    revision: "~ubuntu{{release}}.{{n}}"
    purl_namespace: ubuntu
"""
JAMMY_LANE = """\
  jammy-3.11:
    distribution: ubuntu
    description: Ubuntu 22.04's python3.11
    source_package: python3.11
    package_version: 3.11.0-1~ubuntu22.04.1
    suites: [jammy, jammy-updates, jammy-security]
    perf_suite: jammy
    modes: [perf, perf_jit]
"""
# an Ubuntu machine's apt sources (deb822) with apt's lists, and a Debian entry beside them
JAMMY_MACHINE = {"etc/apt/sources.list.d/ubuntu.sources": f"""\
Types: deb
URIs: {UBUNTU}
Suites: jammy jammy-updates
Components: main universe
Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg

Types: deb
URIs: {UBUNTU_SECURITY}
Suites: jammy-security
Components: main universe
Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg
""", **DEBIAN_12}
JAMMY_LISTS = {"ubuntu-archive.invalid_ubuntu_dists_jammy_InRelease": "Origin: Ubuntu\nLabel: Ubuntu\nSuite: jammy\n",
               "ubuntu-security.invalid_ubuntu_dists_jammy-security_InRelease": "Origin: Ubuntu\nSuite: jammy-security\n"}


def newcomers_project(project_copy: Path) -> Path:
    """The project as a newcomer leaves it: matrix.yaml with the distribution and its lane, and the keyring."""
    (project_copy / "keys").mkdir(exist_ok=True)
    (project_copy / "keys" / "ubuntu-archive-keyring.gpg").write_bytes(KEYRING)
    distribution = UBUNTU_DISTRIBUTION.format(sha256=hashlib.sha256(KEYRING).hexdigest())
    edit(project_copy / "matrix.yaml", "\nlanes:\n", "\nlanes:\n" + JAMMY_LANE)
    edit(project_copy / "matrix.yaml", "    purl_namespace: debian\n", "    purl_namespace: debian\n" + distribution)
    return project_copy


def test_a_new_distributions_lane_is_matrix_yaml_and_its_keyring(project_copy, capsys):
    project = newcomers_project(project_copy)
    matrix = load_matrix(project / "matrix.yaml")
    lane = matrix.lane("jammy-3.11")
    ubuntu = lane.distribution
    assert (ubuntu.key, ubuntu.name, lane.suite, lane.session) == ("ubuntu", "Ubuntu", "jammy", "deb-jammy-3.11")
    assert matrix.lane("bookworm-3.11").distribution.name == "Debian"

    # the revision of its next update, and the version policy of the +perf build
    assert deb_check.next_update_version(lane.package_version, lane.suite, ubuntu) == "3.11.0-1~ubuntu22.04.2"
    assert ubuntu.update_revision("3.11.0-1", "jammy") == "3.11.0-1~ubuntu22.04.1"
    assert lane.perf_version == "3.11.0-1~ubuntu22.04.1+perf1"
    assert deb_check.policy_problems(lane) == []

    # the apt repository's suite
    build = apt_repo.LaneBuild(lane, project, lane.perf_version, [], "")
    assert "for Ubuntu 22.04 (jammy): python3.11 3.11.0-1~ubuntu22.04.1+perf1" in \
        apt_repo.suite_description("jammy", [build])

    # the SBOM's purls
    assert ubuntu.purl_namespace == "ubuntu" and ubuntu.purl_distro("jammy") == "ubuntu-jammy"
    pytest.importorskip("packageurl")
    from cpython_perf.image.sbom import _purl_deb
    purl = _purl_deb("python3.11", lane.perf_version, "amd64", ubuntu.purl_distro(lane.suite), ubuntu.purl_namespace)
    assert purl.to_string().startswith("pkg:deb/ubuntu/python3.11@") and "distro=ubuntu-jammy" in purl.to_string()

    # the keyring the runners install, checked against its sha256
    assert ubuntu.keyring == project / "keys" / "ubuntu-archive-keyring.gpg"
    assert cli.main(["--matrix", str(project / "matrix.yaml"), "lane-keyrings", "jammy-3.11", "bookworm-3.11"]) == 0
    assert capsys.readouterr().out.split() == [str(ubuntu.keyring), str(project / "keys" / "debian-archive-keyring.gpg")]

    # the archive: this machine's entries whose Release files say Origin: Ubuntu, the security suite's own
    paths, lists = machine(project / "machine", JAMMY_MACHINE, JAMMY_LISTS)
    entries = source_packages.archive_entries(ubuntu, paths, {}, lists)
    assert entries == {"main": {"uri": UBUNTU, "signed_by": "/usr/share/keyrings/ubuntu-archive-keyring.gpg"},
                       "security": {"uri": UBUNTU_SECURITY,
                                    "signed_by": "/usr/share/keyrings/ubuntu-archive-keyring.gpg"}}
    assert images.archive_lines(ubuntu, lane.suites, entries) == [
        f"deb {UBUNTU} jammy main", f"deb {UBUNTU} jammy-updates main", f"deb {UBUNTU_SECURITY} jammy-security main"]
    assert f"URIs: {UBUNTU_SECURITY}\nSuites: jammy-security\n" in \
        source_packages.deb_src_stanzas(ubuntu, lane.suites, entries)
    # ... and Debian's lanes still take Debian's entry on the same machine, never Ubuntu's
    assert source_packages.archive_entries(matrix.distributions["debian"], paths, {}, lists)["main"]["uri"] == DEBIAN
    assert source_packages.archive_env(ubuntu) == "CPYTHON_PERF_UBUNTU_ARCHIVE"


def test_a_distribution_the_machine_has_no_archive_of_says_how_to_name_one(tmp_path):
    debian = load_matrix().distributions["debian"]
    paths, lists = machine(tmp_path, {"etc/apt/sources.list.d/ubuntu.sources": JAMMY_MACHINE[
        "etc/apt/sources.list.d/ubuntu.sources"]}, JAMMY_LISTS)
    with pytest.raises(SourceUnavailable, match=r"no Debian archive entry .*\$CPYTHON_PERF_DEBIAN_ARCHIVE"):
        source_packages.archive_entries(debian, paths, {}, lists)


DEBIAN_ENTRY = "    purl_namespace: debian\n"


@pytest.mark.parametrize("old, new, needle, message", [
    (DEBIAN_ENTRY, DEBIAN_ENTRY + "    mirror: x\n", "mirror: x", "unknown key 'mirror' in distributions.debian"),
    ("keyring: keys/debian-archive-keyring.gpg", "keyring: /usr/share/keyrings/debian-archive-keyring.gpg",
     "keyring: /usr/share", "must be a file under keys/"),
    ("keyring: keys/debian-archive-keyring.gpg", "keyring: keys/debian-keyring.gpg", "keyring: keys/debian-keyring",
     "keys/debian-keyring.gpg does not exist: put the distribution's archive keyring there"),
    ("keyring_sha256: 506b", "keyring_sha256: 606b", "keyring_sha256:", "has sha256 506b"),
    ("keyring_sha256: 506b815cbb32d9b6066b4a2aa524071e071761e7e7f68c3ac74f3061ba852017", "keyring_sha256: abc",
     "keyring_sha256:", "must be the 64 hex digits of sha256sum keys/debian-archive-keyring.gpg"),
    ('security_suite: "{suite}-security"', "security_suite: security", "security_suite:",
     "must name a release's security suite with {suite}"),
    ('revision: "+deb{release}u{n}"', 'revision: "+deb{release}"', "revision:",
     "must be the version suffix of an update, with {release}"),
    ('revision: "+deb{release}u{n}"', 'revision: "+deb{release}u{n} x"', "revision:", "only A-Z a-z 0-9 . + ~"),
    ('bookworm: "12"', 'bookworm: twelve', "bookworm: twelve", "releases.bookworm must be the release's number"),
    (DEBIAN_ENTRY, "    purl_namespace: Debian\n", "purl_namespace: Debian", "must be a lower-case purl namespace"),
    ("    name: Debian\n", "", "  debian:", "lacks required key 'name'"),
    ("  bookworm-3.11:\n    distribution: debian\n", "  bookworm-3.11:\n    distribution: ubuntu\n",
     "distribution: ubuntu", "lanes.bookworm-3.11.distribution 'ubuntu' is not a key of distributions: (debian)"),
    (' bookworm: "12",', "", "  bookworm-3.11:",
     "bookworm is not a release of distributions.debian (buster, bullseye, trixie, forky): add it"),
    ("\nlanes:\n", "\ndistros:\n", "distros:", "rename distros: to lanes:"),
])
def test_bad_distributions_name_the_line_and_the_fix(project_copy, old, new, needle, message):
    edit(project_copy / "matrix.yaml", old, new)
    if "lacks required key" in message:   # a missing key: the mapping's line is not kept
        with pytest.raises(MatrixError, match=message):
            load_matrix(project_copy / "matrix.yaml")
        return
    expect_error(project_copy, needle, message)


def test_a_lane_names_its_distribution(project_copy):
    edit(project_copy / "matrix.yaml", "  bookworm-3.11:\n    distribution: debian\n", "  bookworm-3.11:\n")
    with pytest.raises(MatrixError, match="lanes.bookworm-3.11 lacks required key 'distribution'"):
        load_matrix(project_copy / "matrix.yaml")

"""matrix.yaml `lanes:` (the packaging lanes) and the Debian source package helpers, without the network."""

from __future__ import annotations

import pytest

from cpython_perf.lanes import source_packages
from cpython_perf.errors import UnknownCell
from cpython_perf.matrix import load_matrix

from ..conftest import edit, expect_error


def test_lanes_load_with_their_series():
    matrix = load_matrix()
    lane = matrix.lane("bookworm-3.11")
    assert (lane.suite, lane.version, lane.source_package) == ("bookworm", "3.11", "python3.11")
    assert lane.session == "deb-bookworm-3.11" and lane.python == "/usr/bin/python3.11"
    assert lane.patch_series == matrix.series_of("3.11")
    assert lane.upstream_version == "3.11.2" == matrix.cell("3.11-fp").recipe.version
    with pytest.raises(UnknownCell, match="defines bullseye-3.9"):
        matrix.lane("sid-3.12")


def test_every_lane_builds_the_pinned_upstream_release():
    """A lane's Debian version is of the same upstream release as the version's recipe: the series is proven there."""
    matrix = load_matrix()
    for lane in matrix.lanes.values():
        recipe = next(c.recipe for c in matrix.cells.values() if c.version == lane.version)
        assert lane.upstream_version == recipe.version, lane.name


@pytest.mark.parametrize("old, new, needle, message", [
    ("  bookworm-3.11:\n", "  bookworm311:\n", "bookworm311:", "must be named <suite>-<version>"),
    ("  bookworm-3.11:\n", "  bookworm-3.12:\n", "bookworm-3.12:", "3.12 has no patch series to add"),
    ("package_version: 3.11.2-6+deb12u8", "package_version: 3.11.2", "package_version: 3.11.2",
     "must be a version with a revision"),
    ("package_version: 3.11.2-6+deb12u8", "package_version: 3.13.5-2", "package_version: 3.13.5-2",
     "is not a 3.11 release"),
    ("perf_suite: bookworm-backports", "perf_suite: trixie", "perf_suite: trixie", "must be bookworm or one of"),
    ("suites: [bookworm, bookworm-security]", "suites: [bookworm, trixie]", "suites: [bookworm, trixie]",
     "must be bookworm or its"),
    ("    modes: [perf, perf_jit]\n  trixie", "    modes: [perf, dwarf]\n  trixie", "modes: [perf, dwarf]",
     "must be a list of perf, perf_jit"),
    ("    source_package: python3.11\n", "    source_package: python3.11\n    flavour: x\n", "flavour: x",
     "flavour"),
    ("    source_package: python3.11\n", "    source_package: python3.11\n    perf_revision: 0\n", "perf_revision: 0",
     "must be a whole number from 1"),
])
def test_bad_lanes_name_the_line(project_copy, old, new, needle, message):
    edit(project_copy / "matrix.yaml", old, new)
    expect_error(project_copy, needle, message)


def test_additions_need_a_header_for_the_packager_forms(project_copy):
    edit(project_copy / "matrix.yaml", "    additions_header: patches/backport-additions.dep3\n", "")
    edit(project_copy / "matrix.yaml", "    additions_header: patches/backport-additions.dep3\n", "")
    expect_error(project_copy, "additions: &backport_additions", "has additions but no additions_header")


DSC = """-----BEGIN PGP SIGNED MESSAGE-----
Hash: SHA512

Format: 3.0 (quilt)
Source: python3.11
Checksums-Sha256:
 {a} 5 python3.11_3.11.2.orig.tar.gz
 {b} 3 python3.11_3.11.2-6.debian.tar.xz
Files:
 00000000000000000000000000000000 5 python3.11_3.11.2.orig.tar.gz
-----BEGIN PGP SIGNATURE-----
"""


def test_cached_package_is_checked_against_the_index_and_the_dsc(tmp_path):
    sha = source_packages.sha256_hex
    orig, deb = b"orig!", b"deb"
    (tmp_path / "python3.11_3.11.2.orig.tar.gz").write_bytes(orig)
    (tmp_path / "python3.11_3.11.2-6.debian.tar.xz").write_bytes(deb)
    dsc = DSC.format(a=sha(orig), b=sha(deb))
    (tmp_path / "python3.11_3.11.2-6.dsc").write_text(dsc)
    assert source_packages.dsc_checksums(dsc) == {"python3.11_3.11.2.orig.tar.gz": (5, sha(orig)),
                                                  "python3.11_3.11.2-6.debian.tar.xz": (3, sha(deb))}
    index = {p.name: (p.stat().st_size, source_packages.sources.sha256_of(p)) for p in tmp_path.iterdir()}
    source_packages._write_index(tmp_path, index)
    assert source_packages.check_cached(tmp_path, "python3.11", "3.11.2-6") == []
    (tmp_path / "python3.11_3.11.2.orig.tar.gz").write_bytes(b"ORIG!")
    problems = source_packages.check_cached(tmp_path, "python3.11", "3.11.2-6")
    assert len(problems) == 2 and all("orig.tar.gz" in p for p in problems)   # the index and the .dsc both object


def test_print_uris_lines_give_the_signed_index_hashes():
    text = ("Need to get 26.7 MB of source archives.\n"
            "'http://archive.invalid/pool/main/p/python3.11/python3.11_3.11.2-6%2bdeb12u8.dsc' "
            "python3.11_3.11.2-6+deb12u8.dsc 3805 SHA256:" + "a" * 64 + "\n")
    assert source_packages.parse_print_uris(text) == {"python3.11_3.11.2-6+deb12u8.dsc": (3805, "a" * 64)}
    assert source_packages.dsc_name("python3.11", "1:3.11.2-6") == "python3.11_3.11.2-6.dsc"


def test_deb_src_stanzas_take_security_suites_from_the_security_archive():
    entries = {"main": {"uri": "http://main.invalid/debian", "signed_by": "/k.gpg"},
               "security": {"uri": "http://sec.invalid/debian-security", "signed_by": "/k.gpg"}}
    text = source_packages.deb_src_stanzas(load_matrix().distributions["debian"], ["bookworm", "bookworm-security"],
                                            entries)
    assert "URIs: http://main.invalid/debian\nSuites: bookworm\n" in text
    assert "URIs: http://sec.invalid/debian-security\nSuites: bookworm-security\n" in text

"""SBOMs (cpython_perf.image.sbom): a cell image's and a packaging lane's, CycloneDX 1.6 JSON checked with the library's own
JSON-schema validator.  No Docker: the cell's packages come from a dpkg status text, the lane's output is
synthetic (a .dsc, .debs and a .buildinfo made here, in a directory named by the lane's real build key).  The
real image is in tests/image/test_sbom_image.py (container)."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

pytest.importorskip("cyclonedx.validation.json", reason="cyclonedx-python-lib is a dependency of cpython-perf: "
                                                        "pip install -e . installs it")

from cpython_perf import cli
from cpython_perf.image import pipeline, sbom
from cpython_perf.lanes import deb_build, images, series_forms, source_tree  # noqa: E402
from cpython_perf.lanes import sbom as lane_sbom  # noqa: E402
from cpython_perf.errors import DriverError  # noqa: E402
from cpython_perf.matrix import PROJECT_ROOT, load_matrix  # noqa: E402
from cpython_perf.source import patches  # noqa: E402

MATRIX = load_matrix()

STATUS = """\
Package: base-files
Status: install ok installed
Priority: required
Architecture: amd64
Version: 13.8+deb13u1
Description: Debian base system miscellaneous files

Package: libc6
Status: install ok installed
Architecture: amd64
Multi-Arch: same
Source: glibc (2.41-12)
Version: 2.41-12
Depends: libgcc-s1
Description: GNU C Library: Shared libraries
 Contains the standard libraries that are used by nearly all programs on
 the system.

Package: removed-one
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0-1

Package: libc6
Status: install ok installed
Architecture: i386
Source: glibc (2.41-12)
Version: 2.41-12
"""


def _doc(text: str) -> dict:
    return json.loads(text)


def _props(component: dict) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in component.get("properties", []):
        out.setdefault(p["name"], []).append(p["value"])
    return out


def test_dpkg_status_gives_the_installed_packages_as_dpkg_query_lists_them():
    packages = sbom.parse_dpkg_status(STATUS)
    assert [(p.name, p.version, p.arch, p.source) for p in packages] == [
        ("base-files", "13.8+deb13u1", "amd64", ""), ("libc6", "2.41-12", "amd64", "glibc"),
        ("libc6", "2.41-12", "i386", "glibc")]


def _cell_bom(cell_name: str) -> tuple[str, object]:
    cell = MATRIX.cell(cell_name)
    inputs = pipeline.cell_inputs(cell, MATRIX.base_suite, log=lambda *_: None, matrix=MATRIX, fetch=False)
    facts = sbom.cell_facts(inputs, sbom.parse_dpkg_status(STATUS), sde=1613741686, distro="debian-trixie")
    return sbom.cell_bom(facts), inputs


@pytest.mark.parametrize("cell_name", ["3.9-fp", "3.13-fp"])
def test_cell_sbom_is_valid_and_names_source_patches_additions_and_packages(cell_name):
    text, inputs = _cell_bom(cell_name)
    assert sbom.validate(text) is None
    doc = _doc(text)
    assert doc["specVersion"] == "1.6" and doc["bomFormat"] == "CycloneDX"
    cell = inputs.cell
    image = doc["metadata"]["component"]
    props = _props(image)
    assert image["type"] == "container" and props["cpython-perf:inputs-digest"] == [inputs.digest]
    assert props["cpython-perf:cflags"] == [cell.cflags]
    components = {c["bom-ref"]: c for c in doc["components"]}
    cpython = components["cpython"]
    (release,) = cpython["pedigree"]["ancestors"]
    assert release["hashes"] == [{"alg": "SHA-256", "content": cell.recipe.sha256}]
    assert release["externalReferences"][0]["url"] == cell.recipe.url
    series = [p for p in inputs.patches]
    # CycloneDX keeps patches as a set; their order is each file's series-position
    assert sorted(p["diff"]["url"] for p in cpython["pedigree"]["patches"]) == \
        sorted(str(p.path.relative_to(PROJECT_ROOT)) for p in series)
    for position, p in enumerate(series, 1):
        rel = str(p.path.relative_to(PROJECT_ROOT))
        file = components[f"file:{rel}"]
        assert file["hashes"][0]["content"] == hashlib.sha256(p.path.read_bytes()).hexdigest()
        fields = _props(file)
        assert fields["cpython-perf:series-position"] == [str(position)]
        for name in ("Origin", "Forwarded", "Description"):
            assert fields[f"cpython-perf:dep3:{name}"], (rel, name)
    assert len(cpython["pedigree"]["patches"]) == len(series) > 0
    for rel in cell.additions:
        file = components[f"file:Python-additions/{rel}"]
        assert file["hashes"][0]["content"] == hashlib.sha256((patches.ADDITIONS_ROOT / rel).read_bytes()).hexdigest()
        assert _props(file)["cpython-perf:dep3:Origin"][0].startswith("backport")
    libc = components["pkg:deb/debian/libc6@2.41-12?arch=amd64&distro=debian-trixie"]
    assert libc["version"] == "2.41-12" and _props(libc)["cpython-perf:deb:source"] == ["glibc"]
    assert "removed-one" not in {c["name"] for c in doc["components"]}


def test_a_backport_patch_is_typed_backport_and_a_vendor_patch_unofficial():
    text, _ = _cell_bom("3.13-fp")
    patches = _doc(text)["components"]
    types = {p["diff"]["url"].rsplit("/", 1)[1]: p["type"]
             for p in next(c for c in patches if c["bom-ref"] == "cpython")["pedigree"]["patches"]}
    assert types["0001-gh-141579-sys-activate-stack-trampoline-perf-jit.patch"] == "backport"   # Origin: backport
    assert types["0006-perf-jit-write-dump-records-through-and-fork-safely.patch"] == "unofficial"   # vendor


def test_cell_sbom_is_deterministic():
    first, _ = _cell_bom("3.9-fp")
    second, _ = _cell_bom("3.9-fp")
    assert first == second
    doc = _doc(first)
    assert doc["metadata"]["timestamp"] == "2021-02-19T13:34:46+00:00"   # SOURCE_DATE_EPOCH
    assert doc["serialNumber"].startswith("urn:uuid:")


def test_the_validator_rejects_a_broken_document():
    """The check can fail: the same document with a hash that is not a SHA-256 does not validate."""
    text, _ = _cell_bom("3.9-fp")
    doc = _doc(text)
    doc["components"][0].setdefault("hashes", []).append({"alg": "SHA-256", "content": "not-a-digest"})
    assert sbom.validate(json.dumps(doc)) is not None
    doc = _doc(text)
    doc["components"][0]["type"] = "no-such-type"
    assert sbom.validate(json.dumps(doc)) is not None


def test_attach_archive_dates_every_entry_and_keeps_share_root_owned(tmp_path):
    archive = tmp_path / "sbom.tar"
    sbom.attach_archive('{"x": 1}\n', 1613741686, archive)
    with tarfile.open(archive) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert list(members) == ["opt/cpython/share", "opt/cpython/share/sbom",
                                 "opt/cpython/share/sbom/cpython.cdx.json"]
        assert {m.mtime for m in members.values()} == {1613741686}
        assert {(m.uid, m.gid) for m in members.values()} == {(0, 0)}
        assert tar.extractfile("opt/cpython/share/sbom/cpython.cdx.json").read() == b'{"x": 1}\n'
    dockerfile = sbom.attach_dockerfile("cpython-perf:3.9-fp", "sha256:ab")
    assert dockerfile == 'FROM cpython-perf:3.9-fp\nADD sbom.tar /\nLABEL org.cpython-perf.sbom="sha256:ab"\n'


# --------------------------------------------------------------------------
# a lane's built output


LANE = MATRIX.lane("bookworm-3.11")
ORIG = b"orig tarball bytes"
DEBIAN = b"debian tarball bytes"


def _dsc(tmp: Path) -> Path:
    names = {f"python3.11_{LANE.upstream_version}.orig.tar.gz": ORIG,
             f"python3.11_{LANE.package_version}.debian.tar.xz": DEBIAN}
    lines = [f" {hashlib.sha256(data).hexdigest()} {len(data)} {name}" for name, data in names.items()]
    for name, data in names.items():
        (tmp / name).write_bytes(data)
    dsc = tmp / f"python3.11_{LANE.package_version}.dsc"
    dsc.write_text("Format: 3.0 (quilt)\nSource: python3.11\nBinary: python3.11, libpython3.11\n"
                   f"Version: {LANE.package_version}\nBuild-Depends: debhelper (>= 11), quilt\n"
                   "Checksums-Sha256:\n" + "\n".join(lines) + "\n")
    return dsc


BUILDINFO = """\
Format: 1.0
Source: python3.11
Binary: libpython3.11 python3.11
Architecture: amd64
Version: 3.11.2-6+deb12u8+perf1
Build-Origin: Debian
Build-Architecture: amd64
Build-Date: Tue, 24 Nov 2026 10:00:00 +0000
Installed-Build-Depends:
 autoconf (= 2.71-3),
 gcc-12 (= 12.2.0-14+deb12u1),
 libc6 (= 2.36-9+deb12u10),
 libc6-dev:amd64 (= 2.36-9+deb12u10)
Environment:
 DEB_BUILD_OPTIONS="nocheck nopgo nolto parallel=2"
"""


def _lane_output(tmp: Path, *, key: str | None = None, with_series: bool = True) -> tuple[Path, Path]:
    src = tmp / "src"
    src.mkdir()
    dsc = _dsc(src)
    env = {"DEB_BUILD_OPTIONS": "nocheck nopgo nolto parallel=2", "DEB_CFLAGS_APPEND": "-fno-omit-frame-pointer"}
    form = tmp / "form"
    names = series_forms.write_quilt_form(LANE.patch_series, form)
    form_files = {p.name: p.read_bytes() for p in sorted(form.iterdir())}
    real_key = deb_build.build_key(LANE, dsc, form_files, env, images.build_image_tag(LANE, dsc.read_text()))
    out = tmp / "deb" / LANE.name / (key or real_key[:16])
    out.mkdir(parents=True)
    version = source_tree.perf_version(LANE.package_version)
    debs = [f"libpython3.11_{version}_amd64.deb", f"python3.11_{version}_amd64.deb",
            f"libpython3.11-testsuite_{version}_all.deb"]
    for name in debs:
        (out / name).write_bytes(f"!<arch>\n{name}".encode())
    buildinfo = f"python3.11_{version}_amd64.buildinfo"
    (out / buildinfo).write_text(BUILDINFO)
    (out / "DONE").write_text(json.dumps({
        "flavour": {"environment": env, "with_series": with_series}, "debs": sorted(debs),
        "changes_files": [f"python3.11_{version}_amd64.changes", buildinfo], "version": version,
        "patches": names, "symbols_added": ["PyUnstable_PerfMapState_Init"], "symbols_file": "debian/x",
        "built_at": "2026-11-24T10:30:00+00:00"}))
    return out, dsc


def test_lane_sbom_from_a_built_output_is_valid_and_names_dsc_series_debs_and_build_packages(tmp_path):
    out, dsc = _lane_output(tmp_path)
    facts = lane_sbom.lane_facts(LANE, MATRIX, out, dsc)
    text = lane_sbom.lane_bom(facts)
    assert sbom.validate(text) is None
    doc = _doc(text)
    main = doc["metadata"]["component"]
    assert main["version"] == "3.11.2-6+deb12u8+perf1"
    (archive,) = main["pedigree"]["ancestors"]
    assert archive["version"] == LANE.package_version
    assert archive["hashes"][0]["content"] == hashlib.sha256(dsc.read_bytes()).hexdigest()
    assert {c["name"]: c["hashes"][0]["content"] for c in archive["components"]} == {
        f"python3.11_{LANE.upstream_version}.orig.tar.gz": hashlib.sha256(ORIG).hexdigest(),
        f"python3.11_{LANE.package_version}.debian.tar.xz": hashlib.sha256(DEBIAN).hexdigest()}
    quilt = series_forms.quilt_patches(LANE.patch_series)
    assert sorted(p["diff"]["url"] for p in main["pedigree"]["patches"]) == \
        sorted(f"debian/patches/cpython-perf/{name}" for name, _ in quilt)
    components = {c["bom-ref"]: c for c in doc["components"]}
    for position, (name, patch_text) in enumerate(quilt, 1):
        file = components[f"file:debian/patches/cpython-perf/{name}"]
        assert _props(file)["cpython-perf:series-position"] == [str(position)]
        assert file["hashes"][0]["content"] == hashlib.sha256(patch_text.encode()).hexdigest()
        assert _props(file)["cpython-perf:dep3:Origin"]
    new_files = components[f"file:debian/patches/cpython-perf/{series_forms.NEW_FILES_PATCH}"]
    assert _props(new_files)["cpython-perf:dep3:Origin"][0].startswith("backport")
    deb = components["pkg:deb/debian/python3.11@3.11.2-6%2Bdeb12u8%2Bperf1?arch=amd64&distro=debian-bookworm"]
    name = "python3.11_3.11.2-6+deb12u8+perf1_amd64.deb"
    assert deb["hashes"][0]["content"] == hashlib.sha256((out / name).read_bytes()).hexdigest()
    gcc = components["pkg:deb/debian/gcc-12@12.2.0-14%2Bdeb12u1?arch=amd64&distro=debian-bookworm"]
    assert gcc["scope"] == "excluded" and _props(gcc)["cpython-perf:role"] == ["build-environment"]
    props = _props(main)
    assert props["cpython-perf:build-key"][0].startswith(out.name)
    assert props["cpython-perf:env:DEB_CFLAGS_APPEND"] == ["-fno-omit-frame-pointer"]
    assert lane_sbom.lane_bom(lane_sbom.lane_facts(LANE, MATRIX, out, dsc)) == text   # deterministic


def test_lane_output_of_other_inputs_is_refused(tmp_path):
    out, dsc = _lane_output(tmp_path, key="0123456789abcdef")
    with pytest.raises(DriverError, match="not built from the lane's current inputs"):
        lane_sbom.lane_facts(LANE, MATRIX, out, dsc)


def test_lane_baseline_output_and_missing_deb_are_refused(tmp_path):
    (tmp_path / "a").mkdir()
    out, dsc = _lane_output(tmp_path / "a", with_series=False)
    with pytest.raises(DriverError, match="baseline"):
        lane_sbom.lane_facts(LANE, MATRIX, out, dsc)
    (tmp_path / "b").mkdir()
    out, dsc = _lane_output(tmp_path / "b")
    next(out.glob("python3.11_*.deb")).unlink()
    with pytest.raises(DriverError, match="is missing"):
        lane_sbom.lane_facts(LANE, MATRIX, out, dsc)


def test_lane_packages_dir_is_the_one_with_series_build(tmp_path):
    with pytest.raises(DriverError, match="no finished build"):
        lane_sbom.lane_packages_dir(LANE, tmp_path)
    for key, with_series in (("a" * 16, True), ("b" * 16, False)):
        d = tmp_path / LANE.name / key
        d.mkdir(parents=True)
        (d / "DONE").write_text(json.dumps({"flavour": {"with_series": with_series}}))
    assert lane_sbom.lane_packages_dir(LANE, tmp_path).name == "a" * 16
    d = tmp_path / LANE.name / ("c" * 16)
    d.mkdir()
    (d / "DONE").write_text(json.dumps({"flavour": {"with_series": True, "environment": {"x": "1"}}}))
    with pytest.raises(DriverError, match="--packages"):
        lane_sbom.lane_packages_dir(LANE, tmp_path)


def test_buildinfo_packages_keep_arch_qualifiers():
    fields, packages = lane_sbom.parse_buildinfo(BUILDINFO)
    assert fields["Build-Architecture"] == "amd64"
    assert [(p.name, p.version, p.arch) for p in packages] == [
        ("autoconf", "2.71-3", "amd64"), ("gcc-12", "12.2.0-14+deb12u1", "amd64"),
        ("libc6", "2.36-9+deb12u10", "amd64"), ("libc6-dev", "2.36-9+deb12u10", "amd64")]


def test_deb_file_names_are_checked():
    assert lane_sbom.deb_file_facts("python3.11_3.11.2-6+deb12u8+perf1_amd64.deb") == \
        ("python3.11", "3.11.2-6+deb12u8+perf1", "amd64")
    with pytest.raises(DriverError, match="not a .deb file name"):
        lane_sbom.deb_file_facts("python3.11.deb")


def test_command_wants_a_cell_or_a_lane(capsys):
    assert cli.main(["sbom"]) == 2
    assert "name either a cell" in capsys.readouterr().err
    assert cli.main(["sbom", "3.13-fp", "--lane", "bookworm-3.11"]) == 2


def test_command_writes_a_lane_sbom(tmp_path, monkeypatch, capsys):
    out, dsc = _lane_output(tmp_path)
    from cpython_perf.lanes import source_packages

    monkeypatch.setattr(source_packages, "fetch_source_package",
                        lambda lane, log=None: source_packages.SourcePackage(lane.source_package,
                                                                             lane.package_version, dsc, (dsc,)))
    target = tmp_path / "lane.cdx.json"
    assert cli.main(["sbom", "--lane", LANE.name, "--packages", str(out), "--out", str(target)]) == 0
    assert sbom.validate(target.read_text()) is None
    assert "3 .debs" in capsys.readouterr().out

"""The apt repository of the deb lanes (cpython_perf/lanes/apt_repo.py) and the lanes' version policy and
staleness check (cpython_perf/lanes/deb_check.py), without Docker.

`dpkg --compare-versions` is the arbiter of the version order.  The repository tests make a real one with
reprepro and gpg from tiny .debs made with dpkg-deb (seconds), signed with a throwaway key in a temporary
GNUPGHOME, and check it with gpgv; they skip, saying so, where reprepro or gpg is not installed.  The same
repository served to apt in pristine containers of each release: tests/lanes/test_apt_repo_container.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from cpython_perf.lanes import apt_repo, deb_check
from cpython_perf.lanes.source_tree import perf_version
from cpython_perf.errors import DriverError, RuntimeFailure
from cpython_perf.matrix import load_matrix

MATRIX = load_matrix()
LANES = list(MATRIX.lanes.values())
DEBIAN = MATRIX.distributions["debian"]


def needs(*tools):
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed here (apt-get install reprepro gnupg gpgv)")


# --------------------------------------------------------------------------
# the version policy


@pytest.mark.parametrize("lane", LANES, ids=lambda lane: lane.name)
def test_perf_version_sorts_between_the_archives_build_and_debians_next_update(lane):
    ours = perf_version(lane.package_version)
    update = deb_check.next_update_version(lane.package_version, lane.suite, DEBIAN)
    assert deb_check.compare_versions(ours, "gt", lane.package_version)
    assert deb_check.compare_versions(ours, "lt", update)
    assert deb_check.policy_problems(lane) == []


def test_the_bookworm_case_in_dpkgs_words():
    assert deb_check.compare_versions("3.11.2-6+deb12u8+perf1", "gt", "3.11.2-6+deb12u8")
    assert deb_check.compare_versions("3.11.2-6+deb12u8+perf1", "lt", "3.11.2-6+deb12u9")
    assert deb_check.next_update_version("3.11.2-6+deb12u8", "bookworm", DEBIAN) == "3.11.2-6+deb12u9"
    assert deb_check.next_update_version("3.13.5-2+deb13u5", "trixie", DEBIAN) == "3.13.5-2+deb13u6"


def test_a_release_revision_without_an_update_suffix_breaks_the_rule_and_is_reported():
    # +perf1 sorts ABOVE Debian's first update of a release's own revision ('d' < 'p'): refused
    lane = MATRIX.lanes["bookworm-3.11"]
    bare = dataclasses.replace(lane, package_version="3.11.2-6")
    assert deb_check.next_update_version("3.11.2-6", "bookworm", DEBIAN) == "3.11.2-6+deb12u1"
    assert not deb_check.compare_versions("3.11.2-6+perf1", "lt", "3.11.2-6+deb12u1")
    problems = deb_check.policy_problems(bare)
    assert any("does not sort below Debian's next update 3.11.2-6+deb12u1" in p for p in problems)
    assert any("does not end in +debNNuK" in p for p in problems)


# --------------------------------------------------------------------------
# the staleness check


def test_parse_madison_keeps_the_sources_lines():
    text = ("python3.11 | 3.11.2-6+deb12u9 | http://archive.invalid/debian-security bookworm-security/main Sources\n"
            "python3.11 | 3.11.2-6+deb12u8 | http://archive.invalid/debian bookworm/main Sources\n"
            "python3.11 | 3.11.2-6+deb12u8 | http://archive.invalid/debian bookworm/main amd64 Packages\n")
    from cpython_perf.lanes.source_packages import parse_madison

    assert parse_madison(text) == [("3.11.2-6+deb12u9", "bookworm-security"), ("3.11.2-6+deb12u8", "bookworm")]


def _archive(listing):
    return lambda package, suites: listing.get(package, [])


def _served(package, version, suites):   # the pool serves every listed source
    return True


def test_a_lane_behind_the_archive_is_reported_and_exits_1():
    listing = {"python3.11": [("3.11.2-6+deb12u8", "bookworm"), ("3.11.2-6+deb12u9", "bookworm-security")],
               "python3.13": [("3.13.5-2+deb13u5", "trixie")],
               "python3.9": [("3.9.2-1", "bullseye"), ("3.9.2-1+deb11u7", "bullseye-security")]}
    lines = []
    assert deb_check.main(MATRIX, None, lines.append, _archive(listing), _served) == deb_check.EXIT_STALE
    text = "\n".join(lines)
    assert ("bookworm-3.11: python3.11 3.11.2-6+deb12u8 is BEHIND the archive's 3.11.2-6+deb12u9 "
            "(bookworm-security)") in text
    assert "lanes.bookworm-3.11.package_version to 3.11.2-6+deb12u9" in text
    assert "trixie-3.13: python3.13 3.13.5-2+deb13u5 is the archive's newest (trixie)" in text
    assert "1 of 3 lanes behind the archive: bookworm-3.11" in text


def test_every_lane_current_exits_0():
    listing = {lane.source_package: [(lane.package_version, lane.suites[-1])] for lane in LANES}
    lines = []
    assert deb_check.main(MATRIX, None, lines.append, _archive(listing)) == 0
    assert lines[-1] == "every lane (3) is on the archive's newest revision"


def test_a_lane_the_archive_no_longer_lists_is_stale():
    lines = []
    listing = {"python3.11": [("3.11.2-6+deb12u10", "bookworm-security")]}
    assert deb_check.main(MATRIX, ["bookworm-3.11"], lines.append, _archive(listing), _served) == deb_check.EXIT_STALE
    assert "the lane's version is no longer listed at all" in lines[0]
    lines = []
    assert deb_check.main(MATRIX, ["bookworm-3.11"], lines.append, _archive({})) == deb_check.EXIT_STALE
    assert "the archive lists no python3.11" in lines[0]


def test_a_newer_revision_whose_source_the_pool_does_not_serve_is_said_so():
    """An archive can list a revision in its signed Sources index before its pool serves the source: the lane
    is still behind (apt prefers the archive's build), but the advice is to wait, not steps that would fail."""
    listing = {"python3.11": [("3.11.2-6+deb12u8", "bookworm"), ("3.11.2-6+deb12u9", "bookworm-security")]}
    asked = []

    def not_yet(package, version, suites):
        asked.append((package, version))
        return False

    lines = []
    assert deb_check.main(MATRIX, ["bookworm-3.11"], lines.append, _archive(listing), not_yet) == deb_check.EXIT_STALE
    assert asked == [("python3.11", "3.11.2-6+deb12u9")]   # the newest, asked only because the lane is behind
    assert "BEHIND the archive's 3.11.2-6+deb12u9" in lines[0]
    assert "the archive's pool does not serve 3.11.2-6+deb12u9's source yet" in lines[0]
    assert "set lanes.bookworm-3.11.package_version" not in lines[0]
    current = {"python3.11": [("3.11.2-6+deb12u8", "bookworm")]}
    asked.clear()
    assert deb_check.main(MATRIX, ["bookworm-3.11"], [].append, _archive(current), not_yet) == 0
    assert asked == []   # a current lane downloads nothing


def test_an_unreadable_archive_exits_3():
    from cpython_perf.errors import SourceUnavailable

    def offline(package, suites):
        raise SourceUnavailable("apt-get update failed for bookworm: Temporary failure resolving")

    with pytest.raises(deb_check.ArchiveUnreadable) as info:
        deb_check.main(MATRIX, ["bookworm-3.11"], print, offline)
    assert info.value.exit_code == 3 and "Temporary failure resolving" in str(info.value)


# --------------------------------------------------------------------------
# which build goes in, and the errors when none is there


def fake_build(cache: Path, lane, key: str = "0" * 16, *, with_series=True, fp=True, version=None,
               built_at="2026-11-25T00:00:00+00:00", debs: dict[str, str] | None = None) -> Path:
    """A lane's cache directory as deb_build leaves it: tiny real .debs, a .changes listing them, DONE."""
    out = cache / lane.name / key
    out.mkdir(parents=True)
    version = version or perf_version(lane.package_version)
    names = []
    for package, arch in (debs or {f"python{lane.version}": "amd64", f"python{lane.version}-doc": "all"}).items():
        names.append(make_deb(out, package, version, arch, lane.source_package))
    lines = []
    for name in names:
        data = (out / name).read_bytes()
        lines.append(f" {hashlib.sha256(data).hexdigest()} {len(data)} {name}")
    (out / f"{lane.source_package}_{version}_amd64.changes").write_text(
        f"Format: 1.8\nSource: {lane.source_package}\nVersion: {version}\nChecksums-Sha256:\n" + "\n".join(lines) + "\n")
    env = {"DEB_BUILD_OPTIONS": "nocheck nopgo nolto parallel=2"}
    if fp:
        env["DEB_CFLAGS_APPEND"] = "-fno-omit-frame-pointer"
    (out / "DONE").write_text(json.dumps({"flavour": {"environment": env, "with_series": with_series},
                                          "debs": names, "version": version, "built_at": built_at}))
    return out


def make_deb(where: Path, package: str, version: str, arch: str, source: str = "python3.11",
             section: str | None = "python") -> str:
    root = where / f".{package}-root"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "usr" / "share" / "doc" / package).mkdir(parents=True)
    (root / "usr" / "share" / "doc" / package / "README").write_text(f"{package} {version}\n")
    (root / "DEBIAN" / "control").write_text(
        f"Package: {package}\nSource: {source}\nVersion: {version}\nArchitecture: {arch}\n"
        + (f"Section: {section}\n" if section else "") + f"Priority: optional\nMaintainer: t <t@example.invalid>\n"
        f"Description: test package\n a test package\n")
    name = f"{package}_{version}_{arch}.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root), str(where / name)],
                   check=True, capture_output=True)
    shutil.rmtree(root)
    return name


def test_no_lane_built_names_the_sessions_to_run(tmp_path):
    with pytest.raises(apt_repo.AptRepoError) as info:
        apt_repo.select_builds(MATRIX, None, tmp_path)
    message = str(info.value)
    assert "no deb lane is built" in message
    for lane in LANES:
        assert f"`nox -s {lane.session}`" in message
    assert info.value.exit_code == 2


def test_a_named_lane_that_is_not_built_is_an_error_even_if_others_are(tmp_path):
    fake_build(tmp_path, MATRIX.lanes["trixie-3.13"])
    with pytest.raises(apt_repo.AptRepoError, match=r"not built: bookworm-3\.11; run `nox -s deb-bookworm-3\.11`"):
        apt_repo.select_builds(MATRIX, ["bookworm-3.11", "trixie-3.13"], tmp_path)
    with pytest.raises(DriverError, match="bookworm-9.99"):
        apt_repo.select_builds(MATRIX, ["bookworm-9.99"], tmp_path)


def test_a_build_of_older_inputs_is_not_published(tmp_path):
    """Packages built before the series (or the .dsc) changed are not what the lane builds now: a newer build
    of other inputs is passed over for the build of the current ones, and with none of those the lane counts
    as not built."""
    lane = MATRIX.lanes["bookworm-3.11"]
    fake_build(tmp_path, lane, "a" * 16, built_at="2026-11-24T00:00:00+00:00")
    fake_build(tmp_path, lane, "b" * 16, built_at="2026-11-25T00:00:00+00:00")
    assert apt_repo.find_lane_build(lane, tmp_path).directory.name == "b" * 16
    current = {lane.name: "a" * 64}
    assert apt_repo.find_lane_build(lane, tmp_path, lambda env: current[lane.name]).directory.name == "a" * 16
    builds = apt_repo.select_builds(MATRIX, None, tmp_path, print, lambda lane: lambda env: current[lane.name])
    assert [b.directory.name for b in builds] == ["a" * 16]
    current[lane.name] = "c" * 64   # the series changed again: nothing in the cache is of the current inputs
    lines = []
    with pytest.raises(apt_repo.AptRepoError, match="not built: bookworm-3.11"):
        apt_repo.select_builds(MATRIX, ["bookworm-3.11"], tmp_path, lines.append,
                               lambda lane: lambda env: current[lane.name])
    assert lines == ["bookworm-3.11: its packages in the cache were built from other inputs than the lane's current "
                     "ones (the series, the .dsc or the build image changed since)"]


def test_only_the_series_build_with_frame_pointers_and_the_lanes_version_goes_in(tmp_path):
    lane = MATRIX.lanes["bookworm-3.11"]
    fake_build(tmp_path, lane, "1" * 16, with_series=False)
    fake_build(tmp_path, lane, "2" * 16, fp=False)
    fake_build(tmp_path, lane, "3" * 16, version="3.11.2-6+deb12u7+perf1")
    assert apt_repo.find_lane_build(lane, tmp_path) is None
    fake_build(tmp_path, lane, "4" * 16, built_at="2026-11-24T00:00:00+00:00")
    fake_build(tmp_path, lane, "5" * 16, built_at="2026-11-25T00:00:00+00:00")
    build = apt_repo.find_lane_build(lane, tmp_path)
    assert build.directory.name == "5" * 16 and build.version == "3.11.2-6+deb12u8+perf1"
    lines = []
    assert [b.lane.name for b in apt_repo.select_builds(MATRIX, None, tmp_path, lines.append)] == ["bookworm-3.11"]
    assert lines == ["bullseye-3.9: not built, not in the repository (`nox -s deb-bullseye-3.9` builds it)",
                     "trixie-3.13: not built, not in the repository (`nox -s deb-trixie-3.13` builds it)"]


def test_distributions_conf_has_one_signed_suite_per_release(tmp_path):
    builds = [apt_repo.LaneBuild(MATRIX.lanes[n], tmp_path, perf_version(MATRIX.lanes[n].package_version), [], "")
              for n in ("bookworm-3.11", "trixie-3.13")]
    fpr = "A" * 40
    text = apt_repo.distributions_conf(builds, fpr, {"bookworm": ["amd64"], "trixie": ["amd64", "arm64"]})
    stanzas = [dict(line.split(": ", 1) for line in s.splitlines()) for s in text.strip().split("\n\n")]
    assert [s["Codename"] for s in stanzas] == ["bookworm", "trixie"]
    assert all(s["SignWith"] == fpr and s["Components"] == "main" and s["Origin"] == "cpython-perf" for s in stanzas)
    assert stanzas[1]["Architectures"] == "amd64 arm64"
    assert "Debian 12 (bookworm): python3.11 3.11.2-6+deb12u8+perf1" in stanzas[0]["Description"]
    with pytest.raises(apt_repo.SigningKeyError, match="not an OpenPGP fingerprint"):
        apt_repo.distributions_conf(builds, "apt test", {"bookworm": ["amd64"], "trixie": ["amd64"]})


def test_source_line():
    assert (apt_repo.source_line("http://127.0.0.1:8000", "bookworm")
            == "deb [signed-by=/etc/apt/keyrings/cpython-perf.gpg] http://127.0.0.1:8000/ bookworm main")


# --------------------------------------------------------------------------
# the signing key


def gen_key(home: Path, *args: str) -> str:
    home.mkdir(mode=0o700, exist_ok=True)
    subprocess.run(["gpg", "--homedir", str(home), "--batch", "--passphrase", "", "--quick-gen-key",
                    f"apt test {len(list(home.iterdir()))} <apt@example.invalid>", *args], check=True, capture_output=True)
    return apt_repo.secret_fingerprints(home)[-1]


@pytest.fixture
def gnupghome(tmp_path_factory):
    needs("gpg", "gpgconf")
    home = Path(__import__("tempfile").mkdtemp(prefix="cpython-perf-gpgtest-"))   # short: gpg-agent's socket
    yield home
    subprocess.run(["gpgconf", "--homedir", str(home), "--kill", "all"], capture_output=True)
    shutil.rmtree(home, ignore_errors=True)


def test_no_key_says_how_to_give_one():
    with pytest.raises(apt_repo.SigningKeyError) as info:
        with apt_repo.signing_key(environ={}):
            pass
    assert "no signing key" in str(info.value) and "--key-file" in str(info.value) and "--quick-gen-key" in str(info.value)


def test_an_empty_key_variable_is_refused():
    with pytest.raises(apt_repo.SigningKeyError, match="APT_SIGNING_KEY: the environment variable is not set"):
        with apt_repo.signing_key(key_env="APT_SIGNING_KEY", environ={"APT_SIGNING_KEY": ""}):
            pass


def test_a_key_that_is_not_there_is_named(gnupghome):
    with pytest.raises(apt_repo.SigningKeyError, match=f"no secret key 'ABCDEF' in {gnupghome}"):
        with apt_repo.signing_key("ABCDEF", gnupghome=str(gnupghome), environ={}):
            pass


def test_an_encryption_only_key_cannot_sign(gnupghome):
    fpr = gen_key(gnupghome, "rsa2048", "encr", "1d")
    with pytest.raises(apt_repo.SigningKeyError, match=f"the key {fpr} .* cannot sign"):
        with apt_repo.signing_key(fpr, gnupghome=str(gnupghome), environ={}):
            pass


def test_an_expired_key_cannot_sign(gnupghome):
    fpr = gen_key(gnupghome, "ed25519", "sign", "seconds=1")
    time.sleep(2)
    with pytest.raises(apt_repo.SigningKeyError, match="cannot sign"):
        with apt_repo.signing_key(fpr, gnupghome=str(gnupghome), environ={}):
            pass


def test_a_passphrase_locked_key_cannot_sign_without_an_agent_that_has_it(gnupghome):
    gnupghome.mkdir(mode=0o700, exist_ok=True)
    subprocess.run(["gpg", "--homedir", str(gnupghome), "--batch", "--pinentry-mode", "loopback", "--passphrase",
                    "secret", "--quick-gen-key", "locked <apt@example.invalid>", "ed25519", "sign", "1d"],
                   check=True, capture_output=True)
    subprocess.run(["gpgconf", "--homedir", str(gnupghome), "--reload", "gpg-agent"], capture_output=True)
    fpr = apt_repo.secret_fingerprints(gnupghome)[0]
    with pytest.raises(apt_repo.SigningKeyError, match="cannot sign"):
        with apt_repo.signing_key(fpr, gnupghome=str(gnupghome), environ={}):
            pass


def test_a_key_file_is_imported_into_a_temporary_home_removed_afterwards(gnupghome, tmp_path):
    fpr = gen_key(gnupghome, "ed25519", "sign", "1d")
    armored = subprocess.run(["gpg", "--homedir", str(gnupghome), "--armor", "--export-secret-keys", fpr],
                             check=True, capture_output=True).stdout
    (tmp_path / "key.asc").write_bytes(armored)
    with apt_repo.signing_key(key_file=str(tmp_path / "key.asc"), environ={}) as key:
        assert key.fingerprint == fpr and key.gnupghome != gnupghome
        home = key.gnupghome
    assert not home.exists()
    with apt_repo.signing_key(key_env="K", environ={"K": armored.decode()}) as key:
        assert key.fingerprint == fpr
    with pytest.raises(apt_repo.SigningKeyError, match="not the expected"):
        with apt_repo.signing_key(key_env="K", environ={"K": armored.decode()}, expect="B" * 40):
            pass
    public = subprocess.run(["gpg", "--homedir", str(gnupghome), "--armor", "--export", fpr],
                            check=True, capture_output=True).stdout
    (tmp_path / "public.asc").write_bytes(public)
    with pytest.raises(apt_repo.SigningKeyError, match="no secret key in it"):
        with apt_repo.signing_key(key_file=str(tmp_path / "public.asc"), environ={}):
            pass


# --------------------------------------------------------------------------
# the repository, made for real with reprepro


@pytest.fixture
def signing(gnupghome):
    needs("reprepro", "gpgv", "dpkg-deb")
    fpr = gen_key(gnupghome, "ed25519", "sign", "1d")
    with apt_repo.signing_key(fpr, gnupghome=str(gnupghome), environ={}) as key:
        yield key


def tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_the_repository_has_a_signed_suite_per_release_and_its_key(tmp_path, signing):
    for name in ("bookworm-3.11", "trixie-3.13"):
        fake_build(tmp_path / "cache", MATRIX.lanes[name])
    builds = apt_repo.select_builds(MATRIX, None, tmp_path / "cache", print)
    out = tmp_path / "dist" / "apt"
    manifest = apt_repo.build_repository(builds, signing, out, "http://127.0.0.1:8000/", print)
    files = tree(out)
    for suite in ("bookworm", "trixie"):
        for name in ("InRelease", "Release", "Release.gpg", "main/binary-amd64/Packages"):
            assert f"dists/{suite}/{name}" in files
    assert "pool/main/p/python3.11/python3.11_3.11.2-6+deb12u8+perf1_amd64.deb" in files
    assert "pool/main/p/python3.13/python3.13-doc_3.13.5-2+deb13u5+perf1_all.deb" in files
    assert {apt_repo.KEYRING, apt_repo.KEY_ASC, apt_repo.MANIFEST, "index.html"} <= set(files)
    assert not any(f.startswith(("conf/", "db/")) for f in files), "reprepro's state is not published"
    release = (out / "dists" / "bookworm" / "Release").read_text()
    assert "Origin: cpython-perf" in release and "Codename: bookworm" in release
    packages = (out / "dists" / "bookworm" / "main" / "binary-amd64" / "Packages").read_text()
    assert "Package: python3.11-doc\n" in packages and "Version: 3.11.2-6+deb12u8+perf1" in packages
    for suite in ("bookworm", "trixie"):
        done = subprocess.run(["gpgv", "--keyring", str(out / apt_repo.KEYRING), str(out / "dists" / suite / "InRelease")],
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    assert manifest["fingerprint"] == signing.fingerprint
    assert json.loads((out / apt_repo.MANIFEST).read_text())["suites"]["trixie"]["lanes"][0]["lane"] == "trixie-3.13"
    assert "deb [signed-by=/etc/apt/keyrings/cpython-perf.gpg] http://127.0.0.1:8000/ bookworm main" in \
        (out / "index.html").read_text()
    assert [p.name for p in out.parent.iterdir()] == ["apt"], "no temporary directory left beside it"
    # a tampered InRelease no longer verifies (what apt refuses: tests/lanes/test_apt_repo_container.py)
    inrelease = out / "dists" / "bookworm" / "InRelease"
    inrelease.write_text(inrelease.read_text().replace("Codename: bookworm", "Codename: bookwarm"))
    done = subprocess.run(["gpgv", "--keyring", str(out / apt_repo.KEYRING), str(inrelease)], capture_output=True)
    assert done.returncode != 0


def test_a_failed_run_leaves_the_previous_repository_as_it_was(tmp_path, signing):
    lane = MATRIX.lanes["bookworm-3.11"]
    directory = fake_build(tmp_path / "cache", lane)
    out = tmp_path / "dist" / "apt"
    apt_repo.build_repository(apt_repo.select_builds(MATRIX, None, tmp_path / "cache", print), signing, out)
    before = {f: (out / f).read_bytes() for f in tree(out)}
    deb = next(directory.glob("python3.11_*.deb"))
    data = bytearray(deb.read_bytes())
    data[-1] ^= 1
    deb.write_bytes(bytes(data))
    with pytest.raises(RuntimeFailure, match=r"do not verify: python3\.11_.*sha256 .*nox -s deb-bookworm-3\.11 -- --rebuild"):
        apt_repo.build_repository(apt_repo.select_builds(MATRIX, None, tmp_path / "cache", print), signing, out)
    assert {f: (out / f).read_bytes() for f in tree(out)} == before
    assert [p.name for p in out.parent.iterdir()] == ["apt"]


def test_a_failure_inside_reprepro_leaves_nothing_half_made(tmp_path, signing):
    lane = MATRIX.lanes["bookworm-3.11"]
    # a package without a Section: reprepro refuses it, after it has taken the others
    directory = fake_build(tmp_path / "cache", lane, debs={"python3.11": "amd64"})
    name = make_deb(directory, "python3.11-venv", perf_version(lane.package_version), "amd64", section=None)
    done = json.loads((directory / "DONE").read_text())
    done["debs"].append(name)
    (directory / "DONE").write_text(json.dumps(done))
    changes = next(directory.glob("*.changes"))
    data = (directory / name).read_bytes()
    changes.write_text(changes.read_text() + f" {hashlib.sha256(data).hexdigest()} {len(data)} {name}\n")
    out = tmp_path / "dist" / "apt"
    with pytest.raises(RuntimeFailure, match="reprepro includedeb bookworm failed .*No section given for 'python3.11-venv'"):
        apt_repo.build_repository(apt_repo.select_builds(MATRIX, None, tmp_path / "cache", print), signing, out)
    assert not out.exists() and list(out.parent.iterdir()) == []


def test_a_directory_that_is_not_a_repository_is_not_replaced(tmp_path, signing):
    fake_build(tmp_path / "cache", MATRIX.lanes["bookworm-3.11"])
    out = tmp_path / "docs"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    with pytest.raises(apt_repo.AptRepoError, match="is not a repository made by apt-repo"):
        apt_repo.build_repository(apt_repo.select_builds(MATRIX, None, tmp_path / "cache", print), signing, out)
    assert (out / "notes.txt").read_text() == "mine"


def test_the_command_line_says_what_is_missing(tmp_path, monkeypatch):
    from cpython_perf import cli
    from cpython_perf.lanes import run_record

    monkeypatch.setattr(run_record, "default_cache_root", lambda: tmp_path)
    # the fake build is of the lane's current inputs (its source package is not fetched)
    monkeypatch.setattr(apt_repo, "current_keys", lambda log=print: lambda lane: lambda env: "0" * 64)
    proc_err = []
    monkeypatch.setattr("sys.stderr", type("E", (), {"write": lambda self, s: proc_err.append(s), "flush": lambda self: None})())
    assert cli.main(["apt-repo", "--key", "X"]) == 2
    assert "no deb lane is built" in "".join(proc_err)
    fake_build(tmp_path, MATRIX.lanes["trixie-3.13"])
    proc_err.clear()
    assert cli.main(["apt-repo"]) == 2
    assert "no signing key" in "".join(proc_err)


def test_the_security_archive_can_be_named_like_the_main_one(monkeypatch):
    from cpython_perf.source import sources
    from cpython_perf.lanes import source_packages

    monkeypatch.setenv("CPYTHON_PERF_DEBIAN_ARCHIVE", "http://mirror.invalid/debian")
    monkeypatch.setenv("CPYTHON_PERF_DEBIAN_SECURITY_ARCHIVE", "http://mirror.invalid/debian-security")
    entries = source_packages.archive_entries(DEBIAN)
    assert entries["main"]["uri"] == "http://mirror.invalid/debian"
    assert entries["security"] == {"uri": "http://mirror.invalid/debian-security", "signed_by": None}
    assert "deb http://mirror.invalid/debian-security bookworm-security main" in \
        __import__("cpython_perf.lanes.images", fromlist=["x"]).archive_lines(DEBIAN, ["bookworm-security"], entries)
    assert sources.DEBIAN_ARCHIVE_ENV == "CPYTHON_PERF_DEBIAN_ARCHIVE"


def test_a_signing_subkey_alone_signs_under_the_primary_fingerprint(gnupghome, tmp_path):
    """The maintainers' way (docs/packagers-appendix.md, "The signing key"): the primary key offline, CI given
    only a signing subkey (gpg --export-secret-subkeys); --expect-fingerprint names the primary, which users
    compare with."""
    gnupghome.mkdir(mode=0o700, exist_ok=True)
    g = ["gpg", "--homedir", str(gnupghome), "--batch", "--passphrase", ""]
    subprocess.run([*g, "--quick-gen-key", "primary <apt@example.invalid>", "ed25519", "cert", "1d"], check=True,
                   capture_output=True)
    primary = apt_repo.secret_fingerprints(gnupghome)[0]
    subprocess.run([*g, "--quick-add-key", primary, "ed25519", "sign", "1d"], check=True, capture_output=True)
    subkeys = subprocess.run([*g, "--armor", "--export-secret-subkeys", primary], check=True,
                             capture_output=True).stdout
    with apt_repo.signing_key(key_env="K", expect=primary, environ={"K": subkeys.decode()}) as key:
        assert key.fingerprint == primary
        listing = subprocess.run(["gpg", "--homedir", str(key.gnupghome), "--with-colons", "--list-secret-keys"],
                                 capture_output=True, text=True).stdout
        assert any(line.startswith("sec:") and line.split(":")[14] == "#" for line in listing.splitlines()), \
            "the primary's secret part is not there: only the subkey signs"


def test_perf_revision_n_moves_the_version_and_the_build_but_not_the_symbols():
    """A second build of the same Debian revision (a series change) is +perf2: above +perf1, still below
    Debian's next update; the build cache key changes with it (+perf1 keys stay as they were), the minimal
    version of the added symbols stays +perf1~ (which +perf2 satisfies)."""
    from cpython_perf.lanes import deb_build, source_tree

    lane = MATRIX.lanes["bookworm-3.11"]
    second = dataclasses.replace(lane, perf_revision=2)
    assert lane.perf_revision == 1 and lane.perf_version == "3.11.2-6+deb12u8+perf1"
    assert second.perf_version == "3.11.2-6+deb12u8+perf2"
    assert deb_check.compare_versions(second.perf_version, "gt", lane.perf_version)
    assert deb_check.policy_problems(second) == []
    assert source_tree.symbols_version(lane.package_version) == "3.11.2-6+deb12u8+perf1~"
    assert deb_check.compare_versions(second.perf_version, "ge", source_tree.symbols_version(lane.package_version))
    dsc = Path(__file__)   # any file: the key hashes its bytes
    keys = {n: deb_build.build_key(dataclasses.replace(lane, perf_revision=n), dsc, {}, {}, "img") for n in (1, 2)}
    assert keys[1] != keys[2]
    entry = source_tree.changelog_entry(second, ["a.patch"], [], "", __import__("datetime").datetime(2026, 1, 1))
    assert entry.startswith("python3.11 (3.11.2-6+deb12u8+perf2) bookworm; urgency=medium")


# --------------------------------------------------------------------------
# Valid-Until, and signing the published repository again


def test_distributions_conf_gives_every_suite_a_valid_until_and_refuses_a_bad_period(tmp_path):
    builds = [apt_repo.LaneBuild(MATRIX.lanes[n], tmp_path, perf_version(MATRIX.lanes[n].package_version), [], "")
              for n in ("bookworm-3.11", "trixie-3.13")]
    arches = {"bookworm": ["amd64"], "trixie": ["amd64"]}
    text = apt_repo.distributions_conf(builds, "A" * 40, arches)
    assert text.count(f"ValidFor: {apt_repo.DEFAULT_VALID_FOR_DAYS}d\n") == 2
    assert "ValidFor: 3d\n" in apt_repo.distributions_conf(builds, "A" * 40, arches, 3)
    for bad in (0, -1, 1.5, "7"):
        with pytest.raises(apt_repo.AptRepoError, match="--valid-for .*a whole number of at least 1"):
            apt_repo.distributions_conf(builds, "A" * 40, arches, bad)


def release_dates(release: str) -> tuple[float, float]:
    from email.utils import parsedate_to_datetime

    return tuple(parsedate_to_datetime(apt_repo.release_field(release, f)).timestamp() for f in ("Date", "Valid-Until"))


def test_the_signed_release_carries_valid_until_date_plus_the_period(tmp_path, signing):
    fake_build(tmp_path / "cache", MATRIX.lanes["bookworm-3.11"])
    out = tmp_path / "dist" / "apt"
    manifest = apt_repo.build_repository(apt_repo.select_builds(MATRIX, None, tmp_path / "cache", print), signing,
                                         out, valid_for_days=5)
    signed = subprocess.run(["gpgv", "--keyring", str(out / apt_repo.KEYRING), "--output", "-",
                             str(out / "dists" / "bookworm" / "InRelease")], capture_output=True, text=True)
    assert signed.returncode == 0, signed.stderr
    date, valid_until = release_dates(signed.stdout)
    assert valid_until - date == 5 * 86400
    assert abs(date - time.time()) < 300
    assert manifest["valid_for_days"] == 5
    assert manifest["valid_until"]["bookworm"] == apt_repo.release_field(signed.stdout, "Valid-Until")


def published(tmp_path, signing, name="published"):
    for lane in ("bookworm-3.11", "trixie-3.13"):
        fake_build(tmp_path / "cache", MATRIX.lanes[lane])
    out = tmp_path / name
    apt_repo.build_repository(apt_repo.select_builds(MATRIX, None, tmp_path / "cache", print), signing, out,
                              valid_for_days=1)
    return out


def refresh(source, out: Path, signing, valid_for=apt_repo.DEFAULT_VALID_FOR_DAYS):
    work = Path(__import__("tempfile").mkdtemp(dir=out.parent))
    try:
        builds = apt_repo.published_builds(str(source), MATRIX, signing, work, print)
        return apt_repo.build_repository(builds, signing, out, None, print, valid_for, verified=True)
    finally:
        shutil.rmtree(work)


def test_refresh_signs_the_same_packages_again_with_a_later_valid_until(tmp_path, signing):
    """--refresh-from: nothing built, the same .debs under the same names and sha256, the same Packages
    entries, a new signed Release whose Valid-Until is the new period from now (a repository whose
    Valid-Until has passed is signed again the same way: gpgv does not look at it)."""
    source = published(tmp_path, signing)
    before = {f: (source / "pool" / f).read_bytes() for f in tree(source / "pool")}
    old = {s: (source / "dists" / s / "Release").read_text() for s in ("bookworm", "trixie")}
    time.sleep(1.1)   # Date has whole seconds
    out = tmp_path / "refreshed"
    manifest = refresh(source, out, signing, 9)
    assert {f: (out / "pool" / f).read_bytes() for f in tree(out / "pool")} == \
        {f: (source / "pool" / f).read_bytes() for f in tree(source / "pool")} == before
    for suite in ("bookworm", "trixie"):
        assert (out / "dists" / suite / "main" / "binary-amd64" / "Packages").read_bytes() == \
            (source / "dists" / suite / "main" / "binary-amd64" / "Packages").read_bytes()
        new = (out / "dists" / suite / "Release").read_text()
        date, until = release_dates(new)
        assert until - date == 9 * 86400 and date > release_dates(old[suite])[0]
        assert subprocess.run(["gpgv", "--keyring", str(out / apt_repo.KEYRING), str(out / "dists" / suite / "InRelease")],
                              capture_output=True).returncode == 0
    old_manifest = json.loads((source / apt_repo.MANIFEST).read_text())
    for suite in ("bookworm", "trixie"):
        assert [(x["lane"], x["version"], x["built_at"], x["packages"]) for x in manifest["suites"][suite]["lanes"]] == \
            [(x["lane"], x["version"], x["built_at"], x["packages"]) for x in old_manifest["suites"][suite]["lanes"]]
    # in place, as the workflow does it: the repository is replaced by its refreshed self
    refresh(source, source, signing)
    assert {f: (source / "pool" / f).read_bytes() for f in tree(source / "pool")} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_refresh_takes_the_repository_from_the_url_it_is_served_from(tmp_path, signing):
    import http.server
    import threading

    source = published(tmp_path, signing)
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(source))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.RequestHandlerClass.log_message = lambda *a: None
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        out = tmp_path / "refreshed"
        refresh(url, out, signing)
        assert tree(out / "pool") == tree(source / "pool")
        with pytest.raises(RuntimeFailure, match=r"--refresh-from: http://127\.0\.0\.1:\d+/nothing/cpython-perf-repository\.json: HTTP Error 404"):
            refresh(url + "nothing/", tmp_path / "other", signing)
        assert not (tmp_path / "other").exists()
    finally:
        server.shutdown()
        server.server_close()


def test_refresh_signs_only_what_this_key_signed_and_only_the_bytes_it_signed(tmp_path, signing, gnupghome):
    source = published(tmp_path, signing)
    out = tmp_path / "refreshed"
    # another key (its own keyring shipped beside it makes no difference)
    other_fpr = gen_key(gnupghome, "ed25519", "sign", "1d")
    with apt_repo.signing_key(other_fpr, gnupghome=str(gnupghome), environ={}) as other:
        with pytest.raises(apt_repo.AptRepoError, match=rf"dists/bookworm/InRelease is not signed by the signing key {other_fpr}"):
            refresh(source, out, other)
    # a .deb changed (its size kept): its Packages entry no longer matches
    deb = next((source / "pool").rglob("python3.11_*.deb"))
    data = bytearray(deb.read_bytes())
    data[len(data) // 2] ^= 1
    deb.write_bytes(bytes(data))
    with pytest.raises(RuntimeFailure, match=r"python3\.11_3\.11\.2-6\+deb12u8\+perf1_amd64\.deb: sha256 .*dists/bookworm/main/binary-amd64/Packages says"):
        refresh(source, out, signing)
    data[len(data) // 2] ^= 1
    deb.write_bytes(bytes(data))
    # a Packages index changed: the signed Release does not list its bytes
    packages = source / "dists" / "trixie" / "main" / "binary-amd64" / "Packages"
    packages.write_text(packages.read_text().replace("Priority: optional", "Priority: required"))
    with pytest.raises(RuntimeFailure, match=r"dists/trixie/main/binary-amd64/Packages: Packages: sha256 .*dists/trixie/Release says"):
        refresh(source, out, signing)
    assert not out.exists()
    # not a repository at all
    with pytest.raises(apt_repo.AptRepoError, match=r"cpython-perf-repository\.json is missing: it must be a repository made by apt-repo"):
        refresh(tmp_path / "cache", out, signing)


def test_the_command_line_refreshes_in_place_and_refuses_a_lane_with_it(tmp_path, signing, monkeypatch):
    from cpython_perf import cli

    source = published(tmp_path, signing)
    before = tree(source)
    monkeypatch.setenv("GNUPGHOME", str(signing.gnupghome))
    assert cli.main(["apt-repo", "--key", signing.fingerprint, "--refresh-from", str(source), "--out", str(source),
                     "--valid-for", "3"]) == 0
    assert tree(source) == before
    date, until = release_dates((source / "dists" / "bookworm" / "Release").read_text())
    assert until - date == 3 * 86400
    assert cli.main(["apt-repo", "--key", signing.fingerprint, "--refresh-from", str(source), "--lane",
                     "bookworm-3.11", "--out", str(source)]) == 2
    assert cli.main(["apt-repo", "--key", signing.fingerprint, "--refresh-from", str(source), "--valid-for", "0",
                     "--out", str(source)]) == 2

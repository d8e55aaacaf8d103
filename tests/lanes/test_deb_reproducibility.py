"""The deb lanes' reproducibility check without a Debian build: the varied conditions of build b, and the
comparison of two builds' .debs (real packages made with dpkg-deb; no Docker)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cpython_perf.lanes import deb_build, deb_reproducibility, docker_run

needs_dpkg_deb = pytest.mark.skipif(not shutil.which("dpkg-deb"), reason="dpkg-deb is not installed")


def test_build_b_varies_what_reprotest_varies():
    b = deb_reproducibility.variation()
    env = dict(b.env)
    # the build directory is an input: varied only when asked
    assert b.src_dir == deb_build.AS_BUILT.src_dir
    other = deb_reproducibility.variation(other_build_path=True).src_dir
    assert other != deb_build.AS_BUILT.src_dir and other.endswith("/src")
    assert env["TZ"] == "Etc/GMT-14" and env["LC_ALL"] == "C.UTF-8" and env["HOME"].startswith("/nonexistent/")
    assert env["PATH"].endswith(":/i_capture_the_path")
    assert ("--cpuset-cpus", "0") == b.docker_options[-2:] and "--hostname" in b.docker_options
    assert "--cpuset-cpus" not in deb_reproducibility.variation(same_cpus=True).docker_options
    # umask set by the shell, then the wrapper (setarch), then dpkg-buildpackage itself
    assert b.command(["dpkg-buildpackage", "-b"]) == [
        "sh", "-c", "umask 0002 && exec setarch --uname-2.6 dpkg-buildpackage -b"]
    assert deb_build.AS_BUILT.command(["dpkg-buildpackage", "-b"]) == ["dpkg-buildpackage", "-b"]


def test_docker_run_takes_the_conditions_options():
    cmd = docker_run.docker_run_command("img", ["true"], options=("--hostname", "h"))
    assert cmd[:5] == ["docker", "run", "--rm", "--hostname", "h"] and cmd[-2:] == ["img", "true"]


def _deb(root: Path, name: str, files: dict[str, bytes], mtime: int = 1_700_000_000, mode: int = 0o644) -> str:
    tree = root / f"tree-{name}"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text(f"Package: {name}\nVersion: 1\nArchitecture: all\n"
                                             "Maintainer: x <x@example.org>\nDescription: test\n")
    for rel, data in files.items():
        path = tree / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(mode)
    for dirpath, dirs, names in os.walk(tree):
        for entry in [*dirs, *names, "."]:
            os.utime(Path(dirpath, entry), (mtime, mtime))
    deb = f"{name}_1_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zxz", "-b", str(tree), str(root / deb)],
                   check=True, capture_output=True, env={**os.environ, "SOURCE_DATE_EPOCH": str(mtime)})
    shutil.rmtree(tree)
    return deb


@needs_dpkg_deb
def test_identical_packages_are_identical(tmp_path):
    for side in ("a", "b"):
        (tmp_path / side).mkdir()
        _deb(tmp_path / side, "pkg", {"usr/lib/x.so": b"same"})
    got = deb_reproducibility.compare_packages(tmp_path / "a", tmp_path / "b", ["pkg_1_all.deb"],
                                               ["pkg_1_all.deb"], tmp_path / "trees")
    assert got["differences"] == [] and got["packages"]["pkg_1_all.deb"]["identical"]


@needs_dpkg_deb
def test_differences_are_named_by_package_and_path(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _deb(tmp_path / "a", "pkg", {"usr/lib/x.so": b"one", "usr/share/doc/pkg/changelog": b"c"})
    _deb(tmp_path / "b", "pkg", {"usr/lib/x.so": b"two", "usr/share/doc/pkg/changelog": b"c"}, mtime=1_700_000_001)
    _deb(tmp_path / "a", "extra", {"x": b"x"})
    got = deb_reproducibility.compare_packages(tmp_path / "a", tmp_path / "b", ["extra_1_all.deb", "pkg_1_all.deb"],
                                               ["pkg_1_all.deb"], tmp_path / "trees")
    by_path = {d["path"]: d["what"] for d in got["differences"]}
    assert by_path["extra_1_all.deb"] == ["only in a"]
    assert by_path["pkg_1_all.deb/usr/lib/x.so"] == ["contents", "mtime"]
    assert by_path["pkg_1_all.deb/usr/share/doc/pkg/changelog"] == ["mtime"]
    assert not got["packages"]["pkg_1_all.deb"]["identical"]
    # the trees stay for diffoscope, rooted where the paths say
    assert (tmp_path / "trees" / "a" / "pkg_1_all.deb" / "usr/lib/x.so").read_bytes() == b"one"


def test_build_path_differences_have_reasons_only_when_the_path_was_varied():
    known = deb_reproducibility.known_reason
    for path in ("libpython3.11-minimal_3.11.2-6+deb12u8+perf1_amd64.deb/usr/lib/python3.11/"
                 "_sysconfigdata__x86_64-linux-gnu.py",
                 "python3.11-minimal_3.11.2-6+deb12u8+perf1_amd64.deb/usr/bin/python3.11",
                 "libpython3.11_3.11.2-6+deb12u8+perf1_amd64.deb/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0",
                 "python3.11-dbg_3.11.2-6+deb12u8+perf1_amd64.deb/usr/lib/debug/.build-id/09/f2.debug",
                 "python3.11-dbg_3.11.2-6+deb12u8+perf1_amd64.deb/DEBIAN/control"):
        assert known(path, other_build_path=True), path
        assert known(path, other_build_path=False) is None, path
    # the documentation's differences are not the build directory's
    assert known("python3.11-doc_3.11.2-6+deb12u8+perf1_all.deb/usr/share/doc/python3.11/html/searchindex.js",
                 other_build_path=True) is None
    assert known("python3.11-doc_3.11.2-6+deb12u8+perf1_all.deb/DEBIAN/control", other_build_path=True) is None


@needs_dpkg_deb
def test_members_are_compared_as_stored_not_as_unpacked(tmp_path):
    """The same members in another container (here another compression) are "archive container", nothing else:
    the members are compared as stored, not as unpacked (an unpacked tree's top directory has the unpacking's
    time)."""
    for side, compression in (("a", "-Zxz"), ("b", "-Zgzip")):
        root = tmp_path / side
        tree = root / "tree"
        (tree / "DEBIAN").mkdir(parents=True)
        (tree / "DEBIAN" / "control").write_text("Package: doc\nVersion: 1\nArchitecture: all\n"
                                                 "Maintainer: x <x@example.org>\nDescription: test\n")
        (tree / "usr/share/doc/doc/html").mkdir(parents=True)
        (tree / "usr/share/doc/doc/html/index.html").write_text("<p>x</p>\n")
        (tree / "usr/share/doc/doc/html/jquery.js").symlink_to("/usr/share/javascript/jquery/jquery.js")
        for dirpath, dirs, names in os.walk(tree):
            for entry in [*dirs, *names, "."]:
                os.utime(Path(dirpath, entry), (1_700_000_000, 1_700_000_000), follow_symlinks=False)
        subprocess.run(["dpkg-deb", "--root-owner-group", compression, "-b", str(tree), str(root / "doc_1_all.deb")],
                       check=True, capture_output=True, env={**os.environ, "SOURCE_DATE_EPOCH": "1700000000"})
    listing = deb_reproducibility.archive_listing(tmp_path / "a" / "doc_1_all.deb")
    assert listing["usr/share/doc/doc/html"].mtime == 1_700_000_000
    assert listing["usr/share/doc/doc/html/jquery.js"].kind == "symlink"
    assert listing["DEBIAN/control"].kind == "file" and "DEBIAN/." not in listing
    got = deb_reproducibility.compare_packages(tmp_path / "a", tmp_path / "b", ["doc_1_all.deb"], ["doc_1_all.deb"],
                                               tmp_path / "trees")
    assert got["differences"] == [{"path": "doc_1_all.deb", "what": ["archive container"]}]

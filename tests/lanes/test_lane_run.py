"""LaneRun (cpython_perf.lanes.lane_run) takes a lane through its phases in order, each module doing its
part, with Docker, mmdebstrap and the archive faked: what each phase records, and the cache's second run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from cpython_perf import host
from cpython_perf.lanes import (archive_binaries, deb_build, images, install_check, lane_run, lintian, run_record,
                                source_packages)
from cpython_perf.lanes.source_packages import SourcePackage
from cpython_perf.matrix import load_matrix

MATRIX = load_matrix()
LANE = MATRIX.lane("bookworm-3.11")
WANTED = install_check.install_packages(LANE)
REGRTEST_JUNIT = '<testsuites><testsuite tests="1" failures="0" errors="0" skipped="0">' \
                 '<testcase classname="test.test_sys.SysTests" name="test_x" time="0.1"/></testsuite></testsuites>'


def _mounts(cmd: list[str]) -> dict[str, Path]:
    return {v.split(":")[1]: Path(v.split(":")[0]) for i, v in enumerate(cmd) if i and cmd[i - 1] == "-v"}


def _unpacked_tree(src: Path) -> None:
    (src / "debian" / "patches").mkdir(parents=True)
    (src / "debian" / "patches" / "series").write_text("debian-own.patch\n")
    (src / "debian" / "changelog").write_text(
        f"python3.11 ({LANE.package_version}) bookworm-security; urgency=medium\n\n  * Fix.\n\n"
        " -- Someone <someone@example.org>  Wed, 13 May 2026 04:02:22 +0200\n")
    (src / "debian" / "libPVER.symbols.in").write_text(" PyAIter_Check@Base @SVER@\n")


def _fake_world(monkeypatch, tmp_path: Path) -> list[str]:
    steps: list[str] = []
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("CPYTHON_PERF_SOURCE_CACHE", raising=False)
    monkeypatch.setattr(host, "ensure_commands", lambda *a, **k: None)
    monkeypatch.setattr(host, "docker_client", lambda *a, **k: object())
    dsc = tmp_path / "pkg" / f"python3.11_{LANE.package_version}.dsc"
    dsc.parent.mkdir()
    dsc.write_text("Source: python3.11\nBinary: " + ", ".join(WANTED) + "\nBuild-Depends: debhelper\n")
    monkeypatch.setattr(source_packages, "fetch_source_package",
                        lambda lane, log=print: SourcePackage("python3.11", LANE.package_version, dsc, (dsc,)))
    monkeypatch.setattr(source_packages, "archive_entries",
                        lambda distribution: {"main": {"uri": "http://archive.invalid/debian", "signed_by": None}})
    monkeypatch.setattr(images, "image_label", lambda tag: None)
    monkeypatch.setattr(images, "bootstrap_image", lambda client, cmd, tar, tag, log, **k: steps.append(f"image {tag}"))

    def run_logged(cmd, log_file, name=None, timeout=None, log=print, what=None):
        steps.append(what)
        work = _mounts(cmd)["/w"]
        if what.endswith("unpack"):
            _unpacked_tree(work / "src")
        if what.endswith("build"):
            for package in WANTED:
                (work / f"{package}_{LANE.perf_version}_amd64.deb").write_bytes(b"deb")
            (work / f"python3.11_{LANE.perf_version}_amd64.changes").write_text("changes")
            (work / f"python3.11_{LANE.perf_version}_amd64.buildinfo").write_text("buildinfo")
        with open(log_file, "a") as f:
            f.write(f"{what}\n")
        return 0
    monkeypatch.setattr(deb_build, "run_logged", run_logged)

    def captured(cmd, timeout=3600):
        argv = cmd[cmd.index(next(a for a in cmd if a.startswith(("cpython-perf-deb", "cpython-perf-debbuild")))):]
        out = ""
        if "lintian" in argv:
            steps.append("lintian")
            out = "W: python3.11: some-tag info\n"
        elif "apt-get download" in " ".join(argv):
            steps.append("archive download")
            for package in WANTED:
                (_mounts(cmd)["/a"] / f"{package}_{LANE.package_version}_amd64.deb").write_bytes(b"deb")
        elif "-X" in argv:
            out = "True\n"
        elif "fp-check" in argv:
            out = "CFLAGS -fno-omit-frame-pointer\nPROLOGUE /usr/bin/python3.11 1000\n  1000: push %rbp\n  mov %rsp,%rbp\n"
        elif "-m" in argv and "test" in argv:
            steps.append(f"regrtest {argv[0]}")
            (_mounts(cmd)["/out"] / "junit.xml").write_text(REGRTEST_JUNIT)
        elif "-c" in argv:
            out = "test_sys\n"
        return subprocess.CompletedProcess(cmd, 0, out, "")
    for module in (lintian, archive_binaries, install_check):
        monkeypatch.setattr(module, "run_captured", captured)
    monkeypatch.setattr(install_check.containers, "perf_capability",
                        lambda client, tag: (_ for _ in ()).throw(RuntimeError("no perf here")))
    return steps


def test_a_run_goes_through_every_phase_in_order(monkeypatch, tmp_path):
    steps = _fake_world(monkeypatch, tmp_path)
    run = lane_run.LaneRun(LANE, MATRIX, run_record.DebOptions(), log=lambda *a: None,
                           results_root=tmp_path / "results", cache_root=tmp_path / "cache")
    summary = run.run()
    assert summary["result"] == "ok" and summary["problems"] == []
    assert list(summary["phases"]) == ["source", "build-image", "unpack", "prepare", "patch", "build", "lintian",
                                       "archive-packages", "lintian-archive", "install-images", "checks"]
    assert steps[:4] == [f"image {summary['build_image']}", "bookworm-3.11: unpack", "bookworm-3.11: patch",
                         "bookworm-3.11: build"]
    assert summary["version"] == LANE.perf_version and summary["symbols_added"]
    assert summary["images"] == {"built": "cpython-perf-deb:bookworm-3.11",
                                 "archive": "cpython-perf-deb:bookworm-3.11-archive"}
    assert summary["checks"]["built"]["trampoline_active"] and summary["checks"]["built"]["frame_pointer"]
    recorded = json.loads((tmp_path / "results" / "bookworm-3.11" / "summary.json").read_text())
    assert recorded["result"] == "ok" and (tmp_path / "results" / "bookworm-3.11" / "lintian-diff.txt").is_file()
    # the second run takes the cache's packages: no unpack, no build
    steps.clear()
    again = lane_run.LaneRun(LANE, MATRIX, run_record.DebOptions(), log=lambda *a: None,
                             results_root=tmp_path / "results", cache_root=tmp_path / "cache").run()
    assert again["phases"]["build"].startswith("cached") and not [s for s in steps if s.endswith(": build")]
    assert again["packages_dir"] == summary["packages_dir"]

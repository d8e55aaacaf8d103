"""check-series --source: a series tried on a supplied tarball, .dsc or tree, patch by patch (small synthetic
sources: fast)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from cpython_perf import cli
from cpython_perf.lanes import series_forms, source_check
from cpython_perf.lanes.source_check import ALREADY, APPLIES, FAILS, FUZZ, OFFSET, PARTLY

BASE = {"a.c": "".join(f"line {i}\n" for i in range(1, 41)), "b.c": "one\ntwo\nthree\nfour\nfive\n"}


def _hunk(path: str, old_start: int, context_before: list[str], minus: list[str], plus: list[str],
          context_after: list[str]) -> str:
    old = context_before + minus + context_after
    new = context_before + plus + context_after
    body = [" " + l for l in context_before] + ["-" + l for l in minus] + ["+" + l for l in plus] + \
           [" " + l for l in context_after]
    return (f"@@ -{old_start},{len(old)} +{old_start},{len(new)} @@\n" + "\n".join(body) + "\n")


def _patch(description: str, *files: tuple[str, list[str]]) -> str:
    out = [f"Description: {description}\nOrigin: vendor\nForwarded: not-needed\nLast-Update: 2026-11-25\n---\n"]
    for path, hunks in files:
        out.append(f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n" + "".join(hunks))
    return "".join(out)


# patch 1 changes line 5 and line 30 of a.c; patch 2 builds on patch 1's line 5; patch 3 changes b.c
P1 = _patch("first", ("a.c", [_hunk("a.c", 2, ["line 2", "line 3", "line 4"], ["line 5"], ["line 5 fixed"],
                                     ["line 6", "line 7", "line 8"]),
                               _hunk("a.c", 27, ["line 27", "line 28", "line 29"], ["line 30"], ["line 30 fixed"],
                                     ["line 31", "line 32", "line 33"])]))
P2 = _patch("second", ("a.c", [_hunk("a.c", 3, ["line 3", "line 4", "line 5 fixed"], ["line 6"], ["line 6 too"],
                                     ["line 7", "line 8", "line 9"])]))
P3 = _patch("third", ("b.c", [_hunk("b.c", 1, ["one"], ["two"], ["TWO"], ["three", "four"])]))
NEW_FILE = ("Description: new file\nOrigin: vendor\nForwarded: not-needed\nLast-Update: 2026-11-25\n---\n"
            + series_forms.new_file_diff("new/file.c", b"int x;\n"))
SERIES = [("0001-first.patch", P1), ("0002-second.patch", P2), ("0003-third.patch", P3)]


def _tree(where: Path, files: dict[str, str]) -> Path:
    where.mkdir(parents=True)
    for rel, text in files.items():
        (where / rel).parent.mkdir(parents=True, exist_ok=True)
        (where / rel).write_text(text)
    return where


def _tarball(tmp_path: Path, files: dict[str, str], name="Python-3.99.1", suffix=".tar.xz") -> Path:
    tree = _tree(tmp_path / "make" / name, files)
    path = tmp_path / f"{name}{suffix}"
    with tarfile.open(path, "w:xz" if suffix.endswith("xz") else "w:gz") as tar:
        tar.add(tree, arcname=name)
    return path


def _status(results):
    return [(r.name, r.label) for r in results]


def test_a_clean_source_applies_patch_by_patch(tmp_path):
    results = source_check.check_source(SERIES, _tarball(tmp_path, BASE))
    assert _status(results) == [(n, APPLIES) for n, _ in SERIES]
    assert source_check.exit_status(results) == 0


def test_offsets_are_named_per_hunk(tmp_path):
    files = dict(BASE, **{"a.c": "extra\nextra\n" + BASE["a.c"]})
    results = source_check.check_source(SERIES, _tarball(tmp_path, files, suffix=".tgz"))
    assert results[0].status == OFFSET and results[0].offsets == ["a.c #1 +2", "a.c #2 +2"]
    assert results[1].status == OFFSET
    assert source_check.exit_status(results) == 0


def test_fuzz_is_reported_and_fails_the_check(tmp_path):
    files = dict(BASE, **{"b.c": "one\ntwo\nthree\nFOUR CHANGED\nfive\n"})
    results = source_check.check_source(SERIES, _tarball(tmp_path, files))
    assert results[2].status == FUZZ and results[2].label == "fuzz 1"
    assert source_check.exit_status(results) == 1


def test_a_change_the_source_already_has_is_already_applied_not_a_failure(tmp_path):
    files = dict(BASE, **{"b.c": "one\nTWO\nthree\nfour\nfive\n"})
    results = source_check.check_source(SERIES, _tarball(tmp_path, files))
    assert _status(results) == [("0001-first.patch", APPLIES), ("0002-second.patch", APPLIES),
                                ("0003-third.patch", ALREADY)]
    assert source_check.exit_status(results) == 0


def test_part_of_a_patch_in_the_source_is_partly_applied_and_the_rest_is_applied(tmp_path):
    files = dict(BASE, **{"a.c": BASE["a.c"].replace("line 30\n", "line 30 fixed\n")})
    results = source_check.check_source(SERIES, _tarball(tmp_path, files))
    assert results[0].status == PARTLY and "a.c #2" in results[0].note
    assert results[1].status == APPLIES        # built on the part that was applied
    assert source_check.exit_status(results) == 1


def test_a_failed_patch_is_named_with_its_hunks_and_the_next_ones_are_still_tried(tmp_path):
    files = dict(BASE, **{"a.c": BASE["a.c"].replace("line 5\n", "line five\n")})
    results = source_check.check_source(SERIES, _tarball(tmp_path, files))
    assert results[0].status == FAILS and results[0].failed == ["a.c #1"]
    assert results[1].status == FAILS           # it builds on the failed one
    assert results[2].status == APPLIES
    assert source_check.exit_status(results) == 1
    text = source_check.table(results)
    assert "FAILS" in text and "failed: a.c #1" in text


def test_alone_tries_each_patch_on_the_source_as_it_is(tmp_path):
    results = source_check.check_source(SERIES, _tarball(tmp_path, BASE), alone=True)
    assert _status(results) == [("0001-first.patch", APPLIES), ("0002-second.patch", FAILS),
                                ("0003-third.patch", APPLIES)]


def test_a_new_file_patch_is_already_applied_where_the_file_is(tmp_path):
    named = [("0000-new-files.patch", NEW_FILE)] + SERIES
    assert source_check.check_source(named, _tarball(tmp_path / "x", BASE))[0].status == APPLIES
    with_file = dict(BASE, **{"new/file.c": "int x;\n"})
    assert source_check.check_source(named, _tarball(tmp_path / "y", with_file))[0].status == ALREADY


def test_split_hunks_keeps_each_files_header():
    units = source_check.split_hunks(P1 + P3.split("---\n", 1)[1])
    assert [label for label, _ in units] == ["a.c #1", "a.c #2", "b.c #1"]
    assert all(unit.startswith("diff --git") and "+++ b/" in unit for _, unit in units)


def test_a_directory_is_copied_not_changed(tmp_path):
    tree = _tree(tmp_path / "src", BASE)
    results = source_check.check_source(SERIES, tree)
    assert _status(results) == [(n, APPLIES) for n, _ in SERIES]
    assert (tree / "a.c").read_text() == BASE["a.c"]


def test_unusable_sources_are_clear_errors(tmp_path):
    (tmp_path / "x.zip").write_text("")
    with pytest.raises(source_check.SourceCheckError, match="not a tarball"):
        source_check.source_kind(tmp_path / "x.zip")
    with pytest.raises(source_check.SourceCheckError, match="no such file"):
        source_check.source_kind(tmp_path / "missing.tar.xz")
    (tmp_path / "bad.tar.xz").write_text("not xz")
    with pytest.raises(source_check.SourceCheckError, match="cannot extract"):
        source_check.check_source(SERIES, tmp_path / "bad.tar.xz")


@pytest.mark.skipif(shutil.which("dpkg-source") is None, reason="dpkg-source is not installed (Debian's dpkg-dev)")
def test_a_dsc_is_unpacked_with_debians_own_patches_applied(tmp_path):
    """The series is tried after the package's own patches: here Debian's patch already makes b.c's change."""
    orig = _tarball(tmp_path, BASE, name="pyperfdemo-1.0")
    shutil.copy(orig, tmp_path / "pyperfdemo_1.0.orig.tar.xz")
    src = tmp_path / "pkg" / "pyperfdemo-1.0"
    src.parent.mkdir()
    with tarfile.open(orig) as tar:
        tar.extractall(src.parent, filter="tar")
    debian = src / "debian"
    (debian / "source").mkdir(parents=True)
    (debian / "source" / "format").write_text("3.0 (quilt)\n")
    (debian / "control").write_text("Source: pyperfdemo\nMaintainer: Nobody <nobody@example.org>\n\n"
                                    "Package: pyperfdemo\nArchitecture: all\nDescription: demo\n demo\n")
    (debian / "changelog").write_text("pyperfdemo (1.0-1) unstable; urgency=medium\n\n  * Demo.\n\n"
                                      " -- Nobody <nobody@example.org>  Tue, 24 Nov 2026 00:00:00 +0000\n")
    (debian / "patches").mkdir()
    (debian / "patches" / "series").write_text("debian-b.diff\n")
    (debian / "patches" / "debian-b.diff").write_text(P3.split("---\n", 1)[1])
    shutil.move(str(tmp_path / "pyperfdemo_1.0.orig.tar.xz"), src.parent / "pyperfdemo_1.0.orig.tar.xz")
    proc = subprocess.run(["dpkg-source", "-b", "pyperfdemo-1.0"], cwd=src.parent, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    dsc = src.parent / "pyperfdemo_1.0-1.dsc"
    results = source_check.check_source(SERIES, dsc)
    assert _status(results) == [("0001-first.patch", APPLIES), ("0002-second.patch", APPLIES),
                                ("0003-third.patch", ALREADY)]
    assert "Debian's own patches applied" in source_check.describe_source(dsc)


def test_the_command_prints_the_table_and_exits_1_on_a_failure(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(series_forms, "quilt_patches", lambda series: SERIES)
    good = _tarball(tmp_path / "g", BASE)
    assert cli.main(["check-series", "3.13", "--source", str(good)]) == 0
    out = capsys.readouterr().out
    assert "CPython 3.13 series (3 patches, quilt form), in order on" in out and "3 applies" in out
    bad = _tarball(tmp_path / "b", dict(BASE, **{"b.c": "other\n"}))
    assert cli.main(["check-series", "3.13-fp", "--source", str(bad), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["version"] == "3.13" and report["patches"][2]["status"] == FAILS

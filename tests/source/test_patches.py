from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from cpython_perf.source import patches
from cpython_perf.errors import PatchFailed
from cpython_perf.matrix import PROJECT_ROOT

from ..conftest import dedent

GOOD = dedent("""
    Description: change greeting
    Origin: vendor
    Forwarded: not-needed
    Last-Update: 2026-11-22
    ---
    --- a/hello.txt
    +++ b/hello.txt
    @@ -1,3 +1,3 @@
     one
    -hello
    +hello, perf
     three
    """)

BAD = dedent("""
    Description: a patch written for another release
    Origin: vendor
    Forwarded: not-needed
    Last-Update: 2026-11-22
    ---
    --- a/hello.txt
    +++ b/hello.txt
    @@ -1,3 +1,3 @@
     one
    -goodbye
    +goodbye, perf
     three
    """)


@pytest.fixture
def tarball(tmp_path) -> Path:
    tree = tmp_path / "Python-3.99.0"
    tree.mkdir()
    (tree / "hello.txt").write_text("one\nhello\nthree\n")
    path = tmp_path / "Python-3.99.0.tar.xz"
    with tarfile.open(path, "w:xz") as tar:
        tar.add(tree, arcname="Python-3.99.0")
    return path


def make_series(tmp_path, **named) -> Path:
    d = tmp_path / "series-dir"
    d.mkdir(exist_ok=True)
    for name, text in named.items():
        (d / f"{name}.patch").write_text(text)
    (d / "series").write_text("# comment\n\n" + "".join(f"{n}.patch -p1\n" for n in named))
    return d / "series"


def test_series_applies(tmp_path, tarball):
    series = make_series(tmp_path, good=GOOD)
    assert patches.check_series_applies(tarball, "Python-3.99.0", [], tmp_path, series) == 1


def test_failing_patch_names_patch_file_and_hunk(tmp_path, tarball):
    series = make_series(tmp_path, good=GOOD, bad=BAD)
    with pytest.raises(PatchFailed) as info:
        patches.check_series_applies(tarball, "Python-3.99.0", [], tmp_path, series)
    message = str(info.value)
    assert "patch bad.patch does not apply" in message
    assert "hello.txt: hunk #1 FAILED at line 1" in message


def test_series_naming_a_missing_patch(tmp_path):
    d = tmp_path / "s"
    d.mkdir()
    (d / "series").write_text("ghost.patch\n")
    with pytest.raises(PatchFailed, match=r"series:1: series names ghost\.patch"):
        patches.read_series(d / "series")


def test_additions_are_copied_before_patching(tmp_path, tarball):
    additions = tmp_path / "additions"
    (additions / "Python").mkdir(parents=True)
    (additions / "Python" / "new.c").write_text("int x;\n")
    patch = dedent("""
        Description: use the new file
        Origin: vendor
        Forwarded: not-needed
        Last-Update: 2026-11-22
        ---
        --- a/Python/new.c
        +++ b/Python/new.c
        @@ -1 +1 @@
        -int x;
        +int x = 1;
        """)
    series = make_series(tmp_path, use=patch)
    assert patches.check_series_applies(tarball, "Python-3.99.0", ["Python/new.c"], additions, series) == 1



def _recipe(tarball):
    from cpython_perf.matrix import Recipe
    return Recipe(version="3.99.0", url=f"https://example.invalid/{tarball.name}", sha256="0" * 64, size=None,
                  debian=None, configure=(), path=tarball)


def test_the_source_stage_checks_a_read_series_on_the_verified_source(tmp_path, tarball):
    """check_cell_series applies the patches read_cell_series read (not the series file again) to the verified
    tarball and says so; the value handed on carries how many applied."""
    from cpython_perf.source import sources

    series = make_series(tmp_path, good=GOOD)
    read = patches.read_cell_series(series)
    assert read.applied is None and [p.name for p in read.patches] == ["good.patch"]
    series.write_text("# the file changed after it was read: the stage applies what it read\n")
    lines = []
    checked = patches.check_cell_series(read, sources.VerifiedSource(_recipe(tarball), tarball, True), tmp_path,
                                        lines.append)
    assert checked.applied == 1 and checked.patches == read.patches
    assert lines == [f"series {series}: 1 patches apply to Python-3.99.0"]
    bad = patches.read_cell_series(make_series(tmp_path, bad=BAD))
    with pytest.raises(PatchFailed, match="patch bad.patch does not apply"):
        patches.check_cell_series(bad, sources.VerifiedSource(_recipe(tarball), tarball, True), tmp_path)


def test_the_source_stage_checks_no_series_on_an_unverified_source(tmp_path, tarball):
    from cpython_perf.source import sources

    read = patches.read_cell_series(make_series(tmp_path, good=GOOD))
    with pytest.raises(ValueError, match="was not fetched and verified"):
        patches.check_cell_series(read, sources.pinned_source(_recipe(tarball)), tmp_path)


def test_dep3_fields(tmp_path):
    p = tmp_path / "x.patch"
    p.write_text("Subject: thing\nOrigin: vendor\n continued\n---\n")
    assert patches.dep3_header(p)["Description"] == "thing"
    assert patches.missing_dep3_fields(p) == ["Forwarded", "Last-Update"]


def test_every_project_patch_has_a_dep3_header():
    for series in sorted((PROJECT_ROOT / "patches").glob("*/series")):
        for patch in patches.read_series(series):
            assert patches.missing_dep3_fields(patch.path) == [], f"{patch.path} lacks DEP-3 fields"


def test_dep3_problems_name_what_a_packager_misses():
    base = "Description: x\n y\nOrigin: backport, https://example.org/1\nForwarded: not-needed\nLast-Update: 2026-11-23\n---\n"
    problems = patches.dep3_problems(base)
    assert any("Not forwarded" in p for p in problems) and any("Applied-Upstream" in p for p in problems)
    good = base.replace(" y\n", " y\n .\n Not forwarded: a backport.\n") + ""
    good = good.replace("Forwarded: not-needed\n", "Forwarded: not-needed\nApplied-Upstream: 3.12\n")
    assert patches.dep3_problems(good) == []
    assert any("wants no, not-needed or a URL" in p
               for p in patches.dep3_problems(good.replace("Forwarded: not-needed", "Forwarded: not-needed, why")))
    assert any("YYYY-MM-DD" in p for p in patches.dep3_problems(good.replace("2026-11-23", "yesterday")))


def test_every_project_patch_has_a_complete_dep3_header():
    """Applied-Upstream where upstream has it, the reason where not forwarded."""
    for series in sorted((PROJECT_ROOT / "patches").glob("*/series")):
        for patch in patches.read_series(series):
            assert patches.dep3_problems(patch.path.read_text()) == [], patch.path



def test_a_missing_patch_command_is_a_clear_error_not_a_traceback(tmp_path, monkeypatch):
    """Without patch(1) and without the right to install it, applying a series says what to install."""
    from cpython_perf.errors import DriverError
    from cpython_perf.source.patches import Patch, apply_series
    monkeypatch.setenv("CPYTHON_PERF_NO_HOST_SETUP", "1")
    monkeypatch.setenv("PATH", str(tmp_path))          # no patch(1) on it
    with pytest.raises(DriverError) as info:
        apply_series([Patch("0001-x.patch", tmp_path / "0001-x.patch")], tmp_path)
    assert "missing on this machine: patch" in str(info.value)
    assert "apt-get install patch" in str(info.value)


def test_patch_output_read_hunk_by_hunk():
    """The one reader of GNU patch's report: fuzz, offsets and failures, each named by file and hunk (the
    series check and the source check both use it)."""
    output = "\n".join([
        "patching file Python/sysmodule.c",
        "Hunk #1 succeeded at 2716 (offset 13 lines).",
        "Hunk #2 succeeded at 2790 with fuzz 2 (offset -4 lines).",
        "Hunk #3 FAILED at 2801.",
        "checking file 'Python/perf_trampoline.c'",
        "Reversed (or previously applied) patch detected!  Assume -R? [n]",
        "can't find file to patch at input line 5",
        "The next patch would create the file Lib/new.py,",
        "which already exists!  Assume -R? [n]",
    ])
    said = patches.read_patch_output(output)
    assert said.fuzz == 2
    assert said.offsets == ("Python/sysmodule.c #1 +13", "Python/sysmodule.c #2 -4")
    assert said.failures == (
        "Python/sysmodule.c: hunk #3 FAILED at line 2801",
        "Python/perf_trampoline.c: already has the change (reversed or previously applied patch)",
        "Python/perf_trampoline.c: no such file",
        "Python/perf_trampoline.c: already exists",
    )
    assert patches.read_patch_output("patching file a.c\n") == patches.PatchOutput()

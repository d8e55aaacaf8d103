"""The packager forms of each series (cpython_perf.distro.series_forms), applied for real.

Pristine CPython trees come from the verified source cache (fetched once, from
python.org or Debian); Debian's trees from the distro lanes' source packages
(matrix.yaml `distros:`), unpacked with dpkg-source, which applies Debian's own
patches.  A source this machine cannot reach is skipped with the reason.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from cpython_perf import patches, sources
from cpython_perf.distro import series_forms, source_packages
from cpython_perf.errors import SourceUnavailable
from cpython_perf.matrix import load_matrix

MATRIX = load_matrix()
SERIES_VERSIONS = sorted(MATRIX.series)
LANES = sorted(MATRIX.distros)


def _cell_of(version):
    return next(c for c in MATRIX.cells.values() if c.version == version and not c.vanilla)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """pristine(version) -> a fresh copy of the version's pristine source tree."""
    extracted: dict[str, Path] = {}

    def get(version) -> Path:
        if version not in extracted:
            recipe = _cell_of(version).recipe
            try:
                tarball = sources.fetch_source(recipe, log=lambda line: None)
            except SourceUnavailable as exc:
                pytest.skip(f"CPython {recipe.version} is not reachable here: {str(exc).splitlines()[0]}")
            where = tmp_path_factory.mktemp(f"pristine-{version}")
            with tarfile.open(tarball) as tar:
                tar.extractall(where, filter="tar")
            extracted[version] = where / recipe.srcdir
        copy = tmp_path_factory.mktemp(f"tree-{version}") / "src"
        shutil.copytree(extracted[version], copy, symlinks=True)
        return copy

    return get


def _reference(tree: Path, version: str) -> Path:
    """The project's own way: additions copied, then the series with patch -p1."""
    vs = MATRIX.series_of(version)
    patches.copy_additions(vs.additions, series_forms.ADDITIONS_ROOT, tree)
    patches.apply_series(patches.read_series(vs.series), tree)
    return tree


def _patch_f0(tree: Path, patch: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["patch", "-p1", "-F0", "--batch", "--forward", "--no-backup-if-mismatch", "-r", "-",
                           "-i", str(patch)], cwd=tree, capture_output=True, text=True)


def _same_trees(a: Path, b: Path) -> str:
    proc = subprocess.run(["diff", "-rq", "--no-dereference", "-x", ".git", str(a), str(b)],
                          capture_output=True, text=True)
    return proc.stdout + proc.stderr


def test_quilt_form_is_reproducible_and_complete(tmp_path):
    for version in SERIES_VERSIONS:
        vs = MATRIX.series_of(version)
        first = series_forms.write_quilt_form(vs, tmp_path / "a" / version)
        second = series_forms.write_quilt_form(vs, tmp_path / "b" / version)
        assert first == second
        for name in first:
            assert (tmp_path / "a" / version / name).read_bytes() == (tmp_path / "b" / version / name).read_bytes()
            problems = patches.dep3_problems((tmp_path / "a" / version / name).read_text())
            assert not problems, f"{version}/{name}: {problems}"
        listed = [l for l in (tmp_path / "a" / version / "series").read_text().splitlines() if l and l[0] != "#"]
        assert listed == first
        expected = [p.name for p in patches.read_series(vs.series)]
        assert first == ([series_forms.NEW_FILES_PATCH] if vs.additions else []) + expected


def test_new_files_patch_creates_every_addition_byte_for_byte(tmp_path):
    vs = MATRIX.series_of("3.11")
    (tmp_path / "q").mkdir()
    names = series_forms.write_quilt_form(vs, tmp_path / "q")
    tree = tmp_path / "tree"
    tree.mkdir()
    proc = _patch_f0(tree, tmp_path / "q" / names[0])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for rel in vs.additions:
        assert (tree / rel).read_bytes() == (series_forms.ADDITIONS_ROOT / rel).read_bytes(), rel
    # and git apply takes it too
    git_tree = tmp_path / "git"
    git_tree.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=git_tree, check=True)
    proc = subprocess.run(["git", "apply", str(tmp_path / "q" / names[0])], cwd=git_tree, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert sorted(str(p.relative_to(git_tree)) for p in git_tree.rglob("*") if p.is_file() and ".git" not in p.parts) \
        == sorted(vs.additions)


def test_new_file_diff_keeps_a_missing_final_newline(tmp_path):
    diff = series_forms.new_file_diff("x.txt", b"one\ntwo")
    assert diff.endswith("+two\n\\ No newline at end of file\n")
    (tmp_path / "p").write_text(diff)
    (tmp_path / "t").mkdir()
    assert _patch_f0(tmp_path / "t", tmp_path / "p").returncode == 0
    assert (tmp_path / "t" / "x.txt").read_bytes() == b"one\ntwo"


def test_mail_of_takes_subject_author_date_and_trailers():
    text = ("Description: Fix the thing\n A longer story.\n .\n From here on.\n"
            "Author: A Person <a@example.org>\nOrigin: vendor\nForwarded: no\nLast-Update: 2026-11-20\n---\n"
            "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    mail = series_forms.mail_of(text, 2, 3)
    assert "From: A Person <a@example.org>\n" in mail
    assert "Subject: [PATCH 2/3] Fix the thing\n" in mail
    assert "Date: Fri, 20 Nov 2026 00:00:00 +0000\n" in mail
    assert "\nA longer story.\n\n>From here on.\n" in mail     # a body line starting 'From ' is escaped for mbox
    assert "\nOrigin: vendor\nForwarded: no\nLast-Update: 2026-11-20\n---\ndiff --git" in mail


@pytest.mark.parametrize("version", SERIES_VERSIONS)
def test_quilt_form_applies_at_fuzz_0_to_the_pristine_source(version, pristine, tmp_path):
    """patch -p1 -F0 (dpkg-source's and quilt's fuzz) and git apply, in order, give the project's tree."""
    vs = MATRIX.series_of(version)
    names = series_forms.write_quilt_form(vs, tmp_path / "quilt")
    tree = pristine(version)
    for name in names:
        check = subprocess.run(["git", "apply", "--check", str(tmp_path / "quilt" / name)], cwd=tree,
                               capture_output=True, text=True)
        assert check.returncode == 0, f"git apply --check {name}: {check.stderr}"
        proc = _patch_f0(tree, tmp_path / "quilt" / name)
        assert proc.returncode == 0, f"{name} at fuzz 0: {proc.stdout}{proc.stderr}"
        assert "fuzz" not in proc.stdout, f"{name} needed fuzz: {proc.stdout}"
    differences = _same_trees(tree, _reference(pristine(version), version))
    assert not differences, differences


@pytest.mark.parametrize("version", SERIES_VERSIONS)
def test_mbox_form_applies_with_git_am(version, pristine, tmp_path):
    vs = MATRIX.series_of(version)
    mbox = series_forms.write_mbox_form(vs, tmp_path / "series.mbox")
    tree = pristine(version)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org"]
    subprocess.run([*git, "init", "-q"], cwd=tree, check=True)
    subprocess.run([*git, "add", "-A", "-f"], cwd=tree, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "pristine"], cwd=tree, check=True)
    proc = series_forms.git_am(mbox, tree)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log = subprocess.run(["git", "log", "--format=%an|%s", "HEAD"], cwd=tree, capture_output=True, text=True).stdout
    subjects = log.splitlines()[:-1][::-1]
    named = series_forms.quilt_patches(vs)
    assert len(subjects) == len(named)
    for (name, text), line in zip(named, subjects):
        first = patches.dep3_header_text(text).get("Description", "").splitlines()[0]
        assert line.split("|", 1)[1] == first, name
    differences = _same_trees(tree, _reference(pristine(version), version))
    assert not differences, differences


# --------------------------------------------------------------------------
# Debian's own source packages (matrix.yaml distros:)


@pytest.fixture(scope="module")
def debian_tree(tmp_path_factory):
    """debian_tree(lane) -> the lane's source package unpacked with dpkg-source (Debian's patches applied)."""
    trees: dict[str, Path] = {}

    def get(name) -> Path:
        lane = MATRIX.distro(name)
        if shutil.which("dpkg-source") is None:
            pytest.skip("dpkg-source is not installed here (Debian's dpkg-dev)")
        if name not in trees:
            try:
                package = source_packages.fetch_source_package(lane, log=lambda line: None)
            except SourceUnavailable as exc:
                pytest.skip(f"{lane.source_package} {lane.package_version} is not reachable here: "
                            f"{str(exc).splitlines()[0]}")
            where = tmp_path_factory.mktemp(f"deb-{name}") / "src"
            proc = subprocess.run(["dpkg-source", "--no-check", "-x", str(package.dsc), str(where)],
                                  capture_output=True, text=True)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            trees[name] = where
        return trees[name]

    return get


@pytest.mark.parametrize("name", LANES)
def test_quilt_form_applies_at_fuzz_0_after_the_distros_own_patches(name, debian_tree, tmp_path):
    """What dpkg-source does with the series appended to debian/patches/series: every patch at fuzz 0."""
    lane = MATRIX.distro(name)
    source = debian_tree(name)
    tree = tmp_path / "src"
    shutil.copytree(source, tree, symlinks=True)
    debian_series = [l for l in (tree / "debian" / "patches" / "series").read_text().splitlines()
                     if l.strip() and not l.startswith("#")]
    assert debian_series, "the Debian package has no patches to put ours after"
    names = series_forms.write_quilt_form(lane.patch_series, tmp_path / "quilt")
    for patch in names:
        check = subprocess.run(["git", "apply", "--check", str(tmp_path / "quilt" / patch)], cwd=tree,
                               capture_output=True, text=True)
        proc = _patch_f0(tree, tmp_path / "quilt" / patch)
        assert proc.returncode == 0, (
            f"{patch} does not apply at fuzz 0 after {len(debian_series)} Debian patches of "
            f"{lane.source_package} {lane.package_version}:\n{proc.stdout}{proc.stderr}")
        assert check.returncode == 0, f"git apply --check {patch}: {check.stderr}"

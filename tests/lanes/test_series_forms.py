"""The packager forms of each series (cpython_perf.lanes.series_forms), applied for real.

Pristine CPython trees come from the verified source cache (fetched once, from
python.org or Debian); Debian's trees from the packaging lanes' source packages
(matrix.yaml `lanes:`), unpacked with dpkg-source, which applies Debian's own
patches.  A source this machine cannot reach is skipped with the reason.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

from cpython_perf.source import patches, sources
from cpython_perf.lanes import series_forms, source_packages
from cpython_perf.errors import SourceUnavailable
from cpython_perf.matrix import load_matrix

MATRIX = load_matrix()
SERIES_VERSIONS = sorted(MATRIX.series)
LANES = sorted(MATRIX.lanes)


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
# Debian's own source packages (matrix.yaml lanes:)


@pytest.fixture(scope="module")
def debian_tree(tmp_path_factory):
    """debian_tree(lane) -> the lane's source package unpacked with dpkg-source (Debian's patches applied)."""
    trees: dict[str, Path] = {}

    def get(name) -> Path:
        lane = MATRIX.lane(name)
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
def test_quilt_form_applies_at_fuzz_0_after_the_distributions_own_patches(name, debian_tree, tmp_path):
    """What dpkg-source does with the series appended to debian/patches/series: every patch at fuzz 0."""
    lane = MATRIX.lane(name)
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


# --------------------------------------------------------------------------
# Fedora's form: fedora-python/cpython's NNNNN: commits, importpatches' files, the spec's Patch lines

FEDORA_BUILD_ENV = "CPYTHON_PERF_FEDORA_BUILD"


def _released(version: str) -> str:
    return _cell_of(version).recipe.version


@pytest.mark.parametrize("version", SERIES_VERSIONS)
def test_fedora_form_numbers_subjects_files_and_spec_lines(version, tmp_path):
    vs = MATRIX.series_of(version)
    fps = series_forms.fedora_patches(vs)
    quilt = series_forms.quilt_patches(vs)
    assert [fp.source_name for fp in fps] == [name for name, _ in quilt]
    first = series_forms.FEDORA_FIRST
    # 00900 is the new-files patch of a backport; otherwise 009NN is patch NNNN of the series
    assert [fp.number for fp in fps] == list(range(first + (0 if vs.additions else 1), first + len(fps)
                                                   + (0 if vs.additions else 1)))
    for fp, (name, _) in zip(fps, quilt):
        if name != series_forms.NEW_FILES_PATCH:
            assert fp.number == first + int(name[:4]), name
        assert fp.summary.startswith(f"{fp.number:05d}: ")
        assert fp.filename == series_forms.slugify(fp.summary) + ".patch"
        assert fp.filename.startswith(f"{fp.number:05d}-") and re.fullmatch(r"[a-z0-9_-]+\.patch", fp.filename)
        assert f"\nSubject: {fp.summary}\n" in fp.mail          # no [PATCH n/m]: importpatches keeps it as it is
    assert len({fp.filename for fp in fps}) == len(fps)
    out = series_forms.write_fedora_form(vs, tmp_path / "a", _released(version))
    again = series_forms.write_fedora_form(vs, tmp_path / "b", _released(version))
    files = sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    for rel in files:
        assert (out / rel).read_bytes() == (again / rel).read_bytes(), rel
    spec = (out / f"python{version}.spec-patches.txt").read_text()
    entries = re.findall(r"^# (\d{5}) # ([0-9a-f]{40})\n((?:#.*\n)+)Patch(\d+): (\S+)$", spec, re.M)
    assert [(int(n), int(p), f) for n, _, _, p, f in entries] == [(fp.number, fp.number, fp.filename) for fp in fps]
    for (_, pid, comment, _, _), fp in zip(entries, fps):
        assert pid == series_forms.patch_id(fp.mail)
        assert comment.splitlines()[0] == "# " + fp.summary.split(": ", 1)[1]
        assert comment.splitlines()[1] == "#"
    assert "%" not in spec.replace("%%", "")         # rpm macros cannot be expanded in a comment
    assert sorted(p.name for p in (out / "patches").iterdir()) == sorted(fp.filename for fp in fps)
    assert (out / f"cpython-{version}-fedora.mbox").read_text() == "".join(fp.mail for fp in fps)
    readme = (out / "README.txt").read_text()
    assert f"git am cpython-{version}-fedora.mbox" in readme and "%autosetup -S git_am" in readme
    assert "make regen-all" in readme and f"v{_released(version)}" in readme


@pytest.mark.parametrize("version", SERIES_VERSIONS)
def test_fedora_branch_is_one_commit_per_patch_and_the_quilt_forms_tree(version, pristine, tmp_path):
    vs = MATRIX.series_of(version)
    out = series_forms.write_fedora_form(vs, tmp_path / "fedora", _released(version))
    tree = pristine(version)
    branch = series_forms.fedora_branch(vs, tree, _released(version), out / f"cpython-{version}-fedora.mbox")
    assert branch == f"fedora-{version}"
    log = subprocess.run(["git", "log", "--reverse", "--format=%s", f"v{_released(version)}..{branch}"], cwd=tree,
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert log == [fp.summary for fp in series_forms.fedora_patches(vs)]
    differences = _same_trees(tree, _reference(pristine(version), version))
    assert not differences, differences
    # git am left nothing behind: no conflict, no stray file
    status = subprocess.run(["git", "status", "--porcelain"], cwd=tree, capture_output=True, text=True).stdout
    assert status == ""


def _fedora_build_versions() -> list[str]:
    wanted = os.environ.get(FEDORA_BUILD_ENV, "")
    return [v.strip() for v in wanted.split(",") if v.strip()] or ["3.13"]


@pytest.mark.fedora_build
@pytest.mark.skipif(not os.environ.get(FEDORA_BUILD_ENV),
                    reason=f"builds CPython (minutes): nox -s fedora-build, or {FEDORA_BUILD_ENV}=3.13 (a comma list)")
@pytest.mark.parametrize("version", _fedora_build_versions())
def test_fedora_branch_builds_regen_all_changes_nothing_and_the_trampoline_runs(version, pristine, tmp_path,
                                                                                 record_property):
    """As Fedora's spec does it: the branch imported with git am, configured, `make regen-all` (here with the
    interpreter just built: Fedora's build root has the same version's), built; the patched tree must already be
    what regen-all makes."""
    vs = MATRIX.series_of(version)
    out = series_forms.write_fedora_form(vs, tmp_path / "fedora", _released(version))
    tree = pristine(version)
    series_forms.fedora_branch(vs, tree, _released(version), out / f"cpython-{version}-fedora.mbox")
    started = time.monotonic()

    def run(*args, **kw):
        proc = subprocess.run(list(args), cwd=tree, capture_output=True, text=True, **kw)
        assert proc.returncode == 0, f"{' '.join(args)}:\n{(proc.stdout + proc.stderr)[-4000:]}"
        return proc.stdout

    run("./configure", "-q", "--with-ensurepip=no")
    run("make", "-j2", "-s")
    built = time.monotonic()
    run("make", "regen-all", "PYTHON_FOR_REGEN=./python")
    changed = run("git", "status", "--porcelain", "--untracked-files=no")
    assert changed == "", f"make regen-all changed tracked files of the patched tree:\n{changed}"
    run("make", "-j2", "-s")
    probe = ("import os, sys\n"
             "for backend in ('perf', 'perf_jit'):\n"
             "    sys.activate_stack_trampoline(backend)\n"
             "    assert sys.is_stack_trampoline_active(), backend\n"
             "    (lambda: None)()\n"
             "    sys.deactivate_stack_trampoline()\n"
             "pid = os.getpid()\n"
             "print(os.path.getsize(f'/tmp/perf-{pid}.map') > 0, os.path.getsize(f'/tmp/jit-{pid}.dump') > 0)\n"
             "os.unlink(f'/tmp/perf-{pid}.map'); os.unlink(f'/tmp/jit-{pid}.dump')\n")
    assert run("./python", "-c", probe).split() == ["True", "True"]
    record_property("build_seconds", round(built - started))
    record_property("total_seconds", round(time.monotonic() - started))
    print(f"{version}: configure + make -j2 {built - started:.0f} s; with regen-all and the probe "
          f"{time.monotonic() - started:.0f} s")

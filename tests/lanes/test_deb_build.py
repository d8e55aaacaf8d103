"""A packaging lane's Debian build, module by module (cpython_perf.lanes: source_tree, deb_build, images, lintian,
install_check, docker_run): command lines, the edits of the unpacked source package (series, changelog, symbols),
lintian parsing, option parsing.  No Docker."""

from __future__ import annotations

import os
import shutil
import subprocess
from datetime import datetime, timezone
from pathlib import Path

import pytest

from cpython_perf import cli
from cpython_perf.lanes import (deb_build, docker_run, images, install_check, lane_run, lintian, run_record,
                                 source_packages, source_tree)
from cpython_perf.errors import DriverError
from cpython_perf.matrix import load_matrix

MATRIX = load_matrix()
LANE = MATRIX.lane("bookworm-3.11")
ENTRIES = {"main": {"uri": "http://archive.example/debian", "signed_by": None},
           "security": {"uri": "http://security.example/debian-security", "signed_by": None}}

SYMBOLS = """\
 PyUnicode_Type@Base @SVER@
 PyUnicode_WriteChar@Base @SVER@
 PyVectorcall_Call@Base @SVER@
 PyWeakref_GetObject@Base @SVER@
"""

DSC = """\
Format: 3.0 (quilt)
Source: python3.11
Binary: python3.11, python3.11-venv, libpython3.11-stdlib,
 python3.11-minimal, python3.11-doc
Version: 3.11.2-6+deb12u8
Build-Depends: debhelper (>= 11), quilt, autoconf, xvfb <!nocheck>
Build-Depends-Indep: python3-sphinx, texinfo
"""


def test_symbols_version_is_met_by_perf_builds_only():
    version = source_tree.symbols_version("3.9.2-1+deb11u7")
    assert version == "3.9.2-1+deb11u7+perf1~"
    if shutil.which("dpkg"):
        for other, relation in (("3.9.2-1+deb11u7+perf1", "ge"), ("3.9.2-1+deb11u7+perf2", "ge"),
                                ("3.9.2-1+deb11u7", "lt"), ("3.9.2-1+deb11u8", "ge")):
            assert subprocess.run(["dpkg", "--compare-versions", other, relation, version]).returncode == 0


def test_perf_version_sorts_after_the_archive_version():
    assert source_tree.perf_version("3.11.2-6+deb12u8") == "3.11.2-6+deb12u8+perf1"
    if shutil.which("dpkg"):
        assert subprocess.run(["dpkg", "--compare-versions", "3.11.2-6+deb12u8+perf1", "gt",
                               "3.11.2-6+deb12u8"]).returncode == 0
        assert subprocess.run(["dpkg", "--compare-versions", "3.11.2-6+deb12u8+perf1", "lt",
                               "3.11.2-6+deb12u9"]).returncode == 0


def test_series_names_are_appended_after_the_distributions_own():
    text = source_tree.append_series("0001-debian.patch\nCVE-1.patch", ["0000-new.patch", "0001-a.patch"])
    assert text.splitlines() == ["0001-debian.patch", "CVE-1.patch", "cpython-perf/0000-new.patch",
                                 "cpython-perf/0001-a.patch"]
    with pytest.raises(DriverError, match="not pristine"):
        source_tree.append_series(text, ["0001-a.patch"])


def test_symbols_added_sorted_in_the_files_format():
    text, added = source_tree.add_symbols(SYMBOLS, "3.11.2-6+deb12u8+perf1")
    assert added == list(source_tree.NEW_SYMBOLS)
    lines = text.splitlines()
    assert lines == sorted(lines)   # kept sorted
    assert " PyUnstable_PerfTrampoline_CompileCode@Base 3.11.2-6+deb12u8+perf1" in lines
    assert lines[2] == " PyUnstable_CopyPerfMapFile@Base 3.11.2-6+deb12u8+perf1"
    assert lines[-2:] == [" PyVectorcall_Call@Base @SVER@", " PyWeakref_GetObject@Base @SVER@"]


def test_arch_restricted_symbols_as_debians_313_lists_them():
    text, added = source_tree.add_symbols(SYMBOLS + " _Py_hexdigits@Base @SVER@\n _Py_wfopen@Base @SVER@\n", "V", (),
                                          source_tree.ARCH_SYMBOLS)
    assert added == ["_Py_trampoline_func_start", "_Py_trampoline_func_end"]
    assert text.splitlines()[-3:] == [" (arch=amd64 arm64)_Py_trampoline_func_end@Base V",
                                      " (arch=amd64 arm64)_Py_trampoline_func_start@Base V",
                                      " _Py_wfopen@Base @SVER@"]
    debian_313 = " (arch=amd64 arm64)_Py_trampoline_func_end@Base @SVER@\n" \
                 " (arch=amd64 arm64)_Py_trampoline_func_start@Base @SVER@\n"
    assert source_tree.add_symbols(debian_313, "V", (), source_tree.ARCH_SYMBOLS) == (debian_313, [])


def test_symbols_already_present_are_not_added_again():
    """trixie's python3.13 exports all six upstream: nothing to add."""
    present = "".join(f" {name}@Base @SVER@\n" for name in sorted(source_tree.NEW_SYMBOLS))
    text, added = source_tree.add_symbols(present, "3.13.5-2+deb13u5+perf1")
    assert added == [] and text == present
    partial = " PyUnstable_CopyPerfMapFile@Base @SVER@\n"
    text, added = source_tree.add_symbols(partial, "v")
    assert "PyUnstable_CopyPerfMapFile" not in added and len(added) == 5


def test_symbols_file_is_the_shared_template(tmp_path):
    debian = tmp_path / "debian"
    debian.mkdir()
    (debian / "libpython.symbols.in").write_text(SYMBOLS)
    (debian / "libPVER.symbols.in").write_text('libpython@VER@.so.1.0 libpython@VER@ #MINVER#\n'
                                               '#include "libpython.symbols"\n')
    assert source_tree.symbols_file(debian, "3.11") == debian / "libpython.symbols.in"
    (debian / "libpython.symbols.in").unlink()
    assert source_tree.symbols_file(debian, "3.11") == debian / "libPVER.symbols.in"


def test_changelog_entry():
    when = datetime(2026, 11, 23, 13, 11, 45, tzinfo=timezone.utc)
    entry = source_tree.changelog_entry(LANE, ["0000-perf-trampoline-new-files.patch", "0001-x.patch"],
                                        ["PyUnstable_CopyPerfMapFile"], "debian/libpython.symbols.in", when)
    lines = entry.splitlines()
    assert lines[0] == "python3.11 (3.11.2-6+deb12u8+perf1) bookworm; urgency=medium"
    assert "cpython-perf" in entry and "debian/patches/cpython-perf/" in entry
    assert "PyUnstable_CopyPerfMapFile" in entry
    assert lines[-2] == (" -- cpython-perf project <cpython-perf@users.noreply.github.com>  "
                         "Mon, 23 Nov 2026 13:11:45 +0000")
    assert all(len(line) <= 80 for line in lines[1:-2])
    assert entry.endswith("\n\n") and "backported to 3.11.2" in entry
    fixes = source_tree.changelog_entry(MATRIX.lane("trixie-3.13"), ["0001-gh-141579.patch"], [], "", when)
    assert fixes.startswith("python3.13 (3.13.5-2+deb13u5+perf1) trixie;") and "Fix the perf profiler" in fixes
    assert "symbols" not in fixes


@pytest.mark.skipif(not shutil.which("dpkg-parsechangelog"), reason="dpkg-dev is not installed")
def test_changelog_entry_parses(tmp_path):
    when = datetime(2026, 11, 23, 13, 0, 0, tzinfo=timezone.utc)
    old = ("python3.11 (3.11.2-6+deb12u8) bookworm-security; urgency=medium\n\n  * Fix.\n\n"
           " -- Someone <someone@example.org>  Wed, 13 May 2026 04:02:22 +0000\n")
    (tmp_path / "changelog").write_text(source_tree.changelog_entry(LANE, ["a.patch"], [], "", when) + old)
    out = subprocess.run(["dpkg-parsechangelog", "-l", str(tmp_path / "changelog")], capture_output=True,
                         text=True, check=True).stdout
    assert "Version: 3.11.2-6+deb12u8+perf1" in out and "Distribution: bookworm" in out


def test_prepare_tree(tmp_path):
    tree = tmp_path / "src"
    (tree / "debian" / "patches").mkdir(parents=True)
    (tree / "debian" / "patches" / "series").write_text("debian-own.patch\n")
    (tree / "debian" / "changelog").write_text("python3.11 (3.11.2-6+deb12u8) bookworm; urgency=medium\n\n  * Fix.\n\n"
                                               " -- Someone <someone@example.org>  Wed, 13 May 2026 04:02:22 +0000\n")
    (tree / "debian" / "libpython.symbols.in").write_text(SYMBOLS)
    (tree / "debian" / "libPVER.symbols.in").write_text('#include "libpython.symbols"\n')
    form = tmp_path / "form"
    form.mkdir()
    (form / "0000-new.patch").write_text("x")
    prepared = source_tree.prepare_tree(tree, LANE, form, ["0000-new.patch"])
    assert (tree / "debian/patches/cpython-perf/0000-new.patch").read_text() == "x"
    assert (tree / "debian/patches/series").read_text() == "debian-own.patch\ncpython-perf/0000-new.patch\n"
    assert (tree / "debian/changelog").read_text().startswith("python3.11 (3.11.2-6+deb12u8+perf1) bookworm;")
    assert prepared.version == "3.11.2-6+deb12u8+perf1" and len(prepared.symbols_added) == 8
    assert " PyUnstable_CopyPerfMapFile@Base 3.11.2-6+deb12u8+perf1~\n" in \
        (tree / "debian/libpython.symbols.in").read_text()
    assert prepared.symbols_path == "debian/libpython.symbols.in"
    with pytest.raises(DriverError, match="not pristine"):
        source_tree.prepare_tree(tree, LANE, form, ["0000-new.patch"])
    # the baseline: the tree is left as Debian ships it
    assert source_tree.prepare_tree(tree, LANE, None, []).version == "3.11.2-6+deb12u8"


def test_build_environment_default_and_release_grade():
    env = deb_build.build_environment(run_record.DebOptions(), MATRIX)
    assert env["DEB_BUILD_OPTIONS"] == "nocheck nopgo nolto parallel=2"
    assert env["DEB_CFLAGS_APPEND"] == "-fno-omit-frame-pointer -mno-omit-leaf-frame-pointer"
    assert env["MAKEFLAGS"] == "JOBS=1" and env["PYTHONHASHSEED"] == "0"
    env = deb_build.build_environment(run_record.DebOptions(release_grade=True, jobs=4), MATRIX)
    assert env == {"DEB_BUILD_OPTIONS": "parallel=4"}
    assert deb_build.dpkg_buildpackage_command() == ["dpkg-buildpackage", "-b", "-uc", "-us"]


def test_lintian_command():
    cmd = lintian.lintian_command("/out/x.changes")
    assert cmd[0] == "lintian" and cmd[-1] == "/out/x.changes"
    assert {"--pedantic", "--display-info", "--display-experimental"} <= set(cmd)
    assert cmd[cmd.index("--fail-on") + 1] == "none"   # exit status 1 then means a run-time error only


def test_dsc_fields_and_build_image_tag():
    assert source_packages.dsc_field(DSC, "Build-Depends-Indep") == "python3-sphinx, texinfo"
    assert source_packages.binary_packages(DSC) == ["python3.11", "python3.11-venv", "libpython3.11-stdlib",
                                                    "python3.11-minimal", "python3.11-doc"]
    tag = images.build_image_tag(LANE, DSC)
    assert tag.startswith("cpython-perf-debbuild:bookworm-")
    assert tag == images.build_image_tag(LANE, DSC)
    assert tag != images.build_image_tag(LANE, DSC.replace("texinfo", "texinfo, libfoo-dev"))


def test_build_image_command_bootstraps_with_the_build_dependencies(tmp_path):
    dsc = tmp_path / "python3.11_3.11.2-6+deb12u8.dsc"
    cmd = images.build_image_command(LANE, dsc, tmp_path / "r.tar", ENTRIES)
    assert cmd[:2] == ["mmdebstrap", "--variant=apt"]
    assert "lintian" in cmd[2] and "quilt" in cmd[2] and "dpkg-dev" in cmd[2]
    hook = next(c for c in cmd if "build-dep" in c)
    assert hook.endswith(" build-dep /tmp/cpython-perf-dsc/python3.11_3.11.2-6+deb12u8.dsc bookworm")
    assert 'apt-get build-dep -y "$1"' in hook and "Package: src:%s" in hook
    assert f"--customize-hook=copy-in {dsc} /tmp/cpython-perf-dsc" in cmd
    assert cmd[-4:] == ["bookworm", str(tmp_path / "r.tar"), "deb http://archive.example/debian bookworm main",
                        "deb http://security.example/debian-security bookworm-security main"]


@pytest.mark.skipif(not shutil.which("sh"), reason="no sh")
def test_build_dep_script_pins_what_the_pool_does_not_serve(tmp_path):
    """The retry: a 404 of a package the index lists pins its source package to the release suite."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "apt-get").write_text(
        "#!/bin/sh\n"
        f"if [ -f {tmp_path}/pinned ]; then echo installed; exit 0; fi\n"
        f"touch {tmp_path}/pinned\n"
        "echo 'E: Failed to fetch http://mirror/debian-security/pool/updates/main/b/bluez/"
        "libbluetooth-dev_5.55-3.1%2bdeb11u2_amd64.deb  404  Not Found [IP: 1.2.3.4 80]'\n"
        "exit 100\n")
    (bindir / "apt-get").chmod(0o755)
    script = images.BUILD_DEP_SCRIPT.replace("/etc/apt/preferences.d/", f"{tmp_path}/")
    proc = subprocess.run(["sh", "-c", script, "build-dep", "x.dsc", "bullseye"], capture_output=True, text=True,
                          env={"PATH": f"{bindir}:/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pinning src:bluez to bullseye" in proc.stdout
    assert (tmp_path / "cpython-perf-unserved").read_text() == \
        "Package: src:bluez\nPin: release n=bullseye\nPin-Priority: 990\n\n"


def test_install_image_command_takes_perf_from_the_perf_suite(tmp_path):
    debs = [tmp_path / "python3.11_3.11.2-6+deb12u8+perf1_amd64.deb"]
    cmd = images.install_image_command(LANE, debs, tmp_path / "r.tar", ENTRIES)
    assert "linux-perf/bookworm-backports" in cmd[2]
    assert f"--include={debs[0]}" in cmd
    assert f"--hook-dir={images.MMDEBSTRAP_DEB_HOOK}" in cmd
    assert f"--customize-hook={images.PERF_LINK_HOOK}" in cmd
    # perf from one of the lane's own suites: no /suite, which would drag its dependencies (libpython3.9!)
    # to that suite's versions
    bullseye = images.install_image_command(MATRIX.lane("bullseye-3.9"), debs, tmp_path / "r.tar", ENTRIES)
    assert bullseye[2].endswith(",linux-perf") and "linux-perf/" not in " ".join(bullseye)
    assert cmd[-3:] == ["deb http://archive.example/debian bookworm main",
                        "deb http://security.example/debian-security bookworm-security main",
                        "deb http://archive.example/debian bookworm-backports main"]


def test_no_mirror_host_in_the_module():
    for module in Path(deb_build.__file__).parent.glob("*.py"):
        text = module.read_text()
        assert "deb.debian.org" not in text and "debian.org/debian" not in text, module.name


def test_docker_run_command():
    cmd = docker_run.docker_run_command("img", ["dpkg-buildpackage", "-b"], mounts={Path("/h"): "/w"},
                                        env={"A": "b c"}, workdir="/w/src", name="n", network=False,
                                        cap_add=["PERFMON"], user="65534:65534")
    assert cmd == ["docker", "run", "--rm", "--name", "n", "--user", "65534:65534", "-v", "/h:/w", "-e", "A=b c", "-w", "/w/src",
                   "--cap-add", "PERFMON", "--cap-add", "IPC_LOCK", "--network", "none", "img", "dpkg-buildpackage", "-b"]
    assert "IPC_LOCK" not in docker_run.docker_run_command("img", ["true"])   # only beside a perf capability


LINTIAN_BUILT = """\
E: python3.11 changes: bad-distribution-in-changes-file bookworm
W: libpython3.11-stdlib: package-contains-documentation-outside-usr-share-doc [usr/lib/python3.11/x.txt]
I: python3.11-minimal: spelling-error-in-binary teh the [usr/bin/python3.11]
W: libpython3.11: symbols-file-contains-current-version-with-debian-revision on symbol PyUnstable_CopyPerfMapFile@Base and 9 others
I: libpython3.11-dbg: new-tag-of-the-series x
I: python3.11: version 3.11.2-6+deb12u8+perf1 whatever
N: 1 tag overridden
"""
LINTIAN_ARCHIVE = """\
W: libpython3.11-stdlib: package-contains-documentation-outside-usr-share-doc [usr/lib/python3.11/x.txt]
I: python3.11: version 3.11.2-6+deb12u8 whatever
W: python3.11-doc: gone-tag
W: libpython3.11: symbols-file-contains-current-version-with-debian-revision on symbol _PyBytes_DecodeEscape2@Base and 1 others
"""


def test_lintian_parse_and_compare():
    versions = ("3.11.2-6+deb12u8+perf1", "3.11.2-6+deb12u8")
    built = lintian.parse_lintian(LINTIAN_BUILT, versions)
    archive = lintian.parse_lintian(LINTIAN_ARCHIVE, versions)
    assert len(built) == 6 and built[0].kind == "changes" and built[1].kind == "binary"
    diff = lintian.compare_lintian(built, archive)
    # a version-only difference is no difference; the same tag with other info is `changed`, not new
    assert sorted(t.tag for t in diff.new) == ["new-tag-of-the-series", "spelling-error-in-binary"]
    assert [(b.tag, a.info) for b, a in diff.changed] == [
        ("symbols-file-contains-current-version-with-debian-revision",
         "on symbol _PyBytes_DecodeEscape2@Base and 1 others")]
    assert [t.tag for t in diff.changes_only] == ["bad-distribution-in-changes-file"]
    assert diff.gone == []   # python3.11-doc is not among the compared built packages
    assert "+ W: libpython3.11: symbols-file" in diff.report("v+perf1", "v")


def test_lintian_more_instances_of_a_tag_the_archive_has():
    """lintian 2.104 (bullseye) emits a tag per object: the series' objects are more of the same, not new."""
    obj = "I: libpython3.9-dbg: unstripped-static-library usr/lib/python3.9/config-3.9d/libpython3.9d.a({})"
    archive = lintian.parse_lintian("\n".join(obj.format(o) for o in ("ceval.o", "abstract.o")))
    built = lintian.parse_lintian("\n".join(obj.format(o) for o in ("ceval.o", "abstract.o", "perf_trampoline.o")))
    diff = lintian.compare_lintian(built, archive)
    assert diff.new == [] and diff.changed == [] and diff.gone == []
    assert [t.info for t in diff.more] == ["usr/lib/python3.9/config-3.9d/libpython3.9d.a(perf_trampoline.o)"]


OBJDUMP = """\
PROLOGUE /usr/bin/python3.11 00000000001f5e40

00000000001f5e40 <_PyEval_EvalFrameDefault@@Base>:
  1f5e40:	push   %rbp
  1f5e41:	mov    %rsp,%rbp
  1f5e44:	push   %r15
PROLOGUE /usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0 00000000001a0000

00000000001a0000 <_PyEval_EvalFrameDefault@@Base>:
  1a0000:	push   %r15
  1a0002:	push   %r14
PROLOGUE /nonexistent none
"""


def test_frame_pointer_prologues_and_cflags():
    assert install_check.frame_pointer_prologues(OBJDUMP) == {
        "/usr/bin/python3.11": True, "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0": False}
    assert install_check.sysconfig_cflags("CFLAGS -g -fno-omit-frame-pointer\nCONFIG_ARGS x") == \
        "-g -fno-omit-frame-pointer"
    assert install_check.sysconfig_cflags("CFLAGS -O2\nPY_CORE_CFLAGS -O2 -fno-omit-frame-pointer", "PY_CORE_CFLAGS") == \
        "-O2 -fno-omit-frame-pointer"


def test_install_packages_and_regrtest_argv():
    assert install_check.install_packages(LANE)[0] == "python3.11"
    assert "libpython3.11-testsuite" in install_check.install_packages(LANE)
    argv = install_check.regrtest_argv("/usr/bin/python3.11", ["test_sys"], "/out/j.xml")
    assert argv[:3] == ["/usr/bin/python3.11", "-m", "test"] and argv[-1] == "test_sys"


def test_cli_deb_options(monkeypatch):
    seen = {}

    class FakeRun:
        def __init__(self, lane, matrix, options, log):
            seen["lane"], seen["options"] = lane.name, options

        def run(self):
            return {"lane": seen["lane"], "phases": {}}

    monkeypatch.setattr(lane_run, "LaneRun", FakeRun)
    assert cli.main(["deb", "bookworm-3.11"]) == 0
    assert seen["options"] == run_record.DebOptions()
    assert cli.main(["deb", "trixie-3.13", "--release-grade", "--without-series", "--jobs", "1", "--rebuild",
                     "--no-checks", "--no-lintian"]) == 0
    assert seen["lane"] == "trixie-3.13"
    assert seen["options"] == run_record.DebOptions(release_grade=True, with_series=False, jobs=1, rebuild=True,
                                                    checks=False, lintian=False)
    assert cli.main(["deb", "sid-3.99"]) != 0


def _pristine_tree(root: Path, changelog: str) -> Path:
    tree = root / "src"
    (tree / "debian" / "patches").mkdir(parents=True)
    (tree / "debian" / "patches" / "series").write_text("debian-own.patch\n")
    (tree / "debian" / "changelog").write_text(changelog)
    (tree / "debian" / "libpython.symbols.in").write_text(SYMBOLS)
    (tree / "debian" / "libPVER.symbols.in").write_text('#include "libpython.symbols"\n')
    return tree


def test_two_preparations_of_the_same_inputs_write_the_same_changelog(tmp_path, monkeypatch):
    """The +perf entry's date feeds SOURCE_DATE_EPOCH: it must come from the inputs, not the clock."""
    debian_entry = ("python3.11 (3.11.2-6+deb12u8) bookworm-security; urgency=medium\n\n  * Fix.\n\n"
                    " -- Someone <someone@example.org>  Wed, 13 May 2026 04:02:22 +0200\n")
    form = tmp_path / "form"
    form.mkdir()
    (form / "0000-new.patch").write_text("Description: x\nLast-Update: 2026-11-22\n---\n")
    (form / "0001-fix.patch").write_text("Description: y\nLast-Update: 2026-10-01\n---\n")
    texts = []
    for run, now in enumerate((datetime(2026, 11, 27, 1, 2, 3, tzinfo=timezone.utc),
                               datetime(2027, 3, 4, 5, 6, 7, tzinfo=timezone.utc))):
        class Clock(datetime):
            @classmethod
            def now(cls, tz=None):
                return now
        monkeypatch.setattr(source_tree, "datetime", Clock)
        tree = _pristine_tree(tmp_path / str(run), debian_entry)
        source_tree.prepare_tree(tree, LANE, form, ["0000-new.patch", "0001-fix.patch"])
        texts.append((tree / "debian" / "changelog").read_text())
    assert texts[0] == texts[1]
    assert "  Sun, 22 Nov 2026 00:00:00 +0000\n" in texts[0]


def test_entry_date_is_the_later_of_debians_entry_and_the_series():
    debian = " -- Someone <someone@example.org>  Wed, 13 May 2026 04:02:22 +0200\n"
    assert source_tree.entry_date(debian, ["Last-Update: 2026-01-01\n"]) == \
        datetime(2026, 5, 13, 2, 2, 22, tzinfo=timezone.utc)
    assert source_tree.entry_date(debian, ["Last-Update: 2026-06-01\n", "Last-Update: 2026-05-31\n"]) == \
        datetime(2026, 6, 1, tzinfo=timezone.utc)
    with pytest.raises(DriverError, match="no dated entry"):
        source_tree.entry_date("python3.11 (1) x; urgency=low\n", ["no header"])


DOC_MAKEFILE = """JOBS = auto
html:
\t@echo sphinx-build -j $(JOBS)
"""


@pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed here")
def test_the_documentation_is_read_by_one_sphinx_process(tmp_path):
    """Debian's rules run `$(MAKE) -C Doc html` from a make that dpkg-buildpackage starts: the lane's MAKEFLAGS
    must reach that sub-make and override Doc/Makefile's own `JOBS = auto`."""
    (tmp_path / "Doc").mkdir()
    (tmp_path / "Doc" / "Makefile").write_text(DOC_MAKEFILE)
    (tmp_path / "rules").write_text("build:\n\t@$(MAKE) -s --no-print-directory -C Doc html\n")

    def sphinx_command(options: run_record.DebOptions) -> str:
        env = {k: v for k, v in os.environ.items() if k != "MAKEFLAGS"}
        run = subprocess.run(["make", "-s", "-f", "rules", "build"], cwd=tmp_path, capture_output=True, text=True,
                             env={**env, **deb_build.build_environment(options, MATRIX)}, check=True)
        return run.stdout.strip() + run.stderr
    assert sphinx_command(run_record.DebOptions()) == "sphinx-build -j 1"
    assert sphinx_command(run_record.DebOptions(release_grade=True)) == "sphinx-build -j auto"

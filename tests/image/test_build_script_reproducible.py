"""docker/build-cpython.sh makes the same tree whatever the caller's umask, locale and time zone, and dates what
`make install` writes with SOURCE_DATE_EPOCH, the pristine tarball's newest member (not the additions' or the
patched files' times).  Run for real on the host with a stand-in source tree (its configure writes a Makefile
whose install target records the environment it ran in), in a second.  The real build of a cell twice is
`python -m cpython_perf reproducibility CELL` (nox -s reproducibility-<cell>)."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from cpython_perf.image.render import BUILD_SCRIPT

RELEASED = 1613741686            # 2021-02-19 13:34:46 UTC
OLDER = RELEASED - 86400

# a stand-in for CPython's configure: the Makefile it writes has an install target that records the environment
MAKEFILE = (
    "BUILDPYTHON=python\n"
    "PYTHON_FOR_BUILD=./$(BUILDPYTHON) -E\n"
    "all:\n\ttouch built.so\n"
    "install:\n"
    "\tmkdir -p $(PREFIX)/lib/sub\n"
    "\tcp lib.py $(PREFIX)/lib/lib.py\n"
    "\tcp -p built.so $(PREFIX)/lib/built.so\n"   # as setup.py installs extension modules: build time kept
    "\techo \"umask=$$(umask) LC_ALL=$$LC_ALL TZ=$$TZ SOURCE_DATE_EPOCH=$$SOURCE_DATE_EPOCH "
    "PYTHONHASHSEED=$$PYTHONHASHSEED PYTHONHOME=$$PYTHONHOME\" > $(PREFIX)/lib/env.txt\n"
    "\techo '$(PYTHON_FOR_BUILD)' > $(PREFIX)/lib/python-for-build.txt\n"
    "\techo compileall \\\n\t\t-j0 -d $(PREFIX) > $(PREFIX)/lib/compileall.txt\n")   # as 3.9-3.11 write it
CONFIGURE = "#!/bin/sh\n{ echo \"PREFIX=${1#--prefix=}\"; cat Makefile.in; } > Makefile\n"


def _tarball(tmp: Path) -> Path:
    path = tmp / "Fake-1.0.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, data, mode, mtime in (("Fake-1.0/configure", CONFIGURE.encode(), 0o755, OLDER),
                                        ("Fake-1.0/Makefile.in", MAKEFILE.encode(), 0o644, OLDER),
                                        ("Fake-1.0/lib.py", b"x = 1\n", 0o644, RELEASED),
                                        ("Fake-1.0/README", b"old\n", 0o644, OLDER)):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), mode, mtime
            tar.addfile(info, io.BytesIO(data))
    return path


@pytest.mark.skipif(not (shutil.which("make") and shutil.which("patch")), reason="needs make and patch")
def test_build_script_fixes_umask_locale_time_zone_and_dates_the_install(tmp_path):
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    shutil.copy2(_tarball(tmp_path), ctx / "Fake-1.0.tar.gz")
    (ctx / "additions").mkdir()
    (ctx / "additions" / "new.c").write_text("int x;\n")        # copied in now: a new mtime
    (ctx / "patches").mkdir()
    (ctx / "patches" / "series").write_text("0001-readme.patch\n")
    (ctx / "patches" / "0001-readme.patch").write_text(
        "--- a/README\n+++ b/README\n@@ -1 +1 @@\n-old\n+new\n")
    prefix = tmp_path / "prefix"
    env = dict(os.environ, TARBALL="Fake-1.0.tar.gz", SRCDIR="Fake-1.0", PREFIX=str(prefix), CFLAGS="",
               CONFIGURE_ARGS="", LC_ALL="C.UTF-8", LANG="C.UTF-8", TZ="Etc/GMT-14", PYTHONHOME="/nowhere")
    env.pop("SOURCE_DATE_EPOCH", None)
    env.pop("PYTHONHASHSEED", None)
    proc = subprocess.run(["bash", "-c", f'umask 0002 && exec "{BUILD_SCRIPT}" "{ctx}" "{tmp_path / "work"}"'],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (prefix / "lib" / "env.txt").read_text().split() == [
        "umask=0022", "LC_ALL=C", "TZ=UTC", f"SOURCE_DATE_EPOCH={RELEASED}", "PYTHONHASHSEED=0", "PYTHONHOME="]
    # compileall (make install) runs the build's interpreter without -E, so that PYTHONHASHSEED counts
    assert (prefix / "lib" / "python-for-build.txt").read_text() == "./python\n"
    # ... in one process: -j0's workers would each have compiled other modules before
    assert (prefix / "lib" / "compileall.txt").read_text().split()[:3] == ["compileall", "-j1", "-d"]
    assert f"SOURCE_DATE_EPOCH={RELEASED}" in proc.stdout
    written = [prefix, *prefix.rglob("*")]
    assert {p: int(p.lstat().st_mtime) for p in written} == {p: RELEASED for p in written}
    assert (prefix / "lib" / "sub").stat().st_mode & 0o777 == 0o755      # umask 022, not the caller's 002
    assert (prefix / "lib" / "lib.py").stat().st_mode & 0o777 == 0o644


@pytest.mark.skipif(not (shutil.which("make") and shutil.which("patch")), reason="needs make and patch")
def test_build_script_keeps_a_callers_source_date_epoch(tmp_path):
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    shutil.copy2(_tarball(tmp_path), ctx / "Fake-1.0.tar.gz")
    prefix = tmp_path / "prefix"
    env = dict(os.environ, TARBALL="Fake-1.0.tar.gz", SRCDIR="Fake-1.0", PREFIX=str(prefix), CFLAGS="",
               CONFIGURE_ARGS="", SOURCE_DATE_EPOCH="1700000000")
    proc = subprocess.run([str(BUILD_SCRIPT), str(ctx), str(tmp_path / "work")], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SOURCE_DATE_EPOCH=1700000000" in (prefix / "lib" / "env.txt").read_text()
    assert int((prefix / "lib" / "lib.py").stat().st_mtime) == 1700000000

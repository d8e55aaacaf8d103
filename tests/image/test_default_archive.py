"""With no Debian archive named anywhere, mmdebstrap's own default is used, and suites added to it come from it.

Runs the real mmdebstrap (as root) up to its setup hooks: the sources list it writes for a Debian suite when
no mirror is given, and the line the driver's hook adds for an extra suite (bookworm-backports) with that
list's own archive.  Nothing is downloaded: a last hook copies the list out and stops the bootstrap.
"""
import os
import shutil
import subprocess

import pytest

from cpython_perf.image.bootstrap import mmdebstrap_archive_args

pytestmark = pytest.mark.skipif(shutil.which("mmdebstrap") is None or os.geteuid() != 0,
                                reason="needs mmdebstrap, run as root")


def _sources_list(tmp_path, args):
    out = tmp_path / "sources.list"
    stop = f'--setup-hook=cp "$1/etc/apt/sources.list" {out}; false'
    hooks, positional = args[:-2], args[-2:]   # setup hooks run in the order given: the copying one last
    proc = subprocess.run(["mmdebstrap", "--variant=custom", *hooks, stop, *positional], capture_output=True,
                          text=True,
                          timeout=300, stdin=subprocess.DEVNULL)
    if not out.exists():
        pytest.fail(f"mmdebstrap wrote no sources list (exit {proc.returncode}): {proc.stderr[-1500:]}")
    return [line.split() for line in out.read_text().splitlines() if line.startswith("deb ")]


def test_default_archive_with_an_extra_suite(tmp_path):
    args = mmdebstrap_archive_args("bookworm", None, ("bookworm-backports",), str(tmp_path / "rootfs.tar"))
    lines = _sources_list(tmp_path, args)
    main = [line for line in lines if line[2] == "bookworm"]
    extra = [line for line in lines if line[2] == "bookworm-backports"]
    assert main, lines
    assert extra == [["deb", main[0][1], "bookworm-backports", "main"]], lines


def test_a_named_archive_is_used_as_given(tmp_path):
    args = mmdebstrap_archive_args("bookworm", "http://archive.invalid/debian", ("bookworm-backports",),
                                   str(tmp_path / "rootfs.tar"))
    lines = _sources_list(tmp_path, args)
    assert lines == [["deb", "http://archive.invalid/debian", "bookworm", "main"],
                     ["deb", "http://archive.invalid/debian", "bookworm-backports", "main"]]

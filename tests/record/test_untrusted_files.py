"""ForeignRoot.open_dir(follow=True): a directory whose last component is a link is resolved inside the root
(a container whose /tmp links to /var/tmp gets its own /var/tmp, never the host's), only with openat2; and
record --container's access check takes such a container (cpython_perf/record/untrusted_files.py)."""

from __future__ import annotations

import os

import pytest

from cpython_perf.errors import DriverError
from cpython_perf.record import outside, untrusted_files
from cpython_perf.record.untrusted_files import ForeignRoot, Refused, has_openat2

needs_openat2 = pytest.mark.skipif(not has_openat2(), reason="this kernel has no openat2 (Linux 5.6 or newer)")


def container(tmp_path, target: str):
    """A root whose tmp is a link to target, and whose own var/tmp exists (the host has a /var/tmp too)."""
    root = tmp_path / "root"
    (root / "var" / "tmp").mkdir(parents=True)
    (root / "tmp").symlink_to(target)
    return root


@needs_openat2
@pytest.mark.parametrize("target", ["/var/tmp", "../../var/tmp", "var/tmp"])
def test_a_directory_link_is_followed_inside_the_root(tmp_path, target):
    root = container(tmp_path, target)
    with ForeignRoot(root) as foreign:
        fd = foreign.open_dir("tmp", follow=True)
        try:
            assert os.path.samestat(os.fstat(fd), os.stat(root / "var" / "tmp"))
            assert not os.path.samestat(os.fstat(fd), os.stat("/var/tmp"))
        finally:
            os.close(fd)
        with pytest.raises(Refused):   # without follow, as before: the link is refused
            foreign.open_dir("tmp")


@needs_openat2
def test_a_link_to_what_the_root_lacks_is_not_found_there(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "tmp").symlink_to("/var/tmp")   # the host has one; the root does not
    with ForeignRoot(root) as foreign, pytest.raises(FileNotFoundError):
        foreign.open_dir("tmp", follow=True)


def test_without_openat2_a_directory_link_is_refused_saying_why(tmp_path, monkeypatch):
    monkeypatch.setattr(untrusted_files, "_openat2_works", False)
    root = container(tmp_path, "/var/tmp")
    with ForeignRoot(root) as foreign, pytest.raises(Refused, match="no openat2 .*Linux 5.6"):
        foreign.open_dir("tmp", follow=True)


@needs_openat2
def test_record_takes_a_container_whose_tmp_is_a_link_inside_it(tmp_path):
    """check_access read /tmp without following it and refused such a container ("cannot be read safely")."""
    pid = 4242
    root = container(tmp_path / str(pid), "/var/tmp")   # <proc>/<pid>/root
    outside.check_access(pid, proc=tmp_path)
    (root / "var" / "tmp").rmdir()
    with pytest.raises(DriverError, match="is not in this pid namespace's /proc \\(or its /tmp is missing\\)"):
        outside.check_access(pid, proc=tmp_path)

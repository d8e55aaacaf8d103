"""bootstrap_base on a frozen or snapshot archive: apt's refusal of an expired Release file is recognised, and the
bootstrap is made again with Acquire::Check-Valid-Until "false", saying so (no Docker: mmdebstrap and the import
are stood in for by a function that fails the way mmdebstrap does; `python -m cpython_perf external image
--suite sid --package python3.14` does it for real)."""

from __future__ import annotations

import pytest

from cpython_perf.errors import ImageBuildFailed
from cpython_perf.image import bases

APT_SAYS = ("E: Release file for http://archive.example/debian/dists/sid/InRelease is expired (invalid since 12d "
            "3h 10min 5s). Updates for this repository will not be applied.\nE: apt-get update failed\n")


def test_the_expired_release_is_named():
    assert bases.expired_release(APT_SAYS) == "http://archive.example/debian/dists/sid/InRelease"
    assert bases.expired_release("E: Unable to locate package python3.99") is None


@pytest.fixture
def commands(monkeypatch):
    ran: list[list[str]] = []
    monkeypatch.setattr(bases.host, "ensure_commands", lambda *a, **k: None)
    return ran


def test_an_expired_archive_is_bootstrapped_again_ignoring_only_its_age(monkeypatch, commands):
    def bootstrap_image(client, cmd, tar, tag, log):
        commands.append(cmd)
        if not any(a.startswith("--aptopt=") for a in cmd):
            raise ImageBuildFailed(f"mmdebstrap for {tag} failed (exit 1); last lines:\n{APT_SAYS}")

    monkeypatch.setattr(bases, "bootstrap_image", bootstrap_image)
    said: list[str] = []
    bases.bootstrap_base(None, "sid", ["python3.14"], "t:sid", said.append)
    assert len(commands) == 2
    assert f"--aptopt={bases.IGNORE_VALID_UNTIL}" in commands[1] and not any("aptopt" in a for a in commands[0])
    assert any("has expired" in line and "signature is still checked" in line for line in said), said


def test_another_failure_is_not_retried(monkeypatch, commands):
    def bootstrap_image(client, cmd, tar, tag, log):
        commands.append(cmd)
        raise ImageBuildFailed("mmdebstrap failed; E: Unable to locate package python3.99")

    monkeypatch.setattr(bases, "bootstrap_image", bootstrap_image)
    with pytest.raises(ImageBuildFailed, match="python3.99"):
        bases.bootstrap_base(None, "sid", ["python3.99"], "t:sid", print)
    assert len(commands) == 1

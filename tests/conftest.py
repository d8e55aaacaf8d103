"""Helpers for the driver's unit tests (no Docker, no network beyond loopback)."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from cpython_perf.errors import MatrixError
from cpython_perf.matrix import PROJECT_ROOT, load_matrix


@pytest.fixture
def project_copy(tmp_path) -> Path:
    """A copy of matrix.yaml, recipes/, patches/, Python-additions/ and keys/ to edit freely."""
    for name in ("recipes", "patches", "Python-additions", "keys"):
        if (PROJECT_ROOT / name).exists():
            shutil.copytree(PROJECT_ROOT / name, tmp_path / name)
    shutil.copy2(PROJECT_ROOT / "matrix.yaml", tmp_path / "matrix.yaml")
    return tmp_path


@pytest.fixture(scope="module")
def docker_client():
    """A Docker client for the tests marked `container`; no engine is a failure (they were selected to run)."""
    from cpython_perf import host
    from cpython_perf.errors import DockerUnavailable

    try:
        return host.docker_client()
    except DockerUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def line_of(path: Path, needle: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if needle in line:
            return number
    raise AssertionError(f"{needle!r} not in {path}")


def expect_error(project: Path, needle: str, pattern: str) -> None:
    """Loading project's matrix.yaml fails with an error naming the line that holds needle, and pattern."""
    path = project / "matrix.yaml"
    with pytest.raises(MatrixError) as info:
        load_matrix(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{line_of(path, needle)}:"), message
    assert pattern in message, message


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")

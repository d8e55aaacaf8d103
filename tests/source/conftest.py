"""Source trees for the tests that cross-compile the series' trampolines (tests/source/series_trees.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .series_trees import load_script, source_trees


@pytest.fixture(scope="session")
def trees(tmp_path_factory) -> dict[str, Path]:
    """{"released": 3.13.5 as released, "series": the same with the 3.13 series applied}."""
    return source_trees("3.13", tmp_path_factory)


@pytest.fixture(scope="session")
def backport(tmp_path_factory) -> Path:
    """3.11.2 with the 3.11 series and the backport's shared files (Python-additions/, 3.9's too)."""
    return source_trees("3.11", tmp_path_factory)["series"]


@pytest.fixture(autouse=True)
def cross_tools(request):
    """In a module of one foreign arch's trampoline (its CROSS: a series_trees.CrossArch), skip where its cross
    compiler or qemu-user is missing."""
    cross = getattr(request.module, "CROSS", None)
    if cross is not None:
        cross.tools_or_skip()


@pytest.fixture
def unwind_check(request, monkeypatch):
    """conformance/scripts/check_fix_perf_trampoline_unwind.py as it loads on a machine of the module's CROSS
    arch."""
    return load_script("check_fix_perf_trampoline_unwind", request.module.CROSS.name, monkeypatch)

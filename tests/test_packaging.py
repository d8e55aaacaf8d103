"""The wheel `pip install .` builds holds every package of the driver, and each imports from it.

pyproject.toml finds the packages at build time (`[tool.setuptools.packages.find]`); a list written by hand
once left `cpython_perf.bench` out of the wheel, so `python -m cpython_perf.bench` failed after a
non-editable install.  The wheel is built from a copy of the tree (no build/ or egg-info left in the
checkout), in a few seconds.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from cpython_perf.matrix import PROJECT_ROOT

PACKAGE = "cpython_perf"


def source_packages(root: Path = PROJECT_ROOT) -> list[str]:
    """Every directory under cpython_perf/ with an __init__.py, as a dotted name."""
    return sorted(".".join(p.parent.relative_to(root).parts) for p in (root / PACKAGE).rglob("__init__.py")
                  if "__pycache__" not in p.parts)


def _can_build_without_isolation() -> bool:
    """setuptools builds wheels by itself from 70.1; before, it needs the `wheel` package beside it."""
    if importlib.util.find_spec("setuptools") is None:
        return False
    if importlib.util.find_spec("wheel") is not None:
        return True
    import setuptools
    parts = tuple(int(p) for p in setuptools.__version__.split(".")[:2] if p.isdigit())
    return parts >= (70, 1)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    tree = tmp_path_factory.mktemp("tree")
    shutil.copy2(PROJECT_ROOT / "pyproject.toml", tree / "pyproject.toml")
    shutil.copytree(PROJECT_ROOT / PACKAGE, tree / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check", "-w", str(out)]
    if _can_build_without_isolation():
        command.append("--no-build-isolation")   # the setuptools at hand: no index needed
    proc = subprocess.run([*command, str(tree)], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        errors = [line for line in (proc.stdout + proc.stderr).splitlines() if "error" in line.lower()]
        if "--no-build-isolation" not in command and any("No matching distribution" in e or "connection" in e.lower()
                                                          for e in errors):
            pytest.skip(f"no setuptools/wheel to build with (pip: {errors[-1][:300]})")
        pytest.fail(f"pip wheel failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    (built,) = out.glob("*.whl")
    return built


def test_every_subpackage_is_found():
    assert {PACKAGE, f"{PACKAGE}.bench", f"{PACKAGE}.ci", f"{PACKAGE}.lanes"} <= set(source_packages())


def test_wheel_holds_every_package(wheel):
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    missing = [p for p in source_packages() if p.replace(".", "/") + "/__init__.py" not in names]
    assert not missing, f"{wheel.name} lacks {', '.join(missing)} (pyproject.toml [tool.setuptools.packages.find])"
    modules = sorted(str(p.relative_to(PROJECT_ROOT)) for p in (PROJECT_ROOT / PACKAGE).rglob("*.py")
                     if "__pycache__" not in p.parts)
    assert [m for m in modules if m not in names] == []


def test_every_package_imports_from_the_wheel(wheel):
    """A fresh, isolated interpreter (-I: no checkout on sys.path) imports each package from the wheel itself."""
    packages = source_packages()
    script = (
        "import importlib, sys\n"
        f"sys.path.insert(0, {str(wheel)!r})\n"
        f"for name in {packages!r}:\n"
        "    module = importlib.import_module(name)\n"
        f"    assert module.__file__.startswith({str(wheel)!r}), (name, module.__file__)\n"
        "print('ok')\n"
    )
    proc = subprocess.run([sys.executable, "-I", "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=wheel.parent)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stdout + proc.stderr

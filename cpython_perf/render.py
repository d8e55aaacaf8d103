"""Render the Jinja-templated Dockerfiles of docker/ for a cell or the base image."""

from __future__ import annotations

import hashlib
from pathlib import Path

import jinja2

from .matrix import PROJECT_ROOT, Cell

DOCKER_DIR = PROJECT_ROOT / "docker"
BASE_PACKAGES = DOCKER_DIR / "base-packages.txt"
BUILD_SCRIPT = DOCKER_DIR / "build-cpython.sh"


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(DOCKER_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def base_packages(path: Path = BASE_PACKAGES) -> list[str]:
    """The one package list of the base image (comments and blank lines skipped)."""
    packages = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            packages.append(line)
    return packages


def base_image_tag(suite: str, packages: list[str]) -> str:
    """Tag of the base image: changes whenever the suite or the package list does."""
    digest = hashlib.sha256(("\n".join([suite, *sorted(packages)])).encode()).hexdigest()[:12]
    return f"cpython-perf-base:{suite}-{digest}"


def render_base_dockerfile(suite: str, packages: list[str]) -> str:
    return _environment().get_template("base.Dockerfile.j2").render(suite=suite, packages=packages)


def render_cell_dockerfile(cell: Cell, base_image: str, inputs_digest: str = "unset") -> str:
    return _environment().get_template("cell.Dockerfile.j2").render(
        cell=cell,
        base_image=base_image,
        additions=bool(cell.additions),
        patches=cell.series is not None,
        inputs_digest=inputs_digest,
    )

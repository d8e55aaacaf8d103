"""The i386 build-only cells: an arch the host runs natively, without the perf trampoline (no Docker)."""

from __future__ import annotations

import dataclasses

import pytest

from cpython_perf import host
from cpython_perf.image import bases, cell_image, pipeline, render
from cpython_perf.image.context import BuildContext
from cpython_perf.errors import DriverError, MatrixError
from cpython_perf.arches import ARCH_FACTS, HOST_ARCH, runs_natively
from cpython_perf.matrix import load_matrix
from cpython_perf.source import patches, sources

from .conftest import edit

I386_CELLS = ("3.9-release-i386", "3.11-release-i386", "3.13-release-i386")


def test_arch_facts_say_how_the_host_runs_each_arch():
    x86, arm, i386 = ARCH_FACTS["x86_64"], ARCH_FACTS["aarch64"], ARCH_FACTS["i386"]
    assert x86.trampoline and x86.machine == "x86_64" and x86.platform_triplet == "x86_64-linux-gnu"
    assert arm.trampoline and arm.qemu_user
    assert not i386.trampoline and not i386.qemu_user and not i386.qemu_system
    # on the reference x86_64 host: x86_64 and i386 natively, aarch64 under qemu
    assert runs_natively("x86_64", "x86_64") and runs_natively("i386", "x86_64")
    assert not runs_natively("aarch64", "x86_64")
    assert (i386.debian, i386.triplet) == ("i386", "i686-linux-gnu")
    # uname -m under setarch i686, and CPython's own name for the platform
    assert i386.machine == "i686" and i386.platform_triplet == "i386-linux-gnu" and i386.pointer_bits == 32


def test_i386_cells_are_build_only_and_native():
    matrix = load_matrix()
    assert "i386" in matrix.arches
    assert sorted(c.name for c in matrix.cells_of_arch("i386")) == sorted(I386_CELLS)
    for name in I386_CELLS:
        cell = matrix.cell(name)
        assert cell.build_only and not cell.foreign
        assert cell.modes == () and cell.backends == ()   # no check script requiring a backend applies
        assert cell.series is not None and not cell.vanilla   # the patched build (3.13: its fix series)
        assert cell.image == f"cpython-perf:{name}"
        assert matrix.build_python_cell(cell) is None       # not cross-compiled
        assert matrix.vanilla_twin(cell) is None
        assert name not in matrix.smoke_cells
    assert matrix.cell("3.9-release-i386").additions == matrix.cell("3.9-release").additions
    # the other arches keep their meaning
    assert not matrix.cell("3.13-release").build_only and not matrix.cell("3.13-release").foreign
    assert matrix.cell("3.13-release-aarch64").foreign and not matrix.cell("3.13-release-aarch64").build_only
    assert not any(c.build_only for c in matrix.cells.values() if c.arch != "i386")


def test_an_arch_without_trampoline_cannot_be_checked_for_modes(project_copy):
    path = project_copy / "matrix.yaml"
    edit(path, "      O0: {modes: [perf, perf_jit]}\n      debug: {modes: [perf, perf_jit]}\n  \"3.10\"",
         "      O0: {modes: [perf, perf_jit], arches: [x86_64, i386]}\n      debug: {modes: [perf, perf_jit]}\n  \"3.10\"")
    with pytest.raises(MatrixError, match=r"matrix\.yaml:\d+: i386 has no perf trampoline upstream.*"
                                          r"list it under build_only of 3\.9-O0"):
        load_matrix(path)


@pytest.mark.parametrize("value, message", [
    ("[x86_64]", r"x86_64 has the perf trampoline: list it under arches of 3\.9-release"),
    ("[aarch64]", r"aarch64 has the perf trampoline"),
    ("[sparc]", r"build-only arch 'sparc' of 3\.9-release is not in the matrix's arches"),
    ("i386", r"build_only must be a list of arches"),
])
def test_build_only_is_validated(project_copy, value, message):
    path = project_copy / "matrix.yaml"
    edit(path, "vanilla: [x86_64], build_only: [i386]}", f"vanilla: [x86_64], build_only: {value}}}")
    with pytest.raises(MatrixError, match=r"matrix\.yaml:\d+: " + message):
        load_matrix(path)


def test_build_only_arch_must_be_in_the_matrix(project_copy):
    path = project_copy / "matrix.yaml"
    edit(path, "arches: [x86_64, aarch64, riscv64, ppc64le, i386]\n", "arches: [x86_64, aarch64, riscv64, ppc64le]\n")
    with pytest.raises(MatrixError, match=r"build-only arch 'i386' of 3\.9-release is not in the matrix's arches"):
        load_matrix(path)


def test_unknown_cell_key_still_an_error(project_copy):
    path = project_copy / "matrix.yaml"
    edit(path, "build_only: [i386]", "build_onyl: [i386]")
    with pytest.raises(MatrixError, match=r"unknown key 'build_onyl'.*did you mean 'build_only'"):
        load_matrix(path)


def test_i386_base_is_the_host_list_without_perf():
    packages = render.native_base_packages("i386")
    host = render.base_packages()
    assert "linux-perf" in host and "linux-perf" not in packages
    assert {"build-essential", "binutils", "util-linux"} <= set(packages)   # compiler, readelf, setarch
    assert set(host) - {"linux-perf"} <= set(packages)
    assert render.arch_base_packages("i386") == packages
    assert render.arch_base_packages("aarch64") == render.foreign_base_packages("aarch64")
    tag = render.arch_base_image_tag("trixie", "i386")
    assert tag.startswith("cpython-perf-base:trixie-i386-")
    assert tag != render.host_base_image_tag("trixie")
    assert render.arch_base_image_tag("trixie", "aarch64") == render.foreign_base_image_tag("trixie", "aarch64")
    with pytest.raises(ValueError, match="runs natively"):
        render.foreign_base_image_tag("trixie", "i386")


def test_each_cell_is_built_on_its_arch_base():
    assert render.build_base_image_tag("trixie", HOST_ARCH) == render.host_base_image_tag("trixie")
    # on an x86_64 host a cross build runs on the host's base; i386 is built inside its own
    x86 = "x86_64"
    assert render.build_base_image_tag("trixie", "aarch64", x86) == render.host_base_image_tag("trixie", x86)
    assert render.build_base_image_tag("trixie", "i386", x86) == render.arch_base_image_tag("trixie", "i386", x86)


def test_i386_dockerfile_builds_natively_under_setarch():
    matrix = load_matrix()
    cell = matrix.cell("3.11-release-i386")
    text = pipeline.rendered_dockerfile(cell, matrix)
    assert f"\nFROM {render.arch_base_image_tag(matrix.base_suite, 'i386')}\n" in text
    assert text.count("FROM ") == 1                                  # one stage: not the cross template
    assert '\nSHELL ["setarch", "i686", "/bin/sh", "-c"]\n' in text     # every build step sees i686
    assert '\nENTRYPOINT ["setarch", "i686"]\n' in text                # and every command run in the image
    assert text.index("SHELL [") < text.index("build-cpython.sh /build /usr/src")
    assert 'platform.machine() == "i686"' in text and 'sys.implementation._multiarch == "i386-linux-gnu"' in text
    assert "--host=" not in text and "crossbuild-essential" not in text
    assert "COPY additions/" in text and "COPY patches/" in text
    assert 'org.cpython-perf.modes=""' in text


def test_host_dockerfile_has_no_personality():
    matrix = load_matrix()
    for name in ("3.11-release", "3.13-fp"):
        text = pipeline.rendered_dockerfile(matrix.cell(name), matrix)
        assert "setarch" not in text and "SHELL" not in text and "ENTRYPOINT" not in text
        assert "\nFROM cpython-perf-base:trixie-" in text and "FROM cpython-perf-base:trixie-i386-" not in text


def test_i386_inputs_digest_its_own_base(monkeypatch, tmp_path):
    """cell_inputs of an i386 cell: built on the i386 base, no build Python, no target base."""
    tarball = tmp_path / "Python-3.9.2.tar.xz"
    tarball.write_bytes(b"not read")
    monkeypatch.setattr(sources, "fetch_source", lambda recipe, cache_dir=None, log=print: tarball)
    monkeypatch.setattr(patches, "check_cell_series",
                        lambda read, source, root, log=print: dataclasses.replace(read, applied=0))   # nothing to apply to a fake tarball
    matrix = load_matrix()
    inputs = pipeline.cell_inputs(matrix.cell("3.9-release-i386"), matrix.base_suite, matrix=matrix)
    assert inputs.base_tag == render.arch_base_image_tag(matrix.base_suite, "i386")
    assert inputs.build_python is None and inputs.target_base_tag == ""
    on_host = pipeline.cell_inputs(matrix.cell("3.9-release"), matrix.base_suite, matrix=matrix)
    assert on_host.digest != inputs.digest


class _Images:
    def __init__(self, existing):
        self.existing = set(existing)

    def get(self, ref):
        import docker.errors

        if ref not in self.existing:
            raise docker.errors.ImageNotFound(ref)
        return object()


class _Client:
    def __init__(self, existing):
        self.images = _Images(existing)


def test_i386_build_makes_only_its_own_base(monkeypatch, tmp_path):
    """build_cell_image of an i386 cell bootstraps the i386 base (natively: no binfmt), not the host's."""
    matrix = load_matrix()
    cell = matrix.cell("3.13-release-i386")
    calls = []
    monkeypatch.setattr(bases, "ensure_base_image", lambda *a, **k: calls.append("host base"))
    monkeypatch.setattr(host, "ensure_binfmt", lambda *a, **k: calls.append("binfmt"))
    monkeypatch.setattr(bases, "bootstrap_base",
                        lambda client, suite, packages, tag, log, debian_arch=None:
                        calls.append(("bootstrap", tag, debian_arch, "linux-perf" in packages)))
    monkeypatch.setattr(cell_image, "prepare_context", lambda inputs, ctx, variation=None: "")
    monkeypatch.setattr(cell_image, "docker_build",
                        lambda client, ctx, tag, log, no_cache=False, labels=None, container_limits=None:
                        calls.append(("build", tag)))
    source = sources.VerifiedSource(cell.recipe, tmp_path / "t", verified=True)
    series = patches.CheckedSeries(cell.series, (), tuple(cell.additions), applied=0)
    inputs = BuildContext(cell, render.build_base_image_tag(matrix.base_suite, "i386"), source, series, "d")
    assert cell_image.build_cell_image(_Client(()), inputs, matrix.base_suite, log=lambda *_: None) == cell.image
    assert calls == [("bootstrap", render.arch_base_image_tag(matrix.base_suite, "i386"), "i386", False),
                     ("build", "cpython-perf:3.13-release-i386")]


def test_an_image_is_only_built_from_a_verified_source_and_a_checked_series(monkeypatch):
    """build_cell_image takes the build context the source stage handed a verified tarball and a checked
    series to; a context made without fetching (the plan's, fetch=False) is refused before Docker is asked."""
    matrix = load_matrix()
    context = pipeline.cell_inputs(matrix.cell("3.13-fp"), matrix.base_suite, log=lambda *_: None, matrix=matrix,
                                   fetch=False)
    assert not context.source.verified and context.series.applied is None
    with pytest.raises(DriverError, match="without fetching the source"):
        cell_image.build_cell_image(_Client(()), context, matrix.base_suite, log=lambda *_: None)

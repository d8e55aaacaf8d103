"""The driver on an arm64 host (a GitHub ubuntu-24.04-arm runner, an arm64 buildbot worker): aarch64 cells
are built natively there and recorded with perf in Docker, without qemu; x86_64 and i386 cells need an
x86_64 host and say so.  The host is what platform.machine() says, or $CPYTHON_PERF_HOST_ARCH."""

from __future__ import annotations

import pytest

from cpython_perf.image import pipeline, render
from cpython_perf import matrix as matrix_module
from cpython_perf.record import perf_runs
from cpython_perf.source import cell_source
from cpython_perf.errors import DriverError, MatrixError
from cpython_perf.arches import (DEFAULT_ARCH, HOST_ARCH_ENV, can_build, cannot_build_reason,
                                 detect_host_arch, runs_natively)
from cpython_perf.matrix import load_matrix

MATRIX = load_matrix()


@pytest.mark.parametrize("machine, arch", [("x86_64", "x86_64"), ("AMD64", "x86_64"), ("aarch64", "aarch64"),
                                           ("arm64", "aarch64"), ("riscv64", "riscv64")])
def test_host_arch_is_the_machines(machine, arch):
    assert detect_host_arch(machine, environ={}) == arch


def test_host_arch_override():
    assert detect_host_arch("x86_64", environ={HOST_ARCH_ENV: "aarch64"}) == "aarch64"
    with pytest.raises(MatrixError, match=f"{HOST_ARCH_ENV}='sparc' is not a host arch"):
        detect_host_arch("x86_64", environ={HOST_ARCH_ENV: "sparc"})


def test_what_each_host_builds():
    assert [a for a in ("x86_64", "i386", "aarch64") if runs_natively(a, "x86_64")] == ["x86_64", "i386"]
    assert [a for a in ("x86_64", "i386", "aarch64") if can_build(a, "x86_64")] == ["x86_64", "i386", "aarch64"]
    assert [a for a in ("x86_64", "i386", "aarch64") if runs_natively(a, "aarch64")] == ["aarch64"]
    assert [a for a in ("x86_64", "i386", "aarch64") if can_build(a, "aarch64")] == ["aarch64"]
    assert "need an x86_64 host" in cannot_build_reason("i386", "aarch64")
    assert "this host is aarch64" in cannot_build_reason("x86_64", "aarch64")
    assert "riscv64, which the driver does not build on" in cannot_build_reason("aarch64", "riscv64")


def test_cell_names_do_not_depend_on_the_host(monkeypatch):
    monkeypatch.setattr(matrix_module, "HOST_ARCH", "aarch64")
    names = set(load_matrix().cells)
    assert names == set(MATRIX.cells) and "3.13-fp" in names and "3.13-fp-aarch64" in names
    assert DEFAULT_ARCH == "x86_64"


def test_aarch64_cell_on_an_arm64_host_is_native(monkeypatch):
    cell = MATRIX.cell("3.13-fp-aarch64")
    assert cell.foreign_on("x86_64") and not cell.foreign_on("aarch64")
    assert MATRIX.build_python_cell_on(cell, "aarch64") is None   # no cross build, no build Python
    monkeypatch.setattr(cell_source, "HOST_ARCH", "aarch64")
    inputs = pipeline.cell_inputs(cell, MATRIX.base_suite, matrix=MATRIX, log=lambda *_: None, fetch=False)
    assert inputs.build_python is None and inputs.target_base_tag == ""
    assert inputs.base_tag == render.host_base_image_tag(MATRIX.base_suite, "aarch64")
    assert inputs.base_tag.startswith(f"cpython-perf-base:{MATRIX.base_suite}-arm64-")
    # the host's own base (toolchain and all), not the arm64 runtime base an x86_64 host installs cross builds on
    assert inputs.base_tag != render.foreign_base_image_tag(MATRIX.base_suite, "aarch64", "x86_64")
    dockerfile = inputs.dockerfile()
    assert "crossbuild-essential" not in dockerfile and "--host=aarch64" not in dockerfile
    assert f"FROM {inputs.base_tag}" in dockerfile
    assert "-mbranch-protection=standard" in dockerfile   # the arch's CFLAGS, native or cross alike
    cross = pipeline.cell_inputs(cell, MATRIX.base_suite, matrix=MATRIX, log=lambda *_: None, fetch=False,
                                 host="x86_64")
    assert "crossbuild-essential-arm64" in cross.dockerfile() and cross.digest != inputs.digest


def test_recordings_on_an_arm64_host_use_the_pmu_not_a_guest(monkeypatch):
    cell = MATRIX.cell("3.13-fp-aarch64")
    assert "cpu-clock" in perf_runs.record_options(cell, "perf")   # this x86_64 host: the qemu-system guest
    monkeypatch.setattr(matrix_module, "HOST_ARCH", "aarch64")
    assert not cell.foreign
    options = perf_runs.record_options(cell, "perf")
    assert "cpu-clock" not in options and options[:2] == ["-F", str(perf_runs.SAMPLE_FREQUENCY)]


@pytest.mark.parametrize("name", ["3.13-fp", "3.13-release-i386"])
def test_an_x86_cell_on_an_arm64_host_is_a_clear_error(monkeypatch, name):
    monkeypatch.setattr(cell_source, "HOST_ARCH", "aarch64")
    arch = MATRIX.cell(name).arch
    with pytest.raises(DriverError, match=f"{name}: {arch} cells need an x86_64 host; this host is aarch64"):
        pipeline.cell_inputs(MATRIX.cell(name), MATRIX.base_suite, matrix=MATRIX, log=lambda *_: None, fetch=False)

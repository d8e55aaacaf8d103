"""The arch axis: aarch64 cells, their cross build, their guest (no Docker, no qemu)."""

from __future__ import annotations

import io
import re
import tarfile

import pytest

from cpython_perf.record import perf_runs
from cpython_perf.run import guest
from cpython_perf import host
from cpython_perf.image import render
from cpython_perf.errors import MatrixError
from cpython_perf.arches import ARCH_FACTS
from cpython_perf.matrix import load_matrix

from .conftest import edit


def test_aarch64_cells_and_tags():
    matrix = load_matrix()
    foreign = {c.name for c in matrix.cells_of_arch("aarch64")}
    for version in ("3.9", "3.11", "3.13"):
        for variant in ("fp", "release"):
            assert f"{version}-{variant}-aarch64" in foreign
    cell = matrix.cell("3.13-release-aarch64")
    assert cell.image == "cpython-perf:3.13-release-aarch64"
    assert cell.foreign and not matrix.cell("3.13-release").foreign
    # cells that do not list arches stay on the host's
    assert "3.13-O0-aarch64" not in matrix.cells


def test_build_python_is_a_host_cell_of_the_same_version():
    matrix = load_matrix()
    for cell in matrix.cells_of_arch("aarch64"):
        build = matrix.build_python_cell(cell)
        assert build.version == cell.version and build.arch == "x86_64"
        assert build.variant == cell.variant
    assert matrix.build_python_cell(matrix.cell("3.13-fp")) is None


def test_vanilla_arches():
    matrix = load_matrix()
    assert "3.13-release-vanilla-aarch64" in matrix.cells
    assert "3.13-fp-vanilla" in matrix.cells and "3.13-fp-vanilla-aarch64" not in matrix.cells
    assert matrix.vanilla_twin(matrix.cell("3.13-release-aarch64")).name == "3.13-release-vanilla-aarch64"


def test_cell_arch_outside_the_matrix_is_an_error(project_copy):
    path = project_copy / "matrix.yaml"
    edit(path, "arches: [x86_64, aarch64, riscv64, ppc64le, i386]\n", "arches: [x86_64, riscv64, i386]\n")
    # arch_cflags may name aarch64 too: without it, the first error is the cell's
    path.write_text(re.sub(r"^arch_cflags:\n(?:[ \t]+.*\n)+", "", path.read_text(), flags=re.M))
    with pytest.raises(MatrixError, match=r"arch 'aarch64' of 3\.9-fp is not in the matrix's arches"):
        load_matrix(project_copy / "matrix.yaml")


def test_vanilla_list_must_name_the_cells_arches(project_copy):
    edit(project_copy / "matrix.yaml", "vanilla: [x86_64]}", "vanilla: [riscv64]}")
    with pytest.raises(MatrixError, match="vanilla must be true, false or a list"):
        load_matrix(project_copy / "matrix.yaml")


def test_foreign_cell_without_a_host_cell_is_an_error(project_copy):
    edit(project_copy / "matrix.yaml",
         "      fp: {modes: [perf], arches: [x86_64, aarch64], vanilla: [x86_64]}\n"
         "      release: {modes: [perf_jit], arches: [x86_64, aarch64], vanilla: [x86_64], build_only: [i386]}\n"
         "      O0: {modes: [perf, perf_jit]}\n      debug: {modes: [perf, perf_jit]}\n  \"3.10\"",
         "      fp: {modes: [perf], arches: [aarch64]}\n  \"3.10\"")
    with pytest.raises(MatrixError, match=r"3\.9-fp-aarch64 is cross-compiled.*no"):
        load_matrix(project_copy / "matrix.yaml")


def test_cross_dockerfile():
    matrix = load_matrix()
    cell = matrix.cell("3.11-fp-aarch64")
    text = render.render_cell_dockerfile(cell, "cpython-perf-base:trixie-abc", "d1g3st",
                                         target_base_image="cpython-perf-base:trixie-arm64-def",
                                         build_python_image="cpython-perf:3.11-fp")
    assert "FROM cpython-perf:3.11-fp AS build-python" in text
    assert "FROM cpython-perf-base:trixie-abc AS cross" in text
    assert "dpkg --add-architecture arm64" in text
    assert "crossbuild-essential-arm64 \\" in text and "libffi-dev:arm64 \\" in text
    assert "--host=aarch64-linux-gnu --with-build-python=/opt/build-python/bin/python3" in text
    assert "PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig" in text
    assert "--with-build-python" not in render.render_cell_dockerfile(
        matrix.cell("3.9-fp-aarch64"), "b", target_base_image="t", build_python_image="cpython-perf:3.9-fp")
    assert "\nFROM cpython-perf-base:trixie-arm64-def\n" in text
    assert 'platform.machine() == "aarch64"' in text
    assert "COPY additions/" in text and "COPY patches/" in text
    assert 'org.cpython-perf.inputs="d1g3st"' in text
    with pytest.raises(ValueError, match="cross-compiled"):
        render.render_cell_dockerfile(cell, "cpython-perf-base:trixie-abc")


def test_foreign_base_list_and_tag():
    packages = render.foreign_base_packages("aarch64")
    assert set(render.build_dependency_packages()) <= set(packages)
    assert {"linux-perf", "linux-image-cloud-arm64", "initramfs-tools"} <= set(packages)
    assert "build-essential" not in packages
    tag = render.base_image_tag("trixie", packages, "aarch64")
    assert tag.startswith("cpython-perf-base:trixie-arm64-")
    assert tag != render.base_image_tag("trixie", packages)


def test_modes_on_gives_one_arch_its_own_modes():
    """3.13-fp claims perf, but perf_jit only on riscv64 (docs/matrix.md says why); the other arches and its
    vanilla twin keep the cell's modes."""
    matrix = load_matrix()
    assert matrix.cell("3.13-fp-riscv64").modes == ("perf_jit",)
    assert matrix.cell("3.13-fp").modes == matrix.cell("3.13-fp-aarch64").modes == ("perf",)
    assert "perf_jit" in matrix.cell("3.13-fp-riscv64").backends


@pytest.mark.parametrize("old, new, says", [
    ("modes_on: {riscv64: [perf_jit]}", "modes_on: {s390x: [perf_jit]}", r"names 's390x', which is not among"),
    ("modes_on: {riscv64: [perf_jit]}", "modes_on: {riscv64: [perf_maps]}", "unknown perf mode 'perf_maps'"),
    ("modes_on: {riscv64: [perf_jit]}", "modes_on: [riscv64]", "must map arches to lists of modes"),
])
def test_a_malformed_modes_on_is_an_error_naming_it(project_copy, old, new, says):
    edit(project_copy / "matrix.yaml", old, new)
    with pytest.raises(MatrixError, match=says):
        load_matrix(project_copy / "matrix.yaml")


def test_dwarf_recordings_of_riscv64_name_the_arch_perf_unwinds():
    """trixie's perf knows riscv64's registers only as riscv: its dwarf recordings are renamed before perf inject
    and perf script read them; no other arch's, and no frame-pointer recording's."""
    matrix = load_matrix()
    shell = perf_runs.perf_run(matrix.cell("3.13-release-riscv64"), "perf_jit").shell.splitlines()
    rename = "python3 -E /src/perf_data.py set-arch /src/perf.data riscv > /dev/null"
    assert rename in shell
    assert shell.index(rename) < next(i for i, line in enumerate(shell) if "perf inject" in line)
    for cell, mode in (("3.13-release-aarch64", "perf_jit"), ("3.13-release", "perf_jit"), ("3.13-fp", "perf")):
        assert "set-arch" not in perf_runs.perf_run(matrix.cell(cell), mode).shell


def test_foreign_cells_record_cpu_clock():
    matrix = load_matrix()
    shell = perf_runs.perf_run(matrix.cell("3.13-fp-aarch64"), "perf").shell
    assert "perf record -e cpu-clock -F 999 -g -o /src/perf.data" in shell
    assert "cpu-clock" not in perf_runs.perf_run(matrix.cell("3.13-fp"), "perf").shell


@pytest.mark.parametrize("text, problem", [
    (None, "no binfmt_misc handler"),
    ("disabled\ninterpreter /x\nflags: PF\n", "disabled"),
    ("enabled\ninterpreter /x\nflags: P\n", "lacks the F"),
    ("enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: PF\noffset 0\n", None),
])
def test_binfmt_entry_judgement(text, problem):
    got = host.binfmt_problem(text, "qemu-aarch64")
    assert (got is None) if problem is None else (problem in got)


def test_qemu_command_boots_the_job_init():
    cell = load_matrix().cell("3.13-release-aarch64")
    cmd = guest.qemu_command(cell, "/k", "/i", "/d.img", "/o.img", smp=2)
    assert cmd[0] == ARCH_FACTS["aarch64"].qemu_system == "qemu-system-aarch64"
    assert cmd[cmd.index("-M") + 1] == "virt"
    assert cmd[cmd.index("-cpu") + 1] == "cortex-a72"   # no SVE: dwarf + cpu-clock works
    append = cmd[cmd.index("-append") + 1]
    assert "console=ttyAMA0" in append and "root=/dev/vda" in append and f"init=/{guest.GUEST_DIR}/init.sh" in append
    assert "file=/d.img,format=raw,if=virtio" in cmd and "file=/o.img,format=raw,if=virtio" in cmd


def test_init_script_runs_jobs_and_writes_the_output_disk():
    assert "tar -C $out -cf /dev/vdb ." in guest.INIT_SCRIPT
    assert "echo o > /proc/sysrq-trigger" in guest.INIT_SCRIPT
    assert "perf_event_paranoid" in guest.INIT_SCRIPT
    assert guest.UP_MARKER in guest.INIT_SCRIPT and guest.DONE_MARKER in guest.INIT_SCRIPT


def test_console_times():
    console = f"[    1.0] booting\n{guest.UP_MARKER} 41.52\njob 000-a exit 0\n{guest.DONE_MARKER} 97.10\n"
    assert guest.parse_console_times(console) == (41.52, 97.10)
    assert guest.parse_console_times("kernel panic") == (None, None)


def _tar_with(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_outputs_are_read_back_per_job(tmp_path):
    jobs = [guest.GuestJob("perf-xoption", "true", ("perf.script.txt",)),
            guest.GuestJob("never-ran", "true", ())]
    disk = tmp_path / "out.img"
    data = _tar_with({"./uname.txt": b"Linux guest 6.12 aarch64\n",
                      "./000-perf-xoption/exit_code": b"0\n",
                      "./000-perf-xoption/uptime": b"40.0 52.5\n",
                      "./000-perf-xoption/stdout": b"",
                      "./000-perf-xoption/stderr": b"[ perf record: Woken up ]",
                      "./000-perf-xoption/perf.script.txt": b"python3 1 1.0: 1 cpu-clock:\n"})
    disk.write_bytes(data + b"\0" * (1 << 16))   # the tar sits at the start of a bigger raw disk
    got = guest._read_outputs(disk, jobs)
    assert got["uname"] == "Linux guest 6.12 aarch64"
    ran = got["jobs"]["perf-xoption"]
    assert ran.exit_code == 0 and ran.seconds == pytest.approx(12.5)
    assert ran.files == {"perf.script.txt": b"python3 1 1.0: 1 cpu-clock:\n"}
    assert got["jobs"]["never-ran"].exit_code == -1


def test_boot_files_need_kernel_and_initramfs(tmp_path):
    (tmp_path / "boot").mkdir()
    with pytest.raises(Exception, match="no kernel"):
        guest.boot_files(tmp_path)
    (tmp_path / "boot" / "vmlinuz-6.12.0-cloud-arm64").write_bytes(b"k")
    with pytest.raises(Exception, match="no initramfs"):
        guest.boot_files(tmp_path)
    (tmp_path / "boot" / "initrd.img-6.12.0-cloud-arm64").write_bytes(b"i")
    kernel, initrd = guest.boot_files(tmp_path)
    assert kernel.name == "vmlinuz-6.12.0-cloud-arm64" and initrd.name == "initrd.img-6.12.0-cloud-arm64"
    # an uncompressed image (riscv64's kernel package ships /boot/vmlinux-<version>)
    with pytest.raises(Exception, match=r"no kernel in /boot \(vmlinux-\*\)"):
        guest.boot_files(tmp_path, "vmlinux")
    (tmp_path / "boot" / "vmlinux-6.12.0-riscv64").write_bytes(b"k")
    (tmp_path / "boot" / "initrd.img-6.12.0-riscv64").write_bytes(b"i")
    kernel, initrd = guest.boot_files(tmp_path, "vmlinux")
    assert kernel.name == "vmlinux-6.12.0-riscv64" and initrd.name == "initrd.img-6.12.0-riscv64"

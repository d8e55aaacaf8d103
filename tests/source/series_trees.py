"""CPython source trees as released and with a version's series applied, for the tests that cross-compile the
series' trampolines and perf files (tests/source/test_riscv64_trampoline.py, test_ppc64le_trampoline.py)."""

from __future__ import annotations

import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from cpython_perf.errors import SourceUnavailable
from cpython_perf.lanes import series_forms
from cpython_perf.matrix import PROJECT_ROOT, load_matrix
from cpython_perf.source import patches, sources

MATRIX = load_matrix()
# The LP64 Linux facts the perf files read, as configure gives them on riscv64-linux-gnu and
# powerpc64le-linux-gnu
PYCONFIG = PROJECT_ROOT / "tests" / "data" / "lp64_linux_pyconfig.h"


@dataclass(frozen=True)
class CrossArch:
    """A foreign arch's cross toolchain and qemu-user, as Debian names them."""

    name: str
    triplet: str
    qemu: str
    packages: str                 # what to install for them
    asflags: tuple[str, ...] = ()  # how the trampoline's assembly is assembled for the checks of its bytes

    @property
    def cc(self) -> str:
        return f"{self.triplet}-gcc"

    def tool(self, name: str) -> str:
        return f"{self.triplet}-{name}"

    def tools_or_skip(self) -> None:
        missing = [tool for tool in (self.cc, self.qemu) if shutil.which(tool) is None]
        if missing:
            pytest.skip(f"{', '.join(missing)} not installed here (Debian's {self.packages}, qemu-user-static)")


CROSS_ARCHES = {
    # rv64gc: the compressed forms an assembler makes of 3.13.5's own riscv trampoline
    "riscv64": CrossArch("riscv64", "riscv64-linux-gnu", "qemu-riscv64-static",
                         "gcc-riscv64-linux-gnu, libc6-dev-riscv64-cross", ("-march=rv64gc",)),
    "ppc64le": CrossArch("ppc64le", "powerpc64le-linux-gnu", "qemu-ppc64le-static",
                         "gcc-powerpc64le-linux-gnu, libc6-dev-ppc64el-cross"),
}


def source_trees(version: str, where) -> dict[str, Path]:
    """{"released": the version's pinned source as released, "series": the same with its series (and shared
    files) applied}; where: a pytest tmp_path_factory.  Skips where the source cannot be had."""
    cell = MATRIX.cell(f"{version}-fp")
    try:
        tarball = sources.fetch_source(cell.recipe, log=lambda line: None)
    except SourceUnavailable as exc:
        pytest.skip(f"CPython {cell.recipe.version} is not reachable here: {str(exc).splitlines()[0]}")
    out = {}
    for name in ("released", "series"):
        into = where.mktemp(f"{version}-{name}")
        with tarfile.open(tarball) as tar:
            tar.extractall(into, filter="tar")
        out[name] = into / cell.recipe.srcdir
    vs = MATRIX.series_of(version)
    patches.copy_additions(vs.additions, series_forms.ADDITIONS_ROOT, out["series"])
    patches.apply_series(patches.read_series(vs.series), out["series"])
    return out


def compile_core(cc: str, tree: Path, source: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """source of tree compiled with cc as CPython's Makefile compiles its core (-std=c11, -Werror here) into
    tmp_path/out.o."""
    (tmp_path / "pyconfig.h").write_text(PYCONFIG.read_text())
    return subprocess.run([cc, "-O2", "-std=c11", "-Wall", "-Werror", "-DPy_BUILD_CORE", f"-I{tmp_path}",
                           f"-I{tree / 'Include'}", f"-I{tree / 'Include' / 'internal'}", "-c",
                           "-o", str(tmp_path / "out.o"), str(tree / source)], capture_output=True, text=True)


# Programs that print the jitdump's unwinding information as a tree's perf_jit builds it: 3.13's (with its
# series) and the 3.9/3.11 backport's
UNWIND_INFO = {"3.13": PROJECT_ROOT / "tests" / "data" / "jit_unwind_info.c",
               "backport": PROJECT_ROOT / "tests" / "data" / "backport_unwind_info.c"}


def jit_unwind_info(cc: str, qemu: str, tree: Path, tmp_path: Path, form: str) -> tuple[int, bytes, bytes]:
    """(code size, .eh_frame, .eh_frame_hdr) as tree's perf_jit builds them for cc's arch, run under qemu; form:
    a key of UNWIND_INFO."""
    (tmp_path / "pyconfig.h").write_text(PYCONFIG.read_text())
    program = tmp_path / "unwind_info"
    build = subprocess.run([cc, "-O2", "-std=c11", "-DPy_BUILD_CORE", f"-I{tmp_path}", f"-I{tree}",
                            f"-I{tree / 'Include'}", f"-I{tree / 'Include' / 'internal'}", "-static", "-o",
                            str(program), str(UNWIND_INFO[form]), str(tree / "Python" / "asm_trampoline.S"),
                            "-Wl,--unresolved-symbols=ignore-all"], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr
    run = subprocess.run([qemu, str(program)], capture_output=True, text=True, timeout=60, check=True)
    size, hdr_size, data = run.stdout.split()
    data = bytes.fromhex(data)
    return int(size), data[:len(data) - int(hdr_size)], data[len(data) - int(hdr_size):]


def load_script(name: str, machine: str, monkeypatch):
    """conformance/scripts/<name>.py as it loads on a machine of that arch (platform.machine() says so)."""
    import importlib.util
    import platform
    import sys
    scripts = PROJECT_ROOT / "conformance" / "scripts"
    monkeypatch.syspath_prepend(str(scripts))
    monkeypatch.setattr(platform, "machine", lambda: machine)
    module_name = f"{name}_{machine}"
    spec = importlib.util.spec_from_file_location(module_name, scripts / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.delitem(sys.modules, module_name, raising=False)
    return module


def template_symbols(arch: CrossArch, assembly: Path, tmp_path: Path) -> dict[str, int]:
    """{symbol: address} of an assembly file's trampoline template, assembled for arch."""
    obj = tmp_path / "trampoline.o"
    subprocess.run([arch.cc, *arch.asflags, "-c", "-o", str(obj), str(assembly)], check=True)
    listing = subprocess.run([arch.tool("nm"), str(obj)], capture_output=True, text=True, check=True).stdout
    return {name: int(addr, 16) for addr, _, name in (line.split() for line in listing.splitlines())}


def trampoline_code(arch: CrossArch, assembly: Path, tmp_path: Path) -> bytes:
    """The bytes of an assembly file's template, _Py_trampoline_func_start to _end, as arch's assembler makes
    them."""
    at = template_symbols(arch, assembly, tmp_path)
    raw = tmp_path / "trampoline.bin"
    subprocess.run([arch.tool("objcopy"), "-O", "binary", "-j", ".text", str(tmp_path / "trampoline.o"), str(raw)],
                   check=True)
    return raw.read_bytes()[at["_Py_trampoline_func_start"]:at["_Py_trampoline_func_end"]]

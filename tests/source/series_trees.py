"""CPython source trees as released and with a version's series applied, for the tests that cross-compile the
series' trampolines and perf files (tests/source/test_riscv64_trampoline.py, test_ppc64le_trampoline.py)."""

from __future__ import annotations

import subprocess
import tarfile
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
    """source of tree compiled with cc as CPython's Makefile compiles its core (-std=c11, -Werror here)."""
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

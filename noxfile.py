"""Nox sessions, generated from matrix.yaml.  All logic lives in cpython_perf/.

  nox -l                      list every session
  nox -s build-3.13-fp        build the image cpython-perf:3.13-fp
  nox -s conformance-3.13-fp  real perf inside that image (builds it if needed)
  nox -s tests                unit tests + the smoke cells (what CI runs)
  nox -s unit                 unit tests of the driver only (no Docker)
  nox -s x86_64               build and check every x86_64 cell (the whole host matrix; not in CI)
  nox -s aarch64              build and check every aarch64 cell (cross builds, qemu-user, qemu-system guests)
  nox -s i386                 build and check the build-only i386 cells (native, no trampoline: no perf)
"""

import sys
from pathlib import Path

import nox

sys.path.insert(0, str(Path(__file__).parent))
from cpython_perf.errors import MatrixError  # noqa: E402
from cpython_perf.matrix import ARCH_FACTS, load_matrix  # noqa: E402

try:
    MATRIX = load_matrix()
except MatrixError as exc:
    sys.exit(f"error: {exc}")

nox.options.reuse_venv = "yes"
nox.options.sessions = ["tests"]
nox.options.error_on_missing_interpreters = True


def _install(session):
    session.install("-q", "-e", ".")


def _driver(session, *args):
    session.run("python", "-m", "cpython_perf", *args, external=False)


def _pytest(session, *args):
    session.run("python", "-m", "pytest", *args, *session.posargs)


@nox.session
def unit(session):
    """Unit tests of the driver: no Docker, a few seconds."""
    _install(session)
    _pytest(session, "tests", "-q")


@nox.session
def tests(session):
    """The README's test command: unit tests, then the smoke cells for real."""
    _install(session)
    cells = [arg for name in MATRIX.smoke_cells for arg in ("--cell", name)]
    # CPython's own regression tests (minutes a cell) run in conformance-<cell>, not in CI's smoke run
    _pytest(session, "tests", "conformance", *cells, "-m", "not upstream_regression", "-ra",
            "--junitxml=results/tests-junit.xml")


@nox.session(default=False)
def report(session):
    """Write results/report.md and results/report.html from the latest JUnit files under results/."""
    _install(session)
    session.run("python", "-m", "cpython_perf.report", "--results", "results", *session.posargs)


# The benchmark groups: session -> (driver module, what it writes).  Each writes
# results/bench/<group>-<UTC time>.json and refreshes BENCHMARKS.md from the latest file of every group.
BENCH_GROUPS = {
    "bench": ("cpython_perf.bench", "runtime overhead of the trampolines, wall clock"),
    "bench-instructions": ("cpython_perf.instructions", "the same overhead as cachegrind instruction counts"),
    "bench-fidelity": ("cpython_perf.fidelity", "attribution fidelity (perf, samply, py-spy), perf's cost, map growth"),
    "bench-build": ("cpython_perf.build_cost", "cold image build, no-change rebuild, the same build on the host"),
}


def _bench_session(name, module, what):
    def run(session):
        _install(session)
        session.run("python", "-m", module, *session.posargs)

    run.__doc__ = f"{what[0].upper()}{what[1:]} (results/bench/, BENCHMARKS.md)."
    nox.session(name=name, default=False)(run)


for _name, (_module, _what) in BENCH_GROUPS.items():
    _bench_session(_name, _module, _what)


def _cell_sessions(cell):
    def build(session):
        _install(session)
        _driver(session, "build", cell.name)

    def conformance(session):
        _install(session)
        _pytest(session, "conformance", "--cell", cell.name, "-ra", f"--junitxml=results/{cell.name}/junit.xml")

    build.__doc__ = f"Build cpython-perf:{cell.name} (CPython {cell.recipe.version}, {cell.variant.description})."
    conformance.__doc__ = (f"Build-only checks of cpython-perf:{cell.name} (no perf trampoline on {cell.arch})."
                           if cell.build_only else
                           f"Real perf in cpython-perf:{cell.name}; modes: {', '.join(cell.modes) or 'none'}.")
    nox.session(name=f"build-{cell.name}", default=False)(build)
    nox.session(name=f"conformance-{cell.name}", default=False)(conformance)


def _arch_session(arch):
    cells = MATRIX.cells_of_arch(arch)

    def run(session):
        _install(session)
        # the conformance fixtures build each image that is missing or stale, and skip (with the reason)
        # a cell whose source cannot be had here
        selected = [arg for cell in cells for arg in ("--cell", cell.name)]
        _pytest(session, "conformance", *selected, "-ra", f"--junitxml=results/{arch}/junit.xml")

    facts = ARCH_FACTS[arch]
    if not facts.native:
        how = "level 1 under qemu-user, real perf in a qemu-system guest"
    elif not facts.trampoline:
        how = (f"build-only (no perf trampoline): built natively in {arch} containers, the exported C API, "
               "the refused activation and CPython's test_sys checked")
    else:
        how = "real perf in containers on this host"
    run.__doc__ = f"Build and check every {arch} cell ({', '.join(c.name for c in cells)}): {how}."
    nox.session(name=arch, default=False)(run)


for _cell in MATRIX.cells.values():
    _cell_sessions(_cell)
for _arch in MATRIX.arches:
    _arch_session(_arch)

"""Nox sessions, generated from matrix.yaml.  All logic lives in cpython_perf/.

  nox -l                      list every session
  nox -s build-3.13-fp        build the image cpython-perf:3.13-fp
  nox -s conformance-3.13-fp  real perf inside that image (builds it if needed)
  nox -s tests                unit tests + the smoke cells (what CI runs)
  nox -s unit                 unit tests of the driver only (no Docker)
  nox -s fuzz                 the parsers of untrusted files fuzzed for about ten minutes (hypothesis)
  nox -s profile -- 3.13-fp -- script.py ARGS   your program under real perf, outputs in ./perf-profile/
  nox -s doctor               can this machine run the default job? (each problem with its fix)
  nox -s pin -- --check       list the recipes' pins that python.org has a newer release of
  nox -s push -- 3.13-fp --registry 127.0.0.1:5000/cpython-perf   publish a cell's image under its inputs digest
  nox -s x86_64               build and check every x86_64 cell (the whole host matrix; not in CI)
  nox -s aarch64              build and check every aarch64 cell (cross builds, qemu-user, qemu-system guests)
  nox -s i386                 build and check the build-only i386 cells (native, no trampoline: no perf)
  nox -s apt-repo -- --key FPR    the built deb lanes as a signed apt repository in dist/apt/
  nox -s deb-check            is each deb lane on the archive's newest revision? (exit 1: one is behind)
  nox -s stock-sid-3.15       a distribution's own interpreter (matrix.yaml stock:), its image made, the suite run
"""

import os
import random
import sys
from pathlib import Path

import nox

sys.path.insert(0, str(Path(__file__).parent))
from cpython_perf.errors import MatrixError  # noqa: E402

try:
    # importing the driver reads matrix.yaml's arch_facts; then the whole matrix
    from cpython_perf.arches import ARCH_FACTS, HOST_ARCH, can_build, cannot_build_reason, runs_natively
    from cpython_perf.matrix import load_matrix
    MATRIX = load_matrix()
except MatrixError as exc:
    sys.exit(f"error: {exc}")

nox.options.reuse_venv = "yes"
nox.options.sessions = ["tests"]
nox.options.error_on_missing_interpreters = True


def _install(session):
    session.install("-q", "-e", ".")


def _install_extra(session, extra, what, env=None):
    """pyproject's `extra` into the session; where it cannot be installed the session goes on, and the tests that
    need it skip, saying why (never pass): env, if given, carries pip's error to them."""
    out = session.run("python", "-m", "pip", "install", "-q", "-e", f".[{extra}]", silent=True,
                      success_codes=range(256))
    failed = [line for line in (out or "").splitlines() if line.startswith("ERROR")]
    if failed:
        if env:
            session.env[env] = failed[-1][:300]
        session.log(f"{what} not installed: {failed[-1]}")


def _install_test_extras(session):
    """What nox -s unit and tests add to the driver: actionlint, shellcheck, check-jsonschema and zizmor
    (workflow-lint) for the offline checks of .github/workflows/ (tests/ci/test_ci_workflow.py); sigstore
    (signatures), which checks 3.14+ releases' Sigstore bundles; hypothesis (fuzz) for
    tests/record/test_fuzz_parsers.py."""
    _install_extra(session, "workflow-lint", "workflow linters", "CPYTHON_PERF_WORKFLOW_LINT_INSTALL")
    _install_extra(session, "signatures", "sigstore")
    _install_extra(session, "fuzz", "hypothesis", "CPYTHON_PERF_FUZZ_INSTALL")


def _driver(session, *args):
    session.run("python", "-m", "cpython_perf", *args, external=False)


def _driver_session(name: str, doc: str, *args: str) -> None:
    """Declare session `name` (not run by default): one driver command, `python -m cpython_perf ARGS`, with the
    session's own arguments after them."""
    def run(session):
        _install(session)
        _driver(session, *args, *session.posargs)

    run.__doc__ = doc
    nox.session(name=name, default=False)(run)


def _pytest(session, *args):
    session.run("python", "-m", "pytest", *args, *session.posargs)


@nox.session
def unit(session):
    """Unit tests of the driver: no Docker (tests marked `container` are left out), about 75 s on 2 cores."""
    _install(session)
    _install_test_extras(session)
    _pytest(session, "tests", "-q", "-m", "not container")


# Examples per property in nox -s fuzz (the unit run's default is test_fuzz_parsers.EXAMPLES_DEFAULT): about ten
# minutes on two cores
FUZZ_EXAMPLES = 12000


@nox.session(default=False)
def fuzz(session):
    """The parsers of files someone else wrote (jitdumps, perf maps, /proc/<pid>/maps, perf.data, perf script
    text) fuzzed with FUZZ_EXAMPLES examples a property, about ten minutes on 2 cores: tests/record/
    test_fuzz_parsers.py.  The seed is printed first (set CPYTHON_PERF_FUZZ_SEED to run the same inputs again);
    a failure prints its input.  Arguments go to pytest."""
    session.install("-q", "-e", ".[fuzz]")   # here a missing hypothesis fails the session: the tests would skip
    seed = os.environ.get("CPYTHON_PERF_FUZZ_SEED") or str(random.SystemRandom().randrange(1 << 32))
    session.log(f"seed {seed} (CPYTHON_PERF_FUZZ_SEED={seed} nox -s fuzz draws these inputs again)")
    session.run("python", "-m", "pytest", "tests/record/test_fuzz_parsers.py", "-q", "-ra",
                "--hypothesis-show-statistics", *session.posargs,
                env={"CPYTHON_PERF_FUZZ_SEED": seed,
                     "CPYTHON_PERF_FUZZ_EXAMPLES": os.environ.get("CPYTHON_PERF_FUZZ_EXAMPLES", str(FUZZ_EXAMPLES))})


@nox.session(default=False)
def doctor(session):
    """Can this machine run the default job? Docker, perf capability and event, tools, disk, archive, each
    problem with its fix, in one screen (python -m cpython_perf doctor; exit 1 when the job cannot run)."""
    _install(session)
    _driver(session, "doctor", *session.posargs)


@nox.session
def tests(session):
    """The README's test command: unit tests, then the smoke cells for real."""
    _install(session)
    _install_test_extras(session)
    cells = [arg for name in MATRIX.smoke_cells for arg in ("--cell", name)]
    stock = [arg for name in MATRIX.smoke_stock for arg in ("--stock", name)]
    # CPython's own regression tests (minutes a cell) run in conformance-<cell>, not in CI's smoke run
    _pytest(session, "tests", "conformance", *cells, *stock, "-m", "not upstream_regression", "-ra",
            "--junitxml=results/tests-junit.xml")


@nox.session(default=False)
def pin(session):
    """Pin a series to its newest python.org release, its signature checked, or list the stale pins:
    nox -s pin -- 3.15 | nox -s pin -- --check [--releases-from FILE] (cpython_perf/source/pins.py)."""
    _install(session)
    _install_extra(session, "signatures", "sigstore")
    _driver(session, "pin", *session.posargs)


@nox.session(default=False)
def push(session):
    """Publish a cell's current image in a registry as <registry>/cpython-perf:<cell>-<inputs digest>, where
    `build-<cell> -- --registry REF` finds it: nox -s push -- 3.13-fp --registry 127.0.0.1:5000/cpython-perf
    (or $CPYTHON_PERF_REGISTRY; cpython_perf/image/registry.py)."""
    _install(session)
    _driver(session, "push", *session.posargs)


@nox.session(default=False)
def report(session):
    """Write results/report.md and results/report.html from the latest JUnit files under results/
    ($CPYTHON_PERF_RESULTS where set; the report's header names the directory read)."""
    _install(session)
    _driver(session, "report", *session.posargs)


@nox.session(name="buildbot-local", default=False)
def buildbot_local(session):
    """A throwaway buildbot master and two workers on localhost run the smoke cells' builders for real, at once
    (buildbot/requirements.txt in a venv of its own; results/buildbot-local/); then the test asserting it.
    Arguments go to `python -m cpython_perf buildbot-local run` (e.g. -- --pytest-args ""); -- --scenario
    overlap|offline|revision runs one of the runs' proofs instead (docs/buildbot.md)."""
    _install(session)
    out = Path("results/buildbot-local")
    args = list(session.posargs)
    if "--scenario" in args:   # -- --scenario overlap|offline|revision: results/buildbot-local/<scenario>/
        out = out / args[args.index("--scenario") + 1]
    venv = Path(session.virtualenv.location) / "buildbot"
    _driver(session, "buildbot-local", "run", "--venv", str(venv), "--out", str(out), *session.posargs)
    session.run("python", "-m", "pytest", "tests/ci/test_buildbot_local.py", "-m", "buildbot_local", "-ra",
                f"--junitxml={out}/junit.xml", env={"CPYTHON_PERF_BUILDBOT_LOCAL_SUMMARY": str(out / "summary.json")})


@nox.session(name="conformance-image", default=False)
def conformance_image(session):
    """Which perf mode works with any interpreter in any image, and why not:
    nox -s conformance-image -- --image IMAGE --python PATH [--expect-modes perf,perf_jit]
    (`python -m cpython_perf external conformance`; JUnit in results/external-<name>/junit.xml)."""
    _install(session)
    _driver(session, "external", "conformance", *session.posargs)


@nox.session(default=False)
def profile(session):
    """Your own program under real perf in a cell's image, from the directory nox was started in:
    nox -s profile -- 3.13-fp [--mode perf_jit] [--requirements FILE] -- script.py ARGS
    (perf.data, perf script text and a flame graph in ./perf-profile/; cpython_perf/profile/)."""
    _install(session)
    session.chdir(session.invoked_from)   # nox runs sessions in the noxfile's directory; the program is here
    session.run("python", "-m", "cpython_perf", "profile", *session.posargs)


# The benchmark groups: session -> (group of `python -m cpython_perf bench`, what it writes).  Each writes
# results/bench/<group>-<UTC time>.json and refreshes BENCHMARKS.md from the latest file of every group.
BENCH_GROUPS = {
    "bench-suite": ("suite", "the standard suite (pyperformance's stdlib-only benchmarks): cachegrind counts, "
                             "pyperf wall clock in interleaved pairs with --wallclock"),
    "bench": ("wallclock", "runtime overhead on the project's own workloads, wall clock"),
    "bench-instructions": ("instructions", "the project's own workloads as cachegrind instruction counts"),
    "bench-fidelity": ("fidelity", "attribution fidelity (perf, samply, py-spy), perf's cost, map growth"),
    "bench-profilers": ("profilers", "perf beside py-spy, Austin and profiling.sampling on the same workloads: "
                                     "slowdown from interleaved rounds, attribution"),
    "bench-build": ("build", "cold image build, no-change rebuild, the same build on the host"),
    "bench-jit-pipeline": ("jit-pipeline", "-X perf_jit's record, perf inject --jit or jit-inject, and perf script "
                                           "against N code objects"),
    "bench-summary": ("summary", "rewrite BENCHMARKS.md from the results files"),
}


def _bench_session(name, group, what):
    def run(session):
        _install(session)
        _driver(session, "bench", group, *session.posargs)

    run.__doc__ = f"{what[0].upper()}{what[1:]} (results/bench/, BENCHMARKS.md)."
    nox.session(name=name, default=False)(run)


for _name, (_group, _what) in BENCH_GROUPS.items():
    _bench_session(_name, _group, _what)


def _cell_sessions(cell):
    def build(session):
        _install(session)
        _driver(session, "build", cell.name, *session.posargs)   # e.g. -- --if-stale (the buildbot builders)

    def conformance(session):
        _install(session)
        _pytest(session, "conformance", "--cell", cell.name, "-ra", f"--junitxml=results/{cell.name}/junit.xml")

    build.__doc__ = f"Build cpython-perf:{cell.name} (CPython {cell.recipe.version}, {cell.variant.description})."
    conformance.__doc__ = (f"Build-only checks of cpython-perf:{cell.name} (no perf trampoline on {cell.arch})."
                           if cell.build_only else
                           f"Real perf in cpython-perf:{cell.name}; modes: {', '.join(cell.modes) or 'none'}.")
    nox.session(name=f"build-{cell.name}", default=False)(build)
    nox.session(name=f"conformance-{cell.name}", default=False)(conformance)
    if not cell.foreign:
        _driver_session(f"reproducibility-{cell.name}",
                        f"Build cpython-perf:{cell.name} twice (its own build; then later, with another umask, locale, "
                        "time zone and CPU count) and compare /opt/cpython with diffoscope (results/reproducibility/; "
                        "two builds, minutes each).", "reproducibility", cell.name)


@nox.session(default=False)
def sbom(session):
    """The SBOM (CycloneDX JSON, validated) of a built cell image or a built packaging lane:
    nox -s sbom -- 3.13-fp [--attach] | nox -s sbom -- --lane bookworm-3.11 (results/sbom/)."""
    _install(session)
    _driver(session, "sbom", *session.posargs)


def _arch_session(arch):
    cells = MATRIX.cells_of_arch(arch)

    def run(session):
        _install(session)
        # the conformance fixtures build each image that is missing or stale, and skip (with the reason)
        # a cell whose source cannot be had here
        selected = [arg for cell in cells for arg in ("--cell", cell.name)]
        _pytest(session, "conformance", *selected, "-ra", f"--junitxml=results/{arch}/junit.xml")

    facts = ARCH_FACTS[arch]
    if not can_build(arch):
        how = f"not on this {HOST_ARCH} host: {cannot_build_reason(arch)}"
    elif not runs_natively(arch):
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


@nox.session(name="series-forms", default=False)
def series_forms(session):
    """Write every series in the forms packagers import (dist/series/<version>/: quilt dir + git-am mbox)."""
    _install(session)
    for version in session.posargs or list(MATRIX.series):
        _driver(session, "series-forms", version)


@nox.session(name="fedora-build", default=False)
def fedora_build(session):
    """Fedora's form built for real (minutes a version): the branch imported with git am on the pristine source,
    configured, `make regen-all` must change nothing, built, the trampoline run. Versions as arguments (default
    3.13): nox -s fedora-build -- 3.11 3.13."""
    _install(session)
    versions = ",".join(session.posargs) or "3.13"
    session.run("python", "-m", "pytest", "tests/lanes/test_series_forms.py", "-m", "fedora_build", "-ra", "-s",
                env={"CPYTHON_PERF_FEDORA_BUILD": versions})


def _deb_session(lane):
    def run(session):
        _install(session)
        _driver(session, "deb", lane.name, *session.posargs)
        if not {"--no-checks", "--without-series", "--release-grade"} & set(session.posargs):
            # real perf against the installed packages (the conformance suite's external target)
            session.run("python", "-m", "pytest", "conformance", "--image", f"cpython-perf-deb:{lane.name}",
                        "--python", lane.python, "--expect-modes", ",".join(lane.modes), "-ra",
                        f"--junitxml=results/deb/{lane.name}/conformance-junit.xml")

    run.__doc__ = (f"{lane.description}: {lane.source_package} {lane.package_version} + the {lane.version} series, "
                   f"built with Debian's rules, installed as cpython-perf-deb:{lane.name} and checked "
                   f"({', '.join(lane.modes)}).")
    nox.session(name=lane.session, default=False)(run)

    _driver_session(f"deb-reproducibility-{lane.name}",
                    f"Build the {lane.name} lane's packages twice (as `deb` builds them; then later, varied as "
                    "reprotest varies a build) and compare the .debs (results/deb-reproducibility/; two Debian "
                    "builds, about an hour).", "deb-reproducibility", lane.name)


for _lane in MATRIX.lanes.values():
    _deb_session(_lane)

for _stock in MATRIX.stock.values():
    _driver_session(_stock.session,
                    f"{_stock.description}: its image bootstrapped from this machine's archive, then the conformance "
                    f"suite with its modes ({', '.join(_stock.modes) or 'none: diagnosed'}); arguments go to pytest.",
                    "external", "stock", _stock.name)


@nox.session(name="apt-repo", default=False)
def apt_repo(session):
    """The built deb lanes' packages as a signed apt repository in dist/apt/, one suite per Debian release:
    nox -s apt-repo -- --key FINGERPRINT | --key-file FILE | --key-env VARIABLE [--lane LANE] [--out DIR]
    (cpython_perf/lanes/apt_repo.py)."""
    _install(session)
    _driver(session, "apt-repo", *session.posargs)


@nox.session(name="deb-check", default=False)
def deb_check(session):
    """Is each deb lane on the archive's newest revision of its source package? Exit 1 when one is behind
    (cpython_perf/lanes/deb_check.py)."""
    _install(session)
    _driver(session, "deb-check", *session.posargs)

"""Fixtures of the conformance suite: real perf inside the matrix's cell images.

Cells come from matrix.yaml: `--cell NAME` (repeatable; `all` for every cell),
else $CPYTHON_PERF_CELLS (space-separated), else the matrix's smoke cells.
Every test here runs containers and is marked `container`.

Foreign-arch cells (aarch64): their programs run in the container under
qemu-user, except perf recordings, which qemu-user cannot sample: those run
in a qemu-system guest booted from the cell's own image (cpython_perf.run.guest),
one boot per cell for all the seed-chain recordings the session plans.

Build-only cells (i386: an arch without the perf trampoline, run natively)
are checked by test_build_only.py; every test marked `needs_perf` is skipped
on them, with the reason, before any fixture runs.

A cell whose source cannot be had, or in which perf is not permitted, is
skipped with the reason; it never passes.  A check that does not apply to a
cell by matrix.yaml (a mode it does not claim, a flag it is not built with,
...) is skipped with not_applicable(fact, reason): the fact is recorded as
the property skip_expected, which the report checks against matrix.yaml to
tell such an expected skip from a missing check.

An external target is not a cell: `--image IMAGE --python PATH [--expect-modes
perf,perf_jit]` checks an interpreter in an image as it is (cpython_perf.check.external):
test_external.py says per perf mode whether it works there and, if not, why, and
the check scripts run with that python.  Matrix cells are then only checked when
named as well (--cell / $CPYTHON_PERF_CELLS).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from cpython_perf import host
from cpython_perf.arches import cannot_build_reason
from cpython_perf.check import defects, external
from cpython_perf.check.suite_results import SKIP_EXPECTED
from cpython_perf.errors import DockerUnavailable, DriverError, PerfNotPermitted, SourceUnavailable, UnknownCell
from cpython_perf.image import pipeline, tools
from cpython_perf.matrix import Cell, load_matrix
from cpython_perf.record import jit_inject, perf_data, perf_event, perf_runs
from cpython_perf.record.perf_samples import PERF_SCRIPT_FIELDS, min_chain_fraction
from cpython_perf.run import containers, guest
from cpython_perf.run.runners import CellRunner, GuestRunner

MATRIX = load_matrix()
SCRIPTS = Path(__file__).parent / "scripts"
SEED_SCRIPT = perf_runs.SEED_SCRIPT
PYTHON = "/opt/cpython/bin/python3"
_REQUIRES = re.compile(r"^#\s*requires:\s*(.*)$", re.M)


def pytest_addoption(parser):
    group = parser.getgroup("cpython-perf")
    group.addoption("--cell", action="append", default=[], dest="cells",
                    help="matrix cell to check (repeatable; 'all' for every cell)")
    group.addoption("--image", default=None, help="an image to check that is not a matrix cell (with --python)")
    group.addoption("--python", default=None, dest="target_python",
                    help="path of the interpreter in --image to check")
    group.addoption("--strict-cells", action="store_true",
                    default=os.environ.get("CPYTHON_PERF_STRICT", "") not in ("", "0"),
                    help="a selected cell that cannot run here (no source, no perf permission, a host that cannot "
                         "build it) fails instead of being skipped; also CPYTHON_PERF_STRICT=1 (CI sets it)")
    group.addoption("--stock", action="append", default=[],
                    help="a stock interpreter of matrix.yaml's stock: (e.g. sid-3.15; repeatable): its image (made "
                         "from the machine's archive where missing), python, modes and known defects")
    group.addoption("--expect-modes", default=None,
                    help="perf modes the --image/--python target must pass (e.g. perf,perf_jit); without it a mode "
                         "that does not work there is skipped with the diagnosis")


def pytest_configure(config):
    selected_targets(config)   # a bad --image/--python/--expect-modes is a usage error before collection


def pytest_collection_modifyitems(config, items):
    _deselect_other_kind(config, items)
    for item in items:
        if Path(str(item.fspath)).is_relative_to(Path(__file__).parent):
            item.add_marker(pytest.mark.container)
        cell = item_cell(item)
        if cell is not None and cell.build_only and item.get_closest_marker("needs_perf"):
            # before any fixture runs (no perf probe, no tools image): skipped, never passed
            item.add_marker(pytest.mark.skip(reason=build_only_skip_reason(cell)))
            item.user_properties.append((SKIP_EXPECTED, "build_only"))


def item_cell(item):
    """The matrix cell a collected test is parametrised with (cell, cell_mode, cell_check, patched_cell), if any."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    for name in ("cell", "patched_cell", "build_only_cell", "cell_mode", "cell_check"):
        value = params.get(name)
        value = value[0] if isinstance(value, tuple) and value else value
        if isinstance(value, Cell):   # not pytest's NOTSET of an empty parametrisation
            return value
    return None


def build_only_skip_reason(cell) -> str:
    return (f"{cell.name} is build-only: {cell.arch} has no perf trampoline upstream (PY_HAVE_PERF_TRAMPOLINE "
            "is not configured there), so the cell claims no perf mode and its image has no perf; "
            "test_build_only.py checks it")


def selected_targets(config) -> list[external.ExternalTarget]:
    """The external target of --stock, or of --image/--python (none without them)."""
    image, python = config.getoption("image"), config.getoption("target_python")
    stock = config.getoption("stock")
    if stock:
        if image or python or config.getoption("expect_modes"):
            raise pytest.UsageError("--stock NAME names the image, python and modes: not with --image, --python "
                                    "or --expect-modes")
        unknown = [name for name in stock if name not in MATRIX.stock]
        if unknown:
            raise pytest.UsageError(f"--stock {', '.join(unknown)}: matrix.yaml's stock: has "
                                    f"{', '.join(MATRIX.stock) or 'none'}")
        return [stock_target(MATRIX.stock[name]) for name in dict.fromkeys(stock)]
    if not image and not python:
        return []
    if not (image and python):
        raise pytest.UsageError("--image and --python go together: the image, and the interpreter's path in it")
    try:
        return [external.ExternalTarget(image, python, external.parse_modes(config.getoption("expect_modes")))]
    except ValueError as exc:
        raise pytest.UsageError(f"--expect-modes: {exc}") from None


def stock_target(target) -> external.ExternalTarget:
    """matrix.yaml's stock interpreter as the suite checks it: its image, python, modes and what it carries."""
    return external.ExternalTarget(external.stock_image_tag(target.suite, target.package, target.perf_suite),
                                   target.python, target.modes, carries=target.defects, stock=target.name,
                                   not_given=tuple(sorted(target.not_given.items())), jit=target.jit)


TARGET_FIXTURES = ("target_mode",)


def _deselect_other_kind(config, items) -> None:
    """Leave out the empty parametrisations of the kind of target not selected: the external tests in a
    cells-only run, the cell tests in a run of an external target alone (not skips: nothing was asked)."""
    targets_only = bool(selected_targets(config)) and not selected_cells(config)
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        # pytest's NOTSET of an empty parametrisation
        empty = {name for name, value in params.items() if type(value).__name__ == "NotSetType"}
        external_test = any(name in TARGET_FIXTURES for name in getattr(item, "fixturenames", ()))
        if (external_test and empty & set(TARGET_FIXTURES)) or (targets_only and empty and not external_test):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def selected_cells(config):
    if selected_targets(config) and not (config.getoption("cells") or os.environ.get("CPYTHON_PERF_CELLS", "").split()):
        return []   # an external target alone
    names = config.getoption("cells") or os.environ.get("CPYTHON_PERF_CELLS", "").split() or list(MATRIX.smoke_cells)
    if "all" in names:
        return list(MATRIX.cells.values())
    try:
        return [MATRIX.cell(n) for n in names]
    except UnknownCell as exc:
        raise pytest.UsageError(str(exc)) from None


# What a recorded chain must show (test_seed_chain, test_catalogue_shapes, test_samply)
MIN_PROCESS_SAMPLES = 50   # samples of the profiled Python process
MIN_COVERAGE = 0.3         # samples inside the chain's leaf / samples of the process (the leaf's work dominates)
# Of the samples inside the leaf, those carrying the whole chain: min_chain_fraction(mode), 95% for perf
# (frame pointers), 90% for perf_jit (cpython_perf.record.perf_samples.CHAIN_FRACTION_TARGETS, which the
# fidelity benchmark's targets are too).


def assert_chain(report, mode: str, label: str, record_property, hint: str = "") -> None:
    """Record a ChainReport's numbers as test properties and demand the chain: enough samples, the leaf
    dominating the run, and the whole chain (leaf to root, in order) in at least min_chain_fraction(mode)
    of the leaf's samples (mode: the perf mode the interpreter ran in)."""
    required = min_chain_fraction(mode)
    record_property("chain_depth", len(report.chain))
    record_property("chain_fraction", round(report.fraction, 4))
    record_property("min_chain_fraction", required)
    record_property("inside_leaf", report.inside_samples)
    record_property("process_samples", report.process_samples)
    print(report.summary())
    assert report.process_samples >= MIN_PROCESS_SAMPLES, f"too few samples of the Python process: {report.summary()}"
    assert report.coverage >= MIN_COVERAGE, (
        f"{report.chain[0]} is missing from most samples ({label}): {report.summary()}{hint}"
    )
    assert report.fraction >= required, (
        f"chain broken ({label}): {report.summary()}, below the {required:.0%} demanded with {mode}; "
        f"e.g. {report.example_bad[:3]}"
    )


_EVAL_FRAME_BYTES: dict[str, int | None] = {}


def eval_frame_bytes(runner, cell, record_property) -> int | None:
    """The stack frame _PyEval_EvalFrameDefault reserves in the cell's binary (objdump, once a session per
    cell: slow under qemu-user)."""
    if cell.name not in _EVAL_FRAME_BYTES:
        result = runner.run(perf_runs.eval_loop_objdump_command(PYTHON), perf=False)
        _EVAL_FRAME_BYTES[cell.name] = perf_runs.frame_allocation(result.stdout)
    frame = _EVAL_FRAME_BYTES[cell.name]
    record_property("eval_frame_bytes", frame)
    return frame


def dump_reach(runner, cell, stack_bytes, record_property) -> int | None:
    """How many Python frames a profiler that copies stack_bytes of user stack per sample (and unwinds the
    copy afterwards) can reach in this cell; None where there is no dump (frame pointers) or the eval
    loop's frame size is unknown.  At least one eval frame must fit."""
    if stack_bytes is None:
        return None
    frame = eval_frame_bytes(runner, cell, record_property)
    reach = perf_runs.dwarf_reachable_python_frames(cell, frame, stack_bytes)
    record_property("dwarf_reachable_frames", reach)
    assert reach is None or reach >= 1, (
        f"one eval frame ({frame} bytes) does not fit the {stack_bytes}-byte stack dump of {cell.name}")
    if reach is not None:
        print(f"{perf_runs.EVAL_FUNCTION} reserves {frame} bytes: a {stack_bytes}-byte dump reaches {reach} Python frames")
    return reach


def check_script_requirements(path: Path) -> set[str]:
    """Perf modes a check script needs, from its '# requires: perf perf_jit' line."""
    m = _REQUIRES.search(path.read_text())
    return set(m.group(1).replace(",", " ").split()) if m else set()


def check_script_fixes(path: Path) -> list[str]:
    """What a fix reproducer checks, from its '# fixes: gh-NNN' (or '# fixes: patches/3.13/NNNN') line."""
    return defects.fixes(path.read_text())


def check_applies(cell, script: Path) -> bool:
    """A check runs where the cell's interpreter offers the backends it requires; on a vanilla cell only fix reproducers run.
    (An external target's backends are its claimed modes, or every backend: conftest.target_check_gate.)"""
    if not cell.check_backends or not check_script_requirements(script) <= set(cell.check_backends):
        return False
    return bool(check_script_fixes(script)) if cell.vanilla else True


def check_scripts() -> list[Path]:
    return sorted(SCRIPTS.glob("check_*.py"))


def pytest_generate_tests(metafunc):
    cells = selected_cells(metafunc.config)
    names = metafunc.fixturenames
    if "cell_mode" in names:
        # vanilla twins exist to reproduce defects; the seed chain is checked on the patched cells
        params = [(c, m) for c in cells if not c.vanilla for m in c.modes]
        metafunc.parametrize("cell_mode", params, ids=[f"{c.name}-{m}" for c, m in params])
    elif "target_mode" in names:
        # an interpreter built with the experimental JIT (off by default) gives each mode with PYTHON_JIT=1 too
        params = [(t, m, jit) for t in selected_targets(metafunc.config) for m in t.modes
                  for jit in ((False, True) if t.jit else (False,))]
        metafunc.parametrize("target_mode", params,
                             ids=[f"{t.name}-{m}{'-jit' if jit else ''}" for t, m, jit in params])
    elif "cell_check" in names:
        targets = selected_targets(metafunc.config)
        params = [(c, s) for c in [*cells, *targets] for s in check_scripts() if check_applies(c, s)]
        metafunc.parametrize("cell_check", params, ids=[f"{c.name}-{s.stem}" for c, s in params])
    elif "build_only_cell" in names:
        # cells of an arch without the trampoline (i386): built, their C API and refused activation checked
        params = [c for c in cells if c.build_only]
        metafunc.parametrize("build_only_cell", params, ids=[c.name for c in params])
    elif "patched_cell" in names:
        # CPython's own tests are compared between a patched cell and its vanilla twin
        params = [c for c in cells if not c.vanilla]
        metafunc.parametrize("patched_cell", params, ids=[c.name for c in params])
    elif "cell" in names:
        # tests marked also_external run on the --image/--python target too (it duck-types a cell)
        if metafunc.definition.get_closest_marker("also_external"):
            cells = [*cells, *selected_targets(metafunc.config)]
        metafunc.parametrize("cell", cells, ids=[c.name for c in cells])


@pytest.fixture(scope="session")
def docker_client():
    try:
        return host.docker_client()
    except DockerUnavailable as exc:
        pytest.fail(str(exc), pytrace=False)


_images: dict[str, str | BaseException] = {}


_strict_cells = False


_config = None
_engine_checked = False


def pytest_sessionstart(session):
    global _strict_cells, _config
    _strict_cells = session.config.getoption("strict_cells")
    _config = session.config


def check_engine_paths(docker_client, image: str) -> None:
    """Once a session, before the first container that mounts pytest's temporary directory: stop the run,
    saying what to set, where the engine does not see that directory (containers.engine_path_problem)."""
    global _engine_checked
    if _engine_checked or _config is None:
        return
    _engine_checked = True
    problem = containers.engine_path_problem(docker_client, image,
                                             _config._tmp_path_factory.mktemp("engine-probe"))
    if problem:
        pytest.exit(problem, returncode=pytest.ExitCode.USAGE_ERROR)


_item = None   # the test being run (not_applicable records its property there)


@pytest.fixture(autouse=True)
def _current_item(request):
    global _item
    _item = request.node
    yield
    _item = None


def not_applicable(fact: str, reason: str):
    """Skip a check that does not apply to the cell by matrix.yaml.  fact is what makes it so, which the
    report checks against matrix.yaml (cpython_perf.report.model.expected_skip): mode:<mode> (not claimed),
    vanilla, build_only, backends (none offered), backend:<name> (not offered), cflag:<flag> / configure:<option>[,<option>] (not built
    with), configured:<option> (built with), twin (none in matrix.yaml), foreign / native (emulated on its runner, or not)."""
    __tracebackhide__ = True   # pytest -rs names the test's line, not this one
    if _item is not None:
        _item.user_properties.append((SKIP_EXPECTED, fact))
    pytest.skip(reason)


def cannot_run(message: str):
    """A selected cell cannot run here: a skip with the reason, or, with --strict-cells (CI), a failure: a cell
    whose checks did not run never looks like a pass."""
    if _strict_cells:
        pytest.fail(f"{message} (--strict-cells / CPYTHON_PERF_STRICT: a cell that cannot run fails)",
                    pytrace=False)
    pytest.skip(message)


def image_for(cell, docker_client) -> str:
    """The cell's current image (built once per session if missing or stale)."""
    why_not = cannot_build_reason(cell.arch)
    if why_not:
        cannot_run(f"{cell.name}: {why_not}")
    if cell.name not in _images:
        try:
            _images[cell.name] = pipeline.ensure_cell_image(cell, MATRIX)
        except SourceUnavailable as exc:
            _images[cell.name] = exc
    got = _images[cell.name]
    if isinstance(got, SourceUnavailable):
        cannot_run(f"{cell.name}: source not available here: {str(got).splitlines()[0]}")
    if not cell.foreign:   # an emulated image may not run here without qemu-user; a native one does
        check_engine_paths(docker_client, got)
    return got


def image_of(cell, docker_client) -> str:
    """The image a test runs: a cell's (image_for) or an external target's as it is (target_image)."""
    if isinstance(cell, external.ExternalTarget):
        return target_image(cell, docker_client)
    return image_for(cell, docker_client)


def python_of(cell) -> str:
    """The interpreter to start in the image: an external target's --python, a cell's python3."""
    return cell.python if isinstance(cell, external.ExternalTarget) else "python3"


def perf_of(cell, docker_client, tmp_path_factory) -> str:
    """The perf command in the image: an external target's as its facts found it (perf_X.Y), a cell's perf."""
    if isinstance(cell, external.ExternalTarget):
        return facts_for(cell, docker_client, tmp_path_factory).perf.command or "perf"
    return "perf"


def perf_cap_for(image: str, docker_client) -> str:
    try:
        return containers.perf_capability(docker_client, image)
    except PerfNotPermitted as exc:
        cannot_run(str(exc))


def perf_event_for(image: str, cap: str | None, docker_client, perf: str = "perf") -> perf_event.EventChoice:
    """The event every recording on this host samples with: perf's default, or cpu-clock where the default gives
    no sample (cpython_perf.record.perf_event; probed once a session, in the first image asked about)."""
    try:
        return perf_event.host_event(docker_client, image, cap, perf)
    except perf_event.NoSamples as exc:
        cannot_run(str(exc))


@pytest.fixture(scope="session")
def samply_binary(docker_client):
    """Host path of Debian's samply (pinned in matrix.yaml `profilers:`), from the tools image."""
    try:
        return tools.samply_binary(docker_client, MATRIX)
    except DriverError as exc:
        pytest.fail(f"samply could not be had: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def py_spy_binary():
    """Host path of py-spy's static binary (the PyPI wheel pinned in matrix.yaml `profilers:`, hash-checked)."""
    try:
        return tools.py_spy_binary(MATRIX)
    except DriverError as exc:
        pytest.fail(f"py-spy could not be had: {exc}", pytrace=False)


def results_dir() -> Path:
    """Where artefacts for the report go (results/<cell>/...): $CPYTHON_PERF_RESULTS, else results/."""
    return Path(os.environ.get("CPYTHON_PERF_RESULTS") or Path(__file__).parent.parent / "results")


def with_host_event(runner: CellRunner, record_property) -> CellRunner:
    """The runner recording with the host's sampling event (perf_event_for), which the test's properties name
    (perf_event: the report's `event` column)."""
    if runner.cap:
        choice = perf_event_for(runner.image, runner.cap, runner.client, runner.perf)
        runner.event = choice.event
        record_property("perf_event", choice.label)
    return runner


def _workdir(path: Path) -> Path:
    containers.make_workdir(path)
    for script in SCRIPTS.glob("*.py"):
        shutil.copy2(script, path / "src" / script.name)
    return path


# --------------------------------------------------------------------------
# The project's perf_jit injector against perf inject --jit (test_jit_inject.py): one script, which a native
# cell's container runs and a foreign cell's guest runs as one of its jobs

JIT_INJECT_WORKLOAD = Path(__file__).resolve().parent.parent / "benchmarks" / "many_functions.py"
JIT_INJECT_FILES = (JIT_INJECT_WORKLOAD, Path(jit_inject.__file__))   # copied into /src beside the scripts
# What the script leaves in /src for the test: both `perf script` texts, the stderr of `perf script` of
# jit_inject's recording, and the numbers of ELF files each injector wrote into /tmp ("<name> <count>" lines).
JIT_INJECT_COUNTS = "jit-files.txt"
# perf's build options: the driver injects with jit_inject only where perf unwinds with libunwind
# (record/outside.py), and with perf inject --jit elsewhere
JIT_INJECT_PERF_OPTIONS = "perf-build-options.txt"
JIT_INJECT_OUTPUTS = ("perf-inject.txt", "jit-inject.txt", "jit-inject.err", JIT_INJECT_COUNTS,
                      JIT_INJECT_PERF_OPTIONS)


# A native cell's container and a foreign cell's guest run the same program, each sampled as the suite samples
# the cell (record_options: in the guest cpu-clock at 250 Hz, some 550 samples).  `perf script` of both
# recordings runs with --no-inline: an inlined function is never a py:: frame, and perf finds the C functions
# inlined at each address of a callchain with addr2line over the binary's DWARF (30 MB of it in a cell's
# python3.13), which in the emulated guest took `perf script` 270 s for 100 samples, against 2 s without.  So
# the guest's job (the recording, both injections, both scripts) takes about 30 s.
JIT_INJECT_PROGRAM = f"/src/{JIT_INJECT_WORKLOAD.name} 400 --free 10 --seconds 0.6"


def jit_inject_script(cell, perf: str = "perf", python: str = "python3", event: str | None = None) -> str:
    """The shell script that records JIT_INJECT_PROGRAM with -X perf_jit as the suite records the cell
    (record_options; event: the host's sampling event, a foreign cell's guest's own), injects the same perf.data
    with `perf inject --jit` and with jit_inject.py (run by the profiled interpreter), and leaves
    JIT_INJECT_OUTPUTS in /src.  The defaults of perf and python are a cell's and a GuestRunner's: for a
    foreign cell this text is its guest's job, which the test asks its GuestRunner for."""
    options = " ".join(perf_runs.record_options(cell, "perf_jit", event))
    fields = f"--no-inline -F {PERF_SCRIPT_FIELDS}"
    return "\n".join([
        perf_runs.DWARF_MMAP_FUNCTION,
        "set -e",
        f"{perf} version --build-options > /src/{JIT_INJECT_PERF_OPTIONS} 2>&1 || true",
        f"{perf} record -q {options} -o /src/perf.data -- {python} -X perf_jit {JIT_INJECT_PROGRAM} > /src/prog.json",
        *perf_runs.perf_arch_lines(cell, "perf_jit", "/src/perf.data", python),
        f"{perf} inject -i /src/perf.data --jit -o /src/perf.jit.data",
        f"{python} -E /src/jit_inject.py -i /src/perf.data -o /src/perf.arena.data",
        f"{perf} script {fields} -i /src/perf.jit.data > /src/perf-inject.txt 2>/dev/null",
        f"{perf} script {fields} -i /src/perf.arena.data > /src/jit-inject.txt 2>/src/jit-inject.err",
        # the ELF files beside the dump: jit_inject's one per arena, perf inject's one per code object
        f"echo \"arena_files $(find /tmp -maxdepth 1 -name 'jit-*-arena-*.so' | wc -l)\" > /src/{JIT_INJECT_COUNTS}",
        f"echo \"perf_inject_files $(find /tmp -maxdepth 1 -name 'jitted-*.so' | wc -l)\" >> /src/{JIT_INJECT_COUNTS}",
    ]) + "\n"


def jit_inject_not_applicable(cell) -> tuple[str, str] | None:
    """The fact and reason for not_applicable where test_jit_inject.py does not compare the injectors (None:
    it does, in the cell's container or, for a foreign cell, as one of its guest's jobs)."""
    if "perf_jit" not in cell.backends:
        return ("backend:perf_jit", f"{cell.name}'s interpreter writes no jitdump (no perf_jit backend)")
    if cell.foreign and cell.vanilla:
        return ("vanilla",
                f"{cell.name}: a vanilla twin's guest records no perf_jit run (its chains are not checked): "
                "3.13.5 as released writes aarch64 unwind info through which perf cannot unwind the trampolines "
                "(the 3.13 series fixes it), so neither injector's recording has py:: chains to compare; "
                "the injector reads upstream's jitdumps on the x86_64 vanilla twins")
    return None


# --------------------------------------------------------------------------
# Foreign-arch cells: perf recordings in a qemu-system guest

GUEST_OUTPUTS = (perf_runs.SCRIPT_OUTPUT, perf_runs.PHASES_OUTPUT, "python.stdout")

# The shape catalogue (test_catalogue_shapes.py): scripts/shape_NAME.py, each recorded with -X <mode>.
SHAPES = ("methods", "closures", "generators", "async", "recursion", "exceptions", "sorted_key", "map",
          # calls the eval loop specializes into a frame push of its own (3.11+): each must keep its py:: frame
          "init", "awaits", "property", "getitem")
# Under a perf trampoline every Python call is a C call of the eval loop (3.11+ inline them
# otherwise): near the recursion limit that is ~950 eval frames, 10 KiB (3.11) to 18 KiB (3.13)
# each at -O0, more than the default 8 MiB C stack -- native 3.13 dies with SIGSEGV as much as
# the backports.  The shapes run with a C stack that any build here fits in.
SHAPE_C_STACK_KB = 256 * 1024


def shape_path(shape: str) -> str:
    return f"/src/shape_{shape}.py"


def shape_run(cell, mode: str, shape: str, event: str | None = None) -> perf_runs.PerfRun:
    """The recording of one catalogue shape (the same command lines as the seed's, with SHAPE_C_STACK_KB)."""
    return perf_runs.perf_run(cell, mode, "xoption", shape_path(shape), c_stack_kb=SHAPE_C_STACK_KB, event=event)


# Dwarf unwinding in the emulated guest costs ~0.5 s a sample in `perf script`: perf_jit is recorded
# with -X only there (the activation paths are the same code on every arch and are checked on x86_64
# and by the check scripts under qemu-user); perf (frame pointers) is recorded with every activation.
GUEST_ACTIVATIONS = {"perf": perf_runs.ACTIVATIONS, "perf_jit": ("xoption",)}
# The catalogue shapes the guest records, with -X perf only (frame pointers; dwarf's cost as above).
# Deep recursion is left to x86_64: its reach is measured against perf_event_max_stack, which the
# test reads in the container, i.e. from the host's kernel, not the guest's.
GUEST_SHAPE_MODE = "perf"
GUEST_SHAPES = tuple(shape for shape in SHAPES if shape != "recursion")


def guest_jobs(cell) -> list[guest.GuestJob]:
    """Every recording test_seed_chain, test_catalogue_shapes and test_jit_inject ask of a foreign cell: each
    mode it claims (none for a vanilla twin, whose chains are not checked) with the activations
    GUEST_ACTIVATIONS gives, the run without activation, GUEST_SHAPES with GUEST_SHAPE_MODE where the cell
    claims it, and the injectors' comparison (jit_inject_script) where its interpreter offers perf_jit."""
    modes = () if cell.vanilla else cell.modes
    jobs = [guest.GuestJob(f"{mode}-{activation}", perf_runs.perf_run(cell, mode, activation, SEED_SCRIPT).shell,
                           GUEST_OUTPUTS)
            for mode in modes for activation in GUEST_ACTIVATIONS[mode]]
    jobs.append(guest.GuestJob("no-activation", perf_runs.perf_run(cell, None, "xoption", SEED_SCRIPT).shell,
                               GUEST_OUTPUTS))
    if GUEST_SHAPE_MODE in modes:
        jobs += [guest.GuestJob(f"shape-{shape}", shape_run(cell, GUEST_SHAPE_MODE, shape).shell, GUEST_OUTPUTS)
                 for shape in GUEST_SHAPES]
    if jit_inject_not_applicable(cell) is None:
        jobs.append(guest.GuestJob("jit-inject", jit_inject_script(cell), JIT_INJECT_OUTPUTS))
    return jobs


def guest_files() -> list[Path]:
    """The files each guest job finds in /src: the conformance scripts, JIT_INJECT_FILES and perf_data.py (the
    arch rename of dwarf recordings where the arch's perf needs it, perf_runs.perf_arch_lines)."""
    return sorted(SCRIPTS.glob("*.py")) + list(JIT_INJECT_FILES) + [Path(perf_data.__file__)]


def guest_shape_skip_reason(cell, mode: str, shape: str) -> str | None:
    """Why a catalogue shape is not recorded in a foreign cell's guest (None: it is)."""
    if mode != GUEST_SHAPE_MODE:
        return (f"{cell.name}: in the emulated guest the shapes are recorded with -X {GUEST_SHAPE_MODE} only (dwarf "
                f"unwinding there costs ~0.5 s a sample); -X {mode} is checked on the x86_64 cells")
    if shape not in GUEST_SHAPES:
        return (f"{cell.name}: shape {shape} is checked on the x86_64 cells: its reach is measured against the "
                "kernel's perf_event_max_stack, which the container shows for the host, not for the guest")
    return None


def guest_skip_reason(cell, mode: str | None, activation: str) -> str | None:
    """Why a seed recording is not made in a foreign cell's guest (None: it is)."""
    if mode is not None and activation not in GUEST_ACTIVATIONS[mode]:
        return (f"{cell.name}: in the emulated guest {mode} is recorded with -X {mode} only (dwarf unwinding "
                "there costs ~0.5 s a sample); this activation is checked on the x86_64 cells")
    return None


def once_per_session(cache: dict, key: str, make, failure: str):
    """make() once a session for key.  Its failure is kept, and every test that asks again fails with it
    (failure: what failed), rather than each repeating a minutes-long attempt; skips are not kept."""
    if key not in cache:
        try:
            cache[key] = make()
        except Exception as exc:  # reported by every test that needed it
            cache[key] = exc
    got = cache[key]
    if isinstance(got, BaseException):
        pytest.fail(f"{failure}: {got}", pytrace=False)
    return got


_guest_runs: dict[str, guest.GuestRun | BaseException] = {}


def guest_run_for(cell, docker_client, tmp_path_factory) -> guest.GuestRun:
    """Boot the cell's guest once per session and run all its planned recordings."""
    if cell.name not in _guest_runs:
        image_for(cell, docker_client)
    return once_per_session(
        _guest_runs, cell.name,
        lambda: guest.run_in_guest(docker_client, cell, guest_jobs(cell), guest_files(),
                                   workdir=tmp_path_factory.mktemp(f"guest-{cell.name}")),
        f"the {cell.name} guest failed")


@pytest.fixture
def runner_for(docker_client, tmp_path, tmp_path_factory, record_property):
    """runner_for(cell, perf=True) -> CellRunner for that cell (a GuestRunner for a foreign cell)."""

    def make(cell, perf=True):
        if isinstance(cell, external.ExternalTarget):
            return target_runner(cell, docker_client, tmp_path, tmp_path_factory, record_property)
        image = image_for(cell, docker_client)
        workdir = _workdir(tmp_path / cell.name)
        if cell.foreign:
            if perf:
                record_property("perf_event", f"{perf_runs.guest_event(cell)} (qemu-system guest)")
            return GuestRunner(docker_client, image, workdir, cell.name, guest_jobs(cell),
                               lambda: guest_run_for(cell, docker_client, tmp_path_factory), record_property)
        # a build-only cell's image has no perf to probe (and nothing to record)
        cap = perf_cap_for(image, docker_client) if perf and not cell.build_only else None
        runner = CellRunner(docker_client, image, workdir, cap)
        runner.dwarf_stack = perf_runs.stack_dump_bytes(cell, "perf_jit")
        return with_host_event(runner, record_property)

    return make


# --------------------------------------------------------------------------
# External targets: an interpreter in an image, not a matrix cell (cpython_perf.check.external)

_target_facts: dict[str, external.TargetFacts | BaseException] = {}
_stock_images: dict[str, str | BaseException] = {}


def target_image(target, docker_client) -> str:
    import docker.errors

    try:
        docker_client.images.get(target.image)
    except docker.errors.ImageNotFound:
        if target.stock:
            stock = MATRIX.stock[target.stock]
            return once_per_session(_stock_images, target.stock, lambda: external.ensure_stock_image(
                docker_client, stock.suite, stock.package, stock.perf_suite),
                f"the image of stock.{target.stock} could not be made")
        pytest.fail(f"image {target.image} does not exist here (docker pull or build it; for stock Debian ones: "
                    "python -m cpython_perf external image --suite SUITE --package python3.X)", pytrace=False)
    return target.image


def facts_for(target, docker_client, tmp_path_factory) -> external.TargetFacts:
    """What the target's image and interpreter offer (once a session): cpython_perf.check.external.gather_facts."""
    def gather():
        image = target_image(target, docker_client)
        runner = CellRunner(docker_client, image, _workdir(tmp_path_factory.mktemp(f"facts-{target.name}")), None)

        def copy_out(paths):
            paths = [p for p in paths if p]
            (runner.src / "bin").mkdir(exist_ok=True)
            copied = {}
            for i, path in enumerate(paths):
                if runner.run(["cp", "-L", path, f"/src/bin/{i}"], perf=False).exit_code == 0:
                    copied[path] = runner.src / "bin" / str(i)
            return copied

        return external.gather_facts(
            lambda command: runner.run(command, perf=False, timeout=300), copy_out,
            lambda perf: containers.perf_capability(docker_client, image, perf=perf), target)

    return once_per_session(_target_facts, target.name, gather,
                            f"{target.python} in {target.image}: the facts could not be gathered")


@pytest.fixture
def target_facts(docker_client, tmp_path_factory):
    """target_facts(target) -> its TargetFacts (gathered once a session)."""
    return lambda target: facts_for(target, docker_client, tmp_path_factory)


def target_runner(target, docker_client, tmp_path, tmp_path_factory, record_property) -> CellRunner:
    """A runner of the target's image: its python and perf command, perf's capability where permitted."""
    facts = facts_for(target, docker_client, tmp_path_factory)
    runner = CellRunner(docker_client, target.image, _workdir(tmp_path / target.name), facts.capability)
    runner.python = target.python
    runner.perf = perf_of(target, docker_client, tmp_path_factory)
    return with_host_event(runner, record_property)


def carried_defects(target) -> tuple[str, ...]:
    """The catalogued defects an external target may carry: a stock target's list (matrix.yaml stock:), any
    of the catalogue for an interpreter matrix.yaml does not describe."""
    return target.carries if target.carries is not None else tuple(MATRIX.defects)


def xfail_if_carried(cell, defect_id: str, seen: str, target_facts, record_property) -> None:
    """A test's failure on an interpreter without the series whose evidence (seen, checked by the caller) is
    the catalogued defect's, where the target carries it: an xfail 'present in <version>: ...'.  Returns
    otherwise (a cell, an interpreter with the series, a target not listed with the defect): the caller fails."""
    if not isinstance(cell, external.ExternalTarget):
        return
    facts = target_facts(cell)
    if facts.has_series is not False or defect_id not in carried_defects(cell):
        return
    record_property("defect_present", defect_id)
    pytest.xfail(f"{defects.present_text(MATRIX.defects[defect_id], facts.version_text)}; seen: {seen}")


def target_check_gate(cell, script: Path, target_facts, record_property) -> None:
    """Tag an external target's check with the target (properties external_image, external_python, which the
    report reads) and skip it where the target neither claims nor offers the backends it needs."""
    if isinstance(cell, external.ExternalTarget):
        record_property("external_image", cell.image)
        record_property("external_python", cell.python)
        reason = external.check_skip_reason(cell, check_script_requirements(script), target_facts(cell))
        if reason:
            pytest.skip(f"{script.name}: {reason}")

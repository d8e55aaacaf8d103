"""Build-only cells: an arch without the perf trampoline (i386), built natively from the matrix.

Upstream's configure enables the trampoline on x86_64 and aarch64 Linux only.
Elsewhere the interpreter must still be what upstream 3.12+ is there:

* the six PyUnstable_Perf* functions are exported (an extension that calls
  any of them must load): in the binary's dynamic symbol table, resolvable
  at run time through ctypes.pythonapi, and linked by a C extension compiled
  in the cell and imported; the perf map API works, the trampoline functions
  answer 0;
* sys.activate_stack_trampoline() raises ValueError "perf trampoline not
  available", sys.is_stack_trampoline_active() stays False;
* -X perf, -X perf_jit, PYTHONPERFSUPPORT=1 and PYTHON_PERF_JIT_SUPPORT=1
  are silently ignored: the program runs, nothing is activated, no map or
  dump file is written;
* CPython's own test_sys passes in the built tree.

test_sys here is not marked upstream_regression: on such a cell the build is
all there is to check, and it runs in a minute natively (the comparison with
a vanilla twin in test_upstream_regression.py does not apply: a build-only
cell has none).  The perf tests of the other modules are skipped on these
cells with the reason (conftest: the `needs_perf` marker).
"""

from __future__ import annotations

import json

import pytest

from cpython_perf.record import perf_runs
from cpython_perf.check import regrtest
from cpython_perf.matrix import PERF_C_API, PERF_MODES

from conftest import PYTHON

PROBE = "/src/build_only_probe.py"
FUNCTIONS = PERF_C_API
NOT_AVAILABLE = "perf trampoline not available"   # upstream sysmodule.c, without PY_HAVE_PERF_TRAMPOLINE
TEST_SYS_TIMEOUT = 1800


def probe(runner, mode, env=None, options=()):
    result = runner.run(["python3", *options, PROBE, mode], env=env, perf=False)
    output = result.stdout + result.stderr
    assert result.exit_code == 0, f"{PROBE} {mode} failed (exit {result.exit_code}):\n{output[-3000:]}"
    return json.loads(result.stdout.strip().splitlines()[-1]), result


def dynamic_symbols(runner) -> dict[str, list[str]]:
    """readelf --dyn-syms lines of the interpreter and any libpython, by symbol name."""
    script = (f"for f in $(readlink -f {PYTHON}) /opt/cpython/lib/libpython*.so*; do "
              '[ -f "$f" ] && readelf --dyn-syms -W "$f" | sed "s|^|$f: |"; done; true')
    result = runner.run(["sh", "-c", script], perf=False)
    assert result.exit_code == 0 and result.stdout, f"readelf failed: {result.stderr[-2000:]}"
    lines: dict[str, list[str]] = {}
    for line in result.stdout.splitlines():
        fields = line.split()
        if fields and fields[-1].split("@")[0] in FUNCTIONS:
            lines.setdefault(fields[-1].split("@")[0], []).append(line)
    return lines


def test_perf_api_exported(build_only_cell, runner_for, record_property):
    """All six functions are defined (not UND) FUNC GLOBAL entries of the dynamic symbol table."""
    runner = runner_for(build_only_cell, perf=False)
    found = dynamic_symbols(runner)
    for lines in found.values():
        print("\n".join(lines))
    defined = {name for name, lines in found.items()
               if any(l.split()[4:6] == ["FUNC", "GLOBAL"] and l.split()[7] != "UND" for l in lines)}
    missing = [name for name in FUNCTIONS if name not in defined]
    record_property("exported", " ".join(n for n in FUNCTIONS if n in defined))
    record_property("not_exported", " ".join(missing))
    assert not missing, (f"{build_only_cell.name} does not export {', '.join(missing)}: an extension calling "
                         f"{'it' if len(missing) == 1 else 'them'} fails to load; readelf lines: {found}")


def test_perf_api_resolves_and_answers_at_run_time(build_only_cell, runner_for, record_property):
    """ctypes.pythonapi finds all six (dlsym, as the loader does for an extension); the perf map API writes
    the map, the trampoline functions return 0 and compile nothing, as upstream does without the trampoline."""
    runner = runner_for(build_only_cell, perf=False)
    out, _ = probe(runner, "api")
    print(json.dumps(out, indent=1))
    unresolved = {name: said for name, said in out["lookup"].items() if said != "ok"}
    record_property("unresolved", " ".join(unresolved))
    assert not unresolved, f"ctypes.pythonapi cannot resolve {unresolved}"
    assert out["init"] == 0 and out["map_created"], out
    assert out["write"] == 0 and out["copy"] == 0, out
    assert out["compile_code"] == 0, f"PyUnstable_PerfTrampoline_CompileCode returned {out['compile_code']}"
    assert out["persist_after_fork"] == 0, (
        f"PyUnstable_PerfTrampoline_SetPersistAfterFork(1) returned {out['persist_after_fork']}: upstream "
        "returns 0 where there is no trampoline")
    # the two entries the API wrote, and no trampoline entry for the code object CompileCode was given
    assert out["map_lines"] == ["1000 40 build_only::written", "2000 80 build_only::copied"], out["map_lines"]
    assert out["trampoline_active"] is False


def test_extension_calling_the_perf_api_loads(build_only_cell, runner_for, record_property):
    """A C extension holding the address of all six functions (compiled with the cell's headers and
    compiler) imports; calling the trampoline functions through it answers 0."""
    runner = runner_for(build_only_cell, perf=False)
    out, _ = probe(runner, "extension")
    print(json.dumps(out, indent=1))
    assert out["compile_exit"] == 0, f"the extension does not compile:\n{out['compile']}\n{out['compile_output']}"
    record_property("import", out["import"])
    assert out["import"] == "ok", f"the extension does not load: {out['import']}"
    assert out["resolved"] == len(FUNCTIONS)
    assert out["compile_code"] == 0 and out["persist_after_fork"] == 0, out


def test_activation_refused_like_upstream(build_only_cell, runner_for):
    """sys.activate_stack_trampoline() raises ValueError('perf trampoline not available') for each
    backend, nothing becomes active, deactivation is a no-op."""
    out, _ = probe(runner_for(build_only_cell, perf=False), "activate")
    print(json.dumps(out, indent=1))
    for backend in ("perf", "perf_jit"):
        assert out["activate"][backend] == {"type": "ValueError", "message": NOT_AVAILABLE}, (
            f"activate_stack_trampoline({backend!r}): {out['activate'][backend]}")
    assert out["active_before"] is False and out["active_after"] is False and out["active_at_end"] is False, out
    assert out["deactivate"] == "None", out["deactivate"]


ACTIVATIONS = [(f"-X {perf_runs.MODE_XOPTION[m]}", ("-X", perf_runs.MODE_XOPTION[m]), None) for m in PERF_MODES] + \
              [(f"{perf_runs.MODE_ENV[m]}=1", (), {perf_runs.MODE_ENV[m]: "1"}) for m in PERF_MODES]


@pytest.mark.parametrize("label, options, env", ACTIVATIONS, ids=[a[0] for a in ACTIVATIONS])
def test_perf_options_silently_ignored(build_only_cell, label, options, env, runner_for):
    """The option or variable changes nothing: exit 0, no warning, the work done, no trampoline active,
    no /tmp/perf-PID.map or /tmp/jit-PID.dump written."""
    runner = runner_for(build_only_cell, perf=False)
    out, result = probe(runner, "status", env=env, options=options)
    print(label, out, result.stderr)
    assert out["fib20"] == 6765
    assert out["active"] is False, f"{label} activated a trampoline on {build_only_cell.arch}"
    assert result.stderr == "", f"{label} printed: {result.stderr}"
    written = sorted(p.name for p in runner.tmp.iterdir() if p.name.startswith(("perf-", "jit-")))
    assert not written, f"{label} wrote {written}"


def test_cpython_test_sys(build_only_cell, runner_for, record_property):
    """CPython's own test_sys passes outright in the cell's built tree."""
    cell = build_only_cell
    runner = runner_for(cell, perf=False)
    junit = f"/src/{regrtest.JUNIT_FILE}"
    result = runner.run(regrtest.regrtest_command(cell, ["test_sys"], junit), timeout=TEST_SYS_TIMEOUT, perf=False)
    output = result.stdout + result.stderr
    junit_file = runner.src / regrtest.JUNIT_FILE
    parsed = regrtest.parse_run(junit_file.read_text() if junit_file.exists() else "", output)
    print(output[-2500:])
    record_property("cases", parsed.cases)
    record_property("skipped_cases", parsed.skipped_cases)
    record_property("failures", " ".join(sorted(parsed.failures())))
    assert parsed.cases > 0, f"no test case of test_sys ran in {cell.name} (exit {result.exit_code}):\n{output[-3000:]}"
    assert not parsed.failures() and result.exit_code == 0, (
        f"{cell.name} fails test_sys (exit {result.exit_code}): {sorted(parsed.failures())}")

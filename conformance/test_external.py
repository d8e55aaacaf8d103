"""Any interpreter, any image: does each perf mode work with --python in --image, and if not, why.

Collected only with `--image IMAGE --python PATH [--expect-modes perf,perf_jit]`
(conftest; cpython_perf.check.external).  For each perf mode, perf (the image's own)
records the howto's seed script with the target's interpreter, -X first, then
the environment variable and the sys API, with the matrix cells' command lines
(perf_runs) and bars (conftest.assert_chain).  A mode works when -X shows the
chain.  Where it does not, the reason is diagnosed from facts gathered in the
image (external.diagnose: no perf, perf not permitted, no trampoline, backend
not available, perf too old, no frame pointers), and the test FAILS when
--expect-modes names the mode, else it is skipped with that reason.  An
expected mode must work with every activation; for one not expected, the
activations that do not work (e.g. 3.13.5's sys API refusing perf_jit) are
its caveat (property external_caveat), the test passes.  Never passed
without the chain.
"""

from __future__ import annotations

import json
import re

import pytest

from cpython_perf.check import external
from cpython_perf.record import perf_runs
from cpython_perf.record.perf_samples import chain_report, parse_perf_script, python_frame_count

from conftest import SEED_SCRIPT, assert_chain, xfail_if_carried
from test_seed_chain import SEED_CHAIN

pytestmark = pytest.mark.needs_perf


def expected_chain(target, mode, facts, record_property):
    """The seed chain, cut to what perf_jit's dwarf dump (perf's default size) reaches in this binary."""
    stack = perf_runs.stack_dump_bytes(target, mode)
    reach = perf_runs.dwarf_reachable_python_frames(target, facts.eval_loop.frame_bytes, stack) if stack else None
    if reach is not None:
        record_property("dwarf_reachable_frames", reach)
    return SEED_CHAIN if reach is None else SEED_CHAIN[:max(1, reach)]


JIT_ON = {"PYTHON_JIT": "1"}
JIT_PROBE = ("import sys; j = getattr(sys, '_jit', None); "
             "print('available' if j and j.is_available() else 'unavailable', 'on' if j and j.is_enabled() else 'off')")
# under PYTHON_JIT=1, with the trampoline started by -X or asked for by the sys API: the JIT's and its state
JIT_WITH_TRAMPOLINE = """import json, sys
said = "ok"
if sys.argv[1] == "sys_api":
    try:
        sys.activate_stack_trampoline(sys.argv[2])
    except Exception as exc:
        said = f"{type(exc).__name__}: {exc}"
print(json.dumps({"jit": sys._jit.is_enabled(), "active": sys.is_stack_trampoline_active(), "said": said}))
"""


def jit_beside_trampoline(runner, target, mode, record_property) -> str | None:
    """The experimental JIT under PYTHON_JIT=1: on without the trampoline (or the target is not what
    matrix.yaml says), then with the trampoline started by -X and asked for by the sys API.  None where both
    run at once; else what the interpreter does instead (3.14 and 3.15 turn the JIT off under -X, with a
    RuntimeWarning, and refuse the sys API while the JIT is on), for the skip."""
    result = runner.run([target.python, "-c", JIT_PROBE], env=JIT_ON, perf=False, timeout=120)
    said = (result.stdout + result.stderr).strip()
    record_property("jit_state", said)
    assert result.exit_code == 0 and said == "available on", (
        f"{target.python} in {target.image} with PYTHON_JIT=1: sys._jit says {said!r}, not 'available on': "
        "matrix.yaml's stock: says it is built with the experimental JIT (jit: true)")
    seen = {}
    for activation, argv in (("xoption", ["-X", perf_runs.MODE_XOPTION[mode]]), ("sys_api", [])):
        run = runner.run([target.python, *argv, "-c", JIT_WITH_TRAMPOLINE, activation, mode], env=JIT_ON,
                         perf=False, timeout=120)
        lines = [l for l in run.stdout.splitlines() if l.startswith("{")]
        assert run.exit_code == 0 and lines, f"the JIT probe failed ({activation}): {run.stderr[-800:]}"
        state = json.loads(lines[-1])
        warning = next((l.split(": ", 1)[-1] for l in run.stderr.splitlines() if "Warning" in l), "")
        seen[activation] = (state, warning)
    record_property("jit_with_trampoline", json.dumps(seen))
    if all(state["jit"] and state["active"] for state, _ in seen.values()):
        return None
    (x, warned), (api, _) = seen["xoption"], seen["sys_api"]
    return (f"the experimental JIT and the perf trampoline exclude each other in {target.python}: with "
            f"PYTHON_JIT=1 and -X {perf_runs.MODE_XOPTION[mode]} the JIT is {'on' if x['jit'] else 'off'} and the "
            f"trampoline {'active' if x['active'] else 'inactive'}"
            + (f" ({warned!r})" if warned else "")
            + f"; sys.activate_stack_trampoline({mode!r}) with the JIT on: {api['said']} (the JIT "
            f"{'on' if api['jit'] else 'off'}, the trampoline {'active' if api['active'] else 'inactive'}); "
            "Python frames of JIT-compiled code cannot be profiled with perf: profile with the JIT off")


def attempt(runner, target, mode, activation, facts, record_property, jit: bool = False) -> external.Evidence | None:
    """Record the seed script in one activation; None when the chain is there, else what was seen."""
    run = perf_runs.perf_run(target, mode, activation, SEED_SCRIPT, python=runner.python, perf=runner.perf,
                            event=runner.event, env=JIT_ON if jit else None)
    result = runner.run(run.shell, timeout=900)
    if result.exit_code != 0:
        return external.Evidence(activation, error=(result.stderr or result.stdout)[-2000:])
    samples = parse_perf_script((runner.src / run.output).read_text(errors="replace"))
    process = [s for s in samples if s.comm.startswith("python")]
    evidence = external.Evidence(activation, process_samples=len(process), python_frames=python_frame_count(process))
    def prefixed(name, value):
        record_property(f"{activation}_{name}", value)

    chain = expected_chain(target, mode, facts, prefixed)
    try:
        assert_chain(chain_report(samples, chain), mode, f"{mode}, {activation}", prefixed)
    except AssertionError as exc:
        evidence.failure = str(exc)
        return evidence
    return None


def test_perf_mode(target_mode, target_facts, runner_for, record_property):
    target, mode, jit = target_mode
    facts = target_facts(target)
    record_property("external_image", target.image)
    record_property("external_python", target.python)
    record_property("mode", mode)
    record_property("jit", jit)
    record_property("expected", target.expects(mode))
    for name, value in facts.properties().items():
        record_property(name, value)
    reasons = external.blockers(mode, facts)
    caveats = []
    if not reasons:
        runner = runner_for(target)
        if jit:
            excluded = jit_beside_trampoline(runner, target, mode, record_property)
            assert excluded, (f"the JIT and the trampoline run together in {target.python} in {target.image}: "
                              f"matrix.yaml's stock.{target.stock} (jit: true) and the stock tables say the "
                              "trampoline turns the JIT off; record the chain with the JIT on and say so there")
            record_property("external_outcome", "does not work")
            record_property("external_reason", excluded)
            pytest.skip(f"{mode} with PYTHON_JIT=1: {excluded}")
        for activation in perf_runs.ACTIVATIONS:   # -X first: it decides whether the mode works
            evidence = attempt(runner, target, mode, activation, facts, record_property, jit)
            if evidence is None:
                continue
            diagnosis = external.diagnose(mode, facts, evidence)
            if activation == perf_runs.ACTIVATIONS[0]:
                reasons = diagnosis
                break
            caveats.append(f"not with {activation}: {external.render_reasons(diagnosis)}")
    if not reasons:
        record_property("external_outcome", "works")
        if target.why_not(mode):
            pytest.fail(f"{mode} works with {target.python} in {target.image}, but matrix.yaml's "
                        f"stock.{target.stock} says it does not ({target.why_not(mode)}): add {mode} to its modes",
                        pytrace=False)
        if caveats:
            caveat = "; ".join(caveats)
            record_property("external_caveat", caveat)
            if target.expects(mode):
                # a catalogued defect the interpreter (without the series) carries: a finding, not a failure
                for defect in re.findall(r"\bgh-\d+", caveat):
                    xfail_if_carried(target, defect, f"{mode} works with -X but {caveat}", target_facts,
                                     record_property)
            if target.expects(mode):
                pytest.fail(f"{mode} works with -X but {caveat}", pytrace=False)
            print(f"{mode} works with -X; {caveat}")
        return
    text = external.render_reasons(reasons)
    record_property("external_outcome", "does not work")
    record_property("external_reason_codes", ",".join(r.code for r in reasons))
    record_property("external_reason", text)
    message = f"{mode} does not work with {target.python} in {target.image}: {text}"
    if target.expects(mode):
        pytest.fail(message, pytrace=False)
    said = target.why_not(mode)
    if said and said not in [r.code for r in reasons]:
        pytest.fail(f"matrix.yaml's stock.{target.stock} says {mode} is not given because of {said}, but the "
                    f"diagnosis is: {', '.join(r.code for r in reasons)} ({text})", pytrace=False)
    pytest.skip(message)

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

import re

import pytest

from cpython_perf.check import external
from cpython_perf.record import perf_runs
from cpython_perf.record.perf_samples import chain_report, parse_perf_script, python_frame_count

from conftest import SEED_SCRIPT, assert_chain
from test_seed_chain import SEED_CHAIN

pytestmark = pytest.mark.needs_perf


def expected_chain(target, mode, facts, record_property):
    """The seed chain, cut to what perf_jit's dwarf dump (perf's default size) reaches in this binary."""
    stack = perf_runs.stack_dump_bytes(target, mode)
    reach = perf_runs.dwarf_reachable_python_frames(target, facts.eval_loop.frame_bytes, stack) if stack else None
    if reach is not None:
        record_property("dwarf_reachable_frames", reach)
    return SEED_CHAIN if reach is None else SEED_CHAIN[:max(1, reach)]


def attempt(runner, target, mode, activation, facts, record_property) -> external.Evidence | None:
    """Record the seed script in one activation; None when the chain is there, else what was seen."""
    run = perf_runs.perf_run(target, mode, activation, SEED_SCRIPT, python=runner.python, perf=runner.perf,
                            event=runner.event)
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
    target, mode = target_mode
    facts = target_facts(target)
    record_property("external_image", target.image)
    record_property("external_python", target.python)
    record_property("mode", mode)
    record_property("expected", target.expects(mode))
    for name, value in facts.properties().items():
        record_property(name, value)
    reasons = external.blockers(mode, facts)
    caveats = []
    if not reasons:
        runner = runner_for(target)
        for activation in perf_runs.ACTIVATIONS:   # -X first: it decides whether the mode works
            evidence = attempt(runner, target, mode, activation, facts, record_property)
            if evidence is None:
                continue
            diagnosis = external.diagnose(mode, facts, evidence)
            if activation == perf_runs.ACTIVATIONS[0]:
                reasons = diagnosis
                break
            caveats.append(f"not with {activation}: {external.render_reasons(diagnosis)}")
    if not reasons:
        record_property("external_outcome", "works")
        if caveats:
            caveat = "; ".join(caveats)
            record_property("external_caveat", caveat)
            if target.expects(mode) and facts.has_series is False and re.search(r"\bgh-\d+", caveat):
                # a known upstream defect of an interpreter without the series: a finding, not a failure
                record_property("defect_present", ",".join(re.findall(r"gh-\d+", caveat)))
                pytest.xfail(f"present in {facts.version_text}: {mode} works with -X but {caveat}")
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
    pytest.skip(message)

"""What the conformance suite leaves for the report: the JUnit property of a skip that matrix.yaml explains, and
the names of the `perf script` files it keeps under results/<cell>/.  The suite (conformance/) writes them, the
report (cpython_perf.report) reads them; both take them from here."""

from __future__ import annotations

# The property a conformance test records when it skips a check that does not apply to the cell
# (conformance/conftest.py not_applicable); its value is the fact the report checks against matrix.yaml.
SKIP_EXPECTED = "skip_expected"
SEED_PERF_SCRIPT = "seed.perf-script.txt"   # default `perf script` output of the seed run, per cell
SEED_RUN_SCRIPTS = "seed-*.perf-script.txt"   # every seed recording's `perf script` output, per cell


def seed_perf_script_name(mode: str, activation: str) -> str:
    """results/<cell>/<this>: the `perf script` output of one seed recording (conformance/test_seed_chain.py)."""
    return f"seed-{mode}-{activation}.perf-script.txt"

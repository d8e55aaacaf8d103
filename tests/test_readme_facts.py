"""The numbers the README and docs/ give about a CI run are the plan's and the buildbot master's (no Docker).

They are written out for readers, so they go stale when matrix.yaml changes: this test computes them
(cpython_perf.ci.plan.build_plan, cpython_perf.ci.buildbot_config.builder_specs) and fails, naming the
sentence to update, when a page says otherwise.  Also: every page the README links to exists.
"""

from __future__ import annotations

import re

import pytest

from cpython_perf.source import sources
from cpython_perf.ci import buildbot_config, plan
from cpython_perf.matrix import PROJECT_ROOT, load_matrix

README = PROJECT_ROOT / "README.md"
CI_DOC = PROJECT_ROOT / "docs" / "ci.md"
BUILDBOT_DOC = PROJECT_ROOT / "docs" / "buildbot.md"


@pytest.fixture(scope="module")
def counts():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(sources.DEBIAN_ARCHIVE_ENV, "http://archive.invalid/debian")   # names no real archive
        matrix = load_matrix()
        return {
            "pr": plan.build_plan(matrix, "pull_request")["counts"],
            "full": plan.build_plan(matrix, "schedule")["counts"],
            "full_qemu": plan.build_plan(matrix, "schedule", aarch64="qemu")["counts"],
            "builders": len(buildbot_config.builder_specs(
                matrix, buildbot_config.parse_settings({"workers": [{"name": "w", "arch": "x86_64", "password": "x"}]}))),
        }


def _flat(path) -> str:
    return re.sub(r"\s+", " ", path.read_text())


def _number(text: str, pattern: str, where) -> int:
    m = re.search(pattern, text)
    assert m, f"{where}: no sentence matching {pattern!r}"
    return int(m.group(1))


# Each sentence that states a count of the plan: (document, pattern with the number as group 1, plan, count)
COUNT_SENTENCES = [
    (README, r"A pull request runs the smoke cells: (\d+) jobs", "pr", "jobs"),
    (README, r"The whole matrix is (\d+) jobs", "full", "jobs"),
    (README, r"The whole matrix is \d+ jobs \((\d+) cells", "full", "cells"),
    (README, r"The whole matrix is \d+ jobs \(\d+ cells, (\d+) images\)", "full", "images"),
    (README, r"\(`CPYTHON_PERF_AARCH64=qemu`\) (\d+) jobs", "full_qemu", "jobs"),
    (README, r"\(`CPYTHON_PERF_AARCH64=qemu`\) \d+ jobs \((\d+) images\)", "full_qemu", "images"),
    (CI_DOC, r"Today that is (\d+) jobs for a pull request", "pr", "jobs"),
    (CI_DOC, r"and (\d+) for the whole matrix", "full", "jobs"),
    (CI_DOC, r"for the whole matrix \((\d+) cells", "full", "cells"),
    (CI_DOC, r"for the whole matrix \(\d+ cells, (\d+) images", "full", "images"),
    (CI_DOC, r"`CPYTHON_PERF_AARCH64=qemu` (\d+) jobs", "full_qemu", "jobs"),
    (CI_DOC, r"`CPYTHON_PERF_AARCH64=qemu` \d+ jobs, (\d+) images", "full_qemu", "images"),
    (CI_DOC, r"to the (\d+) images of the plan's whole matrix", "full", "images"),
    (CI_DOC, r"\(\d+ bases, 2 tools images, (\d+) cells\), extrapolated", "full", "cells"),
]


@pytest.mark.parametrize("document, pattern, plan, count", COUNT_SENTENCES,
                         ids=[f"{d.name}:{p}:{c}:{i}" for i, (d, _, p, c) in enumerate(COUNT_SENTENCES)])
def test_job_counts_in_the_docs_are_the_plans(counts, document, pattern, plan, count):
    assert _number(_flat(document), pattern, document) == counts[plan][count]


def test_builder_counts_are_the_masters(counts):
    cells = counts["full"]["cells"]
    assert counts["builders"] == cells + 2   # one per cell, report, matrix
    readme = _flat(README)
    assert _number(readme, r"with (\d+) builders \(one per cell", README) == counts["builders"]
    doc = _flat(BUILDBOT_DOC)
    assert _number(doc, r"\*\*Builders\.\*\* (\d+) for today's matrix", BUILDBOT_DOC) == counts["builders"]
    assert _number(doc, r"one per cell of the plan \((\d+);", BUILDBOT_DOC) == cells


def test_readme_links_lead_somewhere():
    """Relative links of the README and docs/ name files of the tree (docs/profile.md and docs/doctor.md may
    be written by the sessions that add those commands: they are only required to be linked)."""
    pending = {"docs/profile.md", "docs/doctor.md"}
    pages = [README, *sorted((PROJECT_ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if re.match(r"[a-z]+:", target):
                continue
            path = (page.parent / target).resolve()
            if not path.exists() and str(path.relative_to(PROJECT_ROOT)) not in pending:
                broken.append(f"{page.relative_to(PROJECT_ROOT)} -> {target}")
    assert not broken, broken
    text = README.read_text()
    assert "(docs/profile.md)" in text and "(docs/doctor.md)" in text

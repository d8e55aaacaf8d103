"""The CI engines' subcommands of `python -m cpython_perf`: plan, buildbot-local, buildbot-config, ci-budget."""

from __future__ import annotations

from ..matrix import load_matrix
from ..subcommands import Command
from . import budget, buildbot_config, buildbot_local, plan


def _plan(args) -> None:
    plan.run(load_matrix(args.matrix), args)


COMMANDS = (
    Command("plan", "the jobs of a CI run as JSON: images, cells, report (cpython_perf/ci/plan.py)",
            plan.add_arguments, _plan),
    buildbot_local.COMMAND,
    buildbot_config.COMMAND,
    budget.COMMAND,
)

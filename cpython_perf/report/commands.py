"""The report stage's subcommand of `python -m cpython_perf`: report."""

from . import report

COMMANDS = (report.COMMAND,)

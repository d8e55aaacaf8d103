"""The report stage's subcommands of `python -m cpython_perf`: report, docs (the variant tables)."""

from . import report, variant_tables

COMMANDS = (report.COMMAND, variant_tables.COMMAND)

"""The check stage's subcommand of `python -m cpython_perf`: external (any interpreter in any image)."""

from . import external

COMMANDS = (external.COMMAND,)

"""`python -m cpython_perf` is the driver's one command line (no Docker): every subcommand the docs name is
registered and answers --help, every one reports a DriverError through the one handler
(cpython_perf.subcommands.run), and the modules that also run on their own (`python -m cpython_perf.report`,
...) take the same arguments and give the same exit statuses as their subcommand."""

from __future__ import annotations

import argparse
import dataclasses
import re
import subprocess
import sys

import pytest

from cpython_perf import cli, subcommands
from cpython_perf.bench import command as bench_command
from cpython_perf.check import external
from cpython_perf.ci import budget, buildbot_config, buildbot_local
from cpython_perf.errors import DriverError, RuntimeFailure
from cpython_perf.matrix import PROJECT_ROOT
from cpython_perf.record import clean_tmp
from cpython_perf.report import commands as report_commands

NAMES = [c.name for c in cli.COMMANDS]

# a command line each subcommand parses (its run is replaced: nothing is done)
PARSED = {
    "doctor": [], "cells": [], "fetch": ["3.13-fp"], "pin": [], "render": ["3.13-fp"], "build": ["3.13-fp"],
    "push": ["3.13-fp"], "base-image": [], "tools-image": [], "reproducibility": ["3.13-fp"],
    "record": ["--container", "x"], "activate": ["--pid", "1"], "clean-tmp": [],
    "jit-inject": ["-i", "perf.data", "-o", "perf.jit.data"],
    "external": ["image", "--suite", "trixie", "--package", "python3.13"], "report": [], "docs": ["--check"],
    "profile": ["3.13-fp", "--", "script.py"], "check-series": ["3.13-fp"], "series-forms": ["3.13"],
    "deb": ["bookworm-3.11"], "sbom": ["3.13-fp"], "deb-reproducibility": ["bookworm-3.11"], "deb-check": [],
    "lane-keyrings": ["bookworm-3.11"],
    "apt-repo": [], "plan": [], "buildbot-local": ["venv"], "buildbot-config": ["describe", "master"],
    "ci-budget": ["--registry", "127.0.0.1:5000/budget"], "bench": ["summary"],
    "diff": ["before/", "after/"],
}

# module run on its own -> (its command, what its arguments are under `python -m cpython_perf`)
MODULE_FORMS = {
    "cpython_perf.report": (report_commands, ["report"]),
    "cpython_perf.bench": (bench_command, ["bench"]),
    "cpython_perf.check.external": (external, ["external"]),
    "cpython_perf.ci.buildbot_local": (buildbot_local, ["buildbot-local"]),
    "cpython_perf.ci.buildbot_config": (buildbot_config, ["buildbot-config"]),
    "cpython_perf.ci.budget": (budget, ["ci-budget"]),
    "cpython_perf.record.clean_tmp": (clean_tmp, ["clean-tmp"]),
}


def documented_commands() -> set[str]:
    """The subcommands README.md, docs/, noxfile.py and the workflows run: `python -m cpython_perf NAME`, and
    the noxfile's `_driver(session, "NAME", ...)`."""
    names = set()
    pages = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md")),
             *sorted((PROJECT_ROOT / ".github" / "workflows").glob("*.yml"))]
    for page in pages:
        names |= set(re.findall(r"python3? -m cpython_perf\s+([a-z][a-z-]*)", page.read_text()))
    names |= set(re.findall(r'_driver\(session, "([a-z-]+)"', (PROJECT_ROOT / "noxfile.py").read_text()))
    return names


def help_lines(parser: argparse.ArgumentParser, prefix: list[str] = ()) -> list[list[str]]:
    """The command line of every parser and nested subparser: [NAME, SUB, ...]."""
    found = [list(prefix)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += help_lines(sub, [*prefix, name])
    return found


def same_text(text: str, module_prog: str | None = None, prog: str | None = None) -> str:
    """A help or error text with the module's prog written as its subcommand's (prog), and whitespace
    (argparse's wrapping, which follows the prog's length) as single spaces."""
    if module_prog:
        text = text.replace(module_prog, prog)
    return " ".join(text.split())


# --------------------------------------------------------------------------
# registered, documented, --help


def test_every_documented_command_is_registered_and_every_registered_one_documented():
    documented = documented_commands()
    assert len(NAMES) == len(set(NAMES)), "a name registered twice"
    assert documented - set(NAMES) == set(), "documented but not registered"
    assert set(NAMES) - documented == set(), "registered but named nowhere in README.md, docs/ or noxfile.py"


@pytest.mark.parametrize("argv", help_lines(cli.parser()), ids=lambda argv: " ".join(argv) or "top")
def test_help_of_every_command_and_subcommand(argv, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main([*argv, "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert " ".join(out.split()).startswith(" ".join(["usage:", cli.PROG, *argv]))


def test_the_table_of_command_lines_names_every_command():
    assert set(PARSED) == set(NAMES)


# --------------------------------------------------------------------------
# the one error handler


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("error, status", [(DriverError, 2), (RuntimeFailure, 1), (KeyboardInterrupt, 130)])
def test_every_command_reports_its_errors_through_the_one_handler(name, error, status, monkeypatch, capsys):
    def fail(args):
        raise error(f"{name}: {error.__name__}")

    commands = tuple(dataclasses.replace(c, run=fail) if c.name == name else c for c in cli.COMMANDS)
    monkeypatch.setattr(cli, "COMMANDS", commands)
    assert cli.main([name, *PARSED[name]]) == status
    said = capsys.readouterr().err
    assert said == ("" if error is KeyboardInterrupt else f"error: {name}: {error.__name__}\n")


def test_a_run_returning_none_exits_0_and_its_own_status_otherwise(monkeypatch):
    commands = tuple(dataclasses.replace(c, run=lambda args, name=c.name: None if name == "cells" else 3)
                     for c in cli.COMMANDS)
    monkeypatch.setattr(cli, "COMMANDS", commands)
    assert cli.main(["cells"]) == 0
    assert cli.main(["report"]) == 3


@pytest.mark.parametrize("module", MODULE_FORMS)
def test_each_module_form_reports_errors_through_the_same_handler(module, monkeypatch, capsys):
    owner, argv = MODULE_FORMS[module]

    def fail(args):
        raise RuntimeFailure(f"{module} failed")

    monkeypatch.setattr(owner, "COMMAND", dataclasses.replace(owner.COMMAND, run=fail))
    assert owner.main(PARSED[argv[0]]) == 1
    assert capsys.readouterr().err == f"error: {module} failed\n"


# --------------------------------------------------------------------------
# the arguments: --matrix, the arguments handed on to pytest


def test_matrix_option_reaches_every_command_and_bench_takes_it_after_the_group_too():
    parse = cli.parser().parse_args
    assert parse(["cells"]).matrix is None
    assert parse(["--matrix", "m.yaml", "bench", "suite"]).matrix == "m.yaml"
    assert parse(["bench", "suite", "--matrix", "m.yaml"]).matrix == "m.yaml"
    assert parse(["bench", "suite"]).matrix is None


def test_only_external_conformance_hands_unknown_arguments_on(capsys):
    args = subcommands.parse(cli.parser(), ["external", "conformance", "--image", "i", "--python", "p", "-k", "seed"])
    assert args.unknown == ["-k", "seed"]
    for argv in (["external", "image", "--suite", "s", "--package", "p", "-k"], ["report", "--nope"]):
        with pytest.raises(SystemExit) as info:
            subcommands.parse(cli.parser(), argv)
        assert info.value.code == 2
        assert "unrecognized arguments" in capsys.readouterr().err


# --------------------------------------------------------------------------
# the modules' own forms, run as a user runs them


def run_python(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120)


# (module, the arguments after it) -> the same under `python -m cpython_perf`
HELP_CASES = [
    ("cpython_perf.report", []), ("cpython_perf.ci.budget", []), ("cpython_perf.record.clean_tmp", []),
    ("cpython_perf.check.external", []), ("cpython_perf.check.external", ["conformance"]),
    ("cpython_perf.check.external", ["image"]), ("cpython_perf.ci.buildbot_local", ["run"]),
    ("cpython_perf.ci.buildbot_config", ["describe"]), ("cpython_perf.bench", ["suite"]),
    ("cpython_perf.bench", ["summary"]),
]


@pytest.mark.parametrize("module, argv", HELP_CASES, ids=lambda v: " ".join(v) if isinstance(v, list) else v)
def test_module_form_takes_the_same_arguments_as_its_subcommand(module, argv):
    command = MODULE_FORMS[module][1]
    alone, together = run_python("-m", module, *argv, "--help"), run_python("-m", "cpython_perf", *command, *argv,
                                                                             "--help")
    assert alone.returncode == together.returncode == 0, alone.stderr + together.stderr
    prog = " ".join([cli.PROG, *command])
    assert same_text(alone.stdout, f"python -m {module}", prog) == same_text(together.stdout)


def test_bench_alone_runs_wallclock_where_no_group_is_named():
    alone, together = run_python("-m", "cpython_perf.bench", "--help"), run_python(
        "-m", "cpython_perf", "bench", "wallclock", "--help")
    assert same_text(alone.stdout, "python -m cpython_perf.bench", "python -m cpython_perf bench") == \
        same_text(together.stdout)
    for argv in (["-m", "cpython_perf.bench", "--cell", "3.13-nope"],
                 ["-m", "cpython_perf", "bench", "wallclock", "--cell", "3.13-nope"]):
        proc = run_python(*argv)
        assert proc.returncode == 2 and proc.stderr.startswith("error: unknown cell '3.13-nope'"), proc.stderr


@pytest.mark.parametrize("module, argv", [("cpython_perf.ci.budget", []), ("cpython_perf.check.external", ["image"]),
                                          ("cpython_perf.report", ["--no-such-option"])])
def test_module_form_refuses_a_bad_command_line_as_its_subcommand_does(module, argv):
    """The same exit status and error (an unknown argument is named in the usage of the whole command line)."""
    command = MODULE_FORMS[module][1]
    alone, together = run_python("-m", module, *argv), run_python("-m", "cpython_perf", *command, *argv)
    assert alone.returncode == together.returncode == 2
    assert alone.stderr.split("error: ")[1] == together.stderr.split("error: ")[1]


def test_clean_tmp_alone_needs_the_standard_library_only(tmp_path):
    """A container's own Python runs it: no site-packages (-S), so no yaml, jinja2 or docker."""
    proc = run_python("-S", "-E", "-s", "-m", "cpython_perf.record.clean_tmp", "--dir", str(tmp_path), "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "0 of 0 files would be removed" in proc.stdout

"""What the image of a cell must be: its interpreter, its flags, its perf."""

from __future__ import annotations

import json
import re

PROBE = r"""
import json, platform, shutil, sys, sysconfig
keys = ["PY_HAVE_PERF_TRAMPOLINE", "CFLAGS", "PY_CFLAGS", "CONFIG_ARGS"]
print(json.dumps({"version": sys.version.split()[0], "executable": shutil.which("python3"),
                  "machine": platform.machine(),
                  **{k: sysconfig.get_config_var(k) for k in keys}}))
"""


def probe(runner):
    result = runner.run(["python3", "-c", PROBE], perf=False)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_interpreter_is_the_cells(cell, runner_for):
    info = probe(runner_for(cell, perf=False))
    assert info["version"] == cell.recipe.version
    assert info["executable"] == "/opt/cpython/bin/python3"
    assert info["machine"] == cell.arch, f"the interpreter runs as {info['machine']}, the cell is {cell.arch}"


def test_perf_trampoline_configured(cell, runner_for):
    """PY_HAVE_PERF_TRAMPOLINE = 1 exactly where the cell claims a perf mode."""
    info = probe(runner_for(cell, perf=False))
    if cell.modes:
        assert info["PY_HAVE_PERF_TRAMPOLINE"] == 1, f"sysconfig says {info['PY_HAVE_PERF_TRAMPOLINE']!r}"
    else:
        assert info["PY_HAVE_PERF_TRAMPOLINE"] in (None, 0), "a cell that claims no mode has the trampoline"


def test_variant_flags(cell, runner_for):
    info = probe(runner_for(cell, perf=False))
    cflags = f"{info['CFLAGS']} {info['PY_CFLAGS']}"
    for flag in cell.variant.cflags.split():
        assert flag in cflags.split(), f"{flag} missing from sysconfig CFLAGS: {cflags}"
    if "-fno-omit-frame-pointer" not in cell.variant.cflags:
        for option in cell.variant.configure_args(cell.version):
            assert option in info["CONFIG_ARGS"], f"{option} missing from CONFIG_ARGS {info['CONFIG_ARGS']}"
        if not cell.variant.configure_args(cell.version) and cell.version in ("3.9", "3.10", "3.11", "3.12", "3.13"):
            assert "-fno-omit-frame-pointer" not in cflags.split(), "frame pointers on in a no-frame-pointer variant"


def test_perf_is_new_enough(cell, runner_for):
    """perf inject --jit needs perf >= 6.8 (the howto's note)."""
    result = runner_for(cell, perf=False).run(["perf", "version"], perf=False)
    m = re.search(r"perf version (\d+)\.(\d+)", result.stdout)
    assert m, result.stdout + result.stderr
    assert (int(m.group(1)), int(m.group(2))) >= (6, 8), result.stdout

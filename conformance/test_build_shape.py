"""What the image of a cell must be: its interpreter, its flags, its perf."""

from __future__ import annotations

import json
import re

import pytest

PROBE = r"""
import json, platform, shutil, sys, sysconfig
keys = ["PY_HAVE_PERF_TRAMPOLINE", "CFLAGS", "PY_CFLAGS", "CONFIG_ARGS", "MULTIARCH"]
print(json.dumps({"version": sys.version.split()[0], "executable": shutil.which("python3"),
                  "machine": platform.machine(), "multiarch": getattr(sys.implementation, "_multiarch", None),
                  "pointer_bits": 8 * __import__("struct").calcsize("P"),
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
    machine = cell.arch_facts.machine   # uname -m: i686 for i386 (its images run under setarch i686)
    assert info["machine"] == machine, f"the interpreter runs as {info['machine']}, the cell is {cell.arch} ({machine})"


def test_platform_triplet(cell, runner_for):
    """CPython's PLATFORM_TRIPLET (sys.implementation._multiarch, sysconfig MULTIARCH) names the cell's arch:
    i386-linux-gnu for i386, whose build must not have taken the 64-bit kernel's uname for its own."""
    info = probe(runner_for(cell, perf=False))
    expected = cell.arch_facts.platform_triplet
    assert info["multiarch"] == expected, f"sys.implementation._multiarch is {info['multiarch']!r}"
    assert info["MULTIARCH"] == expected, f"sysconfig MULTIARCH is {info['MULTIARCH']!r}"
    assert info["pointer_bits"] == cell.arch_facts.pointer_bits, f"{info['pointer_bits']}-bit pointers"


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
    for flag in cell.cflags.split():   # the variant's, then matrix.yaml's arch_cflags
        assert flag in cflags.split(), f"{flag} missing from sysconfig CFLAGS: {cflags}"
    if "-fno-omit-frame-pointer" not in cell.variant.cflags:
        for option in cell.variant.configure_args(cell.version):
            assert option in info["CONFIG_ARGS"], f"{option} missing from CONFIG_ARGS {info['CONFIG_ARGS']}"
        if not cell.variant.configure_args(cell.version) and cell.version in ("3.9", "3.10", "3.11", "3.12", "3.13"):
            assert "-fno-omit-frame-pointer" not in cflags.split(), "frame pointers on in a no-frame-pointer variant"


@pytest.mark.needs_perf
def test_perf_is_new_enough(cell, runner_for):
    """perf inject --jit needs perf >= 6.8 (the howto's note)."""
    result = runner_for(cell, perf=False).run(["perf", "version"], perf=False)
    m = re.search(r"perf version (\d+)\.(\d+)", result.stdout)
    assert m, result.stdout + result.stderr
    assert (int(m.group(1)), int(m.group(2))) >= (6, 8), result.stdout


# --------------------------------------------------------------------------
# Branch protection: the GNU property note of the interpreter (readelf -n)

BINARIES_PROBE = r"""
import json, os, sys, sysconfig
files = [os.path.realpath(sys.executable)]
if sysconfig.get_config_var("Py_ENABLE_SHARED"):
    files.append(os.path.join(sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")))
print(json.dumps(files))
"""
# "Properties: AArch64 feature: BTI, PAC" (on the note's own line with readelf -W)
_AARCH64_FEATURE = re.compile(r"Properties:.*?AArch64 feature: ([^\n]*)$", re.M)


def branch_protection_features(cflags: str) -> set[str]:
    """The AArch64 feature properties (readelf's names) that -mbranch-protection in cflags asks for: the
    last such option counts; "standard" is bti + pac-ret.  PAC only with the A key: the trampoline signs
    with paciasp (Python/asm_trampoline.S), and leaves the B key out, so the link drops PAC there."""
    value = None
    for flag in cflags.split():
        if flag.startswith("-mbranch-protection="):
            value = flag.split("=", 1)[1]
    if value in (None, "none"):
        return set()
    parts = {"bti", "pac-ret"} if value == "standard" else set(value.split("+"))
    features = {"BTI"} if "bti" in parts else set()
    if "pac-ret" in parts and "b-key" not in parts:
        features.add("PAC")
    return features


def aarch64_features(readelf_output: str) -> set[str] | None:
    """The features of readelf -n's "AArch64 feature: BTI, PAC" property line; None without that line."""
    lines = _AARCH64_FEATURE.findall(readelf_output)
    if not lines:
        return None
    assert len(lines) == 1, f"more than one AArch64 feature property: {lines}"
    return {f.strip() for f in lines[0].split(",") if f.strip()}


def test_branch_protection_kept(cell, runner_for, record_property):
    """Built with -mbranch-protection (matrix.yaml arch_cflags: aarch64), the interpreter (and libpython,
    where shared) keeps the BTI and PAC properties, which the linker ANDs over every object: one object
    without them (the trampoline's assembly, if it lacked its note) drops them for the whole binary.
    On a vanilla twin of a native version the released Python/asm_trampoline.S has no aarch64 note:
    there the gap must show (3.13.5: fixed by patches/3.13/0007)."""
    expected = branch_protection_features(cell.cflags)
    if not expected:
        pytest.skip(f"{cell.name} is not built with -mbranch-protection (CFLAGS: {cell.cflags or 'none'})")
    runner = runner_for(cell, perf=False)
    result = runner.run(["python3", "-c", BINARIES_PROBE], perf=False)
    assert result.exit_code == 0, result.stderr
    found = {}
    for path in json.loads(result.stdout):
        out = runner.run(["readelf", "-n", "-W", path], perf=False)
        assert out.exit_code == 0, f"readelf -n {path}: {out.stderr}"
        found[path] = aarch64_features(out.stdout)
        record_property(f"aarch64_feature {path}", ", ".join(sorted(found[path] or ())) or "none")
        print(f"{path}: AArch64 feature: {', '.join(sorted(found[path])) if found[path] else '(no property)'}")
    if cell.vanilla and cell.backends:
        assert any(not expected <= (features or set()) for features in found.values()), (
            f"{cell.name} ({cell.recipe.version} as released) keeps {sorted(expected)} although its "
            f"Python/asm_trampoline.S has no aarch64 property note: {found}")
        return
    for path, features in found.items():
        assert features is not None, f"{path} has no AArch64 feature property (readelf -n): BTI and PAC dropped"
        assert expected <= features, (
            f"{path}: AArch64 feature: {', '.join(sorted(features))}; expected {', '.join(sorted(expected))}")

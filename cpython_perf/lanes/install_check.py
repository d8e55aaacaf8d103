"""The checks of the installed packages: the built .debs and the archive's of the same version each
installed with apt into a clean checking image; in both, `-X perf` activates the trampoline, the frame
pointer is in sysconfig's flags and in _PyEval_EvalFrameDefault's prologue (objdump), and matrix.yaml's
regression_tests run; the built packages' failures are compared with the archive's."""

from __future__ import annotations

import os
import re
import tempfile
import time
from pathlib import Path

from .. import host
from ..check import regrtest
from ..errors import DriverError
from ..matrix import Lane, Matrix
from ..run import containers
from .archive_binaries import archive_dir, download_archive_debs
from .docker_run import docker_run_command, run_captured
from .images import ensure_install_image, install_image_tags
from .run_record import scratch_dir

REGRTEST_TIMEOUT = 1200
TRAMPOLINE_CHECK = "import sys; print(sys.is_stack_trampoline_active())"


def install_packages(lane: Lane) -> list[str]:
    """Binary packages installed into the checking images (the interpreter, its library, headers, Lib/test)."""
    v = lane.version
    return [f"python{v}", f"python{v}-minimal", f"libpython{v}", f"libpython{v}-minimal", f"libpython{v}-stdlib",
            f"python{v}-dev", f"libpython{v}-dev", f"libpython{v}-testsuite"]


FP_CHECK = r"""
set -e
py=$1
$py -c 'import sysconfig; [print(k, sysconfig.get_config_var(k)) for k in ("CFLAGS", "PY_CORE_CFLAGS", "CONFIG_ARGS")]'
for f in $py $($py -c 'import sysconfig as s, os; print(" ".join({os.path.join(d, s.get_config_var("INSTSONAME")) for d in (s.get_config_var("LIBDIR"), "/usr/lib/" + (s.get_config_var("MULTIARCH") or ""))}))'); do
  [ -e "$f" ] || continue
  addr=$(nm -D --defined-only "$f" | awk '$3 == "_PyEval_EvalFrameDefault" {print $1}')
  [ -n "$addr" ] || { echo "PROLOGUE $f none"; continue; }
  start=$((0x$addr)); echo "PROLOGUE $f $addr"
  objdump -d --no-show-raw-insn --start-address=$start --stop-address=$((start + 48)) "$f" | sed -n '/>:$/,$p'
done
"""


def frame_pointer_prologues(text: str) -> dict[str, bool]:
    """{file: whether _PyEval_EvalFrameDefault sets up %rbp as frame pointer} from FP_CHECK's output."""
    result: dict[str, bool] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("PROLOGUE "):
            _, path, addr = line.split(None, 2)
            current = path if addr != "none" else None
            if current:
                result[current] = False
            continue
        if current and re.search(r"\bmov\s+%rsp,%rbp\b", line):
            result[current] = True
    return result


def sysconfig_cflags(text: str, var: str = "CFLAGS") -> str:
    """A sysconfig variable from FP_CHECK's output (Debian's 3.13 keeps the build's flags in PY_CORE_CFLAGS
    only: its CFLAGS, which extensions inherit, are scrubbed)."""
    for line in text.splitlines():
        if line.startswith(var + " "):
            return line[len(var) + 1:]
    return ""


def regrtest_argv(python: str, tests: list[str], junit: str, jobs: int = 2) -> list[str]:
    return [python, "-m", "test", f"-j{jobs}", f"--timeout={REGRTEST_TIMEOUT}", "--junit-xml", junit, *tests]


def shipped_tests_argv(python: str, tests: list[str]) -> list[str]:
    code = ("import os, sys, test\nbase = os.path.dirname(test.__file__)\nfor name in sys.argv[1:]:\n"
            "    p = os.path.join(base, name)\n    if os.path.isfile(p + '.py') or os.path.isdir(p):\n"
            "        print(name)\n")
    return [python, "-c", code, *tests]


def install_and_check(record, matrix: Matrix, out: Path, built: dict, entries: dict[str, dict]) -> None:
    """The install-images and checks phases of a run (record: run_record.RunRecord); DriverError naming
    every problem the built packages have."""
    lane, options = record.lane, record.options
    wanted = install_packages(lane)
    archive = archive_dir(record.paths.cache, lane)
    pick = lambda d, names: [d / n for n in names if n.split("_", 1)[0] in wanted]  # noqa: E731
    built_debs = pick(out, built["debs"])
    if not archive.is_dir():
        download_archive_debs(lane, record.summary["build_image"], archive, wanted, record.log)
    archive_debs = pick(archive, sorted(p.name for p in archive.glob("*.deb")))
    for what, debs in (("built", built_debs), ("archive", archive_debs)):
        missing = set(wanted) - {p.name.split("_", 1)[0] for p in debs}
        if missing:
            raise DriverError(f"{lane.name}: no {what} .deb of {', '.join(sorted(missing))}")
    tags = install_image_tags(lane, options)
    with record.phase("install-images"):
        for what, debs in (("built", built_debs), ("archive", archive_debs)):
            ensure_install_image(record, tags[what], debs, entries)
    record.summary["images"] = tags
    with record.phase("checks"):
        requested = list(matrix.regression_tests)
        shipped = {what: run_captured(docker_run_command(tag, shipped_tests_argv(lane.python, requested)))
                   .stdout.split() for what, tag in tags.items()}
        selection = regrtest.select_tests(requested, shipped["built"], shipped["archive"])
        record.log(f"{lane.name}: regrtest: {selection.describe(tags['built'], tags['archive'])}")
        results = {"built": check_image(record, tags["built"], selection.patched_tests),
                   "archive": check_image(record, tags["archive"], selection.vanilla_tests)}
    record.summary["checks"] = {what: {k: v for k, v in r.items() if k != "regrtest_result"}
                                for what, r in results.items()}
    comparison = regrtest.Comparison(results["built"]["regrtest_result"], results["archive"]["regrtest_result"],
                                     added=selection.added)
    record.summary["regrtest"] = {"summary": comparison.summary(), "new_failures": comparison.new_failures,
                                  "compared": list(selection.compared), "added": list(selection.added),
                                  "not_shipped": list(selection.not_shipped), "dropped": list(selection.dropped),
                                  "added_not_run": comparison.added_not_run}
    record.log(f"{lane.name}: regrtest {comparison.summary()}")
    problems = []
    if options.with_series and results["built"]["trampoline_active"] is not True:
        problems.append(f"`{lane.python} -X perf` did not activate the trampoline")
    if not options.release_grade and not all(results["built"]["frame_pointer"].values() or [False]):
        problems.append(f"_PyEval_EvalFrameDefault has no frame pointer: {results['built']['frame_pointer']}")
    if comparison.new_failures:
        problems.append(f"regrtest failures the archive's packages do not have: {comparison.new_failures}")
    if comparison.added_not_run:
        problems.append(f"tests the series adds ran no test case: {comparison.added_not_run}")
    if selection.dropped:
        problems.append(f"tests the archive's packages ship and the built ones do not: {list(selection.dropped)}")
    record.summary["problems"] = problems
    record.save()
    if problems:
        raise DriverError(f"{lane.name}: " + "; ".join(problems))


def check_image(record, tag: str, tests: list[str]) -> dict:
    """The checks in one checking image: the trampoline, the frame pointer, the regression tests."""
    py = record.lane.python
    results = record.paths.results
    result: dict = {"image": tag}
    proc = run_captured(docker_run_command(tag, [py, "-X", "perf", "-c", TRAMPOLINE_CHECK]))
    said = (proc.stdout + proc.stderr).strip()
    result["trampoline_output"] = said[-500:]
    result["trampoline_active"] = proc.stdout.strip() == "True"
    proc = run_captured(docker_run_command(tag, ["sh", "-c", FP_CHECK, "fp-check", py]))
    with open(results / "checks.log", "a") as f:
        f.write(f"### {tag}: frame pointer\n{proc.stdout}{proc.stderr}\n")
    result["sysconfig_cflags"] = sysconfig_cflags(proc.stdout)
    result["sysconfig_core_cflags"] = sysconfig_cflags(proc.stdout, "PY_CORE_CFLAGS")
    result["frame_pointer"] = frame_pointer_prologues(proc.stdout)
    result["regrtest_tests"] = tests
    cap = []
    try:
        cap = [containers.perf_capability(host.docker_client(record.log), tag)]
    except Exception as exc:   # perf not permitted: test_perf_profiler skips itself
        record.log(f"{tag}: perf not permitted ({str(exc).splitlines()[0]}); test_perf_profiler will skip")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="cpython-perf-regrtest-", dir=scratch_dir()) as tmp:
        os.chmod(tmp, 0o1777)
        proc = run_captured(docker_run_command(tag, regrtest_argv(py, tests, "/out/junit.xml"),
                                               mounts={Path(tmp): "/out"}, cap_add=cap, workdir="/tmp"),
                            timeout=4 * REGRTEST_TIMEOUT)
        junit = Path(tmp, "junit.xml").read_text() if Path(tmp, "junit.xml").exists() else ""
    name = tag.split(":", 1)[1]
    (results / f"regrtest-{name}.txt").write_text(proc.stdout + proc.stderr)
    (results / f"regrtest-{name}-junit.xml").write_text(junit)
    parsed = regrtest.parse_run(junit, proc.stdout + proc.stderr)
    result["regrtest_seconds"] = round(time.monotonic() - started, 1)
    result["regrtest_exit"] = proc.returncode
    result["regrtest"] = {"cases": parsed.cases, "failures": sorted(parsed.failures()),
                          "skipped": parsed.skipped_cases}
    result["regrtest_result"] = parsed
    return result

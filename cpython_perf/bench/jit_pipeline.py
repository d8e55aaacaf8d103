"""perf_jit pipeline: what recording, injecting and reading a -X perf_jit profile costs against the number of code objects.

`python -m cpython_perf bench jit-pipeline --cell 3.13-fp [--counts 2000,20000,100000] [--cap-seconds 300]`
(`nox -s bench-jit-pipeline -- ...`): for each N of --counts, in a fresh container of the cell's image (with
the perf capability, cpython_perf.run.containers), benchmarks/many_functions.py N (N functions, each made by
exec, so the jitdump has about 2N code loads) is

- recorded under -X perf_jit as the profile command records it (perf_runs.record_options at -F 999: -g -k 1
  --call-graph dwarf[,SIZE] -m <the ring buffer the memlock limit allows>), then read two ways from that one
  perf.data:
    new   the project's injector (cpython_perf/record/jit_inject.py, run by the cell's python3 as one
          stdlib-only file: one ELF per trampoline arena), then `perf script`;
    perf  `perf inject --jit` (one jitted-PID-N.so per code load), then `perf script`;
- recorded again under -X perf (frame pointers, the perf map) and read by `perf script`: the reference.

Each step is timed in the container (wall seconds) and stopped at --cap-seconds: a stopped step is recorded as
such (status "capped", no seconds), never as a figure that looks finished, and the step after it is not run.
Per N the results hold the code loads of the jitdump (and how many distinct addresses they had: the series
reuses freed code objects' trampoline slots), the samples with a `py::` frame in each path's `perf script`,
and, where both paths finished, whether each sample (matched by pid, tid and time) has the same py:: chain in
both.  The host's load average is kept before and after each N: the machine may be shared, and the figures are
wall clock.

Target: N=100,000 end to end (record + jit-inject + perf script) under 20 s.

A run takes about 25 minutes on 2 shared CPUs: perf's own path, capped, is most of the measuring, and at
N=100,000 deleting what it leaves (200,000 jitted-*.so beside the dump, and their copies in the container's
perf build-id cache, ~/.debug) takes the engine and this process minutes more after the last step.

Writes results/bench/jit-pipeline-<UTC time>.json; BENCHMARKS.md shows the newest such file in its first section
(cpython_perf.bench.summary), the run's page every step.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
from pathlib import Path

from .. import host
from ..errors import DriverError
from ..image import pipeline
from ..matrix import PROJECT_ROOT, Cell, Matrix
from ..record import jit_inject, perf_runs
from ..record.perf_samples import PERF_SCRIPT_FIELDS, PerfScriptError, parse_perf_script
from ..run import containers
from . import common

GROUP = "jit-pipeline"   # results/bench/jit-pipeline-<UTC time>.json
WORKLOAD = PROJECT_ROOT / "benchmarks" / "many_functions.py"
INJECTOR = Path(jit_inject.__file__)
COUNTS = (2000, 20000, 100000)
CAP_SECONDS = 300
FREQUENCY = 999
TARGET_COUNT, TARGET_SECONDS = 100000, 20.0
PHASES = "phases.txt"   # "<step> <milliseconds> <exit status>" lines, one per step run
RING_BUFFER = "ring-buffer.txt"   # what $(dwarf_mmap) gave perf record's -m in the container

# The steps of one N, in the order they run; each with what it reads and what its perf script output is.
STEPS = ("record_jit", "new_inject", "new_script", "perf_inject", "perf_script", "record_map", "map_script")
OUTPUTS = {"new": "new.txt", "perf": "perf.txt", "map": "map.txt"}   # perf script text of each path
STEP_TITLES = {
    "record_jit": "perf record, -X perf_jit", "new_inject": "jit-inject", "new_script": "perf script (jit-inject's)",
    "perf_inject": "perf inject --jit", "perf_script": "perf script (perf inject's)",
    "record_map": "perf record, -X perf", "map_script": "perf script (-X perf)",
}


# --------------------------------------------------------------------------
# The container's script


def record_options(cell: Cell, mode: str, frequency: int = FREQUENCY) -> list[str]:
    """perf record options of the mode as the conformance suite records (perf_runs.record_options), at frequency."""
    options = perf_runs.record_options(cell, mode)
    options[options.index("-F") + 1] = str(frequency)
    return options


def shell_script(cell: Cell, count: int, cap: int) -> str:
    """The shell script of one N: every step timed and stopped at cap seconds; a step runs only after the one it
    reads finished.  Writes /src/phases.txt, the perf script text of each path and the workload's JSON lines."""
    fields = PERF_SCRIPT_FIELDS
    workload = f"/src/{WORKLOAD.name} {int(count)}"
    jit = " ".join(o if o == "$(dwarf_mmap)" else shlex.quote(o) for o in record_options(cell, "perf_jit"))
    fp = " ".join(shlex.quote(o) for o in record_options(cell, "perf"))
    return "\n".join([
        "set -u",
        "cd /src",
        f": > /src/{PHASES}",
        perf_runs.DWARF_MMAP_FUNCTION,
        f"dwarf_mmap > /src/{RING_BUFFER}",
        # step NAME: run the rest under timeout, append "NAME <ms> <status>"; its status is the command's
        f'step() {{ name=$1; shift; t=$(date +%s%N); timeout -k 10 {int(cap)} "$@"; rc=$?; '
        f'echo "$name $(( ($(date +%s%N) - t) / 1000000 )) $rc" >> /src/{PHASES}; return $rc; }}',
        f"if step record_jit perf record -q {jit} -o /src/perf.data -- python3 -X perf_jit {workload} "
        "> /src/workload-jit.json 2> /src/record_jit.err; then",
        f"  step new_inject python3 -E /src/{INJECTOR.name} -i /src/perf.data -o /src/perf.arena.data "
        "> /dev/null 2> /src/new_inject.err &&",
        f"    step new_script perf script -F {fields} -i /src/perf.arena.data > /src/{OUTPUTS['new']} "
        "2> /src/new_script.err",
        "  step perf_inject perf inject -i /src/perf.data --jit -o /src/perf.jit.data > /dev/null "
        "2> /src/perf_inject.err &&",
        f"    step perf_script perf script -F {fields} -i /src/perf.jit.data > /src/{OUTPUTS['perf']} "
        "2> /src/perf_script.err",
        "fi",
        f"if step record_map perf record -q {fp} -o /src/perf.map.data -- python3 -X perf {workload} "
        "> /src/workload-map.json 2> /src/record_map.err; then",
        f"  step map_script perf script -F {fields} -i /src/perf.map.data > /src/{OUTPUTS['map']} "
        "2> /src/map_script.err",
        "fi",
        "exit 0",
    ]) + "\n"


# --------------------------------------------------------------------------
# Reading what the steps left


def parse_phases(text: str, cap: int) -> dict:
    """Each step of STEPS -> {"status": done | capped | failed | not run, "seconds" (done only), "exit"}.
    A step whose command was still running at the cap (timeout's 124, or 137 after its KILL) is "capped":
    it has no seconds, only the cap it was stopped at."""
    found = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) != 3 or parts[0] not in STEPS:
            continue
        name, ms, rc = parts[0], int(parts[1]), int(parts[2])
        if rc == 0:
            found[name] = {"status": "done", "seconds": round(ms / 1000, 3), "exit": 0}
        elif rc in (124, 137) and ms >= cap * 1000:
            found[name] = {"status": "capped", "seconds": None, "capped_at": cap, "exit": rc}
        else:
            found[name] = {"status": "failed", "seconds": None, "elapsed": round(ms / 1000, 3), "exit": rc}
    return {name: found.get(name, {"status": "not run", "seconds": None}) for name in STEPS}


def script_counts(samples) -> dict:
    """Samples of a perf script text, and those with at least one py:: frame."""
    return {"samples": len(samples), "py_samples": sum(1 for s in samples if s.python_frames())}


def compare_chains(perf_samples, new_samples) -> dict:
    """Per sample (matched by pid, tid, time) whether the py:: chains of the two paths are the same."""
    def keyed(samples):
        out: dict = {}
        for s in samples:
            out.setdefault((s.pid, s.tid, s.time), s.python_frames())
        return out
    old, new = keyed(perf_samples), keyed(new_samples)
    both = old.keys() & new.keys()
    differ = sorted(k for k in both if old[k] != new[k])
    return {"compared": len(both), "agree": len(both) - len(differ), "differ": len(differ),
            "with_py": sum(1 for k in both if old[k] or new[k]),
            "only_perf": len(old.keys() - new.keys()), "only_new": len(new.keys() - old.keys()),
            "examples": [{"time": k[2], "perf": old[k][:12], "new": new[k][:12]} for k in differ[:3]]}


def code_loads(path: Path) -> dict:
    """Code loads of a jitdump, and the distinct addresses they were at."""
    dump = jit_inject.read_jitdump(str(path))
    return {"code_loads": len(dump.loads), "addresses": len({load.addr for load in dump.loads})}


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return ""


def read_run(src: Path, tmp: Path, cap: int) -> dict:
    """One N's results from its directories (the container's /src and /tmp)."""
    steps = parse_phases((src / PHASES).read_text() if (src / PHASES).exists() else "", cap)
    for name, step in steps.items():
        if step["status"] == "failed":
            step["stderr"] = _tail(src / f"{name}.err")
    out: dict = {"steps": steps, "scripts": {}}
    for label in ("jit", "map"):
        try:
            out[f"workload_{label}"] = json.loads((src / f"workload-{label}.json").read_text().strip().splitlines()[-1])
        except (OSError, ValueError, IndexError):
            out[f"workload_{label}"] = None
    dumps = sorted(tmp.glob("jit-*.dump"))
    pid = (out["workload_jit"] or {}).get("pid")
    dump = tmp / f"jit-{pid}.dump" if pid else (dumps[0] if dumps else None)
    out["jitdump"] = code_loads(dump) if dump is not None and dump.exists() else None
    out["jit_inject"] = _tail(src / "new_inject.err", 3)
    out["ring_buffer"] = _tail(src / RING_BUFFER, 1) or None
    samples = {}
    for path, step in (("new", "new_script"), ("perf", "perf_script"), ("map", "map_script")):
        if steps[step]["status"] != "done":
            continue
        try:
            samples[path] = parse_perf_script((src / OUTPUTS[path]).read_text(errors="replace"))
        except (OSError, PerfScriptError) as exc:
            out["scripts"][path] = {"error": str(exc)[:300]}
            continue
        out["scripts"][path] = script_counts(samples[path])
    out["agreement"] = compare_chains(samples["perf"], samples["new"]) if {"perf", "new"} <= samples.keys() else None
    return out


# --------------------------------------------------------------------------
# Running


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def measure(matrix: Matrix, cell: Cell, counts, cap: int, log=print) -> dict:
    """Every N of counts in a fresh container of the cell's image; the results as a dict."""
    if cell.foreign:
        raise DriverError(f"{cell.name}: the jit pipeline is timed with perf in a container on this host")
    if not {"perf", "perf_jit"} <= set(cell.backends):
        raise DriverError(f"{cell.name}'s interpreter does not offer both -X perf and -X perf_jit (it offers: "
                          f"{', '.join(cell.backends) or 'none'})")
    client = host.docker_client(log)
    image = pipeline.ensure_cell_image(cell, matrix, log)
    cap_name = containers.perf_capability(client, image)
    out = {"created": common.utc_stamp(), "machine": common.machine_info(), "cell": cell.name,
           "cells": {cell.name: {"python": cell.recipe.version, "support": cell.support, "image": image}},
           "settings": {"counts": list(counts), "cap_seconds": cap, "frequency": FREQUENCY,
                        "record_jit": " ".join(record_options(cell, "perf_jit")),
                        "record_map": " ".join(record_options(cell, "perf")),
                        "script_fields": PERF_SCRIPT_FIELDS, "workload": f"benchmarks/{WORKLOAD.name} N"},
           "target": {"count": TARGET_COUNT, "seconds": TARGET_SECONDS}, "runs": {}}
    root = Path(tempfile.mkdtemp(prefix="cpython-perf-jit-pipeline-"))
    try:
        for count in counts:
            work = containers.make_workdir(root / f"n{count}")
            shutil.copy(WORKLOAD, work / "src" / WORKLOAD.name)
            shutil.copy(INJECTOR, work / "src" / INJECTOR.name)
            log(f"{cell.name}: N={count:,} (steps capped at {cap} s)")
            before = _loadavg()
            result = containers.run(client, image, shell_script(cell, count, cap),
                                    mounts={work / "src": "/src", work / "tmp": "/tmp"}, cap_add=[cap_name],
                                    timeout=len(STEPS) * (cap + 15) + 120)
            result.check(f"the jit pipeline of N={count}")
            run = read_run(work / "src", work / "tmp", cap)
            run["load_before"], run["load_after"] = before, _loadavg()
            out["runs"][str(count)] = run
            log(f"{cell.name}: N={count:,}: " + ", ".join(f"{k} {_step(v)}" for k, v in run["steps"].items()))
            shutil.rmtree(work, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out


# --------------------------------------------------------------------------
# Analysis


def _seconds(value: float) -> str:
    if value < 10:
        return f"{value:.2f}"
    if value < 100:
        return f"{value:.1f}"
    return f"{value:.0f}"


def _step(step: dict) -> str:
    if step["status"] == "done":
        return f"{_seconds(step['seconds'])} s"
    if step["status"] == "capped":
        return f"stopped at the {step['capped_at']} s cap"
    if step["status"] == "failed":
        return f"failed (exit {step['exit']})"
    return "not run"


def pair(first: dict, second: dict, names=("inject", "script")) -> tuple[float | None, str]:
    """(total seconds where both finished, the cell's text) of a two-step path."""
    if first["status"] == "done" and second["status"] == "done":
        total = first["seconds"] + second["seconds"]
        return total, f"{_seconds(first['seconds'])} + {_seconds(second['seconds'])} = {_seconds(total)} s"
    if first["status"] != "done":
        return None, f"{names[0]} {_step(first)}"
    if second["status"] == "capped":
        floor = first["seconds"] + second["capped_at"]
        return None, f"{_seconds(first['seconds'])} s + {names[1]} {_step(second)} (> {_seconds(floor)} s)"
    return None, f"{_seconds(first['seconds'])} s + {names[1]} {_step(second)}"


def analyse_run(run: dict) -> dict:
    """One N's figures as the tables show them: seconds (None where a step did not finish) and texts."""
    steps = run["steps"]
    record = steps["record_jit"]
    perf_total, perf_text = pair(steps["perf_inject"], steps["perf_script"])
    new_total, new_text = pair(steps["new_inject"], steps["new_script"])
    end = record["seconds"] + new_total if record["status"] == "done" and new_total is not None else None
    agreement = run.get("agreement")
    if agreement is not None:
        agree = f"{agreement['agree']:,} of {agreement['compared']:,}"
        if agreement["differ"]:
            agree += f" ({agreement['differ']:,} differ)"
        unmatched = agreement["only_perf"] + agreement["only_new"]
        if unmatched:
            agree += f"; {unmatched:,} in one path only"
    elif record["status"] != "done":
        agree = "not compared: the recording " + _step(record)
    elif new_total is None:
        agree = "not compared: jit-inject's path did not finish"
    elif perf_total is None:
        capped = steps["perf_inject"]["status"] == "capped" or steps["perf_script"]["status"] == "capped"
        agree = "not compared: perf's path " + ("stopped at the cap" if capped else "did not finish")
    else:
        agree = "not compared: a perf script text could not be read"
    return {"record": record["seconds"], "record_text": _step(record), "perf": perf_total, "perf_text": perf_text,
            "new": new_total, "new_text": new_text, "end_to_end": end,
            "end_to_end_text": f"{_seconds(end)} s" if end is not None else "-",
            "map_script": steps["map_script"]["seconds"], "map_script_text": _step(steps["map_script"]),
            "agree": bool(agreement) and agreement["differ"] == 0 and agreement["compared"] > 0,
            "agree_text": agree, "code_loads": (run.get("jitdump") or {}).get("code_loads")}


def target_verdict(results: dict) -> str:
    """met / not met of the target (N=TARGET_COUNT end to end under TARGET_SECONDS)."""
    target = results.get("target", {"count": TARGET_COUNT, "seconds": TARGET_SECONDS})
    count, limit = target["count"], target["seconds"]
    what = f"N={_count(count)} end to end (record + jit-inject + perf script) < {limit:g} s"
    run = results["runs"].get(str(count))
    if run is None:
        return f"{what}: not measured (no N={count:,} in this run)"
    row = analyse_run(run)
    if row["end_to_end"] is None:
        return f"{what}: not met (the new path did not finish: {row['new_text']})"
    if row["end_to_end"] < limit:
        return f"{what}: met ({_seconds(row['end_to_end'])} s)"
    return f"{what}: not met ({_seconds(row['end_to_end'])} s)"


def _count(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else f"{n:,}"


TABLE_TITLE = "perf_jit pipeline: seconds against code objects"


def summary_lines(results: dict, link: str | None, heading: str = "###") -> list[str]:
    """BENCHMARKS.md's table of the newest run (link: its page, from BENCHMARKS.md; None: on that page)."""
    s = results["settings"]
    run = f"{results['cell']}, {results['created']}"
    lines = [f"{heading} {TABLE_TITLE}", "",
             f"{f'[{run}]({link})' if link else run} (`python -m cpython_perf bench jit-pipeline`): "
             f"`benchmarks/many_functions.py N` (N functions, each made by exec) recorded under `-X perf_jit` "
             f"(`perf record {s['record_jit']}`), then read by perf's own path (`perf inject --jit`, one ELF per "
             "code object, then `perf script`) and by the project's (`jit-inject`, "
             "cpython_perf/record/jit_inject.py: one ELF per trampoline arena, then `perf script`); and under "
             "`-X perf` (the perf map) read by `perf script`, the reference. Wall seconds per step in a fresh "
             f"container of the cell's image, each step stopped at {s['cap_seconds']} s (the machine may be shared: "
             "see the run's page for its load). **end to end (new)**: record + jit-inject + perf script. "
             "**samples agree**: samples (matched by pid, tid and time) whose py:: chain is the same in both paths, "
             "where both finished.", "",
             "| N (code loads) | record | perf inject --jit + script | jit-inject + script | end to end (new) | "
             "-X perf script | samples agree |",
             "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
    for count in s["counts"]:
        run = results["runs"].get(str(count))
        if run is None:
            lines.append(f"| {_count(count)} | not run | - | - | - | - | - |")
            continue
        row = analyse_run(run)
        loads = f" ({row['code_loads']:,})" if row["code_loads"] is not None else ""
        lines.append(f"| {_count(count)}{loads} | {row['record_text']} | {row['perf_text']} | {row['new_text']} | "
                     f"**{row['end_to_end_text']}** | {row['map_script_text']} | {row['agree_text']} |")
    return lines + ["", f"Target: {target_verdict(results)}.", ""]


def render_markdown(results: dict, source: str = "") -> str:
    """A run's page: the table of BENCHMARKS.md, then every step, the samples of each path, the machine."""
    s, m = results["settings"], results.get("machine") or {}
    lines = [f"## {TABLE_TITLE}", "",
             f"From {source or 'a jit-pipeline run'} ({results['created']}; cell {results['cell']}; "
             "`python -m cpython_perf bench jit-pipeline`).", ""]
    lines += summary_lines(results, None)[2:]
    lines += ["### Each step", "",
              "Wall seconds in the container (`timeout -k 10 CAP`; a step stopped at the cap has no figure, and the "
              "step reading its output did not run).", "",
              "| N | " + " | ".join(STEP_TITLES[k] for k in STEPS) + " |",
              "| --- |" + " ---: |" * len(STEPS)]
    for count in s["counts"]:
        run = results["runs"].get(str(count))
        if run is not None:
            lines.append(f"| {count:,} | " + " | ".join(_step(run["steps"][k]) for k in STEPS) + " |")
    lines += ["", "### Code loads and samples", "",
              "Code loads of the jitdump (distinct addresses: the series gives a freed code object's trampoline slot "
              "to the next new one); samples of each path's `perf script`, and those with a py:: frame; the host's "
              "load average (1, 5, 15 min) before and after the N.", "",
              "| N | functions | code loads (addresses) | jit-inject: samples (py::) | perf inject: samples (py::) | "
              "-X perf: samples (py::) | load before | load after |",
              "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"]

    def samples(run, path):
        got = run["scripts"].get(path)
        if got is None:
            return "-"
        if "error" in got:
            return f"unreadable: {got['error']}"
        return f"{got['samples']:,} ({got['py_samples']:,})"
    for count in s["counts"]:
        run = results["runs"].get(str(count))
        if run is None:
            continue
        dump = run.get("jitdump")
        loads = f"{dump['code_loads']:,} ({dump['addresses']:,})" if dump else "-"
        functions = (run.get("workload_jit") or {}).get("functions")
        lines.append(f"| {count:,} | {f'{functions:,}' if functions is not None else '-'} | {loads} | {samples(run, 'new')} | "
                     f"{samples(run, 'perf')} | {samples(run, 'map')} | "
                     f"{', '.join(map(str, run.get('load_before', [])))} | {', '.join(map(str, run.get('load_after', [])))} |")
    differ = [(count, results["runs"][str(count)]["agreement"]) for count in s["counts"]
              if str(count) in results["runs"] and (results["runs"][str(count)].get("agreement") or {}).get("differ")]
    for count, agreement in differ:
        lines += ["", f"N={count:,}: samples whose py:: chains differ (first {len(agreement['examples'])}):", ""]
        lines += [f"- {e['time']}: perf inject: {' <- '.join(e['perf']) or '(none)'}; jit-inject: "
                  f"{' <- '.join(e['new']) or '(none)'}" for e in agreement["examples"]]
    failed = [(count, name, step) for count in s["counts"] if str(count) in results["runs"]
              for name, step in results["runs"][str(count)]["steps"].items() if step["status"] == "failed"]
    if failed:
        lines += ["", "### Failures", ""]
        lines += [f"- N={count:,}, {STEP_TITLES[name]} (exit {step['exit']}): "
                  f"{(step.get('stderr') or 'no output').splitlines()[-1] if step.get('stderr') else 'no output'}"
                  for count, name, step in failed]
    injected = [(count, results["runs"][str(count)].get("jit_inject")) for count in s["counts"]
                if str(count) in results["runs"]]
    lines += ["", "### Settings", "",
              f"- Machine: {m.get('cpu', 'unknown CPU')} ({m.get('arch', '?')}), {m.get('nproc', '?')} CPUs, "
              f"kernel {m.get('kernel', '?')}",
              f"- Recording, -X perf_jit: `perf record {s['record_jit']} -o perf.data -- python3 -X perf_jit "
              f"{s['workload']}`",
              f"- Recording, -X perf: `perf record {s['record_map']} -o perf.map.data -- python3 -X perf {s['workload']}`",
              f"- `perf script -F {s['script_fields']}`; each step capped at {s['cap_seconds']} s",
              *[f"- N={count:,}: perf record -m (the ring buffer a CPU, from the memlock limit): "
                f"{results['runs'][str(count)]['ring_buffer']}" for count in s["counts"]
                if (results["runs"].get(str(count)) or {}).get("ring_buffer")],
              *[f"- N={count:,}, jit-inject said: `{said.splitlines()[-1]}`" for count, said in injected if said]]
    return "\n".join(lines) + "\n"


def latest_results(directory: Path = common.RESULTS_DIR) -> Path | None:
    return common.latest_group_results(directory, GROUP)


# The group's command line (cpython_perf.bench.command): `python -m cpython_perf bench jit-pipeline ...`


def _counts(text: str) -> list[int]:
    try:
        counts = [int(n) for n in text.split(",") if n.strip()]
    except ValueError:
        raise DriverError(f"--counts takes numbers separated by commas, not {text!r}") from None
    if not counts or any(n < 1 for n in counts):
        raise DriverError(f"--counts takes positive numbers, not {text!r}")
    return counts


def arguments(parser) -> None:
    parser.add_argument("--counts", default=",".join(map(str, COUNTS)),
                        help="numbers of functions, comma-separated (default: %(default)s)")
    parser.add_argument("--cap-seconds", type=int, default=CAP_SECONDS,
                        help="stop any step after this many seconds (default: %(default)s)")


def run(matrix, cells, args, log) -> dict:
    if len(cells) != 1:
        raise DriverError("the jit pipeline runs in one cell: give one --cell")
    if args.cap_seconds < 1:
        raise DriverError("--cap-seconds must be a positive number of seconds")
    return measure(matrix, cells[0], _counts(args.counts), args.cap_seconds, log)


def report(results: dict, path: Path) -> None:
    print(render_markdown(results, str(path)))

"""BENCHMARKS.md: the summary table (each figure beside its published anchor and our target), then every group's
latest results (`python -m cpython_perf bench summary`; every group's run refreshes it)."""

from __future__ import annotations

from pathlib import Path

from ..errors import DriverError
from . import build_cost, common, fidelity, instructions, suite, wallclock
from .common import KEPT_WORKLOADS, MODE_COST_LIMITS, NATIVE_REFERENCE, RESULTS_DIR, SUMMARY, VANILLA_LIMIT, VARIANT_LIMIT, load_results, relative

SECTION_GROUPS = (wallclock, instructions, fidelity, build_cost)   # after the standard suite's sections
ARCHIVE_NAME = "BENCHMARKS-archive.md"   # beside BENCHMARKS.md: the standard suite's superseded runs

# What the field has published, per kind of comparison: a short label for the table, the figure with its metric,
# and where it is written.
SHORT = {
    "variant": "PEP 831: +1.5 to +1.9% (x86-64), wall clock",
    "mode": "gh-109587: 1.5% CPU in production; no pyperformance figure",
    "vanilla": "none published",
}
ANCHORS = {
    "variant": ("PEP 831 (Performance): frame pointers cost +1.5%, +1.8%, +1.9% geometric mean on its three x86-64 "
                "machines (0.1-2.3% over all eight, 2.3% on Graviton), wall clock, about 80 pyperformance "
                "benchmarks, 3.15-dev; and +5.5% instructions (+3.3% time) on a C-call-heavy loop",
                "https://peps.python.org/pep-0831/#performance"),
    "mode": ("upstream publishes no pyperformance figure for `-X perf` (the howto, Doc/howto/perf_profiling.rst, "
             "gives none); gh-109587 reports a 1.5% overall CPU regression on a large production server "
             "(Instagram), mostly from writing the perf map",
             "https://github.com/python/cpython/issues/109587"),
    "vanilla": ("no one publishes the inactive cost of a backport patch: the target is the project's own", ""),
}
TARGETS = {
    "vanilla": f"patched inactive within 1% of vanilla (geometric mean <= {VANILLA_LIMIT})",
    "variant": f"fp within 2% of release (geometric mean <= {VARIANT_LIMIT})",
    "mode": f"a backport's overhead no worse than native {NATIVE_REFERENCE}'s (same variant)",
}
WANTED = [   # the comparisons BENCHMARKS.md must show, by kind: shown as "not run" where no results file has them
    ("vanilla", "patched inactive vs vanilla"),
    ("mode", "-X perf / -X perf_jit active vs inactive"),
    ("variant", "frame pointers: fp vs release"),
]


def _section(group, directory: Path) -> str | None:
    path = group.latest_results(directory)
    if path is None:
        return None
    try:
        return group.render_markdown(load_results(path), relative(path))
    except (KeyError, TypeError) as exc:
        raise DriverError(f"{path}: not a results file of {group.__name__} (no {exc})") from None


def suite_files(directory: Path) -> list[Path]:
    """Every results/bench/suite-<UTC time>.json, newest first."""
    return sorted(Path(directory).glob(f"{suite.GROUP}-*.json"), reverse=True)


def suite_entries(directory: Path) -> tuple[list[tuple[dict, dict, Path]], list[dict]]:
    """(analysed comparisons, with the results and path of the file they come from; comparisons recorded as not
    run and measured by no file).  A comparison's instruction counts come from the newest suite results file that
    counted it, its wall-clock verdicts from the newest that timed it (files may hold either or both)."""
    by_pair: dict[tuple[str, str], list] = {}
    not_run = []
    for path in suite_files(directory):   # newest first
        try:
            results = load_results(path)
            analysed = suite.analyse_suite(results)
        except (KeyError, TypeError) as exc:
            raise DriverError(f"{path}: not a results file of cpython_perf.bench.suite (no {exc})") from None
        for entry in analysed:
            entry["cell_b"] = results["cells"][results["configurations"][entry["b"]]["cell"]]
            entry["label_b"] = results["configurations"][entry["b"]]["label"]
            slot = by_pair.setdefault((entry["a"], entry["b"]), [None, None])
            if entry["workloads"] and slot[0] is None:
                slot[0] = (entry, results, path)
            if entry.get("wallclock") and slot[1] is None:
                slot[1] = entry["wallclock"]
        not_run += [dict(e, source=path) for e in results.get("not_run", [])]
    entries = []
    for (a, b), (counted, wall) in by_pair.items():
        if counted is None:
            continue   # timed only: shown in its file's section, no instruction figure for the table
        entry, results, path = counted
        entry["wallclock"] = wall
        entries.append((entry, results, path))
    _backport_targets([e for e, _, _ in entries])
    seen = {(e["a"], e["b"]) for e, _, _ in entries}
    missing = [e for e in not_run if (e["a"], e["b"]) not in seen]
    unique = list({(e["a"], e["b"]): e for e in missing}.values())
    return entries, unique


def _backport_targets(entries: list[dict]) -> None:
    """A backport's mode comparison measured in another run than native 3.13's: its target from that run."""
    for entry in entries:
        cell = entry["cell_b"]
        if entry["kind"] != "mode" or cell["support"] != "backport" or entry["geomean_limit"] is not None:
            continue
        for other in entries:
            native = other["cell_b"]
            if (other["kind"] == "mode" and other["label_b"] == entry["label_b"] and native["version"] == NATIVE_REFERENCE
                    and native["support"] == "native" and not native["vanilla"]
                    and (native["variant"], native["arch"]) == (cell["variant"], cell["arch"])):
                entry["geomean_limit"] = other["geomean"]
                entry["target"] = (f"-X {entry['label_b']} overhead no worse than native {other['b'].split(':')[0]}'s "
                                   "(measured in another run)")
                break


def _short_anchor(kind: str) -> str:
    url = ANCHORS[kind][1]
    return f"[{SHORT[kind]}]({url})" if url else SHORT[kind]


def _metric_row(entry: dict, results: dict) -> str:
    kind = entry["kind"]
    anchor = _short_anchor(kind)
    if entry["geomean"] is None:
        measured, verdict = "-", "-"
    else:
        measured = f"{entry['geomean']:.4f} ({suite.percent(entry['geomean'])})"
        verdict = suite.instruction_verdict(entry["geomean"], entry["geomean_limit"])
    n = len(entry["workloads"])
    wall = suite.wallclock_summary(entry.get("wallclock"), list(entry["workloads"]) or list(entry.get("wallclock") or {}))
    return (f"| [{entry['title']}](#{suite.anchor(entry, results['created'])}) | instructions, geometric mean of {n} benchmarks | {measured} | "
            f"{wall} | {anchor} | {entry['target'] or TARGETS[kind]} | {verdict} |")


def summary_table(directory: Path) -> list[str]:
    entries, not_run = suite_entries(directory)
    lines = [
        "## Summary",
        "",
        "Each figure of the standard suite (pyperformance's stdlib-only benchmarks) beside what the field has "
        "published and the project's target. **Measured** is an instruction count ratio B/A (cachegrind: "
        "deterministic to about 0.01% between runs, so it resolves 1% targets; it does not see cache or branch effects); "
        "**wall clock** is `pyperf compare_to` on the measuring host (shared, 2 cores: see each run's Machine), given only where pyperf's t-test "
        "calls the difference significant. The published anchors are wall-clock figures on dedicated machines. "
        "Each comparison links its detail below.",
        "",
        "| comparison | metric | measured (B/A) | wall clock (pyperf compare_to) | published anchor | target | verdict |",
        "| --- | --- | ---: | --- | --- | --- | --- |",
    ]
    order = {"vanilla": 0, "mode": 1, "variant": 2}
    for entry, results, _ in sorted(entries, key=lambda e: (order[e[0]["kind"]], e[0]["title"])):
        lines.append(_metric_row(entry, results))
    kinds_seen = {e["kind"] for e, _, _ in entries}
    for entry in not_run:
        lines.append(f"| `{entry['b']}` vs `{entry['a']}` | - | not run | - | {_short_anchor(entry['kind'])} | "
                     f"{TARGETS[entry['kind']]} | not run: {entry['reason']} |")
    for kind, title in WANTED:
        if kind not in kinds_seen and not any(e["kind"] == kind for e in not_run):
            lines.append(f"| {title} | - | not run | - | {_short_anchor(kind)} | {TARGETS[kind]} | not run: no "
                         "standard-suite run measured it |")
    if not entries:
        lines += ["", "No standard-suite run yet (`nox -s bench-suite -- --cell 3.13-fp`)."]
    lines += ["", "Anchors:", ""]
    lines += [f"- {SHORT[kind]}: {text}" + (f" ({url})" if url else "") for kind, (text, url) in ANCHORS.items()]
    lines += ["", "The project's own workloads (`benchmarks/workloads.py`) are kept only where they add what the suite "
              "lacks: " + "; ".join(f"`{name}`: {why}" for name, why in KEPT_WORKLOADS.items()) + ". Their latest "
              "runs are below ([instruction counts](#workloads-instructions), [wall clock](#workloads-wall-clock))."]
    return lines


def _worst(entry: dict) -> tuple[str, float]:
    name, data = max(entry["workloads"].items(), key=lambda item: item[1]["ratio"])
    return name, data["ratio"]


def mode_costs(directory: Path) -> list[dict]:
    """Per patched cell and mode, what the trampoline costs now and what it cost before: the newest standard-suite
    run that counted the mode (`after`), the newest earlier run that counted it on another build of the cell (its
    image differs: `before`), and upstream's figure, the same mode on the cell's vanilla twin where CPython has it
    (native versions).  Each figure: (geometric mean, worst benchmark, its ratio, run time)."""
    runs: dict[tuple[str, str], list[dict]] = {}
    for path in suite_files(directory):   # newest first
        results = load_results(path)
        for entry in suite.analyse_suite(results):
            if entry["kind"] != "mode" or not entry["workloads"]:
                continue
            config = results["configurations"][entry["b"]]
            cell = results["cells"][config["cell"]]
            worst = _worst(entry)
            runs.setdefault((config["cell"], config["label"]), []).append(
                {"cell": cell, "geomean": entry["geomean"], "worst": worst[0], "worst_ratio": worst[1],
                 "created": results["created"], "image_id": cell.get("image_id"), "n": len(entry["workloads"])})
    rows = []
    for (name, mode), found in runs.items():
        after = found[0]
        cell = after["cell"]
        if cell["vanilla"]:
            continue
        before = next((run for run in found[1:] if run["image_id"] != after["image_id"]), None)
        upstream = None
        if cell["support"] == "native":
            upstream = next((runs[key][0] for key in runs if key[1] == mode and runs[key][0]["cell"]["vanilla"]
                             and all(runs[key][0]["cell"][k] == cell[k] for k in ("version", "variant", "arch"))), None)
        rows.append({"cell": name, "mode": mode, "version": cell["version"], "support": cell["support"],
                     "after": after, "before": before, "upstream": upstream,
                     "limits": MODE_COST_LIMITS.get(cell["version"])})
    return sorted(rows, key=lambda r: (-float(r["version"].replace("3.", "")), r["cell"], r["mode"]))


def calls_costs(directory: Path) -> dict[tuple[str, str], dict]:
    """Per (cell, mode), the newest instruction count of the `calls` workload (the project's own; every
    Python-to-Python call goes through the trampoline) with the mode active against inactive:
    {"ratio", "created"}."""
    found: dict[tuple[str, str], dict] = {}
    for path in sorted(Path(directory).glob("instructions-*.json"), reverse=True):   # newest first
        results = load_results(path)
        for entry in common.analyse(results):
            row = entry["workloads"].get("calls")
            if entry["kind"] != "mode" or row is None:
                continue
            config = results["configurations"][entry["b"]]
            found.setdefault((config["cell"], config["label"]),
                             {"ratio": row["ratio"], "created": results["created"]})
    return found


def _cost(run: dict | None) -> str:
    if run is None:
        return "-"
    return f"{run['geomean']:.3f} (worst {run['worst']} {run['worst_ratio']:.2f}x; {run['created'][:10]})"


def cost_table(directory: Path) -> list[str]:
    """BENCHMARKS.md's lead: what the trampoline costs per cell now, before, and in CPython as released."""
    rows = mode_costs(directory)
    if not rows:
        return []
    calls = calls_costs(directory)

    def calls_cost(cell: str, mode: str) -> str:
        found = calls.get((cell, mode))
        return "-" if found is None else f"{found['ratio']:.3f} ({found['created'][:10]})"

    lines = ["## What -X perf costs, per cell: upstream, before, now", "",
             "Instructions executed with the trampoline active divided by inactive (cachegrind, geometric mean of the "
             "standard-suite benchmarks the run measured; the worst single benchmark beside it). **upstream**: the "
             "same mode in the cell's vanilla twin, CPython as released (native versions only: older versions have "
             "no trampoline). **before**: the newest earlier run on another build of the cell. **now**: the newest "
             "run. **calls**: the project's `calls` workload (nothing but Python-to-Python calls, the trampoline's "
             "worst case), the same ratio, newest instruction-count run; CPython as released beside it for native "
             "versions. Targets: " + "; ".join(f"{v}: geometric mean <= {g}, no benchmark above {w}x"
                                              for v, (g, w) in MODE_COST_LIMITS.items()) + ".", "",
             "| cell | mode | upstream | before | now | calls (upstream / now) | target |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        upstream = (_cost(row["upstream"]) if row["support"] == "native"
                    else f"no `-X perf` in CPython {row['version']}")
        target = "-"
        if row["limits"]:
            mean, worst = row["limits"]
            now = row["after"]
            misses = [f"mean {now['geomean']:.3f} > {mean}"] if now["geomean"] > mean else []
            misses += [f"{now['worst']} {now['worst_ratio']:.2f}x > {worst}x"] if now["worst_ratio"] > worst else []
            target = f"<= {mean}, <= {worst}x: " + (f"MISSED ({'; '.join(misses)})" if misses else "met")
        calls_now = calls_cost(row["cell"], row["mode"])
        calls_upstream = (calls_cost(f"{row['cell']}-vanilla", row["mode"]) if row["support"] == "native"
                          else "-")
        lines.append(f"| {row['cell']} | {row['mode']} | {upstream} | {_cost(row['before'])} | "
                     f"**{_cost(row['after'])}** | {calls_upstream} / {calls_now} | {target} |")
    return lines + [""]


def newest_runs(directory: Path) -> tuple[dict[Path, set], dict[Path, set]]:
    """Per standard-suite results file, the comparisons (a, b) it is the newest run of (its instruction counts
    or its wall clock are the ones the summary shows), and those a newer file measured again (the archive's)."""
    current: dict[Path, set] = {}
    superseded: dict[Path, set] = {}
    counted, timed = set(), set()
    for path in suite_files(directory):   # newest first
        for entry in suite.analyse_suite(load_results(path)):
            pair = (entry["a"], entry["b"])
            newest = False
            if entry["workloads"] and pair not in counted:
                counted.add(pair)
                newest = True
            if entry.get("wallclock") and pair not in timed:
                timed.add(pair)
                newest = True
            (current if newest else superseded).setdefault(path, set()).add(pair)
    return current, superseded


def _mode_ratio(entries: list[dict], version: str, label: str = "perf", variant: str = "fp") -> float | None:
    for entry in entries:
        cell = entry["cell_b"]
        if (entry["kind"] == "mode" and entry["label_b"] == label and cell["version"] == version
                and cell["variant"] == variant and not cell["vanilla"] and entry["geomean"] is not None):
            return entry["geomean"]
    return None


def _fast_path_paragraph(directory: Path) -> list[str]:
    """What the 3.13 series' fast-path patch changes, with the figures of the newest runs (3.13-fp, -X perf)."""
    row = next((r for r in mode_costs(directory) if r["cell"] == f"{NATIVE_REFERENCE}-fp" and r["mode"] == "perf"),
               None)
    text = ("The 3.13 series and the 3.11 backport keep those paths ([patches/3.13/README.md](patches/3.13/README.md) "
            "`0021-perf-trampoline-keep-fast-paths.patch`, [patches/3.11/README.md](patches/3.11/README.md) "
            "`0006-perf-trampoline-keep-fast-paths.patch`): when the evaluator is the trampoline's own, the "
            "specialised instructions push the new frame as they would without it and enter it through the "
            "trampoline, so every Python frame still gets its own trampoline frame (the shape catalogue checks it "
            "for each such path), and a plain return builds no `StopIteration`. What remains is one C call per "
            "Python frame, which generators pay most: each resumption along a `yield from` chain is such a call.")
    if row is not None and row["upstream"] is not None:
        up, now = row["upstream"], row["after"]
        text += (f" Measured on {row['cell']} (`-X perf`, geometric mean of {now['n']} benchmarks): CPython as "
                 f"released {up['geomean']:.3f} (worst {up['worst']} {up['worst_ratio']:.2f}x), with the series "
                 f"{now['geomean']:.3f} (worst {now['worst']} {now['worst_ratio']:.2f}x).")
    return [text, ""]


def _pct_fine(ratio: float) -> str:
    return f"{100 * (ratio - 1):+.1f}%"


def _pct(ratio: float) -> str:
    return f"{100 * (ratio - 1):+.0f}%"


def verdict(directory: Path) -> list[str]:
    """What `-X perf` costs a user, and why it costs more on newer versions: the figures from the summary's
    newest runs, the reasons from the series' READMEs and a callgrind profile of 3.13-fp (its figures are quoted)."""
    entries = [e for e, _, _ in suite_entries(directory)[0]]
    if not entries:
        return []
    modes = {v: _mode_ratio(entries, v) for v in ("3.9", "3.11", "3.13")}
    jit = {v: _mode_ratio(entries, v, "perf_jit") for v in ("3.9", "3.11", "3.13")}
    vanilla_entries = [e for e in entries if e["kind"] == "vanilla" and e["geomean"] is not None and e["workloads"]]
    vanilla = [e["geomean"] for e in vanilla_entries]
    variant = [e["geomean"] for e in entries if e["kind"] == "variant" and e["geomean"] is not None]
    lines = ["## What it costs you, and when it is worth it", ""]
    if vanilla:
        worst_entry = max(vanilla_entries, key=lambda e: _worst(e)[1])
        name, ratio = _worst(worst_entry)
        lines.append(f"- **Built in, not turned on: {_pct_fine(max(vanilla))} at most, on average.** A "
                     "patched interpreter with the trampoline inactive executes within "
                     f"{100 * (max(vanilla) - 1):.2f}% of the instructions of the same interpreter as released "
                     f"(geometric mean; the most affected benchmark, {name} on "
                     f"{worst_entry['b'].split(':')[0]}, {_pct_fine(ratio)}).")
    shown = [(v, r) for v, r in modes.items() if r is not None]
    if shown:
        same = all(jit[v] is None or abs(jit[v] - r) < 0.01 for v, r in shown)
        lines.append("- **Turned on, it depends on the version:** `-X perf` adds "
                     + ", ".join(f"{_pct(r)} on {v}" for v, r in shown)
                     + " (fp cells, geometric mean of the standard suite's instruction counts"
                     + ("; `-X perf_jit` the same within 1%" if same else "") + "). These benchmarks are "
                     "CPU-bound pure Python, the worst case: the overhead applies only to time spent running Python "
                     "code, so a service that spends half its CPU in C extensions, the kernel or waiting on I/O pays "
                     "about half of it. The one production figure published, gh-109587, is 1.5% of overall CPU "
                     "on a large server.")
    lines.append("- **When it is worth it.** Where the cost is a few percent (3.9) leaving `-X perf` on is "
                 "affordable if a profile on demand is worth that. From 3.11 on, activate it only for the time you record: "
                 "`sys.activate_stack_trampoline(\"perf\")` when a signal or an admin endpoint asks, "
                 "`sys.deactivate_stack_trampoline()` after, or `-X perf` for a profiling run; the files in /tmp "
                 "keep what was recorded.")
    if variant:
        lines.append(f"- **Frame pointers** (`fp` vs `release`, needed by `-X perf`, not by `-X perf_jit`) cost "
                     f"{_pct(min(variant))} to {_pct(max(variant))} always, active or not; `-X perf_jit` needs "
                     "none, but perf's dwarf unwinding makes recording and `perf script` slower.")
    lines += ["", "### Why the cost differs by version, and what the series changes", "",
              "On 3.9 every Python call is already a C call of the eval loop: `_PyEval_EvalFrame()` calls "
              "`interp->eval_frame` for every frame ([patches/3.9/README.md](patches/3.9/README.md), \"No inlined "
              "Python calls in 3.9\"). The trampoline, installed there as a PEP 523 frame evaluator, adds one small "
              "indirect call per Python frame, and 3.9 gives nothing up for it.",
              "",
              "From 3.11 the eval loop runs Python-to-Python calls inline, without a C call, and specialises hot "
              "instructions, but only while no frame evaluator is installed "
              "([patches/3.11/README.md](patches/3.11/README.md), design notes). The trampoline is such an "
              "evaluator: in CPython as released, while it is active every Python call leaves the inlined path for "
              "a C call through `_PyEval_Vector` and `initialize_locals`, and on 3.12+ the specialised generator "
              "paths (`SEND`, `FOR_ITER` over a generator) fall back to the generic ones, which end each generator "
              "or coroutine step by raising and catching `StopIteration`. A callgrind profile of `coroutines` on "
              "3.13-fp without the series' fast-path patch (it costs what CPython as released costs), "
              "pyperformance 1.14, 2026-11-24, shows it: 812M instructions with `-X perf` "
              "against 392M inactive, the difference in `StopIteration_init`, `BaseException_new`, `type_call`, "
              "`PyErr_ExceptionMatches`, `_PyObject_GetMethod`, `_PyEval_Vector`, `initialize_locals`, while the "
              "trampoline itself (`py_trampoline_evaluator`) is 21M. So the cost is what the eval loop gives up "
              "while an evaluator is set, not the trampoline.",
              ""]
    lines += _fast_path_paragraph(directory)
    return lines


def _header(title: str, note: str) -> str:
    return (f"# {title}\n\nGenerated by `python -m cpython_perf bench summary` (and by every "
            f"`python -m cpython_perf bench` run) from the results files in results/bench/; do not edit by hand.{note}\n")


def render(directory: Path = RESULTS_DIR) -> str:
    """BENCHMARKS.md: the summary, what it means for users, and the newest run of each comparison."""
    directory = Path(directory)
    current, _ = newest_runs(directory)
    parts = [_header("Benchmarks: runtime overhead of the perf trampolines",
                     f" Older runs of the same comparisons: [{ARCHIVE_NAME}]({ARCHIVE_NAME})."),
             *(["\n".join(cost_table(directory))] if mode_costs(directory) else []),
             "\n".join(summary_table(directory)) + "\n"]
    lines = verdict(directory)
    if lines:
        parts.append("\n".join(lines))
    for path in suite_files(directory):   # newest first: each comparison in the newest run that measured it
        text = suite.render_markdown(load_results(path), relative(path), only=current.get(path, set()))
        if text:
            parts.append(text)
    for group in SECTION_GROUPS:
        text = _section(group, directory)
        if text:
            parts.append(text)
    return "\n".join(parts)


def render_archive(directory: Path = RESULTS_DIR) -> str:
    """BENCHMARKS-archive.md: every standard-suite comparison a newer run measured again, as that run had it."""
    directory = Path(directory)
    _, superseded = newest_runs(directory)
    parts = [_header("Benchmarks: older runs", " The current figures: [BENCHMARKS.md](BENCHMARKS.md).")]
    for path in suite_files(directory):
        text = suite.render_markdown(load_results(path), relative(path), only=superseded.get(path, set()))
        if text:
            parts.append(text)
    if len(parts) == 1:
        parts.append("No comparison has been measured again yet.\n")
    return "\n".join(parts)


def refresh_summary(summary: Path = SUMMARY, directory: Path = RESULTS_DIR) -> Path:
    """Rewrite BENCHMARKS.md (and BENCHMARKS-archive.md beside it) from the results files of every group."""
    summary = Path(summary)
    summary.write_text(render(Path(directory)))
    summary.with_name(ARCHIVE_NAME).write_text(render_archive(Path(directory)))
    return summary

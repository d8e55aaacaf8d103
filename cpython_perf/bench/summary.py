"""BENCHMARKS.md: the summary table (each figure beside its published anchor and our target), then every group's
latest results (`python -m cpython_perf.bench summary`; every group's run refreshes it)."""

from __future__ import annotations

from pathlib import Path

from ..errors import DriverError
from . import build_cost, fidelity, instructions, suite, wallclock
from .common import KEPT_WORKLOADS, NATIVE_REFERENCE, RESULTS_DIR, SUMMARY, VANILLA_LIMIT, VARIANT_LIMIT, load_results, relative

SECTION_GROUPS = (wallclock, instructions, fidelity, build_cost)   # after the standard suite's sections

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
        "published and the project's target. **Measured here** is an instruction count ratio B/A (cachegrind: "
        "deterministic to about 0.01% here, so it resolves 1% targets; it does not see cache or branch effects); "
        "**wall clock** is `pyperf compare_to` on this shared 2-core machine, given only where pyperf's t-test "
        "calls the difference significant. The published anchors are wall-clock figures on dedicated machines. "
        "Each comparison links its detail below.",
        "",
        "| comparison | metric | measured here (B/A) | wall clock (pyperf compare_to) | published anchor | target | verdict |",
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


def render(directory: Path = RESULTS_DIR) -> str:
    directory = Path(directory)
    parts = ["# Benchmarks: runtime overhead of the perf trampolines\n\n"
             "Generated by `python -m cpython_perf.bench summary` (and by every `python -m cpython_perf.bench` run) "
             "from the results files in results/bench/; do not edit by hand.\n",
             "\n".join(summary_table(directory)) + "\n"]
    for path in suite_files(directory):   # every standard-suite run, newest first
        parts.append(suite.render_markdown(load_results(path), relative(path)))
    for group in SECTION_GROUPS:
        text = _section(group, directory)
        if text:
            parts.append(text)
    return "\n".join(parts)


def refresh_summary(summary: Path = SUMMARY, directory: Path = RESULTS_DIR) -> Path:
    """Rewrite BENCHMARKS.md from the results files of every group."""
    summary = Path(summary)
    summary.write_text(render(Path(directory)))
    return summary

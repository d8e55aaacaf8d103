"""The page of a standard-suite run, results/bench/suite-<UTC time>.md (cpython_perf.bench.summary writes it
beside the results file): method, machine, interpreters, what was left out, one table per comparison; and the
pieces BENCHMARKS.md's summary table shows of each comparison (its anchor on the page, the verdicts).
"""

from __future__ import annotations

import re

from .suite_results_file import analyse_suite, timed_in_pairs

# pyperf compare_to of two one-benchmark files named each side by its path (the suite's
# <configuration>/<benchmark>.json), which runs timed before the pairs kept in their verdicts
_RESULT_FILE = re.compile(r"\S*/(?P<configuration>[^/\s]+)/[^/\s]+\.json\b")


def verdict_text(text: str) -> str:
    """A stored wall-clock verdict with each side named by its configuration rather than by the path of a
    pyperf result file on the measuring host (compare_to's verdicts of runs timed before the pairs)."""
    return _RESULT_FILE.sub(lambda m: m.group("configuration"), text.replace("[", "").replace("]", ""))


def anchor(entry: dict, created: str = "") -> str:
    """The id of a comparison's table on its run's page (created: the run's time)."""
    stamp = re.sub(r"[^0-9tz]+", "", created.lower())
    return "suite-" + (f"{stamp}-" if stamp else "") + re.sub(r"[^a-z0-9]+", "-", f"{entry['b']}-vs-{entry['a']}".lower()).strip("-")


def percent(ratio: float | None) -> str:
    return "-" if ratio is None else f"{100 * (ratio - 1):+.2f}%"


def instruction_verdict(value: float | None, limit: float | None) -> str:
    """ok / MISSED against a limit on an instruction ratio (four decimals: counts resolve 0.01%)."""
    if value is None or limit is None:
        return "-"
    if value <= limit:
        return f"ok ({value:.4f} <= {limit:.4f})"
    return f"MISSED by {100 * (value / limit - 1):.2f}% ({value:.4f} > {limit:.4f})"


_SPEED = re.compile(r"(?:[\d.]+x (?:slower|faster)|no change)$")


def wallclock_summary(verdicts: dict | None, names, brief: bool = False) -> str:
    """The wall clock over a comparison's benchmarks: what was significant, else 'not significant' (brief: each
    significant benchmark with its speed alone, "1.10x slower", without the figures)."""
    if not verdicts:
        return "not measured"
    shown = [n for n in names if n in verdicts] or list(verdicts)
    sig = [n for n in shown if verdicts[n]["significant"]]
    if not sig:
        return f"not significant (0 of {len(shown)})"

    def figures(text: str) -> str:
        speed = _SPEED.search(text) if brief else None
        return speed.group(0) if speed else verdict_text(text)
    return f"{len(sig)} of {len(shown)} significant: " + "; ".join(f"{n} {figures(verdicts[n]['text'])}" for n in sig)


def _seconds(value: float) -> str:
    return f"{value / 60:.1f} min" if value >= 120 else f"{value:.0f} s"


def _subset_note(results: dict) -> str:
    full = set().union(*results.get("stdlib_only", {}).values()) if results.get("stdlib_only") else set()
    if not results["settings"].get("only") or not full:
        return ""
    rest = sorted(full - set(results["benchmarks"]))
    return (f" **A subset** (`--benchmarks`): {len(results['benchmarks'])} of the {len(full)} stdlib-only benchmarks "
            f"these cells run; not measured in this run: {', '.join(rest)}.")


def _wallclock_method(results: dict) -> str:
    rigor = results["settings"].get("rigor", "fast")
    if timed_in_pairs(results):
        return ("- Wall clock (where run): interleaved pairs: each round runs every configuration once, each in a "
                f"fresh container, in rotated order, {results['settings'].get('pairs', '?')} rounds; a run is "
                f"pyperf's own (`--{rigor}`: worker processes, mode activated by PYTHONPERFSUPPORT / "
                "PYTHON_PERF_JIT_SUPPORT inherited by them) and gives its mean. Per benchmark: the median of the "
                "rounds' ratios B/A, their quartiles, and how many rounds B was slower in; a difference is called only "
                "where the exact Wilcoxon signed-rank test over the pairs gives p < 0.05, otherwise \"not "
                "significant\".")
    return (f"- Wall clock (where run): pyperf's own runs (`--{rigor}`: worker processes, mode activated by "
            "PYTHONPERFSUPPORT / PYTHON_PERF_JIT_SUPPORT inherited by them), every run of one configuration after "
            "the other's, `pyperf compare_to` per comparison: a difference was reported where its t-test called it "
            "significant, otherwise \"not significant\". Runs timed that way let the measuring host's drift between "
            "the two halves pass for a difference: BENCHMARKS.md's table shows only wall clock timed in "
            "interleaved pairs.")


def _wallclock_heading(results: dict) -> str:
    return "wall clock (interleaved pairs)" if timed_in_pairs(results) else "wall clock (pyperf compare_to)"


def render_markdown(results: dict, source: str = "") -> str:
    """The standard suite's Markdown of a run (its page): method, machine, interpreters, one table per comparison."""
    analysed = analyse_suite(results)
    suite_, ins = results["suite"], results["instructions"]
    lines = [
        f'<a id="standard-suite-{re.sub(r"[^0-9tz]+", "", results["created"].lower())}"></a>',
        f"## The standard suite: pyperformance's stdlib-only benchmarks (run of {results['created']})",
        "",
        f"From {source or 'a standard-suite run'} ({results['created']}; `python -m cpython_perf bench suite`)"
        + ("" if results.get("complete") else " **(incomplete: the run was stopped or is still running; the tables hold what it measured)**")
        + ".",
        "",
        f"- pyperformance {suite_['pyperformance']['version']} (`{suite_['pyperformance']['file']}`, sha256 "
        f"`{suite_['pyperformance']['sha256'][:16]}...`), pyperf {suite_['pyperf']['version']} "
        f"(`{suite_['pyperf']['sha256'][:16]}...`), pinned in `{suite_['config']}`; the benchmark files run as they "
        "are in each cell's own interpreter, pyperf mounted read-only on PYTHONPATH.",
        f"- Benchmarks measured ({len(results['benchmarks'])}): {', '.join(results['benchmarks'])}."
        + _subset_note(results),
        "- Instructions: `valgrind --tool=cachegrind --cache-sim=no`, pyperf's worker mode (`--worker --warmups 0 "
        "--values 1 --loops N`) with L and 2L loops, one loop = (I(2L) - I(L)) / L: start-up, pyperf's import and "
        f"the benchmark's set-up cancel out. L: the smallest whose loops count >= {suite_['min_loop_instructions']:,} "
        "instructions, chosen on the first configuration, used for all. PYTHONHASHSEED=0. After each run the "
        "container's /tmp must hold a perf map / jitdump exactly when the configuration activates a trampoline. "
        "Ratio B/A above 1: B executes more instructions; geometric mean over the benchmarks both sides ran.",
        _wallclock_method(results),
    ]
    machine, settings = results.get("machine") or {}, results["settings"]
    if machine:
        lines.append(f"- Machine: {machine.get('cpu', 'unknown CPU')} ({machine.get('arch', '?')}), "
                     f"{machine.get('nproc', '?')} CPUs, kernel {machine.get('kernel', '?')}; measured: "
                     + ", ".join(what for what, done in (("instruction counts", settings.get("instructions", True)),
                                                         (_wallclock_heading(results),
                                                          settings.get("wallclock"))) if done) + ".")
    seconds = ins.get("seconds", {})
    counted = {k: len(v) for k, v in ins["timings"].items()}
    if any(seconds.values()):
        lines.append("- Time under cachegrind per configuration (both loop counts, every benchmark measured): " + ", ".join(
            f"`{k}` {_seconds(v)} ({counted.get(k, 0)} benchmarks)" for k, v in seconds.items() if v) + ".")
    lines += ["", "| cell | support | image | current with this tree |", "| --- | --- | --- | --- |"]
    for name, cell in results["cells"].items():
        lines.append(f"| {name} | {'vanilla' if cell['vanilla'] else cell['support']} | `{cell['image']}` "
                     f"({cell.get('image_id', '')[7:19]}) | {'yes' if cell.get('current', True) else 'no (measured as built)'} |")
    left = {}
    for cell, reasons in results.get("left_out", {}).items():
        for name, reason in reasons.items():
            left.setdefault((name, reason), []).append(cell)
    if left:
        lines += ["", "Left out of the suite (pyperformance's MANIFEST lists them):", ""]
        lines += [f"- `{name}`: {reason}" + ("" if len(cells) == len(results["cells"]) else f" ({', '.join(cells)})")
                  for (name, reason), cells in sorted(left.items())]
    for key, failures in ins.get("failures", {}).items():
        if len(failures) > 3:
            first = next(iter(failures.items()))
            lines.append(f"- failed under cachegrind in `{key}`: {len(failures)} benchmarks ({', '.join(failures)}); "
                         f"the first: `{first[0]}`: {first[1]}")
        else:
            for name, text in failures.items():
                lines.append(f"- failed under cachegrind in `{key}`: `{name}`: {text}")
    for entry in results.get("not_run", []):
        lines.append(f"- not run: `{entry['b']}` vs `{entry['a']}`: {entry['reason']}")
    for entry in analysed:
        lines += ["", f'<a id="{anchor(entry, results["created"])}"></a>', f"### {entry['title']}", "",
                  f"A = `{entry['a']}`, B = `{entry['b']}`. Target: {entry['target'] or '-'}.", ""]
        if entry["workloads"]:
            lines += [f"| benchmark | instructions a loop A | B | ratio B/A | {_wallclock_heading(results)} |",
                      "| --- | ---: | ---: | ---: | --- |"]
            for name, row in entry["workloads"].items():
                wall = (entry.get("wallclock") or {}).get(name)
                lines.append(f"| {name} | {row['a']['median']:,.0f} | {row['b']['median']:,.0f} | {row['ratio']:.4f} | "
                             f"{wall['text'] if wall else '-'} |")
            lines.append(f"| **geometric mean** | | | **{entry['geomean']:.4f}** | "
                         f"{instruction_verdict(entry['geomean'], entry['geomean_limit'])} |")
        elif entry.get("wallclock"):   # timed only: each benchmark's figures, significant or not
            lines += [f"| benchmark | {_wallclock_heading(results)} |", "| --- | --- |"]
            lines += [f"| {name} | {verdict_text(wall['text'])} |" for name, wall in entry["wallclock"].items()]
        if entry.get("wallclock"):
            lines += ["", f"Wall clock: {wallclock_summary(entry['wallclock'], list(entry['wallclock']))}."]
    return "\n".join(lines) + "\n"

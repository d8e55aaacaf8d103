"""results/report.md: the report rendered as Markdown (the verdict, the cells, the checks grid with the reasons,
the packaging lanes, the external interpreters, each cell's details, the unit tests, the cells a buildbot run
skipped)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from .packaging_lanes import LANE_COLUMNS
from .external_targets import EXTERNAL_NOTE, external_check_summaries, external_defects, external_rows
from .messages import first_line
from .model import CELL_COLUMNS, LABEL, OUTCOMES, VERSION_PROPERTIES, Report
from .results_files import script_label, skipped_cells
from .seed_flamegraphs import FLAME_GRAPH_NOTE


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: Report) -> str:
    out = ["# cpython-perf results", "", f"**{report.verdict()}**", "", report.header(), ""]
    out += ["## Cells", "", "| " + " | ".join(CELL_COLUMNS) + " |", "|" + " --- |" * len(CELL_COLUMNS)]
    for cell in report.cells:
        v = report.versions(cell)
        ran = bool(report.grid.get(cell))
        versions = [_md_escape(v[k]) if ran else "" for k in VERSION_PROPERTIES]
        svg, note = report.flamegraph(cell)
        flame = f"[svg]({svg}): {_md_escape(note)}" if svg else _md_escape(note)
        twin, _ = report.twin(cell)
        scripts = ", ".join(f"[{script_label(p)}]({p})" for p in report.perf_scripts.get(cell, []))
        status = report.status(cell)
        note = report.no_results_note(cell)
        out.append(f"| {cell} | {status}{': ' + _md_escape(note) if note else ''} | " + " | ".join(report.cell_numbers(cell))
                   + " | " + " | ".join(versions) + f" | {_md_escape(twin)} | {scripts} | {flame} |")
    out += ["", "## Checks", "", "Rows are cells, columns are checks; `-`: not collected in that cell's run; "
            "`n/a`: skipped because matrix.yaml says the check does not apply to the cell.", ""]
    if report.checks:
        notes: list[str] = []
        out.append("| cell | " + " | ".join(_md_escape(c) for c in report.checks) + " |")
        out.append("| --- |" + " --- |" * len(report.checks))
        for cell in report.cells:
            row = []
            for check in report.checks:
                outcome, case = report.entry(cell, check)
                label = LABEL[outcome]
                if case is not None and outcome not in ("passed", "expected") and case.message:
                    notes.append(f"{cell} {check}: {LABEL[outcome]}: {first_line(case.message)}")
                    label += f" [{len(notes)}]"
                row.append(label)
            out.append(f"| {cell} | " + " | ".join(row) + " |")
        if notes:
            out += ["", "Reasons:", ""] + [f"{i}. {_md_escape(n)}" for i, n in enumerate(notes, 1)]
    else:
        out.append("No cell results found.")
    out += ["", *render_lanes_markdown(report), *render_external_markdown(report), "## Details", ""]
    for cell in report.cells:
        results = report.grid.get(cell)
        if not results:
            continue
        out += [f"### {cell}", "", "| check | result | s | properties |", "| --- | --- | --- | --- |"]
        for check, case in results.items():
            props = ", ".join(f"{k}={v}" for k, v in case.properties.items())
            out.append(f"| {_md_escape(check)} | {LABEL[report.outcome(case, cell)]} | {case.seconds:.1f} | "
                       f"{_md_escape(props)} |")
        out.append("")
    if report.unbound:
        n = Counter(c.outcome for c in report.unbound)
        out += ["## Tests without a cell (unit tests)", "",
                ", ".join(f"{n[k]} {LABEL[k]}" for k in OUTCOMES if n[k]) +
                f"; {sum(c.seconds for c in report.unbound):.1f} s", ""]
        for case in report.unbound:
            if case.outcome != "passed":
                out.append(f"- {case.classname}::{case.name}: {LABEL[case.outcome]}: {_md_escape(first_line(case.message))}")
        out.append("")
    out += ["## Flame graphs", "",
            FLAME_GRAPH_NOTE, ""]
    return "\n".join(out)


def render_lanes_markdown(report: Report) -> list[str]:
    if not report.lanes:
        return []
    out = ["## Packaging lanes", "", "Debian's own source packages with the series added, built with Debian's rules, "
           "installed with apt and checked (`nox -s deb-<lane>`; results/deb/<lane>/).", "",
           "| " + " | ".join(LANE_COLUMNS) + " |", "|" + " --- |" * len(LANE_COLUMNS)]
    for row in report.lanes:
        logs = ", ".join(f"[{Path(p).name}]({p})" for p in row.logs)
        status = row.status + (f": {row.note}" if row.note else "")
        out.append("| " + " | ".join(_md_escape(x) for x in (row.name, status, row.package, row.phases, row.checks,
                                                             "; ".join(row.regrtest), row.lintian)) + f" | {logs} |")
    return out + [""]


def render_external_markdown(report: Report) -> list[str]:
    rows = external_rows(report)
    if not rows and not report.external:
        return []
    out = ["## External interpreters", "", EXTERNAL_NOTE, "",
           "| image | python | version | perf | mode | outcome | reason | s |",
           "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        out.append(f"| {_md_escape(r.image)} | {_md_escape(r.python)} | {r.python_version} | {r.perf_version} | "
                   f"{r.mode} | {r.outcome} | {_md_escape(r.reason)} | {r.seconds:.1f} |")
    summaries = external_check_summaries(report)
    if summaries:
        out += ["", "Check scripts run with the target's interpreter:", ""]
        out += [f"- {_md_escape(image)} {_md_escape(python)}: {_md_escape(text)}" for (image, python), text in summaries.items()]
    for (image, python), found in external_defects(report).items():
        out += ["", f"Defects of {_md_escape(python)} in {_md_escape(image)} (each seen by a check):", ""]
        out += [f"- {_md_escape(text)}" for _ids, text in found]
    return out + [""]


def skipped_markdown(results_dir: Path) -> str:
    skipped = skipped_cells(results_dir)
    if not skipped:
        return ""
    return "\n".join(["", "## Not run", "", "Cells of this run that were not run, and why.", "",
                      "| cell | why |", "| --- | --- |",
                      *(f"| {cell} | not run: {_md_escape(why)} |" for cell, why in sorted(skipped.items())), ""])

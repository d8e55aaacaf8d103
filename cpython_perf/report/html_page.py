"""results/report.html: the report rendered as one HTML page, the same sections as the Markdown, each entry
coloured by its outcome."""

from __future__ import annotations

import html
from collections import Counter
from pathlib import Path

from .packaging_lanes import LANE_COLUMNS
from .external_targets import EXTERNAL_NOTE, external_check_summaries, external_defects, external_rows
from .messages import first_line
from .model import CELL_COLUMNS, LABEL, OUTCOMES, VERSION_PROPERTIES, Report
from .results_files import script_label, skipped_cells
from .seed_flamegraphs import FLAME_GRAPH_NOTE


# The page fits a 1400-px window without horizontal scrolling (tests/report/test_report_browser.py): the cells
# table wraps its text anywhere rather than widen the page; the checks grid scrolls inside its own box.
_CSS = """
body{font-family:sans-serif;font-size:14px;margin:8px} table{border-collapse:collapse;margin-bottom:1em}
td,th{border:1px solid #bbb;padding:2px 6px;vertical-align:top;overflow-wrap:anywhere} th{background:#eee}
table.cells,table.details{max-width:100%} table.cells td,table.cells th{font-size:13px}
.verdict{font-size:16px;font-weight:bold;padding:4px 8px;display:inline-block}
.passed,.PASSED{background:#cfc}.failed,.error,.FAILED,.imagefailed,.noresults{background:#f99}
.skipped,.xfailed,.incomplete,.INCOMPLETE{background:#ffd27f}.expected{background:#e8f0e8;color:#555}
.notrun,.notselected,.NOTHING{background:#ddd;color:#555}.none{color:#999}
.wide{overflow-x:auto;max-width:100%}
"""


def _css_class(status: str) -> str:
    return status.replace(" ", "").replace("/", "")


def render_html(report: Report) -> str:
    e = html.escape
    verdict = report.verdict()
    out = ["<!doctype html><html><head><meta charset='utf-8'><title>cpython-perf results</title>",
           f"<style>{_CSS}</style></head><body>", "<h1>cpython-perf results</h1>",
           f"<p class='verdict {e(verdict.split(':', 1)[0].split()[0])}' id='verdict'>{e(verdict)}</p>",
           f"<p>{e(report.header())}</p>",
           "<h2>Cells</h2><table class='cells' id='cells'><tr>" + "".join(f"<th>{e(c)}</th>" for c in CELL_COLUMNS) + "</tr>"]
    for cell in report.cells:
        status, v = report.status(cell), report.versions(cell)
        ran = bool(report.grid.get(cell))
        note = report.no_results_note(cell)
        nums = "".join(f"<td>{x}</td>" for x in report.cell_numbers(cell))
        nums += "".join(f"<td>{e(v[k]) if ran else ''}</td>" for k in VERSION_PROPERTIES)
        twin, twin_css = report.twin(cell)
        nums += f"<td class='{twin_css}'>{e(twin)}</td>"
        nums += "<td>" + " ".join(f"<a href='{e(p, quote=True)}'>{e(script_label(p))}</a>"
                                  for p in report.perf_scripts.get(cell, [])) + "</td>"
        svg, flame = report.flamegraph(cell)
        nums += f"<td><a href='{e(svg, quote=True)}'>svg</a>: {e(flame)}</td>" if svg else f"<td>{e(flame)}</td>"
        label = e(status) + (f"<br><small>{e(note)}</small>" if note else "")
        out.append(f"<tr><td>{e(cell)}</td><td class='{_css_class(status)}'>{label}</td>{nums}</tr>")
    out.append("</table><h2>Checks</h2><div class='wide'><table><tr><th>cell</th>" +
               "".join(f"<th>{e(c)}</th>" for c in report.checks) + "</tr>")
    for cell in report.cells:
        cells = []
        for check in report.checks:
            outcome, case = report.entry(cell, check)
            cls = {"not run": _css_class(report.status(cell)), None: "none"}.get(outcome, outcome)
            title = ""
            if case is not None:
                bits = [f"{case.seconds:.1f} s"] + [f"{k}={v}" for k, v in case.properties.items()]
                if case.message and outcome != "passed":
                    bits.append(first_line(case.message, 500))
                title = f" title='{e('; '.join(bits), quote=True)}'"
            text = LABEL[outcome] if outcome != "not run" else e(report.status(cell))
            if case is not None and outcome in ("skipped", "xfailed", "failed", "error") and case.message:
                text += f"<br><small>{e(first_line(case.message, 160))}</small>"
            elif case is not None and "chain_fraction" in case.properties:
                text += f"<br><small>{e(case.properties['chain_fraction'])}</small>"
            cells.append(f"<td class='{cls}'{title}>{text}</td>")
        out.append(f"<tr><td>{e(cell)}</td>{''.join(cells)}</tr>")
    out.append("</table></div>")
    out.append(render_lanes_html(report))
    out.append(render_external_html(report))
    out.append("<h2>Details</h2>")
    for cell in report.cells:
        results = report.grid.get(cell)
        if not results:
            continue
        out.append(f"<h3>{e(cell)}</h3><table class='details'><tr><th>check</th><th>result</th><th>s</th><th>properties</th><th>message</th></tr>")
        for check, case in results.items():
            props = ", ".join(f"{k}={v}" for k, v in case.properties.items())
            msg = first_line(case.message, 500) if case.outcome != "passed" else ""
            outcome = report.outcome(case, cell)
            out.append(f"<tr><td>{e(check)}</td><td class='{outcome}'>{LABEL[outcome]}</td>"
                       f"<td>{case.seconds:.1f}</td><td>{e(props)}</td><td>{e(msg)}</td></tr>")
        out.append("</table>")
    if report.unbound:
        n = Counter(c.outcome for c in report.unbound)
        out.append("<h2>Tests without a cell (unit tests)</h2><p>" +
                   e(", ".join(f"{n[k]} {LABEL[k]}" for k in OUTCOMES if n[k])) + "</p><ul>")
        for case in report.unbound:
            if case.outcome != "passed":
                out.append(f"<li>{e(case.classname)}::{e(case.name)}: {LABEL[case.outcome]}: {e(first_line(case.message))}</li>")
        out.append("</ul>")
    out.append(f"<h2>Flame graphs</h2><p>{e(FLAME_GRAPH_NOTE)}</p></body></html>")
    return "\n".join(out)


def _lane_css(status: str) -> str:
    return {"did not finish": "failed", "not run": "notrun"}.get(status, status)


def render_lanes_html(report: Report) -> str:
    if not report.lanes:
        return ""
    e = html.escape
    out = ["<h2>Packaging lanes</h2><p>Debian's own source packages with the series added, built with Debian's "
           "rules, installed with apt and checked (<code>nox -s deb-&lt;lane&gt;</code>; results/deb/&lt;lane&gt;/).</p>",
           "<table class='details' id='lanes'><tr>" + "".join(f"<th>{e(c)}</th>" for c in LANE_COLUMNS) + "</tr>"]
    for row in report.lanes:
        status = e(row.status) + (f"<br><small>{e(row.note)}</small>" if row.note else "")
        logs = " ".join(f"<a href='{e(p, quote=True)}'>{e(Path(p).name)}</a>" for p in row.logs)
        out.append(f"<tr><td>{e(row.name)}</td><td class='{_lane_css(row.status)}'>{status}</td>"
                   + "".join(f"<td>{e(x)}</td>" for x in (row.package, row.phases, row.checks))
                   + "<td>" + "<br>".join(e(x) for x in row.regrtest) + f"</td><td>{e(row.lintian)}</td>"
                   + f"<td>{logs}</td></tr>")
    out.append("</table>")
    return "\n".join(out)


def render_external_html(report: Report) -> str:
    rows = external_rows(report)
    if not rows and not report.external:
        return ""
    e = html.escape
    out = [f"<h2>External interpreters</h2><p>{e(EXTERNAL_NOTE)}</p><table><tr><th>image</th><th>python</th>"
           "<th>version</th><th>perf</th><th>mode</th><th>outcome</th><th>reason</th><th>s</th></tr>"]
    for r in rows:
        out.append(f"<tr><td>{e(r.image)}</td><td>{e(r.python)}</td><td>{e(r.python_version)}</td>"
                   f"<td>{e(r.perf_version)}</td><td>{e(r.mode)}</td><td class='{r.css}'>{e(r.outcome)}</td>"
                   f"<td>{e(r.reason)}</td><td>{r.seconds:.1f}</td></tr>")
    out.append("</table>")
    summaries = external_check_summaries(report)
    if summaries:
        out.append("<p>Check scripts run with the target's interpreter:</p><ul>" +
                   "".join(f"<li>{e(image)} {e(python)}: {e(text)}</li>" for (image, python), text in summaries.items())
                   + "</ul>")
    for (image, python), found in external_defects(report).items():
        out.append(f"<p>Defects of {e(python)} in {e(image)} (each seen by a check):</p><ul>"
                   + "".join(f"<li>{e(text)}</li>" for _ids, text in found) + "</ul>")
    return "\n".join(out)


def with_skipped_html(page: str, results_dir: Path) -> str:
    skipped = skipped_cells(results_dir)
    if not skipped:
        return page
    e = html.escape
    section = ("<h2>Not run</h2><p>Cells of this run that were not run, and why.</p><table><tr><th>cell</th>"
               "<th>why</th></tr>" + "".join(f"<tr><td>{e(cell)}</td><td class='notrun'>not run: {e(why)}</td></tr>"
                                              for cell, why in sorted(skipped.items())) + "</table>")
    at = page.rfind("</body>")
    return page[:at] + section + page[at:] if at >= 0 else page + section

"""The HTML report in a real browser: headless Chromium at a 1400-px window must not scroll sideways.

Every matrix cell gets results (long versions, events, skip reasons, perf script links, the twin column), the
page is opened with `chromium --headless --window-size=1400,900 --dump-dom`, and a script appended to it
writes what the browser laid out into the DOM: the window's inner width, the document's scroll width and
the right edge of the cells table.  Skipped, with the reason, where no Chromium is installed (Debian:
apt-get install chromium).
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from cpython_perf.check import suite_results
from cpython_perf.report import pipeline
from cpython_perf.matrix import load_matrix

from tests.report.junit_files import case, junit

MATRIX = load_matrix()
WIDTH = 1400
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
MEASURE = """<script>
const cells = document.getElementById('cells').getBoundingClientRect();
document.body.setAttribute('data-measured', JSON.stringify({
  inner: window.innerWidth, scroll: document.scrollingElement.scrollWidth,
  cells_right: Math.ceil(cells.right), cells_width: Math.ceil(cells.width)}));
</script></body>"""


def browser() -> str:
    found = next((shutil.which(name) for name in BROWSERS if shutil.which(name)), None)
    if not found:
        pytest.skip(f"no headless browser here (none of {', '.join(BROWSERS)} on PATH; Debian: apt-get install chromium)")
    return found


def many_cells(tmp_path):
    """Results for every cell of the matrix, with the long texts a real run has."""
    long_event = "cpu-clock (default: 0 samples in 2 s with cycles:P; perf_event_paranoid=1)"
    skip = ('<skipped type="pytest.skip" message="{cell}: perf is not permitted here: kernel.perf_event_paranoid=4 '
            'and no CAP_PERFMON in /proc/self/status of the container (docker run --cap-add PERFMON)">x</skipped>')
    # a failure whose first line is one long word (a path), as assertion messages often are
    unbroken = ('<failure message="AssertionError:/home/runner/work/cpython-perf/cpython-perf/results/'
                + "x" * 300 + '/perf.data">x</failure>')
    for i, cell in enumerate(MATRIX.cells):
        props = {"perf_version": "perf version 6.12.43+deb13-amd64", "kernel_version": "6.1.0-28-cloud-amd64-long",
                 "perf_event": long_event, "chain_fraction": "0.9731"}
        cases = [case(f"test_seed_chain[{cell}-perf-xoption]", props=props),
                 case(f"test_seed_chain[{cell}-perf-env]", body=skip.format(cell=cell) if i % 3 else "", props=props),
                 case(f"test_check_script[{cell}-check_fix_a_very_long_check_script_name_without_spaces]",
                      "conformance.test_checks", unbroken if i % 5 == 0 else "")]
        junit(tmp_path / cell / "junit.xml", "\n".join(cases))
        for mode in ("perf", "perf_jit"):
            for activation in ("xoption", "env", "sys_api"):
                (tmp_path / cell / suite_results.seed_perf_script_name(mode, activation)).write_text("x\n")
    return pipeline.write_report(tmp_path, MATRIX, renderer="Docker is not available for the tools image here")


def measure(chromium: str, page) -> dict:
    import json
    measured = page.with_name("measured.html")
    measured.write_text(page.read_text().replace("</body>", MEASURE))
    done = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           "--hide-scrollbars", f"--window-size={WIDTH},900", "--dump-dom", measured.as_uri()],
                          capture_output=True, text=True, timeout=120)
    m = re.search(r"data-measured=\"([^\"]*)\"", done.stdout)
    assert m, f"{chromium} wrote no measurement (exit {done.returncode}):\n{done.stderr[-2000:]}"
    return json.loads(m.group(1).replace("&quot;", '"'))


def test_the_report_does_not_scroll_sideways_at_1400_px(tmp_path):
    chromium = browser()
    _, page = many_cells(tmp_path)
    got = measure(chromium, page)
    assert got["inner"] == WIDTH, f"the window is not {WIDTH} px wide: {got}"
    assert got["scroll"] <= WIDTH, f"the page scrolls sideways at {WIDTH} px: {got}"
    assert got["cells_right"] <= WIDTH, f"the cells table is wider than the window: {got}"


def test_the_measurement_sees_a_page_that_does_scroll(tmp_path):
    """The check can fail: the same page with a 2000-px wide element scrolls."""
    chromium = browser()
    _, page = many_cells(tmp_path)
    page.write_text(page.read_text().replace("<h2>Cells</h2>", "<div style='width:2000px'>wide</div><h2>Cells</h2>"))
    assert measure(chromium, page)["scroll"] > WIDTH

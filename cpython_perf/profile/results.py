"""What a profile run leaves in its output directory, and what is read back from it: the directory made
ready (prepare_out: the outputs of an earlier run removed, tmp/ for the perf maps), the flame graph drawn
by inferno over perf.script.txt in the tools image (draw_flamegraph, cpython_perf.report.flamegraph), a
few lines on the samples (summarise) and the top of perf report's text (report_top); and the stacks of
a written flame graph (svg_stacks, python_chain_found), which the tests assert chains on.
"""

from __future__ import annotations

import re
import shlex
import time
from collections import Counter
from pathlib import Path

from ..errors import DriverError
from .steps import FLAMEGRAPH, OUTPUTS, SCRIPT_TEXT


def prepare_out(out: Path) -> Path:
    """The output directory, made by the invoking user, without the outputs of an earlier run; its tmp/
    (mounted at /tmp) world-writable and sticky like /tmp, emptied."""
    out.mkdir(parents=True, exist_ok=True)
    for name in OUTPUTS:
        (out / name).unlink(missing_ok=True)
    tmp = out / "tmp"
    if tmp.is_dir():
        for child in tmp.iterdir():
            if child.is_file() or child.is_symlink():
                child.unlink()
    tmp.mkdir(exist_ok=True)
    tmp.chmod(0o1777)
    return out


def draw_flamegraph(client, matrix, out: Path, title: str, log, record_lines, timings) -> str | None:
    """Render the flame graph in the tools image; the failure's message, or None."""
    from ..image import tools
    from ..report.flamegraph import render_flamegraph

    started = time.monotonic()
    try:
        tag = tools.ensure_tools_image(client, matrix, log)
        inner = f'{tools.FLAMEGRAPH_COMMAND} "$TITLE" < /in/{SCRIPT_TEXT} > /in/{FLAMEGRAPH}'
        line = "$ " + shlex.join(["docker", "run", "--rm", "-e", f"TITLE={title}", "-v", f"{out}:/in", tag,
                                  "sh", "-c", inner])
        log(line)
        record_lines.append(line)
        render_flamegraph(client, matrix, out / SCRIPT_TEXT, out / FLAMEGRAPH, title, log)
    except DriverError as exc:
        return f"the flame graph could not be drawn: {exc}"
    finally:
        timings["flamegraph"] = time.monotonic() - started
    return None


def report_top(text: str, n: int = 12) -> list[str]:
    """The first n lines of perf report's text, its # comments left out."""
    return [l for l in text.splitlines() if l.strip() and not l.startswith("#")][:n]


def svg_stacks(svg_text: str) -> list[tuple[str, ...]]:
    """Every frame of an inferno flame graph as its stack, root first: the frames below it (greater y)
    whose span of samples holds its span, then itself."""
    from ..report.flamegraph_svg import svg_frames

    frames = svg_frames(svg_text)
    stacks = []
    for name, y, x, w in frames:
        below = sorted(((fy, fname) for fname, fy, fx, fw in frames
                        if fy > y and fx <= x and x + w <= fx + fw), reverse=True)
        stacks.append(tuple(fname for _, fname in below) + (name,))
    return stacks


def _matches(symbol: str, want) -> bool:
    return want.fullmatch(symbol) is not None if isinstance(want, re.Pattern) else symbol == want


def python_chain_found(stacks, chain) -> bool:
    """Whether some stack's py:: frames (root first, C frames between them ignored) hold chain (outer
    first: strings, or compiled patterns that must match the whole symbol) as consecutive frames."""
    for stack in stacks:
        py = [s for s in stack if s.startswith("py::")]
        for i in range(len(py) - len(chain) + 1):
            if all(_matches(py[i + k], chain[k]) for k in range(len(chain))):
                return True
    return False


def summarise(script_text: str, top: int = 8) -> list[str]:
    """A few lines on the recorded samples: how many, how many carry Python frames, the Python functions
    most often innermost."""
    from ..record.perf_samples import parse_perf_script, printable

    samples = parse_perf_script(script_text)
    with_py = [s for s in samples if s.python_frames()]
    lines = [f"{len(samples)} samples, {len(with_py)} with Python frames"]
    if samples and not with_py:
        lines.append("no py:: frame in any sample: the trampoline was not active, or the unwinding did not reach "
                     "it (without frame pointers use --mode perf_jit)")
    counts = Counter(s.python_frames()[0] for s in with_py)
    for symbol, n in counts.most_common(top):
        lines.append(f"  {n:7d}  {100 * n / len(samples):5.1f}%  {printable(symbol)}")
    return lines

"""The table of `record --container NAME --live`: the functions of one recording window, as perf top shows them
(the share of samples in which a function is the innermost frame, and the share in which it is anywhere in the
stack), with the Python frames named from the kept perf maps.

perf's own `perf top` cannot be that view for a container: run from outside, it finds neither the container's
interpreter and libraries (no --symfs; their paths are the container's) nor the maps the Keeper keeps under the
host pids in time for functions that appear later.  So `--live` records short windows and reads each as
`record` reads a whole recording (`perf script --symfs DIR/root` with the kept maps), then prints this table.
"""

from __future__ import annotations

from collections import Counter

from .perf_samples import Sample, printable

CLEAR = "\x1b[H\x1b[2J"


def top_table(samples: list[Sample], entries: int = 20, title: str = "") -> list[str]:
    """The table of one window: the `entries` functions with the most samples of their own, then the Python
    functions with the most samples anywhere in their stacks."""
    total = len(samples)
    own: Counter = Counter()
    anywhere: Counter = Counter()
    where: dict[str, str] = {}
    for sample in samples:
        if not sample.frames:
            continue
        leaf = sample.frames[0]
        own[leaf.symbol] += 1
        where.setdefault(leaf.symbol, leaf.dso)
        for symbol in {f.symbol for f in sample.frames}:
            anywhere[symbol] += 1
        for f in sample.frames:
            where.setdefault(f.symbol, f.dso)
    with_python = sum(1 for s in samples if s.python_frames())
    lines = [f"{title}{total} samples, {with_python} with Python frames"]
    if not total:
        return lines
    lines += ["", "   self   total  function (innermost)", "  -----  ------  --------"]
    for symbol, n in sorted(own.items(), key=lambda item: (-item[1], item[0]))[:entries]:
        lines.append(f"  {100 * n / total:5.1f}%  {100 * anywhere[symbol] / total:5.1f}%  {printable(symbol)}"
                     + ("" if symbol.startswith("py::") else f"  ({printable(where[symbol])})"))
    python = sorted(((symbol, n) for symbol, n in anywhere.items() if symbol.startswith("py::")),
                    key=lambda item: (-item[1], item[0]))[:entries]
    if python:
        lines += ["", "  total    self  Python function (anywhere in the stack)", "  -----  ------  ---------------"]
        for symbol, n in python:
            lines.append(f"  {100 * n / total:5.1f}%  {100 * own[symbol] / total:5.1f}%  {printable(symbol)}")
    return lines

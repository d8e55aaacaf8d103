"""An inferno flame graph's SVG read back: its frames, and whether one frame sits inside another's span, above
it.  The report checks its seed flame graphs with it, `python -m cpython_perf profile` its own."""

from __future__ import annotations

import html
import re

_SVG_FRAME = re.compile(r'<title>(?P<name>[^<]*?) \([\d,]+ samples?[^<]*</title>\s*<rect [^>]*?y="(?P<y>[\d.]+)"'
                        r'[^>]*?fg:x="(?P<x>\d+)" fg:w="(?P<w>\d+)"')


def svg_frames(svg_text: str) -> list[tuple[str, float, int, int]]:
    """The frames of an inferno flame graph: (name, y, first sample, sample count); the root is at the bottom."""
    return [(html.unescape(m.group("name")), float(m.group("y")), int(m.group("x")), int(m.group("w")))
            for m in _SVG_FRAME.finditer(svg_text)]


def svg_nests(svg_text: str, inner: str, outer: str) -> bool:
    """Whether some frame named inner lies within the span of a frame named outer, above it (a callee)."""
    frames = svg_frames(svg_text)
    outers = [(y, x, w) for name, y, x, w in frames if name == outer]
    return any(iy < oy and ox <= ix and ix + iw <= ox + ow
               for name, iy, ix, iw in frames if name == inner for oy, ox, ow in outers)

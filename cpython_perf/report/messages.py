"""A message (a testcase's, an exception's) as the report's tables show it: its first line, cut to a length."""

from __future__ import annotations


def first_line(text: str, limit: int = 200) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"

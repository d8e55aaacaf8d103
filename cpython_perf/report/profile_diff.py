"""`python -m cpython_perf diff BASELINE NEW`: what changed between two profiles.

BASELINE and NEW are output directories of `profile` or `record --container` (their stacks.folded, or their
perf.script.txt where a directory has no folded stacks yet).  Writes into --out (default NEW/diff/):

- `diff.svg`: a differential flame graph (inferno's, in the tools image): NEW's frames, BASELINE scaled to
  NEW's number of samples, red where a stack took a larger share, blue where a smaller one;
- `diff.md`: the functions whose share of the samples moved most, both as the innermost frame (self) and
  anywhere in the stack (total), in percentage points, BASELINE against NEW.

The same table is printed.  A Python frame is named as perf names it (`py::qualname:file`).
"""

from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .. import host
from ..errors import DriverError
from ..image.tools import FLAMEGRAPH_COMMAND
from ..matrix import load_matrix
from ..record.perf_samples import PerfScriptError, parse_perf_script
from ..record.untrusted_files import Refused, read_regular_file, write_new_file
from ..record.viewer_files import FOLDED, folded_text
from ..subcommands import Command
from .flamegraph import run_renderer

SCRIPT_TEXT = "perf.script.txt"
DIFF_SVG, DIFF_TABLE = "diff.svg", "diff.md"
INPUT_LIMIT = 1 << 30


@dataclass(frozen=True)
class Shift:
    function: str
    self_before: float      # shares of all samples, 0..1
    self_after: float
    total_before: float
    total_after: float

    @property
    def moved(self) -> float:
        return max(abs(self.total_after - self.total_before), abs(self.self_after - self.self_before))


def folded_of(directory: Path) -> str:
    """The collapsed stacks of a profile directory: its stacks.folded, else folded from its perf.script.txt."""
    if not directory.is_dir():
        raise DriverError(f"{directory}: not a directory; name the output directories of two `profile` or "
                          "`record --container` runs")
    try:
        if (directory / FOLDED).exists():
            return read_regular_file(directory / FOLDED, INPUT_LIMIT).decode(errors="replace")
        if (directory / SCRIPT_TEXT).exists():
            text = read_regular_file(directory / SCRIPT_TEXT, INPUT_LIMIT).decode(errors="replace")
            return folded_text(parse_perf_script(text))
    except (Refused, PerfScriptError) as exc:
        raise DriverError(f"{directory}: {exc}") from None
    raise DriverError(f"{directory} has neither {FOLDED} nor {SCRIPT_TEXT}: is it the output directory of a "
                      "`profile` or `record --container` run?")


def parse_folded(text: str) -> Counter:
    """stack (a tuple, root first) -> samples."""
    stacks: Counter = Counter()
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            raise DriverError(f"line {lineno} of the collapsed stacks is not `frame;frame;... COUNT`: {line[:120]!r}")
        stacks[tuple(stack.split(";"))] += int(count)
    return stacks


def _shares(stacks: Counter) -> tuple[dict[str, float], dict[str, float]]:
    total = sum(stacks.values()) or 1
    own: Counter = Counter()
    anywhere: Counter = Counter()
    for stack, n in stacks.items():
        own[stack[-1]] += n
        for function in set(stack[1:]) or set(stack):   # the first frame is the process name
            anywhere[function] += n
    return ({f: n / total for f, n in own.items()}, {f: n / total for f, n in anywhere.items()})


def shifts(before: Counter, after: Counter) -> list[Shift]:
    """Every function of either profile, the most moved first."""
    self_b, total_b = _shares(before)
    self_a, total_a = _shares(after)
    functions = set(total_b) | set(total_a) | set(self_b) | set(self_a)
    rows = [Shift(f, self_b.get(f, 0.0), self_a.get(f, 0.0), total_b.get(f, 0.0), total_a.get(f, 0.0))
            for f in functions]
    return sorted(rows, key=lambda r: (-r.moved, r.function))


def _pp(share: float) -> str:
    return f"{100 * share:.1f}%"


def table(rows: list[Shift], before: Counter, after: Counter, names: tuple[str, str], top: int = 20) -> list[str]:
    lines = [f"baseline {names[0]}: {sum(before.values())} samples; new {names[1]}: {sum(after.values())} samples",
             "",
             "| function | self, baseline | self, new | total, baseline | total, new | moved (points) |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows[:top]:
        name = r.function.replace("|", "\\|")
        lines.append(f"| `{name}` | {_pp(r.self_before)} | {_pp(r.self_after)} | {_pp(r.total_before)} | "
                     f"{_pp(r.total_after)} | {100 * (r.total_after - r.total_before):+.1f} |")
    return lines


def render_diff(client, matrix, before: Path, after: Path, svg: Path, title: str) -> None:
    """The differential flame graph of two folded files in svg's directory (inferno, in the tools image)."""
    if not before.parent == after.parent == svg.parent:
        raise ValueError("render_diff reads and writes one directory")
    command = f'{FLAMEGRAPH_COMMAND} --diff /out/{before.name} /out/{after.name} "$TITLE" > /out/{svg.name}.partial'
    run_renderer(client, matrix, command, {svg.parent.resolve(): "/out"}, svg, title,
                 "the differential flame graph could not be drawn")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("baseline", help="the output directory of the earlier run (profile or record --container)")
    parser.add_argument("new", help="the output directory of the run to compare with it")
    parser.add_argument("--out", "-o", default=None, help="where diff.svg and diff.md go (default: NEW/diff/)")
    parser.add_argument("--top", type=int, default=20, help="functions in the table (default 20)")
    parser.add_argument("--no-flamegraph", action="store_true", help="the table only (no tools image needed)")


def run(args: argparse.Namespace, client=None, log=print) -> int:
    baseline, new = Path(args.baseline), Path(args.new)
    folded = (folded_of(baseline), folded_of(new))
    before, after = parse_folded(folded[0]), parse_folded(folded[1])
    if not before or not after:
        raise DriverError(f"{baseline if not before else new} holds no sample: nothing to compare")
    out = Path(args.out) if args.out else new / "diff"
    out.mkdir(parents=True, exist_ok=True)
    lines = table(shifts(before, after), before, after, (str(baseline), str(new)), args.top)
    write_new_file(out / DIFF_TABLE, ("\n".join(lines) + "\n").encode())
    for line in lines:
        log(line)
    if not args.no_flamegraph:
        client = client or host.docker_client(log)
        # the folded inputs as files of their own, whatever each directory had
        staged = []
        for label, text in (("baseline", folded[0]), ("new", folded[1])):
            path = out / f"{label}.folded"
            write_new_file(path, text.encode())
            staged.append(path)
        render_diff(client, load_matrix(getattr(args, "matrix", None)), staged[0], staged[1], out / DIFF_SVG, f"{baseline.name} -> {new.name}")
    log(f"wrote {out}/: {DIFF_TABLE}" + ("" if args.no_flamegraph else f", {DIFF_SVG}, baseline.folded, new.folded"))
    return 0


COMMAND = Command("diff", "what changed between two profiles: a differential flame graph and the functions whose "
                          "share moved most (cpython_perf/report/profile_diff.py)", add_arguments, run,
                  description="Compare two profile directories (profile or record --container outputs).")

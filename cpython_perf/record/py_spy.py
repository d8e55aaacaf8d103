"""py-spy, the profiler that reads the interpreter's frames from outside: its command and its raw output.

py-spy (the PyPI wheel's static x86_64 binary, pinned in matrix.yaml's
`profilers:`; cpython_perf.image.tools.py_spy_binary) needs no perf support:
it reads each thread's frame chain from the process's memory.  `record -f raw`
writes folded stacks, a line per distinct stack, root first:

    <module> (/src/p.py:15);calls (/src/p.py:14);leaf (/src/p.py:5) 287

With `--native` it also unwinds the C stack and puts the Python frames where
the eval loop's C frames ran them; C frames come out as `name (dso)` or
`0xADDRESS (?)` (code without a symbol, such as the perf trampolines).
"""

from __future__ import annotations

import re

# Where the binary's directory is mounted (read-only) in the cell container
MOUNT = "/opt/py-spy"
# 'function (file:line)'; C frames of --native are 'function (dso)' or '0x7f.. (?)'
FRAME = re.compile(r"^(?P<function>.*) \((?P<file>.*?)(?::(?P<line>\d+))?\)$")


def record_command(binary: str, argv: list[str], output: str, rate: int, native: bool = False,
                   subprocesses: bool = False) -> list[str]:
    """py-spy record of argv (which it starts and follows; with subprocesses its child processes too), raw
    output with full file names to output."""
    return [binary, "record", "-r", str(rate), "-f", "raw", "--full-filenames", *(["--native"] if native else []),
            *(["--subprocesses"] if subprocesses else []), "-o", output, "--", *argv]


def raw_frames(raw: str) -> list[tuple[list[tuple[str, str, bool]], int]]:
    """(frames innermost first as (function, file or dso, whether Python: it has a line), count) of each line of
    raw output."""
    out = []
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = []
        for frame in stack.split(";"):
            m = FRAME.match(frame)
            frames.append((m.group("function"), m.group("file"), m.group("line") is not None) if m
                          else (frame, "", False))
        out.append((frames[::-1], int(count)))
    return out


def raw_stacks(raw: str) -> list[tuple[list[tuple[str, str]], int]]:
    """(frames innermost first as (function, file), count) of each line of raw output."""
    return [([(function, file) for function, file, _ in frames], n) for frames, n in raw_frames(raw)]


def chain_counts(raw: str, chain, filename: str, file_frames_only: bool = False) -> dict:
    """Samples of raw output: all, inside chain[0] of filename, and those with the whole chain innermost first.

    file_frames_only: compare only the frames of filename (--native output, where C frames of the eval loop,
    the trampolines and the C library stand between and around the Python ones); otherwise the innermost
    frame must be chain[0] and the chain must follow it directly."""
    return stack_chain_counts(raw_stacks(raw), chain, filename, file_frames_only)


def stack_chain_counts(stacks, chain, filename: str, file_frames_only: bool = False) -> dict:
    """chain_counts of stacks ((frames innermost first as (function, file), count) each), whichever profiler
    wrote them."""
    process = inside = full = 0
    want = [(f, filename) for f in chain]
    for frames, n in stacks:
        process += n
        if file_frames_only:
            frames = [f for f in frames if f[1] == filename]
        if frames and frames[0] == want[0]:
            inside += n
            if frames[:len(want)] == want:
                full += n
    return {"process_samples": process, "inside_samples": inside, "full_chain_samples": full,
            "fraction": full / inside if inside else 0.0}

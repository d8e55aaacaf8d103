"""Austin (https://github.com/P403n1x87/austin), a frame stack sampler that reads the interpreter's frames from
outside as py-spy does: its command line and its output read back.

Austin 4 writes its samples in its binary MOJO format; austin-python's `mojo2austin` turns that into Austin's
collapsed text, a line a sample: `P<pid>;T<iid>:<tid>;<file>:<function>:<line>;... <microseconds>`, outermost
frame first (cpython_perf/check/viewer_readers.mojo2austin installs it, hash-checked).  Austin reads the
target's memory with process_vm_readv: in a container it needs CAP_SYS_PTRACE.
"""

from __future__ import annotations

MOUNT = "/opt/austin"
CAPABILITY = "SYS_PTRACE"


def record_command(binary: str, argv: list[str], output: str, interval_us: int, children: bool = False) -> list[str]:
    """Austin sampling argv (which it starts; with children its child processes too, -C) every interval_us
    microseconds, its MOJO output to output."""
    return [binary, "-i", f"{interval_us}us", *(["-C"] if children else []), "-o", output, *argv]


def collapsed_stacks(text: str) -> list[tuple[list[tuple[str, str]], int]]:
    """(frames innermost first as (function, file), 1) of each sample of mojo2austin's text (metadata lines,
    `# ...`, left out).  A frame is file:function:line, and the file may hold colons itself."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        stack, _, _metric = line.rpartition(" ")
        frames = []
        for part in stack.split(";")[2:]:     # after P<pid> and T<iid>:<tid>
            rest, _, lineno = part.rpartition(":")
            filename, _, function = rest.rpartition(":")
            frames.append((function, filename) if lineno.isdigit() else (part, ""))
        out.append((frames[::-1], 1))
    return out

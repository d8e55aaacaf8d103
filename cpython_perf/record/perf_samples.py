"""Parse `perf script` output into samples and measure Python call chains.

The conformance suite records with perf inside a cell and runs
`perf script -F comm,pid,tid,time,event,ip,sym,dso` there; this module turns
that text into Sample objects (frames leaf first) so that tests assert on the
order of frames inside each sample, never on substrings of a whole report.

The text holds names a profiled program chose (its comm, the symbols of its perf map or jitdump: any
characters, a newline included): every line is parsed in time linear in its length, and one that does not
have the shape of a header or a frame raises PerfScriptError.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PERF_SCRIPT_FIELDS = "comm,pid,tid,time,event,ip,sym,dso"

# A sample's header: COMM PID/TID TIME: EVENT:.  The comm (a process names itself: any characters, spaces
# included) ends at the first " PID/TID TIME: " after it; found with a search whose every step is bounded, so
# that the time to parse a line grows with its length, not with its square (symbol names come from perf maps
# and jitdumps: a line of them may be anything, and long).  Numbers are ASCII and of bounded length: int()
# refuses strings of more than 4300 digits.
_HEADER_FIELDS = re.compile(r"\s(?P<pid>-?[0-9]{1,10})/(?P<tid>-?[0-9]{1,10})[ \t]{1,64}"
                            r"(?P<time>[0-9]{1,20}\.[0-9]{1,20}):\s")
# the dso in parentheses; a file deleted since it was mapped (a memfd, a replaced library) says so inside them
_FRAME = re.compile(r"^\s+(?P<ip>[0-9a-fA-F]+)\s(?P<sym>.*)\s\((?P<dso>[^()]*(?: \(deleted\))?)\)\s*$")
_SYMOFF = re.compile(r"\+0x[0-9a-f]+$")


@dataclass(frozen=True)
class Frame:
    ip: int
    symbol: str
    dso: str

    @property
    def is_python(self) -> bool:
        return self.symbol.startswith("py::")


@dataclass
class Sample:
    comm: str
    pid: int
    tid: int
    time: float
    event: str
    frames: list[Frame] = field(default_factory=list)  # leaf first

    def python_frames(self) -> list[str]:
        """The py:: symbols of this sample, leaf first."""
        return [f.symbol for f in self.frames if f.is_python]


class PerfScriptError(ValueError):
    """perf script output that does not have the expected shape."""


def _shown(line: str, limit: int = 200) -> str:
    """A line for a message: its start, where it is long."""
    return repr(line) if len(line) <= limit else f"{line[:limit]!r}... ({len(line)} characters)"


def parse_perf_script(text: str) -> list[Sample]:
    """Parse the output of `perf script -F comm,pid,tid,time,event,ip,sym,dso`."""
    samples: list[Sample] = []
    current: Sample | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            current = None
            continue
        if line[0].isspace():
            m = _FRAME.match(line)
            if current is None or not m:
                raise PerfScriptError(f"line {lineno}: unexpected frame line: {_shown(line)}")
            symbol = _SYMOFF.sub("", m.group("sym").strip())
            current.frames.append(Frame(int(m.group("ip"), 16), symbol, m.group("dso")))
            continue
        m = _HEADER_FIELDS.search(line)
        if not m:
            raise PerfScriptError(f"line {lineno}: not a sample header: {_shown(line)}")
        event = line[m.end():].strip()
        current = Sample(line[:m.start()].rstrip(), int(m.group("pid")), int(m.group("tid")),
                         float(m.group("time")), event[:-1] if event.endswith(":") else event)
        samples.append(current)
    return samples


def py_symbol(function: str, filename: str) -> str:
    """The perf-map symbol CPython writes for a code object: py::<qualname>:<filename>."""
    return f"py::{function}:{filename}"


@dataclass
class ChainReport:
    """How many samples taken inside a function carry the full expected chain."""

    chain: list[str]
    process_samples: int      # samples of the profiled Python process(es)
    inside_samples: int       # of those, samples whose innermost Python frame is chain[0]
    full_chain_samples: int   # of those, samples whose Python frames start with the whole chain
    example_bad: list[list[str]] = field(default_factory=list)

    @property
    def fraction(self) -> float:
        return self.full_chain_samples / self.inside_samples if self.inside_samples else 0.0

    @property
    def coverage(self) -> float:
        return self.inside_samples / self.process_samples if self.process_samples else 0.0

    def summary(self) -> str:
        return (
            f"{self.full_chain_samples} of {self.inside_samples} samples inside {self.chain[0]} carry the chain "
            f"{' -> '.join(self.chain)} ({self.fraction:.1%}); {self.inside_samples} of "
            f"{self.process_samples} samples of the process are inside it ({self.coverage:.1%})"
        )


# Of the samples inside a chain's leaf, the share that must carry the whole chain, per perf mode: the
# conformance suite's bar (conformance/conftest.assert_chain) and the fidelity benchmark's target
# (cpython_perf.bench.fidelity) are this one table.  Frame pointers are walked by the kernel at every sample:
# a miss is a broken trampoline frame, so 95%.  perf_jit's dwarf unwinding of a copied stack through
# jitted code (perf inject --jit) may lose a few samples (a sample in a trampoline's prologue, a
# truncated copy), so 90%.  Every recording made here measured 100% in both modes; a regression that
# breaks one stack in three (67%) fails either bar.
CHAIN_FRACTION_TARGETS = {"perf": 0.95, "perf_jit": 0.90}


def min_chain_fraction(mode: str) -> float:
    """The share of the leaf's samples that must carry the whole chain when the run used perf mode `mode`
    ("perf": frame pointers, "perf_jit": jitdump + dwarf).  samply's runs are judged by the mode the
    interpreter ran in, as perf's are."""
    try:
        return CHAIN_FRACTION_TARGETS[mode]
    except KeyError:
        raise ValueError(f"no chain-fraction target for perf mode {mode!r} "
                         f"(known: {', '.join(CHAIN_FRACTION_TARGETS)})") from None


def chain_report(samples: list[Sample], chain: list[str], comm_prefix: str = "python") -> ChainReport:
    """Measure chain (leaf first) over the samples of processes whose comm starts with comm_prefix.

    A sample is "inside" chain[0] when its innermost py:: frame is chain[0];
    it carries the full chain when its py:: frames, leaf first, begin with
    exactly the whole chain (no other Python frame in between).
    """
    process = [s for s in samples if s.comm.startswith(comm_prefix)]
    inside = [s for s in process if s.python_frames()[:1] == chain[:1]]
    full = [s for s in inside if s.python_frames()[: len(chain)] == chain]
    bad = [s.python_frames() for s in inside if s.python_frames()[: len(chain)] != chain][:5]
    return ChainReport(list(chain), len(process), len(inside), len(full), bad)


def python_frame_count(samples: list[Sample]) -> int:
    """Number of py:: frames over all samples (the negative control wants 0)."""
    return sum(len(s.python_frames()) for s in samples)


def printable(text: str, limit: int = 300) -> str:
    """text as it may be shown on a terminal: a symbol name comes from a perf map or jitdump that the profiled
    program wrote, and could hold escape sequences; every character that is not printable becomes `?`, and
    what is longer than limit is cut."""
    shown = "".join(c if c.isprintable() else "?" for c in text[:limit])
    return shown + ("..." if len(text) > limit else "")

"""samply, the second profiler the suite checks the cells with: its recording command and its saved profile.

samply (Debian's package, pinned in matrix.yaml's `profilers:`) records a
command with perf_event_open itself, reads /tmp/perf-PID.map and
/tmp/jit-PID.dump on its own (no perf inject) and, with `--save-only`, writes a
Firefox-profiler ("processed") JSON profile instead of serving it.  Python
frames come out with the names CPython wrote, e.g. `py::foo:/src/script.py`,
as the names of the profile's functions; C frames are left as addresses and
named by the `--unstable-presymbolicate` sidecar (profile.syms.json).

parse_profile turns the profile into perf_samples.Sample objects (frames leaf
first), so the same chain_report measures samply's samples and perf's.

samply 0.13.1 asks for the hardware cycles event first.  Where the machine has
no hardware PMU (a VM such as this one) that fails, and samply falls back to
the cpu-clock software event only when /proc/sys/kernel/perf_event_paranoid
reads 1 or less -- it otherwise exits with a paranoia message, although the
container's CAP_SYS_ADMIN (or CAP_PERFMON) is what the kernel checks.  The
recording therefore bind-mounts, inside the container's own mount namespace
(CAP_SYS_ADMIN allows it), a file reading 1 over that sysctl; the host's value
is not touched.

samply has no option to choose its event, so the host's event probe
(cpython_perf.record.perf_event: cpu-clock where the default event opens but never
samples) cannot be passed on: on such a host samply records nothing, and the
suite's samply tests say so.
"""

from __future__ import annotations

import bisect
import json
import shlex
from pathlib import Path

from .perf_runs import SEED_SCRIPT, python_command
from .perf_samples import Frame, Sample

SAMPLY_IN_CONTAINER = "/opt/samply/samply"
PROFILE = "samply-profile.json"
SIDECAR = "samply-profile.syms.json"
SAMPLE_RATE = 9999
# samply copies this much of the user stack with every sample and unwinds the copy afterwards (its
# framehop unwinder: eh_frame / jitdump unwind info, frame pointers as fallback), in every mode:
# perf_event_attr.sample_stack_user = 0x7d00, seen with strace -v on samply 0.13.1.
STACK_BYTES = 32000
MS_BIND = 4096

# The view of perf_event_paranoid samply gets (see the module's docstring); Python from the cell
# makes the mount, as the images have no mount(8).
_PARANOID_VIEW = (
    "echo 1 > /run/samply-perf-event-paranoid\n"
    "python3 -c 'import ctypes, os, sys; libc = ctypes.CDLL(None, use_errno=True); "
    "sys.exit(0 if libc.mount(b\"/run/samply-perf-event-paranoid\", "
    f"b\"/proc/sys/kernel/perf_event_paranoid\", None, {MS_BIND}, None) == 0 "
    "else \"warning: cannot bind-mount over /proc/sys/kernel/perf_event_paranoid (\" + os.strerror(ctypes.get_errno()) "
    "+ \"): without a hardware PMU samply will stop at its paranoia check\")' || true"
)


def record_command(mode: str | None, activation: str = "xoption", script: str = SEED_SCRIPT,
                   rate: int = SAMPLE_RATE, samply: str = SAMPLY_IN_CONTAINER, args: tuple[str, ...] = ()) -> str:
    """Shell script recording script (with args) with samply in a cell container; the profile lands in /src."""
    argv, env = python_command(mode, activation, script, args)
    envs = "".join(f"{k}={shlex.quote(v)} " for k, v in env.items())
    return "\n".join([
        "set -eu",
        "cd /src",
        'if [ "$(cat /proc/sys/kernel/perf_event_paranoid)" -gt 1 ]; then',
        _PARANOID_VIEW,
        "fi",
        f"{'env ' + envs if envs else ''}{samply} record --save-only --unstable-presymbolicate "
        f"--rate {int(rate)} -o /src/{PROFILE} -- {shlex.join(argv)} > /src/python.stdout",
    ]) + "\n"


class SamplyProfileError(ValueError):
    """A saved profile that does not have the shape samply 0.13 writes."""


class _SymbolTable:
    """Address -> symbol for one library, from the presymbolicate sidecar."""

    def __init__(self, entries: list[tuple[int, int, str]]):
        entries.sort()
        self.starts = [start for start, _, _ in entries]
        self.entries = entries

    def lookup(self, address: int) -> str | None:
        i = bisect.bisect_right(self.starts, address) - 1
        if i >= 0:
            start, size, name = self.entries[i]
            if address < start + max(size, 1):
                return name
        return None


def load_sidecar(path: Path) -> dict[str, _SymbolTable]:
    """The sidecar's symbol tables by library debug name ({} when there is none)."""
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    strings = data.get("string_table", [])
    tables = {}
    for lib in data.get("data", []):
        entries = [(int(s["rva"]), int(s.get("size") or 0), strings[s["symbol"]]) for s in lib.get("symbol_table", [])]
        tables[lib.get("debug_name", "")] = _SymbolTable(entries)
    return tables


def parse_profile(profile: dict, symbols: dict[str, _SymbolTable] | None = None) -> list[Sample]:
    """The samples of a samply profile (processed format), frames leaf first.

    A frame's symbol is its function's name (samply names JIT code from the
    perf map / jitdump itself); a name that is only an address is looked up in
    the sidecar's table of the frame's library.
    """
    symbols = symbols or {}
    try:
        libs = profile["libs"]
        threads = profile["threads"]
    except (KeyError, TypeError) as exc:
        raise SamplyProfileError(f"not a samply profile: missing {exc}") from None
    out: list[Sample] = []
    for thread in threads:
        try:
            strings = thread["stringArray"]
            frames, funcs = thread["frameTable"], thread["funcTable"]
            stacks, resources = thread["stackTable"], thread["resourceTable"]
            samples = thread["samples"]
        except KeyError as exc:
            raise SamplyProfileError(f"thread {thread.get('name')!r} lacks {exc}") from None
        comm = str(thread.get("processName") or thread.get("name") or "")
        pid, tid = _int(thread.get("pid")), _int(thread.get("tid"))
        names: dict[int, Frame] = {}

        def frame(index: int) -> Frame:
            if index not in names:
                func = frames["func"][index]
                name = strings[funcs["name"][func]]
                address = frames["address"][index]
                resource = funcs["resource"][func]
                lib = libs[resources["lib"][resource]] if resource is not None and resource >= 0 else None
                dso = lib["name"] if lib else ""
                if name.startswith("0x") and lib and address is not None and address >= 0:
                    table = symbols.get(lib.get("debugName") or lib["name"])
                    name = (table.lookup(address) if table else None) or name
                names[index] = Frame(address if address is not None else -1, name, dso)
            return names[index]

        times = samples.get("time") or [0.0] * len(samples["stack"])
        for stack, time_ms in zip(samples["stack"], times):
            if stack is None:
                continue
            chain = []
            while stack is not None:
                chain.append(frame(stacks["frame"][stack]))
                stack = stacks["prefix"][stack]
            out.append(Sample(comm, pid, tid, float(time_ms or 0.0) / 1000.0, "samply", chain))
    return out


def read_profile(directory: Path) -> list[Sample]:
    """Parse the profile (and its sidecar) a record_command run left in directory."""
    path = directory / PROFILE
    if not path.is_file():
        raise SamplyProfileError(f"samply wrote no profile at {path}")
    return parse_profile(json.loads(path.read_text()), load_sidecar(directory / SIDECAR))


def _int(value) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1

"""The perf command lines of each perf mode, as the howto gives them.

perf      perf record -F 9999 -g -o perf.data python3 -X perf SCRIPT
perf_jit  perf record -F 9999 -g -k 1 --call-graph dwarf[,SIZE] -o perf.data python3 -X perf_jit SCRIPT
          perf inject -i perf.data --jit --output perf.jit.data
then      perf script -F <fields> -i <data>   (parsed by perf_samples)

Everything runs inside one container; the test's own directories are
mounted at /src (script and perf data) and /tmp (perf-PID.map, jit-PID.dump
and the jitted-*.so files perf inject writes beside the dump), so every
artefact stays in the test's directory.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from ..matrix import Cell
from .perf_samples import PERF_SCRIPT_FIELDS

SAMPLE_FREQUENCY = 9999
MODE_XOPTION = {"perf": "perf", "perf_jit": "perf_jit"}
MODE_ENV = {"perf": "PYTHONPERFSUPPORT", "perf_jit": "PYTHON_PERF_JIT_SUPPORT"}
ACTIVATIONS = ("xoption", "env", "sys_api")
SEED_SCRIPT = "/src/script.py"   # the howto's script, as the conformance suite mounts it
SCRIPT_OUTPUT = "perf.script.txt"
PHASES_OUTPUT = "perf.phases.txt"   # "<phase> <milliseconds>" lines, and "data_bytes <size>"


@dataclass(frozen=True)
class PerfRun:
    """One profiled run: a shell script to execute in the cell, and where its output lands."""

    shell: str
    output: str = SCRIPT_OUTPUT


# Per-CPU ring buffer for dwarf call graphs.  Every dwarf sample carries a copy
# of the stack (up to 64 KiB at -O0); perf's default buffer (516 KiB) holds ~8
# of them, well under a millisecond at 9999 Hz, and when perf's reader falls
# behind the kernel drops records -- including, now and then, the MMAP of
# /tmp/jit-PID.dump that `perf inject --jit` needs, after which no sample gets
# a py:: frame.  The shell picks the largest power of two up to 4 MiB that the
# memlock limit allows for every CPU (a container's default: 8 MiB in all).
DWARF_MMAP_FUNCTION = (
    'dwarf_mmap() { l=$(ulimit -l); [ "$l" = unlimited ] && l=1048576; per=$(( l / $(nproc) )); '
    'kb=4096; while [ $kb -gt $per ] && [ $kb -gt 512 ]; do kb=$(( kb / 2 )); done; echo "${kb}K"; }'
)


# A foreign-arch cell records in a qemu-system guest (TCG), which has no
# usable hardware PMU: its samples come from a software event (its arch's
# guest.event in matrix.yaml's arch_facts: cpu-clock), at a tenth of the
# native rate -- the emulated program runs some 10-20 times
# slower, so this takes about as many samples of the same work, and keeps
# dwarf runs (8 KiB of stack copied per sample, unwound by perf script in the
# emulated guest) within minutes.
GUEST_SAMPLE_FREQUENCY = 999
# perf_jit runs in the guest sample more rarely still: `perf script` unwinds
# each dwarf sample in the emulated guest at ~0.5 s a sample (measured: 1,300
# samples of the seed took 725 s), so a run is kept to a few hundred samples.
GUEST_DWARF_SAMPLE_FREQUENCY = 250


def guest_event(cell: Cell) -> str:
    """The perf event a foreign cell samples with in its qemu-system guest (matrix.yaml, arch_facts)."""
    return cell.arch_facts.required_guest().event


def record_options(cell: Cell, mode: str | None, event: str | None = None,
                   frequency: int = SAMPLE_FREQUENCY) -> list[str]:
    """perf record options for a mode (None: frame-pointer call graphs, nothing activated) at frequency.
    event: the host's sampling event (perf_event.host_event; None: perf's default); a foreign cell's guest
    always samples with its arch's guest event (guest_event) at the guest's rates."""
    if cell.foreign:
        rate = GUEST_DWARF_SAMPLE_FREQUENCY if mode == "perf_jit" else GUEST_SAMPLE_FREQUENCY
        return mode_record_options(mode, rate, guest_event(cell), cell.variant.dwarf_stack_size)
    return mode_record_options(mode, frequency, event, cell.variant.dwarf_stack_size)


def mode_record_options(mode: str | None, frequency: int, event: str | None = None,
                        dwarf_stack: int | None = None) -> list[str]:
    """perf record options of a mode at a sampling frequency: frame-pointer call graphs, or for perf_jit the
    dwarf call graphs (dwarf_stack bytes of stack a sample; None: perf's default) with the monotonic clock
    that perf inject --jit needs.  A shell expands $(dwarf_mmap) (DWARF_MMAP_FUNCTION) in them."""
    options = [*(["-e", event] if event else []), "-F", str(frequency), "-g"]
    if mode == "perf_jit":
        options += ["-k", "1", "--call-graph", f"dwarf,{dwarf_stack}" if dwarf_stack else "dwarf", "-m", "$(dwarf_mmap)"]
    return options


def python_command(mode: str | None, activation: str, script: str,
                   args: tuple[str, ...] = (), python: str = "python3") -> tuple[list[str], dict[str, str]]:
    """The python3 command line and environment for a mode and an activation method; args go to the script.
    python: the interpreter to run (an external target's path; a cell's is python3 on PATH).

    activation: xoption (-X perf), env (PYTHONPERFSUPPORT=1 ...), sys_api
    (sys.activate_stack_trampoline around the script's run, as the howto shows).
    """
    args = [str(a) for a in args]
    if mode is None:
        return [python, script, *args], {}
    if activation == "xoption":
        return [python, "-X", MODE_XOPTION[mode], script, *args], {}
    if activation == "env":
        return [python, script, *args], {MODE_ENV[mode]: "1"}
    if activation == "sys_api":
        code = (
            "import runpy, sys; "
            + (f"sys.argv[:] = {[script, *args]!r}; " if args else "")
            + f"sys.activate_stack_trampoline({mode!r}); "
            f"runpy.run_path({script!r}, run_name='__main__'); "
            "sys.deactivate_stack_trampoline()"
        )
        return [python, "-c", code], {}
    raise ValueError(f"unknown activation {activation!r} (known: {', '.join(ACTIVATIONS)})")


def perf_run(cell: Cell, mode: str | None, activation: str = "xoption", script: str = SEED_SCRIPT,
             c_stack_kb: int | None = None, args: tuple[str, ...] = (), python: str = "python3",
             perf: str = "perf", event: str | None = None, env: dict[str, str] | None = None) -> PerfRun:
    """Shell script that records, (injects), and writes perf script output to /src/<output>.

    c_stack_kb raises the C stack limit (ulimit -s) for the recording, for scripts that nest
    deeper than the default 8 MiB allows once every Python call is a C call of the eval loop.
    python and perf: the interpreter and the perf command to run (an external target's, cpython_perf.check.external).
    event: the sampling event (record_options).  env: more of the interpreter's environment (PYTHON_JIT=1).
    """
    argv, mode_env = python_command(mode, activation, script, args, python)
    env = {**(env or {}), **mode_env}
    envs = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    perf = shlex.quote(perf)
    record = f"{perf} record {' '.join(record_options(cell, mode, event))} -o /src/perf.data -- "
    phases = f"/src/{PHASES_OUTPUT}"
    lines = [
        "set -eu",
        "cd /src",
        f": > {phases}",
        # timed(): run a phase and append its wall time in milliseconds
        f'timed() {{ phase=$1; shift; t=$(date +%s%N); "$@"; '
        f'echo "$phase $(( ($(date +%s%N) - t) / 1000000 ))" >> {phases}; }}',
        DWARF_MMAP_FUNCTION,
        *([f"ulimit -s {int(c_stack_kb)}"] if c_stack_kb else []),
        f"timed record {('env ' + envs + ' ') if envs else ''}{record}{shlex.join(argv)} > /src/python.stdout",
    ]
    data = "/src/perf.data"
    lines += perf_arch_lines(cell, mode, data, python)
    if mode == "perf_jit":
        # perf inject writes jitted-PID-N.so beside the dump, i.e. in the mounted /tmp.
        lines.append(f"timed inject {perf} inject -i /src/perf.data --jit --output /src/perf.jit.data")
        data = "/src/perf.jit.data"
    lines.append(f"echo \"data_bytes $(stat -c %s {data})\" >> {phases}")
    lines.append(f"timed script {perf} script -F {PERF_SCRIPT_FIELDS} -i {data} > /src/{SCRIPT_OUTPUT}")
    return PerfRun("\n".join(lines) + "\n")


# perf_data.py, standalone, beside the scripts in /src of a guest (the driver is not in the image)
PERF_DATA_SCRIPT = "perf_data.py"


def perf_arch_lines(cell: Cell, mode: str | None, data: str, python: str = "python3") -> list[str]:
    """Shell lines that rename the arch a dwarf recording (perf_jit) names, for an arch whose perf needs it
    (arch_facts' perf_arch), before perf inject and perf script read it; none elsewhere."""
    name = cell.arch_facts.perf_arch
    if mode != "perf_jit" or not name:
        return []
    return [f"{python} -E /src/{PERF_DATA_SCRIPT} set-arch {shlex.quote(data)} {shlex.quote(name)} > /dev/null"]


def parse_phases(text: str) -> dict[str, int]:
    """The phase timings (ms) and data size a perf run wrote: {"record": 812, "data_bytes": 123456, ...}."""
    phases = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name and value.strip().isdigit():
            phases[name] = int(value)
    return phases


# --------------------------------------------------------------------------
# How far dwarf unwinding can reach


EVAL_FUNCTION = "_PyEval_EvalFrameDefault"
DEFAULT_DWARF_STACK = 8192  # perf's default --call-graph dwarf dump size
_FRAME_ALLOC = (
    re.compile(r"\bsub\s+\$0x([0-9a-f]+),%rsp"),        # x86-64
    re.compile(r"\bsub\s+sp,\s*sp,\s*#0x([0-9a-f]+)"),  # aarch64
    re.compile(r"\bsub\s+sp,\s*sp,\s*#(\d+)\b"),
)


# The loop behind _PyEval_EvalFrameDefault where that is an assembly entry (the perf frame records of
# the 3.13 and 3.11 series)
EVAL_LOOP_BODY = "_PyEval_EvalLoopRecords"


def objdump_command(binary: str, function: str = EVAL_FUNCTION) -> str:
    """Shell command printing the first 80 instructions of function in binary (none of the next function)."""
    return (f"objdump -d --no-show-raw-insn {shlex.quote(binary)} "
            f"| awk '/^[0-9a-f]+ <{re.escape(function)}>:/{{f=1; n=0; print; next}} "
            f"/^[0-9a-f]+ <.*>:/{{f=0}} f{{print; if (++n > 80) f=0}}'")


def eval_loop_objdump_command(binary: str) -> str:
    """Shell command printing the first 80 instructions of the eval loop: _PyEval_EvalFrameDefault, or the
    loop behind it where that is only an assembly entry (perf frame records: the entries' frames are not
    the loop's)."""
    return (f"objdump -d --no-show-raw-insn {shlex.quote(binary)} "
            f"| awk '/^[0-9a-f]+ <{EVAL_FUNCTION}>:/{{f=1; n=0; next}} "
            f"/^[0-9a-f]+ <{EVAL_LOOP_BODY}>:/{{f=2; n=0; next}} /^[0-9a-f]+ <.*>:/{{f=0}} "
            f"f && n++ < 80 {{b[f] = b[f] $0 \"\\n\"}} END {{printf \"%s\", (2 in b) ? b[2] : b[1]}}'")


def frame_allocation(disassembly: str) -> int | None:
    """Bytes a function's prologue reserves on the stack (its first `sub ..., sp`)."""
    for line in disassembly.splitlines():
        for pattern in _FRAME_ALLOC:
            m = pattern.search(line)
            if m:
                return int(m.group(1), 16 if "0x" in pattern.pattern else 10)
    return None


def stack_dump_bytes(cell: Cell, mode: str | None) -> int | None:
    """The user-stack dump each perf sample carries in this mode (None: frame pointers, no dump)."""
    if mode != "perf_jit":
        return None
    return cell.variant.dwarf_stack_size or DEFAULT_DWARF_STACK


# What a dump holds besides the eval loop's own frames: the C frames below the innermost one (the
# leaf's callees: allocation, int arithmetic) and, between two eval frames, the call path of one
# Python call (vectorcall, the trampoline's C function and its assembly).  At -O0 these are tens to
# hundreds of bytes each; without the margin a dump that holds k eval frames only just (3.11-O0 in
# samply's 32000 bytes: 3 x 10288) showed the k-th Python frame in about half of the samples.
DUMP_LEAF_MARGIN = 2048
CALL_PATH_BYTES = 512


def dwarf_reachable_python_frames(cell: Cell, eval_frame_bytes: int | None, stack_bytes: int | None = None) -> int | None:
    """How many nested Python frames a dwarf stack dump can always unwind through.

    Reaching the trampoline of the k-th Python frame from the leaf means
    copying k eval-loop frames and the call paths between them; at -O0 one
    eval frame is ~18 KiB, so even perf's largest dump (65528 bytes) holds
    only three.  stack_bytes is the dump's size (default: the cell's perf_jit
    dump); None when unknown.
    """
    if not eval_frame_bytes:
        return None
    stack = stack_bytes or cell.variant.dwarf_stack_size or DEFAULT_DWARF_STACK
    return max(0, stack - DUMP_LEAF_MARGIN) // (eval_frame_bytes + CALL_PATH_BYTES)

"""activate's parts that need no process: gdb's answers read, the request state's layout as the series
declares it, errors for bad input (the real switch is conformance/test_remote_activation.py)."""

from __future__ import annotations

import re
import struct

import pytest

from cpython_perf.errors import DriverError
from cpython_perf.matrix import PROJECT_ROOT
from cpython_perf.record import activate, remote_request

GDB_OUTPUT = """[New LWP 13]
[Thread debugging using libthread_db enabled]
0x00007f55 in clock_nanosleep () from /proc/1/root/lib/x86_64-linux-gnu/libc.so.6
$1 = 4
$2 = 5
$3 = 3
$4 = 0x55d4a0c3b9c0
[Inferior 1 (process 1) detached]
"""

C_TYPES = {"char": "s", "uint32_t": "I", "int32_t": "i", "uint64_t": "Q"}


def test_gdb_answer_gives_the_newest_request_and_the_address():
    assert remote_request.parse_gdb(GDB_OUTPUT) == (5, 0x55d4a0c3b9c0)


def test_gdb_answer_without_values_is_an_error():
    with pytest.raises(ValueError):
        remote_request.parse_gdb("No symbol table is loaded.\n")


@pytest.mark.parametrize("output, words", [
    ('No symbol "_PyPerf_RemoteRequest" in current context.', "not built with the cpython-perf series"),
    ("ptrace: Operation not permitted.", "CAP_SYS_PTRACE"),
    ("ptrace: No such process.", "no process"),
])
def test_gdb_failures_say_what_to_do(output, words):
    assert words in remote_request.why_gdb_failed(output, 7)


def _declared_layout(text: str) -> str:
    end = text.index("} _PyPerf_RemoteState;")
    body = text[text.rindex("typedef struct {", 0, end):end]
    fmt = "="
    for ctype, name, size in re.findall(r"^\s*(\w+) (\w+)(?:\[(\d+)\])?;", body, re.M):
        fmt += (size or "") + C_TYPES[ctype]
    return fmt


@pytest.mark.parametrize("where", ["Python-additions/Include/internal/pycore_perf_trampoline.h",
                                   "patches/3.13/0029-perf-trampoline-switched-from-outside-the-process.patch"])
def test_the_layout_read_is_the_layout_the_series_declares(where):
    text = (PROJECT_ROOT / where).read_text()
    if where.endswith(".patch"):
        text = "\n".join(line[1:] for line in text.splitlines() if line.startswith("+"))
    assert _declared_layout(text) == remote_request.LAYOUT.format
    assert f'"{remote_request.MAGIC[:-1].decode()}"' in text
    assert struct.calcsize(remote_request.LAYOUT.format) == 288


@pytest.mark.parametrize("kwargs, words", [
    ({"container": None, "pid": None}, "name the process"),
    ({"container": None, "pid": "abc"}, "a process id"),
    ({"container": None, "pid": "0"}, "a process id"),
    ({"container": "web", "pid": None, "host_gdb": True}, "not --container"),
])
def test_bad_input_is_refused_before_anything_runs(kwargs, words):
    with pytest.raises(DriverError, match=words):
        activate.activate(None, None, mode="perf", timeout=1, **kwargs)


def test_describe_says_what_happened():
    assert "done" in activate.describe({"mode": "perf", "state": "done", "active": True, "message": "perf"}, "p 1")
    assert "refused" in activate.describe({"mode": "perf", "state": "failed", "message": "RuntimeError: x"}, "p")
    assert "pending" in activate.describe({"mode": "perf", "state": "pending", "message": "not yet"}, "p")
    assert "could not ask" in activate.describe({"error": "no gdb"}, "p")
    assert activate.report_of('noise\n{"pid": 1, "state": "done"}\n') == {"pid": 1, "state": "done"}


def test_gdb_takes_the_executable_through_the_process_root_only():
    """gdb is given the process (-p) and its root as the sysroot, never an executable path: a named one is
    resolved in gdb's own mount namespace, where the same path may be another interpreter (the tools image's
    /usr/bin/python3.13 beside Debian's in a container), whose symbols gdb would then read."""
    command = remote_request.gdb_command(4242, remote_request.MODES["perf"])
    assert command[command.index("-p") + 1] == "4242"
    assert "set sysroot /proc/4242/root" in command
    positional = [c for i, c in enumerate(command[1:], 1)
                  if not c.startswith("-") and not command[i - 1].startswith("-")]
    assert positional == [], f"an executable named to gdb: {positional}"
    assert not any("/exe" in c for c in command)

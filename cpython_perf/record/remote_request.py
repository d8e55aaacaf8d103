"""Ask a running interpreter to switch its perf trampoline, with gdb; stdlib only.

Runs where the target's /proc is visible (the host, or the tools image with the
target container's pid namespace): `python3 remote_request.py PID MODE TIMEOUT`.
gdb attaches and calls _PyPerf_RemoteRequest(MODE) in each thread of the
target (the series' async-signal-safe request: it stores the request and sets
the eval breaker, nothing else), prints where _PyPerf_Remote is and detaches;
the interpreter then switches at its next safe point, in a thread that runs
Python code.  This script reads the outcome from /proc/PID/mem until the
request is handled or TIMEOUT seconds pass, and prints one JSON line:

  {"pid": P, "mode": M, "state": "done" | "failed" | "pending", "active": bool, "message": "..."}

Exit status: 0 done, 1 failed (the interpreter refused: message says why),
3 pending (no thread ran Python code in time: the interpreter acts when one
does), 2 could not ask (no gdb, no permission, not an interpreter with the
series): the JSON's "error" says what to do.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import time

MODES = {"off": 0, "perf": 1, "perf_jit": 2}
MAGIC = b"cpython-perf rq\0"
# _PyPerf_RemoteState: magic[16], u32 version, i32 mode, u64 requested, u64 handled, i32 result, i32 active,
# char message[240]
LAYOUT = struct.Struct("=16sIiQQii240s")
DONE, FAILED = 0, 1
NO_SERIES = "not built with the cpython-perf series"   # the answer where the interpreter has no request
DONE_EXIT, FAILED_EXIT, CANNOT_ASK, PENDING_EXIT = 0, 1, 2, 3


def gdb_command(pid: int, mode: int) -> list[str]:
    call = f"((unsigned long long (*)(int))_PyPerf_RemoteRequest)({mode})"
    # The executable and its libraries through the process's root: gdb may run in another mount namespace
    # (the tools image beside a container's process), where the paths the process names do not exist or
    # are other files.  No executable is named: gdb takes the process's own path under the sysroot.  Named
    # (/proc/PID/exe, or a path under /proc/PID/root), gdb resolves its links to the process's path as it
    # reads in gdb's own namespace, and loads that file's symbols where one exists (the tools image's own
    # /usr/bin/python3.13 beside Debian's python3.13 in a container).
    return ["gdb", "-nx", "-batch", "-iex", f"set sysroot /proc/{pid}/root", "-p", str(pid),
            "-ex", "set confirm off", "-ex", "set pagination off",
            "-ex", f"thread apply all -q print {call}",
            "-ex", "print/x (unsigned long)&_PyPerf_Remote",
            "-ex", "detach"]


def parse_gdb(output: str) -> tuple[int, int]:
    """(the highest request number gdb's calls returned, the address of _PyPerf_Remote)."""
    values = re.findall(r"^\$\d+ = (0x[0-9a-f]+|\d+)\s*$", output, re.M)
    if len(values) < 2:
        raise ValueError("gdb printed no request number and address")
    address = int(values[-1], 16)
    numbers = [int(v, 0) for v in values[:-1]]
    return max(numbers), address


def why_gdb_failed(output: str, pid: int) -> str:
    if re.search(r"No symbol \"?_PyPerf_Remote", output):
        return (f"process {pid} has no _PyPerf_RemoteRequest: its interpreter is {NO_SERIES} "
                "(3.14 and later: sys.remote_exec() can run sys.activate_stack_trampoline() in it)")
    if "ptrace: Operation not permitted" in output or "Could not attach" in output:
        return (f"gdb may not attach to process {pid} (ptrace): run as root or as the process's user, with "
                "kernel.yama.ptrace_scope 0 or 1 and CAP_SYS_PTRACE (docker run --cap-add SYS_PTRACE); a process "
                "already traced (a debugger, strace) cannot be attached")
    if "No such process" in output:
        return f"no process {pid} here"
    tail = " | ".join(line for line in output.strip().splitlines()[-4:])
    return f"gdb could not make the request: {tail}"


def read_state(pid: int, address: int) -> tuple:
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        mem.seek(address)
        return LAYOUT.unpack(mem.read(LAYOUT.size))


def request(pid: int, mode_name: str, timeout: float) -> tuple[int, dict]:
    report = {"pid": pid, "mode": mode_name}
    if shutil.which("gdb") is None:
        return CANNOT_ASK, {**report, "error": "no gdb here: install it (apt install gdb), or use the tools image "
                                               "(python -m cpython_perf activate without --host-gdb)"}
    if not os.path.exists(f"/proc/{pid}"):
        return CANNOT_ASK, {**report, "error": f"no process {pid} in this pid namespace"}
    done = subprocess.run(gdb_command(pid, MODES[mode_name]), capture_output=True, text=True, timeout=120)
    output = done.stdout + done.stderr
    try:
        number, address = parse_gdb(done.stdout)
    except ValueError:
        return CANNOT_ASK, {**report, "error": why_gdb_failed(output, pid)}
    if number == 0:
        return CANNOT_ASK, {**report, "error": "the interpreter refused the request (not running, or an unknown mode)"}
    deadline = time.monotonic() + timeout
    while True:
        try:
            magic, _version, _mode, requested, handled, result, active, message = read_state(pid, address)
        except OSError as exc:
            return CANNOT_ASK, {**report, "error": f"cannot read /proc/{pid}/mem ({exc.strerror}): the same "
                                                   "permission as gdb's is needed"}
        if magic != MAGIC:
            return CANNOT_ASK, {**report, "error": f"what /proc/{pid}/mem holds at _PyPerf_Remote is not the "
                                                   "request state this tool knows (a newer layout?)"}
        text = message.split(b"\0", 1)[0].decode("utf-8", "replace")
        if handled >= number:
            state = "done" if result == DONE else "failed"
            return (DONE_EXIT if result == DONE else FAILED_EXIT,
                    {**report, "state": state, "active": active == 1, "message": text, "request": number})
        if time.monotonic() >= deadline:
            return PENDING_EXIT, {**report, "state": "pending", "request": number,
                                  "message": f"not handled within {timeout:g} s: no thread of the interpreter ran "
                                             "Python code (all wait in system calls or C code); it switches when "
                                             "one does"}
        time.sleep(0.05)


def find_python(proc: str = "/proc") -> list[int]:
    """Processes of this pid namespace whose executable is named python*."""
    found = []
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            exe = os.readlink(f"{proc}/{entry}/exe")
        except OSError:
            continue
        if os.path.basename(exe).startswith("python"):
            found.append(int(entry))
    return sorted(found)


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in MODES:
        print(json.dumps({"error": "usage: remote_request.py PID|auto off|perf|perf_jit TIMEOUT"}))
        return CANNOT_ASK
    pid_text, mode_name, timeout = argv[0], argv[1], float(argv[2])
    if pid_text == "auto":
        pids = [p for p in find_python() if p != os.getpid()]
        if len(pids) != 1:
            print(json.dumps({"mode": mode_name, "error": f"{len(pids)} Python processes here ({pids}): name one "
                                                          "with --pid"}))
            return CANNOT_ASK
        pid = pids[0]
    else:
        pid = int(pid_text)
    status, report = request(pid, mode_name, timeout)
    print(json.dumps(report))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

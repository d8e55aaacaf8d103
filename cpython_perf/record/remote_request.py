"""Ask a running interpreter to switch its perf trampoline, with gdb; stdlib only.

Runs where the target's /proc is visible (the host, or the tools image with the
target container's pid namespace): `python3 remote_request.py PID MODE TIMEOUT`.
gdb attaches and calls _PyPerf_RemoteRequest(MODE) in each thread of the
target (the series' async-signal-safe request: it stores the request and sets
the eval breaker, nothing else), prints where _PyPerf_Remote is and detaches;
the interpreter then switches at its next safe point, in a thread that runs
Python code.  This script reads the outcome from /proc/PID/mem until the
request is handled or TIMEOUT seconds pass, and prints one JSON line:

  {"pid": P, "mode": M, "state": "done" | "failed" | "pending", "active": bool | null, "message": "..."}

("active" is null where the interpreter could not tell.)  Exit status: 0 done,
1 failed (the interpreter refused: message says why), 3 pending (no thread ran
Python code in time: the interpreter acts when one does), 2 could not ask (no
gdb, no permission, not an interpreter with the series, an answer that is not
one): the JSON's "error" says what to do or what was wrong.

The operator runs this as root against processes nobody vetted, so everything
the target controls is treated as hostile: its files (gdb reads them through
the sysroot /proc/PID/root), its memory (the answer) and its processes.

What gdb is told (gdb_options), and why:

- `-nx -nh`: no gdbinit or gdbearlyinit of any directory, the system's or
  $HOME's.  Neither covers what gdb loads for the files it reads, so, with
  -iex, before the sysroot is set and before gdb attaches (that is, before it
  reads any file of the target):
- `set auto-load off`: gdb loads nothing for the objfiles it reads: no
  `<objfile>-gdb.py` or `-gdb.gdb` script, no script named or held in a
  `.debug_gdb_scripts` section, no local .gdbinit, no libthread_db from the
  inferior's directories ($pdir).  gdb's safe-path check does not stand in for
  this: it compares a file's realpath, and glibc's realpath() of
  /proc/PID/root/X is /X when the target has its own mount namespace (the
  kernel names that root "/"), so a container's file at the path of one of
  gdb's own files under /usr/share/gdb/auto-load or /usr/lib/debug passes it.
- `set auto-load safe-path /nonexistent`: nothing is safe to load, should
  anything turn auto-loading on again.
- `set libthread-db-search-path $sdir`: libthread_db is loaded, as gdb's own
  libraries are, from gdb's system directories only, never from beside the
  target's libpthread ($pdir) under the sysroot: that library is code gdb
  runs.  Where gdb's libthread_db does not match the target's C library, gdb
  says so and names threads by their LWP; it still lists and enters every one.
- `set debuginfod enabled off` (gdb 12 and later): gdb asks no server for
  debug information or sources; DEBUGINFOD_URLS is also left out of gdb's
  environment, which covers gdb 10 and 11, which have no such setting.
- `set source open off` (gdbs of 2019 on): gdb opens no source file.  The
  target's debug information names them, and gdb opens them in its own file
  system, printing lines of what it finds.
- `set sysroot /proc/PID/root`, last: where the target's files are.
The two settings that older gdbs lack are passed only where `show` knows them
(gdb_settings), so an older gdb does not take them for an assignment.  Checked
with Debian 12's gdb 13.1 (the host's) and sid's gdb 18.1 (what the tools image
installs): each setting exists and is in force (`show auto-load`), gdb attaches,
lists every thread (with and without a matching libthread_db) and finds both
symbols; with 18.1 a 3.13 cell's busy and multi-threaded targets were switched.
With the options before these, both ran a script planted in a
`.debug_gdb_scripts` section of a library of a process in its own mount
namespace; with these neither does (tests/record/test_activate.py does both).

What is left: gdb still parses the target's ELF files and debug information,
and opens the separate debug and .dwo/.dwz files they name.  Absolute links
under /proc/PID/root, and (gdb 13) the target's executable where gdb's own file
system has a file at its path, lead into gdb's own file system.  Nothing there
is run, but a gdb parser bug, or a file that blocks or acts when opened (a
FIFO, a device), is within the target's reach.  That is why gdb runs in the
tools image by default, whose file system holds nothing of the host, and why
gdb is stopped after GDB_TIMEOUT seconds.

What is read back is checked before it is believed.  gdb's output is kept to
its last OUTPUT_KEPT bytes of each stream; the request numbers must be decimal
and below 2**63 (0 is a refusal), the address hexadecimal.  The address must
lie, with the whole structure, in one private readable-writable mapping of the
target that is not a device's (/proc/PID/maps, of which the first MAPS_READ
bytes are read and malformed lines ignored), exactly LAYOUT.size bytes are
read, and every field must hold what the series writes there (parse_state).
Text from the target (the message, gdb's lines in an error) has its control
characters removed before it is printed.  Anything else is "could not ask",
saying what was wrong.  find_python (PID auto) reads the executables of at most
PROCESSES_LOOKED_AT processes and names at most PIDS_SHOWN of them.
"""

from __future__ import annotations

import collections
import json
import os
import re
import selectors
import shutil
import struct
import subprocess
import sys
import time
import unicodedata

MODES = {"off": 0, "perf": 1, "perf_jit": 2}
MAGIC = b"cpython-perf rq\0"
# _PyPerf_RemoteState: magic[16], u32 version, i32 mode, u64 requested, u64 handled, i32 result, i32 active,
# char message[240]
LAYOUT = struct.Struct("=16sIiQQii240s")
VERSIONS = (1,)                     # the layouts this script reads
DONE, FAILED = 0, 1
ACTIVE = {1: True, 0: False, -1: None}   # -1: sys.is_stack_trampoline_active() failed in the interpreter
REQUEST_LIMIT = 2 ** 63             # request numbers are below it
XSAVE_REFUSED = "this gdb cannot call a function in the process on this CPU"
NO_SERIES = "not built with the cpython-perf series"   # the answer where the interpreter has no request
DONE_EXIT, FAILED_EXIT, CANNOT_ASK, PENDING_EXIT = 0, 1, 2, 3

GDB_TIMEOUT = 120                   # seconds gdb may take to attach, call and detach
OUTPUT_KEPT = 64 * 1024             # bytes of each of gdb's streams that are kept (the last ones)
MAPS_READ = 4 * 1024 * 1024         # bytes of /proc/PID/maps that are looked at
PROCESSES_LOOKED_AT = 100_000       # /proc entries find_python reads the executable of, at most
PIDS_SHOWN = 20
# The settings of gdb_options that older gdbs lack, and their values.
OPTIONAL_SETTINGS = {"debuginfod enabled": "off", "source open": "off"}
MAP_LINE = re.compile(rb"([0-9a-f]{1,16})-([0-9a-f]{1,16}) ([r-][w-][x-][ps]) [0-9a-f]+ [0-9a-f]+:[0-9a-f]+ \d+"
                      rb"(?: +(.*))?")
VALUE_LINE = re.compile(r"^\$\d{1,9} = (0x[0-9a-f]{1,16}|\d{1,20})[ \t\r]*$", re.M)

State = collections.namedtuple("State", "version mode requested handled result active message")


class BadState(ValueError):
    """What the target holds at the address gdb printed is not a request state to believe."""


def printable(text: str) -> str:
    """text without control and format characters (escape sequences, line breaks, bidirectional overrides)."""
    return "".join(c for c in text if not unicodedata.category(c).startswith("C"))


def gdb_settings(gdb: str = "gdb") -> frozenset[str]:
    """The OPTIONAL_SETTINGS that this gdb has: those its `show` knows (in batch mode gdb exits 1 where its last
    command failed)."""
    return frozenset(name for name in OPTIONAL_SETTINGS
                     if run_bounded([gdb, "-nx", "-nh", "-batch", "-ex", f"show {name}"], 30)[0] == 0)


def gdb_options(sysroot: str, settings=frozenset(OPTIONAL_SETTINGS)) -> list[str]:
    """gdb's options before the process is named: nothing loaded from the target's files (module docstring)."""
    early = ["set auto-load off", "set auto-load safe-path /nonexistent", "set libthread-db-search-path $sdir"]
    early += [f"set {name} {value}" for name, value in OPTIONAL_SETTINGS.items() if name in settings]
    early.append(f"set sysroot {sysroot}")
    return ["-nx", "-nh", "-batch"] + [a for command in early for a in ("-iex", command)]


def gdb_environment() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name != "DEBUGINFOD_URLS"}


def gdb_command(pid: int, mode: int, settings=frozenset(OPTIONAL_SETTINGS)) -> list[str]:
    call = f"((unsigned long long (*)(int))_PyPerf_RemoteRequest)({mode})"
    # The executable and its libraries through the process's root: gdb may run in another mount namespace
    # (the tools image beside a container's process), where the paths the process names do not exist or
    # are other files.  No executable is named: gdb takes the process's own path under the sysroot.  Named
    # (/proc/PID/exe, or a path under /proc/PID/root), gdb resolves its links to the process's path as it
    # reads in gdb's own namespace, and loads that file's symbols where one exists (the tools image's own
    # /usr/bin/python3.13 beside Debian's python3.13 in a container).
    return ["gdb", *gdb_options(f"/proc/{pid}/root", settings), "-p", str(pid),
            "-ex", "set confirm off", "-ex", "set pagination off",
            "-ex", f"thread apply all -q print {call}",
            "-ex", "print/x (unsigned long)&_PyPerf_Remote",
            "-ex", "detach"]


def run_bounded(command: list[str], timeout: float, keep: int = OUTPUT_KEPT,
                env: dict[str, str] | None = None) -> tuple[int | None, str, str]:
    """Run command: (its exit status, None where it was killed after timeout seconds; the last `keep` bytes of
    its stdout and of its stderr, from a line's start, decoded with replacement)."""
    tails = (bytearray(), bytearray())
    cut = [False, False]
    killed = False
    with subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=env) as process:
        with selectors.DefaultSelector() as selector:
            for which, stream in enumerate((process.stdout, process.stderr)):
                selector.register(stream, selectors.EVENT_READ, which)
            deadline = time.monotonic() + timeout
            while selector.get_map() and not killed:
                left = deadline - time.monotonic()
                if left <= 0:
                    process.kill()
                    killed = True
                    continue
                for key, _events in selector.select(left):
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        selector.unregister(key.fileobj)
                        continue
                    tail = tails[key.data]
                    tail += chunk
                    if len(tail) > keep:
                        del tail[:len(tail) - keep]
                        cut[key.data] = True
        status = process.wait()
    texts = []
    for tail, was_cut in zip(tails, cut):
        if was_cut:
            del tail[:tail.find(b"\n") + 1]      # the first line is a part of one
        texts.append(tail.decode("utf-8", "replace"))
    return (None if killed else status), texts[0], texts[1]


def parse_gdb(output: str) -> tuple[int, int]:
    """(the highest request number gdb's calls returned, the address of _PyPerf_Remote)."""
    values = VALUE_LINE.findall(output)
    if len(values) < 2:
        raise ValueError("gdb printed no request number and address")
    *numbers, address = values
    if not address.startswith("0x") or any(v.startswith("0x") for v in numbers):
        raise ValueError(f"gdb printed {', '.join(values[-4:])}: not request numbers followed by an address")
    number = max(int(v) for v in numbers)
    if number >= REQUEST_LIMIT:
        raise ValueError(f"gdb printed request number {number}: not one the interpreter gives")
    return number, int(address, 16)


def why_gdb_failed(output: str, pid: int) -> str:
    # gdb names the symbol it lacks, or, where the executable and its libraries have no symbol of that name
    # and no debug information at all (a stripped distribution build), says no symbol table is loaded
    if re.search(r"No symbol \"?_PyPerf_Remote", output) or "No symbol table is loaded" in output:
        return (f"process {pid} has no _PyPerf_RemoteRequest: its interpreter is {NO_SERIES} "
                "(3.14 and later: sys.remote_exec() can run sys.activate_stack_trampoline() in it)")
    if "ptrace: Operation not permitted" in output or "Could not attach" in output:
        return (f"gdb may not attach to process {pid} (ptrace): run as root or as the process's user, with "
                "kernel.yama.ptrace_scope 0 or 1 and CAP_SYS_PTRACE (docker run --cap-add SYS_PTRACE); a process "
                "already traced (a debugger, strace) cannot be attached")
    if "No such process" in output:
        return f"no process {pid} here"
    if "Couldn't write extended state status" in output:
        return (f"{XSAVE_REFUSED}: gdb could not write the thread's extended register state (XSAVE) to call the "
                "request; gdb 13 fails so on CPUs with AMX registers: use the tools image's gdb (leave out "
                "--host-gdb) or a newer gdb")
    tail = " | ".join(printable(line)[:300] for line in output.strip().splitlines()[-4:])
    return f"gdb could not make the request: {tail}"


def writable_mapping(pid: int, address: int, size: int, limit: int = MAPS_READ) -> bool:
    """Whether [address, address + size) lies in one private readable-writable mapping of pid that is not a
    device's, among those of the first `limit` bytes of its /proc/PID/maps."""
    with open(f"/proc/{pid}/maps", "rb") as maps:
        text = maps.read(limit)
    return mapping_holds(text, address, size, complete=len(text) < limit)


def mapping_holds(maps: bytes, address: int, size: int, complete: bool = True) -> bool:
    """writable_mapping, of the text of a maps file (complete: not cut short, so its last line is whole).
    Lines that are not the kernel's are ignored."""
    lines = maps.split(b"\n")
    if not complete:
        lines.pop()                               # perhaps a part of a line
    for line in lines:
        match = MAP_LINE.fullmatch(line)
        if match is None:
            continue
        start, end = int(match[1], 16), int(match[2], 16)
        perms, path = match[3], match[4] or b""
        if (start <= address and address + size <= end and perms.startswith(b"rw") and perms.endswith(b"p")
                and not path.startswith(b"/dev/")):
            return True
    return False


def parse_state(data: bytes, number: int = 1) -> State:
    """The request state in data (LAYOUT.size bytes), after request `number` was made; BadState where a field
    holds what the series never writes there."""
    if len(data) != LAYOUT.size:
        raise BadState(f"{len(data)} bytes, not the {LAYOUT.size} of the request state")
    magic, version, mode, requested, handled, result, active, message = LAYOUT.unpack(data)
    if magic != MAGIC:
        raise BadState(f"the magic is {magic!r}, not {MAGIC!r}")
    if version not in VERSIONS:
        raise BadState(f"layout version {version}: this tool reads version {', '.join(map(str, VERSIONS))} "
                       "(a newer series?)")
    if mode not in MODES.values():
        raise BadState(f"mode {mode} is none of {sorted(MODES.values())}")
    if not number <= requested < REQUEST_LIMIT:
        raise BadState(f"requested {requested}, after request {number} was made")
    if handled > requested:
        raise BadState(f"handled {handled} is past requested {requested}")
    if result not in (DONE, FAILED):
        raise BadState(f"result {result} is neither {DONE} (done) nor {FAILED} (failed)")
    if active not in ACTIVE:
        raise BadState(f"active {active} is none of {sorted(ACTIVE)}")
    end = message.find(b"\0")
    if end < 0:
        raise BadState(f"the message has no NUL in its {len(message)} bytes")
    text = printable(message[:end].decode("utf-8", "replace"))
    return State(version, mode, requested, handled, result, ACTIVE[active], text)


def read_state(pid: int, address: int, number: int = 1) -> State:
    """The request state at address in pid's memory (parse_state); BadState where it cannot be the one, OSError
    where the process cannot be read."""
    if not 0 < address < 2 ** 64 - LAYOUT.size:
        raise BadState(f"address {address:#x} is outside any address space")
    if not writable_mapping(pid, address, LAYOUT.size):
        raise BadState(f"{address:#x}-{address + LAYOUT.size:#x} is not inside one private readable-writable "
                       f"mapping of process {pid} (/proc/{pid}/maps)")
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        mem.seek(address)
        data = mem.read(LAYOUT.size)
    if len(data) != LAYOUT.size:
        raise BadState(f"a short read: {len(data)} of the {LAYOUT.size} bytes at {address:#x}")
    return parse_state(data, number)


def request(pid: int, mode_name: str, timeout: float) -> tuple[int, dict]:
    report = {"pid": pid, "mode": mode_name}
    if shutil.which("gdb") is None:
        return CANNOT_ASK, {**report, "error": "no gdb here: install it (apt install gdb), or use the tools image "
                                               "(python -m cpython_perf activate without --host-gdb)"}
    if not os.path.exists(f"/proc/{pid}"):
        return CANNOT_ASK, {**report, "error": f"no process {pid} in this pid namespace"}
    command = gdb_command(pid, MODES[mode_name], gdb_settings())
    status, out, err = run_bounded(command, GDB_TIMEOUT, env=gdb_environment())
    if status is None:
        return CANNOT_ASK, {**report, "error": f"gdb did not finish within {GDB_TIMEOUT} s (attaching to process "
                                               f"{pid}, reading its files, calling it): it was stopped"}
    try:
        number, address = parse_gdb(out)
    except ValueError as exc:
        why = why_gdb_failed(out + "\n" + err, pid)
        return CANNOT_ASK, {**report, "error": f"{exc} ({why})" if VALUE_LINE.search(out) else why}
    if number == 0:
        return CANNOT_ASK, {**report, "error": "the interpreter refused the request (not running, or an unknown mode)"}
    deadline = time.monotonic() + timeout
    while True:
        try:
            state = read_state(pid, address, number)
        except BadState as exc:
            return CANNOT_ASK, {**report, "error": f"process {pid} at _PyPerf_Remote ({address:#x}) does not hold "
                                                   f"the request state this tool knows: {exc}"}
        except PermissionError as exc:
            return CANNOT_ASK, {**report, "error": f"cannot read process {pid} ({exc.strerror}): the same "
                                                   "permission as gdb's is needed"}
        except OSError as exc:
            return CANNOT_ASK, {**report, "error": f"cannot read the request state of process {pid} at "
                                                   f"{address:#x} ({exc.strerror})"}
        if state.handled >= number:
            done = state.result == DONE
            return (DONE_EXIT if done else FAILED_EXIT,
                    {**report, "state": "done" if done else "failed", "active": state.active,
                     "message": state.message, "request": number})
        if time.monotonic() >= deadline:
            return PENDING_EXIT, {**report, "state": "pending", "request": number,
                                  "message": f"not handled within {timeout:g} s: no thread of the interpreter ran "
                                             "Python code (all wait in system calls or C code); it switches when "
                                             "one does"}
        time.sleep(0.05)


def find_python(proc: str = "/proc", limit: int = PROCESSES_LOOKED_AT) -> list[int]:
    """Processes of this pid namespace whose executable is named python*.  A process whose executable cannot be
    read (gone, not ours, a kernel thread) is left out; ValueError where there are more than `limit`."""
    found = []
    with os.scandir(proc) as entries:
        for seen, entry in enumerate(e for e in entries if e.name.isascii() and e.name.isdigit()):
            if seen >= limit:
                raise ValueError(f"more than {limit} processes here")
            try:
                exe = os.readlink(f"{proc}/{entry.name}/exe")
            except OSError:
                continue
            if os.path.basename(exe).startswith("python"):
                found.append(int(entry.name))
    return sorted(found)


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in MODES:
        print(json.dumps({"error": "usage: remote_request.py PID|auto off|perf|perf_jit TIMEOUT"}))
        return CANNOT_ASK
    pid_text, mode_name, timeout = argv[0], argv[1], float(argv[2])
    if pid_text == "auto":
        try:
            pids = [p for p in find_python() if p != os.getpid()]
        except (OSError, ValueError) as exc:
            print(json.dumps({"mode": mode_name, "error": f"cannot tell the Python process here ({exc}): name one "
                                                          "with --pid"}))
            return CANNOT_ASK
        if len(pids) != 1:
            shown = ", ".join(map(str, pids[:PIDS_SHOWN])) + (", ..." if len(pids) > PIDS_SHOWN else "")
            print(json.dumps({"mode": mode_name, "error": f"{len(pids)} Python processes here ([{shown}]): name one "
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

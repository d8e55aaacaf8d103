"""activate without Docker: gdb's answers read, the request state's layout as the series declares it, errors
for bad input (the real switch is conformance/test_remote_activation.py).

Then what a hostile target can do to the command that runs as root beside it: the options that keep gdb from
loading anything from the target's files (and a script planted in a container's library, which gdb runs
without them and not with them), and the answer read back: real processes of this machine hold request
states, valid and not, at addresses inside and outside their mappings, and a gdb stand-in on PATH prints
what a hostile process could make gdb print.
"""

from __future__ import annotations

import json
import mmap
import os
import platform
import re
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

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


# What keeps gdb from loading anything from the target's files

HARDENING = ["set auto-load off", "set auto-load safe-path /nonexistent", "set libthread-db-search-path $sdir",
             "set debuginfod enabled off", "set source open off"]


def early_commands(command: list[str]) -> list[str]:
    return [command[i + 1] for i, c in enumerate(command[:-1]) if c == "-iex"]


def test_gdb_loads_nothing_from_the_target_before_it_reads_a_file():
    """No gdbinit; auto-loading off, nothing safe to load, libthread_db from gdb's own directories, no
    debuginfod, no source file opened: all before the sysroot is set and before gdb attaches (-p)."""
    command = remote_request.gdb_command(4242, remote_request.MODES["perf"])
    assert {"-nx", "-nh"} <= set(command[:command.index("-p")])
    early = early_commands(command)
    assert early[:len(HARDENING)] == HARDENING
    assert early[len(HARDENING):] == ["set sysroot /proc/4242/root"]
    last_early = max(i for i, c in enumerate(command) if c == "-iex")
    assert last_early < command.index("-p")
    assert command[1:command.index("-p")] == remote_request.gdb_options("/proc/4242/root")


def test_an_older_gdb_is_not_given_the_settings_it_lacks():
    """gdb before 12 has no `set debuginfod`, older ones no `set source open`: there, they would be read as an
    assignment to a variable of the program."""
    early = early_commands(remote_request.gdb_options("/proc/7/root", settings=frozenset()))
    assert early == HARDENING[:3] + ["set sysroot /proc/7/root"]


def fake_gdb(directory: Path, body: str) -> Path:
    """A gdb on PATH: a shell script that answers `show NAME` with exit 0 unless NAME is in $LACKS, and does
    body for anything else."""
    directory.mkdir(exist_ok=True)
    gdb = directory / "gdb"
    gdb.write_text('#!/bin/sh\nfor a in "$@"; do case "$a" in "show "*)\n'
                   '  case " $LACKS " in *" ${a#show } "*) echo "Undefined show command: \\"${a#show }\\"." >&2;'
                   ' exit 1;; esac; exit 0;; esac; done\n' + body + "\n")
    gdb.chmod(0o755)
    return gdb


def test_which_settings_a_gdb_has_is_asked_of_it(tmp_path, monkeypatch):
    gdb = fake_gdb(tmp_path / "bin", "exit 0")
    assert remote_request.gdb_settings(str(gdb)) == frozenset(remote_request.OPTIONAL_SETTINGS)
    monkeypatch.setenv("LACKS", "debuginfod enabled")
    assert remote_request.gdb_settings(str(gdb)) == {"source open"}
    if shutil.which("gdb"):
        version = subprocess.run(["gdb", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
        if re.search(r" (1[2-9]|[2-9]\d)\.\d", version):
            assert remote_request.gdb_settings() == frozenset(remote_request.OPTIONAL_SETTINGS), version


def test_debuginfod_servers_are_not_in_gdbs_environment(monkeypatch):
    monkeypatch.setenv("DEBUGINFOD_URLS", "https://debuginfod.example")
    assert "DEBUGINFOD_URLS" not in remote_request.gdb_environment()
    assert remote_request.gdb_environment()["PATH"] == os.environ["PATH"]


# A script planted in a container's library: run by gdb with the options before these, not with them

NAMESPACE_CHILD = r"""
import ctypes, os, sys
# Own mount namespace, root pivoted to argv[1] and the old root detached: as a container's process, whose
# /proc/PID/root the kernel names "/" from outside.  Then exec argv[3:] with LD_PRELOAD=argv[2].
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNS, MS_REC, MS_PRIVATE, MS_BIND, MNT_DETACH = 0x20000, 0x4000, 1 << 18, 0x1000, 2
def check(result):
    if result != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
root = sys.argv[1].encode()
check(libc.unshare(CLONE_NEWNS))
check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None))
check(libc.mount(root, root, None, MS_BIND | MS_REC, None))
os.chdir(root)
check(libc.syscall(int(os.environ["SYS_PIVOT_ROOT"]), b".", b"oldroot"))
os.chdir("/")
check(libc.umount2(b"/oldroot", MNT_DETACH))
os.execve(sys.argv[3], sys.argv[3:], {"LD_PRELOAD": sys.argv[2]})
"""
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
STUB_LIBRARIES = ("libdl.so.2", "libutil.so.1", "libanl.so.1", "librt.so.1", "libpthread.so.0")


def gdb_shows(setting: str) -> str:
    out = subprocess.run(["gdb", "-nx", "-nh", "-batch", "-ex", f"show {setting}"], capture_output=True,
                         text=True).stdout
    found = re.search(r'"(.*)"', out)
    return found[1] if found else ""


def a_file_gdb_deems_safe() -> Path | None:
    """A file of this machine where gdb's default safe-path allows auto-loading (under its data directory's
    auto-load/ or its debug-file-directory): a container's file at the same path passes gdb's check."""
    for top in (Path(gdb_shows("data-directory")) / "auto-load", Path(gdb_shows("debug-file-directory"))):
        for n, path in enumerate(p for p in top.rglob("*") if p.is_file() and not p.is_symlink()):
            if n > 10000:
                break
            if path.resolve() == path:
                return path
    return None


def libraries_of(program: str) -> list[Path]:
    out = subprocess.run(["ldd", program], capture_output=True, text=True, check=True).stdout
    return [Path(p) for p in re.findall(r"(/\S+) \(0x", out)]


def planted_container(tmp_path: Path, marker: Path):
    """A process in its own mount namespace (a container's, as far as gdb can tell) running a copy of sleep,
    with a library preloaded whose .debug_gdb_scripts section holds a Python script that writes marker.  The
    library's path in the container is that of a file of this machine under gdb's safe-path."""
    if shutil.which("gdb") is None:
        pytest.skip("no gdb on this machine (apt install gdb)")
    if os.geteuid() != 0:
        pytest.skip("a mount namespace of its own for the target needs root")
    if platform.machine() not in SYS_PIVOT_ROOT:
        pytest.skip(f"pivot_root's system call number on {platform.machine()} is not known here")
    for tool in ("objcopy", "ldd"):
        if shutil.which(tool) is None:
            pytest.skip(f"no {tool} on this machine (apt install binutils libc-bin)")
    if subprocess.run(["gdb", "-nx", "-batch", "-ex", "python print(1)"], capture_output=True).returncode:
        pytest.skip("this gdb has no Python: a planted Python script could not run in it anyway")
    safe = a_file_gdb_deems_safe()
    if safe is None:
        pytest.skip("no file under gdb's default auto-load safe-path on this machine to plant a library at")
    sleep = shutil.which("sleep")
    libraries = libraries_of(sleep)
    stub = next((d / name for d in {p.parent for p in libraries} for name in STUB_LIBRARIES
                 if (d / name).exists()), None)
    if stub is None:
        pytest.skip(f"none of {', '.join(STUB_LIBRARIES)} beside the C library to plant")
    root = tmp_path / "root"
    for path in [Path(sleep), *libraries]:
        (root / path.relative_to("/")).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, root / path.relative_to("/"))
    (root / "oldroot").mkdir()
    script = f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
    section = tmp_path / "section"
    section.write_bytes(b"\x04cpython-perf-planted\n" + script.encode() + b"\0")   # 4: a Python script's text
    planted = root / safe.relative_to("/")
    planted.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["objcopy", "--add-section", f".debug_gdb_scripts={section}", str(stub), str(planted)],
                   check=True)
    child = subprocess.Popen([sys.executable, "-c", NAMESPACE_CHILD, str(root), f"/{planted.relative_to(root)}",
                              sleep, "60"],
                             env={**os.environ, "SYS_PIVOT_ROOT": str(SYS_PIVOT_ROOT[platform.machine()])})
    deadline = time.monotonic() + 10
    while str(safe) not in Path(f"/proc/{child.pid}/maps").read_text():
        if child.poll() is not None or time.monotonic() > deadline:
            child.kill()
            pytest.fail(f"the namespaced sleep did not start (exit {child.poll()})")
        time.sleep(0.05)
    assert os.readlink(f"/proc/{child.pid}/root") == "/"
    return child


def test_a_script_planted_in_a_containers_library_is_not_run(tmp_path):
    """gdb's safe-path compares a file's realpath, and the realpath of /proc/PID/root/X is /X for a process in
    another mount namespace: a container's library at the path of one of gdb's own auto-load files passes.
    With the options gdb had before these, the script in the library's .debug_gdb_scripts section runs (the
    marker is written: the test can fail); with remote_request's options it does not, and gdb still attaches
    and lists the thread."""
    marker = tmp_path / "marker"
    child = planted_container(tmp_path, marker)
    try:
        sysroot = f"/proc/{child.pid}/root"
        hardened = ["gdb", *remote_request.gdb_options(sysroot, remote_request.gdb_settings()), "-p", str(child.pid),
                    "-ex", "info threads", "-ex", "detach"]
        done = subprocess.run(hardened, capture_output=True, text=True, timeout=120)
        assert not marker.exists(), f"gdb ran the planted script with {hardened}: {done.stdout}{done.stderr}"
        assert re.search(rf"^\* 1 .*(LWP|process) {child.pid}\b", done.stdout, re.M), done.stdout + done.stderr
        assert "detached" in done.stdout, done.stdout + done.stderr
        before = ["gdb", "-nx", "-batch", "-iex", f"set sysroot {sysroot}", "-p", str(child.pid), "-ex", "detach"]
        done = subprocess.run(before, capture_output=True, text=True, timeout=120)
        assert marker.exists(), ("without the hardening gdb did not run the planted script either, so this test "
                                 f"cannot tell: {done.stdout}{done.stderr}")
    finally:
        child.kill()
        child.wait()


# The answer read back from a real process's memory

PAGE = mmap.PAGESIZE
TARGET = r"""
import ctypes, json, mmap, sys, tempfile
# Holds each request state of the JSON list on stdin where its placement says, prints their addresses, and
# lives until stdin closes.
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
PAGE, RW = mmap.PAGESIZE, mmap.PROT_READ | mmap.PROT_WRITE
kept = []
def mapped(size, fd=-1):
    flags = mmap.MAP_PRIVATE | (mmap.MAP_ANONYMOUS if fd < 0 else 0)
    address = libc.mmap(None, size, RW, flags, fd, 0)
    if address in (None, 2 ** (8 * ctypes.sizeof(ctypes.c_void_p)) - 1):
        raise OSError(ctypes.get_errno(), "mmap")
    return address
def place(where, data):
    if where == "heap":                    # private, readable and writable: where the interpreter's data is
        kept.append(ctypes.create_string_buffer(data, len(data)))
        return ctypes.addressof(kept[-1])
    if where == "read-only":
        address = mapped(PAGE)
        ctypes.memmove(address, data, len(data))
        libc.mprotect(address, PAGE, mmap.PROT_READ)
        return address
    if where == "straddling":              # the last 100 bytes of a writable page, the rest in an inaccessible one
        address = mapped(2 * PAGE)
        ctypes.memmove(address + PAGE - 100, data, len(data))
        libc.mprotect(address + PAGE, PAGE, 0)   # PROT_NONE
        return address + PAGE - 100
    if where == "past-eof":                # a writable mapping of a one-page file, two pages long
        kept.append(tempfile.TemporaryFile())
        kept[-1].write(bytes(PAGE))
        kept[-1].flush()
        address = mapped(2 * PAGE, kept[-1].fileno())
        ctypes.memmove(address + PAGE - 100, data, 100)
        return address + PAGE - 100
    raise ValueError(where)
states = json.loads(sys.stdin.readline())
print(json.dumps([place(where, bytes.fromhex(data)) for where, data in states]), flush=True)
sys.stdin.read()
"""


def state(magic=remote_request.MAGIC, version=1, mode=1, requested=3, handled=3, result=0, active=1,
          message=b"perf\0") -> bytes:
    return remote_request.LAYOUT.pack(magic, version, mode, requested, handled, result, active, message)


STATES = {
    "valid": ("heap", state()),
    "pending": ("heap", state(requested=4, handled=3, result=1, active=0, message=b"RuntimeError: x\0")),
    "unknown whether active": ("heap", state(active=-1)),
    "hostile text": ("heap", state(message=b"perf\x1b[2J\x1b]0;owned\x07\r\n\xff\xfeend\0")),
    "bad magic": ("heap", state(magic=b"cpython-perf rQ\0")),
    "newer layout": ("heap", state(version=2)),
    "unknown mode": ("heap", state(mode=3)),
    "unknown result": ("heap", state(result=2)),
    "unknown active": ("heap", state(active=2)),
    "no request made": ("heap", state(requested=0, handled=0)),
    "handled past requested": ("heap", state(requested=3, handled=4)),
    "message without NUL": ("heap", state(message=b"x" * 240)),
    "read-only": ("read-only", state()),
    "straddling": ("straddling", state()),
    "past-eof": ("past-eof", state()),
}


@pytest.fixture(scope="module")
def target():
    """A process of this machine holding STATES: (its pid, {name: address})."""
    child = subprocess.Popen([sys.executable, "-c", TARGET], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True)
    child.stdin.write(json.dumps([(where, data.hex()) for where, data in STATES.values()]) + "\n")
    child.stdin.flush()
    addresses = json.loads(child.stdout.readline())
    try:
        yield child.pid, dict(zip(STATES, addresses))
    finally:
        child.stdin.close()
        child.wait(timeout=10)


def test_the_state_a_process_holds_is_read(target):
    pid, at = target
    assert remote_request.read_state(pid, at["valid"], 3) == remote_request.State(
        version=1, mode=1, requested=3, handled=3, result=0, active=True, message="perf")
    pending = remote_request.read_state(pid, at["pending"], 4)
    assert (pending.handled, pending.result, pending.active, pending.message) == (3, 1, False, "RuntimeError: x")
    assert remote_request.read_state(pid, at["unknown whether active"]).active is None


def test_the_message_loses_its_control_characters(target):
    """Escape sequences, the terminal's title, line breaks: removed; bytes that are not UTF-8: replaced."""
    pid, at = target
    assert remote_request.read_state(pid, at["hostile text"]).message == "perf[2J]0;owned\ufffd\ufffdend"


@pytest.mark.parametrize("name, words", [
    ("bad magic", "magic"),
    ("newer layout", "version 2"),
    ("unknown mode", "mode 3"),
    ("unknown result", "result 2"),
    ("unknown active", "active 2"),
    ("no request made", "requested 0"),
    ("handled past requested", "handled 4"),
    ("message without NUL", "no NUL"),
])
def test_a_state_the_series_never_writes_is_refused(target, name, words):
    pid, at = target
    with pytest.raises(remote_request.BadState, match=words):
        remote_request.read_state(pid, at[name])


def test_a_state_older_than_the_request_is_refused(target):
    """The request gdb made is number 5: a state that says 3 were ever requested is not the interpreter's."""
    pid, at = target
    with pytest.raises(remote_request.BadState, match="requested 3, after request 5"):
        remote_request.read_state(pid, at["valid"], 5)


@pytest.mark.parametrize("name", ["unmapped", "read-only", "straddling"])
def test_an_address_outside_the_writable_mappings_is_refused(target, name):
    """Nothing mapped there (the first pages are never mapped), a read-only mapping, a state whose end lies in
    the next (inaccessible) page: /proc/PID/mem reads the last two all the same, as root."""
    pid, at = target
    address = PAGE if name == "unmapped" else at[name]
    with pytest.raises(remote_request.BadState, match="not inside one private readable-writable mapping"):
        remote_request.read_state(pid, address)


def test_a_short_read_is_refused(target):
    """A writable mapping that runs past its file's end: /proc/PID/mem reads 100 bytes and stops."""
    pid, at = target
    with pytest.raises(remote_request.BadState, match=f"short read: 100 of the {remote_request.LAYOUT.size}"):
        remote_request.read_state(pid, at["past-eof"])


def test_only_the_first_bytes_of_the_maps_are_read(target):
    pid, at = target
    assert remote_request.writable_mapping(pid, at["valid"], remote_request.LAYOUT.size)
    assert not remote_request.writable_mapping(pid, at["valid"], remote_request.LAYOUT.size, limit=64)


MAPS = b"""\
55d4a0000000-55d4a0001000 r--p 00000000 fe:00 26723                      /usr/bin/python3.13
not a mapping at all
55d4a0002000-55d4a0001000 rw-p 00000000 fe:00 26723 extra
zz-55d4a0005000 rw-p 00000000 00:00 0
7f0000000000-7f0000001000 rw-s 00000000 00:01 1                          /dev/zero (deleted)
7f0000002000-7f0000003000 rw-p 00000000 00:06 5                          /dev/mem
7f0000004000-7f0000005000 rw-p 00000000 00:00 0
7f0000006000-7f0000007000 rw-p 00000000 00:00 0 """


@pytest.mark.parametrize("address, size, held", [
    (0x7f0000004000, 288, True),            # anonymous, private, readable and writable
    (0x7f0000004f00, 288, False),           # runs past its end
    (0x55d4a0000000, 288, False),           # read-only
    (0x7f0000000000, 288, False),           # shared
    (0x7f0000002000, 288, False),           # a device's
    (0x55d4a0002000, 16, False),            # a line that is not the kernel's
    (0x7f0000006000, 288, True),            # the last line, whole
])
def test_a_mapping_holds_the_state_only_whole_writable_private_and_not_a_devices(address, size, held):
    assert remote_request.mapping_holds(MAPS, address, size) is held


def test_a_cut_maps_file_drops_its_last_line():
    assert not remote_request.mapping_holds(MAPS, 0x7f0000006000, 288, complete=False)


# gdb's output

@pytest.mark.parametrize("output, words", [
    ("$1 = 9223372036854775808\n$2 = 0x55d4a0c3b9c0\n", "not one the interpreter gives"),
    ("$1 = 0x5\n$2 = 0x55d4a0c3b9c0\n", "not request numbers followed by an address"),
    ("$1 = 5\n$2 = 94374512\n", "not request numbers followed by an address"),
    ("$1 = 5\n$2 = 0x" + "f" * 17 + "\n", "no request number and address"),
])
def test_gdb_answers_out_of_bounds_are_refused(output, words):
    with pytest.raises(ValueError, match=words):
        remote_request.parse_gdb(output)


def test_what_is_kept_of_a_commands_output_is_bounded():
    program = ("import sys\nfor i in range(100000): print(f'line {i}')\nprint('the end')\n"
               "print('e' * 500, file=sys.stderr)")
    status, out, err = remote_request.run_bounded([sys.executable, "-c", program], 60, keep=1000)
    assert status == 0
    assert len(out) <= 1000 and out.endswith("line 99999\nthe end\n")
    assert out.startswith("line "), "the first line kept is whole"
    assert err == "e" * 500 + "\n"


def test_a_command_that_does_not_finish_is_stopped():
    started = time.monotonic()
    status, out, _err = remote_request.run_bounded(
        [sys.executable, "-c", "print('attached', flush=True)\nimport time\ntime.sleep(60)"], 1)
    assert status is None and out == "attached\n"
    assert time.monotonic() - started < 30


def gdb_printing(tmp_path, monkeypatch, output: str) -> None:
    """gdb on PATH is a stand-in that prints output."""
    (tmp_path / "gdb-output").write_text(output)
    fake_gdb(tmp_path / "bin", f"cat {tmp_path / 'gdb-output'}")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")


def test_the_report_carries_the_message_without_control_characters(target, tmp_path, monkeypatch):
    pid, at = target
    gdb_printing(tmp_path, monkeypatch, f"$1 = 3\n$2 = {at['hostile text']:#x}\n[Inferior 1 detached]\n")
    status, report = remote_request.request(pid, "perf", 1)
    assert (status, report["state"], report["message"]) == (0, "done", "perf[2J]0;owned\ufffd\ufffdend")
    line = activate.describe(report, f"process {pid}")
    assert not any(ord(c) < 32 or 0x7f <= ord(c) < 0xa0 for c in line), repr(line)


@pytest.mark.parametrize("name, address, words", [
    ("bad magic", None, "magic"),
    ("message without NUL", None, "no NUL"),
    ("unmapped", PAGE, "not inside one private readable-writable mapping"),
    ("read-only", None, "not inside one private readable-writable mapping"),
])
def test_an_answer_that_is_not_one_is_an_error_naming_the_problem(target, tmp_path, monkeypatch, name, address,
                                                                  words):
    pid, at = target
    gdb_printing(tmp_path, monkeypatch, f"$1 = 3\n$2 = {address or at[name]:#x}\n")
    status, report = remote_request.request(pid, "perf", 1)
    assert status == remote_request.CANNOT_ASK and words in report["error"], report


def test_a_request_number_out_of_bounds_is_an_error(tmp_path, monkeypatch):
    gdb_printing(tmp_path, monkeypatch, f"$1 = {2 ** 64 - 1}\n$2 = 0x55d4a0c3b9c0\n")
    status, report = remote_request.request(os.getpid(), "perf", 1)
    assert status == remote_request.CANNOT_ASK and "not one the interpreter gives" in report["error"], report


def test_gdb_that_does_not_finish_is_stopped(tmp_path, monkeypatch):
    """A target can make gdb hang (a FIFO where a library should be, a thread list that loops)."""
    fake_gdb(tmp_path / "bin", "sleep 20")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(remote_request, "GDB_TIMEOUT", 1, raising=False)
    status, report = remote_request.request(os.getpid(), "perf", 1)
    assert status == remote_request.CANNOT_ASK and "did not finish" in report["error"], report


def test_gdbs_lines_in_an_error_lose_their_control_characters():
    why = remote_request.why_gdb_failed("warning: \x1b]0;owned\x07 in /proc/1/root/lib/x\x1b[2J.so\n", 1)
    assert "\x1b" not in why and "\x07" not in why and "]0;owned" in why


# find_python (the container's one Python process) in a /proc a container fills

def fake_proc(tmp_path: Path, entries: dict[str, str | None]) -> Path:
    """A directory standing for /proc: each entry a directory whose exe links to its value (None: no exe)."""
    proc = tmp_path / "proc"
    for name, exe in entries.items():
        (proc / name).mkdir(parents=True)
        if exe is not None:
            (proc / name / "exe").symlink_to(exe)
    return proc


def test_find_python_is_not_fooled_by_what_a_container_makes():
    """Entries whose exe is unreadable (gone, a kernel thread) or that are not ASCII pids (as a directory
    standing for /proc may hold) are left out, as is everything not named python*."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        proc = fake_proc(Path(tmp), {"1": "/usr/bin/python3.13", "2": "/bin/sh", "3": None, "self": "/usr/bin/python3",
                                     "\u00b2": "/usr/bin/python3", "\u0661\u0662": "/usr/bin/python3",
                                     "40": "/opt/x/python3.11 (deleted)"})
        (proc / "5").mkdir()
        (proc / "5" / "exe").mkdir()          # not a link: readlink fails
        assert remote_request.find_python(str(proc)) == [1, 40]


def test_find_python_stops_at_its_limit(tmp_path):
    proc = fake_proc(tmp_path, {str(n): "/bin/sh" for n in range(1, 6)})
    assert remote_request.find_python(str(proc), limit=5) == []
    with pytest.raises(ValueError, match="more than 4 processes"):
        remote_request.find_python(str(proc), limit=4)


def test_many_python_processes_make_a_short_error(monkeypatch, capsys):
    first = 2 ** 22 + 1                       # past any pid_max: not this test's own pid
    monkeypatch.setattr(remote_request, "find_python", lambda: list(range(first, first + 100000)))
    assert remote_request.main(["auto", "perf", "1"]) == remote_request.CANNOT_ASK
    error = json.loads(capsys.readouterr().out)["error"]
    assert error.startswith(f"100000 Python processes here ([{first}, {first + 1}, ") and "..." in error
    assert len(error) < 300


def test_a_proc_that_cannot_be_listed_makes_an_error(monkeypatch, capsys):
    def too_many():
        raise ValueError("more than 100000 processes here")

    monkeypatch.setattr(remote_request, "find_python", too_many)
    assert remote_request.main(["auto", "perf", "1"]) == remote_request.CANNOT_ASK
    assert "name one with --pid" in json.loads(capsys.readouterr().out)["error"]


def test_a_gdb_that_cannot_write_the_registers_says_what_to_use_instead():
    """gdb 13 on a CPU with AMX registers fails every function call it makes in the process ("Couldn't write
    extended state status: Bad address"): the answer names that and the tools image's gdb."""
    from cpython_perf.record.remote_request import XSAVE_REFUSED, why_gdb_failed

    said = why_gdb_failed("[Inferior 1 (process 7) detached]\nCouldn't write extended state status: Bad address.\n", 7)
    assert said.startswith(XSAVE_REFUSED) and "--host-gdb" in said

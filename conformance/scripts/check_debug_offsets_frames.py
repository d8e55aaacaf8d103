# requires: perf
# checks: behaviour
"""A reader outside the process finds the Python frames by _Py_DebugOffsets alone, under -X perf as without.

CPython 3.13 publishes the layout of its runtime at the start of _PyRuntime
(section .PyRuntime, cookie "xdebugpy"): the offsets of the interpreter and
thread lists, of a thread's current frame, of a frame's previous frame and
code object, of a code object's qualified name.  Out-of-process tools (py-spy
and Austin read the same structures, CPython 3.14's remote debugging reads
exactly these offsets) walk the frame chain with them, never the C stack.
The perf backends change what the C stack holds (trampolines, and frame
records where the build has them, 3.13's patch 31); they must leave that
chain as it is.

The check runs a child that keeps top -> mid -> leaf hot, inactive and then
under -X perf, stops it 150 times (SIGSTOP), reads its memory through
/proc/PID/mem with nothing but the ELF section table of its executable (or
libpython) and the offsets the child publishes, and names the frames from
the innermost one out.  Must hold: the offsets' cookie and version are the
child's; of the snapshots stopped in py::leaf, at least 90% show leaf, mid,
top, calls, <module>, in that order; and the same share under -X perf as
without, within 10 points.
Exit 2 (cannot check) where the layout is not 3.13's (the reader knows
that one) and where this process may not read its child's memory (ptrace
access refused); memory the walk cannot read is a failure.
"""
import os
import signal
import struct
import subprocess
import sys
import sysconfig
import tempfile
import time

from childcheck import finish

CANNOT_CHECK = 2
SNAPSHOTS = 150
MIN_WHOLE = 0.9
CHAIN = ["leaf", "mid", "top", "calls", "<module>"]

PROGRAM = r'''
import sys, time

def leaf(n):
    s = 0
    for i in range(n):
        s += i * i
    return s

def mid(n):
    return leaf(n)

def top(n):
    return mid(n)

def calls():
    for _ in range(50):
        top(10)
    print("ready", flush=True)
    while True:
        top(2000)

calls()
'''

# _Py_DebugOffsets of 3.13 (Include/internal/pycore_runtime.h): after the cookie, every member is a
# uint64_t; the groups and their members in order
LAYOUT_3_13 = [
    ("", ["version", "free_threaded"]),
    ("runtime_state", ["size", "finalizing", "interpreters_head"]),
    ("interpreter_state", ["size", "id", "next", "threads_head", "gc", "imports_modules", "sysdict", "builtins",
                           "ceval_gil", "gil_runtime_state", "gil_runtime_state_enabled",
                           "gil_runtime_state_locked", "gil_runtime_state_holder"]),
    ("thread_state", ["size", "prev", "next", "interp", "current_frame", "thread_id", "native_thread_id",
                      "datastack_chunk", "status"]),
    ("interpreter_frame", ["size", "previous", "executable", "instr_ptr", "localsplus", "owner"]),
    ("code_object", ["size", "filename", "name", "qualname", "linetable", "firstlineno", "argcount",
                     "localsplusnames", "localspluskinds", "co_code_adaptive"]),
    ("pyobject", ["size", "ob_type"]),
    ("type_object", ["size", "tp_name", "tp_repr", "tp_flags"]),
    ("tuple_object", ["size", "ob_item", "ob_size"]),
    ("list_object", ["size", "ob_item", "ob_size"]),
    ("dict_object", ["size", "ma_keys", "ma_values"]),
    ("float_object", ["size", "ob_fval"]),
    ("long_object", ["size", "lv_tag", "ob_digit"]),
    ("bytes_object", ["size", "ob_size", "ob_sval"]),
    ("unicode_object", ["size", "state", "length", "asciiobject_size"]),
    ("gc", ["size", "collecting"]),
]
FRAME_OWNED_BY_CSTACK = 3   # 3.13's enum _frameowner


class Unreadable(Exception):
    """Memory the walk needed and could not read: a wrong offset, a broken chain."""


class NotPermitted(Exception):
    """This process may not read the child's memory at all (ptrace access refused): cannot check."""


class Process:
    """Memory of a stopped process, read through /proc/PID/mem."""

    def __init__(self, pid):
        self.pid = pid
        try:
            self.mem = open(f"/proc/{pid}/mem", "rb", buffering=0)
        except PermissionError as e:
            raise NotPermitted(f"/proc/{pid}/mem: {e}")

    def read(self, address, size):
        try:
            self.mem.seek(address)
            data = self.mem.read(size)
        except PermissionError as e:
            raise NotPermitted(f"/proc/{self.pid}/mem: {e}")
        except (OSError, OverflowError, ValueError) as e:
            raise Unreadable(f"{size} bytes at {address:#x}: {e}")
        if len(data) != size:
            raise Unreadable(f"{size} bytes at {address:#x}: short read")
        return data

    def u64(self, address):
        return struct.unpack("<Q", self.read(address, 8))[0]

    def cstring(self, address, limit=200):
        data = self.read(address, limit)
        return data.split(b"\0", 1)[0].decode("ascii", "replace")


def runtime_section(pid):
    """Address of the .PyRuntime section in the process: the ELF section table of the mapped file that has
    one (the executable, or libpython where shared), plus the file's load address from /proc/PID/maps."""
    files = {}
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            parts = line.split()
            if len(parts) >= 6 and parts[5].startswith("/") and int(parts[2], 16) == 0:
                files.setdefault(parts[5], int(parts[0].split("-")[0], 16))
    for path, start in files.items():
        found = section_address(path, ".PyRuntime")
        if found is not None:
            address, pie = found
            return (start + address if pie else address), path
    return None, None


def section_address(path, wanted):
    """(sh_addr, whether the file is position independent) of a section of a 64-bit little-endian ELF file."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return None
            e_type = struct.unpack_from("<H", head, 16)[0]
            shoff, = struct.unpack_from("<Q", head, 40)
            shentsize, shnum, shstrndx = struct.unpack_from("<HHH", head, 58)
            f.seek(shoff)
            table = f.read(shentsize * shnum)
            sections = [struct.unpack_from("<IIQQQQ", table, i * shentsize) for i in range(shnum)]
            names_offset, names_size = sections[shstrndx][4], sections[shstrndx][5]
            f.seek(names_offset)
            names = f.read(names_size)
    except (OSError, struct.error, IndexError):
        return None
    for name_at, _type, _flags, addr, _offset, _size in sections:
        if names[name_at:names.index(b"\0", name_at)].decode() == wanted:
            return addr, e_type == 3   # ET_DYN
    return None


def read_offsets(proc, address):
    if proc.read(address, 8) != b"xdebugpy":
        raise Unreadable(f"no _Py_DebugOffsets cookie at {address:#x}")
    fields = [f"{group}.{name}" if group else name for group, names in LAYOUT_3_13 for name in names]
    values = struct.unpack(f"<{len(fields)}Q", proc.read(address + 8, 8 * len(fields)))
    return dict(zip(fields, values))


def unicode_text(proc, off, address):
    """A compact ASCII str object (what qualified names of this program are), else None."""
    state = proc.read(address + off["unicode_object.state"], 4)[0]
    length = proc.u64(address + off["unicode_object.length"])
    compact, ascii_ = state >> 5 & 1, state >> 6 & 1   # interned:2, kind:3, compact:1, ascii:1
    if not (compact and ascii_) or length > 1000:
        return None
    return proc.read(address + off["unicode_object.asciiobject_size"], length).decode("ascii")


def python_stack(proc, off, runtime):
    """Qualified names of the main thread's frames, innermost first."""
    interp = proc.u64(runtime + off["runtime_state.interpreters_head"])
    tstate = proc.u64(interp + off["interpreter_state.threads_head"])
    while tstate:
        nxt = proc.u64(tstate + off["thread_state.next"])
        if not nxt:
            break   # the list is newest first: the main thread is its last entry
        tstate = nxt
    frame = proc.u64(tstate + off["thread_state.current_frame"])
    names = []
    while frame and len(names) < 200:
        owner = proc.read(frame + off["interpreter_frame.owner"], 1)[0]
        if owner != FRAME_OWNED_BY_CSTACK:
            code = proc.u64(frame + off["interpreter_frame.executable"])
            kind = proc.cstring(proc.u64(proc.u64(code + off["pyobject.ob_type"]) + off["type_object.tp_name"]))
            if kind == "code":
                names.append(unicode_text(proc, off, proc.u64(code + off["code_object.qualname"])) or "?")
        frame = proc.u64(frame + off["interpreter_frame.previous"])
    return names


def wait_stopped(pid):
    for _ in range(2000):
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] in "tT":
                return
        time.sleep(0.0005)
    raise Unreadable("the child did not stop")


def snapshots(program, options):
    """(offsets' version, free_threaded, [stack, ...]) of a child run with options."""
    child = subprocess.Popen([sys.executable, *options, program], stdout=subprocess.PIPE, text=True)
    try:
        if child.stdout.readline().strip() != "ready":
            raise Unreadable(f"the child did not start (exit {child.poll()})")
        runtime, path = runtime_section(child.pid)
        if runtime is None:
            raise Unreadable("no mapped file of the child has a .PyRuntime section")
        proc = Process(child.pid)
        stacks = []
        off = None
        for _ in range(SNAPSHOTS):
            time.sleep(0.005)
            os.kill(child.pid, signal.SIGSTOP)
            try:
                wait_stopped(child.pid)
                if off is None:
                    off = read_offsets(proc, runtime)
                    free_threaded = int(bool(sysconfig.get_config_var("Py_GIL_DISABLED")))
                    if off["version"] != sys.hexversion or off["free_threaded"] != free_threaded:
                        raise Unreadable(f"the offsets in {path} say version {off['version']:#x}, free_threaded "
                                         f"{off['free_threaded']}; this is {sys.hexversion:#x}")
                try:
                    stacks.append(python_stack(proc, off, runtime))
                except Unreadable as e:
                    stacks.append([f"(unreadable: {e})"])
            finally:
                os.kill(child.pid, signal.SIGCONT)
        return stacks
    finally:
        child.kill()
        child.wait()


def main():
    if sys.version_info[:2] != (3, 13):
        print(f"cannot check: this reader knows _Py_DebugOffsets of 3.13, not of {sys.version.split()[0]}")
        return CANNOT_CHECK
    workdir = tempfile.mkdtemp()
    program = os.path.join(workdir, "chain.py")
    with open(program, "w") as f:
        f.write(PROGRAM)
    problems = []
    shares = {}
    try:
        for options in ([], ["-X", "perf"]):
            mode = "-X perf" if options else "inactive"
            try:
                stacks = snapshots(program, options)
            except NotPermitted as e:
                print(f"cannot check: this process may not read its child's memory here: {e}")
                return CANNOT_CHECK
            except Unreadable as e:
                problems.append(f"{mode}: {e}")
                continue
            inside = [s for s in stacks if s and s[0] == "leaf"]
            whole = [s for s in inside if s == CHAIN]
            shares[mode] = len(whole) / len(inside) if inside else 0.0
            print(f"{mode}: {len(stacks)} snapshots, {len(inside)} in leaf, {len(whole)} with "
                  f"{' <- '.join(CHAIN)}; e.g. {inside[0] if inside else stacks[:1]}")
            if len(inside) < SNAPSHOTS // 3:
                problems.append(f"{mode}: only {len(inside)} of {len(stacks)} snapshots stopped in leaf: {stacks[:2]}")
            elif shares[mode] < MIN_WHOLE:
                other = [s for s in inside if s != CHAIN][:3]
                problems.append(f"{mode}: {len(whole)} of {len(inside)} snapshots in leaf show the whole chain "
                                f"(at least {MIN_WHOLE:.0%}); others: {other}")
        if len(shares) == 2 and abs(shares["-X perf"] - shares["inactive"]) > 0.1:
            problems.append(f"the whole chain in {shares['-X perf']:.0%} of the snapshots under -X perf and "
                            f"{shares['inactive']:.0%} without")
        return finish(problems)
    finally:
        os.unlink(program)
        os.rmdir(workdir)


if __name__ == "__main__":
    sys.exit(main())

"""Helpers shared by the check scripts that run a child interpreter (not a check itself).

Stdlib only.  Named so that test_checks.py, which runs every check_*.py as a
check, leaves it alone; it is copied into /src next to the check scripts, so a
check run as `python3 /src/check_x.py` imports it with `import childcheck`.
"""
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import sysconfig

JITDUMP_MAGIC = 0x4A695444
JITDUMP_HEADER_SIZE = 40
JIT_CODE_LOAD = 0
JIT_CODE_UNWINDING_INFO = 4  # the highest record id of the jitdump specification


def recursion_depth_under_trampoline(wanted, margin=50):
    """How deep Python code may recurse while a perf trampoline is active: wanted, or less where the C
    recursion budget runs out first.  Under a trampoline every Python call enters the eval loop from C, and
    from 3.12 each entry takes two units of that budget (Py_C_RECURSION_LIMIT: 10000 units in a release build,
    500 in a debug build, where RecursionError comes after about 250 Python frames whatever
    sys.getrecursionlimit() says).  The budget left is read from _testinternalcapi where it offers it (3.13);
    margin units of it are left for the callees at the bottom.  Self-contained: check scripts embed its source
    in the child programs they run."""
    try:
        from _testinternalcapi import get_c_recursion_remaining
    except ImportError:   # before 3.13, or a build without CPython's test modules
        return wanted
    return max(1, min(wanted, get_c_recursion_remaining() // 2 - margin))


def describe_exit(code):
    """A subprocess return code in words: "exit status N" or "killed by SIGNAME"."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def stderr_gist(stderr, limit=1500):
    """What a dead child's stderr says, shortly: an AddressSanitizer report's error line, the first frames of
    its first stack and its summary; otherwise the last `limit` characters."""
    lines = stderr.strip().splitlines()
    error = next((i for i, line in enumerate(lines) if "ERROR: AddressSanitizer" in line), None)
    if error is None:
        return stderr.strip()[-limit:]
    frames = [line.strip() for line in lines[error + 1:] if line.strip().startswith("#")][:6]
    summary = next((line for line in lines if line.startswith("SUMMARY: AddressSanitizer")), "")
    return " | ".join([lines[error].strip(), *frames, summary])


def child_reports(stdout):
    """The JSON lines a child printed, by their "phase" (the last one of a phase wins); other lines are skipped."""
    reports = {}
    for line in stdout.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        reports[rec.get("phase")] = rec
    return reports


def jitdump_code_loads(dump):
    """Walk a jitdump (its path, or its bytes): (JIT_CODE_LOAD names, record count, problem or None).

    The problem is the first thing that makes the file malformed: fewer than 40
    bytes, a magic other than 0x4A695444, a version other than 1 or a header
    size other than 40, a record header cut off by the end of the file, a
    record id above JIT_CODE_UNWINDING_INFO, a record total_size below 16 or
    past the end of the file (so a well-formed walk ends exactly at EOF), a
    code load without a NUL-terminated name.  After a bad header field, an
    unknown record id or a name without NUL the walk goes on, so the names and
    the count cover every record that can still be walked; a bad size ends it.
    """
    if isinstance(dump, (bytes, bytearray)):
        data = bytes(dump)
    else:
        with open(dump, "rb") as fh:
            data = fh.read()
    if len(data) < JITDUMP_HEADER_SIZE:
        return [], 0, f"{len(data)} bytes, no header"
    magic, version, header_size = struct.unpack_from("<III", data, 0)
    if magic != JITDUMP_MAGIC:
        return [], 0, f"bad magic {magic:#x}"
    problems = []
    if version != 1 or header_size != JITDUMP_HEADER_SIZE:
        problems.append(f"version {version}, header size {header_size}")
    names, count, off = [], 0, header_size
    while off < len(data):
        if off + 16 > len(data):
            problems.append(f"truncated record header at offset {off} of {len(data)}")
            break
        rid, size, _ts = struct.unpack_from("<IIQ", data, off)
        bad_size = size < 16 or off + size > len(data)
        if rid > JIT_CODE_UNWINDING_INFO or bad_size:
            problems.append(f"record id {rid:#x}, size {size} at offset {off} of {len(data)} "
                            f"({data.count(struct.pack('<I', JITDUMP_MAGIC))} jitdump headers in the file)")
            if bad_size:
                break
        elif rid == JIT_CODE_LOAD:
            body = data[off + 16:off + size]
            # u32 pid, u32 tid, u64 vma, u64 code_addr, u64 code_size, u64 code_index, name\0
            end = body.find(b"\0", 40)
            if end < 0:
                problems.append(f"code load without a NUL-terminated name at {off}")
            else:
                names.append(body[40:end].decode("utf-8", "replace"))
        count += 1
        off += size
    return names, count, problems[0] if problems else None


def uleb(buf, i):
    """The unsigned LEB128 number at buf[i] (DWARF CFI, jitdump unwinding info): (value, index after it)."""
    result, _, i = _leb(buf, i)
    return result, i


def sleb(buf, i):
    """The signed LEB128 number at buf[i]: (value, index after it)."""
    result, bits, i = _leb(buf, i)
    if result >> (bits - 1) & 1:   # the sign bit: 0x40 of the last byte
        result -= 1 << bits
    return result, i


def _leb(buf, i):
    """The LEB128 bytes at buf[i] as an unsigned number: (value, bits read, index after it)."""
    result = shift = 0
    while True:
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, shift, i


def read_to_end(fd):
    """Everything a pipe's read end gives until its writers close it; the descriptor is closed after."""
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def remove_perf_files(pid):
    """Delete the perf map and jitdump a finished child interpreter of that pid left in /tmp."""
    for path in (f"/tmp/perf-{pid}.map", f"/tmp/jit-{pid}.dump"):
        if pid and os.path.exists(path):
            os.unlink(path)


def offers_perf_jit(env=None):
    """Whether this interpreter has the perf_jit backend: a child activates it (and leaves no files behind)."""
    proc = subprocess.run([sys.executable, "-c",
                           "import os, sys\ntry:\n sys.activate_stack_trampoline('perf_jit')\n"
                           "except ValueError:\n print('no', os.getpid())\nelse:\n print('yes', os.getpid())"],
                          capture_output=True, text=True, timeout=120, env=env)
    answer, _, pid = proc.stdout.strip().partition(" ")
    remove_perf_files(pid)
    return answer == "yes"


def build_shim(source, workdir, name, defines=()):
    """Build an LD_PRELOAD shim from C source with the image's cc: (path of the .so, None) or (None, why not)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None, "no C compiler (cc) here to build the LD_PRELOAD shim"
    src = os.path.join(workdir, name + ".c")
    lib = os.path.join(workdir, name + ".so")
    with open(src, "w") as fh:
        fh.write(source)
    proc = subprocess.run([cc, "-shared", "-fPIC", "-O1", *defines, "-o", lib, src, "-ldl"],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        return None, f"cc could not build the shim: {proc.stderr.strip()[-800:]}"
    # A shim this C library does not take (an interposed allocator it calls back into where the shim cannot
    # serve it) breaks every process it is preloaded into, the trampoline or not: then it cannot be used here.
    probe = subprocess.run([sys.executable, "-c", "pass"], env=preload_env(lib), capture_output=True, text=True,
                           timeout=300)
    if probe.returncode != 0:
        said = f": {stderr_gist(probe.stderr, 400)}" if probe.stderr.strip() else ""
        return None, (f"the shim built with {cc} breaks a plain `{sys.executable} -c pass` here "
                      f"({describe_exit(probe.returncode)}{said}), so it is not used")
    return lib, None


def build_extension(source, workdir, name):
    """Build a C extension module `name` from source with the image's cc against this interpreter's headers, in
    workdir (importable once workdir is on sys.path): (path of the module, None) or (None, why not)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None, f"no C compiler (cc) to build the {name} extension"
    include = sysconfig.get_path("include") or sysconfig.get_config_var("INCLUDEPY")
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    src = os.path.join(workdir, name + ".c")
    with open(src, "w") as fh:
        fh.write(source)
    out = os.path.join(workdir, name + suffix)
    proc = subprocess.run([cc, "-shared", "-fPIC", "-O1", "-I", include, "-o", out, src],
                          capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        return None, f"cc could not build the {name} extension: {proc.stderr.strip()[-800:]}"
    return out, None


def preload_env(lib, **extra):
    """os.environ with the shim preloaded (and extra variables).  An AddressSanitizer build wants its runtime
    first in the library list and refuses to start otherwise; the shims wrap only libc calls, so ASan is told to
    let the order be."""
    env = dict(os.environ, LD_PRELOAD=lib, **extra)
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "verify_asan_link_order=0"]))
    return env


# Source for a child interpreter (or a subinterpreter): ctypes bindings with which a program acts as another
# tool that keeps data in code objects (a debugger's frame evaluator, a JIT): request(None) takes a co_extra
# index of the running interpreter, set_extra(code, index, value) stores a pointer-sized value there.
CO_EXTRA_TOOL = r'''
import ctypes
api = ctypes.pythonapi
request = getattr(api, "PyUnstable_Eval_RequestCodeExtraIndex", None) or api._PyEval_RequestCodeExtraIndex
request.restype = ctypes.c_ssize_t
request.argtypes = [ctypes.c_void_p]
set_extra = getattr(api, "PyUnstable_Code_SetExtra", None) or api._PyCode_SetExtra
set_extra.restype = ctypes.c_int
set_extra.argtypes = [ctypes.py_object, ctypes.c_ssize_t, ctypes.c_void_p]
'''


# the host's sampling event (cpython_perf.record.perf_event), passed by the suite's runner; none: perf's default
PERF_EVENT = ["-e", os.environ["CPYTHON_PERF_EVENT"]] if os.environ.get("CPYTHON_PERF_EVENT") else []
# the cell's dwarf dump size for --call-graph dwarf (cpython_perf.run.runners.RECORD_DWARF_STACK_ENV), passed by
# the same runner: a dump smaller than one eval-loop frame (-O0: about 18 KiB) unwinds to no Python frame at all
PERF_DWARF_STACK = os.environ.get("CPYTHON_PERF_DWARF_STACK") or "16384"


def frame_pointer_recording_unavailable():
    """Why perf_record_program's frame-pointer walk (perf -g) cannot check this interpreter: no perf, or an
    interpreter built without frame pointers; None where it can."""
    import sysconfig

    if shutil.which("perf") is None:
        return "no perf here"
    if not built_with_frame_pointers(sysconfig.get_config_var("CFLAGS") or ""):
        return "the interpreter is not built with frame pointers (perf -g needs them)"
    return None


def sanitizer_build():
    """Whether the interpreter is built under a sanitizer (--with-address-sanitizer and its siblings, or
    -fsanitize= in its flags): its compiled code is instrumented, so it is not what a release build runs."""
    flags = " ".join(str(sysconfig.get_config_var(name) or "")
                     for name in ("CONFIG_ARGS", "OPT", "CFLAGS", "PY_CFLAGS_NODIST", "PY_CORE_CFLAGS"))
    return "-fsanitize" in flags or "-sanitizer" in flags


def built_with_frame_pointers(cflags):
    """Whether C code compiled with these flags keeps frame pointers: the last of -f(no-)omit-frame-pointer
    says so; without either, GCC keeps them at -O0 only (the last -O option counts)."""
    flags = cflags.split()
    fp = [f for f in flags if f in ("-fno-omit-frame-pointer", "-fomit-frame-pointer")]
    if fp:
        return fp[-1] == "-fno-omit-frame-pointer"
    levels = [f for f in flags if f.startswith("-O")]
    return bool(levels) and levels[-1] == "-O0"


def perf_record_program(workdir, name, program, python_args=()):
    """Write program to workdir/name and run it under real perf (frame pointers: -g, 999 Hz, the suite's
    event) with this interpreter: (the perf record process, the path of its perf.data)."""
    prog = os.path.join(workdir, name)
    with open(prog, "w") as fh:
        fh.write(program)
    data = os.path.join(workdir, "perf.data")
    rec = subprocess.run(["perf", "record", *PERF_EVENT, "-F", "999", "-g", "-o", data, "--", sys.executable,
                          *python_args, prog], capture_output=True, text=True, timeout=300)
    return rec, data


PERF_WROTE = "[ perf record: Captured and wrote "   # perf record's last line, once its data is written


def recorded_program_failure(rec, data):
    """Why the program a perf_record_program() run recorded failed (a failure of the check, not a reason it
    cannot check: e.g. a RecursionError of the program), or None.  perf wrote its data and exits with the
    program's status."""
    if rec.returncode != 0 and os.path.exists(data) and PERF_WROTE in rec.stderr:
        lines = [line for line in rec.stderr.strip().splitlines() if not line.startswith("[ perf record:")]
        return f"the recorded program failed (exit {rec.returncode}): {' / '.join(lines[-3:])[-400:]}"
    return None


def perf_record_failure(rec, data):
    """Why a perf_record_program() run gave nothing to check (for a "cannot check" line), or None: perf
    exited 0 and wrote its data, or it recorded a program that failed (recorded_program_failure)."""
    if recorded_program_failure(rec, data):
        return None
    if rec.returncode != 0 or not os.path.exists(data):
        return f"perf record failed here ({rec.returncode}): {rec.stderr.strip()[-400:]}"
    return None


def perf_script_text(data, fields):
    """`perf script` of a recording, with these fields (e.g. "pid,ip,sym")."""
    return subprocess.run(["perf", "script", "-i", data, "-F", fields], capture_output=True, text=True,
                          timeout=300).stdout


def perf_script_samples(text):
    """The samples of `perf script` output as (header line, [(ip, symbol) of the call chain, leaf first])."""
    out, header, stack = [], None, []
    for line in text.splitlines():
        if not line.strip():
            if header is not None:
                out.append((header, stack))
            header, stack = None, []
        elif header is None:
            header = line
        else:
            parts = line.strip().split(None, 1)
            stack.append((parts[0], parts[1] if len(parts) > 1 else ""))
    if header is not None:
        out.append((header, stack))
    return out


def finish(problems):
    """Print each problem; the exit status of a check: 1 if there is any, else 0."""
    for problem in problems:
        print(problem)
    return 1 if problems else 0

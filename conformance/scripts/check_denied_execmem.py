# requires: perf
# checks: behaviour
"""Where executable memory is denied, perf support fails cleanly: an OSError, or one warning.

Real policies deny a process new executable memory: SELinux's deny_execmem
(mprotect(PROT_EXEC) on anonymous memory fails with EACCES), a noexec /tmp
(the jitdump's PROT_EXEC mapping of /tmp/jit-PID.dump fails with EACCES).
This check builds, with the image's cc, an LD_PRELOAD shim whose mprotect()
and mmap() fail with EACCES whenever PROT_EXEC is asked (and log nothing),
and under it:

  (a) sys.activate_stack_trampoline("perf") (and "perf_jit" where offered)
      raises an OSError with errno EACCES (13) whose message mentions "perf
      trampoline" -- not SystemError, not a bare RuntimeError; afterwards
      sys.is_stack_trampoline_active() is False and calls still work;
  (b) a small program run with PYTHONPERFSUPPORT=1, with -X perf, and where
      offered with -X perf_jit and with PYTHON_PERF_JIT_SUPPORT=1 exits 0
      with its correct output, the trampoline not active, and exactly one
      line on stderr, a warning that mentions "perf trampoline".

With a second shim (DENY_FILE_ONLY: only PROT_EXEC mappings of files fail,
as with a noexec /tmp) and where perf_jit is offered: activate("perf") works
and activate("perf_jit") fails as in (a); -X perf_jit and
PYTHON_PERF_JIT_SUPPORT=1 behave as in (b).  (With everything denied the
trampoline arena fails first and the jitdump's mapping is never reached.)

A message "mentions perf trampoline" when it holds "perf trampoline", or
"perf" and "trampoline" (e.g. "perf jit trampoline").
Exit 2 (cannot check) when the shim cannot be built or does not take effect.

Seen before the fix: a fatal error at start-up (the program never ran), and
SystemError("... returned NULL without setting an error") from the sys API.
"""
import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile

import childcheck
from childcheck import offers_perf_jit

CANNOT_CHECK = 2

SHIM = r'''
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/types.h>

typedef int (*mprotect_fn)(void *, size_t, int);
typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);

/* DENY_FILE_ONLY: a noexec /tmp -- only PROT_EXEC mappings of files fail */
#ifdef DENY_FILE_ONLY
#define DENY_MPROTECT 0
#define DENY_MMAP(flags, fd) (!((flags) & MAP_ANONYMOUS) && (fd) >= 0)
#else
#define DENY_MPROTECT 1
#define DENY_MMAP(flags, fd) 1
#endif

int mprotect(void *addr, size_t len, int prot)
{
    static mprotect_fn real;
    if ((prot & PROT_EXEC) && DENY_MPROTECT) {
        errno = EACCES;
        return -1;
    }
    if (real == NULL) {
        real = (mprotect_fn)dlsym(RTLD_NEXT, "mprotect");
    }
    return real(addr, len, prot);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    static mmap_fn real;
    if ((prot & PROT_EXEC) && DENY_MMAP(flags, fd)) {
        errno = EACCES;
        return MAP_FAILED;
    }
    if (real == NULL) {
        real = (mmap_fn)dlsym(RTLD_NEXT, "mmap");
    }
    return real(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return mmap(addr, len, prot, flags, fd, off);
}
'''

# Does the shim take effect?  (ctypes' libc mprotect of one page, PROT_EXEC)
SHIM_PROBE = r'''
import ctypes, ctypes.util, mmap
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
p = libc.mmap(None, 4096, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
rc = libc.mprotect(p, 4096, mmap.PROT_READ | mmap.PROT_EXEC)
print(rc, ctypes.get_errno())
'''

API_CHILD = r'''
import json, os, sys
backend = sys.argv[1]
out = {"pid": os.getpid()}
try:
    sys.activate_stack_trampoline(backend)
except BaseException as exc:
    out["exc"] = {"type": type(exc).__name__, "mro": [c.__name__ for c in type(exc).__mro__],
                  "errno": getattr(exc, "errno", None), "str": str(exc), "repr": repr(exc)}
else:
    out["exc"] = None
out["active"] = sys.is_stack_trampoline_active()
def work(n):
    return sum(i * i for i in range(n))
out["work"] = work(100)
print(json.dumps(out))
'''

PROGRAM = r'''
import os, sys
def square(n):
    return n * n
def total(n):
    return sum(square(i) for i in range(n))
print("total", total(1000))
print("active", sys.is_stack_trampoline_active())
print("pid", os.getpid())
'''
EXPECTED_TOTAL = sum(i * i for i in range(1000))


def cleanup(pid):
    for path in (f"/tmp/perf-{pid}.map", f"/tmp/jit-{pid}.dump"):
        if os.path.exists(path):
            os.unlink(path)


def build_shim(workdir, name, defines=()):
    return childcheck.build_shim(SHIM, workdir, name, defines)


def message_ok(text):
    """The error names what failed: "perf trampoline" (also accepted: "perf jit trampoline" and the like)."""
    text = text.lower()
    return "perf trampoline" in text or ("perf" in text and "trampoline" in text)


def check_api(env, backend, denied):
    """sys.activate_stack_trampoline(backend) under the shim: a problem, or None.
    denied: the activation must fail (OSError EACCES) and leave the trampoline off; else it must work."""
    proc = subprocess.run([sys.executable, "-c", API_CHILD, backend], capture_output=True, text=True,
                          timeout=300, env=env)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    res = json.loads(lines[-1]) if lines else None
    if res:
        cleanup(res["pid"])
    where = f"sys.activate_stack_trampoline({backend!r})"
    if proc.returncode != 0 or res is None:
        return f"{where}: child exit status {proc.returncode}; stderr: {proc.stderr.strip()[-1200:]!r}"
    exc = res["exc"]
    problems = []
    if not denied:
        if exc is not None:
            problems.append(f"raised {exc['repr']} although it needs no executable file mapping")
        elif not res["active"]:
            problems.append("not active after it returned")
    elif exc is None:
        problems.append("did not raise although executable memory is denied")
    elif exc["type"] == "SystemError":
        problems.append(f"raised SystemError: {exc['str']!r}")
    elif "OSError" not in exc["mro"]:
        problems.append(f"raised {exc['repr']}, not an OSError")
    elif exc["errno"] != errno.EACCES:
        problems.append(f"raised {exc['repr']} with errno {exc['errno']}, not EACCES ({errno.EACCES})")
    elif not message_ok(exc["str"]):
        problems.append(f"raised {exc['repr']}: the message does not mention 'perf trampoline'")
    if denied and res["active"]:
        problems.append("is_stack_trampoline_active() is True afterwards")
    if res["work"] != sum(i * i for i in range(100)):
        problems.append("calls give wrong results afterwards")
    if problems:
        stderr = proc.stderr.strip()
        return f"{where}: " + "; ".join(problems) + (f" (stderr: {stderr[-600:]!r})" if stderr else "")
    return None


def check_startup(env, label, args, extra_env):
    """The program run with perf support requested at start-up under the shim: a problem, or None."""
    run_env = dict(env, **extra_env)
    proc = subprocess.run([sys.executable, *args, "-c", PROGRAM], capture_output=True, text=True,
                          timeout=300, env=run_env)
    out = dict(l.split(" ", 1) for l in proc.stdout.splitlines() if " " in l)
    if "pid" in out:
        cleanup(out["pid"])
    problems = []
    if proc.returncode != 0:
        problems.append(f"exit status {proc.returncode}")
    if out.get("total") != str(EXPECTED_TOTAL):
        problems.append(f"wrong or no output {proc.stdout.strip()[-200:]!r}")
    if out.get("active") == "True":
        problems.append("the trampoline reports active")
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    if len(lines) != 1 or not message_ok(lines[0]):
        problems.append(f"stderr has {len(lines)} line(s), want exactly one warning mentioning "
                        f"'perf trampoline': {proc.stderr.strip()[-900:]!r}")
    if problems:
        return f"{label}: " + "; ".join(problems)
    return None


def shim_env(lib):
    env = childcheck.preload_env(lib)
    for key in ("PYTHONPERFSUPPORT", "PYTHON_PERF_JIT_SUPPORT"):
        env.pop(key, None)
    return env


def main():
    jit = offers_perf_jit()
    workdir = tempfile.mkdtemp(prefix="deny-execmem-")
    try:
        lib, why = build_shim(workdir, "deny_execmem")
        file_lib, why_file = build_shim(workdir, "noexec_tmp", ["-DDENY_FILE_ONLY"])
        if lib is None or file_lib is None:
            print(f"cannot check: {why or why_file}")
            return CANNOT_CHECK
        env = shim_env(lib)
        probe = subprocess.run([sys.executable, "-c", SHIM_PROBE], capture_output=True, text=True,
                               timeout=120, env=env)
        if probe.returncode != 0 or probe.stdout.split() != ["-1", str(errno.EACCES)]:
            print(f"cannot check: the LD_PRELOAD shim does not deny PROT_EXEC here "
                  f"(probe: {probe.stdout.strip()!r} {probe.stderr.strip()[-300:]!r})")
            return CANNOT_CHECK
        backends = ["perf"] + (["perf_jit"] if jit else [])
        failures = []
        # 1. no executable memory at all (SELinux deny_execmem)
        for backend in backends:
            problem = check_api(env, backend, denied=True)
            if problem:
                failures.append("[no PROT_EXEC] " + problem)
        startups = [("PYTHONPERFSUPPORT=1", [], {"PYTHONPERFSUPPORT": "1"}),
                    ("-X perf", ["-X", "perf"], {})]
        jit_startups = [("-X perf_jit", ["-X", "perf_jit"], {}),
                        ("PYTHON_PERF_JIT_SUPPORT=1", [], {"PYTHON_PERF_JIT_SUPPORT": "1"})]
        if jit:
            startups += jit_startups
        for label, args, extra in startups:
            problem = check_startup(env, label, args, extra)
            if problem:
                failures.append("[no PROT_EXEC] " + problem)
        # 2. a noexec /tmp: only the jitdump's executable mapping of /tmp/jit-PID.dump fails
        if jit:
            file_env = shim_env(file_lib)
            for backend, denied in (("perf", False), ("perf_jit", True)):
                problem = check_api(file_env, backend, denied)
                if problem:
                    failures.append("[noexec /tmp] " + problem)
            for label, args, extra in jit_startups:
                problem = check_startup(file_env, label, args, extra)
                if problem:
                    failures.append("[noexec /tmp] " + problem)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print(f"OK: with PROT_EXEC denied, activate({', '.join(backends)}) raise OSError(EACCES) and leave the "
          f"trampoline off; {', '.join(l for l, _, _ in startups)} run the program with one warning"
          + ("; with a noexec /tmp the same for perf_jit, perf works" if jit else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())

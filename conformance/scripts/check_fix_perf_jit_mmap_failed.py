#!/usr/bin/env python3
# requires: perf_jit
# fixes: gh-144194
"""Reproducer check for gh-144194: a refused mmap() of the jitdump must not go unnoticed.

perf_jit maps the first page of /tmp/jit-PID.dump PROT_READ|PROT_EXEC: that
executable mapping is what `perf inject --jit` looks for.  CPython 3.13.5
compared mmap()'s result with NULL, but mmap() fails with MAP_FAILED
((void *)-1), so where the mapping is refused -- a /tmp mounted noexec, the
usual hardening advice, or a policy that denies executable file mappings --
the backend carried on: it wrote the header and a record for every code
object into a dump perf can never find, and at exit called
munmap(MAP_FAILED, ...).

A real noexec mount needs privileges a test container does not have, so the
check builds (with the image's cc) an LD_PRELOAD shim that behaves like a
noexec /tmp: mmap() of a file under /tmp/ with PROT_EXEC fails with EPERM,
as the kernel answers for a noexec mount; anonymous and other mappings are
untouched.  The shim logs each refusal and each munmap() of MAP_FAILED to a
file (with write(2), nothing on stdout/stderr).  Under it, a program run with
-X perf_jit and with PYTHON_PERF_JIT_SUPPORT=1 must:
  * run to completion with its correct output (exit 0);
  * leave no jitdump with content: a dump with records that was never mapped
    is the defect (upstream's fix gives up silently; this project's series
    also says so on stderr and leaves no file);
  * never call munmap() on MAP_FAILED.
The log must show the jitdump's mapping was refused, else the shim did not
take effect and the check cannot tell (exit 2).

Exit status: 0 = fixed, 1 = defect present (message on stderr),
2 = cannot be checked here.  Standard library only.
"""
import os
import struct
import subprocess
import sys
import tempfile

import childcheck

CANNOT_CHECK = 2
JITDUMP_MAGIC = 0x4A695444
JIT_CODE_LOAD = 0
PROBE = "mmap_failure_probe"

SHIM = r'''
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

typedef void *(*mmap_fn)(void *, size_t, int, int, int, off_t);
typedef int (*munmap_fn)(void *, size_t);

static void note(const char *what, const char *path)
{
    const char *log = getenv("NOEXEC_TMP_LOG");
    char line[600];
    if (log == NULL) {
        return;
    }
    int n = snprintf(line, sizeof(line), "%ld %s %s\n", (long)getpid(), what, path);
    int fd = open(log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) {
        if (write(fd, line, (size_t)n) < 0) { /* nothing to do */ }
        close(fd);
    }
}

/* A file mapping with PROT_EXEC of a file under /tmp/ fails as on a noexec mount. */
static int refused(int prot, int flags, int fd, char *path, size_t size)
{
    char link[64];
    ssize_t n;
    if (!(prot & PROT_EXEC) || (flags & MAP_ANONYMOUS) || fd < 0) {
        return 0;
    }
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    n = readlink(link, path, size - 1);
    if (n <= 0) {
        return 0;
    }
    path[n] = '\0';
    return strncmp(path, "/tmp/", 5) == 0;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    static mmap_fn real;
    char path[512];
    if (refused(prot, flags, fd, path, sizeof(path))) {
        note("refused-exec-mmap", path);
        errno = EPERM;
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

int munmap(void *addr, size_t len)
{
    static munmap_fn real;
    if (addr == MAP_FAILED) {
        note("munmap-of-MAP_FAILED", "-");
    }
    if (real == NULL) {
        real = (munmap_fn)dlsym(RTLD_NEXT, "munmap");
    }
    return real(addr, len);
}
'''

# Does the shim refuse what a noexec /tmp refuses, and only that?
SHIM_PROBE = r'''
import ctypes, mmap, os, sys, tempfile
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
fd, path = tempfile.mkstemp(dir="/tmp")
os.write(fd, b"\0" * 4096)
p = libc.mmap(None, 4096, mmap.PROT_READ | mmap.PROT_EXEC, mmap.MAP_PRIVATE, fd, 0)
err = ctypes.get_errno()
q = libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_PRIVATE, fd, 0)
os.close(fd)
os.unlink(path)
print(p == ctypes.c_void_p(-1).value, err, q not in (None, ctypes.c_void_p(-1).value))
'''

PROGRAM = f'''
import os, sys
def {PROBE}(n):
    return sum(i * i for i in range(n))
total = 0
for _ in range(5):
    total += {PROBE}(100)
maps = open("/proc/self/maps").read()
mapped = any(line.endswith("/tmp/jit-%d.dump" % os.getpid()) for line in maps.splitlines())
print("pid", os.getpid())
print("total", total)
print("dump-mapped", mapped)
'''
EXPECTED_TOTAL = 5 * sum(i * i for i in range(100))


def fail(msg):
    print(f"FAIL (gh-144194): {msg}", file=sys.stderr)
    sys.exit(1)


def cannot(msg):
    print(f"cannot check: {msg}")
    sys.exit(CANNOT_CHECK)


def build_shim(workdir):
    lib, why_not = childcheck.build_shim(SHIM, workdir, "noexec_tmp")
    if lib is None:
        cannot(why_not)
    return lib


def code_loads(data):
    """(number of JIT_CODE_LOAD records, their names) of a jitdump, or a parse error."""
    if len(data) < 40:
        return 0, [], f"{len(data)} bytes, shorter than a header"
    magic, _version, hdr_size = struct.unpack_from("<III", data, 0)
    if magic != JITDUMP_MAGIC:
        return 0, [], f"bad magic {magic:#x}"
    pos, names = hdr_size, []
    while pos + 16 <= len(data):
        rid, size = struct.unpack_from("<II", data, pos)
        if size < 16 or pos + size > len(data):
            return len(names), names, f"record at {pos} has size {size}"
        if rid == JIT_CODE_LOAD:
            end = data.index(b"\0", pos + 56)
            names.append(data[pos + 56:end].decode("utf-8", "replace"))
        pos += size
    return len(names), names, None


def run_case(label, argv, env, log):
    if os.path.exists(log):
        os.unlink(log)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
    out = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    pid = out.get("pid")
    dump = f"/tmp/jit-{pid}.dump" if pid else None
    data = b""
    if dump and os.path.exists(dump):
        with open(dump, "rb") as fh:
            data = fh.read()
        os.unlink(dump)
    if pid and os.path.exists(f"/tmp/perf-{pid}.map"):
        os.unlink(f"/tmp/perf-{pid}.map")
    entries = open(log).read().splitlines() if os.path.exists(log) else []
    problems = []
    if proc.returncode != 0 or out.get("total") != str(EXPECTED_TOTAL):
        problems.append(f"the program did not run to completion (exit {proc.returncode}, stdout "
                        f"{proc.stdout.strip()[-300:]!r}, stderr {proc.stderr.strip()[-600:]!r})")
        return problems, entries
    refused = [e for e in entries if "refused-exec-mmap" in e and e.endswith(f"/tmp/jit-{pid}.dump")]
    if not refused:
        cannot(f"{label}: the shim refused no executable mapping of /tmp/jit-{pid}.dump "
               f"(log: {entries[-5:]}); perf_jit did not map its dump here, or the shim was bypassed")
    if out.get("dump-mapped") == "True":
        cannot(f"{label}: /tmp/jit-{pid}.dump is mapped although the shim refused it")
    if data:
        n, names, err = code_loads(data)
        probe = [x for x in names if PROBE in x]
        problems.append(
            f"{label}: the refused mmap() went unnoticed: /tmp/jit-{pid}.dump was never mapped (perf inject "
            f"--jit cannot find it) yet the backend wrote {len(data)} bytes into it, {n} code load record(s)"
            f"{' including ' + probe[0] if probe else ''}{' (' + err + ')' if err else ''}")
    if any("munmap-of-MAP_FAILED" in e for e in entries):
        problems.append(f"{label}: the backend called munmap(MAP_FAILED, ...) at exit: it kept mmap()'s "
                        "error value as its mapping")
    stderr = proc.stderr.strip()
    if "Traceback" in stderr or "Fatal Python error" in stderr:
        problems.append(f"{label}: stderr {stderr[-600:]!r}")
    return problems, entries


def main():
    with tempfile.TemporaryDirectory(prefix="noexec-tmp-") as workdir:
        lib = build_shim(workdir)
        log = os.path.join(workdir, "refusals.log")
        env = childcheck.preload_env(lib, NOEXEC_TMP_LOG=log)
        env.pop("PYTHONPERFSUPPORT", None)
        env.pop("PYTHON_PERF_JIT_SUPPORT", None)
        probe = subprocess.run([sys.executable, "-c", SHIM_PROBE], capture_output=True, text=True,
                               timeout=120, env=env)
        if probe.returncode != 0 or probe.stdout.split() != ["True", "1", "True"]:
            cannot(f"the shim does not behave like a noexec /tmp here (probe: {probe.stdout.strip()!r} "
                   f"{probe.stderr.strip()[-400:]!r}; want refused exec mapping with EPERM, read mapping allowed)")
        problems = []
        cases = [("-X perf_jit", [sys.executable, "-X", "perf_jit", "-c", PROGRAM], env),
                 ("PYTHON_PERF_JIT_SUPPORT=1", [sys.executable, "-c", PROGRAM],
                  dict(env, PYTHON_PERF_JIT_SUPPORT="1"))]
        for label, argv, case_env in cases:
            found, entries = run_case(label, argv, case_env, log)
            problems += found
            print(f"{label}: {str(len(found)) + ' problem(s)' if found else 'no dump left, no munmap(MAP_FAILED)'} "
                  f"(shim log: {len(entries)} line(s))")
        if problems:
            fail("\n  ".join(problems))
    print("OK: with the jitdump's executable mapping refused (as on a noexec /tmp), perf_jit wrote no "
          "unreachable dump and never unmapped MAP_FAILED; the programs ran to completion")
    return 0


if __name__ == "__main__":
    sys.exit(main())

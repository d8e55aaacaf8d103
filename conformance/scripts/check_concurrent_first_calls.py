# requires: perf
# hits: gh-146522 /switching: the interpreter ended with killed by SIGSEGV/
# checks: behaviour
"""Threads that call a new function for the first time at once: each code object is published once, intact.

In the free-threaded build (python3.13t) two threads can run the trampoline's
slow path for the same code object at the same moment: both find no entry,
both take a slot and publish, and one may free the other's entry.  Here
eight threads released by a barrier call the same freshly exec-ed function,
200 times over, and between rounds the main thread switches the backend
(perf <-> perf_jit, where offered) or deactivates and reactivates it, so
that slot allocation, the arena list, output switching and the dump's
writer all meet the racing threads.  Run under -X perf, -X perf_jit and the
sys API.  Must hold:
  * every process exits 0 (an AddressSanitizer report ends it with 1);
  * the perf map names each fresh function at most once, and exactly once
    where perf was the backend in use for its round;
  * the jitdump is well formed and names each fresh function at most once,
    and exactly once where perf_jit was in use for its round.
Another tool's co_extra slot is set on each fresh code object first (as a
debugger's frame evaluator does), so the threads race for a slot in an
existing co_extra array, where CPython frees the value it replaces.  And an
LD_PRELOAD shim (built with the image's cc, where there is one) makes every
write to the map and the dump take 2 ms, as on a slow /tmp, and every small
calloc(1, n) (the trampoline's per-code entry is one) take 0.5 ms: the
threads that found no entry are then all still allocating theirs when the
first stores it, and the first is still writing when the next one replaces
(and frees) it.  On 3.13-ftasan built without the series' lock this ends in
"AddressSanitizer: heap-use-after-free ... in publish_trampoline".  Under
the GIL this holds by construction; the check is for the free-threaded
cells (3.13-ft, 3.13-ftasan), and runs everywhere.
"""
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter

from childcheck import (CO_EXTRA_TOOL, build_shim, child_reports, describe_exit, finish, jitdump_code_loads,
                        offers_perf_jit, preload_env, remove_perf_files, stderr_gist)

ROUNDS = 200
THREADS = 8

SLOW_TMP_SHIM = r'''
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int is_profiler_file(int fd)
{
    char link[64], target[256];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) return 0;
    target[n] = 0;
    return strncmp(target, "/tmp/perf-", 10) == 0 || strncmp(target, "/tmp/jit-", 9) == 0;
}

ssize_t write(int fd, const void *buf, size_t count)
{
    static ssize_t (*real_write)(int, const void *, size_t);
    if (real_write == NULL) real_write = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    if (is_profiler_file(fd)) usleep(2000);
    return real_write(fd, buf, count);
}

/* The trampoline's per-code entry is one small calloc(1, n): slow those down
 * too, so that threads that found no entry are still allocating theirs when
 * the others store and publish. */
static void *(*real_calloc)(size_t, size_t);
static char early[4096];
static size_t early_used;

void *calloc(size_t nmemb, size_t size)
{
    if (real_calloc == NULL) {
        /* dlsym() itself may allocate: serve it from a static buffer */
        static __thread int resolving;
        if (resolving) {
            void *p = early + early_used;
            early_used += (nmemb * size + 15) & ~(size_t)15;
            return p;
        }
        resolving = 1;
        real_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
        resolving = 0;
    }
    if (nmemb == 1 && size >= 16 && size <= 64) usleep(500);
    return real_calloc(nmemb, size);
}

int fflush(FILE *stream)
{
    static int (*real_fflush)(FILE *);
    if (real_fflush == NULL) real_fflush = (int (*)(FILE *))dlsym(RTLD_NEXT, "fflush");
    if (stream != NULL && is_profiler_file(fileno(stream))) usleep(2000);
    return real_fflush(stream);
}
'''

PROGRAM = r'''
import ctypes, json, os, sys, threading
rounds, threads, plan_name, jit = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
if plan_name == "switch_from_perf":      # started here through the sys API
    backends = ["perf", "perf_jit"] if jit else ["perf"]
    sys.activate_stack_trampoline("perf")
elif plan_name == "switch_from_jit":     # started by -X perf_jit
    backends = ["perf_jit", "perf"]
else:                                    # perf_only: started by -X perf, never switched
    backends = ["perf"]
state = backends[0]          # the backend in use, or "off"
# Another tool that keeps data in code objects (a debugger, a JIT): its
# index comes after the trampoline's, so each fresh code object already has
# its co_extra array when the threads race for the trampoline's slot in it.
exec(CO_EXTRA_TOOL)
tool_index = request(None)
used = {}
barrier = threading.Barrier(threads)
for r in range(rounds):
    if r and r % 10 == 0 and plan_name != "perf_only":
        step = (r // 10) % 3
        if step == 0:
            sys.deactivate_stack_trampoline(); state = "off"
        else:
            state = backends[step % len(backends)]
            sys.activate_stack_trampoline(state)
    ns = {}
    exec(compile("def fresh_%d(n):\n    return n + %d\n" % (r, r), "<fresh>", "exec"), ns)
    fresh = ns["fresh_%d" % r]
    set_extra(fresh.__code__, tool_index, 1)
    results = []
    def worker():
        barrier.wait()
        results.append(fresh(1))
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if results != [r + 1] * threads:
        print(json.dumps({"phase": "wrong", "round": r, "results": results[:3]}), flush=True)
    used["fresh_%d" % r] = state
print(json.dumps({"phase": "done", "pid": os.getpid(), "used": used,
                  "gil": getattr(sys, "_is_gil_enabled", lambda: True)()}), flush=True)
'''


def fresh_names(names):
    """Counter of the fresh_R functions among a list of py::NAME:FILE symbols."""
    out = Counter()
    for sym in names:
        if sym.startswith("py::fresh_") and sym.endswith(":<fresh>"):
            out[sym[4:-len(":<fresh>")]] += 1
    return out


def run(label, argv, plan_name, jit, env):
    proc = subprocess.run([sys.executable, *argv, "-c", PROGRAM.replace("exec(CO_EXTRA_TOOL)", CO_EXTRA_TOOL),
                           str(ROUNDS), str(THREADS), plan_name,
                           "1" if jit else "0"],
                          capture_output=True, text=True, timeout=900, env=env)
    reports = child_reports(proc.stdout)
    done = reports.get("done")
    problems = []
    if proc.returncode != 0 or done is None:
        return [f"{label}: the interpreter ended with {describe_exit(proc.returncode)}: "
                f"{stderr_gist(proc.stderr)}"], None
    if "wrong" in reports:
        problems.append(f"{label}: a call returned a wrong result: {reports['wrong']}")
    pid = done["pid"]
    try:
        map_path, dump_path = f"/tmp/perf-{pid}.map", f"/tmp/jit-{pid}.dump"
        map_names = []
        if os.path.exists(map_path):
            with open(map_path, errors="replace") as fh:
                map_names = [line.rstrip("\n").split(" ", 2)[-1] for line in fh]
        dump_names = []
        if os.path.exists(dump_path):
            dump_names, _count, problem = jitdump_code_loads(dump_path)
            if problem:
                problems.append(f"{label}: {dump_path} is malformed: {problem}")
        outputs = {"perf": fresh_names(map_names), "perf_jit": fresh_names(dump_names)}
        for backend, counts in outputs.items():
            twice = [name for name, n in counts.items() if n > 1]
            if twice:
                problems.append(f"{label}: the {backend} output names {len(twice)} function(s) more than once, "
                                f"e.g. {twice[0]} {counts[twice[0]]} times")
            missing = [name for name, state in done["used"].items() if state == backend and counts[name] == 0]
            if missing:
                problems.append(f"{label}: {len(missing)} function(s) called while {backend} was in use are "
                                f"missing from its output, e.g. {missing[0]}")
    finally:
        remove_perf_files(pid)
    return problems, done["gil"]


def main():
    jit = offers_perf_jit()
    cases = [("-X perf", ["-X", "perf"], "perf_only"), ("sys API, switching", [], "switch_from_perf")]
    if jit:
        cases.append(("-X perf_jit, switching", ["-X", "perf_jit"], "switch_from_jit"))
    else:
        print("perf_jit: not offered by this interpreter, its cases left out")
    workdir = tempfile.mkdtemp()
    lib, why_not = build_shim(SLOW_TMP_SHIM, workdir, "slow_tmp")
    env = dict(os.environ) if lib is None else preload_env(lib)
    if lib is None:
        print(f"without the slow-/tmp shim: {why_not}")
    problems, gil = [], None
    for label, argv, plan_name in cases:
        found, case_gil = run(label, argv, plan_name, jit, env)
        gil = case_gil if case_gil is not None else gil
        print(f"{label}: {'ok' if not found else 'FAILED'}")
        problems += found
    shutil.rmtree(workdir, ignore_errors=True)
    print(f"GIL enabled: {gil}")
    return finish(problems)


if __name__ == "__main__":
    sys.exit(main())

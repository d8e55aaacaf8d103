#!/usr/bin/env python3
# requires: perf
# fixes: gh-143228
# emulated-reproduction: no   (the exit race never hit under qemu-user: 0 of 40 runs on 3.13.5 aarch64)
"""Reproducer check for gh-143228: crash at exit with daemon threads.

In CPython 3.13.5 the perf trampoline arenas are unmapped during interpreter
finalization. Daemon threads that try to take the GIL afterwards are ended
with pthread_exit(), whose forced unwind reads the code at every return
address on the thread's stack, including the unmapped trampolines, so the
process can die with SIGSEGV at exit. The crash is timing dependent: on the
machine this was written on it hit about one run in four.

The check runs a script with 16 daemon threads looping through a Python
function under "-X perf" up to RUNS times and fails on the first run that is
killed by a signal. With a per-run crash rate of 25% the chance that an
affected interpreter survives all 40 runs is about 1e-5.

A debug build (--with-pydebug) of 3.13 has a second, unrelated exit race with
daemon threads, with or without -X perf: a daemon thread that takes the GIL
while finalization frees the thread states aborts on the assertion
"_PyThreadState_CheckConsistency: ... !_PyMem_IsPtrFreed(tstate->interp)"
(upstream gh-110052; 3.14 ends it with reference-counted thread states,
gh-124878).  It hits about one run in 2,000 in the 3.13-debug image, the same
without -X perf.  Such a run is not this defect: it is run again, and said so;
more than MAX_UPSTREAM_RACE of them fail the check.

Exit status: 0 = no crash in RUNS runs, 1 = crash seen (message on stderr),
2 = cannot be checked here (no perf trampoline support in this build).
Standard library only.
"""

import os
import signal
import subprocess
import sys
import sysconfig

RUNS = 40
MAX_UPSTREAM_RACE = 3
UPSTREAM_RACE_ASSERTION = "_PyThreadState_CheckConsistency: Assertion `!_PyMem_IsPtrFreed(tstate"
CHILD = """
import os, threading, time
print(os.getpid(), flush=True)

def inner():
    time.sleep(0)

def worker():
    while True:
        inner()

for _ in range(16):
    threading.Thread(target=worker, daemon=True).start()
time.sleep(0.02)
"""


def run_child():
    """One run of CHILD under -X perf; its perf map is removed."""
    proc = subprocess.run([sys.executable, "-Xperf", "-c", CHILD],
                          capture_output=True, text=True, timeout=60)
    pid = proc.stdout.strip().split("\n")[0] if proc.stdout else ""
    if pid.isdigit():
        try:
            os.unlink(f"/tmp/perf-{pid}.map")
        except OSError:
            pass
    return proc


def main():
    if sysconfig.get_config_var("PY_HAVE_PERF_TRAMPOLINE") != 1:
        print("CANNOT CHECK: this interpreter has no perf trampoline support",
              file=sys.stderr)
        return 2
    if not getattr(sys, "_is_gil_enabled", lambda: True)():
        # The crash needs a daemon thread that waits for the GIL after finalization started and is ended
        # with pthread_exit() there; a free-threaded interpreter has no GIL to wait for.
        print("CANNOT CHECK: the defect needs the GIL; this interpreter runs without it", file=sys.stderr)
        return 2
    debug_build = hasattr(sys, "gettotalrefcount")
    upstream_races = 0
    for i in range(1, RUNS + 1):
        proc = run_child()
        while (debug_build and proc.returncode == -signal.SIGABRT
               and UPSTREAM_RACE_ASSERTION in proc.stderr and upstream_races < MAX_UPSTREAM_RACE):
            upstream_races += 1
            print(f"run {i} aborted on the debug build's dangling thread state assertion (gh-110052, "
                  f"not this defect): run again", file=sys.stderr)
            proc = run_child()
        if proc.returncode < 0:
            try:
                name = signal.Signals(-proc.returncode).name
            except ValueError:
                name = str(-proc.returncode)
            print(f"FAIL (gh-143228): run {i} of {RUNS} was killed by {name} "
                  f"at exit (-X perf with daemon threads)", file=sys.stderr)
            if proc.stderr.strip():
                # A debug build says why it aborted (a failed assertion, a fatal error): keep it.
                print(f"its stderr ended with:\n{proc.stderr.strip()[-2000:]}", file=sys.stderr)
            return 1
        if proc.returncode != 0:
            print(f"FAIL (gh-143228): run {i} exited with {proc.returncode}: "
                  f"{proc.stderr.strip()[-500:]}", file=sys.stderr)
            return 1
    again = f" (and {upstream_races} run again after gh-110052's assertion)" if upstream_races else ""
    print(f"PASS (gh-143228): {RUNS} runs with daemon threads under -X perf "
          f"exited cleanly{again}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

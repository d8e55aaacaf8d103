# requires: perf perf_jit
# hits: gh-146522 /no more code watcher IDs available/
# hits: gh-141579 /ValueError\('invalid backend: perf_jit'\)/
# checks: behaviour
"""Backend switches and deactivations from deep recursion and from several threads at once.

In one child interpreter:
  1. Deep: 600 rounds of a 300-deep recursion (less where a debug build's C
     recursion budget ends it first) under the trampoline; at the
     bottom the backend is switched (perf <-> perf_jit, and every tenth round
     deactivated and activated again), then the recursion unwinds through the
     trampolines of the old backend and runs again.  Every activation must
     leave the trampoline active and every recursion return the right value.
  2. Threads: 4 threads, 2,000 iterations each: switch the backend (perf /
     perf_jit at random), call a few functions (a short recursion among
     them), every 50th iteration deactivate, call, activate again; the main
     thread calls functions all the while; sys.setswitchinterval(1e-6), so
     that the threads interleave inside calls and between switches.  No exception in any thread, right
     results everywhere.
  3. The end state is consistent: after a final activate("perf") the
     trampoline is active, and a brand-new function called afterwards appears
     in /tmp/perf-PID.map.
The child must end with exit status 0 (a crash is reported with its signal).

Seen before the fix: every backend change took a new co_extra index, and
after ~250 switches activate_stack_trampoline raised RuntimeError("perf
trampoline: no code object extra index left") (3.9 then crashed).
"""
import inspect
import os
import subprocess
import sys

from childcheck import child_reports, describe_exit, recursion_depth_under_trampoline

CHILD = inspect.getsource(recursion_depth_under_trampoline) + r'''
import json, os, random, sys, threading, time

sys.setrecursionlimit(max(sys.getrecursionlimit(), 2000))
# a debug build's C recursion budget may end the recursion before 300 levels
DEPTH, ROUNDS = recursion_depth_under_trampoline(300), 600
THREADS, ITERATIONS = 4, 2000
errors = []
counts = {"switches": 0, "deactivations": 0}
lock = threading.Lock()

def report(**kw):
    kw["pid"] = os.getpid()
    print(json.dumps(kw), flush=True)

def record(where, exc):
    with lock:
        if len(errors) < 20:
            errors.append("%s: %r" % (where, exc))
            # printed at once: a crash further on must not lose it
            report(phase="error-%d" % len(errors), error=errors[-1])

def leaf(n):
    return n * 2

def add(a, b):
    return a + b

def rec(n, at_bottom):
    if n == 0:
        at_bottom()
        return 0
    return add(rec(n - 1, at_bottom), 1)

def short(n):
    return 0 if n == 0 else short(n - 1) + 1

def switch(backend):
    sys.activate_stack_trampoline(backend)
    with lock:
        counts["switches"] += 1

# 1. deep
sys.activate_stack_trampoline("perf")
first_error_round = None
for r in range(ROUNDS):
    backend = "perf_jit" if r % 2 == 0 else "perf"
    def at_bottom():
        if r % 10 == 9:
            sys.deactivate_stack_trampoline()
            counts["deactivations"] += 1
            if sys.is_stack_trampoline_active():
                raise AssertionError("active after deactivate")
            leaf(r)
        switch(backend)
        if not sys.is_stack_trampoline_active():
            raise AssertionError("not active after activate(%r)" % backend)
        leaf(r)
    try:
        got = rec(DEPTH, at_bottom)
        if got != DEPTH:
            raise AssertionError("rec(%d) returned %r" % (DEPTH, got))
        if short(50) != 50:
            raise AssertionError("short(50) wrong after unwinding")
    except BaseException as exc:
        record("deep round %d (to %s)" % (r, backend), exc)
        if first_error_round is None:
            first_error_round = r
            report(phase="deep-error", round=r, error=repr(exc), switches=counts["switches"])
        break
report(phase="deep", rounds=r + 1, switches=counts["switches"], errors=list(errors))

# 2. threads (a tiny switch interval: the GIL changes hands inside calls and between switches)
sys.setswitchinterval(1e-6)
barrier = threading.Barrier(THREADS + 1)
main_calls = [0]
def worker(t):
    rnd = random.Random(t)
    try:
        barrier.wait()
        for i in range(ITERATIONS):
            switch(rnd.choice(("perf", "perf_jit")))
            if leaf(i) != 2 * i or short(20) != 20 or add(i, t) != i + t:
                raise AssertionError("wrong result in thread %d at %d" % (t, i))
            if i % 50 == 49:
                sys.deactivate_stack_trampoline()
                with lock:
                    counts["deactivations"] += 1
                short(10)
                switch("perf")
    except BaseException as exc:
        record("thread %d iteration %d" % (t, i), exc)
threads = [threading.Thread(target=worker, args=(t,)) for t in range(THREADS)]
for th in threads:
    th.start()
barrier.wait()
t0 = time.monotonic()
while any(th.is_alive() for th in threads):
    for i in range(1000):
        if leaf(i) != 2 * i or short(5) != 5:
            record("main thread", AssertionError("wrong result"))
    main_calls[0] += 2000
for th in threads:
    th.join()
thread_seconds = time.monotonic() - t0
sys.setswitchinterval(0.005)

# 3. end state
final_error = None
try:
    sys.activate_stack_trampoline("perf")
except BaseException as exc:
    final_error = repr(exc)
active = sys.is_stack_trampoline_active()
ns = {}
exec("def brand_new_after_stress(n):\n    return n + 1\n", ns)
ns["brand_new_after_stress"](1)
report(phase="done", switches=counts["switches"], deactivations=counts["deactivations"],
       main_calls=main_calls[0], thread_seconds=round(thread_seconds, 2), errors=errors,
       final_error=final_error, active=active)
'''


def main():
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=1200)
    reports = child_reports(proc.stdout)
    pid = next((r["pid"] for r in reports.values() if "pid" in r), None)
    failures = []
    if "deep-error" in reports:
        r = reports["deep-error"]
        failures.append(f"deep recursion: round {r['round']} failed after {r['switches']} switches: {r['error']}")
    done = reports.get("done")
    if not done:
        # what the child had reported before it died
        errs = [r["error"] for k, r in sorted(reports.items(), key=lambda kv: str(kv[0])) if str(k).startswith("error-")
                and not str(r["error"]).startswith("deep round")]
        if errs:
            failures.append(f"{len(errs)} error(s) reported before the end: " + "; ".join(errs[:6]))
        if "deep" in reports:
            failures.append(f"the deep phase had ended: {reports['deep']['rounds']} rounds, "
                            f"{reports['deep']['switches']} switches")
    if proc.returncode != 0:
        stage = ("in the deep-recursion rounds" if "deep" not in reports
                 else "in the threads or at the end" if not done else "at exit")
        failures.append(f"child {describe_exit(proc.returncode)} {stage}; stderr: {proc.stderr.strip()[-1500:]!r}")
    if done:
        if done["errors"]:
            failures.append(f"{len(done['errors'])} error(s) (first ones): " + "; ".join(done["errors"][:6]))
        if done["final_error"]:
            failures.append(f"the final activate('perf') raised {done['final_error']}")
        if not done["active"]:
            failures.append("not active after the final activate('perf')")
    elif proc.returncode == 0:
        failures.append(f"the child printed no final report: {proc.stdout[-500:]!r}")
    if pid is not None:
        pmap = f"/tmp/perf-{pid}.map"
        if done:
            text = ""
            if os.path.exists(pmap):
                with open(pmap) as fh:
                    text = fh.read()
            if " py::brand_new_after_stress:<string>\n" not in text:
                failures.append(f"a function first called after the final activate('perf') is not in {pmap}")
        for path in (pmap, f"/tmp/jit-{pid}.dump"):
            if os.path.exists(path):
                os.unlink(path)
    if done:
        print(f"child: {done['switches']} switches, {done['deactivations']} deactivations "
              f"({reports.get('deep', {}).get('rounds')} deep rounds; threads ran {done['thread_seconds']} s; "
              f"main thread {done['main_calls']} calls meanwhile)")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("OK: switches from deep recursion and 4 threads, no error; final perf activation maps new code")
    return 0


if __name__ == "__main__":
    sys.exit(main())

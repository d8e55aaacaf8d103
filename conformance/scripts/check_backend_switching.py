# requires: perf perf_jit
# hits: patches/3.13/0010 /^no /tmp/jit-\d+\.dump$/
# hits: gh-146522 /^switch #\d+ \(index \d+, to '\w+'\) raised SystemError\('error return without exception set'\)/
# hits: gh-141579 /^switch #1 \(index 0, to 'perf_jit'\) raised ValueError\('invalid backend: perf_jit'\)/
# checks: behaviour
"""Switching backends 10,000 times: no exception, no crash, no leak, both backends still map.

In a child interpreter: activate "perf", call f, then alternate
sys.activate_stack_trampoline("perf_jit") / ("perf") 10,000 times, calling f
after every activation.  Every activation must succeed (any exception is a
failure: the index of the first one is reported) and leave
sys.is_stack_trampoline_active() True.  Then f, g and h (g calls f) run
2,000,000 times; VmRSS (/proc/self/status) before and after that loop may
grow by at most 4 MiB: a trampoline for a code object is made once, not on
every call.  The child must end with exit status 0 (a signal is reported).
Afterwards /tmp/perf-PID.map must name f and /tmp/jit-PID.dump must hold a
JIT_CODE_LOAD record named f (both backends really mapped it).

Seen before the fix: every backend change asked for a new co_extra index, and
after 252 of them (255 in all) the 253rd switch raised RuntimeError("perf
trampoline: no code object extra index left"), leaving the trampoline active
with no index: 3.9 then died with SIGSEGV on the next call, 3.11 made a new
trampoline on every call (VmRSS +2 GiB over 2,000,000 calls each of three
functions; the child stops its loop once VmRSS has grown 256 MiB).
"""
import os
import subprocess
import sys

from childcheck import child_reports, describe_exit, jitdump_code_loads

SWITCHES = 10000
CALLS = 2000000
MAX_RSS_GROWTH_KIB = 4 * 1024

CHILD = r'''
import json, os, sys, time

def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1

def f(n):
    return n + 1
def g(n):
    return f(n) * 2
def h(n):
    return n - 1

def report(**kw):
    kw["pid"] = os.getpid()
    print(json.dumps(kw), flush=True)

SWITCHES, CALLS = int(sys.argv[1]), int(sys.argv[2])
sys.activate_stack_trampoline("perf")
f(0)
first_error = None
not_active = None
done = 0
t0 = time.monotonic()
for i in range(SWITCHES):
    backend = "perf_jit" if i % 2 == 0 else "perf"
    try:
        sys.activate_stack_trampoline(backend)
    except BaseException as exc:
        first_error = {"index": i, "switch": i + 1, "backend": backend, "error": repr(exc),
                       "active_after": sys.is_stack_trampoline_active()}
        # printed at once: a crash further on must not lose it
        report(phase="switch-error", **first_error)
        break
    if not sys.is_stack_trampoline_active() and not_active is None:
        not_active = {"index": i, "backend": backend}
        report(phase="switch-not-active", **not_active)
    f(i)
    done += 1
switch_seconds = time.monotonic() - t0
report(phase="switched", switches=done, seconds=round(switch_seconds, 3),
       active=sys.is_stack_trampoline_active())
before = rss_kib()
t0 = time.monotonic()
calls = 0
while calls < CALLS:
    for i in range(calls, calls + 100000):
        f(i)
        g(i)
        h(i)
    calls += 100000
    # a leak of a trampoline per call is plain long before 2,000,000 calls: stop at 256 MiB
    if rss_kib() - before > 256 * 1024:
        break
call_seconds = time.monotonic() - t0
after = rss_kib()
report(phase="done", switches=done, switch_seconds=round(switch_seconds, 3), calls=calls,
       first_error=first_error, not_active=not_active, rss_before_kib=before,
       rss_after_kib=after, call_seconds=round(call_seconds, 3),
       active=sys.is_stack_trampoline_active())
'''


def main():
    proc = subprocess.run([sys.executable, "-c", CHILD, str(SWITCHES), str(CALLS)],
                          capture_output=True, text=True, timeout=1200)
    reports = child_reports(proc.stdout)
    pid = next((r["pid"] for r in reports.values() if "pid" in r), None)
    failures = []
    if "switch-error" in reports:
        r = reports["switch-error"]
        failures.append(f"switch #{r['switch']} (index {r['index']}, to {r['backend']!r}) raised {r['error']}; "
                        f"is_stack_trampoline_active() then: {r['active_after']}")
    if "switch-not-active" in reports:
        r = reports["switch-not-active"]
        failures.append(f"not active after the activation of {r['backend']!r} at index {r['index']}")
    if proc.returncode != 0:
        where = ("after the switches, during the 2,000,000 calls" if "switched" in reports and "done" not in reports
                 else "during the switches" if "switched" not in reports else "at exit")
        failures.append(f"child {describe_exit(proc.returncode)} ({where}); "
                        f"stderr: {proc.stderr.strip()[-1500:]!r}")
    done = reports.get("done")
    if done:
        growth = done["rss_after_kib"] - done["rss_before_kib"]
        if growth > MAX_RSS_GROWTH_KIB:
            early = " (stopped early: past 256 MiB)" if done["calls"] < CALLS else ""
            failures.append(f"VmRSS grew {growth} KiB ({done['rss_before_kib']} -> {done['rss_after_kib']} KiB) "
                            f"over {done['calls']} calls each of f, g, h{early}; "
                            f"at most {MAX_RSS_GROWTH_KIB} KiB allowed")
        if not done["active"]:
            failures.append("the trampoline is not active at the end")
    elif proc.returncode == 0:
        failures.append(f"the child printed no final report: {proc.stdout[-500:]!r}")
    if pid is not None:
        pmap, dump = f"/tmp/perf-{pid}.map", f"/tmp/jit-{pid}.dump"
        if os.path.exists(pmap):
            with open(pmap) as fh:
                text = fh.read()
            if " py::f:<string>\n" not in text:
                failures.append(f"{pmap} does not name f")
        else:
            failures.append(f"no {pmap}")
        if os.path.exists(dump):
            names, _count, problem = jitdump_code_loads(dump)
            if problem:
                failures.append(f"{dump} is malformed: {problem}")
            if "py::f:<string>" not in names:
                failures.append(f"{dump} has no JIT_CODE_LOAD named py::f:<string> ({len(names)} loads)")
        elif reports.get("switch-error", {}).get("backend") != "perf_jit":
            # (where the switch to perf_jit raised, that failure above is the one to read)
            failures.append(f"no {dump}")
        for path in (pmap, dump):
            if os.path.exists(path):
                os.unlink(path)
    else:
        failures.append(f"the child reported nothing ({describe_exit(proc.returncode)}): "
                        f"{(proc.stdout + proc.stderr)[-1500:]!r}")
    if done:
        print(f"child: {done['switches']} of {SWITCHES} switches in {done['switch_seconds']} s; "
              f"{done['calls']} calls each of f, g, h in {done['call_seconds']} s; "
              f"VmRSS {done['rss_before_kib']} -> {done['rss_after_kib']} KiB")
    elif "switched" in reports:
        r = reports["switched"]
        print(f"child: {r['switches']} of {SWITCHES} switches in {r['seconds']} s, then no final report")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print(f"OK: {SWITCHES} perf/perf_jit switches, each active; f in the map and the dump; "
          f"VmRSS grew {done['rss_after_kib'] - done['rss_before_kib']} KiB over {CALLS} calls each of f, g, h")
    return 0


if __name__ == "__main__":
    sys.exit(main())

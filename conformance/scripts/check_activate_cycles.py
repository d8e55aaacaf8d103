# requires: perf
# fixes: gh-146522
"""sys.activate_stack_trampoline("perf") / sys.deactivate_stack_trampoline()
1000 times in one process, calling Python functions in between, then 1000
activations in a row while already active (cf. gh-146522).

Every activation must succeed and report active, every deactivation
inactive; calls made while active must appear in the map, calls made only
while inactive must not; the process must end normally (exit status 0, no
crash at finalization).
"""
import json
import os
import subprocess
import sys

CHILD = r'''
import json, os, sys
def while_active(n):
    return n + 1
def while_inactive(n):
    return n - 1
errors = []
for i in range(1000):
    sys.activate_stack_trampoline("perf")
    if not sys.is_stack_trampoline_active():
        errors.append("not active after activate #%d" % i)
        break
    while_active(i)
    sys.deactivate_stack_trampoline()
    if sys.is_stack_trampoline_active():
        errors.append("active after deactivate #%d" % i)
        break
    while_inactive(i)
try:
    import ctypes
    ctypes.CDLL(None)
except ImportError:
    pass
for i in range(1000):
    sys.activate_stack_trampoline("perf")
    while_active(i)
if not sys.is_stack_trampoline_active():
    errors.append("not active after repeated activation")
print(json.dumps({"pid": os.getpid(), "errors": errors}))
'''


def main():
    proc = subprocess.run([sys.executable, "-c", CHILD],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        print(f"FAIL: child exited {proc.returncode}: {proc.stderr[-2000:]}")
        return 1
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    path = f"/tmp/perf-{res['pid']}.map"
    text = open(path).read() if os.path.exists(path) else ""
    if os.path.exists(path):
        os.unlink(path)
    if res["errors"]:
        print("FAIL:", res["errors"])
        return 1
    n_active = text.count(" py::while_active:<string>\n")
    n_inactive = text.count(" py::while_inactive:<string>\n")
    if n_active < 1:
        print("FAIL: no map entry for the function called while active")
        return 1
    if n_inactive:
        print("FAIL: function only called while inactive has map entries")
        return 1
    print(f"OK: 1000 activate/deactivate cycles; while_active has {n_active} map entr"
          f"{'y' if n_active == 1 else 'ies'}, while_inactive none")
    return 0


if __name__ == "__main__":
    sys.exit(main())

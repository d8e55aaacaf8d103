# requires: perf perf_jit
# hits: patches/3.13/0012 /^switch: the dump .* has no code load for first_period/
# hits: gh-146522 /^(switch|deactivate): child killed by SIGSEGV/
# hits: gh-141579 /^(switch|deactivate): child exit status 1: .*ValueError: invalid backend: perf_jit/
# checks: behaviour
"""/tmp/jit-PID.dump keeps what it had when perf_jit is activated again.

In one child: activate perf_jit, call first_period(); switch to perf, call
middle(); switch back to perf_jit, call third_period().  The dump is then
parsed: it must be well formed (magic 0x4A695444, header size 40, every
record's total_size walking exactly to the end of the file, one header only)
and hold JIT_CODE_LOAD records named py::first_period:<string> and
py::third_period:<string>: perf inject --jit resolves samples of the first
period from the same file as those of the third.  middle() was run under perf
only: it must be in /tmp/perf-PID.map and not in the dump.

A second child does the same with deactivation in between (perf_jit on, off,
on again).

Seen before the fix: the second activation reopened the dump with O_TRUNC,
so first_period's record was gone (and samples of the first period could no
longer be resolved by perf inject).
"""
import json
import os
import subprocess
import sys

from childcheck import describe_exit, jitdump_code_loads

CHILD = r'''
import json, os, sys
def first_period(n):
    return n + 1
def middle(n):
    return n + 2
def third_period(n):
    return n + 3
sys.activate_stack_trampoline("perf_jit")
first_period(1)
if sys.argv[1] == "switch":
    sys.activate_stack_trampoline("perf")
    middle(1)
else:
    sys.deactivate_stack_trampoline()
    middle(1)
sys.activate_stack_trampoline("perf_jit")
third_period(1)
print(json.dumps({"pid": os.getpid(), "active": sys.is_stack_trampoline_active()}))
'''


class Fail(Exception):
    pass


def run(how):
    proc = subprocess.run([sys.executable, "-c", CHILD, how], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        said = " / ".join(line.strip() for line in proc.stderr.strip().splitlines())   # one failure line
        raise Fail(f"{how}: child {describe_exit(proc.returncode)}: {said[-1500:]}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    pid = res["pid"]
    dump, pmap = f"/tmp/jit-{pid}.dump", f"/tmp/perf-{pid}.map"
    try:
        if not res["active"]:
            raise Fail(f"{how}: not active after the second perf_jit activation")
        if not os.path.exists(dump):
            raise Fail(f"{how}: no {dump}")
        with open(dump, "rb") as fh:
            data = fh.read()
        names, count, problem = jitdump_code_loads(data)
        if problem:
            raise Fail(f"{how}: {dump} is malformed: {problem}")
        map_text = open(pmap).read() if os.path.exists(pmap) else ""
    finally:
        for path in (dump, pmap):
            if os.path.exists(path):
                os.unlink(path)
    loads = [n for n in names if n.startswith(("py::first_period:", "py::third_period:", "py::middle:"))]
    missing = [fn for fn in ("first_period", "third_period") if f"py::{fn}:<string>" not in names]
    if missing:
        raise Fail(f"{how}: the dump ({len(data)} bytes, {count} records, {len(names)} code loads) has no "
                   f"code load for {', '.join(missing)}; loads of the probe functions: {loads}")
    if "py::middle:<string>" in names:
        raise Fail(f"{how}: middle(), run without perf_jit, has a code load in the dump")
    if how == "switch" and " py::middle:<string>\n" not in map_text:
        raise Fail(f"{how}: middle(), run under perf, is not in {pmap}")
    return f"{how}: {count} records, {len(names)} code loads incl. first_period and third_period"


def main():
    notes, failures = [], []
    for how in ("switch", "deactivate"):
        try:
            notes.append(run(how))
        except Fail as exc:
            failures.append(str(exc))
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print("OK: " + "; ".join(notes))
    return 0


if __name__ == "__main__":
    sys.exit(main())

# requires: perf
# records: perf
# hits: patches/3.13/0015 /^no sample of the forked children named py::child_spin$/
# checks: behaviour
"""With persist-after-fork, perf names a forked child's own functions, not the parent's.

The child keeps its parent's trampolines and hands out the arena slots that
were free at fork(); the parent, running on, hands out the same slots for
its own new code.  If the child's map is copied from the parent's after the
parent wrote those entries, one address is named twice in the child's map
and perf charges the child's samples to a parent function.

Recorded with real perf (frame pointers, `perf record -g`): right after
fork() the parent makes and calls new functions (parent_after_fork_N) while
the child makes and spins in its own (child_spin).  Every sample of the
child that carries a py:: frame must name child_spin, and none may name a
function the parent made after fork().  Five forks per recording.
"""
import os
import re
import shutil
import sys
import tempfile

from childcheck import (finish, frame_pointer_recording_unavailable, perf_record_failure, perf_record_program,
                        perf_script_samples, perf_script_text, recorded_program_failure)

CANNOT_CHECK = 2

PROGRAM = r'''
import ctypes, os, sys, time
fn = getattr(ctypes.pythonapi, "PyUnstable_PerfTrampoline_SetPersistAfterFork", None)
if fn is None:
    print("no PyUnstable_PerfTrampoline_SetPersistAfterFork")
    sys.exit(3)
fn.argtypes = [ctypes.c_int]
fn(1)
sys.activate_stack_trampoline("perf")

def make(name, body):
    ns = {}
    exec(compile("def %s(seconds):\n%s" % (name, body), "<%s>" % name, "exec"), ns)
    return ns[name]

SPIN = "    end = time.perf_counter() + seconds\n    n = 0\n    while time.perf_counter() < end:\n        n += 1\n    return n\n"
children = []
for round_ in range(5):
    pid = os.fork()
    if pid == 0:
        spin = make("child_spin", SPIN.replace("time.", "__import__('time')."))
        spin(0.4)
        os._exit(0)
    for i in range(50):
        make("parent_after_fork_%d_%d" % (round_, i), "    return seconds\n")(i)
    children.append(pid)
    os.waitpid(pid, 0)
print("parent", os.getpid(), "children", " ".join(map(str, children)), flush=True)
'''


def main():
    why_not = frame_pointer_recording_unavailable()
    if why_not:
        print(f"cannot check: {why_not}")
        return CANNOT_CHECK
    workdir = tempfile.mkdtemp()
    try:
        rec, data = perf_record_program(workdir, "forking.py", PROGRAM)
        if rec.returncode == 3:
            print(f"cannot check: {rec.stdout.strip()}")
            return CANNOT_CHECK
        crashed = recorded_program_failure(rec, data)
        if crashed:
            return finish([crashed])
        failed = perf_record_failure(rec, data)
        if failed:
            print(f"cannot check: {failed}")
            return CANNOT_CHECK
        found = re.search(r"parent (\d+) children ((?:\d+ ?)+)", rec.stdout)
        if found is None:
            print(f"the program did not finish: {rec.stdout.strip()[-300:]} {rec.stderr.strip()[-600:]}")
            return 1
        parent, children = int(found.group(1)), [int(p) for p in found.group(2).split()]
        problems = []
        named_child, wrong = 0, []
        for header, stack in perf_script_samples(perf_script_text(data, "pid,ip,sym")):
            pid = int(header.split()[0])
            if pid not in children:
                continue
            py = [sym for _ip, sym in stack if sym.startswith("py::")]
            if not py:
                continue
            if any(s.startswith("py::parent_after_fork") for s in py):
                wrong.append(py[0])
            elif any(s.startswith("py::child_spin") for s in py):
                named_child += 1
        print(f"children's samples with py::child_spin: {named_child}; naming a parent function: {len(wrong)}")
        if wrong:
            problems.append(f"{len(wrong)} sample(s) of the forked children were charged to functions the parent "
                            f"made after fork(), e.g. {wrong[0]}")
        if named_child == 0:
            problems.append("no sample of the forked children named py::child_spin")
        for pid in children + [parent]:
            if os.path.exists(f"/tmp/perf-{pid}.map"):
                os.unlink(f"/tmp/perf-{pid}.map")
        return finish(problems)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

# requires: perf
# checks: behaviour
"""Deep recursion under -X perf ends in RecursionError or completes, never in a crash.

Under the perf trampoline every Python call is a C call: the eval loop enters
each frame through the trampoline's evaluator, in C frames of its own, where
the interpreter without it runs a Python-to-Python call inline, on no C stack
(3.11 and later).  With a high sys.setrecursionlimit() a recursion the
interpreter completes without -X perf could then run the C stack out and die
of SIGSEGV.  Must hold: at a depth the same interpreter completes without
-X perf, with -X perf the program completes or raises RecursionError, and the
interpreter goes on working after it (no signal, a normal exit).

Each case first finds a depth the interpreter completes without -X perf:
60,000, or, where that fails there (3.9, whose calls are all C calls; chains
of generators, whose resumptions are C calls in 3.11 as well; builds with
larger C frames), the deepest one that completes, found by bisection,
so that the run under -X perf goes as deep as the C stack allows the
interpreter without it.  Cases, in the main thread: a plain function; a
Python __getitem__ (a frame the eval loop pushes itself); a chain of
generators (frames entered by resuming them).  check_deep_recursion_threads.py
runs the same in threads with small stacks.  The check is about the crash, not
about a depth: the depth reached under -X perf depends on the build's C frame
sizes and is only printed.
"""
import json
import subprocess
import sys

from childcheck import describe_exit, remove_perf_files, stderr_gist

CANNOT_CHECK = 2
WANTED = 60000
SMALLEST = 100
TIMEOUT = 300

CHILD = r'''
import json, sys, threading
kind, stack, depth = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
sys.setrecursionlimit(3 * depth + 1000)
lowest = depth

def call(n):
    global lowest
    lowest = n
    if n == 0:
        return 0
    return call(n - 1) + 1

class Deep:
    def __getitem__(self, n):
        global lowest
        lowest = n
        if n == 0:
            return 0
        return self[n - 1] + 1

def gen(n):
    global lowest
    lowest = n
    if n == 0:
        return 0
    return (yield from gen(n - 1)) + 1

def descend(n):
    if kind == "call":
        return call(n)
    if kind == "getitem":
        return Deep()[n]
    g = gen(n)
    try:
        next(g)
    except StopIteration as stop:
        return stop.value

result = {}
def run():
    try:
        descend(depth)
        result["outcome"] = "completed"
    except RecursionError as exc:
        result["outcome"] = "RecursionError"
        result["message"] = str(exc)[:200]
    result["reached"] = depth - lowest

if stack:
    # in a thread with a stack of that size; under -X perf the thread's own
    # start (threading's Python frames) may already meet RecursionError
    def hook(args):
        result["outcome"] = args.exc_type.__name__ + " before the recursion"
        result["reached"] = 0
    threading.excepthook = hook
    threading.stack_size(stack)
    t = threading.Thread(target=run)
    t.start()
    t.join()
else:
    run()
# the interpreter goes on working: frames unwound, a new call runs
result["after"] = descend(50)
print(json.dumps(result))
'''

MAIN_THREAD_CASES = [("call", 0), ("getitem", 0), ("gen", 0)]


def run_child(kind, stack, depth, perf):
    args = [sys.executable] + (["-X", "perf"] if perf else []) + ["-c", CHILD, kind, str(stack), str(depth)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return None, None, f"still running after {TIMEOUT} s (killed): {err}"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        remove_perf_files(proc.pid)
    report = None
    for line in out.splitlines():
        try:
            report = json.loads(line)
        except ValueError:
            continue
    return proc.returncode, report, err


def completes(kind, stack, depth):
    code, report, _err = run_child(kind, stack, depth, perf=False)
    return code == 0 and report is not None and report.get("outcome") == "completed"


def plain_depth(kind, stack):
    """WANTED, or the deepest recursion that completes without -X perf (None if not even SMALLEST does)."""
    if completes(kind, stack, WANTED):
        return WANTED
    lo, hi = SMALLEST, WANTED
    if not completes(kind, stack, lo):
        return None
    while hi - lo > max(8, lo // 400):
        mid = (lo + hi) // 2
        if completes(kind, stack, mid):
            lo = mid
        else:
            hi = mid
    return lo


def main(cases=MAIN_THREAD_CASES):
    if not hasattr(sys, "activate_stack_trampoline"):
        print("cannot check: this interpreter has no perf trampoline")
        return CANNOT_CHECK
    problems = []
    checked = 0
    for kind, stack in cases:
        name = f"{kind}, " + (f"a thread with a {stack // 1024} KiB stack" if stack else "main thread")
        depth = plain_depth(kind, stack)
        if depth is None:
            print(f"{name}: not even {SMALLEST} levels complete without -X perf: not checked")
            continue
        code, report, err = run_child(kind, stack, depth, perf=True)
        checked += 1
        if code != 0 or report is None:
            ended = "did not end" if code is None else f"ended with {describe_exit(code)}"
            problems.append(f"{name}: {depth} levels complete without -X perf; with -X perf the process {ended}: "
                            f"{stderr_gist(err, 600)}")
            continue
        outcome = report.get("outcome")
        line = (f"{name}: {depth} levels complete without -X perf; with -X perf: {outcome} "
                f"after {report.get('reached')} levels")
        if report.get("message"):
            line += f" ({report['message']})"
        print(line)
        if outcome != "completed" and not str(outcome).startswith("RecursionError"):
            problems.append(f"{name}: with -X perf the recursion ended in {outcome}, "
                            "neither completed nor RecursionError")
        if report.get("after") != 50:
            problems.append(f"{name}: after the recursion a 50-level call gave {report.get('after')!r}")
    if not checked:
        print("cannot check: no case completes even shallowly without -X perf")
        return CANNOT_CHECK
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

# requires: perf
# hits: patches/3.13/0015 /^D \(persist, \w+\): child\(ren\) ended badly: .*Fatal Python error: Failed to copy perf map file/
# checks: behaviour
"""fork() with many trampolined code objects: the child lives, makes and frees code, and exits cleanly.

Upstream's test_trampoline_works_after_fork_with_many_code_objects (gh-144766)
runs under -X perf: 50 code objects executed before fork(); the child creates
50 new ones, collects garbage and leaves with os._exit(0); the parent fails
if the child was killed by a signal, and the run must print nothing on
stderr.  Upstream crashed there (a code watcher left registered in the child
double-counted trampolines), and gh-149156 crashed when the child unmapped
the arenas it was still running on.  3.13.5 has neither mechanism, but the
behaviour is what a user sees, so this check asks it of every cell, and more:

  A. upstream's program, under -X perf and (where offered) -X perf_jit;
  B. the fork happens 30 calls deep in Python functions (the child returns
     through 30 trampolines made before the fork), after 300 code objects
     were run; the child runs 300 new ones, drops them and their functions,
     gc.collect(), calls pre-fork functions again, and ends with sys.exit(0)
     (a full finalization); three forks in a row, and a second-generation
     fork from a child;
  C. B with the trampoline activated through sys.activate_stack_trampoline
     and deactivated in the child before it finishes;
  D. B with persist_after_fork turned on (PyUnstable_PerfTrampoline_
     SetPersistAfterFork through ctypes, where the C API exists).
Every process must exit 0, never by a signal, with empty stderr; each
child's own map (/tmp/perf-CHILDPID.map, perf mode) must hold the functions
the child made after the fork.
"""
import json
import os
import subprocess
import sys

from childcheck import offers_perf_jit

UPSTREAM_PROGRAM = r'''
import gc, os, sys
for i in range(50):
    exec(compile("def _dummy_%d(): pass" % i, "<before-fork-%d>" % i, "exec"))
pid = os.fork()
if pid == 0:
    print("child", os.getpid(), flush=True)
    for i in range(50):
        exec(compile("def _child_%d(): pass" % i, "<child-%d>" % i, "exec"))
    gc.collect()
    os._exit(0)
_, status = os.waitpid(pid, 0)
if os.WIFSIGNALED(status):
    print("child killed by signal %d" % os.WTERMSIG(status), file=sys.stderr)
    sys.exit(1)
print("parent", os.getpid(), flush=True)
sys.exit(os.WEXITSTATUS(status))
'''

DEEP_PROGRAM = r'''
import gc, json, os, sys
mode = sys.argv[1]
backend = sys.argv[2]
if mode == "sys_api":
    sys.activate_stack_trampoline(backend)
if mode == "persist":
    import ctypes
    fn = getattr(ctypes.pythonapi, "PyUnstable_PerfTrampoline_SetPersistAfterFork", None)
    if fn is None:
        print(json.dumps({"no_c_api": True}))
        sys.exit(0)
    fn.argtypes = [ctypes.c_int]
    fn(1)

made = []
for i in range(300):
    ns = {}
    exec(compile("def before_%d(n):\n    return n + %d\n" % (i, i), "<before-%d>" % i, "exec"), ns)
    made.append(ns["before_%d" % i])
total_before = sum(f(1) for f in made)

def child_work(generation):
    fns = []
    for i in range(300):
        ns = {}
        exec(compile("def forked_g%d_%d(n):\n    return n * 2 + %d\n" % (generation, i, i),
                     "<forked-%d-%d>" % (generation, i), "exec"), ns)
        fns.append(ns["forked_g%d_%d" % (generation, i)])
    value = sum(f(1) for f in fns)
    del fns, ns
    gc.collect()
    value += sum(f(1) for f in made)            # pre-fork trampolines again
    return value

def waited(pid):
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return "signal %d" % os.WTERMSIG(status)
    return "exit %d" % os.WEXITSTATUS(status)

def fork_deep(depth, generation):
    if depth:
        return fork_deep(depth - 1, generation)
    pid = os.fork()
    if pid == 0:
        value = child_work(generation)
        grandchild = None
        if generation == 0:
            gpid = os.fork()
            if gpid == 0:
                child_work(10)
                sys.exit(0)
            grandchild = waited(gpid)
        if mode == "sys_api":
            sys.deactivate_stack_trampoline()
        return ("child", value, grandchild)
    return ("parent", pid, None)

results = []
for generation in range(3):
    role, value, grandchild = fork_deep(30, generation)
    if role == "child":
        expected = sum(2 + i for i in range(300)) + total_before
        if value != expected or (grandchild not in (None, "exit 0")):
            print("child %d of generation %d: value %r (want %r), grandchild %r"
                  % (os.getpid(), generation, value, expected, grandchild), file=sys.stderr)
            os._exit(3)
        sys.exit(0)                              # returned through 30 inherited trampolines
    results.append({"pid": value, "status": waited(value), "generation": generation})
print(json.dumps({"parent": os.getpid(), "children": results}))
'''


def cleanup(pids):
    for pid in pids:
        for path in (f"/tmp/perf-{pid}.map", f"/tmp/jit-{pid}.dump"):
            if os.path.exists(path):
                os.unlink(path)


def clean_env():
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPERFSUPPORT", "PYTHON_PERF_JIT_SUPPORT")}


def case_upstream(backend):
    where = f"A (upstream's program) -X {backend}"
    proc = subprocess.run([sys.executable, "-X", backend, "-c", UPSTREAM_PROGRAM], capture_output=True,
                          text=True, timeout=300, env=clean_env())
    problems = []
    if proc.returncode != 0:
        problems.append(f"{where}: exit {proc.returncode}, stderr {proc.stderr.strip()[-800:]!r}")
    elif proc.stderr.strip():
        problems.append(f"{where}: stderr not empty: {proc.stderr.strip()[-800:]!r}")
    cleanup(line.split()[1] for line in proc.stdout.splitlines() if len(line.split()) == 2)
    print(f"{where}: exit {proc.returncode}")
    return problems


def case_deep(label, mode, backend):
    argv = [sys.executable]
    if mode != "sys_api":
        argv += ["-X", backend]
    argv += ["-c", DEEP_PROGRAM, mode, backend]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=clean_env())
    where = f"{label} ({mode}, {backend})"
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    res = json.loads(lines[-1]) if lines else {}
    pids = [res.get("parent")] + [c["pid"] for c in res.get("children", [])]
    problems = []
    if res.get("no_c_api"):
        print(f"{where}: PyUnstable_PerfTrampoline_SetPersistAfterFork is not exported here; case not run")
        return []
    if proc.returncode != 0 or not res:
        problems.append(f"{where}: parent exit {proc.returncode}, stderr {proc.stderr.strip()[-1000:]!r}")
    else:
        bad = [c for c in res["children"] if c["status"] != "exit 0"]
        if bad:
            fatal = [l for l in proc.stderr.splitlines() if l.startswith("Fatal Python error")][:1]
            problems.append(f"{where}: child(ren) ended badly: {bad}; {'; '.join(fatal) or 'no fatal error'}; "
                            f"stderr {proc.stderr.strip()[-800:]!r}")
        elif proc.stderr.strip():
            problems.append(f"{where}: stderr not empty: {proc.stderr.strip()[-800:]!r}")
        if backend == "perf" and not bad:
            for c in res["children"]:
                path = f"/tmp/perf-{c['pid']}.map"
                text = open(path, errors="replace").read() if os.path.exists(path) else ""
                if f"py::forked_g{c['generation']}_0:" not in text:
                    problems.append(f"{where}: child {c['pid']}'s map {path} has no entry for "
                                    f"forked_g{c['generation']}_0 ({len(text.splitlines())} lines)")
    cleanup(p for p in pids if p)
    print(f"{where}: {res.get('children')}")
    return problems


def main():
    backends = ["perf"] + (["perf_jit"] if offers_perf_jit() else [])
    problems = []
    for backend in backends:
        problems += case_upstream(backend)
        problems += case_deep("B", "xoption", backend)
        problems += case_deep("C", "sys_api", backend)
    problems += case_deep("D", "persist", "perf")
    if problems:
        print("FAIL:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    print(f"OK: forks with many code objects ({', '.join(backends)}): every process exited 0, stderr empty")
    return 0


if __name__ == "__main__":
    sys.exit(main())

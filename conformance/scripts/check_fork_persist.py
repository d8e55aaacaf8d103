# requires: perf
# fixes: patches/3.13/0015
"""fork() with persist-after-fork: the child lives, and its map names each address once.

PyUnstable_PerfTrampoline_SetPersistAfterFork(1) asks a forked child to keep
the trampolines it inherited: its /tmp/perf-CHILDPID.map starts as a copy of
the parent's map as it was at fork(), and grows with the child's own code.

  empty     the trampoline is active but nothing was published before fork()
            (an empty parent map);
  8192      the parent's map is exactly 8192 bytes long at fork();
  never     persist-after-fork is on but the trampoline was never started;
  perf_jit  persist-after-fork is on and the perf_jit backend is in use
            (where the interpreter offers it): the child starts a jitdump of
            its own;
  race      20 times: the parent publishes 100 new functions right after
            fork() while the child publishes 100 of its own; no address of the
            child's map may name two functions, and the child's map must hold
            every function the parent had published before fork().
Every process must exit 0, never by a signal or a fatal error.
"""
import os
import subprocess
import sys

from childcheck import child_reports, describe_exit, finish, offers_perf_jit, remove_perf_files

PRELUDE = r'''
import ctypes, gc, json, os, sys
api = ctypes.pythonapi
persist = getattr(api, "PyUnstable_PerfTrampoline_SetPersistAfterFork", None)
if persist is None:
    print(json.dumps({"phase": "cannot", "why": "no PyUnstable_PerfTrampoline_SetPersistAfterFork"}))
    sys.exit(0)
persist.argtypes = [ctypes.c_int]
write_entry = api.PyUnstable_WritePerfMapEntry
write_entry.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_char_p]

def report(phase, **facts):
    print(json.dumps(dict(phase=phase, **facts)), flush=True)

def make(prefix, i):
    ns = {}
    exec(compile("def %s_%d(n):\n    return n + %d\n" % (prefix, i, i), "<%s>" % prefix, "exec"), ns)
    return ns["%s_%d" % (prefix, i)]

def fork_one(child_ok=lambda: True, **facts):
    """fork(); the child makes and calls a function of its own and exits 0 (4 if not child_ok())."""
    pid = os.fork()
    if pid == 0:
        make("child", 0)(1)
        os._exit(0 if child_ok() else 4)
    _, status = os.waitpid(pid, 0)
    report("done", status=status, pid=os.getpid(), child=pid, **facts)

def fork_and_wait(child_body, parent_body=None):
    pid = os.fork()
    if pid == 0:
        try:
            child_body()
        except BaseException as exc:
            print("child failed: %r" % (exc,), file=sys.stderr, flush=True)
            os._exit(3)
        os._exit(0)
    if parent_body is not None:
        parent_body()
    _, status = os.waitpid(pid, 0)
    return pid, status
'''

CASE_EMPTY = PRELUDE + r'''
persist(1)
sys.activate_stack_trampoline("perf")
# no Python function is called between the activation and fork() (fork_one() would be published): the
# map is empty
pid = os.fork()
if pid == 0:
    make("child", 0)(1)
    os._exit(0)
report("done", status=os.waitpid(pid, 0)[1], pid=os.getpid(), child=pid)
'''

CASE_8192 = PRELUDE + r'''
persist(1)
sys.activate_stack_trampoline("perf")
for i in range(20):
    make("warm", i)(1)
path = "/tmp/perf-%d.map" % os.getpid()
size = os.path.getsize(path)
target = 8192 if size < 8192 - 64 else (size // 4096 + 2) * 4096
# one more line of the right length: "1000 10 <name>\n"
name_length = target - size - len("1000 10 \n")
write_entry(0x1000, 0x10, b"p" * name_length)
at_fork = os.path.getsize(path)
pid = os.fork()       # inline: calling fork_one() would publish it and change the map's size
if pid == 0:
    make("child", 0)(1)
    os._exit(0)
report("done", status=os.waitpid(pid, 0)[1], map_size_at_fork=at_fork, pid=os.getpid(), child=pid)
'''

CASE_NEVER = PRELUDE + r'''
persist(1)
fork_one()
'''

CASE_PERF_JIT = PRELUDE + r'''
persist(1)
sys.activate_stack_trampoline("perf_jit")
make("warm", 0)(1)
fork_one(child_ok=sys.is_stack_trampoline_active)
'''

CASE_RACE = PRELUDE + r'''
persist(1)
sys.activate_stack_trampoline("perf")
before = [make("before", i) for i in range(30)]
for f in before:
    f(1)
children = []
for round_ in range(20):
    def child_body():
        for i in range(100):
            make("child%d" % round_, i)(1)
    def parent_body():
        for i in range(100):
            make("parent%d" % round_, i)(1)
    pid, status = fork_and_wait(child_body, parent_body)
    children.append((pid, status))
report("done", status=max(s for _, s in children), pid=os.getpid(), children=children)
'''


def read_map(pid):
    path = f"/tmp/perf-{pid}.map"
    if not os.path.exists(path):
        return None
    entries = []
    with open(path, errors="replace") as fh:
        for line in fh:
            parts = line.rstrip("\n").split(" ", 2)
            if len(parts) == 3:
                entries.append((int(parts[0], 16), parts[2]))
    return entries


def run_case(name, program):
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=600)
    reports = child_reports(proc.stdout)
    if "cannot" in reports:
        return None, reports["cannot"]["why"]
    done = reports.get("done", {})
    pids = [done.get("pid"), done.get("child")] + [c[0] for c in done.get("children", [])]
    problems = []
    try:
        if proc.returncode != 0 or not done:
            problems.append(f"{name}: the parent ended with {describe_exit(proc.returncode)}: "
                            f"{proc.stderr.strip()[-600:]}")
            return problems, None
        statuses = [done["status"]] + [s for _, s in done.get("children", [])]
        bad = [s for s in statuses if s != 0]
        if bad:
            status = bad[0]
            how = (f"killed by signal {status & 0x7f}" if status & 0x7f else f"exit status {status >> 8}")
            problems.append(f"{name}: a forked child ended with {how}: {proc.stderr.strip()[-600:]}")
        if done.get("map_size_at_fork", 0) % 4096:
            problems.append(f"{name}: the check did not make a map of a multiple of 4096 bytes "
                            f"({done['map_size_at_fork']} bytes at fork())")
        if name == "race":
            parent_map = read_map(done["pid"]) or []
            before = {n for _, n in parent_map if n.startswith("py::before_")}
            for round_, (pid, _) in enumerate(done["children"]):
                entries = read_map(pid)
                if entries is None:
                    problems.append(f"race: child {pid} wrote no map")
                    continue
                named = {}
                for addr, sym in entries:
                    named.setdefault(addr, set()).add(sym)
                twice = {hex(a): sorted(s) for a, s in named.items() if len(s) > 1}
                if twice:
                    example = next(iter(twice.items()))
                    problems.append(f"race: child {pid}'s map names {len(twice)} address(es) twice, e.g. "
                                    f"{example[0]}: {example[1]}")
                held = {n for _, n in entries}
                if not before <= held:
                    problems.append(f"race: child {pid}'s map lacks {len(before - held)} function(s) the parent "
                                    f"published before fork()")
                if any(n.endswith(f":<parent{round_}>") for n in held):
                    problems.append(f"race: child {pid}'s map holds functions the parent made after its fork()")
                if not any(n.startswith("py::child") for n in held):
                    problems.append(f"race: child {pid}'s map lacks the child's own functions")
    finally:
        for pid in pids:
            remove_perf_files(pid)
    return problems, None


def main():
    cases = {"empty": CASE_EMPTY, "8192": CASE_8192, "never": CASE_NEVER, "race": CASE_RACE}
    if offers_perf_jit():
        cases["perf_jit"] = CASE_PERF_JIT
    else:
        print("perf_jit: not offered by this interpreter, case left out")
    problems = []
    for name, program in cases.items():
        found, cannot = run_case(name, program)
        if cannot:
            print(f"cannot check: {cannot}")
            return 2
        print(f"{name}: {'ok' if not found else 'FAILED'}")
        problems += found
    return finish(problems)


if __name__ == "__main__":
    sys.exit(main())

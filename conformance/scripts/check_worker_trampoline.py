# requires: perf perf_jit
# fixes: patches/3.13/0026
"""Worker processes run the parent's perf trampoline, whatever the start method.

multiprocessing's fork children inherit the trampoline; spawn and forkserver start new interpreters
with subprocess._args_from_interpreter_flags(), which did not pass -X perf / -X perf_jit on, so their
workers (ProcessPoolExecutor's and Pool's among them) ran without it: no py:: frame in any sample of
theirs.  Checked for both backends, with the trampoline turned on by -X and by
sys.activate_stack_trampoline() at run time: for each start method a multiprocessing.Pool worker and a
ProcessPoolExecutor worker report sys.is_stack_trampoline_active() and whether their own file (map or
jitdump) is in /tmp.  A parent that deactivated the trampoline starts spawn workers without it, and the
environment (PYTHONPERFSUPPORT=1) still turns it on as before.
"""
import glob
import os
import subprocess
import sys
import tempfile

from childcheck import describe_exit, remove_perf_files, stderr_gist

CANNOT_CHECK = 2
METHODS = ("fork", "spawn", "forkserver")

PROGRAM = r'''
import concurrent.futures, multiprocessing, os, sys

def state():
    return "%d %s" % (os.getpid(), sys.is_stack_trampoline_active())

def report(label, method):
    context = multiprocessing.get_context(method)
    with context.Pool(1) as pool:
        print(label, method, "Pool", pool.apply(state), flush=True)
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=context) as pool:
        print(label, method, "ProcessPoolExecutor", pool.submit(state).result(), flush=True)

if __name__ == "__main__":
    how, methods = sys.argv[1], sys.argv[2].split(",")
    if how.startswith("sys_api:"):
        sys.activate_stack_trampoline(how.partition(":")[2])
    print("parent", os.getpid(), sys.is_stack_trampoline_active(), flush=True)
    for method in methods:
        report("on", method)
    if len(sys.argv) > 3:
        sys.deactivate_stack_trampoline()
        for method in sys.argv[3].split(","):
            report("off", method)
'''


def run(script, how, python_args=(), env=None, off_methods=()):
    args = [sys.executable, *python_args, script, how, ",".join(METHODS)]
    if off_methods:
        args.append(",".join(off_methods))
    before = set(glob.glob("/tmp/perf-*.map")) | set(glob.glob("/tmp/jit-*.dump"))
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300, env=env)
    after = set(glob.glob("/tmp/perf-*.map")) | set(glob.glob("/tmp/jit-*.dump"))
    return proc, after - before


def main():
    workdir = tempfile.mkdtemp()
    script = os.path.join(workdir, "workers.py")
    with open(script, "w") as fh:
        fh.write(PROGRAM)
    problems, rows = [], 0
    cases = [(mode, "xoption", ["-X", mode], None) for mode in ("perf", "perf_jit")]
    cases += [(mode, "sys_api", [], None) for mode in ("perf", "perf_jit")]
    cases.append(("perf", "env", [], dict(os.environ, PYTHONPERFSUPPORT="1")))
    for mode, activation, python_args, env in cases:
        how = f"sys_api:{mode}" if activation == "sys_api" else activation
        off = ("spawn",) if activation != "env" else ()
        proc, new_files = run(script, how, python_args, env, off)
        try:
            if proc.returncode != 0:
                problems.append(f"{mode} ({activation}): the program failed ({describe_exit(proc.returncode)}): "
                                f"{stderr_gist(proc.stderr)}")
                continue
            lines = [line.split() for line in proc.stdout.splitlines()]
            parent = next((l for l in lines if l[0] == "parent"), None)
            if parent is None or parent[2] != "True":
                print(f"cannot check: the parent's trampoline did not start ({mode}, {activation}): "
                      f"{proc.stdout.strip()[-300:]} {stderr_gist(proc.stderr, 300)}")
                return CANNOT_CHECK
            suffix = ".map" if mode == "perf" else ".dump"
            for label, method, pool, pid, active in (l for l in lines if l[0] in ("on", "off")):
                rows += 1
                want = label == "on"
                written = any(f.endswith(f"-{pid}{suffix}") for f in new_files)
                what = f"{mode} ({activation}), {pool} worker of {method}" + (
                    " after the parent deactivated the trampoline" if label == "off" else "")
                if (active == "True") != want:
                    problems.append(f"{what}: sys.is_stack_trampoline_active() is {active} (the parent's is "
                                    f"{want})")
                elif written != want:
                    problems.append(f"{what}: its {'perf map' if mode == 'perf' else 'jitdump'} is "
                                    f"{'missing' if want else 'there'}")
            expected = len(METHODS) * 2 + len(off) * 2
            if sum(1 for l in lines if l[0] in ("on", "off")) != expected:
                problems.append(f"{mode} ({activation}): {expected} workers expected, the program said: "
                                f"{proc.stdout.strip()[-400:]}")
        finally:
            for path in new_files:
                remove_perf_files(int(path.rsplit("-", 1)[1].split(".")[0]))
    print(f"{rows} workers checked")
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

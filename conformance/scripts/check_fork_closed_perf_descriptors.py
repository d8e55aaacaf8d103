# requires: perf
# fixes: patches/3.13/0025
"""A forked child that closes its file descriptors keeps its perf map or jitdump, and writes nowhere else.

Between fork() and exec(), subprocess's close_fds, gevent's pure-Python
Popen, python-daemon and daemonizing servers close every descriptor above 2
(os.closerange(3, ...)), the perf map's or the jitdump's among them, and may
then be given that descriptor's number for a file of their own.  Run with
-X perf and -X perf_jit (where offered), a parent calls a function, forks,
and the child:

  closed   closes its descriptors, then calls a function not called before
           and ends with os._exit() (as a child that goes on to exec())
  reused   closes its descriptors, opens a file of its own at the number its
           map or dump had, calls new code, and ends through the
           interpreter's finalization
  forked   the same file at that number, and forks a grandchild before any
           new code: the grandchild must still have the file at that number
           (its start drops the map or dump it inherited), then calls new
           code
  unforked the same as reused in the process that opened the map or dump,
           without fork() (a daemon that closes its descriptors itself)

Each time: nothing on stderr (before, the jitdump said "writing
/tmp/jit-N.dump failed (Bad file descriptor)" there, in front of the output a
program expects); the child's own file is well formed and names the code it
ran after closing its descriptors (it opens it again by name); the other
file is untouched, byte for byte; the parent's file does not name the
child's code.
"""
import json
import os
import subprocess
import sys
import tempfile

from childcheck import (child_reports, describe_exit, finish, jitdump_code_loads, offers_perf_jit,
                        remove_perf_files, stderr_gist)

VICTIM_TEXT = b"a file of the program's own\n" * 4

PROGRAM = r'''
import json, os, sys
backend, case, victim = sys.argv[1], sys.argv[2], sys.argv[3]
pattern = "/tmp/perf-%d.map" if backend == "perf" else "/tmp/jit-%d.dump"

def own_descriptor():
    mine = pattern % os.getpid()
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == mine:
                return int(name)
        except OSError:
            pass
    return None

def new_code(name):
    ns = {}
    exec(compile(f"def {name}(n):\n    return n * 2\n", f"<{name}>", "exec"), ns)
    ns[name](1)

def say(**fields):
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()

def close_descriptors():
    """Close every descriptor above 2; unless the case is "closed", give the
    other file the number the map or dump had.  Returns that number."""
    number = own_descriptor()
    os.closerange(3, 65536)
    if case != "closed" and number is not None:
        fd = os.open(victim, os.O_RDWR)
        if fd != number:
            os.dup2(fd, number)
            os.close(fd)
    return number

def called_in_parent(n):
    return n + 1
called_in_parent(1)
if case == "unforked":
    number = close_descriptors()
    new_code("after_closing")
    say(phase="child", pid=os.getpid(), number=number)
    say(phase="done", pid=os.getpid(), child=os.getpid(), status=0)
    sys.exit(0)
pid = os.fork()
if pid == 0:
    number = close_descriptors()
    if case == "forked":
        grandchild = os.fork()
        if grandchild == 0:
            try:
                still = os.path.samestat(os.fstat(number), os.stat(victim))
            except OSError:
                still = False
            new_code("in_grandchild")
            say(phase="grandchild", pid=os.getpid(), kept=still)
            os._exit(0)
        _, status = os.waitpid(grandchild, 0)
        say(phase="grandchild-status", status=status)
    new_code("after_closing")
    say(phase="child", pid=os.getpid(), number=number)
    if case == "reused":
        sys.exit(0)
    os._exit(0)
_, status = os.waitpid(pid, 0)
say(phase="done", pid=os.getpid(), child=pid, status=status)
'''


def file_names(backend, path):
    """(names the map or dump holds, problem or None)."""
    if not os.path.exists(path):
        return [], f"{path} does not exist"
    if backend == "perf_jit":
        names, _, problem = jitdump_code_loads(path)
        return names, problem and f"{path} is malformed: {problem}"
    with open(path, "rb") as fh:
        text = fh.read().decode("utf-8", "replace")
    lines = text.split("\n")
    if lines[-1] != "":
        return [], f"{path} does not end with a whole line"
    names, bad = [], []
    for line in lines[:-1]:
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[2].startswith("py::"):
            names.append(parts[2])
        else:
            bad.append(line)
    return names, bad and f"{path} holds {len(bad)} line(s) that are not entries, e.g. {bad[0]!r}"


def run(backend, case, workdir):
    victim = os.path.join(workdir, f"victim-{backend}-{case}")
    with open(victim, "wb") as fh:
        fh.write(VICTIM_TEXT)
    flag = "perf" if backend == "perf" else "perf_jit"
    proc = subprocess.run([sys.executable, "-X", flag, "-c", PROGRAM, backend, case, victim],
                          capture_output=True, text=True, timeout=300)
    reports = child_reports(proc.stdout)
    done, child = reports.get("done"), reports.get("child")
    label = f"{backend} {case}"
    pids = [r["pid"] for r in reports.values() if "pid" in r]
    try:
        if proc.returncode != 0 or done is None:
            return [f"{label}: the parent ended with {describe_exit(proc.returncode)}: {stderr_gist(proc.stderr, 600)}"]
        problems = []
        if done["status"] != 0 or child is None:
            problems.append(f"{label}: the child ended with wait status {done['status']}: "
                            f"{stderr_gist(proc.stderr, 600)}")
            return problems
        if proc.stderr.strip():
            problems.append(f"{label}: the interpreter wrote on stderr: {proc.stderr.strip()[:400]!r}")
        with open(victim, "rb") as fh:
            now = fh.read()
        if now != VICTIM_TEXT:
            problems.append(f"{label}: the file the program opened at its {backend} file's old descriptor number "
                            f"({child['number']}) was written to: {len(VICTIM_TEXT)} bytes became {len(now)}, "
                            f"starting {now[:80]!r}")
        pattern = "/tmp/perf-{}.map" if backend == "perf" else "/tmp/jit-{}.dump"
        names, problem = file_names(backend, pattern.format(child["pid"]))
        if problem:
            problems.append(f"{label}: the file of the process that closed its descriptors: {problem}")
        elif not any(n.startswith("py::after_closing:") for n in names):
            problems.append(f"{label}: the file of the process that closed its descriptors does not name "
                            "py::after_closing, run after that: it stopped writing its map or dump instead of "
                            "opening it again")
        parent_names, problem = file_names(backend, pattern.format(done["pid"]))
        if case == "unforked":
            pass   # the parent is the process that closed its descriptors
        elif problem:
            problems.append(f"{label}: the parent's file: {problem}")
        elif any(n.startswith("py::after_closing:") for n in parent_names):
            problems.append(f"{label}: the parent's file names the child's py::after_closing")
        if case == "forked":
            grand = reports.get("grandchild")
            status = reports.get("grandchild-status", {}).get("status")
            if grand is None or status != 0:
                problems.append(f"{label}: the grandchild ended with wait status {status}: "
                                f"{stderr_gist(proc.stderr, 600)}")
            else:
                if not grand["kept"]:
                    problems.append(f"{label}: the grandchild lost the file the child had opened at descriptor "
                                    f"{child['number']}: its start closed it as the {backend} file it inherited")
                names, problem = file_names(backend, pattern.format(grand["pid"]))
                if problem:
                    problems.append(f"{label}: the grandchild's file: {problem}")
                elif not any(n.startswith("py::in_grandchild:") for n in names):
                    problems.append(f"{label}: the grandchild's file does not name py::in_grandchild")
        return problems
    finally:
        for pid in pids:
            remove_perf_files(pid)


def main():
    backends = ["perf"] + (["perf_jit"] if offers_perf_jit() else [])
    problems = []
    with tempfile.TemporaryDirectory() as workdir:
        for backend in backends:
            for case in ("closed", "reused", "forked", "unforked"):
                found = run(backend, case, workdir)
                print(f"{backend:8} {case:7} {'ok' if not found else 'FAILED'}")
                problems += found
    return finish(problems)


if __name__ == "__main__":
    sys.exit(main())

# requires: perf
# fixes: patches/3.13/0016
"""A write to the perf map or the jitdump that fails part-way: nothing half-written stays, a map entry is retried.

A full disk or a file size limit (RLIMIT_FSIZE, used here: the write that
crosses it fails with EFBIG once SIGXFSZ is ignored) can cut an entry short.

  map   the limit leaves room for part of the next line; a new function is
        called (its entry cannot be written), the limit is lifted, the
        function is called again and another new one is called.  The map
        must hold only whole lines ("ADDR SIZE py::NAME:FILE"), and the first
        function must be named: an entry that could not be written is kept
        and written once the map takes lines again.
  jit   (where perf_jit is offered) the same with the jitdump: the record cut
        short is cut off, the dump stays well formed (perf inject stops at
        the first bad record, so a record after a partial one is lost),
        nothing more is written to it, and the process says so once on
        stderr and runs on.
"""
import re
import subprocess
import sys

from childcheck import child_reports, describe_exit, finish, jitdump_code_loads, offers_perf_jit, remove_perf_files

PROGRAM = r'''
import json, os, resource, signal, sys
backend = sys.argv[1]
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
sys.activate_stack_trampoline(backend)
def warm_up(n):
    return n + 1
warm_up(1)
path = ("/tmp/perf-%d.map" if backend == "perf" else "/tmp/jit-%d.dump") % os.getpid()
size_before = os.path.getsize(path)
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (size_before + 20, hard))
ns = {}
exec(compile("def cut_short(n):\n    return n * 2\n", "<cut>", "exec"), ns)
cut_short = ns["cut_short"]
cut_short(1)                 # its entry does not fit
size_at_limit = os.path.getsize(path)
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
cut_short(2)                 # room again
def after_lift(n):
    return n - 1
after_lift(1)
print(json.dumps({"phase": "done", "pid": os.getpid(), "size_before": size_before,
                  "size_at_limit": size_at_limit}), flush=True)
'''

MAP_LINE = re.compile(r"[0-9a-f]+ [0-9a-f]+ \S.*")


def run(backend):
    proc = subprocess.run([sys.executable, "-c", PROGRAM, backend], capture_output=True, text=True, timeout=300)
    done = child_reports(proc.stdout).get("done")
    if proc.returncode != 0 or done is None:
        return [f"{backend}: the interpreter ended with {describe_exit(proc.returncode)}: {proc.stderr[-800:]}"]
    problems = []
    pid = done["pid"]
    try:
        if done["size_at_limit"] > done["size_before"] + 20:
            problems.append(f"{backend}: the file grew past the size limit ({done}): the check did not take effect")
        if backend == "perf":
            with open(f"/tmp/perf-{pid}.map", "rb") as fh:
                data = fh.read()
            lines = data.decode("utf-8", "replace").split("\n")
            if lines and lines[-1] == "":
                lines.pop()
            else:
                problems.append("perf: the map does not end with a whole line")
            bad = [line for line in lines if not MAP_LINE.fullmatch(line)]
            if bad:
                problems.append(f"perf: the map holds {len(bad)} line(s) that are not whole entries, e.g. {bad[0]!r}")
            names = [line.split(" ", 2)[2] for line in lines if MAP_LINE.fullmatch(line)]
            if "py::cut_short:<cut>" not in names:
                problems.append("perf: py::cut_short, whose entry could not be written, was never written "
                                "once the file had room again")
            if not any(n.startswith("py::after_lift") for n in names):
                problems.append("perf: py::after_lift (called after the limit was lifted) is not in the map")
            if proc.stderr.strip():
                problems.append(f"perf: the interpreter printed on stderr: {proc.stderr.strip()[:300]}")
        else:
            names, count, problem = jitdump_code_loads(f"/tmp/jit-{pid}.dump")
            if problem:
                problems.append(f"perf_jit: the dump is malformed after a failed write: {problem}")
            if not any(n.startswith("py::warm_up") for n in names):
                problems.append("perf_jit: the records written before the failure are gone")
            warnings = [line for line in proc.stderr.splitlines() if "jit-" in line and "dump" in line]
            if len(warnings) != 1:
                problems.append(f"perf_jit: expected one warning about the dump on stderr, got {len(warnings)}: "
                                f"{proc.stderr.strip()[:400]!r}")
    finally:
        remove_perf_files(pid)
    return problems


def main():
    backends = ["perf"] + (["perf_jit"] if offers_perf_jit() else [])
    problems = []
    for backend in backends:
        found = run(backend)
        print(f"{backend}: {'ok' if not found else 'FAILED'}")
        problems += found
    return finish(problems)


if __name__ == "__main__":
    sys.exit(main())

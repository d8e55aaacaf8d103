# requires: perf
# checks: behaviour
"""After a write to the perf map or the jitdump fails, new code is not written again on every call.

When the map or the dump cannot grow (a full /tmp, a quota, a file size
limit, a failing disk), a function first called after that must not retry
its write on each call, nor stay on the trampoline's slow path: its calls
must cost what the calls of code published before cost.

For each backend, and each of three errors:
  EFBIG   real: RLIMIT_FSIZE set to the file's size, SIGXFSZ ignored
  ENOSPC  injected: a small tracer (ptrace, built here with cc) makes the
  EIO     write(2) calls on the map or the dump fail with that errno without
          making them, as a full or failing disk would answer them, and
          counts them
a child interpreter calls a function first called after the failure 5,000
times, then a second one 5,000 times.  The write(2) calls made (syscw of
/proc/self/io) plus those the tracer failed must stay within a handful for
each (they were one or two per call).  Under EFBIG, which lasts without the
tracer's help, the tracer then single-steps 40 calls of the function first
called after the failure and 40 of one published before (each through a
call site of its own, the minimum of five runs): the first may take at most
a few instructions per call more than the second (a jitdump that takes no
more kept every new code object on the slow path).

Where this runs with CAP_SYS_ADMIN (docker run --cap-add SYS_ADMIN) the
child also fills a 256 KiB tmpfs mounted on its own /tmp, for a real ENOSPC.
"""
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

from childcheck import child_reports, describe_exit, finish, offers_perf_jit, remove_perf_files, stderr_gist

CANNOT_CHECK = 2
CALLS = 5000
MAX_WRITES = 16           # write(2) calls allowed for CALLS calls of one new function
MAX_EXTRA_STEPS = 30      # instructions per call allowed over a published function's

TRACER = r'''
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

/* tracer REPORT ERRNO -- COMMAND...: runs COMMAND (one thread), which steers
   it with signals it sends itself (the tracer takes them; none is delivered):
     SIGUSR1        from now on write(2) calls on a descriptor of
                    /tmp/perf-*.map or /tmp/jit-*.dump are not made, and
                    fail with ERRNO
     SIGUSR2        no more; "failed N" (the calls failed) is appended to REPORT
     SIGRTMIN + 1   count the instructions run from now on (single steps)
     SIGRTMIN + 2   no more; "steps N" is appended to REPORT */

#ifndef __x86_64__
#  error "this tracer reads x86-64 registers"
#endif

static const char *report_path;

static void report(const char *what, long n)
{
    FILE *f = fopen(report_path, "a");
    if (f != NULL) {
        fprintf(f, "%s %ld\n", what, n);
        fclose(f);
    }
}

static int is_write(long nr)
{
    return nr == SYS_write || nr == SYS_pwrite64 || nr == SYS_writev
           || nr == SYS_pwritev || nr == SYS_pwritev2;
}

static int ends_with(const char *s, const char *end)
{
    size_t n = strlen(s), m = strlen(end);
    return n >= m && strcmp(s + n - m, end) == 0;
}

static int is_perf_file(pid_t pid, long fd)
{
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/%d/fd/%ld", (int)pid, fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) {
        return 0;
    }
    target[n] = 0;
    return (strncmp(target, "/tmp/perf-", 10) == 0 && ends_with(target, ".map"))
           || (strncmp(target, "/tmp/jit-", 9) == 0 && ends_with(target, ".dump"));
}

int main(int argc, char **argv)
{
    if (argc < 5 || strcmp(argv[3], "--") != 0) {
        fprintf(stderr, "usage: %s REPORT ERRNO -- COMMAND...\n", argv[0]);
        return 2;
    }
    report_path = argv[1];
    long err = atol(argv[2]);
    pid_t child = fork();
    if (child == 0) {
        if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0) {
            perror("tracer: ptrace(PTRACE_TRACEME)");
            _exit(125);
        }
        raise(SIGSTOP);
        execvp(argv[4], argv + 4);
        perror("tracer: execvp");
        _exit(127);
    }
    int status;
    if (waitpid(child, &status, 0) != child || !WIFSTOPPED(status)) {
        return 125;
    }
    ptrace(PTRACE_SETOPTIONS, child, 0,
           (void *)(long)(PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL | PTRACE_O_TRACEEXEC));
    enum { RUN, FAIL_WRITES, STEP } mode = RUN;
    int at_entry = 1, skipped = 0, deliver = 0;
    long failed = 0, steps = 0;
    for (;;) {
        int request = mode == FAIL_WRITES ? PTRACE_SYSCALL
                      : mode == STEP ? PTRACE_SINGLESTEP : PTRACE_CONT;
        if (ptrace(request, child, 0, (void *)(long)deliver) != 0) {
            perror("tracer: ptrace");
            return 125;
        }
        deliver = 0;
        if (waitpid(child, &status, 0) != child) {
            return 125;
        }
        if (WIFEXITED(status)) {
            return WEXITSTATUS(status);
        }
        if (WIFSIGNALED(status)) {
            return 128 + WTERMSIG(status);
        }
        int sig = WSTOPSIG(status);
        if (status >> 16 != 0) {
            continue;                         /* the exec */
        }
        if (sig == (SIGTRAP | 0x80)) {
            struct user_regs_struct regs;
            ptrace(PTRACE_GETREGS, child, 0, &regs);
            if (at_entry) {
                if (is_write((long)regs.orig_rax) && is_perf_file(child, (long)regs.rdi)) {
                    regs.orig_rax = -1;       /* not made at all */
                    ptrace(PTRACE_SETREGS, child, 0, &regs);
                    skipped = 1;
                    failed++;
                }
            }
            else if (skipped) {
                regs.rax = (unsigned long long)-err;
                ptrace(PTRACE_SETREGS, child, 0, &regs);
                skipped = 0;
            }
            at_entry = !at_entry;
        }
        else if (sig == SIGTRAP && mode == STEP) {
            steps++;
        }
        else if (sig == SIGUSR1) {
            mode = FAIL_WRITES;
            at_entry = 1;
            failed = 0;
        }
        else if (sig == SIGUSR2) {
            mode = RUN;
            report("failed", failed);
        }
        else if (sig == SIGRTMIN + 1) {
            mode = STEP;
            steps = 0;
        }
        else if (sig == SIGRTMIN + 2) {
            mode = RUN;
            report("steps", steps);
        }
        else {
            deliver = sig;
        }
    }
}
'''

# argv: backend, how ("efbig", "inject", "tmpfs"), report file (or "-")
PROGRAM = r'''
import ctypes, json, os, resource, signal, sys
backend, how, report = sys.argv[1], sys.argv[2], sys.argv[3]
CALLS, STEP_CALLS, STEP_RUNS = %(calls)d, 40, 5
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
if how == "tmpfs":
    # A /tmp of its own, 256 KiB small, before the trampoline opens its files there.
    libc = ctypes.CDLL(None, use_errno=True)
    CLONE_NEWNS, MS_REC, MS_PRIVATE = 0x00020000, 16384, 1 << 18
    if (libc.unshare(CLONE_NEWNS) != 0 or libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0
            or libc.mount(b"tmpfs", b"/tmp", b"tmpfs", 0, b"size=256k,mode=1777") != 0):
        print(json.dumps({"phase": "no-tmpfs", "why": os.strerror(ctypes.get_errno())}), flush=True)
        sys.exit(0)
sys.activate_stack_trampoline(backend)
path = ("/tmp/perf-%%d.map" if backend == "perf" else "/tmp/jit-%%d.dump") %% os.getpid()

def syscw():
    with open("/proc/self/io") as fh:
        for line in fh:
            if line.startswith("syscw:"):
                return int(line.split()[1])

def new_function(name):
    ns = {}
    exec(compile(f"def {name}(n):\n    return n + 1\n", f"<{name}>", "exec"), ns)
    return ns[name]

def caller_of(f):
    # a call site of its own for each function: one shared by two would
    # switch its specialization between them
    ns = {"f": f}
    exec("def call(n):\n    for i in range(n):\n        f(i)\n", ns)
    return ns["call"]

def reported(what):
    with open(report) as fh:
        return [int(line.split()[1]) for line in fh if line.startswith(what + " ")][-1]

def failure_begins():
    if how == "efbig":
        resource.setrlimit(resource.RLIMIT_FSIZE, (os.path.getsize(path), resource.RLIM_INFINITY))
    elif how == "inject":
        os.kill(os.getpid(), signal.SIGUSR1)
    else:
        with open("/tmp/filler", "wb", buffering=0) as fh:
            for chunk in (4096, 512, 64, 8, 1):
                try:
                    while True:
                        fh.write(b"x" * chunk)
                except OSError:
                    pass
        # The file's last page may still have room: new code until it is full.
        for i in range(1000):
            size = os.path.getsize(path)
            new_function(f"fill_{i}")(i)
            if os.path.getsize(path) == size:
                break

def failure_ends():
    """The write(2) calls the tracer failed since failure_begins()."""
    if how == "efbig":
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    elif how == "inject":
        os.kill(os.getpid(), signal.SIGUSR2)
        return reported("failed")
    elif os.path.exists("/tmp/filler"):
        os.unlink("/tmp/filler")
    return 0

def instructions_per_call(f):
    call = caller_of(f)
    call(300)
    runs = []
    for _ in range(STEP_RUNS):
        os.kill(os.getpid(), signal.SIGRTMIN + 1)
        call(STEP_CALLS)
        os.kill(os.getpid(), signal.SIGRTMIN + 2)
        runs.append(reported("steps"))
    return min(runs) / STEP_CALLS

published = new_function("published_before")
caller_of(published)(10)
# Every function of this program runs once before the failure (ending a
# failure that has not begun changes nothing): in the measured stretch only
# the new function and its caller are new code.
syscw()
failure_ends()
failure_begins()
failure_ends()
result = {"phase": "done", "pid": os.getpid()}
for name in ("first_after", "second_after"):
    failure_begins()
    size = os.path.getsize(path)
    before = syscw()
    f = new_function(name)
    caller_of(f)(CALLS)
    made = syscw() - before
    grew = os.path.getsize(path) - size
    result[name] = {"made": made, "grew": grew, "failed": failure_ends()}
if how == "efbig" and report != "-":
    failure_begins()
    result["steps_published"] = instructions_per_call(published)
    result["steps_first"] = instructions_per_call(new_function("stepped_after"))
    failure_ends()
print(json.dumps(result), flush=True)
'''

ERRNOS = {"ENOSPC": 28, "EIO": 5}


def build_tracer(workdir):
    """(path of the tracer, None) or (None, why it cannot be used here)."""
    if platform.machine() != "x86_64":
        return None, f"the tracer reads x86-64 registers; this is {platform.machine()}"
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return None, "no C compiler (cc) here to build the tracer"
    src, exe = os.path.join(workdir, "tracer.c"), os.path.join(workdir, "tracer")
    with open(src, "w") as fh:
        fh.write(TRACER)
    proc = subprocess.run([cc, "-O1", "-o", exe, src], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        return None, f"cc could not build the tracer: {proc.stderr.strip()[-600:]}"
    probe = subprocess.run([exe, os.path.join(workdir, "probe.report"), "0", "--", sys.executable, "-c", "pass"],
                           capture_output=True, text=True, timeout=300)
    if probe.returncode != 0:
        return None, f"the tracer cannot run a child here ({describe_exit(probe.returncode)}: " \
                     f"{probe.stderr.strip()[-300:]})"
    return exe, None


def run_case(backend, how, label, tracer, workdir, err=0):
    """Run one case: (problems, the line of the table)."""
    report = os.path.join(workdir, f"{backend}-{label}.report") if tracer else "-"
    argv = [sys.executable, "-c", PROGRAM % {"calls": CALLS}, backend, how, report]
    if tracer:
        argv = [tracer, report, str(err), "--", *argv]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    reports = child_reports(proc.stdout)
    if "no-tmpfs" in reports:
        return None, f"{backend:8} {label:7} not run: no tmpfs of its own here ({reports['no-tmpfs']['why']}; " \
                     "needs CAP_SYS_ADMIN)"
    done = reports.get("done")
    if proc.returncode != 0 or done is None:
        return [f"{backend} {label}: the interpreter ended with {describe_exit(proc.returncode)}: "
                f"{stderr_gist(proc.stderr, 600)}"], f"{backend:8} {label:7} died"
    remove_perf_files(done["pid"])
    problems = []
    cells = []
    for name in ("first_after", "second_after"):
        if done[name]["grew"] > 0:
            problems.append(f"{backend} {label}: the file grew by {done[name]['grew']} bytes while it could not "
                            f"({name}): the failure did not take effect")
        writes = done[name]["made"] + done[name]["failed"]
        cells.append(f"{name} {writes:6d} writes")
        if writes > MAX_WRITES:
            problems.append(f"{backend} {label}: {CALLS} calls of a function first called after the failure "
                            f"({name}) made {writes} write(2) calls "
                            f"({done[name]['made']} made, {done[name]['failed']} failed by the tracer): "
                            f"the write is tried again on every call")
    if "steps_first" in done:
        extra = done["steps_first"] - done["steps_published"]
        cells.append(f"instructions per call {done['steps_first']:.0f} vs {done['steps_published']:.0f} "
                     "published before")
        if extra > MAX_EXTRA_STEPS:
            problems.append(f"{backend} {label}: a function first called after the failure takes "
                            f"{done['steps_first']:.0f} instructions per call, {extra:.0f} more than one "
                            f"published before ({done['steps_published']:.0f}): it stays on the slow path")
    return problems, f"{backend:8} {label:7} " + "; ".join(cells)


def main():
    backends = ["perf"] + (["perf_jit"] if offers_perf_jit() else [])
    problems, lines = [], []
    with tempfile.TemporaryDirectory() as workdir:
        tracer, why_not = build_tracer(workdir)
        for backend in backends:
            cases = [("efbig", "EFBIG", 0)]
            if tracer:
                cases += [("inject", name, number) for name, number in ERRNOS.items()]
            cases.append(("tmpfs", "ENOSPC*", 0))
            for how, label, err in cases:
                found, line = run_case(backend, how, label, tracer if how != "tmpfs" else None, workdir, err)
                lines.append(line)
                problems += found or []
    print("\n".join(lines))
    if not tracer:
        print(f"(ENOSPC, EIO and the instruction counts not checked: {why_not})")
    print("(ENOSPC*: a real full tmpfs on /tmp)")
    return finish(problems)


if __name__ == "__main__":
    sys.exit(main())

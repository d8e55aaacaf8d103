# requires: perf_jit
# checks: behaviour
"""A forked child lets go of the jitdump descriptor it inherited exactly once.

A child of a process whose jitdump is open (here: paused by a switch to the
perf backend, so it stays open across fork()) drops the parent's stream when
it starts perf_jit of its own.  Closing the descriptor and then fclose()-ing
the stream closes the same number twice; between the two, another thread
may have been given that number (an open() in any thread), and the second
close takes that thread's file away.

An LD_PRELOAD shim makes the window certain: when close() is called on a
descriptor of a /tmp/jit-*.dump, it closes it and at once opens /dev/null,
which gets the same (lowest free) number, as another thread's open() would.
At exit the shim checks that its stand-in descriptor is still open.  (A
stream closed with fclose() closes its descriptor inside the C library,
where the shim does not see it, and that close is the one that must be the
only one.)  The child must exit 0, and no stand-in may have been closed by
someone else.
"""
import os
import subprocess
import sys
import tempfile

from childcheck import build_shim, child_reports, describe_exit, finish, preload_env, remove_perf_files

CANNOT_CHECK = 2

SHIM = r'''
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int stand_ins[64];
static int n_stand_ins;

static void note(const char *line)
{
    const char *log = getenv("CLOSE_ONCE_LOG");
    if (log == NULL) return;
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd < 0) return;
    (void)write(fd, line, strlen(line));
    close(fd);
}

int close(int fd)
{
    static int (*real_close)(int);
    if (real_close == NULL) real_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
    char link[64], target[256];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    int is_dump = n > 0 && (target[n] = 0, strncmp(target, "/tmp/jit-", 9) == 0);
    int rc = real_close(fd);
    if (is_dump && rc == 0 && n_stand_ins < 64) {
        int other = open("/dev/null", O_RDONLY);
        char line[160];
        snprintf(line, sizeof line, "pid %d: close(%d) of %s; stand-in got %d\n", getpid(), fd, target, other);
        note(line);
        if (other >= 0) stand_ins[n_stand_ins++] = other;
    }
    return rc;
}

__attribute__((destructor)) static void check_stand_ins(void)
{
    for (int i = 0; i < n_stand_ins; i++) {
        if (fcntl(stand_ins[i], F_GETFD) == -1) {
            char line[120];
            snprintf(line, sizeof line, "pid %d: CLOSED BY SOMEONE ELSE: stand-in descriptor %d\n",
                     getpid(), stand_ins[i]);
            note(line);
        }
    }
}
'''

PROGRAM = r'''
import json, os, sys
sys.activate_stack_trampoline("perf_jit")
def before_fork(n):
    return n + 1
before_fork(1)
sys.activate_stack_trampoline("perf")      # the dump is paused, still open
pid = os.fork()
if pid == 0:
    sys.activate_stack_trampoline("perf_jit")   # the child's own dump
    def in_child(n):
        return n * 3
    in_child(2)
    sys.exit(0)
_, status = os.waitpid(pid, 0)
print(json.dumps({"phase": "done", "pid": os.getpid(), "child": pid, "status": status}), flush=True)
'''


def main():
    with tempfile.TemporaryDirectory() as workdir:
        lib, why_not = build_shim(SHIM, workdir, "close_once")
        if lib is None:
            print(f"cannot check: {why_not}")
            return CANNOT_CHECK
        log = os.path.join(workdir, "close.log")
        env = preload_env(lib, CLOSE_ONCE_LOG=log)
        proc = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=300)
        done = child_reports(proc.stdout).get("done", {})
        remove_perf_files(done.get("pid"))
        remove_perf_files(done.get("child"))
        notes = open(log).read() if os.path.exists(log) else ""
    print(notes.strip() or "(the shim saw no close() of a jitdump descriptor)")
    problems = []
    if proc.returncode != 0 or not done:
        problems.append(f"the parent ended with {describe_exit(proc.returncode)}: {proc.stderr.strip()[-600:]}")
    elif done["status"] != 0:
        problems.append(f"the child ended with wait status {done['status']}: {proc.stderr.strip()[-600:]}")
    if "CLOSED BY SOMEONE ELSE" in notes:
        problems.append("the child closed the inherited jitdump descriptor twice: the second close took the "
                        "descriptor another part of the program had been given")
    return finish(problems)


if __name__ == "__main__":
    sys.exit(main())

# requires: perf
# fixes: patches/3.13/0018
"""The map and the jitdump are written only to a regular file of the user, with one name: two users, one /tmp.

/tmp/perf-PID.map and /tmp/jit-PID.dump have names anyone can predict.  Run
as root, this check plays two users: a victim (uid 64101) whose interpreter
is started under a pid known in advance (forked, then waiting for the word
before it execs), and another user (uid 64102) who has prepared a file at
that name first:
  map-foreign   /tmp/perf-PID.map already exists, owned by the other user
                and writable by all: the victim's code addresses would go
                there (an ASLR leak);
  dump-foreign  the same for /tmp/jit-PID.dump;
  dump-link     /tmp/jit-PID.dump is a hard link to a file of the victim's
                (what protected_hardlinks=0 allows): opening the dump with
                O_TRUNC would empty that file;
  dump-symlink  /tmp/jit-PID.dump is a symbolic link to a file of the victim's.
Each is tried with -X perf / -X perf_jit at start-up (the program must run,
with one warning line, and write nothing to the prepared file) and with
sys.activate_stack_trampoline() (it must raise OSError naming the file).
The victim's own file must keep its bytes.
"""
import os
import shutil
import sys
import tempfile

from childcheck import describe_exit, finish, offers_perf_jit, read_to_end

VICTIM, OTHER = 64101, 64102
CANNOT_CHECK = 2

PROGRAM = r'''
import sys
backend = sys.argv[1]
if sys.argv[2] == "api":
    try:
        sys.activate_stack_trampoline(backend)
    except OSError as exc:
        print("refused:", exc)
    else:
        print("activated")
def victim_function(n):
    return n + 1
print("result", victim_function(41))
'''


def run_victim(argv, prepare):
    """Fork a victim child (uid VICTIM) that waits, prepare its files by pid, let it exec argv; its output."""
    out_r, out_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(out_r)
            os.close(go_w)
            os.setgroups([])
            os.setgid(VICTIM)
            os.setuid(VICTIM)
            os.read(go_r, 1)
            os.dup2(out_w, 1)
            os.dup2(out_w, 2)
            os.chdir("/tmp")
            os.execv(sys.executable, [sys.executable, *argv])
        finally:
            os._exit(127)
    os.close(out_w)
    os.close(go_r)
    try:
        prepare(pid)
    finally:
        os.write(go_w, b"g")
        os.close(go_w)
    output = read_to_end(out_r)
    _, status = os.waitpid(pid, 0)
    return pid, os.waitstatus_to_exitcode(status), output.decode("utf-8", "replace")


def main():
    if os.geteuid() != 0:
        print("cannot check: playing two users needs root in the container")
        return CANNOT_CHECK
    workdir = tempfile.mkdtemp(prefix="owner-check-", dir="/tmp")
    os.chmod(workdir, 0o755)
    script = os.path.join(workdir, "victim.py")
    with open(script, "w") as fh:
        fh.write(PROGRAM)
    os.chmod(script, 0o644)
    victim_file = os.path.join(workdir, "victim-data")
    problems = []
    backends = [("perf", "perf-{}.map", ["-X", "perf"])]
    if offers_perf_jit():
        backends.append(("perf_jit", "jit-{}.dump", ["-X", "perf_jit"]))
    cases = []
    for backend, name, xopt in backends:
        kinds = ["foreign"] + (["link", "symlink"] if backend == "perf_jit" else [])
        for kind in kinds:
            for how in ("startup", "api"):
                cases.append((backend, name, xopt, kind, how))
    try:
        for backend, name, xopt, kind, how in cases:
            label = f"{'map' if backend == 'perf' else 'dump'}-{kind} ({how})"
            secret = b"the victim's own data\n" * 10
            with open(victim_file, "wb") as fh:
                fh.write(secret)
            os.chown(victim_file, VICTIM, VICTIM)
            os.chmod(victim_file, 0o600)

            def prepare(pid, name=name, kind=kind):
                path = "/tmp/" + name.format(pid)
                if os.path.lexists(path):
                    os.unlink(path)
                if kind == "foreign":
                    with open(path, "wb"):
                        pass
                    os.chown(path, OTHER, OTHER)
                    os.chmod(path, 0o666)
                elif kind == "link":
                    os.link(victim_file, path)
                else:
                    os.symlink(victim_file, path)

            argv = (xopt if how == "startup" else []) + [script, backend, how]
            pid, code, output = run_victim(argv, prepare)
            path = "/tmp/" + name.format(pid)
            try:
                if code != 0 or "result 42" not in output:
                    problems.append(f"{label}: the program did not run to its end ({describe_exit(code)}): "
                                    f"{output.strip()[-400:]}")
                if how == "api" and "refused:" not in output:
                    problems.append(f"{label}: sys.activate_stack_trampoline({backend!r}) did not raise OSError: "
                                    f"{output.strip()[-300:]}")
                if how == "startup" and output.count("warning") != 1:
                    problems.append(f"{label}: expected one warning line at start-up: {output.strip()[-300:]}")
                if kind == "foreign" and os.path.exists(path) and os.path.getsize(path):
                    problems.append(f"{label}: the victim wrote {os.path.getsize(path)} bytes into a file the "
                                    f"other user made")
                with open(victim_file, "rb") as fh:
                    if fh.read() != secret:
                        problems.append(f"{label}: the victim's own file {victim_file} was changed through the "
                                        f"{kind} at {path}")
            finally:
                for leftover in (path, f"/tmp/perf-{pid}.map", f"/tmp/jit-{pid}.dump"):
                    if os.path.lexists(leftover):
                        os.unlink(leftover)
            print(f"{label}: {'ok' if not any(p.startswith(label) for p in problems) else 'FAILED'}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return finish(problems)


if __name__ == "__main__":
    sys.exit(main())

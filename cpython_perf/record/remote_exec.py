"""Switch the trampoline of a stock CPython 3.14+ in a container, with sys.remote_exec() (PEP 768).

An interpreter without the series has no _PyPerf_RemoteRequest, but from 3.14 on it runs a script that
another process hands it at its next safe point: `sys.remote_exec(pid, path)`, in a thread that runs
Python code, as the series' request does.  The caller must be an interpreter of the target's own version
(the debug offsets it reads are the version's), with ptrace rights over the target; `path` is opened by
the target, in its own mount namespace.  So:

1. the payload (PAYLOAD: switch, then write what happened as JSON) is written into the container's /tmp
   as a new file of a random name, through a descriptor of that directory opened inside the container's
   root (untrusted_files: a link the container planted is never followed);
2. a container of the target's own image runs the target's own interpreter (its path as the process
   names it, /proc/<pid>/exe) with the container's pid namespace and CAP_SYS_PTRACE, no network, and
   calls sys.remote_exec(pid, payload) -- the container's own code, in a container like its own, with
   nothing of the host;
3. the answer is read back from the container's /tmp the same way (a regular file, at most 64 KiB, JSON
   of the expected fields), until TIMEOUT; both files are removed.

The payload never activates an active trampoline again: on 3.14 each activation while active takes a
code watcher that is never given back, and after a few the interpreter fails or crashes (gh-146522).
A trampoline that is already active is left as it is and the answer says so.

What it needs: the target's image still on the engine; a 3.14+ interpreter built with remote debugging
(the default; `--without-remote-debug` builds lack sys.remote_exec); a target not started with
`-X disable_remote_debug` or PYTHON_DISABLE_REMOTE_DEBUG (then it refuses, and the answer says so);
ptrace rights (CAP_SYS_PTRACE in the container's pid namespace, given here; kernel.yama.ptrace_scope 3
forbids it for everyone).
"""

from __future__ import annotations

import json
import os
import secrets
import time

from . import procfs
from .remote_request import printable
from .untrusted_files import ForeignRoot, Refused, read_at

ANSWER_LIMIT = 64 << 10
PTRACE_CAPABILITY = "SYS_PTRACE"
DONE_EXIT, FAILED_EXIT, CANNOT_ASK, PENDING_EXIT = 0, 1, 2, 3

# Runs in the target at a safe point, in its __main__'s namespace: one function, deleted after it ran.
PAYLOAD = r'''
def _cpython_perf_switch(mode, answer):
    import json, os, sys
    said = {"pid": os.getpid(), "mode": mode, "was_active": False}
    try:
        said["was_active"] = sys.is_stack_trampoline_active()
        if mode == "off":
            if said["was_active"]:
                sys.deactivate_stack_trampoline()
            said["message"] = "switched off" if said["was_active"] else "was not active"
        elif said["was_active"]:
            said["message"] = ("already active: left as it is (activating an active trampoline again takes a code "
                               "watcher for good: gh-146522)")
        else:
            sys.activate_stack_trampoline(mode)
            said["message"] = "activated"
        said["state"] = "done"
    except Exception as exc:
        said["state"], said["message"] = "failed", f"{type(exc).__name__}: {exc}"
    said["active"] = bool(getattr(sys, "is_stack_trampoline_active", bool)())
    part = answer + ".part"
    with open(part, "x") as f:
        json.dump(said, f)
    os.replace(part, answer)


_cpython_perf_switch(__MODE__, __ANSWER__)
del _cpython_perf_switch
'''

# Runs in a container of the target's image, with the target's own interpreter.  sys.remote_exec checks that the
# script exists where it is called, although the target opens it in its own mount namespace: the same payload is
# written at the same path here as well.
CALLER = r'''
import json, sys
pid, path = int(sys.argv[1]), sys.argv[2]
with open(path, "x") as f:
    f.write(sys.argv[3])
if not hasattr(sys, "remote_exec"):
    print(json.dumps({"error": "this interpreter (Python %d.%d) has no sys.remote_exec: it needs 3.14 or newer"
                      % sys.version_info[:2]}))
    sys.exit(2)
try:
    sys.remote_exec(pid, path)
except Exception as exc:
    print(json.dumps({"error": "sys.remote_exec refused: %s: %s" % (type(exc).__name__, exc)}))
    sys.exit(2)
print(json.dumps({"sent": True}))
'''


def payload_text(mode: str, answer: str) -> str:
    return PAYLOAD.replace("__MODE__", repr(mode)).replace("__ANSWER__", repr(answer))


def target_interpreter(host_pid: int) -> str | None:
    """The target's executable as it names it in its own mount namespace (/proc/<pid>/exe's link)."""
    try:
        exe = os.readlink(procfs.PROC / str(host_pid) / "exe")
    except OSError:
        return None
    return exe if exe.startswith("/") and "\n" not in exe and not exe.endswith(" (deleted)") else None


def _write_new(tmp_fd: int, name: str, data: bytes) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=tmp_fd)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _read_answer(tmp_fd: int, name: str) -> dict | None:
    """The payload's answer (None: not there yet); Refused where it is not what the payload writes."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=tmp_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise Refused(f"/tmp/{name}", exc.strerror or str(exc)) from None
    try:
        st = os.fstat(fd)
        if not (st.st_mode & 0o170000 == 0o100000) or st.st_size > ANSWER_LIMIT:
            raise Refused(f"/tmp/{name}", "not a regular file of at most 64 KiB")
        raw = read_at(fd, 0, st.st_size)
    finally:
        os.close(fd)
    try:
        answer = json.loads(raw)
    except ValueError:
        raise Refused(f"/tmp/{name}", "not JSON") from None
    if (not isinstance(answer, dict) or answer.get("state") not in ("done", "failed")
            or not isinstance(answer.get("active"), bool) or not isinstance(answer.get("message", ""), str)):
        raise Refused(f"/tmp/{name}", "not the answer the payload writes")
    return {"state": answer["state"], "active": answer["active"], "message": printable(answer.get("message", "")),
            "was_active": answer.get("was_active") is True}


def activate(client, container, ns_pid: int, host_pid: int, mode: str, timeout: float, log=print) -> tuple[int, dict]:
    """Switch process ns_pid (host_pid here) of container (outside.Container) to mode with sys.remote_exec:
    (exit status as remote_request.py's, report)."""
    report = {"pid": ns_pid, "mode": mode, "via": "sys.remote_exec"}
    interpreter = target_interpreter(host_pid)
    if interpreter is None:
        return CANNOT_ASK, {**report, "error": f"cannot tell process {ns_pid}'s interpreter (/proc/{host_pid}/exe)"}
    token = secrets.token_hex(8)
    payload, answer = f"cpython-perf-switch-{token}.py", f"cpython-perf-switch-{token}.json"
    try:
        root = ForeignRoot(procfs.PROC / str(host_pid) / "root", f"container {container.name}")
    except OSError as exc:
        return CANNOT_ASK, {**report, "error": f"cannot reach process {ns_pid}'s root: {exc.strerror or exc}"}
    try:
        try:
            tmp_fd = root.open_dir("tmp", follow=True)
        except OSError as exc:
            return CANNOT_ASK, {**report, "error": f"the container's /tmp cannot be written safely: {exc}"}
        try:
            code = payload_text(mode, f"/tmp/{answer}")
            _write_new(tmp_fd, payload, code.encode())
            log(f"$ docker run --rm --pid container:{container.id[:12]} --cap-add {PTRACE_CAPABILITY} --network none "
                f"{container.image} {interpreter} -c CALLER {ns_pid} /tmp/{payload} PAYLOAD")
            sent = _run_caller(client, container, interpreter, ns_pid, f"/tmp/{payload}", code, timeout)
            if "error" in sent:
                return CANNOT_ASK, {**report, "error": sent["error"]}
            deadline = time.monotonic() + timeout
            while True:
                try:
                    got = _read_answer(tmp_fd, answer)
                except Refused as exc:
                    return CANNOT_ASK, {**report, "error": f"the answer cannot be believed: {exc}"}
                if got is not None:
                    return (DONE_EXIT if got["state"] == "done" else FAILED_EXIT), {**report, **got}
                if time.monotonic() >= deadline:
                    return PENDING_EXIT, {**report, "state": "pending",
                                          "message": f"not run within {timeout:g} s: no thread of the interpreter "
                                                     "ran Python code; it runs when one does"}
                time.sleep(0.05)
        finally:
            for name in (payload, answer, answer + ".part"):
                try:
                    os.unlink(name, dir_fd=tmp_fd)
                except OSError:
                    pass
            os.close(tmp_fd)
    finally:
        root.close()


def _run_caller(client, container, interpreter: str, ns_pid: int, path: str, payload: str, timeout: float) -> dict:
    """CALLER in a container of the target's image, in its pid namespace: {"sent": True} or {"error": ...}."""
    helper = client.containers.create(container.image, [interpreter, "-c", CALLER, str(ns_pid), path, payload],
                                      pid_mode=f"container:{container.id}", cap_add=[PTRACE_CAPABILITY],
                                      network_disabled=True, user="0", entrypoint=[])
    try:
        helper.start()
        status = helper.wait(timeout=timeout + 60).get("StatusCode", -1)
        output = helper.logs(stdout=True, stderr=True).decode(errors="replace")[-4000:]
    finally:
        helper.remove(force=True)
    for line in reversed(output.strip().splitlines()):
        if line.startswith("{"):
            try:
                said = json.loads(line)
            except ValueError:
                break
            if isinstance(said, dict) and (said.get("sent") is True or isinstance(said.get("error"), str)):
                return {"error": printable(said["error"])} if "error" in said else said
            break
    return {"error": f"{interpreter} in {container.image} did not call sys.remote_exec (exit {status}): "
                     f"{printable(output.strip()[-300:])}"}

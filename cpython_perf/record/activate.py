"""Switch the perf trampoline of a Python process that is already running, from outside it.

`python -m cpython_perf activate --container NAME [--pid PID] [--mode perf|perf_jit|off]` (a process in a
container, by its pid there; default: the container's one Python process) or `activate --pid PID` (a
process of this machine, by its pid here).  gdb attaches and calls the series' async-signal-safe
_PyPerf_RemoteRequest() in each of the process's threads; the interpreter switches itself at its next
safe point, in a thread that runs Python code, and publishes the outcome, which remote_request.py
reads (that script is what runs next to the target: see its docstring).

gdb runs in the tools image, with the target's pid namespace (`--pid container:ID`, or the host's) and
CAP_SYS_PTRACE; `--host-gdb` runs this machine's gdb instead.  Either way the caller needs what gdb
needs to attach: root, or the process's user where kernel.yama.ptrace_scope allows it.

The target is not trusted: gdb loads nothing from its files, and its answer is checked before it is
believed (remote_request.py's docstring says how).  What the answer carries is printed without its
control characters.  gdb still reads the target's files, and a container's absolute links under
/proc/PID/root lead into gdb's own file system: in the tools image that holds nothing of the host,
which is why it is the default.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from ..errors import DriverError
from .remote_request import NO_SERIES, printable

REQUEST_SCRIPT = Path(__file__).with_name("remote_request.py")
MODES = ("perf", "perf_jit", "off")
PTRACE_CAPABILITY = "SYS_PTRACE"
EXIT_MEANING = {0: "done", 1: "failed", 2: "could not ask", 3: "pending"}


def add_arguments(p) -> None:
    p.add_argument("--container", help="the container the process runs in (name or id); --pid is then its pid "
                                       "inside the container (default: the container's one Python process)")
    p.add_argument("--pid", help="the process: its pid in --container, else on this machine")
    p.add_argument("--mode", choices=MODES, default="perf",
                   help="perf (the perf map, -X perf), perf_jit (the jitdump, -X perf_jit) or off (default perf)")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="seconds to wait for the interpreter to switch (default 10); a process whose threads "
                        "all wait in system calls switches when one runs Python code again")
    p.add_argument("--tools-image", help="image with gdb and python3 to run the request in (default: the "
                                         "project's tools image, built if missing)")
    p.add_argument("--host-gdb", action="store_true",
                   help="run this machine's gdb (needs gdb and python3 here; --pid of this machine only); gdb then "
                        "reads the process's files with this machine's file system beside them, so keep it for "
                        "processes you trust")


def request_command(pid: str, mode: str, timeout: float, python: str = "python3") -> list[str]:
    return [python, "-c", REQUEST_SCRIPT.read_text(), pid, mode, f"{timeout:g}"]


def run_in_tools_image(client, image: str, pid_mode: str, pid: str, mode: str, timeout: float) -> tuple[int, str]:
    """remote_request.py in image with pid_mode's pid namespace and CAP_SYS_PTRACE: (exit status, output)."""
    container = client.containers.create(image, request_command(pid, mode, timeout), pid_mode=pid_mode,
                                         cap_add=[PTRACE_CAPABILITY], network_disabled=True, user="0")
    try:
        container.start()
        status = container.wait(timeout=timeout + 180).get("StatusCode", -1)
        return status, container.logs(stdout=True, stderr=True).decode(errors="replace")
    finally:
        container.remove(force=True)


def run_on_host(pid: str, mode: str, timeout: float) -> tuple[int, str]:
    if shutil.which("gdb") is None:
        raise DriverError("--host-gdb: there is no gdb here (apt install gdb), or leave --host-gdb out to use the "
                          "tools image")
    done = subprocess.run(request_command(pid, mode, timeout, sys.executable), capture_output=True, text=True,
                          timeout=timeout + 180)
    return done.returncode, done.stdout + done.stderr


def report_of(output: str) -> dict:
    """The JSON line remote_request.py printed last."""
    for line in reversed(output.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                break
    return {"error": f"no answer from the request script: {output.strip()[-500:]}"}


def describe(report: dict, where: str) -> str:
    """One line for report; what came from the target is printed without its control characters."""
    def text(key: str) -> str:
        return printable(str(report.get(key)))

    if "error" in report:
        return f"{where}: could not ask: {text('error')}"
    state = report.get("state")
    mode = text("mode")
    if state == "done":
        now = {True: "the trampoline is active", False: "the trampoline is not active"}.get(
            report.get("active"), "whether the trampoline is active is unknown")
        return f"{where}: {mode}: done ({now}: {text('message')})"
    if state == "failed":
        return f"{where}: {mode}: refused by the interpreter: {text('message')}"
    return f"{where}: {mode}: pending: {text('message')}"


def activate(client, matrix, container: str | None, pid: str | None, mode: str, timeout: float,
             tools_image: str | None = None, host_gdb: bool = False, log=print) -> tuple[int, dict]:
    """Make the request; (exit status as remote_request.py's, its report)."""
    if mode not in MODES:
        raise DriverError(f"--mode {mode}: one of {', '.join(MODES)}")
    if pid is not None and not (pid.isdigit() and int(pid) > 0):
        raise DriverError(f"--pid {pid}: a process id (a positive number)")
    if container is None and pid is None:
        raise DriverError("name the process: --pid PID (this machine), or --container NAME [--pid PID]")
    if host_gdb:
        if container is not None:
            raise DriverError("--host-gdb takes a --pid of this machine, not --container (the tools image joins "
                              "the container's pid namespace: leave --host-gdb out)")
        status, output = run_on_host(pid, mode, timeout)
        return status, report_of(output)
    from ..image import tools
    from .outside import find_container

    image = tools_image or tools.ensure_tools_image(client, matrix, log)
    if container is not None:
        target = find_container(client, container)
        pid_mode = f"container:{target.id}"
    else:
        pid_mode = "host"
    status, output = run_in_tools_image(client, image, pid_mode, pid or "auto", mode, timeout)
    report = report_of(output)
    if container is not None and status == 2 and NO_SERIES in report.get("error", "") and "pid" in report:
        # CPython as released: from 3.14 on, sys.remote_exec() runs the switch at the same kind of safe point
        from . import procfs, remote_exec

        namespace = procfs.Namespace(target.pid)
        namespace.scan()
        found = namespace.by_ns_pid(int(report["pid"]))
        if found is not None:
            log(f"process {report['pid']}: {NO_SERIES}; trying sys.remote_exec() (CPython 3.14+)")
            status, stock = remote_exec.activate(client, target, found.ns_pid, found.pid, mode, timeout, log)
            if "error" in stock:
                stock["error"] = f"{report['error']}; and {stock['error']}"
            return status, stock
    return status, report


def main(matrix, args, log=print) -> int:
    from .. import host

    client = None if args.host_gdb else host.docker_client(log)
    status, report = activate(client, matrix, args.container, args.pid, args.mode, args.timeout,
                              args.tools_image, args.host_gdb, log)
    where = (f"container {args.container}, " if args.container else "") + f"process {report.get('pid', args.pid)}"
    print(describe(report, where))
    print(json.dumps(report))
    return status

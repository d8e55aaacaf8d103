"""A long step's output: all of it in a log file, a heartbeat on the console.

A CPython build (docker build of a cell image, a few minutes), mmdebstrap, dpkg-buildpackage (10-40
minutes) and a qemu-system guest either print every make line or nothing for minutes.  Progress writes
every line to a log file and prints, every $CPYTHON_PERF_HEARTBEAT seconds (30), one line with the time
elapsed, the output's last line and the log's path; a step's landmarks (docker build's `Step N/M`, the
guest's job lines) are still printed as they come.  On failure the caller puts tail() in its error, so the
message (what CI shows, what pytest shows) has the log's last lines.  --verbose, or $CPYTHON_PERF_VERBOSE=1,
prints every line as before (and no heartbeat).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import threading
import time
from pathlib import Path

HEARTBEAT_ENV = "CPYTHON_PERF_HEARTBEAT"
VERBOSE_ENV = "CPYTHON_PERF_VERBOSE"
LOGS_ENV = "CPYTHON_PERF_LOGS"
DEFAULT_EVERY = 30.0
TAIL_LINES = 40


def verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "") not in ("", "0")


def set_verbose(on: bool = True) -> None:
    """--verbose: for this process and the ones it starts (nox -> pytest -> the conformance fixtures' builds)."""
    os.environ[VERBOSE_ENV] = "1" if on else ""


def add_verbose_option(parser) -> None:
    """--verbose of a command with long steps (docker build, mmdebstrap, dpkg-buildpackage, qemu guests): the
    command line calls set_verbose when it is given."""
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="print the long steps' whole output (default: a heartbeat line every 30 s; the output "
                             "is in results/logs/ either way)")


def heartbeat_every() -> float:
    try:
        return max(0.01, float(os.environ.get(HEARTBEAT_ENV, DEFAULT_EVERY)))
    except ValueError:
        return DEFAULT_EVERY


def log_dir() -> Path:
    """Where the long steps' logs go: $CPYTHON_PERF_LOGS, else results/logs (beside the JUnit files)."""
    if os.environ.get(LOGS_ENV):
        return Path(os.environ[LOGS_ENV])
    from .matrix import PROJECT_ROOT

    return Path(os.environ.get("CPYTHON_PERF_RESULTS") or PROJECT_ROOT / "results") / "logs"


def log_path(name: str) -> Path:
    """results/logs/<name>.log, the name made safe for a file name (image tags have colons)."""
    return log_dir() / ("".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name) + ".log")


def elapsed(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class Progress:
    """with Progress("building cpython-perf:3.13-fp", path, log) as p: p.line(text) / p.run(cmd).

    log: the console (a print-like function); every: seconds between heartbeats (default
    $CPYTHON_PERF_HEARTBEAT or 30); verbose: every line to the console too (default $CPYTHON_PERF_VERBOSE);
    append: add to an existing log rather than start it anew."""

    def __init__(self, what: str, path: Path, log=print, every: float | None = None, verbose: bool | None = None,
                 append: bool = False, clock=time.monotonic):
        self.what, self.path, self.log = what, Path(path), log
        self.every = every if every is not None else heartbeat_every()
        self.verbose = verbose if verbose is not None else globals()["verbose"]()
        self.append, self.clock = append, clock
        self.last = ""
        self.ok: bool | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "Progress":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.path, "a" if self.append else "w", errors="replace")
        self.started = self.clock()
        how = "every line follows" if self.verbose else f"a line every {self.every:.0f} s; --verbose for all"
        self.log(f"{self.what}: output in {self.path} ({how})")
        if not self.verbose:
            self._thread = threading.Thread(target=self._beat, name=f"heartbeat {self.what}", daemon=True)
            self._thread.start()
        return self

    def _beat(self) -> None:
        while not self._stop.wait(self.every):
            self.log(self.heartbeat())

    def heartbeat(self) -> str:
        last = self.last.strip()
        last = last if len(last) <= 100 else last[:99] + "…"
        return (f"  ... {self.what}: {elapsed(self.clock() - self.started)} elapsed"
                + (f"; last: {last}" if last else "") + f" (log: {self.path})")

    def line(self, text: str, show: bool = False) -> None:
        """One line of the step's output: to the log; to the console too when verbose or show (a landmark)."""
        with self._lock:
            self._file.write(text + "\n")
            self._file.flush()
            if text.strip():
                self.last = text
        if self.verbose or show:
            self.log(text)

    def run(self, cmd: list[str], timeout: float | None = None, **popen) -> int:
        """Run cmd with its output (stdout and stderr) line by line through line(); its exit status.
        On timeout it is killed and -9 returned."""
        self.line(f"$ {shlex.join(cmd)}")
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                **popen)
        timer = threading.Timer(timeout, proc.kill) if timeout else None
        if timer:
            timer.start()
        try:
            for raw in proc.stdout:
                self.line(raw.decode(errors="replace").rstrip("\r\n"))
            return proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        finally:
            if timer:
                timer.cancel()
            proc.stdout.close()

    def tail(self, lines: int = TAIL_LINES) -> str:
        """The log's last lines, for an error message."""
        try:
            with open(self.path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 64 * 1024))
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def failure(self, lines: int = TAIL_LINES) -> str:
        """What an error message appends: the log's path and its tail."""
        return f"log: {self.path}\nlast {lines} lines:\n{self.tail(lines)}"

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._stop.set()
        if self._thread:
            self._thread.join()
        self._file.close()
        ok = exc_type is None and self.ok is not False
        self.log(f"{self.what}: {'done' if ok else 'FAILED'} in {elapsed(self.clock() - self.started)} "
                 f"(log: {self.path})")
        return False

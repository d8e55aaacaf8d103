"""The container a profile run's steps run in: one kept running (sleep infinity) while each step runs in it
with docker exec, so each command line is printed and timed here, the program's own output streams to the
terminal, and the outputs are handed back to the user at the end whatever happened.  Every command line
printed is also kept for commands.txt (the record list).
"""

from __future__ import annotations

import shlex
import sys
import time

from .steps import Step


def docker_run_line(image: str, mounts: dict, caps: list[str], env: dict[str, str], workdir: str,
                    command: list[str]) -> str:
    """The `docker run` equivalent of a container this module creates (printed, and written to commands.txt)."""
    words = ["docker", "run", "--rm"]
    for cap in caps:
        words += ["--cap-add", cap]
    for host, (inside, mode) in mounts.items():
        words += ["-v", f"{host}:{inside}" + (":ro" if mode == "ro" else "")]
    for key, value in env.items():
        words += ["-e", f"{key}={value}"]
    words += ["-w", workdir, image, *command]
    return shlex.join(words)


class Session:
    """A container of image kept running (sleep infinity) to run steps in with docker exec."""

    def __init__(self, client, image: str, mounts: dict, caps: list[str], env: dict[str, str], workdir: str,
                 log, record: list[str]):
        self.client, self.image, self.env, self.workdir, self.log, self.record = client, image, env, workdir, log, record
        from ..run import containers

        self.caps = containers.container_capabilities(caps)
        self.mounts = mounts
        volumes = {str(h): {"bind": c, "mode": m} for h, (c, m) in mounts.items()}
        self.container = client.containers.create(image, ["sleep", "infinity"], working_dir=workdir, volumes=volumes,
                                                  cap_add=self.caps, environment=env, detach=True)
        self.emit(f"$ {docker_run_line(image, mounts, self.caps, env, workdir, ['sleep', 'infinity'])}  "
                  "# the container the commands below run in (docker exec)")
        self.container.start()

    def emit(self, line: str) -> None:
        self.log(line)
        self.record.append(line)

    def exec(self, step: Step, quiet: bool = False) -> tuple[int, str, float]:
        """Run a step; (exit status, its output's tail, seconds).  Streamed steps write to the terminal."""
        if step.display and not quiet:
            self.emit(f"$ {step.display}")
        api = self.client.api
        started = time.monotonic()
        exec_id = api.exec_create(self.container.id, step.argv, workdir=self.workdir, environment=self.env)["Id"]
        tail = b""
        for out, err in api.exec_start(exec_id, stream=True, demux=True):
            for chunk, stream in ((out, sys.stdout), (err, sys.stderr)):
                if chunk:
                    tail = (tail + chunk)[-20000:]
                    if step.stream:
                        _write(stream, chunk)
        code = api.exec_inspect(exec_id).get("ExitCode")
        seconds = time.monotonic() - started
        if not quiet:
            self.record.append(f"#   exit {code}, {seconds:.1f} s")
        return (code if code is not None else -1), tail.decode(errors="replace"), seconds

    def close(self) -> None:
        self.container.remove(force=True)


def _write(stream, chunk: bytes) -> None:
    """The program's own output, as it comes, to the terminal (or to whatever stands in for it)."""
    if hasattr(stream, "buffer"):
        stream.flush()
        stream.buffer.write(chunk)
    else:
        stream.write(chunk.decode(errors="replace"))
    stream.flush()

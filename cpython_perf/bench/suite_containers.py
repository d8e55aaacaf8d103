"""A benchmark file of the standard suite run in a cell's container: pyperformance's benchmark directories and
pyperf's package mounted read-only (pip is not needed in the images), pyperf on PYTHONPATH; and what a failed
run's error output says.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..run import containers
from .suite_pins import SuiteFiles

CONTAINER_SUITE = "/suite"         # pyperformance's data-files/benchmarks, read-only
CONTAINER_PYPERF = "/pyperf"       # the directory holding pyperf/, read-only, on PYTHONPATH


def run_benchmark(client, image: str, command, files: SuiteFiles, env: dict[str, str],
                  mounts: dict[Path, str] | None = None):
    """command (a list, or a shell line) in a fresh container of image, in /tmp, with the suite's files mounted
    read-only (an hour at most); mounts: directories mounted read-write besides."""
    return containers.run(client, image, command, workdir="/tmp", env=env, mounts=mounts,
                          read_only={files.benchmarks: CONTAINER_SUITE, files.pyperf_root: CONTAINER_PYPERF},
                          timeout=3600)


def last_error(stderr: str) -> str:
    """The program's last line of error output, valgrind's own lines (==PID==) left out."""
    lines = [line for line in stderr.strip().splitlines() if line.strip() and not re.match(r"==\d+==", line)]
    return (lines or ["(no error output)"])[-1][:300]

"""The errors the driver raises on bad input or an unusable machine.

Each carries a message that names the problem and the fix; the command line
prints it without a traceback and exits non-zero (see cli.main): 2 for a usage
error (a bad argument, cell or matrix: DriverError's default), 1 for a runtime
failure (RuntimeFailure and its kind: no engine, a build that failed, ...).
"""


class DriverError(Exception):
    """Base class: a problem the user can act on, reported without traceback."""

    exit_code = 2


class RuntimeFailure(DriverError):
    """The machine or a step failed (not the command line): exit status 1."""

    exit_code = 1


class MatrixError(DriverError):
    """matrix.yaml or a recipe is malformed or inconsistent."""


class UnknownCell(DriverError):
    """A cell name that matrix.yaml does not define."""


class SourceUnavailable(RuntimeFailure):
    """A pinned source tarball cannot be had from any configured place."""


class HashMismatch(RuntimeFailure):
    """A downloaded or cached file does not have the pinned sha256."""


class PatchFailed(RuntimeFailure):
    """A patch of a series does not apply to the pristine tree."""


class DockerUnavailable(RuntimeFailure):
    """No Docker engine answers."""


class ImageBuildFailed(RuntimeFailure):
    """docker build of a cell or the base image failed."""


class PerfNotPermitted(RuntimeFailure):
    """perf_event_open is refused inside the container."""

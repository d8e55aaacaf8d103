"""The errors the driver raises on bad input or an unusable machine.

Each carries a message that names the problem and the fix; the command line
prints it without a traceback and exits non-zero (see cli.main).
"""


class DriverError(Exception):
    """Base class: a problem the user can act on, reported without traceback."""

    exit_code = 2


class MatrixError(DriverError):
    """matrix.yaml or a recipe is malformed or inconsistent."""


class UnknownCell(DriverError):
    """A cell name that matrix.yaml does not define."""


class SourceUnavailable(DriverError):
    """A pinned source tarball cannot be had from any configured place."""


class HashMismatch(DriverError):
    """A downloaded or cached file does not have the pinned sha256."""


class PatchFailed(DriverError):
    """A patch of a series does not apply to the pristine tree."""


class DockerUnavailable(DriverError):
    """No Docker engine answers."""


class ImageBuildFailed(DriverError):
    """docker build of a cell or the base image failed."""


class PerfNotPermitted(DriverError):
    """perf_event_open is refused inside the container."""

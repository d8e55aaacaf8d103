"""`docker build` of a prepared build context with the Docker SDK, and what every image maker here shares:
whether an image exists, and where build contexts and root file systems are staged.

An image is tagged only when its build succeeds.  The build's output goes to results/logs/build-<tag>.log with a
heartbeat and the Step lines on the console (cpython_perf.progress; every line with --verbose); a failure's
message has the log's tail.
"""

from __future__ import annotations

from pathlib import Path

from .. import progress
from ..errors import ImageBuildFailed
from ..source import sources


def docker_build(client, ctx: Path, tag: str, log, no_cache: bool = False, labels: dict[str, str] | None = None,
                 container_limits: dict | None = None) -> str:
    """Build the context directory ctx and tag the image as tag, only on success; labels are added to the image
    after the Dockerfile's own; container_limits: the build containers' (a CPU set).  The image's id."""
    image_id = None
    with progress.Progress(f"docker build {tag}", progress.log_path(f"build-{tag}"), log) as step:
        try:
            stream = client.api.build(path=str(ctx), tag=tag, rm=True, forcerm=True, decode=True, pull=False,
                                      nocache=no_cache, labels=labels or None,
                                      container_limits=container_limits)
            for chunk in stream:
                if "stream" in chunk:
                    for line in chunk["stream"].splitlines():
                        step.line(line, show=line.startswith("Step "))
                if "aux" in chunk and "ID" in chunk["aux"]:
                    image_id = chunk["aux"]["ID"]
                if "error" in chunk:
                    step.line(chunk["error"].rstrip())
                    step.ok = False
                    raise ImageBuildFailed(f"docker build of {tag} failed: {chunk['error'].strip()}\n"
                                           + step.failure())
        except ImageBuildFailed:
            raise
        except Exception as exc:
            step.ok = False
            raise ImageBuildFailed(f"docker build of {tag} failed: {exc}\n{step.failure()}") from None
    return image_id or tag


def image_exists(client, ref: str) -> bool:
    import docker.errors

    try:
        client.images.get(ref)
        return True
    except docker.errors.ImageNotFound:
        return False


def scratch_dir() -> str:
    """Where build contexts and root file systems are staged: beside the source cache (~/.cache/cpython-perf),
    on the disk that holds the tarballs rather than a small /tmp."""
    cache = sources.default_cache_dir().parent
    cache.mkdir(parents=True, exist_ok=True)
    return str(cache)

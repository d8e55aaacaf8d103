"""Published cell images: an image registry as a store of built images, looked up by inputs digest.

A cell image is published as `<registry>/cpython-perf:<cell>-<inputs digest>` (published_ref), the digest
being the label the driver puts on every cell image (labels.INPUTS_LABEL): whoever computes the same inputs
from a checkout finds the same tag.  `build CELL` with a registry (`--registry REF` or $CPYTHON_PERF_REGISTRY)
uses a current local image as it is, else pulls the published tag, checks its inputs label and tags it
`cpython-perf:<cell>` ("pulled ... instead of building"); where the registry does not answer or has no such
tag it says so in one line and builds.  `push CELL` publishes the current local image under that tag.

The registry is a host[:port]/path prefix, e.g. 127.0.0.1:5000/cpython-perf (a local registry) or, in the
project's GitHub workflow, GitHub's container registry under the repository's owner (.github/workflows/).
There is no default: without one nothing is pulled or pushed.
"""

from __future__ import annotations

import os
import re

from ..errors import DriverError, RuntimeFailure
from .context import BuildContext
from .labels import INPUTS_LABEL
from ..matrix import IMAGE_REPOSITORY

REGISTRY_ENV = "CPYTHON_PERF_REGISTRY"
EXAMPLE = "127.0.0.1:5000/cpython-perf or registry.example.org/owner"
MAX_TAG = 128   # the distribution spec's limit on a tag's length
# host[:port] then path components, lowercase, as the distribution spec's reference grammar has them
_HOST = r"(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*|\[[0-9a-f:]+\])(?::[0-9]+)?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REGISTRY = re.compile(rf"({_HOST})((?:/{_COMPONENT})*)")


class PushFailed(RuntimeFailure):
    """The registry refused a push or did not answer."""


def check_registry(value: str, where: str = "--registry") -> str:
    """A registry prefix as given, checked: host[:port][/path], lowercase, no scheme, no tag; the host must be
    named (a bare `name` would make docker take Docker Hub)."""
    text = value.strip().rstrip("/")
    fix = f"give host[:port][/path], e.g. {EXAMPLE}"
    if "://" in text:
        raise DriverError(f"{where} {value!r}: a registry is named without a scheme; {fix}")
    match = _REGISTRY.fullmatch(text)
    if not match:
        raise DriverError(f"{where} {value!r} is not a registry reference (lowercase host[:port][/path], no tag, "
                          f"no digest); {fix}")
    host = match.group(1)
    if not ("." in host or ":" in host or host == "localhost"):
        raise DriverError(f"{where} {value!r} names no registry host ({host!r} would be a Docker Hub account): "
                          f"{fix}")
    return text


def configured_registry(value: str | None = None, environ=None) -> str | None:
    """The registry to use: value (--registry), else $CPYTHON_PERF_REGISTRY, else None (no registry)."""
    environ = os.environ if environ is None else environ
    if value is not None and value.strip():
        return check_registry(value)
    if environ.get(REGISTRY_ENV, "").strip():
        return check_registry(environ[REGISTRY_ENV], f"${REGISTRY_ENV}")
    return None


def published_tag(cell_name: str, digest: str) -> str:
    """`cpython-perf:<cell>-<inputs digest>`: a cell image's repository and tag in a registry (the CI plan's
    registry_tag of a cell image)."""
    if not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise DriverError(f"{digest!r} is not an inputs digest (64 hex digits)")
    tag = f"{cell_name}-{digest}"
    if len(tag) > MAX_TAG:
        raise DriverError(f"the tag {tag} is longer than a registry allows ({MAX_TAG})")
    return f"{IMAGE_REPOSITORY}:{tag}"


def published_ref(registry: str, cell_name: str, digest: str) -> str:
    """`<registry>/cpython-perf:<cell>-<inputs digest>`: the tag a cell image of those inputs is published as."""
    return f"{registry}/{published_tag(cell_name, digest)}"


def _split(ref: str) -> tuple[str, str]:
    repository, _, tag = ref.rpartition(":")
    return repository, tag


def _why(exc: Exception) -> str:
    """The first line of a Docker error, the daemon's own explanation where there is one."""
    text = str(getattr(exc, "explanation", None) or exc)
    return text.strip().splitlines()[0][:300] if text.strip() else type(exc).__name__


def pull_published(client, inputs: BuildContext, registry: str, log=print, local: str | None = None) -> bool:
    """Pull the image published for inputs and tag it local (default: the cell's own tag).  True when pulled and
    its inputs label is inputs.digest; False, saying why in one line, when the registry does not answer, has no
    such tag or holds an image of other inputs under it (then nothing is tagged)."""
    import docker.errors

    local = local or inputs.cell.image
    ref = published_ref(registry, inputs.cell.name, inputs.digest)
    repository, tag = _split(ref)
    try:
        image = client.images.pull(repository, tag=tag)
    except docker.errors.NotFound as exc:
        log(f"no published image {ref} ({_why(exc)}); building {local} locally")
        return False
    except Exception as exc:   # APIError: the daemon could not reach the registry; requests' errors: no daemon answer
        log(f"registry {registry} did not answer ({_why(exc)}); building {local} locally")
        return False
    found = (image.labels or {}).get(INPUTS_LABEL)
    if found != inputs.digest:
        _untag(client, ref)
        log(f"{ref} carries inputs {found or 'none'}, not {inputs.digest}: not used; building {local} locally")
        return False
    image.tag(*_split(local))
    _untag(client, ref)   # the image is the local tag's now, as a build's is: a stale one is left dangling, not kept
    log(f"pulled {ref} (inputs {inputs.digest}) instead of building")
    return True


def push_published(client, inputs: BuildContext, registry: str, log=print, local: str | None = None) -> str:
    """Push the current local image of inputs (default: the cell's own tag) as published_ref; return
    `<repository>@<manifest digest>`.  An image missing or of other inputs is an error (never published under
    a digest it was not built from); so is a registry that refuses it or does not answer."""
    import docker.errors

    local = local or inputs.cell.image
    build = f"python -m cpython_perf build {inputs.cell.name}"
    try:
        image = client.images.get(local)
    except docker.errors.ImageNotFound:
        raise DriverError(f"{local} does not exist: build it first ({build})") from None
    found = (image.labels or {}).get(INPUTS_LABEL)
    if found != inputs.digest:
        raise DriverError(f"{local} is stale: its inputs label is {found or 'missing'}, this checkout's inputs are "
                          f"{inputs.digest}; build it first ({build})")
    ref = published_ref(registry, inputs.cell.name, inputs.digest)
    repository, tag = _split(ref)
    image.tag(repository, tag)
    manifest = None
    try:
        for chunk in client.images.push(repository, tag=tag, stream=True, decode=True):
            if "error" in chunk:
                raise PushFailed(f"pushing {ref} failed: {chunk['error'].strip()}")
            manifest = (chunk.get("aux") or {}).get("Digest") or manifest
    except PushFailed:
        raise
    except Exception as exc:
        raise PushFailed(f"pushing {ref} failed: {_why(exc)}") from None
    finally:
        _untag(client, ref)
    if not manifest:
        raise PushFailed(f"pushing {ref}: the registry reported no manifest digest")
    log(f"pushed {local} as {ref} ({manifest})")
    return f"{repository}@{manifest}"


def _untag(client, ref: str) -> None:
    import docker.errors

    try:
        client.images.remove(ref, noprune=True)
    except docker.errors.APIError:
        pass

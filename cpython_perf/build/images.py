"""Build the base image and the per-cell images with the Docker SDK.

Base image, two ways from one package list (docker/base-packages.txt):
  registry   FROM debian:<suite>-slim + apt-get install, where an image registry answers;
  bootstrap  mmdebstrap --variant=apt --include=<list> + `docker import`, where none does.
`auto` uses the registry if debian:<suite>-slim is present or can be pulled.

A foreign arch (aarch64) has its own base image, always bootstrapped with
mmdebstrap --architectures=<arch> (docker/base-packages-<arch>.txt), and its
cells are cross-compiled on the host base (docker/cell-cross.Dockerfile.j2)
with the interpreter of a host cell of the same version as the build Python.
A non-host arch the host kernel runs natively (i386) has its own base image
too, bootstrapped the same way from the host's list (render.native_base_packages),
and its cells are built inside it like the host's (docker/cell.Dockerfile.j2).

Cell images are tagged cpython-perf:<cell> only when `docker build` succeeds,
and carry a label with the digest of every input (Dockerfile, build script,
tarball hash, patches, additions), so a stale image is never taken for the
current one.  Labels that describe the build rather than its inputs (the
project's repository, its git revision: build_labels) are given to `docker
build` beside the Dockerfile, never rendered into it, so that a new commit
which changes no input keeps the digest, and an image pulled from a registry
(cpython_perf.build.registry) says which revision built it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .. import host, progress
from . import render
from ..source import patches, sources
from ..errors import DriverError, ImageBuildFailed
from ..matrix import ARCH_FACTS, HOST_ARCH, PROJECT_ROOT, Cell, Matrix, cannot_build_reason, runs_natively

BASE_MODE_ENV = "CPYTHON_PERF_BASE_MODE"
BASE_MODES = ("auto", "registry", "bootstrap")
INPUTS_LABEL = "org.cpython-perf.inputs"
# Build-time labels (build_labels): OCI's annotations of where the image comes from, and what CPython source
# and patch series are inside
SOURCE_LABEL = "org.opencontainers.image.source"
REVISION_LABEL = "org.opencontainers.image.revision"
CPYTHON_URL_LABEL = "org.cpython-perf.cpython.url"
CPYTHON_SHA256_LABEL = "org.cpython-perf.cpython.sha256"
SERIES_LABEL = "org.cpython-perf.series.sha256"
# The project's repository URL for SOURCE_LABEL; where unset, GitHub Actions' $GITHUB_SERVER_URL/$GITHUB_REPOSITORY,
# and where neither is set the label is left out (the driver names no repository host of its own)
SOURCE_ENV = "CPYTHON_PERF_IMAGE_SOURCE"
ADDITIONS_ROOT = PROJECT_ROOT / "Python-additions"


# --------------------------------------------------------------------------
# base image


def ensure_base_image(client, suite: str, mode: str | None = None, log=print) -> str:
    """Return the tag of the base image, creating it if it does not exist."""
    packages = render.base_packages()
    tag = render.host_base_image_tag(suite)
    if _image_exists(client, tag):
        return tag
    mode = mode or os.environ.get(BASE_MODE_ENV, "auto")
    if mode not in BASE_MODES:
        raise DriverError(f"base image mode {mode!r} is not one of {', '.join(BASE_MODES)} (set by {BASE_MODE_ENV} or --base-mode)")
    if mode == "auto":
        mode = "registry" if _registry_base_available(client, suite, log) else "bootstrap"
    started = time.monotonic()
    if mode == "registry":
        dockerfile = render.render_base_dockerfile(suite, packages)
        with tempfile.TemporaryDirectory(prefix="cpython-perf-base-") as ctx:
            Path(ctx, "Dockerfile").write_text(dockerfile)
            _docker_build(client, Path(ctx), tag, log)
    else:
        _bootstrap_base(client, suite, packages, tag, log)
    log(f"base image {tag} ready ({mode} mode, {time.monotonic() - started:.0f} s)")
    return tag


def _registry_base_available(client, suite: str, log) -> bool:
    ref = f"debian:{suite}-slim"
    if _image_exists(client, ref):
        return True
    try:
        client.images.pull("debian", tag=f"{suite}-slim")
        return True
    except Exception as exc:
        first = str(exc).splitlines()[0][:200]
        log(f"no image registry answers ({first}); bootstrapping the base image with mmdebstrap")
        return False


def ensure_arch_base_image(client, suite: str, arch: str, log=print) -> str:
    """The base image of a non-host arch's cells, bootstrapped with mmdebstrap --architectures if missing:
    under qemu-user for a foreign arch, natively for one the host kernel runs (i386 on x86_64).  The host's
    own arch: its base (ensure_base_image)."""
    if arch == HOST_ARCH:
        return ensure_base_image(client, suite, log=log)
    facts = ARCH_FACTS[arch]
    tag = render.arch_base_image_tag(suite, arch)
    if _image_exists(client, tag):
        return tag
    if not runs_natively(arch):
        host.ensure_binfmt(facts, log)
    started = time.monotonic()
    _bootstrap_base(client, suite, render.arch_base_packages(arch), tag, log, debian_arch=facts.debian)
    log(f"base image {tag} ready (bootstrap mode, {arch}, {time.monotonic() - started:.0f} s)")
    return tag


def _bootstrap_base(client, suite: str, packages: list[str], tag: str, log, debian_arch: str | None = None,
                    extra_suites: tuple[str, ...] = ()) -> None:
    """mmdebstrap suite (and extra_suites of the same archive, e.g. bookworm-backports) from the Debian archive
    of sources.debian_archive_uri(), then `docker import` as tag."""
    host.ensure_commands({"mmdebstrap": "mmdebstrap"}, log)
    repository, _, version = tag.partition(":")
    with tempfile.TemporaryDirectory(prefix="cpython-perf-rootfs-", dir=_scratch_dir()) as tmp:
        tar = Path(tmp) / "rootfs.tar"
        arch_option = [f"--architectures={debian_arch}"] if debian_arch else []
        cmd = ["mmdebstrap", "--variant=apt", *arch_option, f"--include={','.join(packages)}",
               *mmdebstrap_archive_args(suite, sources.debian_archive_uri(), extra_suites, str(tar))]
        log("$ " + " ".join(cmd))
        with progress.Progress(f"mmdebstrap {tag}", progress.log_path(f"mmdebstrap-{tag}"), log) as step:
            rc = step.run(cmd)
            step.ok = rc == 0
        if rc != 0:
            raise ImageBuildFailed(f"mmdebstrap failed (exit {rc}); {step.failure()}")
        log(f"importing {tar.stat().st_size // (1 << 20)} MiB rootfs as {tag}")
        client.api.import_image_from_file(str(tar), repository=repository, tag=version)
    if not _image_exists(client, tag):
        raise ImageBuildFailed(f"docker import did not create {tag}")


def mmdebstrap_archive_args(suite: str, uri: str | None, extra_suites=(), target: str = "rootfs.tar") -> list[str]:
    """mmdebstrap's suite, target and mirror arguments.  With no archive named, no mirror is given: mmdebstrap
    then takes its default archive for a Debian suite, and the extra suites are added to the sources list it
    wrote (a setup hook, before anything is downloaded) with that list's own archive."""
    if uri is not None:
        return [suite, target, f"deb {uri} {suite} main", *(f"deb {uri} {extra} main" for extra in extra_suites)]
    hooks = [f"--setup-hook=uri=$(awk '$1 == \"deb\" && $3 == \"{suite}\" {{print $2; exit}}' "
             f"\"$1/etc/apt/sources.list\") && [ -n \"$uri\" ] && "
             f"echo \"deb $uri {extra} main\" >> \"$1/etc/apt/sources.list\"" for extra in extra_suites]
    return [*hooks, suite, target]


def _scratch_dir() -> str | None:
    cache = sources.default_cache_dir().parent
    cache.mkdir(parents=True, exist_ok=True)
    return str(cache)


def _image_exists(client, ref: str) -> bool:
    import docker.errors

    try:
        client.images.get(ref)
        return True
    except docker.errors.ImageNotFound:
        return False


# --------------------------------------------------------------------------
# cell images


@dataclass(frozen=True)
class BuildContext:
    """The build stage's value for a cell: everything its image is made from (the source and the series the
    source stage handed over, the base images, the rendered Dockerfile) and the inputs digest of them all, which
    labels the image (INPUTS_LABEL) and names it in a registry."""

    cell: Cell
    base_tag: str
    source: sources.VerifiedSource
    series: patches.CheckedSeries
    digest: str
    # a cross-compiled cell: its arch's base image, and the context of the host
    # cell whose interpreter is the build Python
    target_base_tag: str = ""
    build_python: "BuildContext | None" = None

    host: str = HOST_ARCH   # the arch of the machine that builds it
    rendered: str = ""      # the Dockerfile as built, with the digest label (build_context renders it once)

    @property
    def tarball(self) -> Path:
        return self.source.tarball

    @property
    def patches(self) -> list[patches.Patch]:
        return list(self.series.patches)

    def dockerfile(self, digest: str = "unset", variation: render.BuildVariation | None = None) -> str:
        return render.render_cell_dockerfile(
            self.cell, self.base_tag, digest, target_base_image=self.target_base_tag,
            build_python_image=self.build_python.cell.image if self.build_python else "", host=self.host,
            variation=variation)


def cell_inputs(cell: Cell, suite: str, cache_dir: Path | None = None, log=print,
                matrix: Matrix | None = None, *, fetch: bool = True, host: str | None = None) -> BuildContext:
    """The source stage and the build context of a cell, one after the other: its source fetched and verified
    (may raise SourceUnavailable, HashMismatch, SignatureError), its series checked on it (PatchFailed), then its
    Dockerfile rendered and its inputs digested (build_context).

    A cross-compiled cell's inputs include its build Python cell's (matrix is
    needed to find it), so that a change there rebuilds it too.  The tarball
    enters the digest by its pinned sha256, so fetch=False (the CI plan,
    cpython_perf.ci.plan) gives the same digest without fetching or applying anything;
    tarball is then only the file's name.  host: the arch of the machine that builds it (default: this one;
    the plan asks for the runner's): a cell built natively and the same cell cross-compiled have different
    Dockerfiles, so different digests.  A cell the host cannot build is an error saying where it builds.
    """
    host = host or HOST_ARCH
    why_not = cannot_build_reason(cell.arch, host)
    if why_not:
        raise DriverError(f"{cell.name}: {why_not}")
    if fetch:   # the source stage: the verified tarball, then the series checked on it
        source = sources.verified_source(cell.recipe, cache_dir, log)
        series = patches.check_cell_series(patches.read_cell_series(cell.series, cell.additions), source,
                                           ADDITIONS_ROOT, log)
    else:       # the pins and the series' bytes are all the inputs digest needs
        source = sources.pinned_source(cell.recipe)
        series = patches.read_cell_series(cell.series, cell.additions)
    build_python = None
    if cell.foreign_on(host):
        if matrix is None:
            raise DriverError(f"{cell.name} is cross-compiled: the matrix is needed to find its build Python cell")
        build_python = cell_inputs(matrix.build_python_cell_on(cell, host), suite, cache_dir, log, matrix,
                                   fetch=fetch, host=host)
    return build_context(cell, suite, source, series, build_python, host)


def build_context(cell: Cell, suite: str, source: sources.VerifiedSource, series: patches.CheckedSeries,
                  build_python: BuildContext | None = None, host: str | None = None) -> BuildContext:
    """The cell's build context: its base images, its Dockerfile rendered from docker/, and the inputs digest
    over the Dockerfile, the build Python's digest (a cross build), the build script, the tarball's pinned
    sha256, the series file, each patch and each addition."""
    host = host or HOST_ARCH
    base_tag = render.build_base_image_tag(suite, cell.arch, host)
    target_base_tag = render.foreign_base_image_tag(suite, cell.arch, host) if cell.foreign_on(host) else ""
    undigested = BuildContext(cell, base_tag, source, series, "", target_base_tag, build_python, host)
    digest = hashlib.sha256()
    for part in (
        undigested.dockerfile().encode(),
        *([build_python.digest.encode()] if build_python else []),
        render.BUILD_SCRIPT.read_bytes(),
        cell.recipe.sha256.encode(),
        series.series.read_bytes() if series.series else b"",
        *(p.path.read_bytes() for p in series.patches),
        *((rel.encode() + (ADDITIONS_ROOT / rel).read_bytes()) for rel in series.additions),
    ):
        digest.update(hashlib.sha256(part).digest())
    digested = dataclasses.replace(undigested, digest=digest.hexdigest())
    return dataclasses.replace(digested, rendered=digested.dockerfile(digested.digest))


def series_digest(cell: Cell) -> str | None:
    """The sha256 of a cell's patch series as `sha256sum series $(sed 's/#.*//' series) | sha256sum` computes it
    in the series' directory: the series file, then each patch it names, in order.  None: a cell without one."""
    if not cell.series:
        return None
    lines = [f"{hashlib.sha256(cell.series.read_bytes()).hexdigest()}  series\n"]
    lines += [f"{hashlib.sha256(p.path.read_bytes()).hexdigest()}  {p.name}\n" for p in patches.read_series(cell.series)]
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def project_source(environ=None) -> str | None:
    """The project's repository URL (SOURCE_LABEL): $CPYTHON_PERF_IMAGE_SOURCE, or GitHub Actions' repository."""
    environ = os.environ if environ is None else environ
    if environ.get(SOURCE_ENV, "").strip():
        return environ[SOURCE_ENV].strip()
    server, repository = environ.get("GITHUB_SERVER_URL", ""), environ.get("GITHUB_REPOSITORY", "")
    return f"{server.rstrip('/')}/{repository}" if server and repository else None


def project_revision(environ=None, root: Path = PROJECT_ROOT) -> str | None:
    """The git revision the image is built from (REVISION_LABEL): GitHub Actions' $GITHUB_SHA, or the checkout's
    HEAD, with `-dirty` appended (as `git describe --dirty` does) where tracked files differ from it.  None where
    neither is known (no git, not a checkout)."""
    environ = os.environ if environ is None else environ
    if environ.get("GITHUB_SHA", "").strip():
        return environ["GITHUB_SHA"].strip()
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--verify", "-q", "HEAD"], capture_output=True,
                              text=True, timeout=30)
        if head.returncode != 0 or not head.stdout.strip():
            return None
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    dirty = "-dirty" if status.returncode != 0 or status.stdout.strip() else ""
    return head.stdout.strip() + dirty


def build_labels(inputs: BuildContext, environ=None, revision: str | None = None) -> dict[str, str]:
    """The labels `docker build` adds to a cell image beside its Dockerfile's (cell, modes, inputs digest): the
    project's repository and git revision where known, the CPython source's URL and sha256, the series' digest.
    None of them enters the inputs digest: the revision changes with every commit, the source and series are in
    it already (the tarball by its sha256)."""
    cell = inputs.cell
    labels = {CPYTHON_URL_LABEL: cell.recipe.url, CPYTHON_SHA256_LABEL: cell.recipe.sha256}
    series = series_digest(cell)
    if series:
        labels[SERIES_LABEL] = series
    source = project_source(environ)
    if source:
        labels[SOURCE_LABEL] = source
    revision = revision if revision is not None else project_revision(environ)
    if revision:
        labels[REVISION_LABEL] = revision
    return labels


def image_is_current(client, inputs: BuildContext) -> bool:
    import docker.errors

    try:
        image = client.images.get(inputs.cell.image)
    except docker.errors.ImageNotFound:
        return False
    return (image.labels or {}).get(INPUTS_LABEL) == inputs.digest


def prepare_context(inputs: BuildContext, ctx: Path, variation: render.BuildVariation | None = None) -> str:
    """Fill a build context directory; return the rendered Dockerfile."""
    cell = inputs.cell
    varied = variation is not None or not inputs.rendered
    dockerfile = inputs.dockerfile(inputs.digest, variation) if varied else inputs.rendered
    (ctx / "Dockerfile").write_text(dockerfile)
    shutil.copy2(render.BUILD_SCRIPT, ctx / "build-cpython.sh")
    try:
        os.link(inputs.tarball, ctx / cell.recipe.filename)
    except OSError:
        shutil.copy2(inputs.tarball, ctx / cell.recipe.filename)
    series = inputs.series
    if series.series:
        (ctx / "patches").mkdir()
        shutil.copy2(series.series, ctx / "patches" / "series")
        for p in series.patches:
            shutil.copy2(p.path, ctx / "patches" / p.name)
    if series.additions:
        patches.copy_additions(series.additions, ADDITIONS_ROOT, ctx / "additions")
    return dockerfile


def build_cell_image(client, inputs: BuildContext, suite: str, log=print, base_mode: str | None = None,
                     no_cache: bool = False, pull=None, *, tag: str | None = None,
                     variation: render.BuildVariation | None = None, container_limits: dict | None = None) -> str:
    """The image stage: from a build context whose source was verified and whose series was checked on it
    (cell_inputs with fetch), make sure the base exists, build the cell image, put its SBOM into it
    (attach_sbom) and tag it (tag: another tag than the cell's image, e.g. a reproducibility build's;
    variation and container_limits: a build under other conditions, cpython_perf.build.reproducibility).  pull: a
    function of BuildContext that fetches the image of those inputs from a registry, True where it did
    (pipeline.py's, with cpython_perf.build.registry): a cross build's missing build Python image is pulled with it
    before it is built."""
    cell = inputs.cell
    if not inputs.source.verified or inputs.series.applied is None:
        raise DriverError(f"{cell.name}: its build context was made without fetching the source (fetch=False); "
                          "a build needs the source verified and its series checked on it first")
    if inputs.host != HOST_ARCH:
        raise DriverError(f"{cell.name}: its inputs were computed for an {inputs.host} host; this one is {HOST_ARCH}")
    if cell.arch == HOST_ARCH or cell.foreign:
        ensure_base_image(client, suite, base_mode, log)   # host cells and cross builds run on the host's base
    if cell.foreign:
        # the build Python's image first (it is a stage of this build)
        if not image_is_current(client, inputs.build_python) and not (pull and pull(inputs.build_python)):
            log(f"{inputs.build_python.cell.image} (the build Python of {cell.name}) is missing or stale; building it")
            build_cell_image(client, inputs.build_python, suite, log, base_mode, pull=pull)
    if cell.arch != HOST_ARCH:
        # the arch's own base: what a foreign cell is installed on, what a native one (i386) is built in
        ensure_arch_base_image(client, suite, cell.arch, log)
    tag = tag or cell.image
    from . import sbom

    # what the SBOM says of the inputs is read now, with the build context: the same bytes as the build's
    facts = sbom.cell_facts(inputs, [], distro=sbom.distro_of(suite))
    with tempfile.TemporaryDirectory(prefix=f"cpython-perf-{cell.name}-", dir=_scratch_dir()) as ctx:
        prepare_context(inputs, Path(ctx), variation)
        _docker_build(client, Path(ctx), tag, log, no_cache, labels=build_labels(inputs),
                      container_limits=container_limits)
    return attach_sbom(client, inputs, tag, suite, log, save=tag == cell.image, facts=facts)


def attach_sbom(client, inputs: BuildContext, tag: str, suite: str, log=print, save: bool = True,
                facts=None) -> str:
    """Put the image's SBOM (cpython_perf.build.sbom, CycloneDX JSON) at sbom.IMAGE_SBOM_PATH, in a layer of its own
    on top of the built image, with the label sbom.SBOM_LABEL = its sha256, and tag the result as tag; save:
    also write it to results/sbom/<cell>.cdx.json.

    The SBOM is not one of the inputs: it is made from them (the source, the series, the additions, the
    flags) and from the packages the image holds, after the build, so the inputs digest (the label that says
    whether an image is current) stays a function of the inputs alone, and the build layers are cached as
    before.  It is deterministic: the same image gives the same file, and this layer is then Docker's cached
    one.  facts: the SBOM's facts of the inputs read before the build (sbom.cell_facts), completed here with
    the image's packages."""
    import dataclasses

    from . import sbom

    packages = sbom.image_packages(client, tag)
    if facts is None:
        facts = sbom.cell_facts(inputs, packages, distro=sbom.distro_of(suite))
    facts = dataclasses.replace(facts, packages=tuple(packages))
    text = sbom.cell_bom(facts)
    if save:
        out = sbom.write(text, sbom_results_path(inputs.cell.name))
        log(f"SBOM of {tag}: {out} (CycloneDX {sbom.SPEC_VERSION}, valid; {len(packages)} Debian packages, "
            f"{len(facts.patches)} patches, {len(facts.additions)} additions)")
    with tempfile.TemporaryDirectory(prefix=f"cpython-perf-sbom-{inputs.cell.name}-", dir=_scratch_dir()) as ctx:
        sbom.attach_archive(text, facts.source_date_epoch, Path(ctx) / sbom.ATTACH_ARCHIVE)
        (Path(ctx) / "Dockerfile").write_text(sbom.attach_dockerfile(tag, sbom.label_value(text)))
        return _docker_build(client, Path(ctx), tag, log)


def sbom_results_path(cell_name: str) -> Path:
    return PROJECT_ROOT / "results" / "sbom" / f"{cell_name}.cdx.json"


def _docker_build(client, ctx: Path, tag: str, log, no_cache: bool = False, labels: dict[str, str] | None = None,
                  container_limits: dict | None = None) -> str:
    """Run docker build, tag only on success; labels are added to the image after the Dockerfile's own.  Its output goes to results/logs/build-<tag>.log with a heartbeat
    and the Step lines on the console (cpython_perf.progress; every line with --verbose); a failure's message
    has the log's tail."""
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

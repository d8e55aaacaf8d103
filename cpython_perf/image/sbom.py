"""Software bills of materials (CycloneDX 1.6 JSON) of a cell image, and the pieces a packaging lane's is made of.

Written with cyclonedx-python-lib (the CycloneDX project's own library) and checked, every time one is written,
with its JSON-schema validator (cyclonedx.validation.json.JsonStrictValidator): an SBOM that does not validate
is an error, never written.  CycloneDX rather than SPDX because its component model has the pedigree of a
modified component (ancestors: the pristine release; patches: each of the series, typed backport / cherry-pick /
unofficial, with its diff's path) that a patched CPython is.

A cell image's SBOM (`python -m cpython_perf sbom CELL`):
  metadata.component  the image (type container): cell, variant, arch, CFLAGS, configure arguments, the variant's
                      environment, the inputs digest, the base image, the build script's and Dockerfile's sha256
  cpython             CPython <version> as built: pedigree.ancestors the python.org release (its URL and sha256),
                      pedigree.patches every patch of the series, in order
  files               each patch (its path, sha256, DEP-3 Description/Origin/Forwarded/Bug/Applied-Upstream/
                      Last-Update as properties) and each Python-additions file (path, sha256, the additions'
                      DEP-3 origin)
  base packages       every Debian package installed in the image (dpkg's status database: name, version,
                      arch, source), as pkg:deb purls

A packaging lane's SBOM is made in cpython_perf/lanes/sbom.py from the same pieces (the patch files,
the package components, the document and its validation).

Both are deterministic (a function of what they describe): every bom-ref is named, the serial number is a
UUID derived from the document's content, and the timestamp is SOURCE_DATE_EPOCH (a cell: the source release's
date, the newest member of its tarball; a lane: the time its packages were built).
"""

from __future__ import annotations

import hashlib
import io
import re
import tarfile
import tempfile
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..errors import DriverError
from ..matrix import PROJECT_ROOT
from ..source import patches
from ..source.sources import sha256_of
from .docker_build import docker_build, scratch_dir

SPEC_VERSION = "1.6"
IMAGE_SBOM_PATH = "/opt/cpython/share/sbom/cpython.cdx.json"
SBOM_LABEL = "org.cpython-perf.sbom"          # "sha256:<hex>" of the file at IMAGE_SBOM_PATH
PROPERTY = "cpython-perf"                     # namespace of this project's CycloneDX properties
# purl namespace of the cells' base images' packages: they are Debian's (matrix.yaml base_suite); a packaging
# lane's packages take their distribution's (matrix.yaml distributions.<key>.purl_namespace)
BASE_NAMESPACE = "debian"
DEP3_PROPERTIES = ("Description", "Origin", "Forwarded", "Bug", "Applied-Upstream", "Author", "Last-Update")
INSTALL_HINT = "pip install 'cyclonedx-python-lib[json-validation]>=11,<12' (a dependency of cpython-perf)"
SERIES_NOTE = ("The patches are applied in the order of their files' cpython-perf:series-position property "
               "(CycloneDX keeps pedigree.patches as a set).")
# DEP-3 Origin's first word -> CycloneDX patch type
PATCH_TYPES = {"backport": "backport", "upstream": "cherry-pick"}


def _cdx():
    """The cyclonedx modules; a clear error when the library is missing."""
    try:
        from cyclonedx import model
        from cyclonedx.model import bom, component
        from cyclonedx.output.json import JsonV1Dot6
        from cyclonedx.schema import SchemaVersion
        from cyclonedx.validation.json import JsonStrictValidator
    except ImportError as exc:
        raise DriverError(f"writing an SBOM needs cyclonedx-python-lib with its JSON validator ({exc}): "
                          f"{INSTALL_HINT}") from None
    return model, bom, component, JsonV1Dot6, SchemaVersion, JsonStrictValidator


# --------------------------------------------------------------------------
# facts gathered from files


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class DebPackage:
    name: str
    version: str
    arch: str
    source: str = ""


def parse_dpkg_status(text: str) -> list[DebPackage]:
    """The installed packages of a dpkg status database (/var/lib/dpkg/status), sorted by name and arch: what
    `dpkg-query -W` lists (stanzas whose Status is `install ok installed`)."""
    found = []
    for stanza in re.split(r"\n\s*\n", text.strip()):
        fields = {}
        for line in stanza.splitlines():
            m = re.match(r"([A-Za-z0-9-]+):\s*(.*)$", line)
            if m and not line.startswith((" ", "\t")):
                fields[m.group(1)] = m.group(2).strip()
        if fields.get("Status") != "install ok installed" or "Package" not in fields:
            continue
        source = fields.get("Source", "").split(" ")[0]
        found.append(DebPackage(fields["Package"], fields.get("Version", ""), fields.get("Architecture", ""),
                                source if source != fields["Package"] else ""))
    return sorted(found, key=lambda p: (p.name, p.arch))


def image_packages(client, image: str) -> list[DebPackage]:
    """The Debian packages installed in an image, read from its dpkg database without running anything in it
    (so the same for a foreign arch's image)."""
    container = client.containers.create(image, command=["true"])
    try:
        stream, _ = container.get_archive("/var/lib/dpkg/status")
        data = b"".join(stream)
    finally:
        container.remove(force=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = tar.next()
        status = tar.extractfile(member).read().decode("utf-8", "replace")
    return parse_dpkg_status(status)


def source_date_epoch(tarball: Path) -> int:
    """The source release's date: the newest modification time of the tarball's members (what
    docker/build-cpython.sh sets SOURCE_DATE_EPOCH to, from the extracted tree, before anything is added)."""
    newest = 0
    with tarfile.open(tarball) as tar:
        for member in tar:
            newest = max(newest, int(member.mtime))
    if not newest:
        raise DriverError(f"{tarball}: no member with a modification time; cannot date the source")
    return newest


def dep3_fields(text: str) -> list[tuple[str, str]]:
    """A patch header's DEP-3 fields in order, repeated fields (Bug) kept, continuation lines joined."""
    fields: list[tuple[str, str]] = []
    for line in text.splitlines():
        if line.startswith(("---", "diff ", "Index: ")):
            break
        m = re.match(r"([A-Za-z][A-Za-z0-9-]*):\s?(.*)$", line)
        if m and not line.startswith(" "):
            fields.append((patches.DEP3_ALIASES.get(m.group(1), m.group(1)), m.group(2).strip()))
        elif fields and line.startswith(" "):
            key, value = fields[-1]
            fields[-1] = (key, value + "\n" + line.strip())
    return fields


@dataclass(frozen=True)
class PatchFile:
    """One patch of a series: where it is (a path relative to the project, or the lane's quilt form), its
    sha256 and DEP-3 header."""

    path: str
    sha256: str
    fields: tuple[tuple[str, str], ...]

    @classmethod
    def of(cls, path: str, data: bytes) -> "PatchFile":
        return cls(path, sha256_bytes(data), tuple(dep3_fields(data.decode("utf-8", "replace"))))

    def field(self, name: str) -> str:
        return next((v for k, v in self.fields if k == name), "")

    @property
    def patch_type(self) -> str:
        origin = self.field("Origin").split(",")[0].strip().lower()
        return PATCH_TYPES.get(origin, "unofficial")


# --------------------------------------------------------------------------
# building the document


def _purl_deb(name: str, version: str, arch: str, distro: str = "", namespace: str = BASE_NAMESPACE):
    from packageurl import PackageURL

    qualifiers = {"arch": arch} if arch else {}
    if distro:
        qualifiers["distro"] = distro
    return PackageURL(type="deb", namespace=namespace, name=name, version=version, qualifiers=qualifiers)


def _properties(model, pairs) -> list:
    return [model.Property(name=f"{PROPERTY}:{k}", value=str(v)) for k, v in pairs if v not in (None, "")]


def _sha256(model, hexdigest: str):
    return model.HashType(alg=model.HashAlgorithm.SHA_256, content=hexdigest)


def _patch_components(model, component, patch_files: list[PatchFile], ref_prefix: str):
    """(file components, pedigree patches) of a series."""
    files, pedigree_patches = [], []
    for position, p in enumerate(patch_files, 1):
        pairs = [("role", "patch"), ("series-position", position)]
        pairs += [(f"dep3:{k}", v) for k, v in p.fields if k in DEP3_PROPERTIES]
        description = p.field("Description").split("\n")[0] or None
        files.append(component.Component(
            type=component.ComponentType.FILE, name=p.path, bom_ref=f"{ref_prefix}{p.path}",
            description=description, hashes=[_sha256(model, p.sha256)], properties=_properties(model, pairs)))
        pedigree_patches.append(component.Patch(
            type=component.PatchClassification(p.patch_type),
            diff=component.Diff(url=model.XsUri(p.path))))
    return files, pedigree_patches


def _tools(model, component):
    """The tools that wrote the document: this driver and the CycloneDX library."""
    return [component.Component(type=component.ComponentType.APPLICATION, name="cpython-perf",
                                bom_ref="tool:cpython-perf", version=_version("cpython-perf", "0.1.0")),
            component.Component(type=component.ComponentType.LIBRARY, group="CycloneDX",
                                name="cyclonedx-python-lib", bom_ref="tool:cyclonedx-python-lib",
                                version=_version("cyclonedx-python-lib", ""))]


def _version(distribution: str, default: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return default


def _new_bom(main_component, components, timestamp: int, properties=()):
    model, bom_mod, component, *_ = _cdx()
    from cyclonedx.model.tool import ToolRepository

    document = bom_mod.Bom()
    document.metadata.timestamp = datetime.fromtimestamp(timestamp, timezone.utc)
    document.metadata.component = main_component
    document.metadata.tools = ToolRepository(components=_tools(model, component))
    document.metadata.properties = list(properties)
    for c in components:
        document.components.add(c)
    return document


def serialize(document) -> str:
    """The document as CycloneDX 1.6 JSON, with a serial number derived from its content, validated with the
    library's JSON-schema validator (an invalid document raises DriverError naming the problem)."""
    _, _, _, JsonV1Dot6, SchemaVersion, JsonStrictValidator = _cdx()
    document.serial_number = uuid.UUID(int=0)
    provisional = JsonV1Dot6(document).output_as_string(indent=2)
    document.serial_number = uuid.uuid5(uuid.NAMESPACE_URL, "urn:sha256:" + sha256_bytes(provisional.encode()))
    text = JsonV1Dot6(document).output_as_string(indent=2) + "\n"
    problem = validate(text)
    if problem:
        raise DriverError(f"the SBOM written does not validate against CycloneDX {SPEC_VERSION}'s schema: {problem}")
    return text


def validate(text: str) -> str | None:
    """None when text is a valid CycloneDX 1.6 JSON document (the library's strict JSON-schema validator),
    else the first error."""
    _, _, _, _, SchemaVersion, JsonStrictValidator = _cdx()
    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    return None if error is None else str(error)[:2000]


def _package_components(model, component, packages: list[DebPackage], distro: str, scope=None,
                        role: str = "base-image", namespace: str = BASE_NAMESPACE) -> list:
    out = []
    for p in packages:
        purl = _purl_deb(p.name, p.version, p.arch, distro, namespace)
        out.append(component.Component(
            type=component.ComponentType.LIBRARY, name=p.name, version=p.version, purl=purl,
            bom_ref=purl.to_string(), scope=scope,
            properties=_properties(model, [("role", role), ("deb:source", p.source)])))
    return out


def _depends(document, ref_of, dependents) -> None:
    from cyclonedx.model.dependency import Dependency

    document.dependencies.add(Dependency(ref=ref_of, dependencies=[Dependency(ref=d) for d in dependents]))


# --------------------------------------------------------------------------
# a cell image


@dataclass(frozen=True)
class CellFacts:
    """What a cell image's SBOM states, gathered from its inputs (context.BuildContext) and the image."""

    cell: str
    version: str
    variant: str
    arch: str
    cflags: str
    configure_args: tuple[str, ...]
    environment: tuple[tuple[str, str], ...]
    inputs_digest: str
    base_image: str
    source_url: str
    source_file: str
    source_sha256: str
    source_date_epoch: int
    build_script_sha256: str
    dockerfile_sha256: str
    patches: tuple[PatchFile, ...]
    additions: tuple[tuple[str, str], ...]         # (path, sha256)
    additions_fields: tuple[tuple[str, str], ...]  # DEP-3 of the additions (backport-additions.dep3)
    packages: tuple[DebPackage, ...]
    distro: str = ""                               # purl distro qualifier of the base packages, e.g. debian-13


def cell_facts(inputs, packages: list[DebPackage], sde: int | None = None, distro: str = "") -> CellFacts:
    """The facts of a cell image from its context.BuildContext and the packages installed in it."""
    from . import render

    cell = inputs.cell
    recipe = cell.recipe
    patch_files = tuple(PatchFile.of(str(p.path.relative_to(PROJECT_ROOT)), p.path.read_bytes())
                        for p in inputs.patches)
    additions = tuple((f"Python-additions/{rel}", sha256_of(patches.ADDITIONS_ROOT / rel)) for rel in cell.additions)
    header = PROJECT_ROOT / "patches" / "backport-additions.dep3"
    additions_fields = tuple(dep3_fields(header.read_text())) if additions and header.is_file() else ()
    return CellFacts(
        cell=cell.name, version=recipe.version, variant=cell.variant.name, arch=cell.arch, cflags=cell.cflags,
        configure_args=tuple(cell.configure_args()), environment=tuple(cell.variant.environment),
        inputs_digest=inputs.digest, base_image=inputs.target_base_tag or inputs.base_tag,
        source_url=recipe.url, source_file=recipe.filename, source_sha256=recipe.sha256,
        source_date_epoch=sde if sde is not None else source_date_epoch(inputs.tarball),
        build_script_sha256=sha256_of(render.BUILD_SCRIPT),
        dockerfile_sha256=sha256_bytes((inputs.rendered or inputs.dockerfile(inputs.digest)).encode()),
        patches=patch_files, additions=additions, additions_fields=additions_fields, packages=tuple(packages),
        distro=distro)


def cell_bom(facts: CellFacts) -> str:
    """The CycloneDX JSON of a cell image."""
    model, _, component, *_ = _cdx()
    from packageurl import PackageURL

    pristine_purl = PackageURL(type="generic", name="cpython", version=facts.version,
                               qualifiers={"download_url": facts.source_url,
                                           "checksum": f"sha256:{facts.source_sha256}"})
    pristine = component.Component(
        type=component.ComponentType.APPLICATION, group="python.org", name="cpython", version=facts.version,
        bom_ref=f"cpython-release:{facts.version}", purl=pristine_purl, hashes=[_sha256(model, facts.source_sha256)],
        external_references=[model.ExternalReference(type=model.ExternalReferenceType.DISTRIBUTION,
                                                     url=model.XsUri(facts.source_url),
                                                     hashes=[_sha256(model, facts.source_sha256)])],
        properties=_properties(model, [("source-file", facts.source_file)]))
    files, pedigree_patches = _patch_components(model, component, list(facts.patches), "file:")
    addition_files = []
    for path, digest in facts.additions:
        pairs = [("role", "addition")] + [(f"dep3:{k}", v) for k, v in facts.additions_fields if k in DEP3_PROPERTIES]
        addition_files.append(component.Component(
            type=component.ComponentType.FILE, name=path, bom_ref=f"file:{path}", hashes=[_sha256(model, digest)],
            properties=_properties(model, pairs)))
    notes = SERIES_NOTE
    if facts.additions:
        notes = (f"{len(facts.additions)} whole new files (Python-additions/) are copied into the source tree "
                 f"before the patches are applied. {SERIES_NOTE}")
    cpython = component.Component(
        type=component.ComponentType.APPLICATION, name="cpython", version=facts.version,
        bom_ref="cpython", modified=False,
        description=f"CPython {facts.version} built into /opt/cpython ({facts.variant} variant)",
        pedigree=component.Pedigree(ancestors=[pristine], patches=pedigree_patches or None, notes=notes),
        properties=_properties(model, [("cflags", facts.cflags), ("configure-args", " ".join(facts.configure_args)),
                                       ("prefix", "/opt/cpython"), ("source-date-epoch", facts.source_date_epoch)]))
    packages = _package_components(model, component, list(facts.packages), facts.distro)
    image = component.Component(
        type=component.ComponentType.CONTAINER, name="cpython-perf", version=facts.cell, bom_ref="image",
        description=f"cpython-perf:{facts.cell}: CPython {facts.version}, variant {facts.variant}, {facts.arch}",
        properties=_properties(model, [
            ("cell", facts.cell), ("variant", facts.variant), ("arch", facts.arch), ("cflags", facts.cflags),
            ("configure-args", " ".join(facts.configure_args)),
            *((f"env:{k}", v) for k, v in facts.environment),
            ("inputs-digest", facts.inputs_digest), ("base-image", facts.base_image),
            ("build-script:sha256", facts.build_script_sha256), ("dockerfile:sha256", facts.dockerfile_sha256),
            ("sbom-path", IMAGE_SBOM_PATH)]))
    document = _new_bom(image, [cpython, *files, *addition_files, *packages], facts.source_date_epoch)
    _depends(document, image.bom_ref, [cpython.bom_ref, *(p.bom_ref for p in packages)])
    _depends(document, cpython.bom_ref, [f.bom_ref for f in (*files, *addition_files)])
    return serialize(document)


# --------------------------------------------------------------------------
# writing, attaching to an image


def write(text: str, out: Path) -> Path:
    """Write the document atomically (a failure leaves no half-written file)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(text)
    tmp.replace(out)
    return out


def label_value(text: str) -> str:
    return "sha256:" + sha256_bytes(text.encode())


ATTACH_ARCHIVE = "sbom.tar"


def attach_dockerfile(image: str, digest_label: str) -> str:
    """The Dockerfile of the layer that puts the SBOM into the image, on top of the built image."""
    return (f"FROM {image}\n"
            f"ADD {ATTACH_ARCHIVE} /\n"
            f'LABEL {SBOM_LABEL}="{digest_label}"\n')


def attach_archive(text: str, mtime: int, dest: Path) -> None:
    """The tar that ADD unpacks at / : the SBOM file and its directories, every entry root's, dated mtime.
    Its parent (share/) is in it too, so that its modification time is mtime as well, not the time of the
    layer (adding an entry to a directory changes that directory's mtime): the image's /opt/cpython stays
    reproducible (cpython_perf.image.reproducibility)."""
    data = text.encode()
    parts = Path(IMAGE_SBOM_PATH).relative_to("/").parts
    with tarfile.open(dest, "w", format=tarfile.GNU_FORMAT) as tar:
        for depth in (len(parts) - 2, len(parts) - 1):   # share/, share/sbom/
            info = tarfile.TarInfo("/".join(parts[:depth]) + "/")
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, mtime
            tar.addfile(info)
        info = tarfile.TarInfo("/".join(parts))
        info.size, info.mode, info.mtime = len(data), 0o644, mtime
        tar.addfile(info, io.BytesIO(data))


def image_sbom(client, image: str) -> tuple[str | None, str | None]:
    """(label, document text) of the SBOM an image carries; (None, None) when it has none."""
    import docker.errors

    labels = client.images.get(image).labels or {}
    label = labels.get(SBOM_LABEL)
    if not label:
        return None, None
    container = client.containers.create(image, command=["true"])
    try:
        stream, _ = container.get_archive(IMAGE_SBOM_PATH)
        data = b"".join(stream)
    except docker.errors.NotFound:
        return label, None
    finally:
        container.remove(force=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return label, tar.extractfile(tar.next()).read().decode()


def attach_sbom(client, inputs, tag: str, suite: str, log=print, save: bool = True) -> str:
    """The SBOM stage: put the SBOM of image tag, built from inputs (a context.BuildContext), at IMAGE_SBOM_PATH,
    in a layer of its own on top of it, with the label SBOM_LABEL = its sha256, and tag the result as tag; save:
    also write it to results/sbom/<cell>.cdx.json.  The image id.

    The SBOM is not one of the inputs: it is made from them (the source, the series, the additions, the
    flags) and from the packages the image holds, after the build, so the inputs digest (the label that says
    whether an image is current) stays a function of the inputs alone, and the build layers are cached as
    before.  It is deterministic: the same image gives the same file, and this layer is then Docker's cached
    one."""
    packages = image_packages(client, tag)
    facts = cell_facts(inputs, packages, distro=distro_of(suite))
    text = cell_bom(facts)
    if save:
        out = write(text, sbom_results_path(inputs.cell.name))
        log(f"SBOM of {tag}: {out} (CycloneDX {SPEC_VERSION}, valid; {len(packages)} Debian packages, "
            f"{len(facts.patches)} patches, {len(facts.additions)} additions)")
    with tempfile.TemporaryDirectory(prefix=f"cpython-perf-sbom-{inputs.cell.name}-", dir=scratch_dir()) as ctx:
        attach_archive(text, facts.source_date_epoch, Path(ctx) / ATTACH_ARCHIVE)
        (Path(ctx) / "Dockerfile").write_text(attach_dockerfile(tag, label_value(text)))
        return docker_build(client, Path(ctx), tag, log)


def sbom_results_path(cell_name: str) -> Path:
    """results/sbom/<cell>.cdx.json: where a cell image's SBOM is written beside the image's own copy."""
    return PROJECT_ROOT / "results" / "sbom" / f"{cell_name}.cdx.json"


def distro_of(suite: str) -> str:
    """The purl distro qualifier of a base suite's packages (debian-<suite>)."""
    return f"{BASE_NAMESPACE}-{suite}"


# --------------------------------------------------------------------------
# the command: python -m cpython_perf sbom CELL | --lane LANE


def add_arguments(parser) -> None:
    parser.add_argument("cell", nargs="?", help="a cell whose image is built (e.g. 3.13-fp)")
    parser.add_argument("--lane", default=None, help="a packaging lane of matrix.yaml (e.g. bookworm-3.11), from "
                                                    "its built packages instead of a cell")
    parser.add_argument("--packages", default=None, metavar="DIR",
                        help="with --lane: the built output directory (default: the lane's one with-series "
                             "build under ~/.cache/cpython-perf/deb/<lane>/)")
    parser.add_argument("--out", default=None, metavar="FILE",
                        help="where to write it (default: results/sbom/<cell or deb-lane>.cdx.json)")
    parser.add_argument("--attach", action="store_true",
                        help="with a cell: put the SBOM into its image when the image carries none or another "
                             "(a layer on top of it, no rebuild)")

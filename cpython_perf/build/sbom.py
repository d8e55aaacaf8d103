"""Software bills of materials (CycloneDX 1.6 JSON) of a cell image and of a distro lane's built packages.

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

A lane's SBOM (`python -m cpython_perf sbom --lane LANE`), from the lane's built output
(~/.cache/cpython-perf/deb/<lane>/<key>/: the .debs, .changes, .buildinfo and DONE):
  metadata.component  the rebuilt source package, <version>+perf1 (the lane, suite, DEB_BUILD_OPTIONS and flags,
                      the build key); pedigree.ancestors the archive's source package (its .dsc's sha256 and the
                      files the .dsc names); pedigree.patches the quilt form of the series as appended to
                      debian/patches/series
  files               each patch of the quilt form (sha256 of the bytes applied, DEP-3 fields)
  built packages      every .deb with its sha256 (pkg:deb purls)
  build environment   the .buildinfo's Installed-Build-Depends with versions (scope excluded: used to build,
                      not shipped)
The lane's build key is computed again from the .dsc, the series' quilt form, the environment and the build
image: packages built from other inputs (the series changed since) are refused, not described.

Both are deterministic (a function of what they describe): every bom-ref is named, the serial number is a
UUID derived from the document's content, and the timestamp is SOURCE_DATE_EPOCH (a cell: the source release's
date, the newest member of its tarball; a lane: the time its packages were built).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tarfile
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..source import patches
from ..source.sources import sha256_of
from ..errors import DriverError

SPEC_VERSION = "1.6"
IMAGE_SBOM_PATH = "/opt/cpython/share/sbom/cpython.cdx.json"
SBOM_LABEL = "org.cpython-perf.sbom"          # "sha256:<hex>" of the file at IMAGE_SBOM_PATH
PROPERTY = "cpython-perf"                     # namespace of this project's CycloneDX properties
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


def _purl_deb(name: str, version: str, arch: str, distro: str = ""):
    from packageurl import PackageURL

    qualifiers = {"arch": arch} if arch else {}
    if distro:
        qualifiers["distro"] = distro
    return PackageURL(type="deb", namespace="debian", name=name, version=version, qualifiers=qualifiers)


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
                        role: str = "base-image") -> list:
    out = []
    for p in packages:
        purl = _purl_deb(p.name, p.version, p.arch, distro)
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
    """What a cell image's SBOM states, gathered from its inputs (images.CellInputs) and the image."""

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
    """The facts of a cell image from its images.CellInputs and the packages installed in it."""
    from . import render
    from ..matrix import PROJECT_ROOT

    additions_root = PROJECT_ROOT / "Python-additions"

    cell = inputs.cell
    recipe = cell.recipe
    patch_files = tuple(PatchFile.of(str(p.path.relative_to(PROJECT_ROOT)), p.path.read_bytes())
                        for p in inputs.patches)
    additions = tuple((f"Python-additions/{rel}", sha256_of(additions_root / rel)) for rel in cell.additions)
    header = PROJECT_ROOT / "patches" / "backport-additions.dep3"
    additions_fields = tuple(dep3_fields(header.read_text())) if additions and header.is_file() else ()
    return CellFacts(
        cell=cell.name, version=recipe.version, variant=cell.variant.name, arch=cell.arch, cflags=cell.cflags,
        configure_args=tuple(cell.configure_args()), environment=tuple(cell.variant.environment),
        inputs_digest=inputs.digest, base_image=inputs.target_base_tag or inputs.base_tag,
        source_url=recipe.url, source_file=recipe.filename, source_sha256=recipe.sha256,
        source_date_epoch=sde if sde is not None else source_date_epoch(inputs.tarball),
        build_script_sha256=sha256_of(render.BUILD_SCRIPT),
        dockerfile_sha256=sha256_bytes(inputs.dockerfile(inputs.digest).encode()),
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
# a distro lane's built packages


def parse_buildinfo(text: str) -> tuple[dict[str, str], list[DebPackage]]:
    """A .buildinfo's simple fields and its Installed-Build-Depends (name (= version) list, arch-qualified
    names as name:arch)."""
    fields: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        if line.startswith("-----BEGIN PGP SIGNED MESSAGE") or line.startswith("Hash:"):
            continue
        if line.startswith("-----BEGIN PGP SIGNATURE"):
            break
        m = re.match(r"([A-Za-z0-9-]+):\s*(.*)$", line)
        if m and not line.startswith((" ", "\t")):
            key = m.group(1)
            fields[key] = m.group(2).strip()
        elif key and line.startswith((" ", "\t")):
            fields[key] += "\n" + line.strip()
    arch = fields.get("Build-Architecture", "")
    installed = []
    for item in fields.get("Installed-Build-Depends", "").replace("\n", " ").split(","):
        m = re.match(r"\s*([^\s:(]+)(?::(\S+))?\s*\(=\s*([^)\s]+)\s*\)", item)
        if m:
            installed.append(DebPackage(m.group(1), m.group(3), m.group(2) or arch))
    return fields, sorted(installed, key=lambda p: (p.name, p.arch))


def deb_file_facts(name: str) -> tuple[str, str, str]:
    """(package, version, arch) of a .deb from its canonical file name <package>_<version>_<arch>.deb."""
    m = re.fullmatch(r"([a-z0-9][a-z0-9+.-]+)_([^_]+)_([a-z0-9-]+)\.u?deb", name)
    if not m:
        raise DriverError(f"{name} is not a .deb file name of the form <package>_<version>_<arch>.deb")
    return m.group(1), m.group(2), m.group(3)


@dataclass(frozen=True)
class LaneFacts:
    lane: str
    suite: str
    source_package: str
    package_version: str
    built_version: str
    dsc_name: str
    dsc_sha256: str
    dsc_files: tuple[tuple[str, int, str], ...]    # (name, size, sha256) from the .dsc's Checksums-Sha256
    patches: tuple[PatchFile, ...]
    environment: tuple[tuple[str, str], ...]
    build_key: str
    build_image: str
    debs: tuple[tuple[str, str], ...]               # (file name, sha256)
    buildinfo_name: str
    buildinfo_sha256: str
    build_depends: tuple[DebPackage, ...]
    built_at: int
    symbols_added: tuple[str, ...] = ()


def lane_facts(lane, matrix, packages_dir: Path, dsc: Path) -> LaneFacts:
    """The facts of a lane's built output directory, after checking it was built from the lane's current
    inputs (its build key is computed again and must name the directory)."""
    from ..distro import deb_build, series_forms
    from ..distro.source_packages import dsc_checksums

    packages_dir = Path(packages_dir)
    done_path = packages_dir / "DONE"
    if not done_path.is_file():
        raise DriverError(f"{packages_dir} holds no finished lane build (no DONE file): build it with "
                          f"`nox -s deb-{lane.name}` (or python -m cpython_perf deb {lane.name})")
    done = json.loads(done_path.read_text())
    flavour = done.get("flavour", {})
    if not flavour.get("with_series"):
        raise DriverError(f"{packages_dir} is the baseline build (Debian's package without the series): the "
                          "SBOM describes a build with the series")
    env = dict(flavour.get("environment", {}))
    dsc_text = dsc.read_text(errors="replace")
    quilt = series_forms.quilt_patches(lane.patch_series)   # (name, text): the quilt form the lane appends
    names = [name for name, _ in quilt]
    form_files = {name: text.encode() for name, text in quilt}
    key = deb_build.current_build_key(lane, dsc, env)
    if packages_dir.name != key[:16]:
        raise DriverError(f"{packages_dir} was not built from the lane's current inputs (their build key is "
                          f"{key[:16]}): the .dsc, the series or the build image changed since; build again "
                          f"with `nox -s deb-{lane.name}`")
    if list(done.get("patches", [])) != names:
        raise DriverError(f"{done_path} names patches {done.get('patches')} but the series' quilt form is {names}")
    debs = []
    for name in done.get("debs", []):
        path = packages_dir / name
        if not path.is_file():
            raise DriverError(f"{path} (named in {done_path}) is missing: build again with `nox -s deb-{lane.name}`")
        deb_file_facts(name)
        debs.append((name, sha256_of(path)))
    buildinfo = next((n for n in done.get("changes_files", []) if n.endswith(".buildinfo")), "")
    build_depends: list[DebPackage] = []
    buildinfo_sha = ""
    if buildinfo:
        text = (packages_dir / buildinfo).read_text(errors="replace")
        buildinfo_sha = sha256_of(packages_dir / buildinfo)
        _, build_depends = parse_buildinfo(text)
    built_at = int(datetime.fromisoformat(done["built_at"]).timestamp()) if done.get("built_at") else 0
    return LaneFacts(
        lane=lane.name, suite=lane.suite, source_package=lane.source_package,
        package_version=lane.package_version, built_version=done.get("version", ""), dsc_name=dsc.name,
        dsc_sha256=sha256_of(dsc),
        dsc_files=tuple((n, size, sha) for n, (size, sha) in sorted(dsc_checksums(dsc_text).items())),
        patches=tuple(PatchFile.of(f"debian/patches/{deb_build.PATCH_SUBDIR}/{n}", form_files[n]) for n in names),
        environment=tuple(sorted(env.items())), build_key=key, build_image=deb_build.build_image_tag(lane, dsc_text), debs=tuple(debs),
        buildinfo_name=buildinfo, buildinfo_sha256=buildinfo_sha, build_depends=tuple(build_depends),
        built_at=built_at, symbols_added=tuple(done.get("symbols_added", [])))


def lane_bom(facts: LaneFacts) -> str:
    """The CycloneDX JSON of a lane's built packages."""
    model, _, component, *_ = _cdx()
    distro = f"debian-{facts.suite}"
    source_purl = _purl_deb(facts.source_package, facts.package_version, "source", distro)
    dsc_files = [component.Component(type=component.ComponentType.FILE, name=name, bom_ref=f"dsc-file:{name}",
                                     hashes=[_sha256(model, sha)], properties=_properties(model, [("size", size)]))
                 for name, size, sha in facts.dsc_files]
    archive_source = component.Component(
        type=component.ComponentType.APPLICATION, name=facts.source_package, version=facts.package_version,
        purl=source_purl, bom_ref=source_purl.to_string(), hashes=[_sha256(model, facts.dsc_sha256)],
        components=dsc_files,
        properties=_properties(model, [("dsc", facts.dsc_name), ("role", "archive-source-package")]))
    files, pedigree_patches = _patch_components(model, component, list(facts.patches), "file:")
    built_purl = _purl_deb(facts.source_package, facts.built_version, "source", distro)
    main = component.Component(
        type=component.ComponentType.APPLICATION, name=facts.source_package, version=facts.built_version,
        purl=built_purl, bom_ref="built-source",
        description=f"{facts.source_package} {facts.built_version}: Debian's {facts.package_version} with the "
                    f"cpython-perf series appended to debian/patches/series, built with Debian's rules",
        pedigree=component.Pedigree(ancestors=[archive_source], patches=pedigree_patches or None,
                                    notes=f"Applied after Debian's own patches. {SERIES_NOTE}"),
        properties=_properties(model, [
            ("lane", facts.lane), ("suite", facts.suite), *((f"env:{k}", v) for k, v in facts.environment),
            ("build-key", facts.build_key), ("build-image", facts.build_image),
            ("symbols-added", " ".join(facts.symbols_added)),
            ("buildinfo", facts.buildinfo_name), ("buildinfo:sha256", facts.buildinfo_sha256)]))
    debs = []
    for name, digest in facts.debs:
        package, version, arch = deb_file_facts(name)
        purl = _purl_deb(package, version, arch, distro)
        debs.append(component.Component(
            type=component.ComponentType.LIBRARY, name=package, version=version, purl=purl,
            bom_ref=purl.to_string(), hashes=[_sha256(model, digest)],
            properties=_properties(model, [("role", "built-package"), ("file", name)])))
    build_env = _package_components(model, component, list(facts.build_depends), distro,
                                    scope=component.ComponentScope.EXCLUDED, role="build-environment")
    document = _new_bom(main, [*files, *debs, *build_env], facts.built_at)
    _depends(document, main.bom_ref, [d.bom_ref for d in debs])
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
    reproducible (cpython_perf.build.reproducibility)."""
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


def distro_of(suite: str) -> str:
    """The purl distro qualifier of a Debian suite (debian-<suite>)."""
    return f"debian-{suite}"


# --------------------------------------------------------------------------
# the command: python -m cpython_perf sbom CELL | --lane LANE


def add_arguments(parser) -> None:
    parser.add_argument("cell", nargs="?", help="a cell whose image is built (e.g. 3.13-fp)")
    parser.add_argument("--lane", default=None, help="a distro lane of matrix.yaml (e.g. bookworm-3.11), from "
                                                    "its built packages instead of a cell")
    parser.add_argument("--packages", default=None, metavar="DIR",
                        help="with --lane: the built output directory (default: the lane's one with-series "
                             "build under ~/.cache/cpython-perf/deb/<lane>/)")
    parser.add_argument("--out", default=None, metavar="FILE",
                        help="where to write it (default: results/sbom/<cell or deb-lane>.cdx.json)")
    parser.add_argument("--attach", action="store_true",
                        help="with a cell: put the SBOM into its image when the image carries none or another "
                             "(a layer on top of it, no rebuild)")


def lane_packages_dir(lane, cache_root: Path | None = None) -> Path:
    """The lane's one finished build with the series (DONE with_series), or an error naming the choice."""
    from ..distro import deb_build

    root = Path(cache_root or deb_build.default_cache_root()) / lane.name
    found = []
    for done in sorted(root.glob("*/DONE")):
        try:
            if json.loads(done.read_text()).get("flavour", {}).get("with_series"):
                found.append(done.parent)
        except (OSError, ValueError):
            continue
    if not found:
        raise DriverError(f"no finished build of lane {lane.name} with the series under {root}: build it with "
                          f"`nox -s deb-{lane.name}` (or give its directory with --packages)")
    if len(found) > 1:
        raise DriverError(f"lane {lane.name} has {len(found)} builds with the series under {root} "
                          f"({', '.join(p.name for p in found)}, e.g. a default and a --release-grade one): "
                          "name one with --packages DIR")
    return found[0]

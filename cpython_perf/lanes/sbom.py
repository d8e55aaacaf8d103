"""The SBOM (CycloneDX 1.6 JSON) of a packaging lane's built packages, made and validated with the pieces of
cpython_perf/image/sbom.py (a cell image's SBOM).

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

It is deterministic: every bom-ref is named, the serial number is a UUID derived from the document's content,
and the timestamp is the time the lane's packages were built.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ..image.sbom import (SERIES_NOTE, DebPackage, PatchFile, _cdx, _depends, _new_bom, _package_components,
                          _patch_components, _properties, _purl_deb, _sha256, serialize)
from ..errors import DriverError
from ..source.sources import sha256_of



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
    distribution: str                               # its name as shown, e.g. Debian
    purl_namespace: str                             # e.g. debian
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
    from . import deb_build, images, series_forms, source_tree
    from .source_packages import dsc_checksums

    packages_dir = Path(packages_dir)
    done_path = packages_dir / "DONE"
    if not done_path.is_file():
        raise DriverError(f"{packages_dir} holds no finished lane build (no DONE file): build it with "
                          f"`nox -s deb-{lane.name}` (or python -m cpython_perf deb {lane.name})")
    done = json.loads(done_path.read_text())
    flavour = done.get("flavour", {})
    if not flavour.get("with_series"):
        raise DriverError(f"{packages_dir} is the baseline build ({lane.distribution.name}'s package without the "
                          "series): the SBOM describes a build with the series")
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
        lane=lane.name, distribution=lane.distribution.name, purl_namespace=lane.distribution.purl_namespace,
        suite=lane.suite, source_package=lane.source_package,
        package_version=lane.package_version, built_version=done.get("version", ""), dsc_name=dsc.name,
        dsc_sha256=sha256_of(dsc),
        dsc_files=tuple((n, size, sha) for n, (size, sha) in sorted(dsc_checksums(dsc_text).items())),
        patches=tuple(PatchFile.of(f"debian/patches/{source_tree.PATCH_SUBDIR}/{n}", form_files[n]) for n in names),
        environment=tuple(sorted(env.items())), build_key=key, build_image=images.build_image_tag(lane, dsc_text), debs=tuple(debs),
        buildinfo_name=buildinfo, buildinfo_sha256=buildinfo_sha, build_depends=tuple(build_depends),
        built_at=built_at, symbols_added=tuple(done.get("symbols_added", [])))


def lane_bom(facts: LaneFacts) -> str:
    """The CycloneDX JSON of a lane's built packages."""
    model, _, component, *_ = _cdx()
    distro, namespace = f"{facts.purl_namespace}-{facts.suite}", facts.purl_namespace
    source_purl = _purl_deb(facts.source_package, facts.package_version, "source", distro, namespace)
    dsc_files = [component.Component(type=component.ComponentType.FILE, name=name, bom_ref=f"dsc-file:{name}",
                                     hashes=[_sha256(model, sha)], properties=_properties(model, [("size", size)]))
                 for name, size, sha in facts.dsc_files]
    archive_source = component.Component(
        type=component.ComponentType.APPLICATION, name=facts.source_package, version=facts.package_version,
        purl=source_purl, bom_ref=source_purl.to_string(), hashes=[_sha256(model, facts.dsc_sha256)],
        components=dsc_files,
        properties=_properties(model, [("dsc", facts.dsc_name), ("role", "archive-source-package")]))
    files, pedigree_patches = _patch_components(model, component, list(facts.patches), "file:")
    built_purl = _purl_deb(facts.source_package, facts.built_version, "source", distro, namespace)
    main = component.Component(
        type=component.ComponentType.APPLICATION, name=facts.source_package, version=facts.built_version,
        purl=built_purl, bom_ref="built-source",
        description=f"{facts.source_package} {facts.built_version}: {facts.distribution}'s {facts.package_version} "
                    f"with the cpython-perf series appended to debian/patches/series, built with "
                    f"{facts.distribution}'s rules",
        pedigree=component.Pedigree(ancestors=[archive_source], patches=pedigree_patches or None,
                                    notes=f"Applied after {facts.distribution}'s own patches. {SERIES_NOTE}"),
        properties=_properties(model, [
            ("lane", facts.lane), ("suite", facts.suite), *((f"env:{k}", v) for k, v in facts.environment),
            ("build-key", facts.build_key), ("build-image", facts.build_image),
            ("symbols-added", " ".join(facts.symbols_added)),
            ("buildinfo", facts.buildinfo_name), ("buildinfo:sha256", facts.buildinfo_sha256)]))
    debs = []
    for name, digest in facts.debs:
        package, version, arch = deb_file_facts(name)
        purl = _purl_deb(package, version, arch, distro, namespace)
        debs.append(component.Component(
            type=component.ComponentType.LIBRARY, name=package, version=version, purl=purl,
            bom_ref=purl.to_string(), hashes=[_sha256(model, digest)],
            properties=_properties(model, [("role", "built-package"), ("file", name)])))
    build_env = _package_components(model, component, list(facts.build_depends), distro,
                                    scope=component.ComponentScope.EXCLUDED, role="build-environment",
                                    namespace=namespace)
    document = _new_bom(main, [*files, *debs, *build_env], facts.built_at)
    _depends(document, main.bom_ref, [d.bom_ref for d in debs])
    return serialize(document)




def lane_packages_dir(lane, cache_root: Path | None = None) -> Path:
    """The lane's one finished build with the series (DONE with_series), or an error naming the choice."""
    from . import run_record

    root = Path(cache_root or run_record.default_cache_root()) / lane.name
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


def command(matrix, args, log=print) -> int:
    """`python -m cpython_perf sbom --lane LANE [--packages DIR] [--out FILE]`: the SBOM of the lane's built
    packages, written to results/sbom/deb-<lane>.cdx.json by default."""
    from ..image.sbom import SPEC_VERSION, write
    from ..matrix import PROJECT_ROOT
    from .source_packages import fetch_source_package

    lane = matrix.lane(args.lane)
    packages_dir = Path(args.packages) if args.packages else lane_packages_dir(lane)
    package = fetch_source_package(lane, log=log)
    facts = lane_facts(lane, matrix, packages_dir, package.dsc)
    text = lane_bom(facts)
    default = PROJECT_ROOT / "results" / "sbom" / f"deb-{lane.name}.cdx.json"
    out = write(text, Path(args.out) if args.out else default)
    log(f"{out}: CycloneDX {SPEC_VERSION}, valid (the library's JSON-schema validator); {lane.source_package} "
        f"{facts.built_version} from {packages_dir}: {len(facts.debs)} .debs, {len(facts.patches)} patches, "
        f"{len(facts.build_depends)} build-environment packages")
    return 0

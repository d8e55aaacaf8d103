"""Command line of the driver: `python -m cpython_perf COMMAND ...`.

Errors the user can act on (DriverError) are printed as one message, without
a traceback: exit status 2 for a usage error (argparse's, an unknown cell, a
bad matrix), 1 for a runtime failure (errors.RuntimeFailure).  Long steps print
a heartbeat and keep their output in results/logs/ (cpython_perf.progress);
--verbose prints all of it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

from .build import pipeline as build, images
from . import host, profile, progress
from .source import patches, pins, sources
from .build import registry as published
from .ci import plan as ci_plan
from .errors import DriverError
from .matrix import HOST_ARCH, KNOWN_ARCHES, load_matrix


def _log(line: str) -> None:
    print(line, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cpython_perf", description=__doc__.splitlines()[0])
    parser.add_argument("--matrix", help="path of matrix.yaml (default: the project's)")
    sub = parser.add_subparsers(dest="command", required=True)
    # the long steps' output (docker build, mmdebstrap, dpkg-buildpackage, qemu guests): a heartbeat, or all of it
    loud = argparse.ArgumentParser(add_help=False)
    loud.add_argument("--verbose", "-v", action="store_true",
                      help="print the long steps' whole output (default: a heartbeat line every 30 s; the output "
                           "is in results/logs/ either way)")
    sub.add_parser("doctor", help="can this machine run the default job? Docker, perf, tools, disk, archive; "
                                  "each problem with its fix (exit 1: something the job needs is missing)")
    sub.add_parser("cells", help="list the cells of the matrix as JSON lines")
    p = sub.add_parser("render", help="print a cell's rendered Dockerfile")
    p.add_argument("cell")
    p = sub.add_parser("fetch", help="fetch and verify a cell's source tarball")
    p.add_argument("cell")
    p = sub.add_parser("build", help="build a cell's image cpython-perf:<cell>", parents=[loud])
    p.add_argument("cell")
    p.add_argument("--base-mode", choices=images.BASE_MODES, default=None,
                   help="how to make the base image (default: auto, or $CPYTHON_PERF_BASE_MODE)")
    p.add_argument("--no-cache", action="store_true",
                   help="build the cell image, every layer, even where a local image carries its inputs digest "
                        "(without it, such an image is used as it is, whoever built it)")
    p.add_argument("--if-stale", action="store_true",
                   help="build only if no image of the same inputs digest exists (a CI worker's build step)")
    p.add_argument("--registry", default=None, metavar="REF",
                   help="an image registry, host[:port][/path] (default: $CPYTHON_PERF_REGISTRY, else none): use a "
                        "current local image, else pull the one published for the cell's inputs digest, and build "
                        "only where neither is had (cpython_perf/build/registry.py)")
    p = sub.add_parser("push", help="publish a cell's current image in a registry as "
                                    "<registry>/cpython-perf:<cell>-<inputs digest>")
    p.add_argument("cell")
    p.add_argument("--registry", default=None, metavar="REF",
                   help=f"host[:port][/path], e.g. {published.EXAMPLE} (default: $CPYTHON_PERF_REGISTRY)")
    p = sub.add_parser("base-image", help="create the base image if it does not exist", parents=[loud])
    p.add_argument("--mode", choices=images.BASE_MODES, default=None)
    p.add_argument("--arch", choices=KNOWN_ARCHES, default=HOST_ARCH,
                   help="the base of another arch's cells (always bootstrapped; --mode is the host base's)")
    sub.add_parser("tools-image", help="create the tools image (samply, flame graphs) if it does not exist",
                   parents=[loud])
    p = sub.add_parser("plan", help="the jobs of a CI run as JSON: images, cells, report (cpython_perf/ci/plan.py)")
    ci_plan.add_arguments(p)
    p = sub.add_parser("pin", help="pin a series to its newest python.org release (signature checked), or "
                                   "--check: list the pins behind (cpython_perf/source/pins.py)")
    pins.add_arguments(p)
    p = sub.add_parser("check-series", help="apply a cell's additions and series to its pristine source, or "
                                            "(--source) a version's series to any tarball, .dsc or tree, with a "
                                            "per-patch report (cpython_perf/distro/source_check.py)")
    p.add_argument("cell", help="a cell (3.11-fp); with --source also a version with a series (3.13)")
    p.add_argument("--source", default=None, metavar="TARBALL_OR_DSC",
                   help="a tarball, a Debian .dsc (unpacked with dpkg-source -x: Debian's patches applied first) "
                        "or a source tree: report per patch whether it applies, with offsets or fuzz, is already "
                        "applied, or fails (exit 1: one fails or needs fuzz)")
    p.add_argument("--alone", action="store_true",
                   help="with --source: try each patch on the unpacked source as it is, none applied (which "
                        "changes the source already has, whatever the patches before it did)")
    p.add_argument("--json", action="store_true", help="with --source: the report as JSON")
    p = sub.add_parser("series-forms", help="write a version's series in the forms packagers import: a quilt "
                                            "directory (new files as a patch), a git-am mbox and Fedora's form "
                                            "(NNNNN: commits, patch files, the spec's Patch lines)")
    p.add_argument("version", help="a version with a patch series (e.g. 3.11)")
    p.add_argument("--out", default=None, help="output directory (default: dist/series/<version>)")
    p = sub.add_parser("deb", help="build a distro lane's Debian source package with the series added, with "
                                   "Debian's own debian/rules, install it in a clean container and check it",
                       parents=[loud])
    p.add_argument("lane", help="a lane of matrix.yaml distros: (e.g. bookworm-3.11)")
    p.add_argument("--release-grade", action="store_true",
                   help="the archive's own build flags (PGO, LTO, the test suite; no frame pointers added)")
    p.add_argument("--without-series", action="store_true",
                   help="the baseline: Debian's source package rebuilt as it is (lintian's stricter baseline)")
    p.add_argument("--jobs", type=int, default=2, help="DEB_BUILD_OPTIONS parallel= (default 2)")
    p.add_argument("--rebuild", action="store_true", help="build again even if the cache has these packages")
    p.add_argument("--no-checks", action="store_true", help="build (and lintian) only: no install images, no checks")
    p.add_argument("--no-lintian", action="store_true", help="skip lintian and the archive comparison")
    p = sub.add_parser("sbom", help="the SBOM (CycloneDX JSON, validated) of a cell's image or (--lane) of a "
                                    "distro lane's built packages: source and sha256, each patch with its sha256 "
                                    "and DEP-3 origin, the Debian packages with versions (cpython_perf/build/sbom.py, "
                                    "cpython_perf/distro/sbom.py)")
    from .build import sbom as sbom_command
    sbom_command.add_arguments(p)
    p = sub.add_parser("reproducibility", help="build a cell twice (its own build; then another build path, "
                                               "umask, locale, time zone, CPU count, later) and compare their "
                                               "/opt/cpython (diffoscope); exit 1 on a difference without a known "
                                               "reason (cpython_perf/build/reproducibility.py)", parents=[loud])
    p.add_argument("cell")
    p.add_argument("--out", default=None, help="results directory (default: results/reproducibility/<cell>)")
    p.add_argument("--keep", action="store_true",
                   help="keep the two images (cpython-perf-repro:<cell>-a-<pid>, -b-<pid>)")
    p.add_argument("--other-build-path", action="store_true",
                   help="build b in another directory too (CPython records its build directory: shows what that "
                        "changes)")
    p = sub.add_parser("deb-reproducibility", help="build a deb lane twice (as `deb` builds it; then later, under "
                                                   "what reprotest varies: umask, locale, time zone, "
                                                   "HOME, PATH, host name, kernel version, one CPU) and compare the "
                                                   ".debs (diffoscope); exit 1 on a difference "
                                                   "(cpython_perf/distro/deb_reproducibility.py)", parents=[loud])
    p.add_argument("lane", help="a lane of matrix.yaml distros: (e.g. bookworm-3.11)")
    p.add_argument("--out", default=None, help="results directory (default: results/deb-reproducibility/<lane>)")
    p.add_argument("--same-cpus", action="store_true",
                   help="build b with a's CPUs (both cores, parallel=2) instead of one: about half its time")
    p.add_argument("--other-build-path", action="store_true",
                   help="build b in another directory too (CPython and dtrace's probe objects record it: shows what "
                        "that changes, each known difference with its reason)")
    p = sub.add_parser("deb-check", help="is each deb lane on the archive's newest revision of its source package? "
                                         "(exit 1: a lane is behind; cpython_perf/distro/deb_check.py)")
    p.add_argument("lanes", nargs="*", help="lanes of matrix.yaml distros: (default: all)")
    p = sub.add_parser("apt-repo", help="the built deb lanes' packages as a signed apt repository, one suite per "
                                        "Debian release (reprepro; cpython_perf/distro/apt_repo.py)")
    from .distro import apt_repo

    apt_repo.add_arguments(p)
    p = sub.add_parser("profile", help="run your own program under real perf in a cell's image (or any image): "
                                       "perf.data, perf script text, a flame graph written to --out "
                                       "(cpython_perf/profile.py)",
                       usage="python -m cpython_perf profile (CELL | --image IMAGE --python PATH) [--mode MODE] "
                             "[--requirements FILE] [--out DIR] [-F HZ] -- script.py [ARGS ...]")
    profile.add_arguments(p)
    from .record import clean_tmp, outside

    p = sub.add_parser("record", help="record the processes of a running container with perf from outside it "
                                      "(the host's pid namespace), keeping each one's perf map or jitdump where "
                                      "perf reads it after the process exited (cpython_perf/record/outside.py)",
                       usage="python -m cpython_perf record --container NAME [--pid PID ...] [--mode MODE] "
                             "[--seconds N] [--out DIR] [-F HZ] [--perf-image IMAGE | --host-perf] "
                             "[-- PERF RECORD OPTIONS]")
    outside.add_arguments(p)
    from .record import activate

    p = sub.add_parser("activate", help="switch the perf trampoline of a running Python process from outside "
                                        "it (gdb asks, the interpreter switches at a safe point): a service "
                                        "started without -X perf (cpython_perf/record/activate.py)",
                       usage="python -m cpython_perf activate (--container NAME [--pid PID] | --pid PID) "
                             "[--mode perf|perf_jit|off] [--timeout S] [--tools-image IMAGE | --host-gdb]")
    activate.add_arguments(p)
    p = sub.add_parser("clean-tmp", help="remove the perf maps and jitdumps of processes that are gone: never one "
                                         "whose process runs, that a process holds open, or that a recording "
                                         "names (cpython_perf/record/clean_tmp.py)")
    clean_tmp.add_arguments(p)
    argv, program = profile.split_program(sys.argv[1:] if argv is None else list(argv))
    args = parser.parse_args(argv)
    if getattr(args, "verbose", False):
        progress.set_verbose()

    try:
        matrix = load_matrix(args.matrix)
        if args.command == "doctor":
            from . import doctor

            return doctor.main(matrix)
        if args.command == "cells":
            for cell in matrix.cells.values():
                print(json.dumps({"name": cell.name, "version": cell.recipe.version, "variant": cell.variant.name,
                                  "arch": cell.arch, "modes": list(cell.modes), "support": cell.support,
                                  "image": cell.image}))
        elif args.command == "render":
            sys.stdout.write(build.rendered_dockerfile(matrix.cell(args.cell), matrix))
        elif args.command == "fetch":
            cell = matrix.cell(args.cell)
            path = sources.fetch_source(cell.recipe, log=_log)
            print(path)
        elif args.command == "build" and args.if_stale and not args.no_cache:
            cell = matrix.cell(args.cell)
            build.ensure_cell_image(cell, matrix, _log, published.configured_registry(args.registry))
            _log(f"{cell.image} is current")
        elif args.command == "build":
            cell = matrix.cell(args.cell)
            build.build_cell(cell, matrix, _log, args.base_mode, no_cache=args.no_cache,
                             registry=published.configured_registry(args.registry))
        elif args.command == "push":
            cell = matrix.cell(args.cell)
            registry = published.configured_registry(args.registry)
            if registry is None:
                raise DriverError(f"push needs a registry: --registry REF or ${published.REGISTRY_ENV} "
                                  f"(e.g. {published.EXAMPLE})")
            print(build.push_cell(cell, registry, matrix, _log))
        elif args.command == "base-image":
            client = host.docker_client(_log)
            print(images.ensure_base_image(client, matrix.base_suite, args.mode, _log) if args.arch == HOST_ARCH
                  else images.ensure_arch_base_image(client, matrix.base_suite, args.arch, _log))
        elif args.command == "tools-image":
            from .build import tools

            print(tools.ensure_tools_image(host.docker_client(_log), matrix, _log))
        elif args.command == "plan":
            ci_plan.run(matrix, args)
        elif args.command == "pin":
            return pins.main(matrix, args, _log)
        elif args.command == "check-series" and args.source:
            from .distro import series_forms, source_check

            series = source_check.version_argument(matrix, args.cell)
            source = Path(args.source)
            results = source_check.check_source(series_forms.quilt_patches(series), source, alone=args.alone)
            if args.json:
                print(source_check.as_json(results, source, series.version))
            else:
                how = "each alone on" if args.alone else "in order on"
                print(f"CPython {series.version} series ({len(results)} patches, quilt form), {how} "
                      f"{source_check.describe_source(source)}:")
                print(source_check.table(results))
                print(source_check.summary(results))
            return source_check.exit_status(results)
        elif args.command == "check-series":
            cell = matrix.cell(args.cell)
            tarball = sources.fetch_source(cell.recipe, log=_log)
            count = patches.check_series_applies(tarball, cell.recipe.srcdir, cell.additions,
                                                 images.ADDITIONS_ROOT, cell.series)
            for p in patches.read_series(cell.series) if cell.series else []:
                problems = patches.dep3_problems(p.path.read_text())
                if problems:
                    raise DriverError(f"patch {p.name}'s DEP-3 header is incomplete: {'; '.join(problems)}")
            print(f"{cell.name}: {len(cell.additions)} additions and {count} patches apply to {cell.recipe.srcdir}")
        elif args.command == "series-forms":
            from .distro import series_forms

            out = Path(args.out) if args.out else matrix.root / "dist" / "series" / args.version
            if out.exists():
                shutil.rmtree(out)   # generated: never a mix of an old and a new form
            released = sorted({c.recipe.version for c in matrix.cells.values()
                               if c.version == args.version and not c.vanilla})
            written = series_forms.write_forms(matrix.series_of(args.version), out,
                                               released[0] if len(released) == 1 else None)
            print(f"quilt form: {written['quilt']}/ (append its series after the distribution's own patches)")
            print(f"git am form: {written['mbox']}")
            print(f"Fedora form: {written['fedora']}/ (a commit per NNNNN: patch, the spec's Patch lines; "
                  "README.txt)")
        elif args.command == "profile":
            return profile.main(matrix, args, program, _log)
        elif args.command == "record":
            return outside.main(matrix, args, _log)
        elif args.command == "activate":
            return activate.main(matrix, args, _log)
        elif args.command == "clean-tmp":
            return clean_tmp.run(args, _log)
        elif args.command == "reproducibility":
            from .build import reproducibility

            summary = reproducibility.run(matrix.cell(args.cell), matrix, _log, args.out, args.keep,
                                          args.other_build_path)
            return 1 if summary["unexplained"] else 0
        elif args.command == "deb-reproducibility":
            from .distro import deb_reproducibility

            summary = deb_reproducibility.run(matrix.distro(args.lane), matrix, _log, args.out, args.same_cpus,
                                              args.other_build_path)
            return 1 if summary["unexplained"] else 0
        elif args.command == "sbom":
            if bool(args.cell) == bool(args.lane):
                raise DriverError("name either a cell (python -m cpython_perf sbom 3.13-fp) or a lane "
                                  "(--lane bookworm-3.11)")
            if args.lane:
                from .distro import sbom as lane_sbom
                return lane_sbom.command(matrix, args, _log)
            return build.sbom_command(matrix, args, _log)
        elif args.command == "deb-check":
            from .distro import deb_check

            return deb_check.main(matrix, args.lanes, _log)
        elif args.command == "apt-repo":
            from .distro import apt_repo

            return apt_repo.main(matrix, args, _log)
        elif args.command == "deb":
            from .distro import deb_build

            options = deb_build.DebOptions(release_grade=args.release_grade, with_series=not args.without_series,
                                           jobs=args.jobs, rebuild=args.rebuild, checks=not args.no_checks,
                                           lintian=not args.no_lintian)
            summary = deb_build.LaneRun(matrix.distro(args.lane), matrix, options, _log).run()
            print(json.dumps({k: summary[k] for k in ("lane", "version", "phases", "images") if k in summary}))
    except DriverError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return 0

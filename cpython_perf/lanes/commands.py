"""The packaging lanes' subcommands of `python -m cpython_perf`: check-series, series-forms, deb,
deb-reproducibility, deb-check, lane-keyrings, apt-repo, and sbom (a cell's image, or a lane's packages)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..image import sbom as image_sbom
from ..image.sbom_command import sbom_command
from ..errors import DriverError
from ..matrix import load_matrix
from ..progress import add_verbose_option
from ..source import patches, sources
from ..subcommands import Command, log
from . import apt_repo, deb_check, deb_reproducibility, lane_run, run_record, series_forms, source_check
from . import sbom as lane_sbom


def _check_series_arguments(parser) -> None:
    parser.add_argument("cell", help="a cell (3.11-fp); with --source also a version with a series (3.13)")
    parser.add_argument("--source", default=None, metavar="TARBALL_OR_DSC",
                        help="a tarball, a Debian .dsc (unpacked with dpkg-source -x: Debian's patches applied "
                             "first) or a source tree: report per patch whether it applies, with offsets or fuzz, "
                             "is already applied, or fails (exit 1: one fails or needs fuzz)")
    parser.add_argument("--alone", action="store_true",
                        help="with --source: try each patch on the unpacked source as it is, none applied (which "
                             "changes the source already has, whatever the patches before it did)")
    parser.add_argument("--json", action="store_true", help="with --source: the report as JSON")


def _check_series(args) -> int:
    matrix = load_matrix(args.matrix)
    if args.source:
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
    cell = matrix.cell(args.cell)
    tarball = sources.fetch_source(cell.recipe, log=log)
    count = patches.check_series_applies(tarball, cell.recipe.srcdir, cell.additions, patches.ADDITIONS_ROOT,
                                         cell.series)
    for patch in patches.read_series(cell.series) if cell.series else []:
        problems = patches.dep3_problems(patch.path.read_text())
        if problems:
            raise DriverError(f"patch {patch.name}'s DEP-3 header is incomplete: {'; '.join(problems)}")
    print(f"{cell.name}: {len(cell.additions)} additions and {count} patches apply to {cell.recipe.srcdir}")
    return 0


def _series_forms_arguments(parser) -> None:
    parser.add_argument("version", help="a version with a patch series (e.g. 3.11)")
    parser.add_argument("--out", default=None, help="output directory (default: dist/series/<version>)")


def _series_forms(args) -> None:
    matrix = load_matrix(args.matrix)
    out = Path(args.out) if args.out else matrix.root / "dist" / "series" / args.version
    if out.exists():
        shutil.rmtree(out)   # generated: never a mix of an old and a new form
    released = sorted({c.recipe.version for c in matrix.cells.values()
                       if c.version == args.version and not c.vanilla})
    written = series_forms.write_forms(matrix.series_of(args.version), out,
                                       released[0] if len(released) == 1 else None)
    print(f"quilt form: {written['quilt']}/ (append its series after the distribution's own patches)")
    print(f"git am form: {written['mbox']}")
    print(f"Fedora form: {written['fedora']}/ (a commit per NNNNN: patch, the spec's Patch lines; README.txt)")


def _lane_argument(parser) -> None:
    parser.add_argument("lane", help="a lane of matrix.yaml lanes: (e.g. bookworm-3.11)")


def _deb_arguments(parser) -> None:
    add_verbose_option(parser)
    _lane_argument(parser)
    parser.add_argument("--release-grade", action="store_true",
                        help="the archive's own build flags (PGO, LTO, the test suite; no frame pointers added)")
    parser.add_argument("--without-series", action="store_true",
                        help="the baseline: Debian's source package rebuilt as it is (lintian's stricter baseline)")
    parser.add_argument("--jobs", type=int, default=2, help="DEB_BUILD_OPTIONS parallel= (default 2)")
    parser.add_argument("--rebuild", action="store_true", help="build again even if the cache has these packages")
    parser.add_argument("--no-checks", action="store_true",
                        help="build (and lintian) only: no install images, no checks")
    parser.add_argument("--no-lintian", action="store_true", help="skip lintian and the archive comparison")


def _deb(args) -> None:
    matrix = load_matrix(args.matrix)
    options = run_record.DebOptions(release_grade=args.release_grade, with_series=not args.without_series,
                                    jobs=args.jobs, rebuild=args.rebuild, checks=not args.no_checks,
                                    lintian=not args.no_lintian)
    summary = lane_run.LaneRun(matrix.lane(args.lane), matrix, options, log).run()
    print(json.dumps({k: summary[k] for k in ("lane", "version", "phases", "images") if k in summary}))


def _sbom(args) -> int:
    matrix = load_matrix(args.matrix)
    if bool(args.cell) == bool(args.lane):
        raise DriverError("name either a cell (python -m cpython_perf sbom 3.13-fp) or a lane "
                          "(--lane bookworm-3.11)")
    if args.lane:
        return lane_sbom.command(matrix, args, log)
    return sbom_command(matrix, args, log)


def _deb_reproducibility_arguments(parser) -> None:
    add_verbose_option(parser)
    _lane_argument(parser)
    parser.add_argument("--out", default=None, help="results directory (default: results/deb-reproducibility/<lane>)")
    parser.add_argument("--same-cpus", action="store_true",
                        help="build b with a's CPUs (both cores, parallel=2) instead of one: about half its time")
    parser.add_argument("--other-build-path", action="store_true",
                        help="build b in another directory too (CPython and dtrace's probe objects record it: "
                             "shows what that changes, each known difference with its reason)")


def _deb_reproducibility(args) -> int:
    matrix = load_matrix(args.matrix)
    summary = deb_reproducibility.run(matrix.lane(args.lane), matrix, log, args.out, args.same_cpus,
                                      args.other_build_path)
    return 1 if summary["unexplained"] else 0


def _deb_check_arguments(parser) -> None:
    parser.add_argument("lanes", nargs="*", help="lanes of matrix.yaml lanes: (default: all)")


def _deb_check(args) -> int:
    return deb_check.main(load_matrix(args.matrix), args.lanes, log)


def _lane_keyrings_arguments(parser) -> None:
    parser.add_argument("lanes", nargs="*", help="lanes of matrix.yaml lanes: (default: all)")


def _lane_keyrings(args) -> int:
    matrix = load_matrix(args.matrix)   # checks each keyring against its keyring_sha256
    selected = [matrix.lane(n) for n in args.lanes] if args.lanes else list(matrix.lanes.values())
    for keyring in dict.fromkeys(lane.distribution.keyring for lane in selected):
        print(keyring)
    return 0


def _apt_repo(args) -> int:
    return apt_repo.main(load_matrix(args.matrix), args, log)


COMMANDS = (
    Command("check-series", "apply a cell's additions and series to its pristine source, or (--source) a "
                            "version's series to any tarball, .dsc or tree, with a per-patch report "
                            "(cpython_perf/lanes/source_check.py)", _check_series_arguments, _check_series),
    Command("series-forms", "write a version's series in the forms packagers import: a quilt directory (new files "
                            "as a patch), a git-am mbox and Fedora's form (NNNNN: commits, patch files, the spec's "
                            "Patch lines)", _series_forms_arguments, _series_forms),
    Command("deb", "build a packaging lane's Debian source package with the series added, with Debian's own "
                   "debian/rules, install it in a clean container and check it", _deb_arguments, _deb),
    Command("sbom", "the SBOM (CycloneDX JSON, validated) of a cell's image or (--lane) of a packaging lane's built "
                    "packages: source and sha256, each patch with its sha256 and DEP-3 origin, the Debian packages "
                    "with versions (cpython_perf/image/sbom.py, cpython_perf/lanes/sbom.py)",
            image_sbom.add_arguments, _sbom),
    Command("deb-reproducibility", "build a deb lane twice (as `deb` builds it; then later, under what reprotest "
                                   "varies: umask, locale, time zone, HOME, PATH, host name, kernel version, one "
                                   "CPU) and compare the .debs (diffoscope); exit 1 on a difference "
                                   "(cpython_perf/lanes/deb_reproducibility.py)",
            _deb_reproducibility_arguments, _deb_reproducibility),
    Command("deb-check", "is each deb lane on the archive's newest revision of its source package? (exit 1: a "
                         "lane is behind; cpython_perf/lanes/deb_check.py)", _deb_check_arguments, _deb_check),
    Command("lane-keyrings", "the archive keyrings of the lanes' distributions (matrix.yaml distributions:, "
                             "each checked against its keyring_sha256), one path a line: what a machine installs "
                             "for apt and mmdebstrap to trust the lanes' archives", _lane_keyrings_arguments,
            _lane_keyrings),
    Command("apt-repo", "the built deb lanes' packages as a signed apt repository, one suite per Debian release "
                        "(reprepro; cpython_perf/lanes/apt_repo.py)", apt_repo.add_arguments, _apt_repo),
)

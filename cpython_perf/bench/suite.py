"""The standard suite: pyperformance's stdlib-only benchmarks in the cell images, counted and timed.

`python -m cpython_perf bench suite --cell 3.11-fp --cell 3.13-fp` (`nox -s bench-suite -- ...`)
plans the comparisons of cpython_perf.bench.common (mode active vs inactive, patched vs vanilla,
fp vs release) and measures them on pyperformance's benchmark files, pinned in benchmarks/suite.yaml.
This module is the group (cpython_perf.bench.command): its arguments and a run, one step after the other:

- suite_pins: the wheels of pyperformance and pyperf are fetched with `pip download --no-deps` into a
  cache and checked against their sha256 (fetch_pinned); the benchmark directories (bm_*/run_benchmark.py
  and their data files) are used as they are, pyperf's pure-Python package is mounted read-only on the
  container's PYTHONPATH (suite_containers): pip is not needed in the images;
- suite_plan: a benchmark is in the suite if pyperformance's MANIFEST lists it, its pyproject.toml (and
  the variant's .toml) lists no dependency beyond pyperf, its directory has no requirements.txt naming
  anything else, its requires-python admits the cell's version, and suite.yaml does not exclude it;
- suite_counts, instructions (the default): under `valgrind --tool=cachegrind --cache-sim=no`, pyperf's
  worker mode (`--worker --warmups 0 --values 1 --loops N`) with L and 2L loops; one loop =
  (I(2L) - I(L)) / L, so interpreter start-up, pyperf's import and each benchmark's set-up cancel out.
  PYTHONHASHSEED=0.  After each run the container's /tmp is listed: a perf map or jitdump must exist
  exactly when the configuration activates a trampoline;
- suite_wallclock, wall clock (`--wallclock`): pyperf's own runs (`--fast`, worker processes, the mode
  activated by PYTHONPERFSUPPORT / PYTHON_PERF_JIT_SUPPORT, inherited by the workers), in interleaved pairs
  (`--pairs` rounds, each configuration once a round in a fresh container, the order rotated): the median of
  the per-round ratios, and a difference called only where the signed-rank test over the pairs says so.

Writes results/bench/suite-<UTC time>.json (suite_results_file: rewritten after every measurement,
"complete": false until the end) and refreshes BENCHMARKS.md, with the run's page (suite_page).
"""

from __future__ import annotations

from pathlib import Path

from .. import host
from ..errors import DriverError
from ..matrix import Cell, Matrix
from .common import KINDS, RESULTS_DIR, configurations, plan_comparisons
from .instructions import cell_images
from .suite_counts import count_benchmarks
from .suite_pins import CONFIG, SuiteConfig, SuiteFiles, load_config, prepare
from .suite_plan import benchmarks_of_every_cell, comparisons_with_images, read_manifest, select
from .suite_results_file import Progress, analyse_suite, new_results, nothing_run
from .suite_wallclock import PAIRS, measure_wallclock
# what a group names besides arguments, run and report: its results files, the newest one, a run's page
# (cpython_perf.bench.command and cpython_perf.bench.summary)
from .suite_page import render_markdown  # noqa: F401
from .suite_results_file import GROUP, latest_results  # noqa: F401


def measure(matrix: Matrix, cells: list[Cell], *, config: SuiteConfig, only: list[str] | None, kinds=KINDS,
            instructions: bool = True, wallclock: bool = False, rigor: str = "fast", pairs: int = PAIRS,
            existing_images: bool = False, directory: Path = RESULTS_DIR, log=print,
            files: SuiteFiles | None = None) -> dict:
    """A run of the suite on cells: the plan, the benchmarks, the counts and the wall clock, the comparisons;
    the results file under directory rewritten after every measurement."""
    plan = plan_comparisons(matrix, cells, kinds)
    client = host.docker_client(log)
    not_run = []
    if existing_images:   # a comparison needing a cell without an image is not run, and said so
        plan, not_run = comparisons_with_images(client, plan, log)
    if not plan and not not_run:
        raise DriverError(f"nothing to compare among {', '.join(c.name for c in cells)} ({', '.join(kinds)})")
    if not plan:   # every comparison lacks an image: the results say which and why
        return nothing_run(config, not_run, kinds, only)
    configs = configurations(plan)
    files = files or prepare(config, log=log)
    manifest = read_manifest(files.benchmarks)
    cells_used = list({c.cell.name: c.cell for c in configs}.values())
    selection = {cell.name: select(manifest, cell.version, config.exclude, only) for cell in cells_used}
    order = benchmarks_of_every_cell(manifest, selection, cells_used)
    by_name = {b.name: b for b in manifest}
    measured = cell_images(client, matrix, cells_used, existing_images, log)
    cell_images_ = {name: m["image"] for name, m in measured.items()}
    results = new_results(
        config, plan, configs, cells_used, measured, order,
        left_out={name: left for name, (_, left) in selection.items()},
        stdlib_only={cell.name: [b.name for b in select(manifest, cell.version, config.exclude)[0]]
                     for cell in cells_used},
        not_run=not_run, instructions=instructions, wallclock=wallclock, rigor=rigor, only=only, pairs=pairs)
    progress = Progress(results, Path(directory))
    log(f"standard suite: {len(order)} benchmarks in every cell ({', '.join(order)}); configurations: "
        f"{', '.join(c.key for c in configs)}")
    benchmarks = [by_name[n] for n in order]
    if instructions:
        count_benchmarks(client, cell_images_, files, configs, benchmarks, config.min_loop_instructions,
                         results["instructions"], progress, log)
    if wallclock:
        measure_wallclock(client, cell_images_, files, configs, benchmarks, rigor, results, progress, log, pairs)
    results["complete"] = True
    results["comparisons"] = analyse_suite(results)
    progress.save()
    return results


# The group's command line (cpython_perf.bench.command): `python -m cpython_perf bench suite ...`


def arguments(parser) -> None:
    parser.add_argument("--benchmarks", help="comma-separated benchmarks of the suite (default: every stdlib-only one)")
    parser.add_argument("--kind", action="append", choices=KINDS, dest="kinds",
                        help="comparisons to make (repeatable; default: all): mode, vanilla, variant")
    parser.add_argument("--no-instructions", action="store_true", help="skip the cachegrind counts")
    parser.add_argument("--wallclock", action="store_true",
                        help="also time each benchmark with pyperf, in interleaved pairs of fresh containers")
    parser.add_argument("--pairs", type=int, default=PAIRS,
                        help=f"rounds of the wall clock: pairs per comparison and benchmark (default {PAIRS})")
    parser.add_argument("--rigor", choices=("fast", "rigorous"), default="fast",
                        help="pyperf's --fast (default) or --rigorous for the wall-clock runs")
    parser.add_argument("--existing-images", action="store_true",
                        help="measure the cells' tagged images as they are, never rebuilding (results say which are stale)")
    parser.add_argument("--config", default=str(CONFIG), help="suite configuration (default: benchmarks/suite.yaml)")


def run(matrix, cells, args, log) -> dict:
    only = [n for n in args.benchmarks.split(",") if n] if args.benchmarks else None
    if args.no_instructions and not args.wallclock:
        raise DriverError("--no-instructions without --wallclock measures nothing")
    if args.pairs < 6:
        raise DriverError(f"--pairs {args.pairs}: the signed-rank test cannot call a difference at p < 0.05 with "
                          "fewer than 6 pairs; give --pairs 6 or more (default 8)")
    return measure(matrix, cells, config=load_config(Path(args.config)), only=only, kinds=tuple(args.kinds or KINDS),
                   instructions=not args.no_instructions, wallclock=args.wallclock, rigor=args.rigor, pairs=args.pairs,
                   existing_images=args.existing_images, directory=Path(args.results), log=log)


def report(results: dict, path: Path) -> None:
    for entry in results["comparisons"]:
        gm = "-" if entry["geomean"] is None else f"{entry['geomean']:.4f}"
        print(f"{entry['title']}: instructions geometric mean {gm}")

"""The benchmarks: runtime overhead of the perf trampolines, their fidelity, and build cost (BENCHMARKS.md).

  common        what every group shares (plan of comparisons, statistics, targets, results files); imports no group
  suite         the standard suite: pyperformance's stdlib-only benchmarks, cachegrind counts + pyperf wall clock;
                the group (its arguments, a run one step after the other) over the suite_* modules:
    suite_pins          benchmarks/suite.yaml, the pinned pyperformance and pyperf wheels fetched, verified, extracted
    suite_plan          the stdlib-only benchmarks a cell runs (MANIFEST, requires-python); comparisons with images
    suite_containers    a benchmark file run in a cell's container (the suite's files read-only, pyperf on PYTHONPATH)
    suite_counts        cachegrind instruction counts per benchmark: L and 2L loops, the trampoline's maps checked
    suite_wallclock     pyperf's own timing runs in interleaved pairs, and their verdicts
    suite_results_file  results/bench/suite-<time>.json: its contents, saved after each measurement, analysed
    suite_page          a run's page (results/bench/suite-<time>.md) and the verdicts BENCHMARKS.md shows
  instructions  the project's own workloads as cachegrind instruction counts (and the valgrind images)
  wallclock     the project's own workloads, wall clock
  fidelity      attribution fidelity (perf, samply, py-spy), perf's own cost, map growth
  build_cost    cold / no-change / host builds
  jit_pipeline  -X perf_jit recorded, injected (perf inject --jit or jit-inject) and read, against N code objects
  summary       BENCHMARKS.md (the cost per cell, the summary table, an index) and each results file's page
  command       `python -m cpython_perf bench GROUP ...` (and __main__: `python -m cpython_perf.bench [GROUP]`)

No module of the package imports one that imports it back (tests/test_import_cycles.py).
"""

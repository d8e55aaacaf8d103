"""The benchmarks: runtime overhead of the perf trampolines, their fidelity, and build cost (BENCHMARKS.md).

  common        what every group shares (plan of comparisons, statistics, targets, results files); imports no group
  suite         the standard suite: pyperformance's stdlib-only benchmarks, cachegrind counts + pyperf wall clock
  instructions  the project's own workloads as cachegrind instruction counts (and the valgrind images)
  wallclock     the project's own workloads, wall clock
  fidelity      attribution fidelity (perf, samply, py-spy), perf's own cost, map growth
  build_cost    cold / no-change / host builds
  summary       BENCHMARKS.md (the cost per cell, the summary table, an index) and each results file's page
  command       `python -m cpython_perf bench GROUP ...` (and __main__: `python -m cpython_perf.bench [GROUP]`)

No module of the package imports one that imports it back (tests/test_import_cycles.py).
"""

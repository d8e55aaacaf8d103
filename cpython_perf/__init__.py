"""Driver of the cpython-perf build recipes and conformance suite.

One module per concern:
  matrix        load and validate matrix.yaml and recipes/
  sources       fetch, verify (sha256) and cache source tarballs
  patches       quilt series, DEP-3 headers, applying a series
  render        Jinja templates of docker/
  host          host tools (docker.io, mmdebstrap) and the Docker engine
  images        base image and cell images (Docker SDK builds)
  containers    running commands in a cell; perf capability probe
  guest         qemu-system guests of a foreign arch's cell (real perf on aarch64)
  perf_runs     the perf command lines of each perf mode
  perf_samples  parsing `perf script` output; call-chain measurements
  samply        samply's recording command and its saved profile, as perf_samples' samples
  tools         the tools image (samply, inferno's flame graphs) and py-spy, pinned in matrix.yaml
  regrtest      CPython's own regression tests: running them, comparing with the vanilla twin
  report        the matrix report (Markdown + HTML + JUnit per cell, flame graphs) from the JUnit files
  bench/        the benchmarks (BENCHMARKS.md; `python -m cpython_perf bench GROUP`):
    common        shared by every group (plan of comparisons, statistics, targets, results files)
    suite         the standard suite: pyperformance's stdlib-only benchmarks, cachegrind counts + pyperf
    wallclock     the project's own workloads, timed side by side
    instructions  the project's own workloads as cachegrind instruction counts
    fidelity      attribution fidelity (perf, samply, py-spy), perf's own cost, map growth
    build_cost    cold / no-change / host builds
    summary       BENCHMARKS.md and each run's page; command: the command line
  build         the operations the command line and the tests use
  cli           `python -m cpython_perf COMMAND ...`: every package's subcommands (COMMANDS) under one parser
  subcommands   what a subcommand is, and the one place each runs (a DriverError: `error: ...`, its exit status)
"""

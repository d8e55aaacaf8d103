"""Tests of cpython_perf.bench: the benchmarks."""

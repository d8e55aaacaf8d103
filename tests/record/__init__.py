"""Tests of cpython_perf.record: perf script parsing, the perf event probe, samply."""

"""Tests of cpython_perf.report: the results report."""

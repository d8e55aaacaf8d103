"""Tests of cpython_perf.check: CPython's regression tests, external interpreters."""

"""Tests of cpython_perf.source: fetching and verifying tarballs, signatures, pins, patch series."""

"""Tests of cpython_perf.lanes: the Debian lanes, series forms, the apt repository."""

"""Tests of cpython_perf.distro: the Debian lanes, series forms, the apt repository."""

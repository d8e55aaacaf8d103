"""Tests of cpython_perf.ci: the CI plan, the workflows, buildbot."""

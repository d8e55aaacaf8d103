"""Tests of cpython_perf.run: the containers programs run in, their capabilities, and whether the engine sees
this machine's paths."""

"""Tests of cpython_perf.build: rendering, the inputs digest, images, containers, registry, SBOM, reproducibility."""

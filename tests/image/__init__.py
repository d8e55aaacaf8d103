"""Tests of cpython_perf.image: rendering, the inputs digest, base and cell images, registry, SBOM, reproducibility."""

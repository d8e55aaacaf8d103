"""The image stage: a cell's image cpython-perf:<cell> made from the source stage's tarball and series.

pipeline.py takes a cell through the stages (build_cell): the source (cpython_perf.source.cell_source), the build
context (context.py: the Dockerfile rendered by render.py, the inputs digest), the image (cell_image.py, on the
base images of bases.py, with `docker build` of docker_build.py and the labels of labels.py) and its SBOM
(sbom.py).  Beside it: images made without a registry (bootstrap.py: mmdebstrap and `docker import`), published
images looked up by inputs digest (registry.py), the tools image (tools.py) and the reproducibility check of a
build (reproducibility.py)."""

"""Running the matrix on distributed CI engines (docs/ci.md, docs/buildbot.md).

plan  the jobs of one run, derived from matrix.yaml: image jobs, cell jobs and the report job, as JSON
      (`python -m cpython_perf plan`); .github/workflows/matrix.yml takes its job matrices from it.
"""

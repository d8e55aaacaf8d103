"""The changes docs/architecture.md promises a newcomer touch only the files it names (no Docker).

A new variant is matrix.yaml alone: a copy of it with one more variant gives its cells, their Dockerfiles with
the variant's flags, their place in the CI plan, their nox sessions and their rows in the generated variant
tables, with no code changed.  A new check script is one file in conformance/scripts/: a copy of conformance/
with one more check_*.py collects it for the cells that offer what its header requires, and only for them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from cpython_perf.ci import plan
from cpython_perf.image.render import render_cell_dockerfile
from cpython_perf.matrix import PROJECT_ROOT, load_matrix
from cpython_perf.report.generated_tables import variant_table

NEW_VARIANT = """\
  fpnoleaf:
    description: frame pointers, leaf functions without them
    cflags: -fno-omit-frame-pointer
"""


def matrix_copy(tmp_path: Path, text: str) -> Path:
    """matrix.yaml's text written beside links to what it names (recipes, patches, additions, keys)."""
    for name in ("recipes", "patches", "Python-additions", "keys", "docker"):
        (tmp_path / name).symlink_to(PROJECT_ROOT / name)
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    return path


def with_new_variant(text: str) -> str:
    """matrix.yaml with the variant fpnoleaf and a 3.13 cell of it claiming perf."""
    head, version, rest = text.partition('\n  "3.13":\n')
    assert "\nvariants:\n" in head and "\n    cells:\n" in rest
    head = head.replace("\nvariants:\n", "\nvariants:\n" + NEW_VARIANT, 1)
    return head + version + rest.replace("\n    cells:\n", "\n    cells:\n      fpnoleaf: {modes: [perf]}\n", 1)


def test_a_new_variant_is_matrix_yaml_only(tmp_path):
    matrix = load_matrix(matrix_copy(tmp_path, with_new_variant((PROJECT_ROOT / "matrix.yaml").read_text())))
    cell = matrix.cell("3.13-fpnoleaf")
    assert tuple(cell.modes) == ("perf",) and cell.series is not None
    dockerfile = render_cell_dockerfile(cell, "base:tag")
    assert "-fno-omit-frame-pointer" in dockerfile and "-mno-omit-leaf-frame-pointer" not in dockerfile
    selection = plan.select_cells(matrix, "schedule")
    assert "3.13-fpnoleaf" in selection.cells
    # the nox sessions are made from the matrix noxfile.py loads: the copy's own list names the new cell's
    listed = subprocess.run([sys.executable, "-c", NOX_SESSIONS, str(tmp_path / "matrix.yaml")],
                            capture_output=True, text=True, cwd=PROJECT_ROOT, check=True).stdout.split()
    assert {"build-3.13-fpnoleaf", "conformance-3.13-fpnoleaf"} <= set(listed)
    # the variant tables are written from the matrix (`python -m cpython_perf docs`), not by hand
    assert ("| `fpnoleaf` | frame pointers, leaf functions without them | CFLAGS `-fno-omit-frame-pointer` | "
            "`perf` (3.13) |") in variant_table(matrix)


# The session names noxfile.py registers, from the matrix at argv[1] in place of the project's; nox itself is
# not needed to list them (a stand-in module records each session's name).
NOX_SESSIONS = """
import sys, types
from pathlib import Path
import cpython_perf.matrix as m
names = []
def session(func=None, name=None, **options):
    def register(f):
        names.append(name or f.__name__)
        return f
    return register(func) if func else register
sys.modules["nox"] = types.SimpleNamespace(session=session, options=types.SimpleNamespace(), parametrize=None)
real = m.load_matrix
m.load_matrix = lambda path=None: real(Path(sys.argv[1]))
ns = {"__file__": str(Path("noxfile.py").resolve()), "__name__": "noxfile"}
exec(compile(Path("noxfile.py").read_text(), "noxfile.py", "exec"), ns)
print("\\n".join(names))
"""


def test_a_new_check_script_is_one_file(tmp_path):
    shutil.copytree(PROJECT_ROOT / "conformance", tmp_path / "conformance",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "conformance" / "scripts" / "check_newcomer_probe.py").write_text(
        "# requires: perf_jit\nimport sys\nsys.exit(0)\n")

    def collected(cell: str) -> list[str]:
        run = subprocess.run([sys.executable, "-m", "pytest", "conformance/test_checks.py", "--collect-only", "-q",
                              "-p", "no:cacheprovider", "--cell", cell], capture_output=True, text=True, cwd=tmp_path)
        assert run.returncode == 0, run.stdout + run.stderr
        return [line for line in run.stdout.splitlines() if "::" in line]

    matrix = load_matrix()
    with_jit = next(c.name for c in matrix.cells.values() if "perf_jit" in c.backends and not c.vanilla)
    without_jit = next(c.name for c in matrix.cells.values()
                       if c.backends and "perf_jit" not in c.backends and not c.vanilla)
    assert [t for t in collected(with_jit) if "check_newcomer_probe" in t] == [
        f"conformance/test_checks.py::test_check_script[{with_jit}-check_newcomer_probe]"]
    assert not [t for t in collected(without_jit) if "check_newcomer_probe" in t]

"""No import cycles among the modules of cpython_perf, and none among its stage packages: no two packages import
each other (parsed with ast: every import, also inside functions).

A package is a directory under cpython_perf/ (source, image, run, record, check, report, lanes, ci, bench,
profile); a module at the top (matrix, errors, host, progress, cli, doctor) counts as a package of its own.  The stages
import downwards only (source <- image <- run <- record <- check <- report), so a reader can follow a cell down one
stage after the other; docs/architecture.md lists the edges."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "cpython_perf"


def module_names(root: Path, package: str = "cpython_perf") -> dict[str, Path]:
    """Dotted name -> file of every module and package (__init__) under root."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules `name` imports (`import a.b`, `from a import b`, relative forms), anywhere in the file."""
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    out: set[str] = set()

    def add(target: str) -> None:
        if target in modules and target != name:
            out.add(target)

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[:len(here) - (node.level - 1)] if node.level > 1 else here
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            for alias in node.names:
                submodule = f"{prefix}.{alias.name}"
                add(submodule if submodule in modules else prefix)
    return out


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as [a, b, ..., a], or None."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = dict.fromkeys(graph, WHITE)
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node] = GREY
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if colour.get(nxt, WHITE) == GREY:
                return stack[stack.index(nxt):] + [nxt]
            if colour.get(nxt, WHITE) == WHITE:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        colour[node] = BLACK
        return None

    for node in sorted(graph):
        if colour[node] == WHITE:
            found = visit(node)
            if found:
                return found
    return None


def import_graph(root: Path = PACKAGE_DIR) -> dict[str, set[str]]:
    modules = module_names(root)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def package_of(module: str) -> str | None:
    """The stage package (or top-level module) a module belongs to: cpython_perf.image.context -> image,
    cpython_perf.matrix -> matrix; None for cpython_perf itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Package -> the other packages its modules import."""
    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        here = package_of(module)
        if here is None:
            continue
        out.setdefault(here, set())
        out[here].update(t for t in map(package_of, targets) if t is not None and t != here)
    return out


def mutual_pairs(packages: dict[str, set[str]], graph: dict[str, set[str]]) -> list[str]:
    """Each pair of packages importing each other, with the module imports that make each direction."""
    found = []
    for a in sorted(packages):
        for b in sorted(packages[a]):
            if a < b and a in packages.get(b, ()):
                edges = [f"{m} -> {t}" for m, ts in sorted(graph.items()) for t in sorted(ts)
                         if {package_of(m), package_of(t)} == {a, b}]
                found.append(f"{a} <-> {b}: " + "; ".join(edges))
    return found


def test_no_two_packages_import_each_other():
    graph = import_graph()
    packages = package_graph(graph)
    assert {"source", "image", "run", "record", "check", "report", "lanes", "ci", "bench", "profile"} <= set(packages)
    pairs = mutual_pairs(packages, graph)
    assert not pairs, "packages importing each other:\n" + "\n".join(pairs)
    cycle = find_cycle(packages)
    assert cycle is None, "import cycle between packages: " + " -> ".join(cycle)


def test_the_stages_import_downwards_only():
    """source <- image <- run <- record <- check <- report: no stage imports a later one."""
    order = ["source", "image", "run", "record", "check", "report"]
    packages = package_graph(import_graph())
    upward = [f"{a} -> {b}" for a in order for b in packages[a] if b in order and order.index(b) > order.index(a)]
    assert not upward, "a stage imports a later stage: " + ", ".join(upward)


def test_the_package_check_finds_a_back_import_in_a_copy_of_the_driver(tmp_path):
    """A copy of the real cpython_perf with one back-import added (the source stage importing the image
    stage's render): the pair check names it, and the stage order check too."""
    import shutil

    copy = tmp_path / "cpython_perf"
    shutil.copytree(PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert not mutual_pairs(package_graph(import_graph(copy)), import_graph(copy))
    patches = copy / "source" / "patches.py"
    patches.write_text(patches.read_text() + "\n\ndef _back():\n    from ..image import render\n")
    graph = import_graph(copy)
    pairs = mutual_pairs(package_graph(graph), graph)
    assert len(pairs) == 1 and pairs[0].startswith("image <-> source: ")
    assert "cpython_perf.source.patches -> cpython_perf.image.render" in pairs[0]
    assert find_cycle(package_graph(graph)) is not None


def test_the_package_check_finds_a_cycle_of_three_packages(tmp_path):
    root = tmp_path / "cpython_perf"
    for package, imports in (("a", "from ..b import x"), ("b", "from ..c import y"), ("c", "from ..a import z")):
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text("")
        (root / package / "m.py").write_text(imports + "\n")
        for name in ("x", "y", "z"):
            (root / package / f"{name}.py").write_text("")
    (root / "__init__.py").write_text("")
    graph = import_graph(root)
    packages = package_graph(graph)
    assert not mutual_pairs(packages, graph)
    assert set(find_cycle(packages)) == {"a", "b", "c"}


def test_no_import_cycles_in_cpython_perf():
    graph = import_graph()
    assert "cpython_perf.bench.common" in graph and "cpython_perf.bench.summary" in graph
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_bench_common_imports_no_benchmark_group():
    graph = import_graph()
    assert not {m for m in graph["cpython_perf.bench.common"] if m.startswith("cpython_perf.bench.")}


@pytest.fixture
def cyclic_package(tmp_path):
    root = tmp_path / "cpython_perf"
    (root / "bench").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "bench" / "__init__.py").write_text("")
    (root / "bench" / "wallclock.py").write_text("from .. import image\n\ndef f():\n    from . import fidelity\n")
    (root / "bench" / "fidelity.py").write_text("from . import wallclock\n")
    (root / "image.py").write_text("import os\n")
    return root


def test_the_check_finds_a_cycle_through_a_function_level_import(cyclic_package):
    graph = import_graph(cyclic_package)
    assert graph["cpython_perf.bench.wallclock"] == {"cpython_perf.image", "cpython_perf.bench.fidelity"}
    cycle = find_cycle(graph)
    assert cycle is not None and set(cycle) == {"cpython_perf.bench.wallclock", "cpython_perf.bench.fidelity"}
    (cyclic_package / "bench" / "fidelity.py").write_text("from .common import x\n")
    (cyclic_package / "bench" / "common.py").write_text("")
    assert find_cycle(import_graph(cyclic_package)) is None


def test_the_architecture_page_lists_the_import_graph():
    """docs/architecture.md's graph between packages is the code's (each line `package -> imported, ...`)."""
    import re

    page = (PACKAGE_DIR.parent / "docs" / "architecture.md").read_text()
    block = page.split("## Import graph", 1)[1].split("```", 2)[1]
    documented = {}
    for line in block.strip().splitlines():
        m = re.fullmatch(r"(\w+)\s+->\s+(.+)", line.strip())
        assert m, f"not a graph line: {line!r}"
        documented[m.group(1)] = set(m.group(2).replace(" ", "").split(","))
    # every package that imports another, less `python -m cpython_perf`'s __main__ (-> cli)
    actual = {p: deps for p, deps in package_graph(import_graph()).items() if deps and p != "__main__"}
    assert documented == actual

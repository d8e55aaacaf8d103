"""No import cycles among the modules of cpython_perf (parsed with ast: every import, also inside functions)."""

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
    (root / "bench" / "wallclock.py").write_text("from .. import build\n\ndef f():\n    from . import fidelity\n")
    (root / "bench" / "fidelity.py").write_text("from . import wallclock\n")
    (root / "build.py").write_text("import os\n")
    return root


def test_the_check_finds_a_cycle_through_a_function_level_import(cyclic_package):
    graph = import_graph(cyclic_package)
    assert graph["cpython_perf.bench.wallclock"] == {"cpython_perf.build", "cpython_perf.bench.fidelity"}
    cycle = find_cycle(graph)
    assert cycle is not None and set(cycle) == {"cpython_perf.bench.wallclock", "cpython_perf.bench.fidelity"}
    (cyclic_package / "bench" / "fidelity.py").write_text("from .common import x\n")
    (cyclic_package / "bench" / "common.py").write_text("")
    assert find_cycle(import_graph(cyclic_package)) is None

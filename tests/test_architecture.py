"""No import cycle between tiermem's modules, nor between its subpackages and top-level
modules taken as units (``tiermem.pipeline`` -> ``tiermem.components`` -> ``tiermem.pipeline``
counts, even when no single pair of modules imports each other). Function-level imports count
too: a lazy import hides a cycle from the interpreter, not from the design."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"engine": "tiermem", "slm": "tiermem.slm", "offline": "tiermem.offline",
           "training": "tiermem.training"}  # fmt: skip


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = [p for p in path.relative_to(ROOT / folder).with_suffix("").parts]
            found[".".join([package, *(p for p in parts if p != "__init__")])] = path
    return found


def _imports(tree: ast.Module) -> set[str]:
    hidden = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for inner in ast.walk(node)
    }
    names: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return names


def _unit(module: str) -> str:
    """A subpackage of tiermem is one unit; a top-level module is its own."""
    parts = module.split(".")
    return ".".join(parts[:2])


def import_graphs() -> tuple[nx.DiGraph, nx.DiGraph]:
    modules = _modules()
    graph, units = nx.DiGraph(), nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        for target in _imports(ast.parse(path.read_text())):
            while target.count(".") >= 1:  # a module imports its parent packages too
                if target in modules and target != name and not name.startswith(target + "."):
                    graph.add_edge(name, target)
                    if _unit(name) != _unit(target):
                        units.add_edge(_unit(name), _unit(target))
                target = target.rpartition(".")[0]
    return graph, units


def test_no_import_cycles_between_modules_or_subpackages() -> None:
    graph, units = import_graphs()
    assert graph.number_of_nodes() > 50  # the scan found the package
    assert list(nx.simple_cycles(graph)) == []
    assert sorted(sorted(c) for c in nx.simple_cycles(units)) == []


def test_the_scan_sees_a_cycle_between_subpackages() -> None:
    _, units = import_graphs()
    units.add_edge("tiermem.components", "tiermem.pipeline")  # what components used to do
    assert list(nx.simple_cycles(units))

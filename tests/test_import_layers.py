"""The package imports in one direction: no module imports another that (through any chain)
imports it back, and no subpackage imports one that imports it back. Imports inside functions
count: a lazy import hides a cycle from Python, not from a reader."""

import ast
import graphlib
from pathlib import Path

from conftest import REPO

SRC = REPO / "src"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The nudgerl modules a file imports, anywhere in it (``from a.b import c`` names a.b.c when
    that is a module, else a.b)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.update(f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module
                         for a in node.names)
    return {m for m in found if m in modules}


def _graph() -> dict[str, set[str]]:
    files = sorted((SRC / "nudgerl").rglob("*.py"))
    modules = {_module_name(f) for f in files}
    # a package's __init__ only hands names on: importing it is importing the package's modules
    return {_module_name(f): _imports(f, modules) - {_module_name(f)} for f in files if f.name != "__init__.py"}


def _room(module: str) -> str:
    """nudgerl.evaluation.grading -> nudgerl.evaluation; nudgerl.cli -> nudgerl.cli"""
    parts = module.split(".")
    return ".".join(parts[:2])


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
    except graphlib.CycleError as e:
        return e.args[1]
    return None


def test_no_module_imports_itself_back():
    assert _cycle(_graph()) is None


def test_no_subpackage_imports_itself_back():
    rooms: dict[str, set[str]] = {}
    for module, deps in _graph().items():
        rooms.setdefault(_room(module), set()).update(_room(d) for d in deps if _room(d) != _room(module))
    assert _cycle(rooms) is None


def test_a_cycle_is_found():
    """The check itself: a loop through a lazy import is reported with its members."""
    assert set(_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}})) == {"a", "b", "c"}
    tree = {"nudgerl.x.m": {"nudgerl.y.n"}, "nudgerl.y.n": {"nudgerl.x.k"}, "nudgerl.x.k": set()}
    assert _cycle(tree) is None  # modules: no loop
    rooms = {"nudgerl.x": {"nudgerl.y"}, "nudgerl.y": {"nudgerl.x"}}
    assert _cycle(rooms) is not None  # but the packages import each other

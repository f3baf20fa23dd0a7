"""The package's import graph, read from the source (an AST walk, nothing imported).

Every `import` counts, wherever it stands (module level, inside a function, under TYPE_CHECKING): a cycle
is a cycle even when a lazy import keeps it from failing at start-up. Importing a package runs its
`__init__`, but that is not counted as an edge (else every package would be a cycle with its modules).

The swarm's rooms: `client/` never imports `server/` or `observe/` (a generated project's client venv has
neither uvicorn nor torch, and the client must not lean on the server's internals); at import time (the
imports a module runs when it is loaded) the rooms form no circle: `server/` may write through
`observe/`'s metrics and loggers because those import nothing of `server/` when loaded.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "vibe_rl"
SWARM = "vibe_rl.swarm"
ROOMS = ("client", "server", "observe")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The vibe_rl modules one import statement names (a `from pkg import sub` names pkg.sub when it is a module)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module.split(".") if is_package else module.split(".")[:-1]
            package = package[: len(package) - (node.level - 1)]
            base = ".".join(package + ([base] if base else []))
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names]
    out = []
    for name in names:
        while name and name not in MODULES:  # `import a.b.c` of a module: the longest prefix that is one
            name = name.rpartition(".")[0]
        if name and name != module:
            out.append(name)
    return out


def imports(path: Path) -> tuple[set[str], set[str]]:
    """(every vibe_rl module this file imports, the ones it imports when it is loaded: module level, not
    under TYPE_CHECKING)."""
    module = module_name(path)
    is_package = path.name == "__init__.py"
    every: set[str] = set()
    at_load: set[str] = set()

    def walk(node: ast.AST, loaded: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found = _targets(child, module, is_package)
                every.update(found)
                if loaded:
                    at_load.update(found)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                walk(child, False)
            elif isinstance(child, ast.If) and _is_type_checking(child):
                for sub in child.body:
                    walk(ast.Module(body=[sub], type_ignores=[]), False)
                for sub in child.orelse:
                    walk(ast.Module(body=[sub], type_ignores=[]), loaded)
            else:
                walk(child, loaded)

    walk(ast.parse(path.read_text(encoding="utf-8")), True)
    return every, at_load


GRAPH = {name: imports(path) for name, path in MODULES.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component of more than one node (Tarjan), as sorted lists."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def room(module: str) -> str | None:
    parts = module.split(".")
    if module.startswith(SWARM + ".") and len(parts) > 3 and parts[2] in ROOMS:
        return parts[2]
    return None


def test_the_walk_sees_the_package():
    assert "vibe_rl.swarm.client.sync_client" in MODULES and "vibe_rl.swarm.server.app" in MODULES
    every, _ = GRAPH["vibe_rl.swarm.server.app"]
    assert "vibe_rl.swarm.server.serving" in every  # a lazy import (inside build_app) is an edge too


def test_no_import_cycle_between_modules():
    found = cycles({name: every for name, (every, _) in GRAPH.items()})
    assert not found, f"import cycles (each a set of modules that import each other): {found}"


def test_a_cycle_is_found_when_there_is_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


@pytest.mark.parametrize("forbidden", ["server", "observe"])
def test_the_client_never_imports_the_server_or_observe(forbidden):
    bad = sorted(f"{name} -> {target}" for name, (every, _) in GRAPH.items() if room(name) == "client"
                 for target in every if room(target) == forbidden)
    assert not bad, f"client/ must stay light and apart from {forbidden}/: {bad}"


def test_the_rooms_form_no_circle_when_loaded():
    rooms: dict[str, set[str]] = {r: set() for r in ROOMS}
    for name, (_, at_load) in GRAPH.items():
        src = room(name)
        for target in at_load:
            dst = room(target)
            if src and dst and src != dst:
                rooms[src].add(dst)
    assert not cycles(rooms), f"rooms importing each other at load time: {rooms}"

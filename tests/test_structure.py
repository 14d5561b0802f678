"""The codebase's shape, checked over its syntax trees: no import cycles, no oversized modules.

Two graphs are checked. Between *units* (below) and between *files*: a module imports another
module (``from warehouse.stores import base`` names the module ``base``, ``from warehouse.stores
import Store`` the package's ``__init__``), lazily or not, or names it in an
``importlib.import_module("warehouse....")`` call. Both must be DAGs.

A *unit* is a subpackage of ``warehouse`` (``warehouse.stores``) or a top-level module
(``warehouse.errors``). An edge is any import from one unit into another, the lazy ones inside
functions included: deferring an import keeps the CLI fast but does not make a dependency go
away. Only ``TYPE_CHECKING`` blocks (annotations) and the package's own lazy re-exports in
``warehouse/__init__.py`` are not edges. Units must form a DAG.
"""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "warehouse"
MAX_LINES = 600


def unit_of(module: str) -> str:
    """``warehouse.stores.elastic`` -> ``warehouse.stores``; ``warehouse.errors`` stays."""
    parts = module.split(".")
    if len(parts) >= 2 and (PACKAGE / parts[1]).is_dir():
        return ".".join(parts[:2])
    return ".".join(parts[:2]) if len(parts) >= 2 else module


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path) -> set[str]:
    """Every ``warehouse`` module this file imports, anywhere but under ``TYPE_CHECKING``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    annotations_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and _is_type_checking(node)
        for inner in ast.walk(node)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in annotations_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.add(target)
            # ``from warehouse import stores`` imports the subpackage itself
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] == "warehouse"}


def file_imports(path: Path) -> set[str]:
    """The ``warehouse`` modules (or packages) one file imports, ``TYPE_CHECKING`` aside, with
    ``from pkg import mod`` naming ``pkg.mod`` alone and ``import_module("...")`` strings
    followed."""
    modules = known_modules()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    annotations_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and _is_type_checking(node)
        for inner in ast.walk(node)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in annotations_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            named = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules]
            found.update(named)
            if len(named) < len(node.names):
                found.add(target)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value)
    return {name for name in found if name.split(".")[0] == "warehouse"}


def file_graph() -> dict[str, set[str]]:
    modules = known_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        if name == "warehouse":
            continue  # the package's lazy re-exports are not a dependency of anything
        for target in file_imports(path):
            while target not in modules and "." in target:
                target = target.rpartition(".")[0]
            if target not in ("warehouse", name):
                graph.setdefault(name, set()).add(target)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The graph's cycles, as its strongly connected components of two or more nodes."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.add(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def known_modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def unit_graph() -> dict[str, set[str]]:
    modules = known_modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        if name == "warehouse":
            continue  # the package's lazy re-exports are not a dependency of anything
        source = unit_of(name)
        for target in imports_of(path):
            # ``from warehouse.stores import base`` names a module; ``... import Store`` not
            while target not in modules and "." in target:
                target = target.rpartition(".")[0]
            if target == "warehouse":
                continue
            dest = unit_of(target)
            if dest != source:
                graph.setdefault(source, set()).add(dest)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as a path ``[a, b, ..., a]``, or None when the graph is a DAG."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def dfs(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (cycle := dfs(nxt)) is not None:
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := dfs(node)) is not None:
            return cycle
    return None


def test_the_checker_finds_a_planted_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}}) is None


def test_the_checker_sees_real_edges() -> None:
    graph = unit_graph()
    assert "warehouse.stores" in graph["warehouse.query"]  # views run on the store contract


def test_no_import_cycle_between_units() -> None:
    cycle = find_cycle(unit_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


# File-level cycles that remain while their owners break them (issue 26, item 3); each entry
# goes when its cycle does, and no new cycle may join the list.
KNOWN_FILE_CYCLES = {
    frozenset({"warehouse.stores.elastic", "warehouse.stores.elastic_admin"}),
}


def test_the_file_checker_finds_a_planted_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c", "d"}, "c": {"a"}, "d": set()}
    assert strongly_connected(graph) == [frozenset({"a", "b", "c"})]


def test_the_file_checker_sees_real_edges() -> None:
    graph = file_graph()
    assert "warehouse.stores.base" in graph["warehouse.stores.local"]
    # ``from warehouse.stores import base`` names base, not the package's factory
    assert "warehouse.stores" not in graph.get("warehouse.stores.local_query", set())


def test_no_import_cycle_between_files() -> None:
    cycles = [c for c in strongly_connected(file_graph()) if c not in KNOWN_FILE_CYCLES]
    assert not cycles, "import cycles between files: " + "; ".join(
        " <-> ".join(sorted(c)) for c in cycles
    )


class ModuleSizeWarning(UserWarning):
    """A module over the size where one idea usually has become two (shown, never failing)."""


def test_modules_over_600_lines_are_named() -> None:
    """The cap is a prompt to split by idea, not a rule to bend code around: a module over it
    is reported in the warnings summary (pyproject's filterwarnings shows this category)."""
    sizes = {
        name: len(path.read_text(encoding="utf-8").splitlines())
        for name, path in known_modules().items()
    }
    for name, n in sorted(sizes.items()):
        if n > MAX_LINES:
            warnings.warn(
                f"{name} has {n} lines (over {MAX_LINES}): split it by idea",
                ModuleSizeWarning,
                stacklevel=1,
            )
    assert sizes  # the walk found the package

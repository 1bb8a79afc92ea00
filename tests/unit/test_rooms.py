"""The rooms of the core (its top-level packages: ``tether.run``, ``tether.store``, ...) import
each other in one direction only: the graph of rooms has no circle. The module-level test
(tests/unit/test_layers.py) finds circles between modules; this one finds the knot a newcomer
meets first, rooms that import each other both ways, each through different modules.

It reads each module's imports at module level and under ``if TYPE_CHECKING:`` (a type a reader
must follow is a dependency too); imports inside functions are counted apart, in
:func:`inner_imports`, whose total has a ceiling that only comes down."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

from tests.layers import lay_out

Edges = dict[str, dict[str, list[str]]]


def _module(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _room(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:3]) if parts[1:2] == ["tui"] else ".".join(parts[:2])


def _imported(node: ast.stmt, package: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            return [".".join(base + ([node.module] if node.module else []))]
        if node.module == "tether":  # from tether import harness: the room is the name
            return [f"tether.{a.name}" for a in node.names]
        return [node.module or ""]
    return []


def _top_level(tree: ast.Module) -> list[ast.stmt]:
    """The module's own statements, with the bodies of ``if``/``try`` at module level
    (``if TYPE_CHECKING:``, an optional import) but not of functions or classes."""
    found, todo = [], list(tree.body)
    while todo:
        node = todo.pop()
        found.append(node)
        if isinstance(node, ast.If | ast.Try):
            todo += node.body + node.orelse + getattr(node, "handlers", []) + getattr(node, "finalbody", [])
        if isinstance(node, ast.ExceptHandler):
            todo += node.body
    return found


def room_graph(root: Path) -> Edges:
    """room -> room it imports -> the module imports that make the edge."""
    edges: Edges = defaultdict(lambda: defaultdict(list))
    for path in sorted((root / "tether").rglob("*.py")):
        module = _module(path, root)
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for node in _top_level(ast.parse(path.read_text())):
            for target in _imported(node, package):
                if not target.startswith("tether.") or target.startswith("tether.tui") != module.startswith("tether.tui"):
                    continue  # the console's rooms are held by the layers contract, not here
                mine, theirs = _room(module), _room(target)
                if mine != theirs and module != "tether":  # the root __init__ re-exports from every room
                    edges[mine][theirs].append(f"{module} -> {target}")
    return edges


def circles(edges: Edges) -> list[list[str]]:
    """The strongly connected sets of rooms with more than one room (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(room: str) -> None:
        index[room] = low[room] = len(index)
        stack.append(room)
        for other in edges.get(room, {}):
            if other not in index:
                visit(other)
                low[room] = min(low[room], low[other])
            elif other in stack:
                low[room] = min(low[room], index[other])
        if low[room] == index[room]:
            members = []
            while (member := stack.pop()) != room:
                members.append(member)
            if members:
                found.append(sorted([room, *members]))

    for room in sorted(edges):
        if room not in index:
            visit(room)
    return found


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return lay_out(tmp_path_factory.mktemp("rooms"))


def _said(edges: Edges, circle: list[str]) -> str:
    return "\n".join(f"{a} imports {b}: {', '.join(edges[a][b][:3])}"
                     for a in circle for b in circle if b in edges.get(a, {}))


def test_the_rooms_import_each_other_one_way(tree: Path) -> None:
    edges = room_graph(tree)
    found = circles(edges)
    assert not found, "rooms that import each other round a circle:\n" + "\n\n".join(_said(edges, c) for c in found)


def test_the_vocabulary_is_the_bottom_room(tree: Path) -> None:
    assert not room_graph(tree).get("tether.vocab"), "tether.vocab imports another room"
    assert len(room_graph(tree)) > 10  # the walk saw the rooms: a test that reads nothing cannot pass


def test_a_room_that_imports_back_is_found(tree: Path, tmp_path: Path) -> None:
    crossed = lay_out(tmp_path)
    store = crossed / "tether" / "store" / "summary.py"
    store.write_text(store.read_text() + "from tether.run.loop import drive\n")  # the run imports the store
    found = circles(room_graph(crossed))
    assert any({"tether.run", "tether.store"} <= set(c) for c in found), found

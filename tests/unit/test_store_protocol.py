"""Outside core/store/, a store is a :class:`tether.store.protocol.Store` (a run's hold a
``Handle``), typed as one and used through its calls: never ``Any``, never asked which store
it is (issue 42, item 3). The imports are import-linter's (pyproject.toml, tests/unit/test_layers.py);
these scans hold the annotations and the checks, which it does not see."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
STORE = REPO / "core" / "store"
IMPLEMENTATIONS = {"RunStore", "PgStore", "Database", "RunHandle", "PgHandle"}

# Checks not yet replaced by the protocol, with why: the test fails on one not listed here,
# and on a listed one that is gone (then take it off).
KNOWN_CHECKS: dict[str, str] = {}


def _sources() -> list[Path]:
    return sorted(p for room in ("core", "tui") for p in (REPO / room).rglob("*.py") if STORE not in p.parents)


def _names_a_store(name: str) -> bool:
    return name.split("_")[-1] in ("store", "handle") or name in ("store", "handle")


def _is_any(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        return annotation.value.strip() in ("Any", "object")
    return isinstance(annotation, ast.Name) and annotation.id in ("Any", "object")


def _any_typed(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and _names_a_store(node.arg) and _is_any(node.annotation):
            found.append((node.lineno, node.arg))
        elif isinstance(node, ast.AnnAssign) and _is_any(node.annotation):
            target = node.target
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            if _names_a_store(name):
                found.append((node.lineno, name))
    return found


def _which_store_checks(tree: ast.AST) -> list[tuple[int, str]]:
    """isinstance(x, RunStore|PgStore|...), type(store), and getattr/hasattr(store, ...)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or not node.args:
            continue
        fn, first = node.func.id, node.args[0]
        if fn == "isinstance" and len(node.args) == 2:
            kinds = node.args[1].elts if isinstance(node.args[1], ast.Tuple) else [node.args[1]]
            if any(isinstance(k, ast.Name) and k.id in IMPLEMENTATIONS for k in kinds):
                found.append((node.lineno, ast.unparse(node)))
        elif fn in ("getattr", "hasattr", "type"):
            subject = first.attr if isinstance(first, ast.Attribute) else getattr(first, "id", "")
            if _names_a_store(subject):
                found.append((node.lineno, ast.unparse(node)))
    return found


def test_no_store_or_handle_is_typed_any_outside_the_store() -> None:
    found = [f"{path.relative_to(REPO)}:{line}: {name}"
             for path in _sources() for line, name in _any_typed(ast.parse(path.read_text()))]
    assert found == [], "type these as tether.store.protocol.Store / Handle:\n" + "\n".join(found)


def test_nothing_outside_the_store_asks_which_store_it_has() -> None:
    found: dict[str, list[str]] = {}
    for path in _sources():
        checks = _which_store_checks(ast.parse(path.read_text()))
        if checks:
            found[str(path.relative_to(REPO))] = [f"{line}: {text}" for line, text in checks]
    unknown = {path: checks for path, checks in found.items() if path not in KNOWN_CHECKS}
    assert unknown == {}, "ask the store through the protocol (tether.store.protocol.Store) instead"
    gone = set(KNOWN_CHECKS) - set(found)
    assert gone == set(), f"no check left in {sorted(gone)}: take it off KNOWN_CHECKS"


def test_the_scans_see_what_they_look_for() -> None:
    """Each scan finds the thing it forbids, so that an empty result means something."""
    typed = ast.parse("def f(store: Any, run_store: 'Any', *, handle: object, n: Any) -> None:\n"
                      "    self.store: Any = None\n")
    assert sorted(_any_typed(typed)) == [(1, "handle"), (1, "run_store"), (1, "store"), (2, "store")]
    checks = ast.parse("isinstance(s, RunStore)\nisinstance(s, (int, PgStore))\nhasattr(store, 'pool')\n"
                       "getattr(self.store, 'root', None)\ntype(store).__module__\nisinstance(s, Path)\n")
    assert len(_which_store_checks(checks)) == 5

"""One way to drive a run (tether.run.driver): every driver stops a run the same way, and the
interface stays small. Both are read from the source (ast), so a new driver that builds its own
``RunStopped``, or a function that grows past seven parameters, fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support import REPO

CORE = REPO / "core"
MAX_PARAMETERS = 7


def _built(tree: ast.AST, name: str) -> list[int]:
    """The lines where ``name(...)`` (or ``x.name(...)``) is called."""
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call) and
            ((isinstance(node.func, ast.Name) and node.func.id == name)
             or (isinstance(node.func, ast.Attribute) and node.func.attr == name))]


def _sites(name: str) -> dict[str, list[int]]:
    found = {}
    for path in sorted(CORE.rglob("*.py")):
        lines = _built(ast.parse(path.read_text()), name)
        if lines:
            found[path.relative_to(CORE).as_posix()] = lines
    return found


def test_run_stopped_is_built_in_one_place() -> None:
    """Only :func:`tether.vocab.events.run_stopped` makes the event, from the run's own state."""
    assert list(_sites("RunStopped")) == ["vocab/events.py"]
    assert len(_sites("RunStopped")["vocab/events.py"]) == 1


def test_drivers_stop_runs_through_the_driver() -> None:
    """Tether's loop, ACP runs, programs' runs and a queue worker that parks a run end them with
    ``RunDriver.finish`` (or ``finish_blocking``); the event is otherwise made only among the
    events of a run nobody drives that ends (a deadline, a Stop of a run saved waiting), which
    the driver records."""
    assert set(_sites("run_stopped")) == {"run/driver.py", "approvals/decisions.py", "approvals/deadlines.py"}


def _parameters(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    args = fn.args
    names = [a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)]
    names += [a.arg for a in (args.vararg, args.kwarg) if a is not None]
    return [n for n in names if n not in ("self", "cls")]


def _functions(path: Path) -> dict[str, list[str]]:
    tree = ast.parse(path.read_text())
    found: dict[str, list[str]] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                found[prefix + child.name] = _parameters(child)
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return found


def test_no_function_of_the_driver_takes_more_than_seven_parameters() -> None:
    functions = _functions(CORE / "run" / "driver.py")
    assert "RunDriver.finish" in functions
    assert {name: len(p) for name, p in functions.items() if len(p) > MAX_PARAMETERS} == {}


@pytest.mark.parametrize("module, function", [
    ("acp/drive.py", "drive_acp"),
    ("harness.py", "Harness.operate"),
    ("run/loop.py", "RunLoop.__init__"),
    ("run/tracked.py", "TrackedRun.__init__"),
    ("acp/run.py", "AcpRun.__init__"),
    ("run/track.py", "track"),
    ("run/tracked.py", "new_state"),
])
def test_the_drivers_entry_points_take_at_most_seven_parameters(module: str, function: str) -> None:
    """Each driver is handed the run's RunDriver; the rest of what it needs comes in a config
    object (tether.run.driver.Operation, tether.acp.drive.AcpHost, tether.acp.run.AcpRunOptions,
    tether.run.tracked.Tracking)."""
    parameters = _functions(CORE / module)[function]
    assert len(parameters) <= MAX_PARAMETERS, parameters


def test_the_count_finds_a_long_signature(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("class A:\n    def f(self, a, b, c, d, e, f, g, *, h): ...\n")
    assert len(_functions(source)["A.f"]) == 8


DRIVING = ("run", "acp/run.py", "acp/drive.py", "harness.py", "integrations", "workers", "actions", "approvals")
"""The code that drives runs or acts on them: the loop, ACP runs, programs' runs, the harness,
the integrations, the queue workers, the operator actions and the approvals."""

PUBLIC = {
    "harness.py:Harness.__init__": 15, "harness.py:Harness.create": 8, "harness.py:Harness.run": 8,
    "harness.py:Harness.approve": 12, "harness.py:Harness.reject": 10, "harness.py:Harness.track": 14,
    "harness.py:Harness.decide": 11, "integrations/openai_agents.py:run": 8,
}
"""The library's keyword API (tether.Harness, and tether.integrations.openai_agents.run, which
takes the SDK's own Runner.run options): programs call these by keyword, so they are capped
where they stand rather than cut; every other function here takes at most seven."""


def _driving() -> list[Path]:
    found: list[Path] = []
    for where in DRIVING:
        path = CORE / where
        found += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    return found


def test_the_run_driving_code_takes_at_most_seven_parameters() -> None:
    over = {f"{path.relative_to(CORE).as_posix()}:{name}": len(parameters)
            for path in _driving() for name, parameters in _functions(path).items()
            if len(parameters) > MAX_PARAMETERS}
    assert len(_driving()) > 40  # the walk found the modules: a count of nothing cannot pass
    assert {name: n for name, n in over.items() if n > PUBLIC.get(name, MAX_PARAMETERS)} == {}
    assert set(PUBLIC) <= set(over), f"these take seven or fewer now: take them off PUBLIC: {set(PUBLIC) - set(over)}"

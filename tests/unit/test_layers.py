"""The layers hold, and a crossed one fails ``make test``: the contracts are checked over core/
and tui/ laid out as the installed package (tests/layers.py), since grimp reads a package from
one folder and ours is two."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.layers import lay_out, lint


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    return lay_out(tmp_path)


def test_the_tree_keeps_every_contract(tree: Path) -> None:
    done = lint(tree)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(("module", "crossing", "contract"), [
    ("tether/run/crossing.py", "import tether.tui.app", "The core imports neither the console"),
    ("tether/web/crossing.py", "from tether.tui import cli", "The web server imports neither"),
    ("tether/tui/widgets/crossing.py", "import tether.tui.cli", "The console does not import the CLI"),
    ("tether/tui/widgets/crossing.py", "import tether.tui.views", "The console does not import the CLI"),
    ("tether/tui/state/crossing.py", "from tether.tui.widgets import changes", "The console does not import the CLI"),
    ("tether/store/files/crossing.py", "from tether.store.postgres import store", "The two stores do not import each other"),
    ("tether/store/postgres/crossing.py", "import tether.store.files.layout", "The two stores do not import each other"),
    ("tether/run/crossing.py", "from tether.store.files.store import RunStore", "The run imports no store implementation"),
    ("tether/run/crossing.py", "from tether.store import spec", "The run imports no store implementation"),
    ("tether/store/changes.py", "import tether.store.postgres.connection", "The shared store modules import neither"),
    ("tether/store/private.py", "from tether.store.files import layout", "The shared store modules import neither"),
    ("tether/tui/crossing.py", "from tether.store.files.store import RunStore", "No room but the store imports a store"),
    ("tether/web/crossing.py", "import tether.store.postgres.watch", "No room but the store imports a store"),
    ("tether/notify/links.py", "from tether.store.files import layout", "No room but the store imports a store"),
    ("tether/harness.py", "from tether.store.postgres.store import PgStore", "No room but the store imports a store"),
    ("tether/workspaces/crossing.py", "import tether.store.files.tail", "No room but the store imports a store"),
    ("tether/run/crossing.py", "from tether.demo.agents import DEMO", "Nothing in the core imports the demo"),
    ("tether/workers/crossing.py", "import tether.demo.provider", "Nothing in the core imports the demo"),
    ("tether/tui/state/choices.py", "from tether.demo.agents import DEMO", "The console imports no demo"),
    ("tether/tui/widgets/crossing.py", "import tether.demo.provider.server", "The console imports no demo"),
    ("tether/acp/touches.py", "import tether.acp.events", "No cycles between the modules of a room"),
    ("tether/run/crossing.py", "from tether.workspaces import lifecycle", "The run and the agents import no workspace"),
    ("tether/agents/crossing.py", "import tether.workspaces.git", "The run and the agents import no workspace"),
    ("tether/tui/cli/crossing.py", "from tether.store import operate", "The fronts act on runs through"),
    ("tether/web/crossing.py", "from tether.workers.decide import decide", "The fronts act on runs through"),
    ("tether/acp/serving/crossing.py", "import tether.run.controls", "The fronts act on runs through"),
    ("tether/workers/crossing.py", "from tether.store.operate import request", "The workers act on runs through"),
])
def test_a_crossed_layer_breaks_its_contract(tree: Path, module: str, crossing: str, contract: str) -> None:
    path = tree / module
    before = path.read_text() if path.exists() else '"""Crosses a layer on purpose."""\n'
    path.write_text(f"{before}{crossing}\n")  # an existing module gains the import: a cycle, say
    done = lint(tree)
    assert done.returncode != 0
    broken = [line for line in done.stdout.splitlines() if " BROKEN" in line]  # "BROKEN (2 ignored imports)" too
    assert any(line.startswith(contract) for line in broken), done.stdout


# The test fails on a circle not listed here, and on a listed one that is gone.
KNOWN_CYCLES: list[set[str]] = []  # a circle left on purpose would be listed here, with its reason

_CYCLES = """
import json, sys
import grimp

graph = grimp.build_graph("tether", cache_dir=None)
index, low, stack, on_stack, found = {}, {}, [], set(), []
sys.setrecursionlimit(100_000)

def visit(module):  # Tarjan: the strongly connected components of the import graph
    index[module] = low[module] = len(index)
    stack.append(module)
    on_stack.add(module)
    for imported in graph.find_modules_directly_imported_by(module):
        if imported not in index:
            visit(imported)
            low[module] = min(low[module], low[imported])
        elif imported in on_stack:
            low[module] = min(low[module], index[imported])
    if low[module] == index[module]:
        component = []
        while True:
            member = stack.pop()
            on_stack.discard(member)
            component.append(member)
            if member == module:
                break
        if len(component) > 1:
            inside = set(component)
            found.append({m: sorted(graph.find_modules_directly_imported_by(m) & inside) for m in sorted(component)})

for module in sorted(graph.modules):
    if module not in index and not module.startswith("tether.tui"):
        visit(module)
print(json.dumps(found))
"""


def cycles(tree: Path) -> list[dict[str, list[str]]]:
    """Every set of modules of tether (the console's aside) that import each other round in a
    circle, with who imports whom inside it: grimp's graph of the laid-out tree, counting
    imports inside functions and under TYPE_CHECKING too (a circle a type checker follows is
    still a circle for a reader)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-c", _CYCLES], capture_output=True, text=True, cwd=tree, env=env,
                          timeout=300, check=True)
    return json.loads(done.stdout)


def test_no_module_imports_itself_round_a_circle(tree: Path) -> None:
    found = cycles(tree)
    unknown = [c for c in found if set(c) not in KNOWN_CYCLES]
    words = ["; ".join(f"{m} imports {', '.join(imported)}" for m, imported in c.items()) for c in unknown]
    assert not unknown, "modules that import each other round a circle:\n" + "\n".join(words)
    gone = [sorted(k) for k in KNOWN_CYCLES if k not in [set(c) for c in found]]
    assert not gone, f"these circles are broken now: take them off KNOWN_CYCLES: {gone}"


def test_a_circle_is_found_and_said(tree: Path) -> None:
    (tree / "tether" / "vocab" / "cancel.py").write_text(
        (tree / "tether" / "vocab" / "cancel.py").read_text() + "import tether.run.loop\n")
    circle = next(c for c in cycles(tree) if "tether.vocab.cancel" in c)
    assert "tether.run.loop" in circle and "tether.vocab.cancel" in circle["tether.run.loop"]

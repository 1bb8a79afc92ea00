"""The layers hold, and a crossed one fails ``make test``: the contracts are checked over core/
and tui/ laid out as the installed package (tests/layers.py), since grimp reads a package from
one folder and ours is two."""

from __future__ import annotations

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
    ("tether/tui/components/crossing.py", "import tether.tui.cli", "The console does not import the CLI"),
])
def test_a_crossed_layer_breaks_its_contract(tree: Path, module: str, crossing: str, contract: str) -> None:
    (tree / module).write_text(f'"""Crosses a layer on purpose."""\n{crossing}\n')
    done = lint(tree)
    assert done.returncode != 0
    broken = [line for line in done.stdout.splitlines() if line.endswith("BROKEN")]
    assert any(line.startswith(contract) for line in broken), done.stdout

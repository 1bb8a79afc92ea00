"""Snapshot tests of the console's screens (pytest-textual-snapshot), one line a scene.

The scenes (tests/scenes.py) also make the README's pictures. Stable across runs: fixed
run ids, a still console (no times or durations on screen, no blinking cursors), temp
dirs never shown, and every run finished (or waiting) before the picture is taken.
Regenerate with ``--snapshot-update`` after a deliberate change, and look at the SVGs
before committing them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tether.agents.config import load_config
from tether.tui.screens.costs import CostsScreen

from tests import fleet_costs, scenes
from tests.support import home  # noqa: F401 (home: a fixture, the workspaces under it)

# Snapshots compare what a screen painted: alone, after the parallel run (make test), where
# a loaded machine cannot catch a frame half-painted.
pytestmark = pytest.mark.serial


@pytest.fixture
def snap(snap_compare: Any, tmp_path: Path) -> Callable[..., bool]:
    """Compare ``scene`` on a fresh still console (made with ``app``'s options) with its snapshot."""

    def compare(scene: scenes.Scene, **app: Any) -> bool:
        return snap_compare(scenes.console(tmp_path, **app), terminal_size=scene.size, press=list(scene.press),
                            run_before=scene.setup)

    return compare


def test_completed_plan(snap: Any) -> None:
    assert snap(scenes.completed_plan)


def test_approval_dialog(snap: Any) -> None:
    assert snap(scenes.approval_dialog)


def test_transcript_after_rejection(snap: Any) -> None:
    assert snap(scenes.transcript_after_rejection)


def test_runaway_stopped_by_its_budget(snap: Any) -> None:
    assert snap(scenes.runaway_stopped_by_its_budget)


def test_research_with_its_child(snap: Any) -> None:
    """The parent selected: its child listed under it, the tree cost, the child's events in its trace."""
    assert snap(scenes.research_with_its_child)


def test_research_child_selected(snap: Any) -> None:
    """The child selected (down from the parent): its own transcript and limits (6 turns)."""
    assert snap(scenes.research_child_selected)


def test_new_run_dialog(snap: Any) -> None:
    assert snap(scenes.new_run_dialog)


def test_help_screen(snap: Any) -> None:
    assert snap(scenes.help_screen)


def test_small_terminal(snap: Any) -> None:
    assert snap(scenes.small_terminal)


def test_changes_pane(snap: Any, home: Path) -> None:
    """A run's Changes pane (``c``): a copy of the demo's folder with a line changed, a file
    added and one deleted, the +/- counts, and the highlighted file's coloured diff."""
    assert snap(scenes.changes_pane)


def test_new_run_dialog_with_an_agent_file(snap: Any, tmp_path: Path) -> None:
    """The agent file's agents first (the preselected one's task asked for), then the demo."""
    (tmp_path / "tickets").mkdir()
    path = tmp_path / "tether.toml"
    path.write_text('''
[agents.triage]
model = "qwen2.5-7b-instruct"
base_url = "http://127.0.0.1:8080/v1"
tools = ["tether:list_files", "tether:read_file"]
workspace = "./tickets"
max_turns = 8
budget_usd = 0.25

[agents.summarise]
model = "qwen2.5-7b-instruct"
base_url = "http://127.0.0.1:8080/v1"
tools = ["tether:read_file"]
workspace = "./tickets"
prompt = "Summarise the open tickets."
''', encoding="utf-8")
    assert snap(scenes.new_run_dialog, config=load_config(path), agent="triage")


def test_costs_screen(snap_compare: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Costs screen (``$``) of a fixed fleet seen at a fixed time (tests/fleet_costs.py):
    spend per day over 30 days, by agent and by model as bars with each one's dearest run, the
    dearest runs with their ages, a run nobody priced, and three budgets: ok, warning, reached."""
    fleet_costs.frozen(monkeypatch)
    app = scenes.console(tmp_path, config=load_config(fleet_costs.agent_file(tmp_path)))

    async def costs_shown(pilot: Any) -> None:
        fleet_costs.make_runs(app.harness.store)
        await pilot.press("$")
        await scenes.until(pilot, lambda: isinstance(app.screen, CostsScreen) and app.screen.figures is not None,
                           "the Costs screen's figures")
        await pilot.pause()

    assert snap_compare(app, terminal_size=scenes.SIZE, run_before=costs_shown)

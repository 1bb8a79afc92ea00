"""Snapshot tests of the console's screens (pytest-textual-snapshot).

Stable across runs: fixed run ids, deterministic mode (no wall-clock times or durations
on screen, no blinking cursors), temp dirs never shown, and every run finished (or
waiting) before the picture is taken. Regenerate with ``--snapshot-update`` after a
deliberate change, and look at the SVGs before committing them.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from tether.config import load_config
from tether.state import Limits
from tether.tui.app import TetherApp
from tether.tui.components.dialogs import NewRunRequest

SIZE = (150, 42)


def make_app(tmp_path: Path, **kw: Any) -> TetherApp:
    return TetherApp(runs_dir=tmp_path / "runs", workspace=tmp_path / "workspace", deterministic=True,
                     grace_s=0, **kw)


async def until(pilot: Pilot[Any], predicate: Callable[[], bool], cap: float = 30.0) -> None:
    deadline = time.monotonic() + cap
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out preparing the snapshot")
        await pilot.pause(0.01)


async def quiet(pilot: Pilot[Any]) -> None:
    """Every run stopped and the views caught up."""
    app: TetherApp = pilot.app  # type: ignore[assignment]
    await until(pilot, lambda: not app.active)
    await app.workers.wait_for_complete()
    app._flush()
    await pilot.pause()


def start(*runs: tuple[str, NewRunRequest], select: str | None = None,
          then: Callable[[Pilot[Any]], Awaitable[None]] | None = None) -> Callable[[Pilot[Any]], Awaitable[None]]:
    async def run_before(pilot: Pilot[Any]) -> None:
        app: TetherApp = pilot.app  # type: ignore[assignment]
        for rid, request in runs:
            app.create_run(request, run_id=rid)
            await quiet(pilot)  # one after the other: a fixed order of creation
        app.select(select or runs[-1][0])
        await quiet(pilot)
        if then is not None:
            await then(pilot)
            await quiet(pilot)

    return run_before


def test_completed_plan(snap_compare: Any, tmp_path: Path) -> None:
    assert snap_compare(make_app(tmp_path), terminal_size=SIZE,
                        run_before=start(("plan-1", NewRunRequest("plan"))))


def test_approval_dialog(snap_compare: Any, tmp_path: Path) -> None:
    assert snap_compare(make_app(tmp_path), terminal_size=SIZE, press=["a"],
                        run_before=start(("plan-1", NewRunRequest("plan")),
                                         ("destructive-1", NewRunRequest("destructive"))))


def test_transcript_after_rejection(snap_compare: Any, tmp_path: Path) -> None:
    async def reject(pilot: Pilot[Any]) -> None:
        app: TetherApp = pilot.app  # type: ignore[assignment]
        app.reject_run("destructive-1", "access.log is still needed")

    assert snap_compare(make_app(tmp_path), terminal_size=SIZE,
                        run_before=start(("destructive-1", NewRunRequest("destructive")), then=reject))


def test_runaway_stopped_by_its_budget(snap_compare: Any, tmp_path: Path) -> None:
    limits = Limits(max_turns=100, budget_usd=0.05)
    assert snap_compare(make_app(tmp_path), terminal_size=SIZE,
                        run_before=start(("runaway-1", NewRunRequest("runaway", limits=limits))))


def test_research_with_its_child(snap_compare: Any, tmp_path: Path) -> None:
    """The parent selected: its child listed under it, the tree cost, the child's events in its trace."""
    assert snap_compare(make_app(tmp_path), terminal_size=SIZE,
                        run_before=start(("research-1", NewRunRequest("research"))))


def test_research_child_selected(snap_compare: Any, tmp_path: Path) -> None:
    """The child selected (down from the parent): its own transcript and limits (6 turns)."""
    assert snap_compare(make_app(tmp_path), terminal_size=SIZE, press=["down"],
                        run_before=start(("research-1", NewRunRequest("research"))))


def test_new_run_dialog(snap_compare: Any, tmp_path: Path) -> None:
    assert snap_compare(make_app(tmp_path), terminal_size=SIZE, press=["n"])


def test_new_run_dialog_with_an_agent_file(snap_compare: Any, tmp_path: Path) -> None:
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
    assert snap_compare(make_app(tmp_path, config=load_config(path), agent="triage"), terminal_size=SIZE,
                        press=["n"])


def test_help_screen(snap_compare: Any, tmp_path: Path) -> None:
    assert snap_compare(make_app(tmp_path), terminal_size=SIZE, press=["f1"],
                        run_before=start(("plan-1", NewRunRequest("plan"))))


@pytest.mark.parametrize("size", [(80, 24)])
def test_small_terminal(snap_compare: Any, tmp_path: Path, size: tuple[int, int]) -> None:
    assert snap_compare(make_app(tmp_path), terminal_size=size,
                        run_before=start(("destructive-1", NewRunRequest("destructive"))))

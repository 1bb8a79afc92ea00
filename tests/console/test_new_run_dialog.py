"""The New run dialog from the keyboard: its hint says "Enter in a field starts the run", and
that holds in its list fields (the agent, budget mode, tool errors, dedupe) as in its text
fields; Space opens a list, and Enter inside the open list picks an option without
starting anything. Waits are on conditions (see tests/support.py), never on a sleep.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Select, Static

from tether.vocab.state import Status
from tether.tui.app import TetherApp
from tether.tui.screens.new_run import NewRunDialog
from tests.support import SIZE, finish, home, make_app, settle, wait_for  # noqa: F401 (home: a fixture)


async def open_new_run(pilot: Pilot[Any], app: TetherApp) -> NewRunDialog:
    await pilot.press("n")
    await wait_for(pilot, lambda: isinstance(app.screen, NewRunDialog), "the New run dialog")
    dialog = app.screen
    assert isinstance(dialog, NewRunDialog)
    return dialog


async def started(pilot: Pilot[Any], app: TetherApp) -> str:
    """The one run the dialog started, once it has stopped."""
    await wait_for(pilot, lambda: not isinstance(app.screen, NewRunDialog), "the dialog to start the run")
    await wait_for(pilot, lambda: len(app.states) == 1, "the run to appear")
    await settle(pilot, app, "the run to finish")
    [rid] = list(app.states)
    return rid


def hint(dialog: NewRunDialog) -> str:
    """The key hint under the buttons: the dialog's last line."""
    return dialog.query_one("#new-run").query(Static).last().render().plain


@pytest.mark.parametrize("field", ["#agent", "#dedupe"])
async def test_enter_on_a_list_field_starts_the_run(tmp_path: Path, field: str) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await open_new_run(pilot, app)
        select = dialog.query_one(field, Select)
        if field == "#agent":
            assert app.focused is select  # where the dialog opens with several agents to choose from
        else:
            select.focus()
            await wait_for(pilot, lambda: app.focused is select, f"{field} to have the focus")
        assert "Enter in a field starts the run" in hint(dialog)
        await pilot.press("enter")
        rid = await started(pilot, app)
        assert not select.expanded  # the list never opened
        st = app.states[rid]
        assert st.model == "plan" and app.selected == rid  # the agent selected when Enter was pressed
        assert st.task is not None and st.limits.max_turns == 20  # the agent's own task and cap
        assert st.status is Status.COMPLETED
        await finish(pilot, app)


async def test_space_opens_the_agent_list_and_enter_there_picks_without_starting(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await open_new_run(pilot, app)
        agent = dialog.query_one("#agent", Select)
        assert app.focused is agent and dialog.choice.key == ("demo", "plan")
        assert "Space opens a list" in hint(dialog)
        await pilot.press("space")
        await wait_for(pilot, lambda: agent.expanded, "the agent list to open")
        await pilot.press("down", "down", "enter")  # plan, runaway, recover
        await wait_for(pilot, lambda: not agent.expanded and dialog.choice.key == ("demo", "recover"),
                       "recover to be picked and the list to close")
        await pilot.pause()
        assert app.screen is dialog and not app.states  # picking is not starting
        await wait_for(pilot, lambda: app.focused is agent, "the focus back on the agent field")
        await pilot.press("enter")
        rid = await started(pilot, app)
        st = app.states[rid]
        assert st.model == "recover" and st.task == "What does timeout.log say?"
        assert st.status is Status.COMPLETED
        await finish(pilot, app)


async def test_the_isolation_chosen_in_the_dialog_is_the_runs_own_workspace(tmp_path: Path, home: Path) -> None:
    """Isolation (none, worktree, copy) is passed to the run as ``tether run --isolate`` does:
    a worktree of the folder's repository on its own branch, a copy, and a worktree of a folder
    that is no repository refused in words (issue 38, item 1)."""
    import subprocess

    from tether.tui.screens.new_run import ISOLATIONS
    from tests.support import notices

    folder = tmp_path / "workspace"
    folder.mkdir()
    (folder / "notes.txt").write_text("one\n")
    app = make_app(tmp_path)
    said = notices(app)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await open_new_run(pilot, app)
        isolation = dialog.query_one("#isolation", Select)
        assert isolation.value == "none" and [value for _, value in ISOLATIONS] == ["none", "worktree", "copy"]
        isolation.value = "worktree"  # the folder is no repository yet
        dialog.query_one("#max-turns", Input).value = "5"
        await pilot.press("enter")
        await wait_for(pilot, lambda: any("could not start the run" in s for s in said), "the refusal")
        assert any("a worktree needs a git repository" in s and "use copy" in s for s in said), said
        assert not app.states

        dialog = await open_new_run(pilot, app)
        dialog.query_one("#isolation", Select).value = "copy"
        dialog.query_one("#max-turns", Input).value = "5"
        await pilot.press("enter")
        rid = await started(pilot, app)
        ws = app.states[rid].run_workspace
        assert ws is not None and ws.kind == "copy" and ws.path == str(home / "workspaces" / rid)
        assert (home / "workspaces" / rid / "notes.txt").read_text() == "one\n"

        for args in (["init", "-q", "-b", "main"], ["add", "-A"],
                     ["-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "first"]):
            subprocess.run(["git", *args], cwd=folder, check=True)
        dialog = await open_new_run(pilot, app)
        dialog.query_one("#isolation", Select).value = "worktree"
        dialog.query_one("#max-turns", Input).value = "5"
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(app.states) == 2, "the second run")
        await settle(pilot, app, "the second run to finish")
        [second] = [r for r in app.states if r != rid]
        ws = app.states[second].run_workspace
        assert ws is not None and ws.kind == "worktree" and ws.branch == f"tether/{second}"
        assert app.states[second].status is Status.COMPLETED

        dialog = await open_new_run(pilot, app)  # none: in the folder itself, as before
        assert dialog.query_one("#isolation", Select).value == "none"
        await pilot.press("escape")
        await finish(pilot, app)

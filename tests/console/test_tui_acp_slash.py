"""An ACP agent's slash commands (issue 40): the fake agent lists ``/review`` and ``/compact``
(``available_commands_update``); the console's follow-up box offers them as the operator types
``/``, with their descriptions, and the one picked goes to the agent as ``/name args``.
``tether show`` lists them too. Every wait is on a condition under a cap."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from textual.widgets import Input

from tether.agents.config import Config, load_config
from tether.vocab.state import Status
from tether.tui.screens.decision import ApproveDialog
from tether.tui.screens.follow_up import FollowUpDialog
from tether.tui.screens.new_run import NewRunRequest
from tether.tui.widgets.slash import SlashCommands
from tests.console.test_tui_acp import fake_agent, screen_text, waits
from tests.support import SIZE, cli_here_async, finish, make_app, open_armed, processes_with, settle, wait_for


def agent_file(tmp_path: Path, token: str, mode: str = "loads") -> Config:
    """The fake agent as ``writer`` (by default loading its sessions: a follow-up goes on in its session)."""
    env = {"MCP_TEST_TOKEN": token, **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {})}
    workspace = tmp_path / "ws-writer"
    workspace.mkdir()
    path = tmp_path / "tether.toml"
    path.write_text("\n".join([
        "[agents.writer]", f"acp = {json.dumps(fake_agent(mode))}", f"workspace = {json.dumps(str(workspace))}",
        "max_turns = 5", "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }", ""]))
    return load_config(path)


async def test_the_agents_slash_commands_are_offered_in_the_follow_up_box(tmp_path: Path) -> None:
    token = uuid.uuid4().hex
    config = agent_file(tmp_path, token)
    app = make_app(tmp_path, config=config)
    async with app.run_test(size=SIZE) as pilot:
        writer = app.create_run(NewRunRequest("", "write the file", agent="writer"))
        app.select(writer)
        await wait_for(pilot, lambda: waits(app, writer), "the writer to ask permission")
        await open_armed(pilot, app, "a", ApproveDialog)
        await pilot.press("enter")
        await settle(pilot, app, "the writer to finish")
        assert app.states[writer].status is Status.COMPLETED
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, FollowUpDialog), "the follow-up box")
        box = app.screen.query_one(SlashCommands)
        assert not box.display, "no list before a / is typed"
        await pilot.press("/")
        await wait_for(pilot, lambda: box.display, "the agent's commands under the field")
        seen = screen_text(app)
        assert "/review <what to review>  Review the changes in the workspace" in seen
        assert "/compact  Summarise the conversation so far" in seen
        await pilot.press("r", "e")
        await pilot.pause()
        assert box.option_count == 1 and "/compact" not in screen_text(app), "narrowed to /review"
        await pilot.press("tab", "enter")  # to the list, and pick the one highlighted
        field = app.screen.query_one("#message", Input)
        assert field.value == "/review " and field.has_focus and not box.display
        await pilot.press(*"src/", "enter")
        await wait_for(pilot, lambda: waits(app, writer) and app.states[writer].turns == 1, "the follow-up's turn")
        assert {"role": "user", "content": "/review src/"} in [
            {"role": m.get("role"), "content": m.get("content")} for m in app.states[writer].messages]
        await open_armed(pilot, app, "a", ApproveDialog)
        await pilot.press("enter")
        await settle(pilot, app, "the follow-up to finish")
        await finish(pilot, app)
    await app.harness.aclose()
    assert not processes_with(token), "an agent process was left behind"
    shown = await cli_here_async("show", writer, "--store", str(tmp_path / "runs"))
    assert "slash commands: /review <what to review> (Review the changes in the workspace)  " \
           "/compact (Summarise the conversation so far)" in shown.stdout, shown.stdout + shown.stderr

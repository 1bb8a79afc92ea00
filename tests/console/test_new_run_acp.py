"""New run with an ACP agent (the fake agent's ``sessions`` mode, tests/acp/fake_agent.py): the
dialog asks the agent, off its loop, for its own earlier sessions in its workspace, its session
modes and its models; a listed session picked is adopted by the run (its prompt goes there), and
a mode and a model picked replace the agent file's for that run. Waits are on conditions, never
on a sleep; no agent process is left behind.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Input, Select, Static

from tether.agents.config import load_config
from tether.store.trace import read_trace
from tether.vocab.state import Status
from tether.tui.app import TetherApp
from tether.tui.screens.new_run import NewRunDialog
from tests.support import REPO, SIZE, finish, make_app, processes_with, settle, transcript, wait_for

FAKE_AGENT = REPO / "tests" / "acp" / "fake_agent.py"


def agent_file(tmp_path: Path, log: Path, token: str, *, slow: bool = False, **keys: str) -> Any:
    """One ACP agent, ``coder`` (the fake agent, ``sessions`` mode; ``slow``: it never answers
    ``initialize``); its processes carry ``token``."""
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    env = {"FAKE_AGENT_LOG": str(log), "MCP_TEST_TOKEN": token, **({"FAKE_AGENT_SLOW_START": "1"} if slow else {}),
           **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {})}
    path = tmp_path / "tether.toml"
    path.write_text("\n".join([
        "[agents.coder]", f"acp = {json.dumps([sys.executable, str(FAKE_AGENT), 'sessions'])}",
        f"workspace = {json.dumps(str(workspace))}", "max_turns = 5",
        *(f"{k} = {json.dumps(v)}" for k, v in keys.items()),
        "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }", ""]))
    return load_config(path)


def sent(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


async def asked(pilot: Pilot[Any], app: TetherApp) -> NewRunDialog:
    """The New run dialog, once the agent chosen (the agent file's first) has said what it offers."""
    await pilot.press("n")
    await wait_for(pilot, lambda: isinstance(app.screen, NewRunDialog), "the New run dialog")
    dialog = app.screen
    assert isinstance(dialog, NewRunDialog) and dialog.choice.name == "coder"
    await wait_for(pilot, lambda: "coder" in dialog.offers, "the agent to say what it offers")
    await pilot.pause()
    return dialog


def options(select: Select[Any]) -> list[str]:
    return [str(value) for _, value in select._options]  # what the list offers (value of each line)


async def start(pilot: Pilot[Any], app: TetherApp, dialog: NewRunDialog, task: str) -> str:
    dialog.query_one("#prompt", Input).focus()
    await pilot.press(*task, "enter")
    await wait_for(pilot, lambda: not isinstance(app.screen, NewRunDialog), "the dialog to start the run")
    await wait_for(pilot, lambda: len(app.states) == 1, "the run to appear")
    await settle(pilot, app, "the run to finish")
    [rid] = list(app.states)
    return rid


async def test_new_run_lists_the_agents_sessions_and_a_picked_one_is_adopted(tmp_path: Path) -> None:
    log, token = tmp_path / "agent.log", uuid.uuid4().hex
    app = make_app(tmp_path, config=agent_file(tmp_path, log, token))
    async with app.run_test(size=SIZE) as pilot:
        dialog = await asked(pilot, app)
        session = dialog.query_one("#session", Select)
        assert options(session) == ["(new)", "fake-earlier"] and session.value == "(new)"
        assert "fake-earlier · an earlier session · updated 2026-12-01T09:30:00Z" in str(session._options[1][0])
        note = str(dialog.query_one("#offer-note", Static).render())
        assert f"fake-agent 1.0.0: 1 earlier session(s) in {tmp_path / 'ws'}: one picked goes on by session/resume" \
            in note, note
        assert not dialog.query_one("#dedupe").display, "Tether's own loop's policies are not an ACP agent's"
        session.value = "fake-earlier"
        await pilot.pause()
        assert dialog.query_one("#mode", Select).disabled, "a session picked keeps its own mode"
        assert dialog.query_one("#isolation", Select).disabled, "and works in the agent's folder, the session's"
        rid = await start(pilot, app, dialog, "QUIET go on")
        st = app.states[rid]
        assert st.status is Status.COMPLETED, st.error
        assert st.messages[-1] == {"role": "assistant", "content": "Noted in fake-earlier."}
        [record] = [r for r in read_trace(tmp_path / "runs" / rid / "trace.jsonl") if r["kind"] == "agent_session"]
        assert record["session_id"] == "fake-earlier" and record["adopted"] == "session/resume"
        await wait_for(pilot, lambda: "session fake-earlier (its own earlier session, gone on in by session/resume)"
                       in transcript(app), "the transcript to say the session was adopted")
        await finish(pilot, app)
    listed = [e for e in sent(log) if e["method"] == "session/list"]
    assert listed == [{"method": "session/list", "cwd": str(tmp_path / "ws")}]
    assert [e["session_id"] for e in sent(log) if e["method"] == "session/resume"] == ["fake-earlier"]
    assert not processes_with(token), "an agent process was left behind"


async def test_new_run_offers_the_agents_modes_and_models_and_the_pick_is_the_runs(tmp_path: Path) -> None:
    log, token = tmp_path / "agent.log", uuid.uuid4().hex
    app = make_app(tmp_path, config=agent_file(tmp_path, log, token, mode="auto", model="fake-small"))
    async with app.run_test(size=SIZE) as pilot:
        dialog = await asked(pilot, app)
        mode, model = dialog.query_one("#mode", Select), dialog.query_one("#acp-model", Select)
        assert options(mode) == ["ask", "auto"] and mode.value == "auto", "the agent file's mode first"
        assert options(model) == ["fake-small", "fake-large"] and model.value == "fake-small"
        mode.value, model.value = "ask", "fake-large"
        await pilot.pause()
        log.unlink()  # what the run's agent is sent, from here
        rid = await start(pilot, app, dialog, "QUIET hi")
        st = app.states[rid]
        assert st.status is Status.COMPLETED, st.error
        assert st.model == "fake-large", "the run is named and priced by the model picked"
        await finish(pilot, app)
    chosen = [(e["method"], e.get("mode_id") or e.get("value")) for e in sent(log)
              if e["method"] in ("session/set_mode", "session/set_config_option")]
    assert chosen == [("session/set_mode", "ask"), ("session/set_config_option", "fake-large")]
    assert not processes_with(token), "an agent process was left behind"


async def test_an_agent_slow_to_answer_does_not_hold_the_dialog_up(tmp_path: Path) -> None:
    """While New run waits for the agent's answer, the operator picks a demo scenario and starts
    it: the dialog answers at once, the run is done, and the agent asked is ended with the dialog."""
    log, token = tmp_path / "agent.log", uuid.uuid4().hex
    app = make_app(tmp_path, config=agent_file(tmp_path, log, token, slow=True))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, NewRunDialog), "the New run dialog")
        dialog = app.screen
        assert isinstance(dialog, NewRunDialog)
        await wait_for(pilot, lambda: "asking coder for its sessions, modes and models…"
                       in str(dialog.query_one("#offer-note", Static).render()), "the dialog to ask the agent")
        await wait_for(pilot, lambda: processes_with(token), "the agent asked to have started")
        dialog.query_one("#agent", Select).value = ("demo", "plan")
        await pilot.pause()
        assert not dialog.query_one("#offer-note", Static).display and dialog.query_one("#dedupe").display
        rid = await start(pilot, app, dialog, "")
        assert app.states[rid].status is Status.COMPLETED and "coder" not in dialog.offers
        # The dialog's ask was cancelled with it, and ends its agent (a kill, at worst) before it is done.
        await wait_for(pilot, lambda: all(w.is_finished for w in app.workers if w.group == "offer"),
                       "the cancelled ask to have ended its agent")
        await finish(pilot, app)
    assert not processes_with(token), "the agent asked was left behind"

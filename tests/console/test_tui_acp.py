"""ACP agents under the console (issue 30): runs of the fake ACP agent (tests/acp/fake_agent.py)
beside a Tether demo run, in one console, driven headlessly with Textual's pilot.

What the operator sees of an ACP run (the agent line, its plan as a checklist, its thoughts
folded, its file writes, its permission request with the diff and the agent's options), and
what the console does with it (approve from the dialog, with allow once or another option;
Stop), checked on the screen and on the store. Every wait is on a condition under a cap;
nothing asserts on timing. No agent process is left behind (each carries MCP_TEST_TOKEN).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from rich.console import Console
from textual.widgets import Button, Input, Select, Static

from tether.agents.config import Config, load_config
from tether.vocab.state import AgentRef, Cancelled, NeedsApproval, RunState, StateError, Status
from tether.tui.state.agent_notes import Note, place
from tether.tui.app import TetherApp
from tether.tui.run_actions import STOP_REASON
from tether.tui.widgets.approvals import ApprovalsPane
from tether.tui.widgets.cost_meter import CostMeter, numbers, spark_caption, unreported_turns
from tether.tui.screens.decision import ApproveDialog, RejectDialog
from tether.tui.screens.new_run import NewRunDialog, NewRunRequest
from tether.tui.widgets.transcript import plan_text
from tether.tui.state.model import ConsoleModel
from tests.support import (CAP_S, REPO, SIZE, finish, make_app, open_armed, processes_with, reaped, settle,
                           still_console, transcript, wait_for)

SLOW = "stream until stopped: SLOW"  # the fake agent streams until cancelled
FAKE_AGENT = REPO / "tests" / "acp" / "fake_agent.py"
WRITE_NAME, WRITE_TEXT = "out.txt", "written by the fake agent\n"  # what the fake agent writes (its mode normal)


def fake_agent(mode: str) -> list[str]:
    return [sys.executable, str(FAKE_AGENT), mode]


def agent_file(tmp_path: Path, token: str) -> tuple[Path, Config]:
    """Two ACP agents (the fake one), each in its own workspace; their processes carry ``token``."""
    env = {"MCP_TEST_TOKEN": token}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    lines = []
    for name in ("writer", "streamer"):
        workspace = tmp_path / f"ws-{name}"
        workspace.mkdir()
        lines += [f"[agents.{name}]", f"acp = {json.dumps(fake_agent('normal'))}", f"workspace = {json.dumps(str(workspace))}",
                  "max_turns = 5", "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }", ""]
    path = tmp_path / "tether.toml"
    path.write_text("\n".join(lines))
    return path, load_config(path)


def screen_text(app: TetherApp) -> str:
    """The screen as the operator sees it, as plain text (what ``export_screenshot`` draws);
    with ``TETHER_SHOW_SCREENS`` set, printed too (``pytest -s``)."""
    console = Console(width=app.size.width, height=app.size.height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    text = console.export_text()
    if os.environ.get("TETHER_SHOW_SCREENS"):
        print(text)
    return text


def waits(app: TetherApp, rid: str) -> bool:
    st = app.states.get(rid)
    return st is not None and st.status is Status.INTERRUPTED and isinstance(st.interruption, NeedsApproval)


def cost_text(app: TetherApp) -> str:
    return str(app.console_screen.query_one(CostMeter).query_one("#cost-numbers", Static).render())


def rid_of(app: TetherApp, agent: str) -> str:
    return next(r for r, s in app.states.items() if s.agent is not None and s.agent.name == agent)


async def test_two_acp_agents_and_a_tether_run_in_one_console(tmp_path: Path) -> None:
    token = uuid.uuid4().hex
    _, config = agent_file(tmp_path, token)
    app = make_app(tmp_path, config=config)
    try:
        async with app.run_test(size=SIZE) as pilot:
            plan = app.create_run(NewRunRequest("plan"), run_id="plan-1")
            # The writer from the New run dialog: the agent file's ACP agents are offered there.
            await pilot.press("n")
            await wait_for(pilot, lambda: isinstance(app.screen, NewRunDialog), "the new-run dialog")
            dialog = app.screen
            dialog.query_one("#agent", Select).value = ("agent", "writer")
            await pilot.pause()
            assert "ACP agent" in str(dialog.query_one("#agent-detail", Static).render())
            dialog.query_one("#prompt", Input).focus()
            await pilot.press(*"write the file")
            await pilot.press("enter")
            await wait_for(pilot, lambda: not isinstance(app.screen, NewRunDialog), "the dialog to start the run")
            writer = rid_of(app, "writer")
            streamer = app.create_run(NewRunRequest("", SLOW, agent="streamer"))
            await wait_for(pilot, lambda: waits(app, writer), "the writer to ask permission for its write")
            await wait_for(pilot, lambda: app.model.streaming.get(streamer), "the streamer to stream")
            await wait_for(pilot, lambda: app.states[plan].status is Status.COMPLETED, "the demo run to finish")

            # The writer waits on its agent's permission request, in this console's process.
            app.select(writer)
            pane = app.console_screen.query_one("#approvals", ApprovalsPane)
            await wait_for(pilot, lambda: [p.run_id for p in pane.items] == [writer], "the approvals pane to list it")
            assert app.check_action("approve", ()) is True and app.check_action("stop", ()) is True
            await wait_for(pilot, lambda: "▸ thought  Planning the write." in transcript(app), "its thought, folded")
            text = transcript(app)
            assert "agent  fake-agent 1.0.0" in text
            assert "plan  0 of 1 done" in text and "[~] Write out.txt" in text
            seen = screen_text(app)
            assert "⏸ approval" in seen and "● running" in seen and "1 waiting · Enter approves" in seen
            assert "── waiting for approval of Write out.txt (call_1): a approves · r rejects ──" in seen
            dialog = await open_armed(pilot, app, "a", ApproveDialog)
            assert dialog.tool == "Write out.txt"
            diff = str(dialog.query_one("#diff", Static).render())
            assert f"+{WRITE_TEXT.strip()}" in diff
            options = str(dialog.query_one("#options", Static).render())
            for words in ("Allow once", "allow once", "Always allow", "allow always", "Reject", "reject once"):
                assert words in options, options
            seen = screen_text(app)
            assert f"+{WRITE_TEXT.strip()}" in seen and "allow always" in seen  # on screen, not only in the widget
            await pilot.press(*"looks right")
            await pilot.press("enter")
            await wait_for(pilot, lambda: app.states[writer].status is Status.COMPLETED, "the writer to finish")

            # Stop the streamer mid-stream.
            app.select(streamer)
            await pilot.pause()
            assert app.check_action("stop", ()) is True
            await pilot.press("s")
            await settle(pilot, app)
            assert "cost usage not reported" in cost_text(app)  # the fake agent reports none for a cancelled turn

            app.select(writer)
            await pilot.pause()
            text = transcript(app)
            assert f"✎ wrote {WRITE_NAME}  (26 bytes)" in text  # from the agent's workspace
            assert "Done." in text
            # Thoughts are folded to one dim line; t (on the transcript) unfolds them, and folds them again.
            app.transcript_view.focus()
            await pilot.press("t")
            await wait_for(pilot, lambda: "▾ thought" in transcript(app), "the thoughts to unfold")
            assert "▸ thought" not in transcript(app)
            assert f"✎ wrote {WRITE_NAME}  (26 bytes)" in transcript(app)  # rendered again, the same way
            await pilot.press("t")
            await wait_for(pilot, lambda: "▸ thought" in transcript(app), "the thoughts to fold again")
            assert "── completed: the agent ended its turn ──" in transcript(app)
            lines = "\n".join(app.trace_lines(writer))
            for kind in ("agent_session", "plan", "thought", "file_write", "approval_decision"):
                assert kind in lines, lines
            seen = screen_text(app)
            assert "fake-agent 1.0.0" in seen and "✎ wrote" in seen and "[~] Write out.txt" in seen
            await finish(pilot, app)
    finally:
        await app.harness.aclose()
    store = app.harness.store
    assert store.load(plan).status is Status.COMPLETED
    final = store.load(writer)
    assert final.status is Status.COMPLETED and final.approvals["call_1"].by == "operator"
    assert (tmp_path / "ws-writer" / WRITE_NAME).read_text() == WRITE_TEXT
    stopped = store.load(streamer)
    assert stopped.status is Status.INTERRUPTED
    assert stopped.interruption == Cancelled(STOP_REASON, "operator")
    assert not (tmp_path / "ws-streamer" / WRITE_NAME).exists()
    assert not processes_with(token), "an agent process was left behind"


async def test_acp_runs_of_other_processes_are_decided_and_stopped_from_the_console(tmp_path: Path) -> None:
    """``tether run --agent writer --wait-for-decision`` and ``--agent streamer`` in two other
    processes: the console shows their agents' notes from their traces, answers the writer
    with the agent's "Always allow" option, and stops the streamer; a console opened later
    shows the same transcript, read back from the store."""
    token = uuid.uuid4().hex
    path, config = agent_file(tmp_path, token)
    env = {**os.environ, "TETHER_HOME": str(tmp_path), "TETHER_CONFIG": str(path)}

    async def tether_run(agent: str, prompt: str, run_id: str) -> asyncio.subprocess.Process:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tether.tui.cli", "run", "--agent", agent, "--prompt", prompt, "--run-id", run_id,
            "--wait-for-decision", "--json", env=env, cwd=REPO, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)

    app = make_app(tmp_path, config=config)
    async with app.run_test(size=SIZE) as pilot:
        await app.store_ready()
        writer, streamer = "w-elsewhere", "s-elsewhere"
        async with reaped(await tether_run("writer", "write the file", writer)) as writing, \
                reaped(await tether_run("streamer", SLOW, streamer)) as streaming:
            await wait_for(pilot, lambda: app.model.waits_in_process(writer), "the writer's process to wait")
            app.select(writer)
            await wait_for(pilot, lambda: app.model.ask_of(writer, "call_1") is not None, "the agent's options")
            await wait_for(pilot, lambda: "▸ thought  Planning the write." in transcript(app), "its thought")
            assert "agent  fake-agent 1.0.0" in transcript(app)
            dialog = await open_armed(pilot, app, "a", ApproveDialog)
            assert f"+{WRITE_TEXT.strip()}" in str(dialog.query_one("#diff", Static).render())
            always = dialog.query_one("#option-0", Button)
            assert str(always.label) == "Always allow"
            await pilot.click("#option-0")
            out, err = await asyncio.wait_for(writing.communicate(), CAP_S)
            assert writing.returncode == 0, err.decode()
            assert json.loads(out)["status"] == "completed"
            asked = [r for r in app.harness.store.control_read(writer, 0) if r.kind == "approve"]
            assert [(r.option, r.by) for r in asked] == [("always", "operator")]

            await wait_for(pilot, lambda: app.model.held_elsewhere(streamer)
                           and app.model.agent_notes.get(streamer) is not None, "the streamer to run elsewhere")
            app.select(streamer)
            await wait_for(pilot, lambda: app.check_action("stop", ()) is True, "Stop to apply to the streamer")
            await pilot.press("s")
            await asyncio.wait_for(streaming.wait(), CAP_S)
            await wait_for(pilot, lambda: app.states[streamer].status is Status.INTERRUPTED, "the streamer to stop")
        await finish(pilot, app)
    store = app.harness.store
    assert store.load(writer).status is Status.COMPLETED
    assert (tmp_path / "ws-writer" / WRITE_NAME).read_text() == WRITE_TEXT
    stopped = store.load(streamer)
    assert stopped.status is Status.INTERRUPTED and stopped.interruption.by == "operator"
    assert not processes_with(token), "an agent process was left behind"

    later = make_app(tmp_path, config=config)  # read back from the store: the same transcript
    async with later.run_test(size=SIZE) as pilot:
        later.select(writer)
        await wait_for(pilot, lambda: "✎ wrote" in transcript(later), "the notes read back from the trace")
        text = transcript(later)
        for words in ("agent  fake-agent 1.0.0", "▸ thought  Planning the write.", f"✎ wrote {WRITE_NAME}  (26 bytes)",
                      "[~] Write out.txt", "Done."):
            assert words in text, text
        # placed where they happened: the agent, its thought, its reply, the call, the write, its result
        order = [text.index(w) for w in ("fake-agent 1.0.0", "Planning the write.", "I will write", "→ Write out.txt",
                                         "✎ wrote", "← Write out.txt", "Done.")]
        assert order == sorted(order), text
        later.select(streamer)
        await wait_for(pilot, lambda: "cost usage not reported" in cost_text(later), "the streamer's cost meter")
        assert "what it spent is unknown" in cost_text(later)
        screen_text(later)
        await finish(pilot, later)


async def test_a_rejection_from_the_console_reaches_the_agent_as_its_next_prompt(tmp_path: Path) -> None:
    token = uuid.uuid4().hex
    _, config = agent_file(tmp_path, token)
    app = make_app(tmp_path, config=config)
    async with app.run_test(size=SIZE) as pilot:
        writer = app.create_run(NewRunRequest("", "write the file", agent="writer"))
        app.select(writer)
        await wait_for(pilot, lambda: waits(app, writer), "the writer to ask permission")
        dialog = await open_armed(pilot, app, "r", RejectDialog)
        assert dialog.default_option is not None and dialog.default_option.kind == "reject_once"
        assert "the words go to the agent as its next prompt" in screen_text(app)
        await pilot.press(*"not in this folder")
        await pilot.press("enter")
        # The agent is told, and asks again (the fake one does): allowed this time.
        await wait_for(pilot, lambda: waits(app, writer) and app.states[writer].turns == 1, "the agent to ask again")
        await wait_for(pilot, lambda: "sent by Tether as the agent's next prompt" in transcript(app),
                       "the rejection's words, shown as the agent's next prompt")
        text = transcript(app)
        assert "The operator declined this call: not in this folder. Nothing was done." in text
        await open_armed(pilot, app, "a", ApproveDialog)
        await pilot.press("enter")
        await settle(pilot, app, "the writer to finish")
        assert app.states[writer].status is Status.COMPLETED and app.states[writer].turns == 2
        await finish(pilot, app)
    await app.harness.aclose()
    assert not processes_with(token), "an agent process was left behind"


# ---- the parts, without a screen ------------------------------------------------------------

def test_notes_are_placed_where_they_happened() -> None:
    messages = [
        {"role": "system", "content": "s"}, {"role": "user", "content": "write"},                         # 0 1
        {"role": "assistant", "content": "I will"},                                                        # 2
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "function": {"name": "Write"}}]},  # 3
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},                                         # 4
        {"role": "user", "content": "declined", "tether": "rejection"},                                  # 5
        {"role": "assistant", "content": "Done."},                                                         # 6
    ]
    notes = [Note(1, "session", "agent", turn=1, anchor="turn"),
             Note(2, "thought", "before the call, and its words", anchor="before_call", call_id="c1"),
             Note(3, "file_write", "out.txt", anchor="after_call", call_id="c1"),
             Note(4, "thought", "end of turn 1: no last words", anchor="turn_end", turn=1),
             Note(5, "thought", "end of turn 2: before its last words", anchor="turn_end", turn=2),
             Note(6, "thought", "exact", index=6), Note(7, "file_write", "x", anchor="after_call", call_id="c9"),
             Note(8, "thought", "not placed yet")]
    entries, by_key = place(messages, notes)
    assert entries == [("m", 0), ("m", 1), ("n", 1), ("n", 2), ("m", 2), ("m", 3), ("n", 3), ("m", 4), ("n", 4),
                       ("m", 5), ("n", 5), ("n", 6), ("m", 6), ("n", 7), ("n", 8)]
    assert by_key[3].text == "out.txt"


def test_notes_read_back_land_where_the_live_run_put_them() -> None:
    """A thought read from a trace is placed by the records after it, as the run flushed it."""
    history = [
        {"kind": "agent_session", "seq": 2, "agent_name": "fake-agent", "agent_version": "1.0.0"},
        {"kind": "thought", "seq": 3, "turn": 1, "text": "first"},
        {"kind": "tool_start", "seq": 4, "call_id": "c1"},
        {"kind": "file_write", "seq": 5, "path": "/w/out.txt", "size": 3},
        {"kind": "tool_result", "seq": 6, "call_id": "c1"},
        {"kind": "thought", "seq": 7, "turn": 1, "text": "second"},
        {"kind": "turn", "seq": 8, "turn": 1},
    ]
    model = ConsoleModel()
    model.take_history("r", history)
    messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "I will"},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},
                {"role": "tool", "tool_call_id": "c1", "content": "ok"}, {"role": "assistant", "content": "Done."}]
    entries, by_key = place(messages, model.agent_notes["r"].notes)
    shown = [by_key[k].text if kind == "n" else messages[k].get("content") for kind, k in entries]
    assert shown == ["go", "fake-agent 1.0.0", "first", "I will", None, "/w/out.txt", "ok", "second", "Done."]


def test_agent_notes_from_events_and_history() -> None:
    model = ConsoleModel()
    # Tether's own approval (no options, no diff) makes no notes.
    assert not model.take_note("t", "approval_required", {"kind": "approval_required", "call_id": "c", "seq": 3})
    assert "t" not in model.agent_notes
    history = [
        {"kind": "agent_session", "seq": 2, "agent_name": "qwen", "agent_version": "0.24.4", "session_id": "s1"},
        {"kind": "plan", "seq": 3, "entries": [{"content": "a", "status": "pending"}]},
        {"kind": "tool_start", "seq": 4, "call_id": "c1"},
        {"kind": "approval_required", "seq": 5, "call_id": "c1", "options": [
            {"id": "proceed_always", "name": "Always", "kind": "allow_always"},
            {"id": "proceed_once", "name": "Once", "kind": "allow_once"},
            {"id": "cancel", "name": "Cancel", "kind": "reject_once"}], "diff": "+x"},
        {"kind": "file_write", "seq": 6, "path": "/w/out.txt", "size": 2},
    ]
    assert model.take_history("r", history)
    notes = model.agent_notes["r"]
    assert notes.agent == "qwen 0.24.4"
    assert [(n.kind, n.call_id) for n in notes.notes] == [("session", None), ("file_write", "c1")]
    ask = model.ask_of("r", "c1")
    assert ask is not None and ask.diff == "+x"
    assert ask.default(True).id == "proceed_once" and ask.default(False).id == "cancel"
    assert [o.id for o in ask.family(True)] == ["proceed_always", "proceed_once"]
    # The same records again (a history read after the live events) change nothing; an older
    # plan does not replace a newer one.
    assert not model.take_history("r", history)
    model.take_note("r", "plan", {"kind": "plan", "seq": 9, "entries": [{"content": "b", "status": "completed"}]})
    model.take_history("r", [{"kind": "plan", "seq": 3, "entries": [{"content": "a"}]}])
    assert notes.plan == [{"content": "b", "status": "completed"}]
    assert "[x] b" in plan_text(notes.plan).plain and "1 of 1 done" in plan_text(notes.plan).plain


def test_the_cost_meter_says_usage_not_reported_for_an_acp_agent() -> None:
    acp_ref = AgentRef("coder", "config", "f", spec={"acp": {"argv": ["opencode", "acp"]}})
    silent = RunState(run_id="a", model="acp:opencode", messages=[], turns=2, estimated_turns=[1, 2], agent=acp_ref)
    words = numbers(silent).plain
    assert "usage not reported" in words and "what it spent is unknown" in words
    assert "counted by Tether" not in words and "assumed price" not in words
    assert "not reported by the agent" in spark_caption([0, 0], unreported_turns(silent)).plain
    partly = RunState(run_id="b", model="acp:qwen", messages=[], turns=3, estimated_turns=[3], prompt_tokens=90,
                      agent=acp_ref)
    assert "usage not reported for 1 of 3 turns" in numbers(partly).plain
    tether = RunState(run_id="c", model="m", messages=[], turns=2, estimated_turns=[2])
    assert "usage not reported for 1 turn: counted by Tether" in numbers(tether).plain


async def test_an_acp_run_waiting_on_postgresql_is_approved_from_a_console_opened_later(pg: Any, pg_url: str,
                                                                                        tmp_path: Path) -> None:
    """The run's agent asked before the console opened: its options and diff are read back
    from the store's trace (a network store: off the loop), and the dialog shows them."""
    from tether.store.postgres.store import PgStore

    token = uuid.uuid4().hex
    path, _ = agent_file(tmp_path, token)
    env = {**os.environ, "TETHER_CONFIG": str(path)}
    run = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tether.tui.cli", "run", "--agent", "writer", "--prompt", "write the file", "--run-id",
        "pg-w1", "--wait-for-decision", "--store", pg_url, env=env, cwd=REPO,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    async with reaped(run):
        for _ in range(int(CAP_S * 20)):  # until its agent asks (read as any client would)
            with contextlib.suppress(StateError):  # not made yet
                if isinstance((await asyncio.to_thread(pg.load, "pg-w1")).interruption, NeedsApproval):
                    break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the agent never asked")
        app = still_console(store=PgStore(pg_url), workspace=tmp_path / "workspace")
        async with app.run_test(size=SIZE) as pilot:
            await app.store_ready()
            await wait_for(pilot, lambda: "pg-w1" in app.states, "the run to be listed")
            app.select("pg-w1")
            await wait_for(pilot, lambda: app.model.waits_in_process("pg-w1"), "it to wait in its process")
            await wait_for(pilot, lambda: app.model.ask_of("pg-w1", "call_1") is not None,
                           "the agent's options, read back from the trace")
            dialog = await open_armed(pilot, app, "a", ApproveDialog)
            assert f"+{WRITE_TEXT.strip()}" in str(dialog.query_one("#diff", Static).render())
            await pilot.press("enter")
            out, err = await asyncio.wait_for(run.communicate(), CAP_S)
            assert run.returncode == 0, err.decode()
            await wait_for(pilot, lambda: app.states["pg-w1"].status is Status.COMPLETED, "the run to complete")
            await wait_for(pilot, lambda: "✎ wrote" in transcript(app), "its notes in the transcript")
            await finish(pilot, app)
    assert (tmp_path / "ws-writer" / WRITE_NAME).read_text() == WRITE_TEXT
    assert not processes_with(token), "an agent process was left behind"


async def test_a_file_the_agent_wrote_itself_outside_its_workspace_is_a_warning_in_the_console(
        tmp_path: Path) -> None:
    """An agent that does its own file I/O writes a file Tether refused it (issue 37, item 2):
    the transcript says so after the call's result, live and read back, and the trace pane
    has the warning."""
    token = uuid.uuid4().hex
    workspace = tmp_path / "ws-escaper"
    workspace.mkdir()
    env = {"MCP_TEST_TOKEN": token, **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {})}
    path = tmp_path / "tether.toml"
    path.write_text(f"[agents.escaper]\nacp = {json.dumps(fake_agent('write-itself'))}\n"
                    f"workspace = {json.dumps(str(workspace))}\n"
                    "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }\n")
    config = load_config(path)
    escaped = (tmp_path / "outside" / "escaped.txt").resolve()  # the fake agent's ESCAPE_PATH
    said = f"⚠ warning the agent wrote {escaped} itself, outside the workspace {workspace}"
    in_order = ("→ write", "← write", said, "The file is written.")

    app = make_app(tmp_path, config=config)
    try:
        async with app.run_test(size=SIZE) as pilot:
            rid = app.create_run(NewRunRequest("", "write outside", agent="escaper"))
            await wait_for(pilot, lambda: app.states[rid].status is Status.COMPLETED, "the run to finish")
            app.select(rid)
            await wait_for(pilot, lambda: said in transcript(app), "the warning in the transcript")
            text = transcript(app)
            assert [text.index(w) for w in in_order] == sorted(text.index(w) for w in in_order), text
            await wait_for(pilot, lambda: any(" warning " in line and f"WARNING the agent wrote {escaped} itself" in line
                                              for line in app.trace_lines(rid)), "the warning in the trace pane")
            await finish(pilot, app)
    finally:
        await app.harness.aclose()
    assert escaped.exists()
    assert not processes_with(token), "an agent process was left behind"

    later = make_app(tmp_path, config=config)  # read back from the store: the same place
    async with later.run_test(size=SIZE) as pilot:
        later.select(rid)
        await wait_for(pilot, lambda: said in transcript(later), "the warning read back from the trace")
        text = transcript(later)
        assert [text.index(w) for w in in_order] == sorted(text.index(w) for w in in_order), text
        await finish(pilot, later)


def test_the_run_header_shows_the_agents_config_options() -> None:
    """The agent's config options as it last stated them (a ``config_options`` record: its
    ``config_option_update`` included) are on the run's header, after the agent's name."""
    from types import SimpleNamespace

    from tether.tui.state.options import ConsoleOptions
    from tether.tui.views import ConsoleViews

    model = ConsoleModel()
    model.states["r"] = RunState(run_id="r", model="acp:fake", messages=[{"role": "user", "content": "hi"}])
    model.take_history("r", [
        {"kind": "agent_session", "seq": 2, "agent_name": "fake-agent", "agent_version": "1.0.0", "session_id": "s"},
        {"kind": "config_options", "seq": 3, "source": "session/new", "options": [
            {"id": "model", "name": "Model", "value": "fake-small"}]},
    ])
    model.take_note("r", "config_options", {"kind": "config_options", "seq": 4, "source": "config_option_update",
                                            "options": [{"id": "model", "name": "Model", "value": "fake-large"},
                                                        {"id": "effort", "name": "Effort", "value": "high"}]})
    shown = ConsoleViews._header_text(SimpleNamespace(model=model, options=ConsoleOptions()), "r").plain
    assert "fake-agent 1.0.0 · Model=fake-large, Effort=high" in shown, shown

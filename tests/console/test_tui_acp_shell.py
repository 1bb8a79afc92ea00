"""A shell call's output in the console (issue 40): the fake agent (mode ``shell``) reports
``make test``'s output in its updates' ``_meta.terminal_output`` and its exit code in
``terminal_exit``; the transcript shows them under the call, and the trace view has each piece."""

from __future__ import annotations

import uuid
from pathlib import Path

from tether.vocab.state import Status
from tether.tui.state.agent_notes import AgentNotes
from tether.tui.screens.new_run import NewRunRequest
from tests.console.test_tui_acp_slash import agent_file
from tests.support import SIZE, finish, make_app, processes_with, settle, transcript, wait_for


async def test_a_shell_calls_output_and_exit_code_show_under_the_call(tmp_path: Path) -> None:
    token = uuid.uuid4().hex
    app = make_app(tmp_path, config=agent_file(tmp_path, token, "shell"))
    async with app.run_test(size=SIZE) as pilot:
        rid = app.create_run(NewRunRequest("", "run the tests", agent="writer"))
        app.select(rid)
        await wait_for(pilot, lambda: "exit code 0" in transcript(app), "the call's exit code in the transcript")
        await settle(pilot, app, "the run to finish")
        assert app.states[rid].status is Status.COMPLETED
        text = transcript(app)
        call, out1, out2, code = (text.index(s) for s in ("make test", "│ ok 1 parse", "│ ok 2 render", "└ exit code 0"))
        assert call < out1 < out2 < code, text
        await finish(pilot, app)
    await app.harness.aclose()
    assert not processes_with(token), "an agent process was left behind"


async def test_the_output_shows_while_the_command_runs_and_a_stop_ends_it(tmp_path: Path) -> None:
    token = uuid.uuid4().hex
    app = make_app(tmp_path, config=agent_file(tmp_path, token, "shell"))
    async with app.run_test(size=SIZE) as pilot:
        rid = app.create_run(NewRunRequest("", "run the tests: SLOW", agent="writer"))
        app.select(rid)
        await wait_for(pilot, lambda: "│ ok 2 render" in transcript(app), "the command's output, as it runs")
        text = transcript(app)
        assert app.states[rid].status is Status.RUNNING and "└ running" in text and "exit code" not in text, text
        assert app.check_action("stop", ()) is True
        await pilot.press("s")
        await settle(pilot, app)
        await wait_for(pilot, lambda: "└ ended by signal SIGINT" in transcript(app), "how the command ended")
        assert app.states[rid].status is Status.INTERRUPTED
        await finish(pilot, app)
    await app.harness.aclose()
    assert not processes_with(token), "an agent process was left behind"


def test_a_shell_note_keeps_its_last_lines_and_says_how_it_ended() -> None:
    notes = AgentNotes()
    for seq, data in enumerate(("a\n", "b\nc\n"), 1):
        notes.take({"kind": "tool_output", "seq": seq, "call_id": "c1", "name": "sh", "data": data}, 2)
    notes.take({"kind": "tool_output", "seq": 3, "call_id": "c1", "exited": True, "exit_code": 2}, 2)
    [note] = notes.notes
    assert (note.kind, note.text, note.detail, note.failed, note.call_id) == ("shell", "a\nb\nc\n", "exit code 2", True, "c1")

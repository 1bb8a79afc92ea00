"""Approvals that scale, in the console (issue 25): what a call would change shown before
deciding, approving with edited arguments, "always allow…" and "always deny…" making a
standing rule that decides the call, the rules screen, and the decisions screen.

Driven headlessly with Textual's pilot on a file store in a temp dir and the scripted
provider (the ``destructive`` scenario waits on ``delete_file access.log``). Every wait
is on a condition under a cap; what is asserted is what the operator sees (the screen,
the words said) and what reached the harness and the store (the run's decisions, the
store's rules).
"""

from __future__ import annotations

import asyncio
import difflib
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import Button, DataTable, Input, Select, Static, TextArea

from tether.approvals import Rule, Where
from tether.agents.tools.preview import preview_call
from tether.demo.acp import GREET_AFTER, GREET_BEFORE
from tether.tui.state.agent_notes import Ask, Option
from tether.store.postgres.store import PgStore
from tether.vocab.state import NeedsApproval, Status
from tether.agents.tools.builtin import WriteFile
from tether.tui.app import TetherApp
from tether.tui.widgets.approval_view import deadline_words, preview_body, tally_words
from tether.tui.screens.args_editor import ArgsEditor
from tether.tui.screens.decision import ACP_NO_EDIT, ApproveDialog, RejectDialog
from tether.tui.screens.decisions import DecisionsScreen
from tether.tui.screens.new_run import NewRunRequest
from tether.tui.widgets.key_bar import KeyBar
from tether.tui.screens.rule_editor import RuleContext, RuleEditor, where_lines
from tether.tui.screens.rules import ConfirmDialog, RulesScreen
from tether.agents.workspace import Workspace

from tests import accounts
from tests.console.test_console_pg import console as pg_console
from tests.console.test_console_pg import on_loop  # noqa: F401  (a fixture)
from tests.console.test_tui_acp import agent_file, waits
from tests.support import (
    SIZE, ended, finish, make_app, notices, open_armed, processes_with, reaped, settle, still_console, transcript,
    wait_for,
)

RID = "destructive-1"


async def destructive_waiting(pilot: Pilot[Any], app: TetherApp) -> NeedsApproval:
    app.create_run(NewRunRequest("destructive"), run_id=RID)
    app.select(RID)
    await settle(pilot, app, "destructive to stop for approval")
    waiting = app.states[RID].interruption
    assert isinstance(waiting, NeedsApproval) and waiting.tool_name == "delete_file"
    return waiting


def shown(widget: Static) -> str:
    """What a Static shows, as plain text."""
    content = widget.content
    return content.plain if isinstance(content, Text) else str(content)


def dialog_text(dialog: Any) -> str:
    return "\n".join(shown(s) for s in dialog.query(Static) if not isinstance(s, Button))


# ---- what the call would change, before deciding --------------------------------------

def write_call(workspace: Path) -> NeedsApproval:
    """A write_file call on an existing file, its preview made by the tool's own preview
    (the loop keeps the same dict on the waiting call)."""
    (workspace / "notes.txt").write_text("groceries\nmilk\neggs\n", encoding="utf-8")
    args = {"path": "notes.txt", "content": "groceries\nmilk\nbread\nbutter\n"}
    preview = asyncio.run(preview_call(WriteFile(), args, Workspace(workspace)))
    assert preview is not None and preview.kind == "diff", preview
    return NeedsApproval("call_1_0", "write_file", json.dumps(args), "write_file needs approval: it writes to the "
                         "workspace", needed=2, approvers=("alice",), preview=preview.to_dict())


def test_the_diff_of_a_write_shows_in_the_dialog(snap_compare: Any, tmp_path: Path) -> None:
    """The diff coloured (+ green, - red), the tally of a two-person call; still (no clock)."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    waiting = write_call(workspace)
    app = still_console(runs_dir=tmp_path / "runs", workspace=workspace, grace_s=0)

    async def open_dialog(pilot: Pilot[Any]) -> None:
        await pilot.app.push_screen(ApproveDialog("write-1", waiting, grace_s=0, rules=RuleContext("operator")))
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=open_dialog)


def acp_edit() -> tuple[NeedsApproval, Ask]:
    """OpenCode's edit of greet.py as ``tether demo --acp`` shows it: three options, the diff,
    the diff again in its arguments (a tall dialog, its buttons near the bottom)."""
    diff = "".join(difflib.unified_diff(GREET_BEFORE.splitlines(True), GREET_AFTER.splitlines(True),
                                        "a/greet.py", "b/greet.py"))
    options = (Option("once", "Allow once", "allow_once"), Option("always", "Always allow", "allow_always"),
               Option("reject", "Reject", "reject_once"))
    waiting = NeedsApproval("call_write_0", "/tmp/project/greet.py", json.dumps({"diff": diff}),
                            "the agent opencode asks permission: Allow once, Always allow, Reject")
    return waiting, Ask("call_write_0", options, diff)


@pytest.mark.parametrize("acp", [True, False], ids=["acp-edit-in-the-demo-s-terminal", "delete-file"])
async def test_a_notification_never_covers_a_decision_dialog_s_buttons(tmp_path: Path, acp: bool) -> None:
    """A call starts waiting elsewhere while the operator decides one (the console's alert):
    its toast takes rows of its own below the dialog, and every button stays in sight."""
    app = make_app(tmp_path, grace_s=0)
    size = (120, 46) if acp else SIZE  # make recording's terminal for the ACP tour
    async with app.run_test(size=size, notifications=True) as pilot:
        if acp:
            waiting, ask = acp_edit()
            await app.push_screen(ApproveDialog("opencode-1", waiting, grace_s=0, ask=ask,
                                                rules=RuleContext("operator")))
        else:
            await destructive_waiting(pilot, app)
            await open_armed(pilot, app, "a", ApproveDialog)
        dialog = app.screen
        await pilot.pause()
        app.notify('Writing to CHANGELOG.md {"content": "# Changelog\\n\\n## Unreleased\\n- greet() takes `excited`, '
                   'and puts a comma after \\"Hello\\".\\n", "file_path": "/tmp/project/CHANGELOG.md"}',
                   title="qwen-20261203-215828-54bf5e waits for approval", severity="warning", timeout=60)
        await wait_for(pilot, lambda: any(t.region.height for t in dialog.query("Toast")), "the toast on the dialog")
        await pilot.pause()
        toasts = [t.region for t in dialog.query("Toast")]  # with the console's own alert, on delete_file
        buttons = {str(b.label): b.region for b in dialog.query(Button)}
        assert len(buttons) == 5 and all(r.height for r in buttons.values()), buttons
        assert all(dialog.region.contains_region(toast) for toast in toasts)  # in sight, on the screen
        frame = dialog.query_one("#decision").region
        hidden = {label for label, region in buttons.items() if not frame.contains_region(region)}
        assert not hidden, f"scrolled out of the dialog {frame}: {sorted(hidden)}"
        covered = {label for label, region in buttons.items() if any(region.overlaps(t) for t in toasts)}
        assert not covered, f"the toasts {toasts} cover {sorted(covered)}: {buttons}"
        await finish(pilot, app)


async def test_the_preview_is_coloured_and_the_tally_said(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    waiting = await asyncio.to_thread(write_call, workspace)
    app = make_app(tmp_path, grace_s=0)
    async with app.run_test(size=SIZE) as pilot:
        await app.push_screen(ApproveDialog("write-1", waiting, grace_s=0))
        await pilot.pause()
        preview = app.screen.query_one("#preview", Static).content
        assert isinstance(preview, Text)
        styles = {preview.plain[span.start:span.end]: str(span.style) for span in preview.spans}
        assert (styles["+bread"], styles["-eggs"]) == ("green", "red")
        assert any(text.startswith("@@") and style == "dim" for text, style in styles.items())
        text = dialog_text(app.screen)
        assert "changes   write notes.txt" in text
        assert "people    1 of 2 approved (alice)" in text
        await finish(pilot, app)


async def test_the_loop_s_preview_of_a_delete_shows(tmp_path: Path) -> None:
    """destructive's delete_file: the loop keeps the file's size and first lines on the call."""
    app = make_app(tmp_path, grace_s=0)
    async with app.run_test(size=SIZE) as pilot:
        waiting = await destructive_waiting(pilot, app)
        assert waiting.preview is not None and waiting.preview["kind"] == "summary"
        dialog = await open_armed(pilot, app, "a", ApproveDialog)
        text = dialog_text(dialog)
        assert "changes   delete access.log (404 bytes)" in text
        assert "GET /api/orders?page=2" in text
        await pilot.press("escape")
        await finish(pilot, app)


async def test_a_failed_preview_is_shown_and_deciding_goes_on(tmp_path: Path) -> None:
    waiting = NeedsApproval("call_1_0", "write_file", '{"path": "big.bin", "content": "x"}', "it writes",
                            preview={"kind": "failed", "title": "write_file",
                                     "text": "preview failed: no answer within 2 s"})
    app = make_app(tmp_path, grace_s=0)
    answers: list[Any] = []
    async with app.run_test(size=SIZE) as pilot:
        await app.push_screen(ApproveDialog("run-1", waiting, grace_s=0), answers.append)
        await pilot.pause()
        body = app.screen.query_one("#preview", Static).content
        assert isinstance(body, Text)
        assert body.plain == "preview failed: no answer within 2 s (you can still decide)"
        assert str(body.style) == "yellow"
        await pilot.press(*"looks fine", "enter")
        await wait_for(pilot, lambda: answers == ["looks fine"], "the approval")
        await finish(pilot, app)


def test_deadline_and_tally_words() -> None:
    now = 1_000_000.0
    waiting = NeedsApproval("c", "deploy", "{}", deadline_at=now + 9 * 60 + 10, on_deadline="reject")
    assert deadline_words(waiting, now) == "rejects in 9 min"
    assert deadline_words(NeedsApproval("c", "deploy", "{}", deadline_at=now + 30, on_deadline="stop"), now) \
        == "stops the run in 30 s"
    escalating = NeedsApproval("c", "deploy", "{}", deadline_at=now + 7200, on_deadline="escalate")
    assert deadline_words(escalating, now) == "escalates to someone else in 2 h"
    assert deadline_words(NeedsApproval("c", "deploy", "{}", deadline_at=now + 600, on_deadline="escalate",
                                        escalated=True), now) == "escalated once; rejects in 10 min"
    assert "deadline has passed" in (deadline_words(NeedsApproval("c", "d", "{}", deadline_at=now - 1), now) or "")
    assert deadline_words(NeedsApproval("c", "deploy", "{}"), now) is None
    assert tally_words(NeedsApproval("c", "deploy", "{}", needed=2)) == "0 of 2 approved: it needs 2 different people"
    assert tally_words(NeedsApproval("c", "deploy", "{}")) is None
    assert preview_body({"kind": "summary", "text": "delete a.log", "truncated": True}).plain.startswith("delete a.log")


async def test_the_deadline_shows_in_the_dialog(tmp_path: Path) -> None:
    waiting = NeedsApproval("call_1_0", "deploy", "{}", "it deploys", deadline_at=time.time() + 9 * 60 + 20)
    app = make_app(tmp_path, grace_s=0)
    async with app.run_test(size=SIZE) as pilot:
        await app.push_screen(RejectDialog("run-1", waiting, grace_s=0))
        await pilot.pause()
        assert shown(app.screen.query_one("#deadline", Static)) == "deadline  rejects in 9 min"
        await finish(pilot, app)


# ---- two people ---------------------------------------------------------------------------

async def test_two_people_approve_a_two_person_call(tmp_path: Path) -> None:
    """An ask rule for two people: the first approval shows as 1 of 2 (the pane, the header,
    the dialog); this console again, under another name, is refused in words, for its account
    has approved already; a second operating-system account completes it, and the console
    shows the call approved by both (tests/accounts.py: a store shared with its group)."""
    accounts.can_switch()
    place = accounts.shared(tmp_path / "shared")
    runs, workspace = accounts.shared(place / "runs"), accounts.shared(place / "workspace")
    app = make_app(place, grace_s=0)
    me = accounts.me()
    said = notices(app)
    app.harness.store.rule_add(Rule("ask", "delete_file", "two people for deletes", "alice", approvals=2))
    async with app.run_test(size=SIZE) as pilot:
        waiting = await destructive_waiting(pilot, app)
        assert (waiting.needed, waiting.approvers) == (2, ())
        dialog = await open_armed(pilot, app, "a", ApproveDialog)
        assert "people    0 of 2 approved: it needs 2 different people" in dialog_text(dialog)
        await pilot.press("enter")
        await settle(pilot, app, "the first approval")
        waiting = app.states[RID].interruption
        assert isinstance(waiting, NeedsApproval) and (waiting.approvers, waiting.accounts) == (("operator",), (me,))
        assert app.states[RID].status is Status.INTERRUPTED
        tally = f"1 of 2 approved (operator as {me})"
        assert tally in str(app.console_screen.query_one("#run-header", Static).content)
        assert [p.tally for p in app.pending_approvals()] == [tally]
        dialog = await open_armed(pilot, app, "a", ApproveDialog)
        assert f"people    {tally}" in dialog_text(dialog)
        await pilot.press("enter")  # the same person again
        await settle(pilot, app)
        assert any("operator as " in words and "has approved delete_file (call_1_0) already" in words
                   for words in said), said
        app.operator = "alice"  # another name at this console: the same account, so the same person
        await open_armed(pilot, app, "a", ApproveDialog)
        await pilot.press("enter")
        await settle(pilot, app)
        assert any(f"the account {me} has approved delete_file (call_1_0) already, as operator" in words
                   for words in said), said
        assert app.states[RID].status is Status.INTERRUPTED and (workspace / "access.log").exists()
        code, out, err = await accounts.tether_as_other("approve", RID, "--as", "bob", "--runs-dir", str(runs),
                                                        "--workspace", str(workspace), home=place / "home-2")
        assert code == 0, (out, err)
        await wait_for(pilot, lambda: app.states[RID].status is Status.COMPLETED,
                       "the second account's approval, seen on the store", accounts.CAP_S)
        decision = app.states[RID].approvals["call_1_0"]
        assert (decision.approvers, decision.accounts) == (["operator", "bob"], [me, accounts.OTHER])
        assert not (workspace / "access.log").exists()
        await finish(pilot, app)


# ---- approving with edited arguments --------------------------------------------------

async def edit_to(pilot: Pilot[Any], app: TetherApp, text: str) -> ArgsEditor:
    await wait_for(pilot, lambda: isinstance(app.screen, ArgsEditor), "the arguments editor")
    editor = app.screen
    assert json.loads(editor.query_one("#args-text", TextArea).text) == {"path": "access.log"}
    editor.query_one("#args-text", TextArea).text = text
    await pilot.press("ctrl+s")
    await pilot.pause()
    return editor  # type: ignore[return-value]


async def test_e_approves_with_the_edited_arguments(tmp_path: Path) -> None:
    """The run's decision carries the operator's arguments, the tool ran with them (scratch.log
    deleted, access.log kept), and the transcript says the arguments changed."""
    app = make_app(tmp_path, grace_s=0)
    async with app.run_test(size=SIZE) as pilot:
        await destructive_waiting(pilot, app)
        workspace = tmp_path / "workspace"
        (workspace / "scratch.log").write_text("old lines\n", encoding="utf-8")
        await pilot.press("e")
        await edit_to(pilot, app, '{\n  "path": "scratch.log"\n}')
        await settle(pilot, app, "the run to go on with the edited arguments")
        st = app.states[RID]
        decision = st.approvals["call_1_0"]
        assert decision.verdict == "approved" and json.loads(decision.args or "") == {"path": "scratch.log"}
        assert not (workspace / "scratch.log").exists() and (workspace / "access.log").exists()
        assert st.status is Status.COMPLETED
        assert "scratch.log" in transcript(app)
        # The record of decisions shows the operator's arguments, marked as edited.
        await pilot.press("D")
        await wait_for(pilot, lambda: isinstance(app.screen, DecisionsScreen) and app.screen.records,
                       "the decision on the decisions screen")
        cells = [str(cell) for cell in app.screen.query_one("#decisions", DataTable).get_row_at(0)]
        assert cells[3] == '✎ {"path": "scratch.log"}' and cells[4] == "approved"
        await finish(pilot, app)


async def test_the_approve_dialog_s_edit_keeps_the_note(tmp_path: Path) -> None:
    app = make_app(tmp_path, grace_s=0)
    async with app.run_test(size=SIZE) as pilot:
        await destructive_waiting(pilot, app)
        (tmp_path / "workspace" / "scratch.log").write_text("x\n", encoding="utf-8")
        await open_armed(pilot, app, "a", ApproveDialog)
        await pilot.press(*"only the scratch one", "ctrl+e")
        await approved_with_scratch_log(pilot, app, "only the scratch one")
        await finish(pilot, app)


async def approved_with_scratch_log(pilot: Pilot[Any], app: TetherApp, note: str) -> None:
    """The arguments editor, opened from the approve dialog with ``note`` kept: scratch.log
    for access.log, approved; the run's decision carries both."""
    await wait_for(pilot, lambda: isinstance(app.screen, ArgsEditor), "the arguments editor")
    assert app.screen.query_one("#note", Input).value == note
    await edit_to(pilot, app, '{"path": "scratch.log"}')
    await settle(pilot, app)
    decision = app.states[RID].approvals["call_1_0"]
    assert (decision.text, json.loads(decision.args or "")) == (note, {"path": "scratch.log"})


async def test_e_in_the_approve_dialog_edits_where_no_field_has_the_focus_and_the_key_bar_says_which(
        tmp_path: Path) -> None:
    """docs/console.md's e, in the dialog: in the Note field e is typed and the key bar offers
    ctrl+e; on a button e opens the arguments editor (the note kept), and the bar offers e."""
    app = make_app(tmp_path, grace_s=0)
    async with app.run_test(size=SIZE) as pilot:
        await destructive_waiting(pilot, app)
        (tmp_path / "workspace" / "scratch.log").write_text("x\n", encoding="utf-8")
        dialog = await open_armed(pilot, app, "a", ApproveDialog)
        bar = dialog.query_one(KeyBar)
        await wait_for(pilot, lambda: ("ctrl+e", "Edit arguments", True) in bar.keys, "ctrl+e on the key bar")
        assert not any(key == "e" for key, _, _ in bar.keys)  # it would be typed: not offered
        await pilot.press(*"keep", "e")
        assert app.screen is dialog and dialog.query_one("#text", Input).value == "keepe"
        await pilot.press("tab")  # to the buttons: no text field has the focus
        await wait_for(pilot, lambda: isinstance(app.focused, Button), "a button to have the focus")
        await wait_for(pilot, lambda: ("e", "Edit arguments", True) in bar.keys, "e on the key bar")
        await pilot.press("e")
        await approved_with_scratch_log(pilot, app, "keepe")
        await finish(pilot, app)


async def test_invalid_json_is_refused_in_the_dialog_and_nothing_is_sent(tmp_path: Path) -> None:
    app = make_app(tmp_path, grace_s=0)
    async with app.run_test(size=SIZE) as pilot:
        await destructive_waiting(pilot, app)
        await pilot.press("e")
        editor = await edit_to(pilot, app, '{"path": scratch.log}')
        assert app.screen is editor
        error = shown(editor.query_one("#error", Static))
        assert error.startswith("the edited arguments are not JSON (Expecting value at line 1, column 10)"), error
        assert error.endswith("nothing was sent")
        editor.query_one("#args-text", TextArea).text = '["scratch.log"]'
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "must be a JSON object" in shown(editor.query_one("#error", Static))
        # The check tether approve --args and the web page make (issue 37): a key given twice is refused.
        editor.query_one("#args-text", TextArea).text = '{"path": "scratch.log",\n "path": "access.log"}'
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert 'the edited arguments give the key "path" twice' in shown(editor.query_one("#error", Static))
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ArgsEditor), "the editor to close")
        st = app.states[RID]
        assert not app.active and st.status is Status.INTERRUPTED and not st.approvals
        await finish(pilot, app)


async def test_an_edit_the_tool_s_schema_refuses_is_said_in_words(tmp_path: Path) -> None:
    app = make_app(tmp_path, grace_s=0)
    said = notices(app)
    async with app.run_test(size=SIZE) as pilot:
        await destructive_waiting(pilot, app)
        await pilot.press("e")
        await edit_to(pilot, app, '{"path": "access.log", "force": true}')
        await settle(pilot, app)
        assert any("do not fit delete_file" in words for words in said), said
        st = app.states[RID]
        assert st.status is Status.INTERRUPTED and not st.approvals  # consumed nothing
        assert (tmp_path / "workspace" / "access.log").exists()
        await finish(pilot, app)


async def test_an_acp_agent_s_call_cannot_be_edited(tmp_path: Path) -> None:
    waiting = NeedsApproval("call_1", "Write out.txt", '{"path": "out.txt"}', "the agent asks")
    app = make_app(tmp_path, grace_s=0)
    async with app.run_test(size=SIZE) as pilot:
        await app.push_screen(ApproveDialog("acp-1", waiting, grace_s=0, acp=True))
        await pilot.pause()
        assert not app.screen.query("#edit")
        await pilot.press("ctrl+e")
        await pilot.pause()
        assert isinstance(app.screen, ApproveDialog)
        assert shown(app.screen.query_one("#hint", Static)) == ACP_NO_EDIT
        assert "the protocol offers no way to change them" in ACP_NO_EDIT
        await finish(pilot, app)


async def test_an_acp_run_s_always_option_keeps_a_rule_of_the_scope_picked(tmp_path: Path) -> None:
    """The fake ACP agent's write, in this console: e is refused in words (on the main screen
    and in the dialog); its "Always allow" answers the agent and Tether keeps the rule, for
    the scope picked in the dialog."""
    token = uuid.uuid4().hex
    _, config = agent_file(tmp_path, token)
    app = make_app(tmp_path, config=config, grace_s=0)
    said = notices(app)
    try:
        async with app.run_test(size=SIZE) as pilot:
            rid = app.create_run(NewRunRequest("", "write the file", agent="writer"))
            app.select(rid)
            await wait_for(pilot, lambda: waits(app, rid) and app.model.ask_of(rid, "call_1") is not None,
                           "the writer to ask permission for its write")
            await pilot.press("e")
            await wait_for(pilot, lambda: any(ACP_NO_EDIT in words for words in said), "e refused in words")
            dialog = await open_armed(pilot, app, "a", ApproveDialog)
            await pilot.press("ctrl+e")
            await pilot.pause()
            assert shown(dialog.query_one("#hint", Static)) == ACP_NO_EDIT
            dialog.query_one("#always-scope", Select).value = "agent"
            assert str(dialog.query_one("#option-0", Button).label) == "Always allow"
            await pilot.click("#option-0")
            await wait_for(pilot, lambda: app.states[rid].status is Status.COMPLETED, "the write to be done", 60)
            await settle(pilot, app)
            kept = [r for r in app.harness.store.rules() if r.source == "acp"]
            assert [(r.effect, r.agent, r.scope, r.by) for r in kept] == [("allow", "writer", "agent", "operator")]
            await finish(pilot, app)
    finally:
        assert not processes_with(token), "an agent process was left behind"


# ---- "always allow…", "always deny…": a standing rule from the call ------------------------

async def open_rule_editor(pilot: Pilot[Any], app: TetherApp, key: str, dialog: type, effect: str) -> RuleEditor:
    await open_armed(pilot, app, key, dialog)
    await pilot.click(f"#always-{effect}")
    await wait_for(pilot, lambda: isinstance(app.screen, RuleEditor), "the rule editor")
    await pilot.pause()  # its lists take their values when mounted
    return app.screen  # type: ignore[return-value]


def fill(editor: RuleEditor, **fields: str) -> None:
    for name, value in fields.items():
        if name == "where":
            editor.query_one("#where", TextArea).text = value
        else:
            editor.query_one(f"#{name}", Input).value = value


async def test_always_allow_makes_a_rule_that_decides_the_call(tmp_path: Path) -> None:
    app = make_app(tmp_path, grace_s=0)
    said = notices(app)
    async with app.run_test(size=SIZE) as pilot:
        await destructive_waiting(pilot, app)
        editor = await open_rule_editor(pilot, app, "a", ApproveDialog, "allow")
        # Prefilled from the call: its tool, its agent, each string argument as a pattern.
        assert editor.query_one("#tool", Input).value == "delete_file"
        assert editor.query_one("#agent", Input).value == "destructive"
        assert editor.query_one("#where", TextArea).text == "path=access.log"
        assert str(editor.query_one("#scope").value) == "agent"  # type: ignore[attr-defined]
        fill(editor, where="path=*.log", reason="scratch logs go")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.states[RID].status is Status.COMPLETED, "the rule to decide the call")
        await settle(pilot, app)
        [rule] = app.harness.store.rules()
        assert (rule.effect, rule.tool, rule.agent, rule.where, rule.scope, rule.reason, rule.by) == \
            ("allow", "delete_file", "destructive", (Where("path", "*.log"),), "agent", "scratch logs go", "operator")
        decision = app.states[RID].approvals["call_1_0"]
        assert (decision.verdict, decision.by, decision.rule) == ("approved", f"rule {rule.id}", rule.id)
        assert not (tmp_path / "workspace" / "access.log").exists()
        assert any(f"rule {rule.id} saved" in words for words in said), said
        await finish(pilot, app)


async def test_always_deny_from_reject_makes_a_deny_rule(tmp_path: Path) -> None:
    app = make_app(tmp_path, grace_s=0)
    async with app.run_test(size=SIZE) as pilot:
        await destructive_waiting(pilot, app)
        editor = await open_rule_editor(pilot, app, "r", RejectDialog, "deny")
        assert str(editor.query_one("#effect").value) == "deny"  # type: ignore[attr-defined]
        fill(editor, reason="logs are evidence")
        editor.query_one("#scope").value = f"run:{RID}"  # type: ignore[attr-defined]
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.states[RID].status is Status.COMPLETED, "the rule to decide the call")
        await settle(pilot, app)
        [rule] = app.harness.store.rules()
        assert (rule.effect, rule.scope, rule.where) == ("deny", f"run:{RID}", (Where("path", "access.log"),))
        decision = app.states[RID].approvals["call_1_0"]
        assert (decision.verdict, decision.by) == ("rejected", f"rule {rule.id}")
        assert (tmp_path / "workspace" / "access.log").exists()
        await finish(pilot, app)


async def test_a_rule_the_check_refuses_is_said_and_nothing_is_saved(tmp_path: Path) -> None:
    app = make_app(tmp_path, grace_s=0)
    async with app.run_test(size=SIZE) as pilot:
        await destructive_waiting(pilot, app)
        editor = await open_rule_editor(pilot, app, "a", ApproveDialog, "allow")
        error = editor.query_one("#error", Static)
        await pilot.press("ctrl+s")  # no reason yet
        await pilot.pause()
        assert "say why in Reason" in shown(error)
        fill(editor, reason="scratch", where="path")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "write KEY=GLOB" in shown(error)
        fill(editor, where="nothing=*.log")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "delete_file has no argument 'nothing'" in shown(error) and "can never match" in shown(error)
        fill(editor, where="path=*.log", expires="soon")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "'soon' is not a duration" in shown(error)
        assert app.screen is editor and app.harness.store.rules() == []
        await pilot.press("escape")  # back to the approve dialog, then out: nothing decided
        await wait_for(pilot, lambda: isinstance(app.screen, ApproveDialog), "the approve dialog")
        await pilot.press("escape")
        await pilot.pause()
        assert app.states[RID].status is Status.INTERRUPTED and not app.states[RID].approvals
        await finish(pilot, app)


def test_the_where_patterns_of_a_call() -> None:
    assert where_lines('{"path": "old.log", "force": true, "glob": "a*[b]?"}') == ["path=old.log", "glob=a[*][[]b][?]"]
    assert where_lines("not json") == []


# ---- a run another process holds, waiting for a decision -------------------------------

async def spawn_waiting(tmp_path: Path, run_id: str) -> asyncio.subprocess.Process:
    """``tether run destructive --wait-for-decision``: a process that holds its run waiting."""
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tether.tui.cli", "run", "destructive", "--run-id", run_id, "--wait-for-decision",
        "--runs-dir", str(tmp_path / "runs"), "--workspace", str(tmp_path / "workspace"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def test_a_rule_made_here_decides_the_call_another_process_waits_on(tmp_path: Path) -> None:
    app = make_app(tmp_path, grace_s=0)
    async with app.run_test(size=SIZE) as pilot:
        await app.store_ready()
        run = await spawn_waiting(tmp_path, "d1")
        async with reaped(run):
            await wait_for(pilot, lambda: [p.run_id for p in app.pending_approvals()] == ["d1"],
                           "the other process's call to be pending", 60)
            app.select("d1")
            assert app.model.waits_in_process("d1")
            editor = await open_rule_editor(pilot, app, "a", ApproveDialog, "allow")
            fill(editor, where="path=*.log", reason="scratch logs go")
            await pilot.press("ctrl+s")
            code, out = await ended(run)
        assert code == 0, out
        await wait_for(pilot, lambda: app.states["d1"].status is Status.COMPLETED, "the completed state", 60)
        [rule] = app.harness.store.rules()
        decision = app.states["d1"].approvals["call_1_0"]
        assert (decision.verdict, decision.by, decision.rule) == ("approved", f"rule {rule.id}", rule.id)
        assert not app.active  # the process went on with it, not this console
        await finish(pilot, app)


async def test_edited_arguments_reach_the_process_that_waits(tmp_path: Path) -> None:
    app = make_app(tmp_path, grace_s=0)
    async with app.run_test(size=SIZE) as pilot:
        await app.store_ready()
        run = await spawn_waiting(tmp_path, "d2")
        async with reaped(run):
            await wait_for(pilot, lambda: [p.run_id for p in app.pending_approvals()] == ["d2"],
                           "the other process's call to be pending", 60)
            (tmp_path / "workspace" / "scratch.log").write_text("x\n", encoding="utf-8")
            app.select("d2")
            await pilot.press("e")
            await edit_to(pilot, app, '{"path": "scratch.log"}')
            code, out = await ended(run)
        assert code == 0, out
        await wait_for(pilot, lambda: app.states["d2"].status is Status.COMPLETED, "the completed state", 60)
        decision = app.states["d2"].approvals["call_1_0"]
        assert json.loads(decision.args or "") == {"path": "scratch.log"}
        assert not (tmp_path / "workspace" / "scratch.log").exists()
        assert (tmp_path / "workspace" / "access.log").exists()
        await finish(pilot, app)


# ---- the rules screen ---------------------------------------------------------------------

def rule_ids(screen: RulesScreen) -> list[str]:
    return [rule.id for rule in screen.rules]


async def test_the_rules_screen_lists_adds_and_removes(tmp_path: Path) -> None:
    app = make_app(tmp_path, grace_s=0)
    said = notices(app)
    store = app.harness.store
    first = store.rule_add(Rule("deny", "delete_file", "keep the evidence", "alice", agent="destructive",
                                where=(Where("path", "*.env"),), expires=time.time() + 3600))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("L")
        await wait_for(pilot, lambda: isinstance(app.screen, RulesScreen), "the rules screen")
        screen: RulesScreen = app.screen  # type: ignore[assignment]
        await wait_for(pilot, lambda: rule_ids(screen) == [first.id], "the rule on the store to be listed")
        table = screen.query_one("#rules", DataTable)
        cells = [str(cell) for cell in table.get_row_at(0)]
        assert cells[:6] == [first.id, "deny", "deny delete_file where path=*.env agent destructive", "store",
                             "keep the evidence", "alice"]
        # Another process adds one: the screen shows it (the owner-check timer polls the rules).
        second = await asyncio.to_thread(store.rule_add, Rule("allow", "read_file", "reading is fine", "bob"))
        await wait_for(pilot, lambda: rule_ids(screen) == [first.id, second.id], "the other process's rule")
        # Add from the screen: the same editor, empty.
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, RuleEditor), "the rule editor")
        editor: RuleEditor = app.screen  # type: ignore[assignment]
        assert editor.query_one("#tool", Input).value == "" and editor.query_one("#where", TextArea).text == ""
        fill(editor, tool="list_files", agent="ghost", reason="listing is harmless")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: len(screen.rules) == 3, "the new rule to be listed")
        added = screen.rules[-1]
        assert (added.effect, added.tool, added.agent, added.scope, added.by) == \
            ("allow", "list_files", "ghost", "store", "operator")
        assert any("warning: no agent named 'ghost' is known here" in words for words in said), said
        # Remove the first, confirmed.
        table.move_cursor(row=0)
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the confirmation")
        await pilot.press("n")  # kept
        await wait_for(pilot, lambda: app.screen is screen, "back on the rules screen")
        assert [r.id for r in store.rules()] == [first.id, second.id, added.id]
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), "the confirmation")
        await pilot.press("y")
        await wait_for(pilot, lambda: rule_ids(screen) == [second.id, added.id], "the rule to go")
        assert [r.id for r in store.rules()] == [second.id, added.id]
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.console_screen, "back on the console")
        await finish(pilot, app)


async def test_an_expired_rule_is_marked(tmp_path: Path) -> None:
    app = make_app(tmp_path, grace_s=0)
    rule = app.harness.store.rule_add(Rule("allow", "read_file", "for the demo", "alice", expires=time.time() - 60))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("L")
        await wait_for(pilot, lambda: isinstance(app.screen, RulesScreen) and app.screen.rules == [rule],
                       "the rule to be listed")
        cells = [str(cell) for cell in app.screen.query_one("#rules", DataTable).get_row_at(0)]
        assert cells[-1].startswith("expired ")
        await finish(pilot, app)


# ---- ask rules from the rule editor, as tether rules add --ask makes them ----------------------

async def open_new_rule(pilot: Pilot[Any], app: TetherApp) -> RuleEditor:
    """The rules screen's empty editor."""
    await pilot.press("L")
    await wait_for(pilot, lambda: isinstance(app.screen, RulesScreen), "the rules screen")
    await pilot.press("a")
    await wait_for(pilot, lambda: isinstance(app.screen, RuleEditor), "the rule editor")
    await pilot.pause()  # its lists take their values when mounted
    return app.screen  # type: ignore[return-value]


async def choose(pilot: Pilot[Any], editor: RuleEditor, **lists: Any) -> None:
    """Pick a value in each of the editor's lists (``on_deadline`` for ``#on-deadline``)."""
    for name, value in lists.items():
        editor.query_one(f"#{name.replace('_', '-')}", Select).value = value
    await pilot.pause()


async def test_the_rule_editor_makes_an_ask_rule_that_holds_calls_for_people(tmp_path: Path) -> None:
    """Ask, 2 people, a 10 min deadline that stops the run, for Tether's loop only: saved as
    the CLI's --ask --approvals 2 --deadline 10m --on-deadline stop --source tether saves it,
    listed in its words, and the next delete_file waits for two people with that deadline."""
    app = make_app(tmp_path, grace_s=0)
    async with app.run_test(size=SIZE) as pilot:
        editor = await open_new_rule(pilot, app)
        ask_fields = [editor.query_one(f"#{name}") for name in ("people", "deadline", "on-deadline")]
        assert all(field.disabled for field in ask_fields)  # an allow (the default) asks nobody
        await choose(pilot, editor, effect="ask")
        assert not any(field.disabled for field in ask_fields)
        await choose(pilot, editor, people=2, on_deadline="stop", source="tether")
        fill(editor, tool="delete_file", deadline="10m", reason="two people for a deletion")
        await pilot.press("ctrl+s")
        screen = app.screen
        await wait_for(pilot, lambda: isinstance(screen, RulesScreen) and len(screen.rules) == 1, "the rule listed")
        [rule] = app.harness.store.rules()
        assert (rule.effect, rule.tool, rule.approvals, rule.deadline_s, rule.on_deadline, rule.source) == \
            ("ask", "delete_file", 2, 600.0, "stop", "tether")
        cells = [str(cell) for cell in screen.query_one("#rules", DataTable).get_row_at(0)]
        assert cells[1:3] == ["ask", "ask 2 people, stop after 10 min delete_file source tether"]
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.console_screen, "back on the console")
        waiting = await destructive_waiting(pilot, app)
        assert waiting.needed == 2 and waiting.on_deadline == "stop" and waiting.rule == rule.id
        assert waiting.deadline_at is not None and waiting.deadline_at - waiting.asked_at == 600.0
        await finish(pilot, app)


async def test_an_ask_rule_s_bad_deadline_is_said_in_the_dialog_and_nothing_is_saved(tmp_path: Path) -> None:
    app = make_app(tmp_path, grace_s=0)
    async with app.run_test(size=SIZE) as pilot:
        editor = await open_new_rule(pilot, app)
        await choose(pilot, editor, effect="ask")
        fill(editor, tool="deploy", deadline="soon", reason="two people for a deploy")
        await pilot.press("ctrl+s")
        await pilot.pause()
        error = shown(editor.query_one("#error", Static))
        assert error == "Deadline: 'soon' is not a duration: write 90s, 10m, 2h, 7d or 1h30m", error
        fill(editor, deadline="0s")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert shown(editor.query_one("#error", Static)) == "Deadline: '0s' is not a duration above zero"
        assert app.screen is editor and app.harness.store.rules() == []
        # Back to an allow: the deadline typed stays in its field, greyed out, and is not part of the rule.
        await choose(pilot, editor, effect="allow")
        assert editor.query_one("#deadline", Input).disabled and editor.query_one("#deadline", Input).value == "0s"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: len(app.harness.store.rules()) == 1, "the allow rule to be saved")
        [rule] = app.harness.store.rules()
        assert (rule.effect, rule.approvals, rule.deadline_s, rule.source) == ("allow", 1, None, None)
        await finish(pilot, app)


async def test_an_ask_rule_made_from_a_call_leaves_the_call_waiting_and_says_so(tmp_path: Path) -> None:
    app = make_app(tmp_path, grace_s=0)
    said = notices(app)
    async with app.run_test(size=SIZE) as pilot:
        await destructive_waiting(pilot, app)
        editor = await open_rule_editor(pilot, app, "a", ApproveDialog, "allow")
        await choose(pilot, editor, effect="ask", people=2)
        fill(editor, reason="two people for a deletion")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: any("this call still waits for a decision" in w for w in said), "the words")
        [rule] = app.harness.store.rules()
        assert (rule.effect, rule.approvals) == ("ask", 2)
        assert any(f"rule {rule.id} asks for people (ask 2 people delete_file where path=access.log agent "
                   "destructive): it decides nothing by itself" in words for words in said), said
        st = app.states[RID]
        assert st.status is Status.INTERRUPTED and not st.approvals and not app.active
        assert (tmp_path / "workspace" / "access.log").exists()
        await finish(pilot, app)


# ---- the decisions screen -----------------------------------------------------------------

async def test_the_decisions_screen_lists_a_decision_and_goes_to_its_run(tmp_path: Path) -> None:
    app = make_app(tmp_path, grace_s=0)
    async with app.run_test(size=SIZE) as pilot:
        await destructive_waiting(pilot, app)
        app.decisions.approve_run(RID, "disk is full", call_id="call_1_0")
        await settle(pilot, app, "the approved run to finish")
        app.create_run(NewRunRequest("plan"), run_id="plan-1")  # selected elsewhere when the decision is chosen
        await settle(pilot, app)
        app.select("plan-1")
        await pilot.press("D")
        await wait_for(pilot, lambda: isinstance(app.screen, DecisionsScreen), "the decisions screen")
        screen: DecisionsScreen = app.screen  # type: ignore[assignment]
        await wait_for(pilot, lambda: len(screen.records) == 1, "the decision to be listed")
        cells = [str(cell) for cell in screen.query_one("#decisions", DataTable).get_row_at(0)]
        assert cells[1:6] == [RID, "delete_file", '{"path":"access.log"}', "approved", f"operator as {accounts.me()}"]
        # Filtered by a decider who decided nothing: none.
        by = screen.query_one("#by", Input)
        by.focus()
        by.value = "mallory"
        await pilot.press("enter")
        await wait_for(pilot, lambda: not screen.records, "the filter to apply")
        assert "no decisions fit the filters" in shown(screen.query_one("#decisions-count", Static))
        by.value = "OPERATOR"  # a name, whatever its case
        by.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(screen.records) == 1, "the filter to apply")
        screen.query_one("#decisions", DataTable).focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is app.console_screen, "back on the console")
        assert app.selected == RID
        await finish(pilot, app)


# ---- on PostgreSQL: the same, with every read and write of the store off the event loop -------

async def test_rules_and_decisions_on_postgresql_off_the_loop(pg: PgStore, pg_url: str, tmp_path: Path,
                                                              on_loop: list[str]) -> None:
    """A run another process left waiting (nobody holds it): "always allow" saves the rule on
    the database and this console goes on with the run, decided by it; the rules screen and
    the decisions screen read the database; no psycopg call is made on the event loop."""
    app = pg_console(tmp_path, pg_url)
    async with app.run_test(size=SIZE) as pilot:
        await app.store_ready()
        run = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "tether.tui.cli", "run", "destructive", "--run-id", "pg-a1", "--workspace",
            str(tmp_path / "w"), "--store", pg_url, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        code, out = await ended(run)
        assert code == 5, out  # interrupted: waiting for approval, nobody holds it
        await wait_for(pilot, lambda: [p.run_id for p in app.pending_approvals()] == ["pg-a1"],
                       "the waiting call to be pending", 60)
        app.select("pg-a1")
        editor = await open_rule_editor(pilot, app, "a", ApproveDialog, "allow")
        fill(editor, where="path=*.log", reason="scratch logs go")
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: app.states["pg-a1"].status is Status.COMPLETED, "the rule to decide it", 60)
        [rule] = await asyncio.to_thread(pg.rules)
        assert app.states["pg-a1"].approvals["call_1_0"].by == f"rule {rule.id}"
        await pilot.press("L")
        await wait_for(pilot, lambda: isinstance(app.screen, RulesScreen) and rule_ids(app.screen) == [rule.id],
                       "the rule on the rules screen", 60)
        await pilot.press("escape")
        await pilot.press("D")
        await wait_for(pilot, lambda: isinstance(app.screen, DecisionsScreen) and len(app.screen.records) == 1,
                       "the decision on the decisions screen", 60)
        assert app.screen.records[0].by == f"rule {rule.id}"  # type: ignore[attr-defined]
        await pilot.press("escape")
        await finish(pilot, app)
    assert on_loop == []


# ---- a fleet budget's call (tether.approvals.budget_ask) -----------------------------------

async def test_a_budget_call_shows_in_its_words_and_is_approved_with_an_amount_and_rejected_here(
        tmp_path: Path) -> None:
    """A spent ``ask`` fleet budget holds the run on its ``budget`` call: the dialog shows its
    words and its arguments; approving with edited arguments lifts it by that amount (the run
    goes on, then asks again); rejecting ends the run as a budget exit."""
    from tether.agents.config import load_config
    from tether.vocab.state import Limits, MaxBudget

    config = tmp_path / "tether.toml"
    config.write_text('[budgets.runaway-daily]\nagent = "runaway"\nusd = 0.02\non_exceed = "ask"\n')
    app = make_app(tmp_path, grace_s=0, config=load_config(config))
    rid = "runaway-1"
    async with app.run_test(size=SIZE) as pilot:
        app.create_run(NewRunRequest("runaway", limits=Limits(max_turns=None)), run_id=rid)
        app.select(rid)
        await settle(pilot, app, "runaway to wait on its budget call")
        first = app.states[rid].interruption
        assert isinstance(first, NeedsApproval) and first.tool_name == "budget"
        dialog = await open_armed(pilot, app, "a", ApproveDialog)
        said = dialog_text(dialog)
        assert "tool      budget" in said and "budget runaway-daily ($0.02/day) reached: $0.0" in said
        assert "approve to go on (approving adds $0.02 for this run" in said
        assert json.loads(shown(dialog.query_one("#args", Static))) == {"usd": 0.02}
        await pilot.press("ctrl+e")
        await wait_for(pilot, lambda: isinstance(app.screen, ArgsEditor), "the arguments editor")
        app.screen.query_one("#args-text", TextArea).text = '{"usd": 0.03}'
        await pilot.press("ctrl+s")
        await settle(pilot, app, "the run to go on, then ask again")
        st = app.states[rid]
        second = st.interruption
        assert isinstance(second, NeedsApproval) and second.tool_name == "budget" and second.call_id != first.call_id
        assert st.approvals[first.call_id].verdict == "approved" and st.cost_usd >= 0.05  # lifted by $0.03
        dialog = await open_armed(pilot, app, "r", RejectDialog)
        await pilot.press(*"enough today", "enter")
        await settle(pilot, app, "the run to end as a budget exit")
        st = app.states[rid]
        assert st.status is Status.BUDGET_EXCEEDED and st.interruption == MaxBudget()
        assert st.approvals[second.call_id].verdict == "rejected" and st.approvals[second.call_id].text == "enough today"
        await finish(pilot, app)


async def test_an_acp_agents_budget_call_is_approved_here_with_another_amount_and_the_agent_goes_on(
        tmp_path: Path) -> None:
    """An ACP agent's run held on a fleet budget's call (its process waits, in this console):
    unlike its agent's own calls, the amount can be edited; approving sends the agent on."""
    from tether.agents.config import load_config
    from tests.acp.conftest import fake_agent

    token = uuid.uuid4().hex
    workspace = tmp_path / "ws-spender"
    workspace.mkdir()
    env = {"MCP_TEST_TOKEN": token, **({"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {})}
    config = tmp_path / "tether.toml"
    config.write_text(f"[agents.spender]\nacp = {json.dumps(fake_agent('spend'))}\nworkspace = {json.dumps(str(workspace))}\n"
                      "env = { " + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env.items()) + " }\n\n"
                      '[budgets.acp-daily]\nsource = "acp"\nusd = 0.03\non_exceed = "ask"\n')
    app = make_app(tmp_path, grace_s=0, config=load_config(config))
    async with app.run_test(size=SIZE) as pilot:
        rid = app.create_run(NewRunRequest("", "spend", agent="spender"))
        app.select(rid)
        await wait_for(pilot, lambda: waits(app, rid), "the agent's run to wait on its budget call")
        first = app.states[rid].interruption
        assert first.tool_name == "budget" and first.why.startswith("budget acp-daily ($0.03/day) reached")
        dialog = await open_armed(pilot, app, "a", ApproveDialog)
        assert not dialog.acp and dialog.query("#edit")  # the amount can be edited
        await pilot.press("ctrl+e")
        await wait_for(pilot, lambda: isinstance(app.screen, ArgsEditor), "the arguments editor")
        # (a lift beyond what the agent may spend before it acts on the cancel: it goes on for another turn)
        app.screen.query_one("#args-text", TextArea).text = '{"usd": 0.2}'
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: waits(app, rid) and app.states[rid].interruption.call_id != first.call_id,
                       "the agent to go on, then wait on the budget again")
        st = app.states[rid]
        assert st.approvals[first.call_id].args == '{"usd": 0.2}' and st.cost_usd >= 0.23 and st.turns == 2
        await open_armed(pilot, app, "r", RejectDialog)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.states[rid].status is Status.BUDGET_EXCEEDED, "a budget exit")
        await finish(pilot, app)
    assert not processes_with(token), "an agent process was left behind"

"""The console, driven headlessly with Textual's pilot.

Every wait is on a condition (a run's status, a dialog being armed, the workers being
done), polled with ``pilot.pause()`` under a generous cap that fails the test; nothing
synchronises on a fixed sleep, and nothing asserts on timing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, Select

from tether.demo.provider.scenarios import DESTRUCTIVE_DECLINED, DESTRUCTIVE_DELETED, PLAN_ANSWER
from tether.vocab.state import Cancelled, Limits, NeedsApproval, Status
from tether.tui.app import TetherApp
from tether.tui.cli.console import run_console
from tether.tui.run_actions import STOP_REASON
from tether.tui.widgets.approvals import ApprovalsPane
from tether.tui.screens.decision import ApproveDialog, RejectDialog
from tether.tui.screens.follow_up import FollowUpDialog
from tether.tui.screens.help import HelpScreen
from tether.tui.screens.new_run import NewRunDialog, NewRunRequest
from tether.tui.screens.resume import ResumeDialog
from tether.tui.widgets.runs_list import RunsList
from tether.tui.state.text import clean

from tests.support import SIZE, finish, make_app, open_armed, settle, transcript, wait_for


def status(app: TetherApp, rid: str) -> Status:
    return app.states[rid].status


async def destructive_waiting(pilot: Pilot[Any], app: TetherApp, rid: str = "destructive-1") -> str:
    app.create_run(NewRunRequest("destructive"), run_id=rid)
    app.select(rid)
    await settle(pilot, app, "destructive to stop for approval")
    assert isinstance(app.states[rid].interruption, NeedsApproval)
    return rid


# ---- Stop -------------------------------------------------------------------------------

async def test_stop_during_scan_archive(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        rid = app.create_run(NewRunRequest("slow"), run_id="slow-1")
        app.select(rid)
        await wait_for(pilot, lambda: any("scanned 200 of 1200" in line for line in app.trace_lines(rid)),
                       "scan_archive to report progress")
        assert app.check_action("stop", ()) is True
        await pilot.press("s")
        await settle(pilot, app)
        st = app.states[rid]
        assert st.status is Status.INTERRUPTED
        assert st.interruption == Cancelled(STOP_REASON, "operator")  # who stopped it is recorded (deterministic: "operator")
        text = transcript(app)
        assert STOP_REASON in text
        assert "cancelled by the operator" in text
        scanned = re.search(r"\((\d+) of 1200 entries scanned\)", text)
        assert scanned is not None, text
        assert 200 <= int(scanned.group(1)) < 1200
        assert app.check_action("stop", ()) is None  # greyed out now
        assert app.check_action("resume", ()) is True  # a cancelled run can go on
        await finish(pilot, app)


# ---- approvals ----------------------------------------------------------------------------

async def test_approve_deletes_and_completes(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        rid = await destructive_waiting(pilot, app)
        pane = app.console_screen.query_one("#approvals", ApprovalsPane)
        assert [p.tool for p in pane.items] == ["delete_file"]
        assert app.check_action("approve", ()) is True and app.check_action("stop", ()) is None
        dialog = await open_armed(pilot, app, "a", ApproveDialog)
        assert (dialog.tool, dialog.call_id) == ("delete_file", "call_1_0")
        assert "access.log" in dialog.args
        await pilot.press(*"disk is full")
        await pilot.press("enter")
        await settle(pilot, app, "the approved run to finish")
        assert status(app, rid) is Status.COMPLETED
        assert not (tmp_path / "workspace" / "access.log").exists()
        text = transcript(app)
        assert "Approved by the operator (disk is full)." in text
        assert DESTRUCTIVE_DELETED in text
        assert pane.items == []
        await finish(pilot, app)


async def test_enter_is_ignored_during_the_grace_period(tmp_path: Path) -> None:
    app = make_app(tmp_path, grace_s=3600)  # never armed during this test: deterministic
    async with app.run_test(size=SIZE) as pilot:
        rid = await destructive_waiting(pilot, app)
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, ApproveDialog), "the approve dialog")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ApproveDialog)  # the stray Enter did nothing
        assert not app.active and status(app, rid) is Status.INTERRUPTED
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ApproveDialog), "the dialog to close")
        assert status(app, rid) is Status.INTERRUPTED
        assert (tmp_path / "workspace" / "access.log").exists()
        await finish(pilot, app)


@pytest.mark.parametrize("reason, words", [
    ("access.log is still needed", "The operator declined this call: access.log is still needed. Nothing was done."),
    ("", "The operator declined this call: no reason given. Nothing was done."),
])
async def test_reject_writes_the_decision_in_words(tmp_path: Path, reason: str, words: str) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        rid = await destructive_waiting(pilot, app)
        await open_armed(pilot, app, "r", RejectDialog)
        if reason:
            await pilot.press(*reason)
        await pilot.press("enter")
        await settle(pilot, app, "the rejected run to finish")
        assert status(app, rid) is Status.COMPLETED
        text = transcript(app)
        assert words in text
        assert DESTRUCTIVE_DECLINED in text
        assert (tmp_path / "workspace" / "access.log").exists()
        await finish(pilot, app)


# ---- new run, resume ----------------------------------------------------------------------------

async def test_a_print_while_the_console_runs_leaves_it_running(tmp_path: Path) -> None:
    """A tool (a plain function of the user's) may print and flush: Textual captures it, and
    the console goes on."""
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        print("a tool's own print", flush=True)
        await pilot.pause()
        app.create_run(NewRunRequest("plan"), run_id="plan-1")
        await settle(pilot, app, "plan to finish")
        assert app.is_running and status(app, "plan-1") is Status.COMPLETED
        await finish(pilot, app)


async def test_new_run_from_the_dialog(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, NewRunDialog), "the new-run dialog")
        dialog = app.screen
        dialog.query_one("#agent", Select).value = ("demo", "recover")
        dialog.query_one("#tool-errors", Select).value = "generic"
        dialog.query_one("#dedupe", Select).value = "off"
        dialog.query_one("#budget", Input).value = "0.5"
        turns = dialog.query_one("#max-turns", Input)
        turns.focus()
        turns.value = ""
        await pilot.press(*"7")
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, NewRunDialog), "the dialog to start the run")
        await settle(pilot, app)
        [rid] = list(app.states)
        st = app.states[rid]
        assert st.model == "recover" and app.selected == rid
        assert (st.limits.max_turns, st.limits.budget_usd) == (7, 0.5)
        assert (st.policies.tool_errors, st.policies.dedupe) == ("generic", "off")
        # the generic policy hides the hint, so the model gives up politely
        assert st.status is Status.COMPLETED and st.answer == "I could not read the file, so I do not know."
        await finish(pilot, app)


async def test_new_run_dialog_refuses_bad_limits(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, NewRunDialog), "the new-run dialog")
        field = app.screen.query_one("#max-turns", Input)
        field.focus()
        field.value = "lots"
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, NewRunDialog) and not app.states
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, NewRunDialog), "the dialog to close")
        assert not app.states
        await finish(pilot, app)


async def test_resume_with_raised_limits(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        rid = app.create_run(NewRunRequest("runaway", limits=Limits(max_turns=3)), run_id="runaway-1")
        app.select(rid)
        await settle(pilot, app)
        assert status(app, rid) is Status.MAX_TURNS_EXCEEDED and app.states[rid].turns == 3
        assert app.check_action("resume", ()) is True
        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, ResumeDialog), "the resume dialog")
        field = app.screen.query_one("#max-turns", Input)
        field.value = "5"
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, ResumeDialog), "the resume dialog to close")
        await settle(pilot, app, "the resumed run to stop")
        st = app.states[rid]
        assert st.status is Status.MAX_TURNS_EXCEEDED
        assert (st.turns, st.limits.max_turns) == (5, 5)
        assert len(st.per_turn_prompt_tokens) == 5
        footers = [line for line in transcript(app).splitlines() if line.startswith("── ")]
        assert footers == ["── max_turns_exceeded: turn cap reached: 5 of 5 turns ──"]  # replaced, not added
        shown = app.transcript_view.screen_text
        assert "3 of 3 turns" not in shown and shown.count("5 of 5 turns") == 1
        await finish(pilot, app)


async def test_a_follow_up_from_the_console_goes_on_from_a_completed_run(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        rid = app.create_run(NewRunRequest("plan"), run_id="plan-1")
        app.select(rid)
        await settle(pilot, app)
        before = app.states[rid].turns
        assert status(app, rid) is Status.COMPLETED and app.check_action("follow_up", ()) is True
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, FollowUpDialog), "the follow-up dialog")
        await pilot.press("enter")  # nothing typed: said in words, and the dialog stays
        assert "type what to tell the agent" in str(app.screen.query_one("#error").render())
        app.screen.query_one("#message", Input).value = "Which file is the largest?"
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, FollowUpDialog), "the dialog to close")
        await settle(pilot, app, "the run to go on and stop")
        st = app.states[rid]
        assert st.status is Status.COMPLETED and st.turns == before + 1
        assert [m["content"] for m in st.messages if m["role"] == "user"][-1] == "Which file is the largest?"
        assert "Which file is the largest?" in transcript(app)
        await finish(pilot, app)


async def test_follow_up_does_not_apply_to_a_run_waiting_for_approval(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        rid = app.create_run(NewRunRequest("destructive"), run_id="destructive-1")
        app.select(rid)
        await settle(pilot, app)
        assert app.check_action("follow_up", ()) is None  # greyed in the footer
        await pilot.press("m")
        assert not isinstance(app.screen, FollowUpDialog)
        await finish(pilot, app)


# ---- restart ---------------------------------------------------------------------------------------

async def test_restart_with_a_pending_approval(tmp_path: Path) -> None:
    first = make_app(tmp_path)
    async with first.run_test(size=SIZE) as pilot:
        rid = await destructive_waiting(pilot, first)
        await pilot.press("q")
    assert not first.active and first.return_code == 0

    second = make_app(tmp_path)
    async with second.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert rid in second.states and status(second, rid) is Status.INTERRUPTED
        pane = second.console_screen.query_one("#approvals", ApprovalsPane)
        assert [p.run_id for p in pane.items] == [rid]
        second.select(rid)
        await open_armed(pilot, second, "a", ApproveDialog)
        await pilot.press("enter")
        await settle(pilot, second, "the approved run to finish")
        assert status(second, rid) is Status.COMPLETED
        assert not (tmp_path / "workspace" / "access.log").exists()
        assert DESTRUCTIVE_DELETED in transcript(second)
        await finish(pilot, second)


async def test_quit_stops_running_runs_and_saves_them(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        rid = app.create_run(NewRunRequest("slow"), run_id="slow-q")
        await wait_for(pilot, lambda: any("tool_start" in line for line in app.trace_lines(rid)),
                       "scan_archive to start")
        await pilot.press("q")
    assert not app.active
    again = make_app(tmp_path)
    saved = again.harness.store.load(rid)
    assert saved.status is Status.INTERRUPTED
    assert saved.interruption == Cancelled("operator quit the console", "operator")


# ---- hostile text --------------------------------------------------------------------------------------

HOSTILE = "[/] then [bold red]x[/] and [link=http://x]y[/link]\x1b[2J\rBEL\x07 done\n"


async def test_tool_output_with_markup_and_control_characters(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        rid = app.create_run(NewRunRequest("plan"), run_id="plan-markup", start=False)
        (tmp_path / "workspace" / "errors.log").write_text(HOSTILE, encoding="utf-8")
        app.start_run(rid)
        app.select(rid)
        await settle(pilot, app, "the plan to finish")
        assert status(app, rid) is Status.COMPLETED
        view = app.transcript_view
        text = view.text
        assert "[/] then [bold red]x[/] and [link=http://x]y[/link]" in text  # literal, not parsed
        assert "␛[2J" in text and "␍BEL␇" in text  # control characters made visible
        assert "\x1b" not in view.screen_text and "\r" not in view.screen_text and "\x07" not in view.screen_text
        assert "[bold red]x[/]" in view.screen_text
        svg = app.export_screenshot()  # the whole screen renders
        assert "bold red" not in svg or "[bold red]" in svg.replace("&#160;", " ")
        assert PLAN_ANSWER in text
        await finish(pilot, app)


def test_clean_makes_controls_visible() -> None:
    assert clean("a\x1b[31mb\rc\x07\x7f\u202ed") == "a␛[31mb␍c␇␡\ufffdd"
    assert clean("tab\there") == "tab here"


# ---- workers, several runs, children ----------------------------------------------------------------------

async def test_a_worker_error_shows_as_the_run_failure(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        async def boom(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("the endpoint exploded")

        app.harness.run = boom  # type: ignore[method-assign]
        rid = app.create_run(NewRunRequest("plan"), run_id="plan-boom")
        app.select(rid)
        await settle(pilot, app)
        assert app.is_running
        assert app.badge_key(rid) == "worker_error"
        assert "the endpoint exploded" in app.reason(rid)
        assert "the endpoint exploded" in transcript(app)
        await finish(pilot, app)


async def test_several_runs_at_once_and_a_subagent_under_its_parent(tmp_path: Path) -> None:
    app = make_app(tmp_path, start=["slow", "research", "plan"])
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: len(app.active) >= 1 and any(
            s.model == "slow" and s.status is Status.RUNNING for s in app.states.values()), "slow to be running")
        slow = next(r for r, s in app.states.items() if s.model == "slow")
        await wait_for(pilot, lambda: all(status(app, r) is Status.COMPLETED
                                          for r, s in app.states.items() if s.model != "slow"),
                       "research and plan to finish while slow runs")
        assert slow in app.active  # still running: the runs are concurrent
        app.runs.stop_run(slow)
        await settle(pilot, app)
        research = next(r for r, s in app.states.items() if s.model == "research")
        children = [r for r, s in app.states.items() if s.parent_run_id == research]
        assert len(children) == 1
        order = app.console_screen.query_one("#runs", RunsList).order
        assert order[order.index(research) + 1] == children[0]  # shown under its parent
        parent = app.states[research]
        assert parent.child_cost_usd > 0 and parent.cost_usd > parent.own_cost_usd
        app.select(research)
        await pilot.pause()
        assert any("↳" in line for line in app.trace_lines(research))  # the child's events in the parent's trace
        await finish(pilot, app)


async def test_keys_are_greyed_out_and_in_the_palette_and_help(tmp_path: Path) -> None:
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        assert app.check_action("stop", ()) is None and app.check_action("new_run", ()) is True
        rid = await destructive_waiting(pilot, app)
        assert app.selected == rid
        titles = {c.title for c in app.get_system_commands(app.screen)}
        assert {"New run", "Approve call", "Reject call", "Help"} <= titles
        assert "Stop run" not in titles
        bindings = {b.binding.id: b.enabled for b in app.screen.active_bindings.values() if b.binding.id}
        assert bindings["tether.approve"] and not bindings["tether.stop"] and not bindings["tether.resume"]
        await pilot.press("f1")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "the help screen")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen), "help to close")
        await pilot.press("tab")
        assert app.focused is app.console_screen.query_one("#approvals")
        await finish(pilot, app)


async def test_runs_from_earlier_sessions_are_listed(tmp_path: Path) -> None:
    first = make_app(tmp_path, start=["plan", "runaway"])
    async with first.run_test(size=SIZE) as pilot:
        await settle(pilot, first)
        await pilot.press("q")
    second = make_app(tmp_path)
    async with second.run_test(size=SIZE) as pilot:
        await pilot.pause()
        runs = second.console_screen.query_one("#runs", RunsList)
        assert len(runs.order) == 2
        assert {second.states[r].status for r in runs.order} == {Status.COMPLETED, Status.MAX_TURNS_EXCEEDED}
        await pilot.press("up")
        await pilot.pause()
        assert second.selected == runs.order[0]
        await finish(pilot, second)


def test_run_console_refuses_an_unknown_scenario(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    class Args:
        start = ["nope"]
        runs_dir = tmp_path / "runs"
        workspace = tmp_path / "workspace"

    assert run_console(Args()) == 2
    assert "unknown scenario 'nope'" in capsys.readouterr().err


async def test_trace_view_shows_each_event_once(tmp_path: Path) -> None:
    """Parent and child lines share one line counter: the view must not repeat any."""
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        rid = app.create_run(NewRunRequest("research"), run_id="research-t")
        app.select(rid)
        await settle(pilot, app)
        child = f"{rid}.call_0_0"
        for run in (rid, child):
            app.select(run)
            await pilot.pause()
            shown = [line.rstrip() for line in app.trace_view.lines if line]
            assert len(shown) == len(app.trace_lines(run)) == len(set(shown)), shown
        await finish(pilot, app)

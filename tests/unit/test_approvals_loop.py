"""The approvals model inside a run of Tether's loop (issue 25): standing rules decide at once,
an approval may change the arguments, a call may need two people, and a deadline answers a
call nobody decided (never with an approval)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from tether.approvals import Rule, parse_where
from tether.harness import Harness
from tether.demo.provider import scenarios
from tether.vocab.cancel import CancelSignal
from tether.vocab.state import Cancelled, NeedsApproval, Policies, StateError, Status
from tests import accounts


async def destructive(h: Harness, **policies) -> str:
    state = h.new_run("destructive", policies=Policies(**policies) if policies else None)
    return state.run_id


def rule(effect: str, tool: str = "delete_file", *where: str, **kw) -> Rule:
    return Rule(effect, tool, kw.pop("reason", "scratch logs"), kw.pop("by", "alice"),  # type: ignore[arg-type]
                where=tuple(parse_where(w) for w in where), **kw)


def tool_results(state) -> list[str]:
    return [m["content"] for m in state.messages if m["role"] == "tool"]


# ---- standing rules --------------------------------------------------------------------

async def test_an_allow_rule_decides_the_call_at_once_and_says_which_rule(harness: Harness, recorder):
    added = harness.store.rule_add(rule("allow", "delete_file", "path=*.log"))
    out = await harness.run(await destructive(harness))
    assert out.state.status is Status.COMPLETED
    assert not (harness.workspace.root / "access.log").exists()
    day = time.strftime("%Y-%m-%d")
    assert tool_results(out.state)[-1].startswith(f"Approved by rule {added.id} (scratch logs; alice, {day}).")
    (decision,) = out.state.approvals.values()
    assert (decision.verdict, decision.by, decision.rule) == ("approved", f"rule {added.id}", added.id)
    assert "approval_required" not in recorder.kinds(out.state.run_id)


async def test_a_deny_rule_answers_the_model_like_a_rejection(harness: Harness):
    added = harness.store.rule_add(rule("deny", "delete_*", reason="never delete logs", by="bob"))
    out = await harness.run(await destructive(harness))
    assert out.state.answer == scenarios.DESTRUCTIVE_DECLINED
    assert (harness.workspace.root / "access.log").exists()
    assert tool_results(out.state)[-1].startswith(f"Declined by rule {added.id} (never delete logs; bob, ")


async def test_deny_beats_a_narrower_allow_and_a_rule_that_does_not_fit_decides_nothing(harness: Harness):
    harness.store.rule_add(rule("allow", "delete_file", "path=access.log", scope="agent", agent="destructive"))
    harness.store.rule_add(rule("deny", "delete_file", reason="no deleting"))
    out = await harness.run(await destructive(harness))
    assert out.state.answer == scenarios.DESTRUCTIVE_DECLINED
    (decision,) = out.state.approvals.values()
    assert decision.rule == "R2"  # the deny, though the allow names the agent and the argument


async def test_a_rule_for_other_arguments_leaves_the_call_to_people(harness: Harness):
    harness.store.rule_add(rule("allow", "delete_file", "path=*.tmp"))
    out = await harness.run(await destructive(harness))
    assert out.state.status is Status.INTERRUPTED
    assert isinstance(out.state.interruption, NeedsApproval)


async def test_an_expired_rule_decides_nothing(harness: Harness):
    added = harness.store.rule_add(rule("allow", expires=time.time() + 0.05))
    await asyncio.sleep(0.1)
    out = await harness.run(await destructive(harness))
    assert isinstance(out.state.interruption, NeedsApproval), added


async def test_an_ask_rule_holds_a_call_that_needs_no_approval(harness: Harness):
    harness.store.rule_add(rule("ask", "read_file", reason="reading logs is sensitive"))
    out = await harness.run(harness.new_run("plan").run_id)
    waiting = out.state.interruption
    assert isinstance(waiting, NeedsApproval) and waiting.tool_name == "read_file"
    assert "reading logs is sensitive" in waiting.why and waiting.rule


async def test_a_rule_is_consulted_again_on_resume(harness: Harness):
    run_id = await destructive(harness)
    assert isinstance((await harness.run(run_id)).state.interruption, NeedsApproval)
    harness.store.rule_add(rule("allow"))
    out = await harness.run(run_id)
    assert out.state.status is Status.COMPLETED
    assert tool_results(out.state)[-1].startswith("Approved by rule ")


# ---- approve with edited arguments ------------------------------------------------------

async def test_an_edited_approval_runs_the_tool_with_the_operators_arguments(harness: Harness, recorder):
    run_id = await destructive(harness)
    await harness.run(run_id)
    out = await harness.approve(run_id, "only the old one", by="alice", args=json.dumps({"path": "errors.log"}))
    assert out.state.status is Status.COMPLETED
    assert (harness.workspace.root / "access.log").exists()  # what the model asked for: untouched
    assert not (harness.workspace.root / "errors.log").exists()  # what the operator approved: done
    assert [r["args"] for r in out.tool_runs] == [{"path": "errors.log"}]
    words = tool_results(out.state)[-1]
    assert words.startswith('Approved by the operator alice (only the old one), with changed arguments: it ran with '
                            '{"path": "errors.log"} (you asked for {"path": "access.log"}).')
    (decision,) = out.state.approvals.values()
    assert json.loads(decision.args) == {"path": "errors.log"}
    assert [e.args for e in recorder.events if e.kind == "approval_decision"] == ['{"path": "errors.log"}']


async def test_an_edited_approval_whose_tool_fails_still_tells_the_model_what_was_approved(harness: Harness,
                                                                                           recorder):
    """Issue 37, item 3: the model read only "Error: no such file: …" after an edited approval
    whose tool failed; the operator's note and the changed arguments were lost."""
    run_id = await destructive(harness)
    await harness.run(run_id)
    out = await harness.approve(run_id, "only that one", by="alice", args=json.dumps({"path": "gone.log"}))
    assert [r["args"] for r in out.tool_runs] == [{"path": "gone.log"}]
    words = tool_results(out.state)[-1]  # the transcript, as tether show prints it and the model reads it
    assert words.startswith('Approved by the operator alice (only that one), with changed arguments: it ran with '
                            '{"path": "gone.log"} (you asked for {"path": "access.log"}). Error: '), words
    assert "gone.log" in words.split(" Error: ", 1)[1]  # and the tool's own error after them
    result = [e for e in recorder.events if e.kind == "tool_result" and e.name == "delete_file"][-1]
    assert not result.ok and result.preview.startswith("Approved by the operator alice (only that one)")
    assert (harness.workspace.root / "access.log").exists()


@pytest.mark.parametrize(("edit", "words"), [
    ('{"path": 3}', "do not fit delete_file"),
    ('{"path": "a", "force": true}', "do not fit delete_file"),
    ("{path: x}", "not JSON"),
    ('["access.log"]', "must be a JSON object"),
])
async def test_an_edit_that_fails_the_schema_is_refused_and_consumes_nothing(harness: Harness, edit, words):
    run_id = await destructive(harness)
    await harness.run(run_id)
    with pytest.raises(StateError, match=words):
        await harness.approve(run_id, args=edit)
    state = harness.store.load(run_id)
    assert isinstance(state.interruption, NeedsApproval) and not state.approvals
    out = await harness.approve(run_id)  # the call is still there to decide
    assert out.state.answer == scenarios.DESTRUCTIVE_DELETED


# ---- two people ------------------------------------------------------------------------

async def test_a_two_person_call_needs_two_different_people(harness: Harness, recorder):
    harness.store.rule_add(rule("ask", approvals=2, reason="two people delete logs"))
    run_id = await destructive(harness)
    await harness.run(run_id)
    first = await harness.approve(run_id, by="alice", account="alice")
    waiting = first.state.interruption
    assert isinstance(waiting, NeedsApproval) and waiting.approvers == ("alice",) and waiting.tally == "1 of 2"
    assert waiting.progress == "1 of 2 approved (alice)"
    assert (harness.workspace.root / "access.log").exists()
    with pytest.raises(StateError, match="alice has approved delete_file .* already: it needs 2 different people"):
        await harness.approve(run_id, by="alice", account="alice")
    with pytest.raises(StateError, match="alice has approved delete_file .* already"):
        await harness.approve(run_id, by="ALICE", account="al")  # a name is a name whatever its case
    out = await harness.approve(run_id, by="bob", account="bob")
    assert out.state.status is Status.COMPLETED
    assert not (harness.workspace.root / "access.log").exists()
    (decision,) = out.state.approvals.values()
    assert decision.approvers == ["alice", "bob"] and decision.accounts == ["alice", "bob"] and decision.complete
    assert [(e.verdict, e.tally) for e in recorder.events if e.kind == "approval_decision"] == \
        [("pending", "1 of 2"), ("approved", "2 of 2")]


async def test_one_account_is_one_person_whatever_name_it_gives(harness: Harness):
    """Two approvals made in one process (one account on the store) are one person, though
    they give two names; the second is refused in words that say why, and nothing changes."""
    harness.store.rule_add(rule("ask", approvals=2, reason="two people delete logs"))
    run_id = await destructive(harness)
    await harness.run(run_id)
    me = accounts.me()  # the operating system's account, on the file store
    await harness.approve(run_id, by="ana")
    with pytest.raises(StateError) as refused:
        await harness.approve(run_id, by="bob")
    assert str(refused.value).startswith(f"the account {me} has approved delete_file (call_1_0) already, as ana: "
                                         "one account is one person")
    assert "the next approval must come from another account" in str(refused.value)
    state = harness.store.load(run_id)
    assert isinstance(state.interruption, NeedsApproval) and state.interruption.approvers == ("ana",)
    assert state.interruption.accounts == (me,) and state.interruption.progress == f"1 of 2 approved (ana as {me})"
    out = await harness.approve(run_id, by="bob", account="bob")  # another account (a web login)
    assert out.state.status is Status.COMPLETED
    (decision,) = out.state.approvals.values()
    assert (decision.approvers, decision.accounts) == (["ana", "bob"], [me, "bob"])
    assert await harness.account() == harness.store.account() == me


async def test_one_rejection_rejects_a_two_person_call(harness: Harness):
    harness.store.rule_add(rule("ask", approvals=2))
    run_id = await destructive(harness)
    await harness.run(run_id)
    await harness.approve(run_id, by="alice")
    out = await harness.reject(run_id, "not today", by="bob")
    assert out.state.answer == scenarios.DESTRUCTIVE_DECLINED
    assert (harness.workspace.root / "access.log").exists()


# ---- deadlines -------------------------------------------------------------------------

async def test_a_deadline_rejects_a_waiting_run_that_is_adopted_after_it(harness: Harness):
    run_id = await destructive(harness, decision_deadline_s=0.05)
    first = await harness.run(run_id)
    assert isinstance(first.state.interruption, NeedsApproval) and first.state.interruption.deadline_at
    await asyncio.sleep(0.1)
    out = await harness.run(run_id)  # whoever adopts it applies the deadline
    assert out.state.answer == scenarios.DESTRUCTIVE_DECLINED
    assert (harness.workspace.root / "access.log").exists()
    assert tool_results(out.state)[-1].startswith("No decision within ")
    (decision,) = out.state.approvals.values()
    assert (decision.verdict, decision.by) == ("rejected", "deadline")


async def test_a_deadline_rejects_while_the_process_waits(harness: Harness):
    run_id = await destructive(harness, decision_deadline_s=0.1)
    out = await harness.run(run_id, wait_for_decision=0)
    assert out.state.answer == scenarios.DESTRUCTIVE_DECLINED
    assert out.state.approvals and next(iter(out.state.approvals.values())).by == "deadline"


async def test_a_deadline_may_stop_the_run_instead(harness: Harness):
    run_id = await destructive(harness, decision_deadline_s=0.1, on_deadline="stop")
    out = await harness.run(run_id, wait_for_decision=0)
    assert out.state.status is Status.INTERRUPTED
    assert isinstance(out.state.interruption, Cancelled) and out.state.interruption.by == "deadline"
    assert "no decision on delete_file" in out.state.interruption.reason
    assert (harness.workspace.root / "access.log").exists()


async def test_escalation_asks_someone_else_then_rejects_after_one_more_deadline(harness: Harness, recorder):
    run_id = await destructive(harness, decision_deadline_s=0.1, on_deadline="escalate")
    out = await harness.run(run_id, wait_for_decision=0)
    assert out.state.answer == scenarios.DESTRUCTIVE_DECLINED
    kinds = recorder.kinds(run_id)
    assert kinds.count("approval_escalated") == 1
    assert kinds.index("approval_escalated") < kinds.index("approval_decision")


async def test_a_deadline_never_approves_and_a_decision_in_time_wins(harness: Harness):
    run_id = await destructive(harness, decision_deadline_s=30)
    task = asyncio.create_task(harness.run(run_id, wait_for_decision=0))
    while not isinstance(getattr(harness.live.get(run_id), "interruption", None), NeedsApproval):
        await asyncio.sleep(0.01)
    reply = await harness.decide(run_id, "approve", "go", by="carol")
    assert reply.ok, reply.words
    out = await task
    assert out.state.answer == scenarios.DESTRUCTIVE_DELETED


async def test_tether_runs_applies_the_deadline_of_a_run_nobody_holds(harness: Harness):
    from tether.actions.deadlines import apply_due

    run_id = await destructive(harness, decision_deadline_s=30)
    await harness.run(run_id)
    assert apply_due(harness.store, now=time.time()) == []  # not due yet
    done = apply_due(harness.store, now=time.time() + 31)
    assert len(done) == 1 and done[0].startswith(f"{run_id}: no decision on delete_file")
    assert done[0].endswith(f"the call was rejected; tether resume {run_id} goes on")
    state = harness.store.load(run_id)
    assert state.status is Status.INTERRUPTED and isinstance(state.interruption, Cancelled)
    assert state.interruption.by == "deadline"
    assert apply_due(harness.store, now=time.time() + 32) == []  # once
    out = await harness.run(run_id)
    assert out.state.answer == scenarios.DESTRUCTIVE_DECLINED
    assert (harness.workspace.root / "access.log").exists()


async def test_an_escalated_deadline_on_the_store_waits_once_more_then_rejects(harness: Harness):
    from tether.actions.deadlines import apply_due

    run_id = await destructive(harness, decision_deadline_s=10, on_deadline="escalate")
    await harness.run(run_id)
    first = apply_due(harness.store, now=time.time() + 11)
    assert "escalated" in first[0]
    state = harness.store.load(run_id)
    assert isinstance(state.interruption, NeedsApproval) and state.interruption.escalated
    assert apply_due(harness.store, now=time.time() + 12) == []  # the second deadline is not due yet
    second = apply_due(harness.store, now=time.time() + 30)
    assert "the call was rejected" in second[0]


async def waiting_past_its_deadline(h: Harness, run_id: str) -> NeedsApproval:
    """The run's call, saved waiting with nobody holding it, once the clock has passed its deadline."""
    out = await h.run(run_id)
    waiting = out.state.interruption
    assert isinstance(waiting, NeedsApproval) and waiting.deadline_at is not None
    while time.time() <= waiting.deadline_at:
        await asyncio.sleep(waiting.deadline_at - time.time() + 0.01)
    return waiting


async def until_held_waiting(h: Harness, run_id: str) -> NeedsApproval:
    """Until the process ``h`` holds ``run_id`` waiting for a decision."""
    while not isinstance(getattr(h.live.get(run_id), "interruption", None), NeedsApproval):
        await asyncio.sleep(0.01)
    return h.live[run_id].interruption


# ---- a decision after the deadline (issue 37, item 1) -----------------------------------

async def test_a_late_decision_reaching_the_process_that_waits_is_refused_in_words(harness: Harness):
    """The process that holds a call applies its deadline itself; a decision made after it
    (here, stamped after it: the process's own clock has not fired yet) is not taken."""
    from tether.store.control import ControlRequest

    run_id = await destructive(harness, decision_deadline_s=30, on_deadline="stop")
    task = asyncio.create_task(harness.run(run_id, wait_for_decision=0))
    try:
        waiting = await until_held_waiting(harness, run_id)
        late = ControlRequest("approve", "go", by="carol", ts=waiting.deadline_at + 1)
        reply = await harness.request(run_id, late)
        assert not reply.ok
        assert reply.words.startswith("too late: the decision deadline of delete_file (call_1_0) passed (no decision "
                                      "on delete_file (call_1_0) within 30 s); the process running ")
        assert "stops the run, and nothing was done. This decision was not taken" in reply.words
        assert (await harness.decide(run_id, "reject", "no", by="dan")).ok  # one in time is still taken
        out = await task
    finally:
        task.cancel()
    assert out.state.approvals["call_1_0"].by == "dan"
    assert (harness.workspace.root / "access.log").exists()


async def test_a_decision_in_the_escalations_time_is_taken_once_the_escalation_is_recorded(harness: Harness, recorder):
    """Escalated, the call waits one more deadline, counted from the first: a decision in it
    is taken; one after it is as late as any."""
    from tether.approvals.decisions import TooLate

    run_id = await destructive(harness, decision_deadline_s=30, on_deadline="escalate")
    waiting = (await harness.run(run_id)).state.interruption
    assert isinstance(waiting, NeedsApproval) and waiting.deadline_at is not None
    with pytest.raises(TooLate, match="no decision within 1 min"):  # 30 s, then 30 s more: past both
        await harness.approve(run_id, "go", by="erin", decided_at=waiting.deadline_at + 31)
    run_id = await destructive(harness, decision_deadline_s=30, on_deadline="escalate")
    waiting = (await harness.run(run_id)).state.interruption
    out = await harness.approve(run_id, "go", by="erin", decided_at=waiting.deadline_at + 29)
    assert out.state.answer == scenarios.DESTRUCTIVE_DELETED
    kinds = recorder.kinds(run_id)
    assert kinds.index("approval_escalated") < kinds.index("approval_decision")


async def test_a_queue_workers_decision_made_in_time_is_taken_after_the_deadline(harness: Harness):
    """A worker goes on with a decision made before the deadline (sent to its workflow), after
    it: the decision's own time is what counts, not the worker's."""
    run_id = await destructive(harness, decision_deadline_s=0.2)
    waiting = await waiting_past_its_deadline(harness, run_id)
    out = await harness.approve(run_id, "go", by="erin", decided_at=waiting.deadline_at - 0.1)
    assert out.state.answer == scenarios.DESTRUCTIVE_DELETED


async def test_a_rule_made_after_the_deadline_does_not_decide_the_call(harness: Harness):
    """Rules are deciders too: one added after the deadline neither decides the call of a run
    nobody holds when it goes on, nor is delivered to it."""
    from tether.actions.rules import apply_to_waiting

    run_id = await destructive(harness, decision_deadline_s=0.05)
    await waiting_past_its_deadline(harness, run_id)
    added = harness.store.rule_add(rule("allow"))
    (applied,) = await apply_to_waiting(harness.store, added)
    assert not applied.decided
    assert applied.words == (f"{added.id} fits delete_file (call_1_0) in {run_id}, but its decision deadline has "
                             "passed: the deadline decides it (reject), not a rule")
    out = await harness.run(run_id)
    assert out.state.answer == scenarios.DESTRUCTIVE_DECLINED
    assert out.state.approvals["call_1_0"].by == "deadline" and (harness.workspace.root / "access.log").exists()


async def test_a_late_program_decision_is_refused_and_a_stop_closes_its_call(harness: Harness):
    """The run API's wait: a decision made after the deadline is refused in words; a Stop
    (issue 37, item 8) ends the run with the call declined, on the record as the stopper's."""
    from tether.store.control import ControlRequest

    async def program() -> None:
        async with harness.track("bot", "deploy", policies=Policies(decision_deadline_s=30)) as run:
            await run.approval("deploy", {"env": "prod"}, call_id="c1")

    task = asyncio.create_task(program())
    try:
        while not harness.live or not isinstance(harness.store.load(next(iter(harness.live))).interruption,
                                                 NeedsApproval):
            await asyncio.sleep(0.01)
        run_id = next(iter(harness.live))
        waiting = harness.store.load(run_id).interruption
        reply = await harness.request(run_id, ControlRequest("approve", by="carol", ts=waiting.deadline_at + 1))
        assert not reply.ok and reply.words.startswith("too late: the decision deadline of deploy (c1) passed")
        stopped = await harness.stop(run_id, "wrong day", by="dan")
        assert stopped.ok, stopped.words
        await task
    finally:
        task.cancel()
    state = harness.store.load(run_id)
    assert state.status is Status.INTERRUPTED and state.interruption == Cancelled("wrong day", "dan")
    assert (state.approvals["c1"].verdict, state.approvals["c1"].by) == ("rejected", "dan")
    assert state.messages[-1]["content"] == "The operator dan declined this call: the run was stopped (wrong day). " \
                                            "Nothing was done."


# ---- deadline words and records (issue 37, item 7) --------------------------------------

async def test_the_deadline_is_worded_by_its_length_not_by_when_someone_looked(harness: Harness):
    from tether.actions.deadlines import apply_due

    run_id = await destructive(harness, decision_deadline_s=4)
    await harness.run(run_id)
    asked = harness.store.load(run_id).interruption.asked_at
    (done,) = apply_due(harness.store, now=asked + 9.2)  # someone looked 9.2 s after it asked
    assert done == (f"{run_id}: no decision on delete_file (call_1_0) within 4 s: the call was rejected; "
                    f"tether resume {run_id} goes on")
    decision = harness.store.load(run_id).approvals["call_1_0"]
    assert decision.text == "no decision within 4 s" and decision.ts == pytest.approx(asked + 4)


async def test_a_run_its_deadline_stops_keeps_the_deadlines_decision(harness: Harness):
    from tether.approvals import DecisionQuery

    run_id = await destructive(harness, decision_deadline_s=0.1, on_deadline="stop")
    out = await harness.run(run_id, wait_for_decision=0)  # the process waits, and applies it
    assert isinstance(out.state.interruption, Cancelled) and out.state.interruption.by == "deadline"
    (record,) = harness.store.decisions(DecisionQuery())
    assert (record.run_id, record.verdict, record.by) == (run_id, "rejected", "deadline")
    assert record.words == "the run was stopped (no decision on delete_file (call_1_0) within 0.1 s)"
    assert tool_results(out.state)[-1] == ("The run was stopped (no decision on delete_file (call_1_0) within 0.1 s): "
                                           "the call was declined. Nothing was done.")


# ---- Stop of a run whose process waits (issue 37, item 8) ---------------------------------

async def test_a_stop_while_the_process_waits_ends_the_run_and_a_shutdown_lets_it_wait(harness: Harness):
    run_id = await destructive(harness)
    task = asyncio.create_task(harness.run(run_id, wait_for_decision=0))
    await until_held_waiting(harness, run_id)
    reply = await harness.stop(run_id, "not now", by="dan")  # this process holds it: its own signal
    assert reply.ok
    out = await task
    assert out.state.status is Status.INTERRUPTED and out.state.interruption == Cancelled("not now", "dan")
    assert tool_results(out.state)[-1] == ("The operator dan declined this call: the run was stopped (not now). "
                                           "Nothing was done.")
    # A process shutting down (not a Stop) lets go of the run, which still waits for whoever decides it.
    other = await destructive(harness)
    signal = CancelSignal()
    task = asyncio.create_task(harness.run(other, wait_for_decision=0, signal=signal))
    await until_held_waiting(harness, other)
    signal.cancel("the console quit", "dan")
    out = await task
    assert isinstance(out.state.interruption, NeedsApproval) and not out.state.approvals


async def test_a_library_tool_may_need_two_people(tmp_path):
    import tether

    @tether.tool(needs_approval=True, approvals=2)
    def refund(amount: int) -> str:
        """Refund a customer."""
        return f"refunded {amount}"

    with pytest.raises(TypeError, match="approvals=2 is for a tool that needs approval"):
        tether.tool(approvals=2)(lambda amount: "")
    assert refund.approvals == 2


async def test_an_allow_rule_is_not_a_person_for_a_two_person_tool(harness: Harness):
    agent = harness.agent_named("destructive")
    next(t for t in agent.tool_list if t.name == "delete_file").approvals = 2
    harness.store.rule_add(rule("allow"))
    out = await harness.run(harness.create(agent).run_id)
    waiting = out.state.interruption
    assert isinstance(waiting, NeedsApproval) and waiting.needed == 2
    assert (harness.workspace.root / "access.log").exists()


async def test_a_call_asked_again_after_one_of_two_keeps_its_rule_and_deadline(harness: Harness):
    added = harness.store.rule_add(rule("ask", approvals=2, deadline_s=600, on_deadline="escalate"))
    run_id = await destructive(harness)
    first = (await harness.run(run_id)).state.interruption
    again = (await harness.approve(run_id, by="alice")).state.interruption
    assert isinstance(again, NeedsApproval) and again.approvers == ("alice",)
    assert (again.rule, again.on_deadline, again.deadline_at) == (added.id, "escalate", first.deadline_at)

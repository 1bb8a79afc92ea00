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
from tether.run.state import Cancelled, NeedsApproval, Policies, StateError, Status


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
    first = await harness.approve(run_id, by="alice")
    waiting = first.state.interruption
    assert isinstance(waiting, NeedsApproval) and waiting.approvers == ("alice",) and waiting.tally == "1 of 2"
    assert (harness.workspace.root / "access.log").exists()
    with pytest.raises(StateError, match="alice has approved delete_file .* already: it needs 2 different people"):
        await harness.approve(run_id, by="alice")
    out = await harness.approve(run_id, by="bob")
    assert out.state.status is Status.COMPLETED
    assert not (harness.workspace.root / "access.log").exists()
    (decision,) = out.state.approvals.values()
    assert decision.approvers == ["alice", "bob"] and decision.complete
    assert [(e.verdict, e.tally) for e in recorder.events if e.kind == "approval_decision"] == \
        [("pending", "1 of 2"), ("approved", "2 of 2")]


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
    from tether.approvals.deadlines import apply_due

    run_id = await destructive(harness, decision_deadline_s=0.05)
    await harness.run(run_id)
    assert apply_due(harness.store, now=time.time()) == []  # not due yet
    done = apply_due(harness.store, now=time.time() + 1)
    assert len(done) == 1 and done[0].startswith(f"{run_id}: no decision on delete_file")
    assert done[0].endswith(f"the call was rejected; tether resume {run_id} goes on")
    state = harness.store.load(run_id)
    assert state.status is Status.INTERRUPTED and isinstance(state.interruption, Cancelled)
    assert state.interruption.by == "deadline"
    assert apply_due(harness.store, now=time.time() + 2) == []  # once
    out = await harness.run(run_id)
    assert out.state.answer == scenarios.DESTRUCTIVE_DECLINED
    assert (harness.workspace.root / "access.log").exists()


async def test_an_escalated_deadline_on_the_store_waits_once_more_then_rejects(harness: Harness):
    from tether.approvals.deadlines import apply_due

    run_id = await destructive(harness, decision_deadline_s=10, on_deadline="escalate")
    await harness.run(run_id)
    first = apply_due(harness.store, now=time.time() + 11)
    assert "escalated" in first[0]
    state = harness.store.load(run_id)
    assert isinstance(state.interruption, NeedsApproval) and state.interruption.escalated
    assert apply_due(harness.store, now=time.time() + 12) == []  # the second deadline is not due yet
    second = apply_due(harness.store, now=time.time() + 30)
    assert "the call was rejected" in second[0]


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

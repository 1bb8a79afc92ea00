"""The run contract through the in-process scripted provider: exits, limits, policies."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import pytest

from tether.vocab.cancel import CancelSignal
from tether.harness import Harness
from tether.demo.provider import scenarios
from tether.vocab.state import (Cancelled, Limits, MaxBudget, MaxTurns, NeedsApproval, Policies, RunState, Status,
                          StopConditionMet)
from tether.store.trace import read_trace
from tether.demo.agents import DEMO


async def start(h: Harness, model: str, **kw):
    limits = kw.pop("limits", None)
    policies = kw.pop("policies", None)
    state = h.new_run(model, limits=limits, policies=policies)
    return await h.run(state.run_id, **kw)


# ---- the five exits ---------------------------------------------------------

async def test_plan_completes_with_its_answer(harness: Harness):
    out = await start(harness, "plan")
    assert out.state.status is Status.COMPLETED
    assert out.state.answer == scenarios.PLAN_ANSWER
    assert out.state.turns == 3
    assert [r["name"] for r in out.tool_runs] == ["list_files", "read_file"]
    assert out.state.interruption is None and out.state.error is None
    assert len(out.state.per_turn_prompt_tokens) == 3


async def test_cost_is_the_price_of_the_tokens(harness: Harness):
    out = await start(harness, "plan")
    s = out.state
    assert s.cost_usd == pytest.approx((s.prompt_tokens * 2.0 + s.completion_tokens * 12.0) / 1e6)
    assert sum(s.per_turn_prompt_tokens) == s.prompt_tokens


async def test_runaway_stops_at_the_turn_cap(harness: Harness):
    out = await start(harness, "runaway", limits=Limits(max_turns=5))
    assert out.state.status is Status.MAX_TURNS_EXCEEDED
    assert out.state.interruption == MaxTurns()
    assert out.state.turns == 5
    assert out.state.status.resumable


async def test_default_cap_is_twenty_and_a_budget_does_not_lift_it(harness: Harness):
    out = await start(harness, "runaway", limits=Limits(budget_usd=100.0))
    assert out.state.status is Status.MAX_TURNS_EXCEEDED
    assert out.state.turns == 20


async def test_runaway_capped_by_budget(harness: Harness):
    out = await start(harness, "runaway", limits=Limits(max_turns=None, budget_usd=0.01))
    assert out.state.status is Status.BUDGET_EXCEEDED
    assert out.state.interruption == MaxBudget()


async def test_soft_budget_overshoots_by_less_than_one_turn(harness: Harness, recorder):
    out = await start(harness, "runaway", limits=Limits(max_turns=None, budget_usd=0.01))
    turns = [e for e in recorder.events if e.kind == "turn"]
    last_turn_cost = turns[-1].cost_usd - turns[-2].cost_usd
    assert out.state.cost_usd >= 0.01
    assert out.state.cost_usd - 0.01 < last_turn_cost


async def test_strict_budget_never_crosses(harness: Harness):
    for budget in (0.01, 0.02, 0.05):
        out = await start(harness, "runaway", limits=Limits(max_turns=None, budget_usd=budget, budget_mode="strict"))
        assert out.state.status is Status.BUDGET_EXCEEDED
        assert out.state.cost_usd <= budget
        assert out.state.turns >= 1


async def test_limits_are_checked_before_the_first_call(harness: Harness):
    out = await start(harness, "plan", limits=Limits(max_turns=None, budget_usd=0.000001, budget_mode="strict"))
    assert out.state.status is Status.BUDGET_EXCEEDED
    assert out.state.turns == 0 and out.state.cost_usd == 0


def three_turns_is_enough(state) -> str | None:
    return "three turns is enough" if state.turns >= 3 else None


def model_says(exc: BaseException, tool: str) -> str:
    return f"{tool} says: {exc}. Call list_files first."


async def test_stop_condition_is_a_predicate_over_the_run(runs_dir, workspace):
    async with Harness(runs_dir, workspace, agent_sets=(DEMO,)) as h:
        agent = replace(h.agent_named("runaway"), stop_when=[three_turns_is_enough])
        out = await h.start(agent)
    assert out.state.status is Status.INTERRUPTED
    assert out.state.interruption == StopConditionMet("three turns is enough")
    assert out.state.turns == 3
    # Saved by reference: a harness that never saw the agent object still applies it.
    async with Harness(runs_dir, workspace, agent_sets=(DEMO,)) as other:
        again = await other.resume(out.state.run_id)
    assert again.state.interruption == StopConditionMet("three turns is enough")
    assert again.state.turns == 3


async def test_resume_with_a_higher_cap_continues(harness: Harness):
    out = await start(harness, "runaway", limits=Limits(max_turns=3))
    again = await harness.run(out.state.run_id, max_turns=6)
    assert again.state.status is Status.MAX_TURNS_EXCEEDED
    assert again.state.turns == 6
    assert len(again.state.per_turn_prompt_tokens) == 6


async def test_completed_run_cannot_be_resumed(harness: Harness):
    out = await start(harness, "plan")
    with pytest.raises(Exception, match="already ended"):
        await harness.run(out.state.run_id)


async def test_quadratic_growth_of_input_tokens(harness: Harness):
    fifty = await start(harness, "runaway", limits=Limits(max_turns=50))
    hundred = await start(harness, "runaway", limits=Limits(max_turns=100))
    ratio = hundred.state.prompt_tokens / fifty.state.prompt_tokens
    assert 3.5 <= ratio <= 4.1
    growth = hundred.state.per_turn_prompt_tokens
    assert all(b > a for a, b in zip(growth, growth[1:]))


# ---- tool errors as data ------------------------------------------------------

@pytest.mark.parametrize(
    ("policy", "status", "answer"),
    [
        ("fatal", Status.FAILED, None),
        ("generic", Status.COMPLETED, scenarios.RECOVER_GIVE_UP),
        ("descriptive", Status.COMPLETED, scenarios.RECOVER_ANSWER),
    ],
)
async def test_recover_only_descriptive_reaches_the_answer(harness: Harness, policy, status, answer):
    out = await start(harness, "recover", policies=Policies(tool_errors=policy))
    assert out.state.status is status
    assert out.state.answer == answer
    if policy == "fatal":
        assert "timeout.log" in out.state.error


async def test_custom_error_formatter(runs_dir, workspace):
    async with Harness(runs_dir, workspace, agent_sets=(DEMO,)) as h:
        agent = replace(h.agent_named("recover"), error_formatter=model_says,
                        policies=Policies(tool_errors="generic"))
        out = await h.start(agent)
    assert out.state.agent.spec["error_formatter"].endswith("test_loop:model_says")
    assert out.state.answer == scenarios.RECOVER_ANSWER
    tool_text = [m["content"] for m in out.state.messages if m["role"] == "tool"]
    assert tool_text[0].startswith("read_file says: no such file")


async def test_forbidden_with_triage_fails_after_one_tool_run(harness: Harness):
    out = await start(harness, "forbidden")
    assert out.state.status is Status.FAILED
    assert len(out.tool_runs) == 1
    assert "permission denied" in out.state.error
    assert not out.state.status.resumable


async def test_forbidden_without_triage_runs_to_the_cap(harness: Harness):
    out = await start(harness, "forbidden", limits=Limits(max_turns=6), policies=Policies(triage=False))
    assert out.state.status is Status.MAX_TURNS_EXCEEDED
    assert len(out.tool_runs) == 6
    secrets = (harness.workspace.root / "secrets.env").read_text()
    assert not any(secrets.strip() in (m.get("content") or "") for m in out.state.messages)


# ---- repeated calls -------------------------------------------------------------

async def test_dedupe_saves_a_tool_run_not_a_turn(harness: Harness, recorder):
    plain = await start(harness, "repeat", policies=Policies(dedupe="off"))
    deduped = await start(harness, "repeat", policies=Policies(dedupe="read-only"))
    assert plain.state.turns == deduped.state.turns == 3
    assert len(plain.tool_runs) == 2 and len(deduped.tool_runs) == 1
    assert deduped.state.prompt_tokens == plain.state.prompt_tokens
    results = [e for e in recorder.events if e.kind == "tool_result" and e.run_id == deduped.state.run_id]
    assert [e.cached for e in results] == [False, True]
    tool_messages = [m for m in deduped.state.messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["r0", "r1"]
    assert tool_messages[0]["content"] == tool_messages[1]["content"]


async def test_writes_are_not_deduped_by_default(harness: Harness):
    out = await start(harness, "repeat_write", policies=Policies(auto_approve=["delete_file"]))
    assert [r["name"] for r in out.tool_runs] == ["delete_file", "delete_file"]
    results = [m["content"] for m in out.state.messages if m["role"] == "tool"]
    assert results[0].startswith("Deleted access.log")
    assert "no such file" in results[1]  # the second call ran and found nothing to delete
    assert not (harness.workspace.root / "access.log").exists()


async def test_dedupe_all_swallows_the_second_write(harness: Harness):
    out = await start(harness, "repeat_write", policies=Policies(dedupe="all", auto_approve=["delete_file"]))
    assert [r["name"] for r in out.tool_runs] == ["delete_file"]
    assert out.state.turns == 3


# ---- approvals ---------------------------------------------------------------------

async def test_destructive_stops_for_approval_with_what_a_person_needs(harness: Harness, recorder):
    out = await start(harness, "destructive")
    s = out.state
    assert s.status is Status.INTERRUPTED
    assert isinstance(s.interruption, NeedsApproval)
    assert s.interruption.tool_name == "delete_file"
    assert json.loads(s.interruption.args) == {"path": "access.log"}
    assert s.interruption.call_id and s.interruption.why
    assert (harness.workspace.root / "access.log").exists()
    assert "approval_required" in recorder.kinds(s.run_id)


async def test_approve_runs_the_call_on_resume(harness: Harness, recorder):
    run_id = (await start(harness, "destructive")).state.run_id
    out = await harness.approve(run_id, "disk is full")
    assert out.state.status is Status.COMPLETED
    assert out.state.answer == scenarios.DESTRUCTIVE_DELETED
    assert not (harness.workspace.root / "access.log").exists()
    result = [m for m in out.state.messages if m["role"] == "tool"][-1]["content"]
    assert result.startswith("Approved by the operator (disk is full).")
    decision = [e for e in recorder.events if e.kind == "approval_decision"][0]
    assert decision.verdict == "approved"


@pytest.mark.parametrize("reason", ["keep the logs", ""])
async def test_reject_writes_the_decision_in_words(harness: Harness, reason):
    run_id = (await start(harness, "destructive")).state.run_id
    out = await harness.reject(run_id, reason)
    assert out.state.status is Status.COMPLETED
    assert out.state.answer == scenarios.DESTRUCTIVE_DECLINED
    assert (harness.workspace.root / "access.log").exists()
    slot = [m for m in out.state.messages if m["role"] == "tool"][-1]
    words = slot["content"]
    assert words.startswith("The operator declined this call: ")
    assert words.endswith("Nothing was done.")
    assert (reason or "no reason given") in words
    assert [r["name"] for r in out.tool_runs] == []


async def test_silent_rejection_lets_the_model_claim_the_deletion(harness: Harness):
    # What the lab shows: without the words in the result slot, the model claims the deletion.
    from tether.demo.lab import silent_reject

    run_id = (await start(harness, "destructive")).state.run_id
    out = await silent_reject(harness, run_id, "no")
    assert (harness.workspace.root / "access.log").exists()
    assert out.state.answer == scenarios.DESTRUCTIVE_DELETED  # the lie the words prevent


async def test_approval_is_single_use_and_bound_to_the_call(harness: Harness):
    run_id = (await start(harness, "destructive")).state.run_id
    await harness.approve(run_id)
    with pytest.raises(Exception, match="already decided: approved by operator"):
        await harness.approve(run_id)


async def test_approval_does_not_apply_to_changed_arguments(harness: Harness):
    run_id = (await start(harness, "destructive")).state.run_id
    from tether.approvals.decisions import approve

    # Approve, then tamper with the pending call's arguments in the saved state.
    state, handle = harness.store.open(run_id)
    approve(state, note="ok")
    call = state.messages[-1]["tool_calls"][0]
    call["function"]["arguments"] = json.dumps({"path": "errors.log"})
    handle.compact(state)  # rewrite the journal with the tampered call
    handle.release()

    out = await harness.run(run_id)
    assert out.state.status is Status.INTERRUPTED
    assert isinstance(out.state.interruption, NeedsApproval)
    assert "no longer applies" in out.state.interruption.why
    assert (harness.workspace.root / "errors.log").exists()


async def test_auto_approve_runs_unattended(harness: Harness):
    out = await start(harness, "destructive", policies=Policies(auto_approve=["delete_file"]))
    assert out.state.status is Status.COMPLETED
    assert not (harness.workspace.root / "access.log").exists()


# ---- cancellation and progress ------------------------------------------------------

async def test_stop_inside_scan_archive(harness: Harness, recorder):
    signal = CancelSignal()
    state = harness.new_run("slow")

    async def stop_after_first_progress():
        await recorder.wait_for(lambda e: e.kind == "tool_progress")
        signal.cancel("operator pressed Stop")

    stopper = asyncio.create_task(stop_after_first_progress())
    out = await harness.run(state.run_id, signal=signal)
    await stopper
    s = out.state
    assert s.status is Status.INTERRUPTED
    assert s.interruption == Cancelled("operator pressed Stop")
    result = [m for m in s.messages if m["role"] == "tool"][-1]["content"]
    assert result.startswith("cancelled by the operator after")
    assert "operator pressed Stop" in result and "did not finish" in result
    scanned = int(result.split("(")[1].split(" of ")[0])
    assert scanned < 1200
    progress = [e.label for e in recorder.events if e.kind == "tool_progress"]
    assert progress and progress[0] == "scanned 200 of 1200 entries"


async def test_one_stop_cancels_parent_and_child(runs_dir, workspace, recorder):
    signal = CancelSignal()
    async with Harness(runs_dir, workspace, sinks=[recorder], latency_ms=50, agent_sets=(DEMO,)) as h:
        state = h.new_run("research")

        async def stop_in_child():
            await recorder.wait_for(lambda e: e.kind == "turn" and e.run_id != state.run_id)
            signal.cancel("operator pressed Stop")

        stopper = asyncio.create_task(stop_in_child())
        out = await h.run(state.run_id, signal=signal)
        await stopper
        child = h.load(out.state.children[0])
    assert out.state.status is Status.INTERRUPTED
    assert child.status is Status.INTERRUPTED
    assert isinstance(child.interruption, Cancelled)
    assert child.parent_run_id == out.state.run_id
    assert out.state.child_cost_usd == pytest.approx(child.cost_usd)


async def test_research_child_cost_counts_in_the_parent(harness: Harness):
    out = await start(harness, "research")
    assert out.state.status is Status.COMPLETED
    assert out.state.answer == scenarios.RESEARCH_PREFIX + scenarios.PLAN_ANSWER
    child = harness.load(out.state.children[0])
    assert child.parent_run_id == out.state.run_id
    assert child.turns == 3 and child.limits.max_turns == 6 and child.limits.budget_usd == 0.05
    assert out.state.child_cost_usd == pytest.approx(child.cost_usd)
    own = out.state.pricing.cost(out.state.prompt_tokens, out.state.completion_tokens)
    assert out.state.cost_usd == pytest.approx(own + child.cost_usd)
    # The parent's transcript holds the summary, not what the child read.
    assert not any("worker 7" in (m.get("content") or "") and m["role"] == "tool" and "ERROR" in m["content"]
                   for m in out.state.messages)


async def test_child_never_gets_more_than_the_parent_has_left(harness: Harness):
    out = await start(harness, "research", limits=Limits(budget_usd=0.003))
    child = harness.load(out.state.children[0])
    assert child.limits.budget_usd <= 0.003 - out.state.per_turn_prompt_tokens[0] * 2e-6 + 1e-9


# ---- the trace ------------------------------------------------------------------------

async def test_trace_lines_carry_run_id_and_seq_increases_across_resume(harness: Harness):
    run_id = (await start(harness, "destructive")).state.run_id
    await harness.approve(run_id)
    records = list(read_trace(harness.store.run_dir(run_id) / "trace.jsonl"))
    assert all(r["run_id"] == run_id for r in records)
    seqs = [r["seq"] for r in records]
    assert seqs == list(range(1, len(seqs) + 1))
    kinds = [r["kind"] for r in records]
    assert kinds.count("run_started") == 2 and kinds.count("run_stopped") == 2
    assert {"turn", "tool_start", "tool_result", "approval_required", "approval_decision"} <= set(kinds)
    turn = next(r for r in records if r["kind"] == "turn")
    assert {"prompt_tokens", "completion_tokens", "total_tokens", "cost_usd", "finish_reason"} <= set(turn)
    stopped = [r for r in records if r["kind"] == "run_stopped"][-1]
    assert stopped["status"] == "completed" and stopped["turns"] == 3


async def test_budget_stop_and_failure_look_different_in_the_trace(harness: Harness):
    budget = (await start(harness, "runaway", limits=Limits(max_turns=None, budget_usd=0.002))).state
    failed = (await start(harness, "forbidden")).state
    last = lambda rid: [r for r in read_trace(harness.store.run_dir(rid) / "trace.jsonl")][-1]
    assert last(budget.run_id)["status"] == "budget_exceeded" and "budget" in last(budget.run_id)["reason"]
    assert last(failed.run_id)["status"] == "failed" and "permission denied" in last(failed.run_id)["reason"]


async def test_a_broken_sink_does_not_break_the_run(runs_dir, workspace):
    def broken(event):
        raise RuntimeError("view bug")

    async with Harness(runs_dir, workspace, sinks=[broken], agent_sets=(DEMO,)) as h:
        out = await start(h, "plan")
    assert out.state.status is Status.COMPLETED


async def test_a_harness_bug_ends_the_run_failed_with_the_reason(harness: Harness, monkeypatch):
    def boom(self):
        raise RuntimeError("schema exploded")

    state = harness.new_run("plan")
    monkeypatch.setattr("tether.run.loop.RunLoop._check_limits", lambda self: boom(self))
    out = await harness.run(state.run_id)
    assert out.state.status is Status.FAILED
    assert out.state.error == "harness error: RuntimeError: schema exploded"
    assert harness.load(state.run_id).status is Status.FAILED


async def test_task_cancellation_saves_an_interrupted_run_then_propagates(harness: Harness, recorder):
    state = harness.new_run("slow")
    task = asyncio.create_task(harness.run(state.run_id))
    await recorder.wait_for(lambda e: e.kind == "tool_progress")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    saved = harness.load(state.run_id)
    assert saved.status is Status.INTERRUPTED
    assert isinstance(saved.interruption, Cancelled)
    again = await harness.run(state.run_id)  # resumable: the scan runs again, then the answer
    assert again.state.status is Status.COMPLETED


# ---- typed results and the model seam ---------------------------------------------

async def test_failed_tool_results_are_recorded_as_failed_and_not_reused(harness: Harness):
    out = await start(harness, "forbidden", limits=Limits(max_turns=4), policies=Policies(triage=False))
    results = [m for m in out.state.messages if m["role"] == "tool"]
    assert results and out.state.failed_calls == [m["tool_call_id"] for m in results]
    # A run saved before results carried ``ok`` is read with its failures told by their words.
    saved = out.state.to_dict()
    del saved["failed_calls"]
    assert RunState.from_dict(saved).failed_calls == out.state.failed_calls


async def test_any_chat_model_can_drive_a_run(runs_dir, workspace):
    """The loop needs only the ChatModel shape: a model that is not an HTTP client runs an agent."""
    from tether import Agent, ChatModel, ModelReply

    class Canned:
        def __init__(self) -> None:
            self.asked: list[int] = []

        def new_transcript(self) -> None:
            return None

        async def complete(self, model, messages, tools, **kw) -> ModelReply:
            self.asked.append(len(messages))
            return ModelReply(content="forty-two", tool_calls=[], finish_reason="stop", prompt_tokens=10,
                              completion_tokens=2, usage_estimated=False, provider_ms=0.0)

        async def aclose(self) -> None:
            pass

    model: ChatModel = Canned()
    async with Harness(runs_dir, workspace, client=model, agent_sets=(DEMO,)) as h:
        out = await h.start(Agent(name="canned", model="canned-1", tools=[]), "the answer?")
    assert out.state.status is Status.COMPLETED and out.state.answer == "forty-two"
    assert (out.state.prompt_tokens, out.state.completion_tokens) == (10, 2)
    assert model.asked == [2]  # the instructions and the task

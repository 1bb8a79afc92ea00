"""Fleet budgets over ACP agents' runs (issue 41, items 4 and 5), against the fake agent that
costs money as it works (``spend``), on both stores: each usage report (the agent's own cost,
or its tokens at the run's price) is charged to the fleet's counter; the report that spends a
``stop`` budget cancels the agent's turn and ends the run as a budget exit (a ``refuse`` budget
lets it finish); an ``ask`` budget
holds the run on its ``budget`` call, the agent's turn cancelled, and an approval sends the agent
on with a prompt that says so (a rejection ends it); a new ACP run in a spent budget's scope is
refused at start, in words."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path

import pytest

from tether.agents.agent import AcpCommand, Agent
from tether.agents.config import load_config
from tether.approvals.budgets import BudgetRefused
from tether.demo.agents import DEMO
from tether.harness import Harness
from tether.vocab.state import MaxBudget, Pricing, Status
from tether.store.protocol import Store
from tests.acp.conftest import fake_agent
from tests.acp.fake_agent import SPEND_REPORTS, SPEND_USD
from tests.processes.test_fleet_budgets import budget_call, spec, store  # noqa: F401
from tests.support import cli_here, processes_with


def spender(workspace: Path, **kw) -> Agent:
    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    return Agent(name="spender", model="acp:fake", acp=AcpCommand(tuple(fake_agent("spend")), env, 5.0),
                 workspace=workspace, **kw)


def budget_file(tmp_path: Path, usd: float, on_exceed: str = "stop") -> Path:
    path = tmp_path / "tether.toml"
    path.write_text(f'[budgets.acp-daily]\nsource = "acp"\nper = "day"\nusd = {usd}\non_exceed = "{on_exceed}"\n'
                    'warn_at = 0.5\n')
    return path


def harness(store: Store, tmp_path: Path, config: Path) -> Harness:
    return Harness(store=store, workspace=tmp_path / "ws", config=load_config(config), agent_sets=(DEMO,))


def fleet_spent(store: Store, config: Path) -> float:
    (listed,) = json.loads(cli_here("budgets", "--json", "--config", str(config), "--store", spec(store)).stdout)
    return listed["spent_usd"]


async def test_the_usage_report_that_spends_a_stop_budget_cancels_the_agents_turn_and_refuses_new_runs(
        store: Store, tmp_path: Path, acp_workspace: Path):
    config = budget_file(tmp_path, 0.03)
    async with harness(store, tmp_path, config) as h:
        out = await h.start(spender(acp_workspace), "spend")
        state = out.state
        assert state.status is Status.BUDGET_EXCEEDED and state.interruption == MaxBudget()
        (stopped,) = [r for r in store.read_trace(state.run_id) if r["kind"] == "run_stopped"]
        assert re.fullmatch(r"budget acp-daily \(\$0\.03/day, source acp\) reached: \$0\.0\d spent this day; "
                            r"the agent's turn was cancelled at the usage report that reached it", stopped["reason"])
        turn = next(r for r in store.read_trace(state.run_id) if r["kind"] == "turn")
        assert turn["finish_reason"] == "cancelled"
        assert 0.03 <= state.cost_usd < SPEND_REPORTS * SPEND_USD  # cut short: the agent did not spend on
        with pytest.raises(BudgetRefused, match=r"budget acp-daily \(\$0\.03/day, source acp\) reached: \$0\.0\d "
                                                r"spent this day: no new run of source acp"):
            h.create(spender(acp_workspace), "spend more")
    assert fleet_spent(store, config) == pytest.approx(state.cost_usd)  # every report charged, the last too
    levels = [r["level"] for r in store.read_trace(state.run_id) if r["kind"] == "fleet_budget"]
    assert levels == [50, 100]
    assert len(store.summaries()) == 1  # nothing was made for the refused run
    assert not processes_with(str(acp_workspace.parent)), "the agent's process is gone"


async def test_a_refuse_budget_lets_the_running_agent_finish_and_refuses_new_runs(
        store: Store, tmp_path: Path, acp_workspace: Path):
    config = budget_file(tmp_path, 0.03, "refuse")
    async with harness(store, tmp_path, config) as h:
        out = await h.start(spender(acp_workspace), "spend")
        state = out.state
        assert state.status is Status.COMPLETED  # the agent's turn was not cancelled
        turn = next(r for r in store.read_trace(state.run_id) if r["kind"] == "turn")
        assert turn["finish_reason"] == "end_turn"
        assert state.cost_usd == pytest.approx(SPEND_REPORTS * SPEND_USD)
        with pytest.raises(BudgetRefused, match=r"budget acp-daily \(\$0\.03/day, source acp\) reached: \$0\.\d\d "
                                                r"spent this day: no new run of source acp"):
            h.create(spender(acp_workspace), "spend more")
    assert fleet_spent(store, config) == pytest.approx(state.cost_usd)  # charged all the same
    assert [r["level"] for r in store.read_trace(state.run_id) if r["kind"] == "fleet_budget"] == [50, 100]
    assert len(store.summaries()) == 1
    assert not processes_with(str(acp_workspace.parent)), "the agent's process is gone"


async def test_tokens_without_cost_are_charged_at_the_runs_price(store: Store, tmp_path: Path, acp_workspace: Path):
    config = budget_file(tmp_path, 0.03)
    async with harness(store, tmp_path, config) as h:
        priced = spender(acp_workspace, pricing=Pricing(1.0, 2.0, source="config"))  # $0.012 a report
        out = await h.start(priced, "spend TOKENS")
    state = out.state
    assert state.status is Status.BUDGET_EXCEEDED and state.prompt_tokens >= 30_000
    assert state.cost_usd == pytest.approx(Pricing(1.0, 2.0).cost(state.prompt_tokens, state.completion_tokens))
    assert fleet_spent(store, config) == pytest.approx(state.cost_usd)


async def test_an_ask_budget_holds_the_agent_approval_sends_it_on_and_rejection_ends_it(
        store: Store, tmp_path: Path, acp_workspace: Path):
    config = budget_file(tmp_path, 0.03, "ask")
    async with harness(store, tmp_path, config) as h, harness(store, tmp_path, config) as other:
        run_id = h.create(spender(acp_workspace), "spend").run_id
        running = asyncio.create_task(h.run(run_id))
        first = await budget_call(store, run_id)
        assert re.fullmatch(r"budget acp-daily \(\$0\.03/day\) reached: \$0\.0\d spent; approve to go on .*", first.why)
        held = store.load(run_id)
        assert held.status is Status.INTERRUPTED and held.turns == 1
        spent_then = held.cost_usd
        refused = await other.decide(run_id, "approve", args='{"usd": 0}', by="bob")
        assert not refused.ok and 'takes {"usd": N}' in refused.words
        # (a lift beyond what the agent may spend before it acts on the cancel: it goes on for another turn)
        approved = await other.decide(run_id, "approve", args='{"usd": 0.2}', by="bob")
        assert approved.ok, approved.words
        second = await budget_call(store, run_id, other_than=first.call_id)  # it went on, and spent the lift
        went_on = store.load(run_id)
        assert went_on.turns == 2 and went_on.cost_usd >= 0.23 > spent_then
        told = [m["content"] for m in went_on.messages if m.get("tether") == "budget"]
        assert told == ["Tether cut your last turn short at a fleet budget, and going on past it was approved by "
                        "bob. Go on with your task where you left off."]
        rejected = await other.decide(run_id, "reject", "enough for today", by="carol", call_id=second.call_id)
        assert rejected.ok, rejected.words
        final = (await running).state
    assert final.status is Status.BUDGET_EXCEEDED and final.interruption == MaxBudget()
    (stopped,) = [r for r in store.read_trace(run_id) if r["kind"] == "run_stopped"]
    assert stopped["reason"] == ("budget acp-daily reached: going on past it was declined by carol (enough for "
                                 "today); the run ended as a budget exit")
    assert [(d.verdict, d.by) for d in final.approvals.values() if d.tool == "budget"] == [("approved", "bob"),
                                                                                        ("rejected", "carol")]
    assert fleet_spent(store, config) == pytest.approx(final.cost_usd)
    assert not processes_with(str(acp_workspace.parent)), "the agent's process is gone"


async def test_the_deadline_of_an_acp_agents_budget_call_rejects_it_and_a_stop_ends_the_wait(
        store: Store, tmp_path: Path, acp_workspace: Path):
    from tether.vocab.rules import Rule

    config = budget_file(tmp_path, 0.03, "ask")
    rule = store.rule_add(Rule("ask", "budget", "budgets wait a second", "alice", deadline_s=1, on_deadline="reject"))
    async with harness(store, tmp_path, config) as h:
        out = await h.start(spender(acp_workspace), "spend")
    state = out.state
    assert state.status is Status.BUDGET_EXCEEDED and state.interruption == MaxBudget()
    (decision,) = [d for d in state.approvals.values() if d.tool == "budget"]
    assert (decision.verdict, decision.by, decision.text) == ("rejected", "deadline", "no decision within 1 s")
    (stopped,) = [r for r in store.read_trace(state.run_id) if r["kind"] == "run_stopped"]
    assert stopped["reason"] == ("budget acp-daily reached: going on past it was declined by deadline (no decision "
                                 "within 1 s); the run ended as a budget exit")
    store.rule_remove(rule.id)

    config = budget_file(tmp_path, 0.03 + state.cost_usd, "ask")  # room for one more run
    async with harness(store, tmp_path, config) as h, harness(store, tmp_path, config) as other:
        run_id = h.create(spender(acp_workspace), "spend").run_id
        running = asyncio.create_task(h.run(run_id))
        waiting = await budget_call(store, run_id)
        reply = await other.stop(run_id, "not today", by="dana")
        assert reply.ok and "which waited for a decision, is declined in words" in reply.words, reply.words
        final = (await running).state
    assert final.status is Status.INTERRUPTED and final.interruption.by == "dana"
    assert final.approvals[waiting.call_id].verdict == "rejected" and final.approvals[waiting.call_id].by == "dana"
    assert not processes_with(str(acp_workspace.parent)), "the agent's process is gone"

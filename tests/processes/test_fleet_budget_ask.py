"""Fleet budgets with ``on_exceed = "ask"`` (issue 41, item 4), on both stores: a spent budget
holds a running run before its next model call on an approval of the call ``budget``, worded;
``tether approve --args '{"usd": N}'`` lets it go on until N more is spent, ``tether reject``
ends it as a budget exit; standing rules (allow, deny, ask for two people) decide it too; a
new run in the spent budget's scope is refused at start, as with ``refuse``."""

from __future__ import annotations

import json
import re

import pytest

from tether.approvals.budgets import BudgetRefused
from tether.vocab.rules import Rule
from tether.vocab.state import Limits, MaxBudget, NeedsApproval, Status
from tether.store.protocol import Store
from tests.processes.test_fleet_budgets import budget_file, harness, last_turn_bound, spec, store  # noqa: F401
from tests.support import cli_here_async

WORDS = r"budget runaway-daily \(\$0\.02/day\) reached: \$0\.0\d spent; approve to go on"


async def test_an_ask_budget_waits_then_approve_lifts_it_by_the_amount_and_reject_ends_the_run(store: Store,
                                                                                                tmp_path):
    config = budget_file(tmp_path, 0.02, "ask")
    async with harness(store, tmp_path, config) as h:
        out = await h.run(h.new_run("runaway", limits=Limits(max_turns=None)).run_id)
        run_id = out.state.run_id
    state = out.state
    assert state.status is Status.INTERRUPTED and isinstance(state.interruption, NeedsApproval)
    assert state.interruption.tool_name == "budget"
    assert re.match(WORDS, state.interruption.why), state.interruption.why
    first_ask = state.cost_usd
    assert 0.02 <= first_ask <= 0.02 + last_turn_bound(state)
    with pytest.raises(BudgetRefused, match="no new run of agent runaway"):  # a new run is refused at start
        async with harness(store, tmp_path, config) as h:
            h.new_run("runaway")

    where = ("--config", str(config), "--store", spec(store))
    shown = (await cli_here_async("show", run_id, "--store", spec(store))).stdout.splitlines()
    assert shown[1] == (f'waiting for approval: budget {{"usd": 0.02}} (call {state.interruption.call_id}); '
                        f"tether approve|reject {run_id}")
    assert re.match(WORDS, shown[2]) and shown[2].endswith(""" another amount: --args '{"usd": N}')""")
    bad = await cli_here_async("approve", run_id, "--args", '{"usd": -1}', *where)
    assert bad.returncode != 0 and 'takes {"usd": N}' in bad.stderr
    went = await cli_here_async("approve", run_id, "--args", '{"usd": 0.03}', *where)
    assert went.returncode == 5, went.stderr  # interrupted: it went on, then asks again
    state = store.load(run_id)
    # It went on, and asks again only once the period's spend reached $0.02 + $0.03.
    assert state.status is Status.INTERRUPTED and state.interruption.tool_name == "budget"
    assert state.turns > out.state.turns
    assert 0.05 <= state.cost_usd <= 0.05 + last_turn_bound(state)
    assert re.match(r"budget runaway-daily \(\$0\.02/day\) reached: \$0\.0\d spent", state.interruption.why)

    ended = await cli_here_async("reject", run_id, "--reason", "enough for today", *where)
    assert ended.returncode == 4, ended.stderr  # a budget exit
    state = store.load(run_id)
    assert state.status is Status.BUDGET_EXCEEDED and state.interruption == MaxBudget()
    (stopped,) = [r for r in store.read_trace(run_id) if r["kind"] == "run_stopped" and r["status"] == "budget_exceeded"]
    assert "declined by" in stopped["reason"] and "enough for today" in stopped["reason"]
    assert stopped["reason"].endswith("the run ended as a budget exit")
    asked = [r for r in store.read_trace(run_id) if r["kind"] == "approval_required"]
    assert [r["tool"] for r in asked] == ["budget", "budget"]
    # tether decisions: each budget call, the dollars it lifted or was asked to, who decided and why
    listed = json.loads((await cli_here_async("decisions", "--json", "--store", spec(store))).stdout)
    assert [(r["tool"], json.loads(r["args"]), r["edited_args"], r["verdict"], r["words"]) for r in listed] == [
        ("budget", {"usd": 0.02}, None, "rejected", "enough for today"), ("budget", {"usd": 0.03}, None, "approved", "")]
    table = (await cli_here_async("decisions", "--store", spec(store))).stdout.splitlines()
    assert [line.split()[3:6] for line in table[1:]] == [["budget", '{"usd":', "0.02}"], ["budget", '{"usd":', "0.03}"]]
    assert "rejected" in table[1] and "approved" in table[2] and "(edited)" not in table[2]


async def test_a_deny_rule_ends_the_run_as_a_budget_exit(store: Store, tmp_path):
    config = budget_file(tmp_path, 0.02, "ask")
    denial = store.rule_add(Rule("deny", "budget", "no overspending", "alice"))
    async with harness(store, tmp_path, config) as h:
        out = await h.run(h.new_run("runaway", limits=Limits(max_turns=None)).run_id)
    assert out.state.status is Status.BUDGET_EXCEEDED and out.state.interruption == MaxBudget()
    (stopped,) = [r for r in store.read_trace(out.state.run_id) if r["kind"] == "run_stopped"]
    assert "declined by rule" in stopped["reason"] and stopped["reason"].endswith("a budget exit")

    store.rule_remove(denial.id)


async def test_an_allow_rule_lifts_the_budget_at_once_by_its_own_usd(store: Store, tmp_path):
    config = budget_file(tmp_path, 0.02, "ask")
    store.rule_add(Rule("allow", "budget", "runaway may overspend", "alice"))
    async with harness(store, tmp_path, config) as h:
        out = await h.run(h.new_run("runaway", limits=Limits(max_turns=40)).run_id)
    assert out.state.status not in (Status.INTERRUPTED, Status.BUDGET_EXCEEDED), out.state.turns
    assert out.state.cost_usd > 0.04  # beyond the budget and one lift of it
    allowed = [d for d in out.state.approvals.values() if d.tool == "budget"]
    assert allowed and all(d.verdict == "approved" and d.rule for d in allowed)


async def test_an_ask_rule_wants_two_people_for_the_budget(store: Store, tmp_path):
    config = budget_file(tmp_path, 0.02, "ask")
    store.rule_add(Rule("ask", "budget", "two people lift a budget", "alice", approvals=2))
    async with harness(store, tmp_path, config) as h:
        out = await h.run(h.new_run("runaway", limits=Limits(max_turns=None)).run_id)
        run_id = out.state.run_id
        assert out.state.interruption.tool_name == "budget" and out.state.interruption.needed == 2
        one = await h.approve(run_id, by="bob", args='{"usd": 0.01}')
        assert one.state.status is Status.INTERRUPTED and one.state.interruption.approvers == ("bob",)
        two = await h.approve(run_id, by="carol", args='{"usd": 0.01}')
        assert two.state.turns > out.state.turns
        assert two.state.status is Status.INTERRUPTED and two.state.interruption.tool_name == "budget"
        assert 0.03 <= two.state.cost_usd <= 0.03 + last_turn_bound(two.state)


async def test_a_run_held_waiting_takes_the_decision_from_another_process(store: Store, tmp_path):
    import asyncio

    config = budget_file(tmp_path, 0.02, "ask")
    async with harness(store, tmp_path, config) as h, harness(store, tmp_path, config) as other:
        run_id = h.new_run("runaway", limits=Limits(max_turns=None)).run_id
        held = asyncio.create_task(h.run(run_id, wait_for_decision=60))
        while not isinstance((s := store.load(run_id)).interruption, NeedsApproval):  # it waits on its budget
            await asyncio.sleep(0.05)
        reply = await other.decide(run_id, "reject", "not today")
        assert reply.ok, reply.words
        out = await held
    assert out.state.status is Status.BUDGET_EXCEEDED and out.state.interruption == MaxBudget()
    (stopped,) = [r for r in store.read_trace(run_id) if r["kind"] == "run_stopped" and r["status"] == "budget_exceeded"]
    assert "declined by" in stopped["reason"] and "not today" in stopped["reason"]


async def test_a_stop_of_a_held_run_waiting_on_its_budget_call_ends_it_in_words(store: Store, tmp_path):
    import asyncio

    config = budget_file(tmp_path, 0.02, "ask")
    async with harness(store, tmp_path, config) as h, harness(store, tmp_path, config) as other:
        run_id = h.new_run("runaway", limits=Limits(max_turns=None)).run_id
        held = asyncio.create_task(h.run(run_id, wait_for_decision=60))
        while not isinstance(store.load(run_id).interruption, NeedsApproval):  # it waits on its budget
            await asyncio.sleep(0.05)
        reply = await other.stop(run_id, "not today")
        assert reply.ok, reply.words
        out = await held
    assert out.state.status is Status.INTERRUPTED and not isinstance(out.state.interruption, NeedsApproval)
    (decision,) = [d for d in out.state.approvals.values() if d.tool == "budget"]
    assert decision.verdict == "rejected" and "not today" in decision.text


async def test_an_ask_rules_deadline_rejects_the_budget_call_of_a_held_run_which_ends_as_a_budget_exit(
        store: Store, tmp_path):
    config = budget_file(tmp_path, 0.02, "ask")
    store.rule_add(Rule("ask", "budget", "budgets wait a second", "alice", deadline_s=1, on_deadline="reject"))
    async with harness(store, tmp_path, config) as h:
        out = await h.run(h.new_run("runaway", limits=Limits(max_turns=None)).run_id, wait_for_decision=60)
    state = out.state
    assert state.status is Status.BUDGET_EXCEEDED and state.interruption == MaxBudget()
    (decision,) = [d for d in state.approvals.values() if d.tool == "budget"]
    assert decision.verdict == "rejected" and decision.by == "deadline" and decision.text == "no decision within 1 s"
    trace = list(store.read_trace(state.run_id))
    (asked,) = [r for r in trace if r["kind"] == "approval_required"]
    assert asked["on_deadline"] == "reject" and asked["deadline_at"] > 0
    (stopped,) = [r for r in trace if r["kind"] == "run_stopped" and r["status"] == "budget_exceeded"]
    assert stopped["reason"] == ("budget runaway-daily reached: going on past it was declined by deadline "
                                 "(no decision within 1 s); the run ended as a budget exit")


async def test_a_deadline_stop_on_the_budget_call_stops_the_held_run_its_call_declined(store: Store, tmp_path):
    config = budget_file(tmp_path, 0.02, "ask")
    store.rule_add(Rule("ask", "budget", "budgets wait a second", "alice", deadline_s=1, on_deadline="stop"))
    async with harness(store, tmp_path, config) as h:
        out = await h.run(h.new_run("runaway", limits=Limits(max_turns=None)).run_id, wait_for_decision=60)
    state = out.state
    assert state.status is Status.INTERRUPTED and not isinstance(state.interruption, NeedsApproval)
    assert state.interruption.reason.startswith("no decision on budget (budget:runaway-daily@")
    assert state.interruption.reason.endswith("within 1 s") and state.interruption.by == "deadline"
    (decision,) = [d for d in state.approvals.values() if d.tool == "budget"]
    assert decision.verdict == "rejected" and decision.by == "deadline"


async def test_a_budget_call_nobody_holds_is_rejected_at_its_deadline_and_a_late_approval_is_refused(
        store: Store, tmp_path):
    from tether.actions.deadlines import apply_due
    from tether.approvals.decisions import TooLate

    config = budget_file(tmp_path, 0.02, "ask")
    store.rule_add(Rule("ask", "budget", "budgets wait a minute", "alice", deadline_s=60, on_deadline="reject"))
    async with harness(store, tmp_path, config) as h:
        out = await h.run(h.new_run("runaway", limits=Limits(max_turns=None)).run_id)  # not held: left waiting
        run_id = out.state.run_id
        waiting = out.state.interruption
        assert isinstance(waiting, NeedsApproval) and waiting.deadline_at is not None
        assert apply_due(store) == []  # not due yet
        with pytest.raises(TooLate, match="no decision within 1 min"):  # made after the deadline: not taken
            await h.approve(run_id, by="bob", decided_at=waiting.deadline_at + 1)
        state = store.load(run_id)
        assert state.status is Status.INTERRUPTED and state.interruption.by == "deadline"
        assert state.interruption.reason.endswith(f"the call was rejected; tether resume {run_id} ends it as a "
                                                  "budget exit")
        assert apply_due(store, now=waiting.deadline_at + 2) == []  # applied once
        ended = await h.run(run_id)
    assert ended.state.status is Status.BUDGET_EXCEEDED and ended.state.interruption == MaxBudget()
    (decision,) = [d for d in ended.state.approvals.values() if d.tool == "budget"]
    assert decision.verdict == "rejected" and decision.by == "deadline" and decision.text == "no decision within 1 min"


async def test_tether_runs_applies_a_passed_deadline_of_a_budget_call_nobody_holds(store: Store, tmp_path):
    from tether.actions.deadlines import apply_due

    config = budget_file(tmp_path, 0.02, "ask")
    store.rule_add(Rule("ask", "budget", "budgets wait a minute", "alice", deadline_s=60, on_deadline="reject"))
    async with harness(store, tmp_path, config) as h:
        out = await h.run(h.new_run("runaway", limits=Limits(max_turns=None)).run_id)
    run_id, waiting = out.state.run_id, out.state.interruption
    (done,) = apply_due(store, now=waiting.deadline_at + 1)
    assert done == (f"{run_id}: no decision on budget ({waiting.call_id}) within 1 min: the call was rejected; "
                    f"tether resume {run_id} ends it as a budget exit")
    assert store.load(run_id).approvals[waiting.call_id].by == "deadline"

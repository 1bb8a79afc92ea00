"""Each event a channel can ask for, from real runs on both stores, and the filters by
agent and by tool."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from tether.approvals import Rule, parse_where
from tether.actions.deadlines import apply_due
from tether.vocab.events import RunStarted
from tether.harness import Harness
from tether.vocab.state import Limits, Policies, RunState
from tether.demo.agents import DEMO
from tests.notify.conftest import Receiver, channel, sending
from tests.support import wait_until

ALL = ["approval", "budget", "failed", "orphaned", "completed"]


def harness(store: Any, tmp_path: Path, **kw: Any) -> Harness:
    return Harness(workspace=tmp_path / "ws", store=store, **kw, agent_sets=(DEMO,))


def every_event(receiver: Receiver, **table: Any) -> Any:
    return channel("all", {"kind": "webhook", "url": receiver.url, "events": ALL, **table})


async def test_an_approval_and_its_escalation_are_each_sent_once(store: Any, tmp_path: Path, receiver: Receiver):
    async with harness(store, tmp_path) as h:
        async with sending(store, [every_event(receiver)]):
            run = h.new_run("destructive", policies=Policies(decision_deadline_s=60, on_deadline="escalate"))
            await h.run(run.run_id)
            await receiver.wait_for(lambda r: r.bodies("approval"), "the approval")
            done = apply_due(store, now=time.time() + 61)  # nobody decided within the deadline
            assert len(done) == 1 and "escalated" in done[0]
            await receiver.wait_for(lambda r: len(r.bodies("approval")) == 2, "the escalation")
    asked, escalated = receiver.bodies("approval")
    assert not asked["escalated"] and escalated["escalated"]
    assert asked["call_id"] == escalated["call_id"] and escalated["title"].startswith("Escalated")
    assert escalated["links"]["approve"] != asked["links"]["approve"]  # new links for the one now asked
    assert len(receiver.posts) == 2


async def test_a_run_that_completes_and_one_that_fails(store: Any, tmp_path: Path, receiver: Receiver):
    async with sending(store, [every_event(receiver)]):
        async with harness(store, tmp_path) as h:
            done = await h.run(h.new_run("plan").run_id)
        async with harness(store, tmp_path, fail="401@0") as h:
            failed = await h.run(h.new_run("plan").run_id)
        await receiver.wait_for(lambda r: r.bodies("completed") and r.bodies("failed"), "both stops")
    (completed,), (broke,) = receiver.bodies("completed"), receiver.bodies("failed")
    assert completed["run_id"] == done.state.run_id and completed["status"] == "completed"
    assert broke["run_id"] == failed.state.run_id and "401" in broke["reason"]
    assert "failed" in broke["text"]


async def test_a_budget_is_told_at_80_and_at_100_percent(store: Any, tmp_path: Path, receiver: Receiver):
    async with harness(store, tmp_path) as h:
        spent = (await h.run(h.new_run("runaway", limits=Limits(max_turns=5)).run_id)).state.cost_usd
        async with sending(store, [every_event(receiver)]):
            out = await h.run(h.new_run("runaway", limits=Limits(max_turns=None, budget_usd=spent * 0.9)).run_id)
            await receiver.wait_for(lambda r: any(b["level"] == 100 for b in r.bodies("budget")), "100 %")
    levels = [b["level"] for b in receiver.bodies("budget")]
    assert levels == [80, 100]
    last = receiver.bodies("budget")[-1]
    assert last["run_id"] == out.state.run_id and last["budget_usd"] == spent * 0.9 and last["cost_usd"] >= spent * 0.9


async def test_a_run_whose_process_died_is_orphaned(store: Any, tmp_path: Path, receiver: Receiver):
    async with sending(store, [every_event(receiver)]):
        store.create(RunState(run_id="o1", model="plan", messages=[{"role": "user", "content": "q"}]))
        state, handle = store.open("o1")
        trace = handle.trace()
        trace.write(RunStarted(run_id="o1", model="plan", resumed=False, agent="nightly"))
        state.turns = 1
        handle.save(state)
        handle.abandon()  # killed: no release, no run_stopped
        wait_until(lambda: store.liveness("o1") == "orphaned", "the run is orphaned")
        await receiver.wait_for(lambda r: r.bodies("orphaned"), "the orphan")
    (orphan,) = receiver.bodies("orphaned")
    assert orphan["run_id"] == "o1" and "tether resume o1" in orphan["text"]


async def test_filters_by_agent_and_by_tool(tmp_path: Path, receiver: Receiver):
    from tether.store.files.store import RunStore

    store = RunStore(tmp_path / "runs")
    others = channel("others", {"kind": "webhook", "url": f"{receiver.url}/others", "agents": ["triage"]})
    deletes = channel("deletes", {"kind": "webhook", "url": f"{receiver.url}/deletes", "tools": ["delete_file"],
                                  "events": ["approval", "completed"]})
    reads = channel("reads", {"kind": "webhook", "url": f"{receiver.url}/reads", "tools": ["read_file"],
                              "agents": ["plan", "destructive"]})
    store.rule_add(Rule("ask", "read_file", "errors.log is sensitive", "alice",
                        where=(parse_where("path=errors.log"),)))
    async with harness(store, tmp_path) as h, sending(store, [others, deletes, reads]):
        first = (await h.run(h.new_run("destructive").run_id)).state  # asks for delete_file
        second = (await h.run(h.new_run("plan").run_id)).state  # asks for read_file, by the rule
        third = (await h.run(h.new_run("repeat_baseline").run_id)).state  # completes
        await receiver.wait_for(lambda r: len(r.posts) == 3, "three notifications")
    assert second.interruption.tool_name == "read_file"
    got = sorted((p["path"], p["body"]["event"], p["body"]["run_id"]) for p in receiver.posts)
    assert got == sorted([("/deletes", "approval", first.run_id), ("/deletes", "completed", third.run_id),
                          ("/reads", "approval", second.run_id)])


async def test_the_sender_escalates_a_call_nobody_decided_in_time(store: Any, tmp_path: Path, receiver: Receiver):
    """No process holds the waiting run, and nobody lists the runs: the sender applies the
    passed deadline itself, and sends the escalation."""
    async with harness(store, tmp_path) as h:
        async with sending(store, [every_event(receiver)]):
            run = h.new_run("destructive", policies=Policies(decision_deadline_s=0.5, on_deadline="escalate"))
            await h.run(run.run_id)
            await receiver.wait_for(lambda r: len(r.bodies("approval")) == 2, "the escalation")
    asked, escalated = receiver.bodies("approval")
    assert not asked["escalated"] and escalated["escalated"] and escalated["call_id"] == asked["call_id"]
    assert store.load(run.run_id).interruption.escalated  # recorded on the run, as tether runs would


async def test_a_two_person_call_asked_again_after_the_first_approval_is_a_new_notification(
        tmp_path: Path, receiver: Receiver):
    """The first person's link is spent: the second needs a notification of their own."""
    from tether.store.files.store import RunStore

    store = RunStore(tmp_path / "runs")
    store.rule_add(Rule("ask", "delete_file", "two people delete logs", "alice", approvals=2))
    async with harness(store, tmp_path) as h, sending(store, [every_event(receiver)]):
        run_id = h.new_run("destructive").run_id
        await h.run(run_id)
        await receiver.wait_for(lambda r: r.bodies("approval"), "the first ask")
        await h.approve(run_id, by="alice", account="alice")  # alice's web login, say
        await receiver.wait_for(lambda r: len(r.bodies("approval")) == 2, "the ask after alice")
    first, second = receiver.bodies("approval")
    assert first["call_id"] == second["call_id"] and "1 of 2 approved (alice)" in second["text"]
    assert second["links"]["approve"] != first["links"]["approve"]

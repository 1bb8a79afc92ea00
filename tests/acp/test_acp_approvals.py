"""The approvals model for ACP agents (issue 25), against the fake agent: standing rules
answer a permission request at once, the agent's own "always" option is kept as a Tether
rule, an edit is refused (ACP cannot carry it), and a two-person request waits for two."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tether.approvals import Rule, parse_where
from tether.harness import Harness
from tether.vocab.state import Limits, Status
from tether.demo.agents import DEMO
from tests import accounts
from tests.acp.driving import waiting
from tests.acp.fake_agent import WRITE_NAME, WRITE_TEXT
from tests.acp.test_acp_runs import agent
from tests.support import cli_here_async


async def test_an_allow_rule_answers_the_agent_at_once(tmp_path: Path, acp_workspace: Path):
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        added = harness.store.rule_add(Rule("allow", "edit", "the fake agent may write", "alice", agent="fake",
                                            where=(parse_where("path=*.txt"),)))
        final = (await harness.start(agent(acp_workspace), "write the file")).state
    assert final.status is Status.COMPLETED, final.error
    assert (acp_workspace / WRITE_NAME).read_text() == WRITE_TEXT
    decision = final.approvals["call_1"]
    assert (decision.verdict, decision.by, decision.rule) == ("approved", f"rule {added.id}", added.id)


async def test_a_deny_rule_rejects_in_words_the_agent_is_told(tmp_path: Path, acp_workspace: Path):
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        added = harness.store.rule_add(Rule("deny", "edit", "no writes today", "bob", source="acp"))
        state = harness.create(agent(acp_workspace), "write the file", limits=Limits(max_turns=1))
        final = (await harness.run(state.run_id)).state
    assert not (acp_workspace / WRITE_NAME).exists()
    assert final.approvals["call_1"].verdict == "rejected"
    told = [m["content"] for m in final.messages if m.get("tether") == "rejection"]
    assert told and told[0].startswith(f"Declined by rule {added.id} (no writes today; bob, ")


async def test_the_agents_always_option_is_kept_as_a_tether_rule(tmp_path: Path, acp_workspace: Path):
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        state = harness.create(agent(acp_workspace), "write the file")
        running = asyncio.create_task(harness.run(state.run_id, wait_for_decision=0))
        await waiting(harness, state.run_id)
        reply = await harness.decide(state.run_id, "approve", by="carol", option="always", scope="agent")
        assert reply.ok, reply.words
        final = (await running).state
        (rule,) = harness.store.rules()
    assert final.status is Status.COMPLETED
    assert (rule.effect, rule.tool, rule.agent, rule.source, rule.scope, rule.by) == \
        ("allow", "edit", "fake", "acp", "agent", "carol")
    assert "Always allow" in rule.reason


async def test_an_edit_of_an_acp_agents_call_is_refused_in_words(tmp_path: Path, acp_workspace: Path):
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        state = harness.create(agent(acp_workspace), "write the file")
        running = asyncio.create_task(harness.run(state.run_id, wait_for_decision=0))
        await waiting(harness, state.run_id)
        refused = await harness.decide(state.run_id, "approve", by="dan", args='{"path": "other.txt"}')
        assert not refused.ok
        assert "ACP offers no way to change the arguments" in refused.words
        assert (await harness.decide(state.run_id, "approve", by="dan")).ok  # nothing was consumed
        final = (await running).state
    assert final.status is Status.COMPLETED


async def test_show_lists_the_agents_option_ids_and_an_empty_option_is_refused(tmp_path: Path,
                                                                              acp_workspace: Path):
    """Issue 37, item 15: ``--option ""`` was taken as allow once, and ``tether show`` named
    no option ids for ``--option`` to give."""
    runs = str(tmp_path / "runs")
    async with Harness(runs, agent_sets=(DEMO,)) as harness:
        state = harness.create(agent(acp_workspace), "write the file")
        running = asyncio.create_task(harness.run(state.run_id, wait_for_decision=0))
        await waiting(harness, state.run_id)
        shown = await cli_here_async("show", state.run_id, "--store", runs)
        assert shown.returncode == 0, shown.stderr
        assert ("options: allow (Allow once, allow once), always (Always allow, allow always), "
                f"reject (Reject, reject once); tether approve|reject {state.run_id} --option ID") in shown.stdout
        as_json = json.loads((await cli_here_async("show", state.run_id, "--json", "--store", runs)).stdout)
        assert [(o["id"], o["kind"]) for o in as_json["interruption"]["options"]] == \
            [("allow", "allow_once"), ("always", "allow_always"), ("reject", "reject_once")]
        for empty in ("", " "):
            refused = await cli_here_async("approve", state.run_id, "--option", empty, "--store", runs)
            assert refused.returncode == 2 and "--option is empty" in refused.stderr, refused.stderr
        reply = await harness.decide(state.run_id, "approve", by="dan", option="")  # the run refuses it too
        assert not reply.ok and "the agent offers no option '' for call_1; it offers allow" in reply.words
        assert not (acp_workspace / WRITE_NAME).exists() and not harness.store.load(state.run_id).approvals
        assert (await harness.decide(state.run_id, "approve", by="dan", option="allow")).ok
        final = (await running).state
    assert final.status is Status.COMPLETED
    assert (acp_workspace / WRITE_NAME).read_text() == WRITE_TEXT


async def test_a_two_person_rule_holds_the_agent_for_two_people(tmp_path: Path, acp_workspace: Path):
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        harness.store.rule_add(Rule("ask", "edit", "two people for writes", "erin", approvals=2))
        state = harness.create(agent(acp_workspace), "write the file")
        running = asyncio.create_task(harness.run(state.run_id, wait_for_decision=0))
        await waiting(harness, state.run_id)
        me = accounts.me()  # this process's account on the store: one person
        first = await harness.decide(state.run_id, "approve", by="alice")
        assert first.ok and f"1 of 2 approved (alice as {me})" in first.words
        while not (await waiting(harness, state.run_id)).approvers:
            await asyncio.sleep(0.02)
        again = await harness.decide(state.run_id, "approve", by="alice", account="al")
        assert not again.ok and "alice as " in again.words and "has approved" in again.words
        again = await harness.decide(state.run_id, "approve", by="bob")  # another name, the same account
        assert not again.ok and f"the account {me} has approved" in again.words and "as alice" in again.words
        assert not (acp_workspace / WRITE_NAME).exists()
        assert (await harness.decide(state.run_id, "approve", by="bob", account="bob")).ok  # a web login's, say
        final = (await running).state
    assert final.status is Status.COMPLETED
    assert (final.approvals["call_1"].approvers, final.approvals["call_1"].accounts) == (["alice", "bob"], [me, "bob"])
    assert (acp_workspace / WRITE_NAME).read_text() == WRITE_TEXT



async def test_a_deadline_rejects_an_agents_request_nobody_answered(tmp_path: Path, acp_workspace: Path):
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        harness.store.rule_add(Rule("ask", "edit", "writes wait for a person", "erin", deadline_s=0.2))
        state = harness.create(agent(acp_workspace), "write the file", limits=Limits(max_turns=1))
        final = (await harness.run(state.run_id, wait_for_decision=0)).state
    assert not (acp_workspace / WRITE_NAME).exists()
    decision = final.approvals["call_1"]
    assert (decision.verdict, decision.by) == ("rejected", "deadline")
    told = [m["content"] for m in final.messages if m.get("tether") == "rejection"]
    assert told and told[0].startswith("No decision within ")


async def test_a_stop_or_a_deadline_that_stops_keeps_the_agents_request_on_the_record(tmp_path: Path,
                                                                                      acp_workspace: Path):
    """Issue 37, items 7 and 8: an ACP agent's request that a Stop (or a deadline's ``stop``)
    ended is recorded as declined by whoever stopped it, not left without a decision."""
    from tether.approvals import DecisionQuery
    from tether.vocab.state import Cancelled

    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        state = harness.create(agent(acp_workspace), "write the file")
        running = asyncio.create_task(harness.run(state.run_id, wait_for_decision=0))
        await waiting(harness, state.run_id)
        assert (await harness.stop(state.run_id, "not this file", by="dan")).ok
        final = (await running).state
        assert final.interruption == Cancelled("not this file", "dan")
        decision = final.approvals["call_1"]
        assert (decision.verdict, decision.by, decision.text) == ("rejected", "dan", "the run was stopped (not this file)")

        harness.store.rule_add(Rule("ask", "edit", "writes wait for a person", "erin", deadline_s=0.2,
                                    on_deadline="stop"))
        again = harness.create(agent(acp_workspace), "write the file")
        final = (await harness.run(again.run_id, wait_for_decision=0)).state
        assert isinstance(final.interruption, Cancelled) and final.interruption.by == "deadline"
        assert (final.approvals["call_1"].verdict, final.approvals["call_1"].by) == ("rejected", "deadline")
        assert {(r.run_id, r.by) for r in harness.store.decisions(DecisionQuery())} == {(state.run_id, "dan"),
                                                                                       (again.run_id, "deadline")}
    assert not (acp_workspace / WRITE_NAME).exists()

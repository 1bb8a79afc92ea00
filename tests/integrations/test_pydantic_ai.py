"""A pydantic-ai agent under Tether's supervision (tether.integrations.pydantic_ai), against
the scripted provider over HTTP: its approvals decided inside the run from other processes,
the operator's words (or edited arguments) in the next request the model gets, Stop from
another process, a budget, and the example."""

from __future__ import annotations

import asyncio
import json
import os
import textwrap
from pathlib import Path

import pytest
from pydantic_ai import Agent, ApprovalRequired, RunContext
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from tether.harness import Harness
from tether.integrations import Supervision
from tether.integrations.pydantic_ai import run
from tether.approvals.decisions import declined_words
from tether.demo.provider.scenarios import TICKET_CLOSED, TICKET_KEPT
from tether.vocab.state import Cancelled, Limits, NeedsApproval, Pricing, Status
from tether.store.trace import read_trace
from tether.demo.agents import DEMO

from tests.integrations.programs import ROOT, Recording, finished, line_with, program, tether, waiting
from tests.support import children_of

CALL = "close_42"  # the scripted ticket scenario's call

TRIAGE = textwrap.dedent('''
    import asyncio, os, sys
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from tether.vocab.events import ApprovalRequired
    from tether.harness import Harness
    from tether.integrations import Supervision
    from tether.integrations.pydantic_ai import run

    model = OpenAIChatModel(os.environ.get("TRIAGE_MODEL", "ticket"),
                            provider=OpenAIProvider(base_url=os.environ["TRIAGE_BASE_URL"], api_key="unused"))
    agent = Agent(model, name="triage", instructions="Close duplicates.")

    @agent.tool_plain(requires_approval=True)
    def close_ticket(ticket: int, reason: str) -> str:
        """Close a support ticket."""
        return f"Ticket {ticket} closed: {reason}."

    @agent.tool_plain
    async def scan_archive() -> str:
        """Scan the ticket archive (slow)."""
        print("scanning", flush=True)
        await asyncio.sleep(3600)
        return "scanned 1200 of 1200 entries"

    def said(event):
        if isinstance(event, ApprovalRequired):
            print("waiting", event.call_id, flush=True)

    async def main(runs, run_id):
        async with Harness(runs) as harness:
            done = await run(harness, "triage_job:agent", "Close ticket 42: a duplicate of 17.",
                             supervision=Supervision(run_id=run_id, sinks=[said]))
        print("ended", done.status.value, done.reason, flush=True)
        sys.exit(done.status.exit_code)
''')


def start_code(runs: Path, run_id: str) -> str:
    return f"import asyncio, triage_job; asyncio.run(triage_job.main({str(runs)!r}, {run_id!r}))"


@pytest.fixture
def job(tmp_path: Path) -> Path:
    (tmp_path / "triage_job.py").write_text(TRIAGE)
    return tmp_path


async def test_a_rejection_from_another_process_reaches_the_model_as_tool_denied(job: Path, provider: Recording):
    runs = job / "runs"
    proc = await program(start_code(runs, "pa-r"), job, TRIAGE_BASE_URL=provider.url)
    try:
        assert await line_with(proc, "waiting") == f"waiting {CALL}"
        await waiting(runs, "pa-r")
        assert len(provider.bodies) == 1  # the run waits inside, at the handler: nothing more is asked
        code, said = await tether("reject", "pa-r", "--reason", "17 is a different bug", "--as", "ann",
                                  "--store", str(runs))
        assert code == 0 and "rejected close_ticket (close_42)" in said, said
        code, out = await finished(proc)
    finally:
        await finished(proc)
    assert code == 0, out
    words = declined_words("17 is a different bug", "ann")
    assert len(provider.bodies) == 2
    assert provider.tool_messages(1) == [words]  # ToolDenied(message=words): word for word
    state = Harness(runs, agent_sets=(DEMO,)).store.load("pa-r")
    assert state.status is Status.COMPLETED and state.answer == TICKET_KEPT.format(said=words)
    assert (state.approvals[CALL].verdict, state.approvals[CALL].by) == ("rejected", "ann")
    assert state.turns == 2 and state.model == "ticket" and state.prompt_tokens > 0
    assert state.pricing.unknown and state.cost_usd == 0  # the scripted "ticket" has no price: none made up
    assert [m["role"] for m in state.messages] == ["user", "assistant", "tool", "assistant"]
    kinds = [r["kind"] for r in read_trace(runs / "pa-r" / "trace.jsonl")]
    assert "tool_start" not in kinds  # a denied call never ran
    assert children_of(os.getpid()) == []


async def test_an_approval_with_edited_arguments_from_another_process_runs_them(job: Path, provider: Recording):
    runs = job / "runs"
    proc = await program(start_code(runs, "pa-a"), job, TRIAGE_BASE_URL=provider.url)
    try:
        await line_with(proc, "waiting")
        await waiting(runs, "pa-a")
        edited = {"ticket": 42, "reason": "duplicate of 17 (checked)"}
        code, said = await tether("approve", "pa-a", "--args", json.dumps(edited), "--as", "bob",
                                  "--store", str(runs))
        assert code == 0 and "approved close_ticket (close_42)" in said, said
        code, out = await finished(proc)
    finally:
        await finished(proc)
    assert code == 0, out
    # ToolApproved(override_args=…): the tool ran with the operator's arguments.
    assert provider.tool_messages(1) == ["Ticket 42 closed: duplicate of 17 (checked)."]
    state = Harness(runs, agent_sets=(DEMO,)).store.load("pa-a")
    assert state.status is Status.COMPLETED and state.answer == TICKET_CLOSED
    decision = state.approvals[CALL]
    assert (decision.verdict, decision.by, json.loads(decision.args or "{}")) == ("approved", "bob", edited)
    kinds = [r["kind"] for r in read_trace(runs / "pa-a" / "trace.jsonl")]
    assert kinds.index("approval_decision") < kinds.index("tool_start") < kinds.index("tool_result")
    assert children_of(os.getpid()) == []


async def test_an_edit_that_breaks_the_tools_schema_is_refused_and_the_call_still_waits(job: Path,
                                                                                        provider: Recording):
    """Issue 37, item 4: ``--args '{"ticket": "x"}'`` exited 0 and pydantic-ai then failed the
    call with its int_parsing error. The schema pydantic-ai offers the model is reported with
    the call, and the edit is checked against it before anything is decided."""
    runs = job / "runs"
    proc = await program(start_code(runs, "pa-e"), job, TRIAGE_BASE_URL=provider.url)
    try:
        await line_with(proc, "waiting")
        await waiting(runs, "pa-e")
        waits = Harness(runs, agent_sets=(DEMO,)).store.load("pa-e").interruption
        assert isinstance(waits, NeedsApproval) and waits.schema is not None
        assert waits.schema["properties"]["ticket"]["type"] == "integer"
        code, said = await tether("approve", "pa-e", "--args", '{"ticket": "x", "reason": "dup"}', "--as", "bob",
                                  "--store", str(runs))
        assert code == 2, said
        assert "the edited arguments do not fit close_ticket: ticket: 'x' is not of type 'integer'" in said, said
        assert "nothing was decided" in said
        code, said = await tether("approve", "pa-e", "--args", '{"ticket": 42, "ticket": 17, "reason": "dup"}',
                                  "--store", str(runs))
        assert code == 2 and 'give the key "ticket" twice' in said, said
        state = Harness(runs, agent_sets=(DEMO,)).store.load("pa-e")
        assert isinstance(state.interruption, NeedsApproval) and CALL not in state.approvals  # nothing consumed
        code, said = await tether("approve", "pa-e", "--as", "bob", "--store", str(runs))
        assert code == 0 and "approved close_ticket (close_42)" in said, said
        code, out = await finished(proc)
    finally:
        await finished(proc)
    assert code == 0, out
    assert provider.tool_messages(1) == ["Ticket 42 closed: duplicate of 17."]
    assert children_of(os.getpid()) == []


async def test_stop_from_another_process_ends_the_run_interrupted(job: Path, provider: Recording):
    runs = job / "runs"
    proc = await program(start_code(runs, "pa-s"), job, TRIAGE_BASE_URL=provider.url, TRIAGE_MODEL="slow")
    try:
        await line_with(proc, "scanning")  # the tool runs, inside pydantic-ai's run
        code, said = await tether("stop", "pa-s", "--reason", "wrong archive", "--as", "carol", "--store", str(runs))
        assert code == 0 and "stops now" in said, said
        code, out = await finished(proc)
    finally:
        await finished(proc)
    assert code == 5, out
    assert "ended interrupted wrong archive" in out
    state = Harness(runs, agent_sets=(DEMO,)).store.load("pa-s")
    assert state.status is Status.INTERRUPTED and state.interruption == Cancelled("wrong archive", "carol")
    assert len(provider.bodies) == 1  # cancelled in the tool: the model was not called again
    assert children_of(os.getpid()) == []


def triage(url: str) -> Agent[None, str]:
    agent = Agent(OpenAIChatModel("ticket", provider=OpenAIProvider(base_url=url, api_key="unused")), name="triage")

    @agent.tool
    def close_ticket(ctx: RunContext[None], ticket: int, reason: str) -> str:
        """Close a support ticket."""
        if not ctx.tool_call_approved:
            raise ApprovalRequired()
        return f"Ticket {ticket} closed: {reason}."

    return agent


async def test_a_tool_that_raises_approval_required_waits_for_a_decision(harness: Harness, provider: Recording):
    seen: list[str] = []

    async def theirs(ctx: RunContext[None], stream) -> None:  # the program's own handler still sees it all
        async for event in stream:
            seen.append(type(event).__name__)

    async def operator() -> None:
        while not isinstance(getattr(harness.live.get("pa-d"), "interruption", None), NeedsApproval):
            await asyncio.sleep(0.01)
        reply = await harness.decide("pa-d", "approve", "fine", by="eve")
        assert reply.ok, reply.words

    deciding = asyncio.create_task(operator())
    done = await run(harness, triage(provider.url), "Close ticket 42", supervision=Supervision(run_id="pa-d"),
                     event_stream_handler=theirs)
    await deciding
    assert done.status is Status.COMPLETED and done.output == TICKET_CLOSED
    assert provider.tool_messages(1) == ["Ticket 42 closed: duplicate of 17."]
    assert "FunctionToolResultEvent" in seen and "PartDeltaEvent" in seen
    state = harness.store.load("pa-d")
    assert state.approvals[CALL].by == "eve" and state.tool_runs == 1


async def test_a_budget_is_checked_at_each_model_calls_usage(harness: Harness, provider: Recording):
    done = await run(harness, triage(provider.url), "Close ticket 42",
                     supervision=Supervision(run_id="pa-b", limits=Limits(budget_usd=0.0001, max_turns=None),
                                             pricing=Pricing(2.0, 12.0)))  # "ticket" has no price: given
    assert done.status is Status.BUDGET_EXCEEDED and "budget" in done.reason
    assert len(provider.bodies) == 1  # it ended at the first call's usage, before its tool
    assert harness.store.load("pa-b").turns == 1


async def test_the_example_runs_against_the_scripted_provider(tmp_path: Path, provider: Recording):
    runs = tmp_path / "runs"
    example = ROOT / "examples" / "pydantic_ai_triage.py"
    code = f"import runpy, sys; sys.argv = [{str(example)!r}, '--base-url', {provider.url!r}, '--store', " \
           f"{str(runs)!r}, '--run-id', 'triage-42']; runpy.run_path(sys.argv[0], run_name='__main__')"
    proc = await program(code, tmp_path)
    try:
        await line_with(proc, "waits for a decision: tether approve triage-42")
        code_, said = await tether("reject", "triage-42", "--reason", "17 is a different bug", "--store", str(runs))
        assert code_ == 0, said
        exit_code, out = await finished(proc)
    finally:
        await finished(proc)
    assert exit_code == 0, out
    assert "I left ticket 42 open" in out and "17 is a different bug" in out and "run triage-42: completed" in out

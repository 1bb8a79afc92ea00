"""An OpenAI Agents SDK agent under Tether's supervision (tether.integrations.openai_agents),
against the scripted provider over HTTP: its approvals decided from other processes and from
a console, the operator's words in the next request the model gets, Stop from another
process, a paused run gone on with by another process, and the example."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from agents import Agent, OpenAIChatCompletionsModel, RunConfig, function_tool
from openai import AsyncOpenAI

from tether.harness import Harness
from tether.integrations import Supervision
from tether.integrations.openai_agents import SAVED, resume, run
from tether.approvals.decisions import approved_words, declined_words
from tether.demo.provider.scenarios import TICKET_CLOSED, TICKET_KEPT
from tether.vocab.state import Cancelled, Limits, NeedsApproval, Pricing, Status
from tether.store.trace import read_trace
from tether.tui.screens.decision import ApproveDialog
from tether.demo.agents import DEMO

from tests.integrations.programs import ROOT, Recording, environment, finished, line_with, program, tether, waiting
from tests.support import SIZE, children_of, cli_here_async, finish, open_armed, still_console, wait_for

CAP_S = 60.0
CALL = "close_42"  # the scripted ticket scenario's call

# The support bot, as a module another process can import: the agent by reference.
BOT = textwrap.dedent('''
    import asyncio, os, sys
    from agents import Agent, OpenAIChatCompletionsModel, RunConfig, function_tool
    from openai import AsyncOpenAI
    from tether.vocab.events import ApprovalRequired
    from tether.harness import Harness
    from tether.integrations import Supervision
    from tether.integrations.openai_agents import run

    @function_tool(needs_approval=True)
    def close_ticket(ticket: int, reason: str) -> str:
        """Close a support ticket."""
        return f"Ticket {ticket} closed: {reason}."

    @function_tool
    async def scan_archive() -> str:
        """Scan the ticket archive (slow)."""
        print("scanning", flush=True)
        await asyncio.sleep(3600)
        return "scanned 1200 of 1200 entries"

    client = AsyncOpenAI(base_url=os.environ["BOT_BASE_URL"], api_key="unused")
    agent = Agent(name="support-bot", instructions="Close duplicates.", tools=[close_ticket, scan_archive],
                  model=OpenAIChatCompletionsModel(model=os.environ.get("BOT_MODEL", "ticket"), openai_client=client))

    def said(event):
        if isinstance(event, ApprovalRequired):
            print("waiting", event.call_id, flush=True)

    async def main(runs, run_id):
        async with Harness(runs) as harness:
            done = await run(harness, "support_bot:agent", "Close ticket 42: a duplicate of 17.",
                             supervision=Supervision(run_id=run_id, sinks=[said]),
                             run_config=RunConfig(tracing_disabled=True))
        print("ended", done.status.value, done.reason, flush=True)
        sys.exit(done.status.exit_code)
''')


def start_code(runs: Path, run_id: str) -> str:
    return f"import asyncio, support_bot; asyncio.run(support_bot.main({str(runs)!r}, {run_id!r}))"


@pytest.fixture
def bot(tmp_path: Path) -> Path:
    (tmp_path / "support_bot.py").write_text(BOT)
    return tmp_path


async def test_a_rejection_from_another_process_reaches_the_model_in_its_words(bot: Path, provider: Recording):
    runs = bot / "runs"
    proc = await program(start_code(runs, "oa-r"), bot, BOT_BASE_URL=provider.url)
    try:
        assert await line_with(proc, "waiting") == f"waiting {CALL}"
        await waiting(runs, "oa-r")
        assert len(provider.bodies) == 1  # the run paused after the model's call, and asks nothing more
        code, said = await tether("reject", "oa-r", "--reason", "17 is a different bug", "--as", "ann",
                                  "--store", str(runs))
        assert code == 0 and "rejected close_ticket (close_42)" in said, said
        code, out = await finished(proc)
    finally:
        await finished(proc)
    assert code == 0, out
    words = declined_words("17 is a different bug", "ann")
    assert len(provider.bodies) == 2
    assert provider.tool_messages(1) == [words]  # the next request carries the operator's words, word for word
    state = Harness(runs, agent_sets=(DEMO,)).store.load("oa-r")
    assert state.status is Status.COMPLETED and state.answer == TICKET_KEPT.format(said=words)
    decision = state.approvals[CALL]
    assert (decision.verdict, decision.by, decision.text) == ("rejected", "ann", "17 is a different bug")
    assert state.turns == 2 and state.prompt_tokens > 0  # each model call's usage
    assert state.pricing.unknown and state.cost_usd == 0  # the scripted "ticket" has no price: none made up
    assert state.model == "ticket" and state.agent is not None and state.agent.spec["program"] == "openai-agents"
    assert SAVED not in state.agent.spec  # the paused RunState is kept only while it waits
    assert children_of(os.getpid()) == []


async def test_an_approval_from_a_console_runs_the_tool(bot: Path, provider: Recording):
    runs = bot / "runs"
    app = still_console(runs_dir=runs, workspace=bot / "workspace", operator="bob")
    async with app.run_test(size=SIZE) as pilot:
        await app.store_ready()
        proc = await program(start_code(runs, "oa-a"), bot, BOT_BASE_URL=provider.url)
        try:
            await wait_for(pilot, lambda: [p.run_id for p in app.pending_approvals()] == ["oa-a"],
                           "the program's approval to be pending in the console", CAP_S)
            app.select("oa-a")
            assert app.check_action("approve", ()) is True
            dialog = await open_armed(pilot, app, "a", ApproveDialog)
            assert (dialog.tool, dialog.call_id) == ("close_ticket", CALL)
            await pilot.press(*"a duplicate indeed")
            await pilot.press("enter")
            code, out = await finished(proc)
        finally:
            await finished(proc)
        assert code == 0, out
        await wait_for(pilot, lambda: app.states["oa-a"].status is Status.COMPLETED, "the completed run", CAP_S)
        await finish(pilot, app)
    assert provider.tool_messages(1) == ["Ticket 42 closed: duplicate of 17."]  # the tool ran, as the model asked
    state = Harness(runs, agent_sets=(DEMO,)).store.load("oa-a")
    assert state.answer == TICKET_CLOSED
    assert (state.approvals[CALL].verdict, state.approvals[CALL].by) == ("approved", "bob")
    kinds = [r["kind"] for r in read_trace(runs / "oa-a" / "trace.jsonl")]
    assert kinds.index("approval_required") < kinds.index("approval_decision") < kinds.index("tool_start") \
        < kinds.index("tool_result")  # the tool ran after the decision, reported by the SDK's hooks
    assert children_of(os.getpid()) == []


async def test_stop_from_another_process_ends_the_run_interrupted(bot: Path, provider: Recording):
    runs = bot / "runs"
    proc = await program(start_code(runs, "oa-s"), bot, BOT_BASE_URL=provider.url, BOT_MODEL="slow")
    try:
        await line_with(proc, "scanning")  # the tool runs, in the SDK's run
        code, said = await tether("stop", "oa-s", "--reason", "wrong archive", "--as", "carol", "--store", str(runs))
        assert code == 0 and "stops now" in said, said
        code, out = await finished(proc)
    finally:
        await finished(proc)
    assert code == 5, out
    assert "ended interrupted wrong archive" in out
    state = Harness(runs, agent_sets=(DEMO,)).store.load("oa-s")
    assert state.status is Status.INTERRUPTED and state.interruption == Cancelled("wrong archive", "carol")
    assert len(provider.bodies) == 1  # cancelled in the tool: the model was not called again
    assert children_of(os.getpid()) == []


async def test_a_paused_run_goes_on_in_another_process_when_its_program_is_gone(
        bot: Path, provider: Recording, monkeypatch: pytest.MonkeyPatch):
    runs = bot / "runs"
    proc = await program(start_code(runs, "oa-k"), bot, BOT_BASE_URL=provider.url)
    try:
        await line_with(proc, "waiting")
        await waiting(runs, "oa-k")
        proc.kill()  # the program dies while it waits: its paused RunState is on the store
    finally:
        await finished(proc)
    paused = Harness(runs, agent_sets=(DEMO,)).store.load("oa-k")
    assert isinstance(paused.interruption, NeedsApproval) and paused.agent is not None
    assert paused.agent.spec[SAVED]["agent"] == "support_bot:agent"
    assert json.loads(paused.agent.spec[SAVED]["state"])["$schemaVersion"]

    monkeypatch.syspath_prepend(str(bot))
    monkeypatch.setenv("BOT_BASE_URL", provider.url)
    monkeypatch.delitem(sys.modules, "support_bot", raising=False)
    async with Harness(runs, agent_sets=(DEMO,)) as harness:
        going_on = asyncio.create_task(
            resume(harness, "oa-k", run_config=RunConfig(tracing_disabled=True)))
        while not (harness.live.get("oa-k") and isinstance(harness.live["oa-k"].interruption, NeedsApproval)):
            await asyncio.sleep(0.01)  # until this process waits for the decision
        code, said = await tether("reject", "oa-k", "--reason", "not a duplicate", "--as", "dan",
                                  "--store", str(runs))
        assert code == 0, said
        done = await going_on
    monkeypatch.delitem(sys.modules, "support_bot", raising=False)
    words = declined_words("not a duplicate", "dan")
    assert done.status is Status.COMPLETED and done.output == TICKET_KEPT.format(said=words)
    assert len(provider.bodies) == 2 and provider.tool_messages(1) == [words]
    state = Harness(runs, agent_sets=(DEMO,)).store.load("oa-k")
    assert state.agent is not None and SAVED not in state.agent.spec


@function_tool(needs_approval=True)
def close_ticket(ticket: int, reason: str) -> str:
    """Close a support ticket."""
    return f"Ticket {ticket} closed: {reason}."


def support_bot(url: str) -> Agent:
    client = AsyncOpenAI(base_url=url, api_key="unused")
    return Agent(name="support-bot", tools=[close_ticket],
                 model=OpenAIChatCompletionsModel(model="ticket", openai_client=client))


async def test_edited_arguments_are_not_run_but_told_to_the_model(harness: Harness, provider: Recording):
    async def operator() -> None:
        while not isinstance(getattr(harness.live.get("oa-e"), "interruption", None), NeedsApproval):
            await asyncio.sleep(0.01)
        # Checked against the tool's params_json_schema, reported with the call (issue 37).
        refused = await harness.decide("oa-e", "approve", by="eve", args=json.dumps({"ticket": "x", "reason": "r"}))
        assert not refused.ok and "the edited arguments do not fit close_ticket: ticket: 'x' is not of type " \
            "'integer'" in refused.words, refused.words
        reply = await harness.decide("oa-e", "approve", "only with a kinder reason", by="eve",
                                     args=json.dumps({"ticket": 42, "reason": "merged into 17"}))
        assert reply.ok, reply.words

    deciding = asyncio.create_task(operator())
    running = asyncio.ensure_future(run(harness, support_bot(provider.url), "Close ticket 42",
                                        supervision=Supervision(run_id="oa-e"),
                                        run_config=RunConfig(tracing_disabled=True)))
    # An operator's failed assertion fails the test: the run would otherwise wait for it forever.
    await asyncio.wait({deciding, running}, return_when=asyncio.FIRST_EXCEPTION)
    if deciding.done() and deciding.exception() is not None:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
    await deciding
    done = await running
    (told,) = provider.tool_messages(1)
    approved = approved_words("only with a kinder reason", "eve")[:-1]
    assert told.startswith(approved + ", but only with changed arguments")
    assert '{"reason": "merged into 17", "ticket": 42}' in told and "did not run" in told
    assert done.status is Status.COMPLETED and done.output == TICKET_KEPT.format(said=told)


async def test_a_budget_is_checked_at_each_model_calls_usage(harness: Harness, provider: Recording):
    done = await run(harness, support_bot(provider.url), "Close ticket 42",
                     supervision=Supervision(run_id="oa-b", limits=Limits(budget_usd=0.0001, max_turns=None),
                                             pricing=Pricing(2.0, 12.0)),  # "ticket" has no price: given
                     run_config=RunConfig(tracing_disabled=True))
    assert done.status is Status.BUDGET_EXCEEDED and "budget" in done.reason
    assert len(provider.bodies) == 1  # it ended at the first call's usage, before the approval
    state = harness.store.load("oa-b")
    assert state.turns == 1 and state.cost_usd >= 0.0001


def test_import_tether_does_not_import_the_frameworks():
    code = ("import sys, tether, tether.harness, tether.integrations, tether.tui.cli; "
            "print(sorted({'agents', 'pydantic_ai', 'openai'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment(),
                         check=True)
    assert out.stdout.strip() == "[]"


async def test_the_example_runs_against_the_scripted_provider(tmp_path: Path, provider: Recording):
    runs = tmp_path / "runs"
    example = ROOT / "examples" / "openai_agents_support_bot.py"
    code = f"import runpy, sys; sys.argv = [{str(example)!r}, '--base-url', {provider.url!r}, '--store', " \
           f"{str(runs)!r}, '--run-id', 'support-42']; runpy.run_path(sys.argv[0], run_name='__main__')"
    proc = await program(code, tmp_path)
    try:
        assert "close_ticket" in await line_with(proc, "waits for a decision: tether approve support-42")
        code_, said = await tether("approve", "support-42", "--note", "a duplicate", "--store", str(runs))
        assert code_ == 0, said
        exit_code, out = await finished(proc)
    finally:
        await finished(proc)
    assert exit_code == 0, out
    assert TICKET_CLOSED in out and "run support-42: completed" in out


async def paused_and_gone(bot: Path, provider: Recording, run_id: str) -> Path:
    """The runs folder where the bot's run ``run_id`` paused at its approval, its program killed."""
    runs = bot / "runs"
    proc = await program(start_code(runs, run_id), bot, BOT_BASE_URL=provider.url)
    try:
        await line_with(proc, "waiting")
        await waiting(runs, run_id)
        proc.kill()
    finally:
        await finished(proc)
    return runs


async def test_an_edit_of_a_paused_run_whose_program_is_gone_is_checked_first(bot: Path, provider: Recording):
    """Issue 37, item 4: the schema the program reported is kept with the run, so the process
    that goes on with it checks the edit before recording it."""
    runs = await paused_and_gone(bot, provider, "oa-x")
    refused = await cli_here_async("approve", "oa-x", "--args", '{"ticket": "x", "reason": "dup"}', "--store",
                                   str(runs), cwd=bot)
    assert refused.returncode == 2, refused
    assert "the edited arguments do not fit close_ticket: ticket: 'x' is not of type 'integer'" in refused.stderr
    state = Harness(runs, agent_sets=(DEMO,)).store.load("oa-x")
    assert isinstance(state.interruption, NeedsApproval) and not state.approvals  # it still waits
    assert len(provider.bodies) == 1


async def test_tether_reject_alone_goes_on_with_a_paused_run_whose_program_is_gone(bot: Path, provider: Recording):
    """The operator needs no program of their own: `tether reject` rebuilds the agent by its
    reference, records the decision, and runs the paused run to its end."""
    runs = await paused_and_gone(bot, provider, "oa-r")
    command = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tether.tui.cli", "reject", "oa-r", "--reason", "not a duplicate", "--as", "erin",
        "--store", str(runs), cwd=bot, env=environment(bot, BOT_BASE_URL=provider.url),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    said, _ = await asyncio.wait_for(command.communicate(), CAP_S)
    assert command.returncode == 0, said.decode()
    words = declined_words("not a duplicate", "erin")
    state = Harness(runs, agent_sets=(DEMO,)).store.load("oa-r")
    assert state.status is Status.COMPLETED and state.answer == TICKET_KEPT.format(said=words)
    assert provider.tool_messages(1) == [words]

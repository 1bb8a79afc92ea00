"""The run API (issue 29): a loop that is not Tether's reports into a run on the store, waits
for decisions made anywhere, is stopped from anywhere, and ends in one of the five ways."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tether.approvals import Rule
from tether.harness import Harness
from tether.vocab.state import Cancelled, Limits, MaxBudget, NeedsApproval, StateError, Status
from tether.run.tracked import LimitReached, Stopped
from tether.store.trace import read_trace


def kinds(harness: Harness, run_id: str) -> list[str]:
    return [r["kind"] for r in read_trace(harness.store.root / run_id / "trace.jsonl")]


async def until_waiting(harness: Harness, run_id: str) -> NeedsApproval:
    for _ in range(1000):
        waiting = harness.store.load(run_id).interruption
        if isinstance(waiting, NeedsApproval):
            return waiting
        await asyncio.sleep(0.01)
    raise AssertionError("the program never waited for approval")


async def test_a_reported_run_is_a_run_like_any_other(harness: Harness, recorder):
    async with harness.track("triage", "Triage ticket 42", source="pydantic-ai", model="gpt-4o-mini") as run:
        run.text("Looking ")
        run.text("it up.")
        await run.tool_started("c1", "get_ticket", {"id": 42})
        await run.tool_finished("c1", "Printer on fire")
        await run.usage(812, 64)
        await run.answer("Escalated to facilities.")
    state = harness.store.load(run.run_id)
    assert state.status is Status.COMPLETED and state.answer == "Escalated to facilities."
    assert state.turns == 1 and state.prompt_tokens == 812 and state.cost_usd > 0
    assert state.pricing.source == "genai-prices"  # no price was given: genai-prices knows gpt-4o-mini
    summary = harness.store.summary(run.run_id)
    assert (summary.agent, summary.status, summary.source) == ("triage", "completed", "pydantic-ai")
    assert kinds(harness, run.run_id) == ["run_started", "tool_start", "tool_result", "turn", "run_stopped"]
    assert "text_delta" in recorder.kinds(run.run_id)  # streamed to views, not traced
    with pytest.raises(StateError, match="reported by a program \\(pydantic-ai, agent triage\\)"):
        await harness.run(run.run_id, message="and then?")


async def test_an_approval_waits_for_a_decision_from_anywhere(harness: Harness):
    async def program() -> tuple[object, str]:
        async with harness.track("bot", "close stale tickets") as run:
            decision = await run.approval("close_ticket", {"id": 7}, call_id="c7")
            return decision, run.run_id

    task = asyncio.create_task(program())
    run_id = next(iter(harness.live)) if harness.live else None
    while run_id is None:
        await asyncio.sleep(0.01)
        run_id = next(iter(harness.live), None)
    waiting = await until_waiting(harness, run_id)
    assert (waiting.tool_name, json.loads(waiting.args)) == ("close_ticket", {"id": 7})
    reply = await harness.decide(run_id, "reject", "ticket 7 is not stale", by="bob")
    assert reply.ok, reply.words
    decision, _ = await task
    assert not decision.approved and decision.by == "bob"
    assert decision.words == "The operator bob declined this call: ticket 7 is not stale. Nothing was done."
    state = harness.store.load(run_id)
    assert state.approvals["c7"].verdict == "rejected"
    assert state.messages[-1]["content"] == decision.words  # the call's result slot says it


async def _waiting_program(harness: Harness, **approval: object) -> tuple[asyncio.Task, str]:
    """A program whose call ``c7`` (close_ticket) waits for a decision, and its run's id."""
    async def program() -> object:
        async with harness.track("bot", "close stale tickets") as run:
            return await run.approval("close_ticket", {"id": 7}, call_id="c7", **approval)  # type: ignore[arg-type]

    task = asyncio.create_task(program())
    for _ in range(1000):
        if harness.live or task.done():
            break
        await asyncio.sleep(0.01)
    if task.done():
        task.result()  # the program failed before it waited: its error is the test's
    run_id = next(iter(harness.live))
    await until_waiting(harness, run_id)
    return task, run_id


TICKET_SCHEMA = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"],
                 "additionalProperties": False}


async def test_an_edit_of_a_programs_call_is_checked_against_the_schema_it_reported(harness: Harness):
    """Issue 37, item 4: an edit of a program's call was taken unchecked, and the program's
    tool then failed on it. Checked against the schema the program reported with the call."""
    task, run_id = await _waiting_program(harness, schema=TICKET_SCHEMA)
    for edit, words in (('{"id": "seven"}', "the edited arguments do not fit close_ticket: id: 'seven' is not of "
                                            "type 'integer'; nothing was decided"),
                        ('{"id": 8, "force": true}', "Additional properties are not allowed ('force' was unexpected)"),
                        ('{"id": 8, "id": 9}', 'the edited arguments give the key "id" twice')):
        refused = await harness.decide(run_id, "approve", by="bob", args=edit)
        assert not refused.ok and words in refused.words, refused.words
        refused = await harness.decide(run_id, "approve", by="bob", args=edit, unchecked=True)  # a known schema holds
        assert not refused.ok and words in refused.words, refused.words
    assert not harness.store.load(run_id).approvals  # nothing consumed
    reply = await harness.decide(run_id, "approve", "8, not 7", by="bob", args='{"id": 8}')
    assert reply.ok, reply.words
    decision = await task
    assert decision.approved and decision.args == {"id": 8}  # type: ignore[attr-defined]


async def test_an_edit_of_a_call_whose_schema_nobody_reported_is_refused_unless_unchecked(harness: Harness):
    task, run_id = await _waiting_program(harness)
    refused = await harness.decide(run_id, "approve", by="bob", args='{"id": "seven"}')
    assert not refused.ok
    assert f"run {run_id}'s program did not report the schema of close_ticket's arguments" in refused.words
    assert f"tether approve {run_id} --args JSON --unchecked" in refused.words
    assert not harness.store.load(run_id).approvals
    reply = await harness.decide(run_id, "approve", by="bob", args='{"id": "seven"}', unchecked=True)
    assert reply.ok, reply.words
    decision = await task
    assert decision.approved and decision.args == {"id": "seven"}  # type: ignore[attr-defined]


async def test_a_schema_that_is_no_json_schema_is_refused_to_the_program(harness: Harness):
    async with harness.track("bot", "close stale tickets") as run:
        with pytest.raises(ValueError, match="the schema of close_ticket's arguments is not a JSON schema"):
            await run.approval("close_ticket", {"id": 7}, schema={"type": 5})
        await run.answer("done")


async def test_a_rule_decides_a_programs_call_at_once(harness: Harness):
    added = harness.store.rule_add(Rule("allow", "close_*", "stale tickets", "alice", source="program"))
    async with harness.track("bot", "close stale tickets") as run:
        decision = await run.approval("close_ticket", {"id": 7})
    assert decision.approved and decision.by == f"rule {added.id}"
    assert decision.words.startswith(f"Approved by rule {added.id} (stale tickets; alice, ")


async def test_stop_raises_in_the_program_and_the_run_ends_interrupted(harness: Harness):
    reached = asyncio.Event()

    async def program() -> str:
        async with harness.track("bot", "work") as run:
            reached.set()
            await run.approval("deploy", {"env": "prod"})
            raise AssertionError("a stopped run's approval never returns")
        return run.run_id

    task = asyncio.create_task(program())
    await reached.wait()
    run_id = next(iter(harness.live))
    await until_waiting(harness, run_id)
    reply = await harness.stop(run_id, "wrong ticket", by="carol")
    assert reply.ok
    assert await task == run_id  # Stopped ended the block in a known way, not raised out of it
    state = harness.store.load(run_id)
    assert state.status is Status.INTERRUPTED and state.interruption == Cancelled("wrong ticket", "carol")


async def test_stop_cancels_a_task_the_program_handed_over(harness: Harness):
    working = asyncio.Event()

    async def loop_of_theirs() -> None:
        working.set()
        await asyncio.sleep(3600)

    theirs = asyncio.create_task(loop_of_theirs())
    async with harness.track("bot", "work", cancel=theirs) as run:
        await working.wait()
        await harness.stop(run.run_id, "enough", by="dan")
        with pytest.raises(asyncio.CancelledError):
            await theirs
        with pytest.raises(Stopped):
            await run.usage(10, 2)
    assert harness.store.load(run.run_id).interruption == Cancelled("enough", "dan")


async def test_a_budget_crossed_at_a_usage_report_ends_the_run(harness: Harness):
    async with harness.track("bot", "work", model="gpt-4o-mini", limits=Limits(budget_usd=0.001, max_turns=None)) as run:
        with pytest.raises(LimitReached) as raised:
            await run.usage(100_000, 10_000)
        assert raised.value.status is Status.BUDGET_EXCEEDED
        await run.usage(1, 1)  # the program went on regardless: the run has ended, so this raises
        raise AssertionError("unreachable")
    state = harness.store.load(run.run_id)
    assert state.status is Status.BUDGET_EXCEEDED and state.interruption == MaxBudget()


async def test_an_exception_in_the_program_fails_the_run_in_its_words(harness: Harness):
    with pytest.raises(KeyError):
        async with harness.track("bot", "work") as run:
            raise KeyError("ticket")
    state = harness.store.load(run.run_id)
    assert state.status is Status.FAILED and state.error == "KeyError: 'ticket'"


PROGRAM = textwrap.dedent("""
    import asyncio, sys
    from tether.harness import Harness

    async def main():
        async with Harness(sys.argv[1]) as harness:
            async with harness.track("bot", "work", run_id="prog") as run:
                await run.usage(10, 2)
                print("reporting", flush=True)
                await asyncio.sleep(3600)

    asyncio.run(main())
""")


def test_a_program_killed_outright_shows_as_orphaned(tmp_path: Path):
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path.cwd()), os.environ.get("PYTHONPATH")]))}
    with subprocess.Popen([sys.executable, str(script), str(tmp_path / "runs")], stdout=subprocess.PIPE, text=True,
                          env=env) as program:
        try:
            assert program.stdout.readline().strip() == "reporting"
            program.send_signal(signal.SIGKILL)
        finally:
            program.kill()
            program.wait()
    listed = subprocess.run([sys.executable, "-m", "tether.tui.cli", "runs", "--json", "--runs-dir",
                             str(tmp_path / "runs")], capture_output=True, text=True, env=env, check=True)
    (row,) = json.loads(listed.stdout)
    assert (row["run_id"], row["liveness"], row["source"]) == ("prog", "orphaned", "program")
    listed = subprocess.run([sys.executable, "-m", "tether.tui.cli", "runs", "--runs-dir", str(tmp_path / "runs")],
                            capture_output=True, text=True, env=env, check=True)
    assert "[program]" in listed.stdout


async def test_a_programs_own_deadline_rejects_and_a_stopped_run_is_not_revived(harness: Harness):
    import time

    async with harness.track("hooks", "work", source="claude-code", keep_open=True) as run:
        await run.say("I will list the files.")
        decision = await run.approval("Bash", {"command": "ls"}, deadline_at=time.time() + 0.05)
        await run.tool_finished("late", "ignored", ms=12.5)
    assert not decision.approved and decision.by == "deadline"
    assert decision.words.startswith("No decision within ") and decision.words.endswith("Nothing was done.")
    state = harness.store.load(run.run_id)
    assert state.status is Status.RUNNING  # kept open for the next reporter
    assert {"role": "assistant", "content": "I will list the files."} in state.messages
    await harness.stop(run.run_id, "enough")  # nobody holds it: recorded for the next reporter
    async with harness.track("hooks", attach=True, run_id=run.run_id) as again:
        with pytest.raises(Stopped):
            await again.usage(1, 1)
    with pytest.raises(StateError, match="has already ended"):
        async with harness.track("hooks", attach=True, run_id=run.run_id):
            pass

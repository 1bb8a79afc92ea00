"""ACP agents as Tether runs (tether.acp.run through the harness), against the fake agent:
the run on the store, its trace, approvals decided from the control channel, Stop, budgets,
an agent that dies or will not stop."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import tether.models.tokens
from tether.agents.agent import AcpCommand, Agent, AgentError
from tether.harness import Harness
from tether.vocab.state import Cancelled, MaxBudget, NeedsApproval, StateError, Status
from tether.store.trace import read_trace
from tether.demo.agents import DEMO
from tests.acp.conftest import fake_agent
from tests.acp.driving import session_open, waiting
from tests.acp.fake_agent import ESCAPE_PATH, ESCAPE_TEXT, WRITE_NAME, WRITE_TEXT
from tests.support import cli_here, cli_here_async, processes_with


def agent(workspace: Path, mode: str = "normal", **kw) -> Agent:
    env = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    grace = kw.pop("cancel_grace_s", 5.0)
    return Agent(name="fake", model="acp:fake", acp=AcpCommand(tuple(fake_agent(mode)), env, grace),
                 workspace=workspace, **kw)


async def test_an_approved_write_lands_and_the_run_is_on_the_store(tmp_path: Path, acp_workspace: Path):
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        state = harness.create(agent(acp_workspace), "write the file")
        running = asyncio.create_task(harness.run(state.run_id, wait_for_decision=0))
        pending = await waiting(harness, state.run_id)
        assert pending.tool_name == "Write out.txt" and "out.txt" in pending.args
        assert "Allow once (allow once)" in pending.why
        reply = await harness.decide(state.run_id, "approve", "looks right", by="alice")
        assert reply.ok, reply.text
        outcome = await running
    final = outcome.state
    assert final.status is Status.COMPLETED, final.error
    assert (acp_workspace / WRITE_NAME).read_text() == WRITE_TEXT
    assert final.answer == "Done."
    assert final.approvals["call_1"].verdict == "approved" and final.approvals["call_1"].by == "alice"
    assert round(final.cost_usd, 4) == 0.0125, "the agent's own cost, not tokens at an assumed price"
    assert final.prompt_tokens == 40 and final.completion_tokens == 8
    trace = list(read_trace(tmp_path / "runs" / state.run_id / "trace.jsonl"))
    seen = [r["kind"] for r in trace]
    for kind in ("run_started", "agent_session", "plan", "tool_start", "approval_required", "approval_decision",
                 "file_write", "tool_result", "thought", "turn", "run_stopped"):
        assert kind in seen, (kind, seen)
    asked = next(r for r in trace if r["kind"] == "approval_required")
    assert "+written by the fake agent" in asked["diff"]
    assert [o["kind"] for o in asked["options"]] == ["allow_once", "allow_always", "reject_once"]
    written = next(r for r in trace if r["kind"] == "file_write")
    assert written["path"].endswith(WRITE_NAME) and written["size"] == len(WRITE_TEXT)
    assert not processes_with(str(acp_workspace.parent)), "the agent's process is gone"


async def test_an_acp_run_does_not_load_the_tokenizer(tmp_path: Path, acp_workspace: Path,
                                                      monkeypatch: pytest.MonkeyPatch):
    """The agent reports its own usage and Tether counts nothing: a process that only runs ACP
    agents (a worker, `tether run` of one) does not pay for the rank file."""
    monkeypatch.setattr(tether.models.tokens, "_encoding", None)
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        state = harness.create(agent(acp_workspace, "shell"), "run it")
        outcome = await harness.run(state.run_id)
    assert outcome.state.status is Status.COMPLETED, outcome.state.error
    assert not tether.models.tokens.encoding_loaded()


async def test_a_rejection_reaches_the_agent_as_the_next_prompt(tmp_path: Path, acp_workspace: Path):
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        state = harness.create(agent(acp_workspace), "write the file")
        running = asyncio.create_task(harness.run(state.run_id, wait_for_decision=0))
        await waiting(harness, state.run_id)
        assert (await harness.decide(state.run_id, "reject", "not in this folder", by="bob")).ok
        # The words go in as the next prompt; the agent asks again, and this time it is allowed.
        for _ in range(600):
            if len([m for m in harness.store.load(state.run_id).messages if m.get("tether") == "rejection"]):
                break
            await asyncio.sleep(0.05)
        await waiting(harness, state.run_id)
        assert (await harness.decide(state.run_id, "approve", by="bob")).ok
        final = (await running).state
    told = [m["content"] for m in final.messages if m.get("tether") == "rejection"]
    assert told == ["The operator bob declined this call: not in this folder. Nothing was done."]
    assert final.status is Status.COMPLETED and final.turns == 2
    assert "call_1" in final.failed_calls


async def test_stop_mid_turn_cancels_the_session_and_leaves_no_process(tmp_path: Path, acp_workspace: Path):
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        state = harness.create(agent(acp_workspace), "write SLOW")
        running = asyncio.create_task(harness.run(state.run_id))
        await session_open(harness, state.run_id)
        reply = await harness.stop(state.run_id, "enough", by="carol")
        assert reply.ok
        final = (await running).state
    assert final.status is Status.INTERRUPTED
    assert final.interruption == Cancelled("enough", "carol")
    assert not processes_with(str(acp_workspace.parent))


async def test_an_agent_that_ignores_cancel_is_killed_after_its_grace(tmp_path: Path, acp_workspace: Path):
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        state = harness.create(agent(acp_workspace, "ignore-cancel", cancel_grace_s=0.5), "go")
        running = asyncio.create_task(harness.run(state.run_id))
        await session_open(harness, state.run_id)
        await harness.stop(state.run_id, "stop now")
        final = (await running).state
    assert final.status is Status.INTERRUPTED
    assert "did not end its turn within 0.5 s" in final.interruption.reason
    assert "process group was killed" in final.interruption.reason
    assert not processes_with(str(acp_workspace.parent))


async def test_an_agent_that_dies_mid_turn_ends_the_run_in_words(tmp_path: Path, acp_workspace: Path):
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        outcome = await harness.start(agent(acp_workspace, "die-mid-turn"), "go")
    final = outcome.state
    assert final.status is Status.INTERRUPTED
    assert "status 3" in final.interruption.reason, final.interruption.reason


async def test_a_budget_crossed_cancels_the_turn(tmp_path: Path, acp_workspace: Path):
    from tether.vocab.state import Limits

    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        state = harness.create(agent(acp_workspace, limits=Limits(budget_usd=0.01)), "write the file")
        running = asyncio.create_task(harness.run(state.run_id, wait_for_decision=0))
        await waiting(harness, state.run_id)
        await harness.decide(state.run_id, "approve")
        final = (await running).state
    assert final.status is Status.BUDGET_EXCEEDED
    assert final.interruption == MaxBudget()
    assert final.cost_usd >= 0.01


async def test_acp_agent_from_an_agent_file_and_approved_from_another_process(tmp_path: Path, acp_workspace: Path):
    """``tether run --agent fake --wait-for-decision``, approved by ``tether approve`` in a
    second process: the run's process holds the agent while it waits."""
    config = tmp_path / "tether.toml"
    argv = json.dumps(fake_agent("normal"))
    pythonpath = os.environ.get("PYTHONPATH", "")
    config.write_text(f'[agents.fake]\nacp = {argv}\nworkspace = "{acp_workspace}"\n'
                      f'env = {{ PYTHONPATH = "{pythonpath}" }}\n')
    env = {**os.environ, "TETHER_HOME": str(tmp_path), "TETHER_CONFIG": str(config)}
    run = subprocess.Popen([sys.executable, "-m", "tether.tui.cli", "run", "--agent", "fake", "--prompt", "write it",
                            "--run-id", "a1", "--wait-for-decision", "--json"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
            await waiting(harness, "a1")
        approve = await cli_here_async("approve", "a1", "--as", "dana", env=env)  # the CLI's main, a second process
        assert approve.returncode == 0, approve.stderr
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, err
    assert json.loads(out)["status"] == "completed"
    assert (acp_workspace / WRITE_NAME).exists()
    shown = await cli_here_async("show", "a1", env=env)
    assert "Done." in shown.stdout


async def test_a_decision_may_pick_the_agents_option_and_a_wrong_one_is_refused_in_words(
        tmp_path: Path, acp_workspace: Path):
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        state = harness.create(agent(acp_workspace), "write the file")
        running = asyncio.create_task(harness.run(state.run_id, wait_for_decision=0))
        await waiting(harness, state.run_id)
        wrong = await harness.decide(state.run_id, "approve", option="nope")
        assert not wrong.ok and "offers no option 'nope'" in wrong.words and "always (allow_always)" in wrong.words
        mismatched = await harness.decide(state.run_id, "approve", option="reject")
        assert not mismatched.ok and "reject once: it cannot approve" in mismatched.words
        assert (await harness.decide(state.run_id, "approve", option="always", by="erin")).ok
        final = (await running).state
    assert final.status is Status.COMPLETED
    decided = [r for r in read_trace(tmp_path / "runs" / state.run_id / "trace.jsonl")
               if r["kind"] == "approval_decision"]
    assert [(d["verdict"], d["by"]) for d in decided] == [("approved", "erin")]


async def test_a_silent_rejection_is_not_sent_to_the_agent(tmp_path: Path, acp_workspace: Path):
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        state = harness.create(agent(acp_workspace), "write the file")
        running = asyncio.create_task(harness.run(state.run_id, wait_for_decision=0))
        await waiting(harness, state.run_id)
        assert (await harness.decide(state.run_id, "reject", "no", silent=True)).ok
        final = (await running).state
    assert final.status is Status.COMPLETED and final.turns == 1
    assert not [m for m in final.messages if m.get("tether") == "rejection"]
    assert not (acp_workspace / WRITE_NAME).exists()


async def test_option_and_silent_are_refused_for_tethers_own_runs(tmp_path: Path):
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        state = harness.new_run("destructive")
        running = asyncio.create_task(harness.run(state.run_id, wait_for_decision=0))
        await waiting(harness, state.run_id)
        reply = await harness.decide(state.run_id, "approve", option="allow")
        assert not reply.ok and "not an ACP agent's" in reply.words
        assert (await harness.decide(state.run_id, "approve")).ok
        assert (await running).state.status is Status.COMPLETED


async def test_a_budget_on_an_agent_that_reports_no_usage_is_refused_in_words(tmp_path: Path, acp_workspace: Path):
    from tether.vocab.state import Limits

    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        unmetered = await harness.start(agent(acp_workspace, "write-outside", limits=Limits(budget_usd=0.5)), "go")
        accepted = await harness.start(agent(acp_workspace, "write-outside",
                                             limits=Limits(budget_usd=0.5, budget_mode="turns-only")), "go")
    assert unmetered.state.status is Status.FAILED
    assert "reports no usage, so its $0.5 budget cannot hold" in unmetered.state.error
    assert 'budget_mode = "turns-only"' in unmetered.state.error
    assert accepted.state.status is Status.COMPLETED
    assert accepted.state.estimated_turns == [1], "the turn is marked: usage not reported"


async def test_writes_outside_the_workspace_are_refused_and_recorded(tmp_path: Path, acp_workspace: Path):
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        outcome = await harness.start(agent(acp_workspace, "write-outside"), "go")
        trace = list(read_trace(tmp_path / "runs" / outcome.state.run_id / "trace.jsonl"))
    refused = [r for r in trace if r["kind"] == "file_write"]
    assert refused and all(r["refused"] for r in refused), refused
    assert "outside" in outcome.state.answer
    assert not (tmp_path / "escaped.txt").exists()
    assert not [r for r in trace if r["kind"] == "warning"], "refused and not written: nothing to warn of"


async def test_a_refused_write_the_agent_makes_itself_is_a_warning_in_the_trace_and_show(
        tmp_path: Path, acp_workspace: Path):
    """An agent that does its own file I/O (as OpenCode): Tether refuses its write outside the
    workspace, it writes the file itself and reports success. The trace and ``tether show``
    say so, after the call's result (issue 37, item 2); with nothing written, nothing is said."""
    escaped = (acp_workspace / ESCAPE_PATH).resolve()
    other = tmp_path / "elsewhere" / "workspace"
    other.mkdir(parents=True)
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        outcome = await harness.start(agent(acp_workspace, "write-itself"), "write outside")
        pretended = await harness.start(agent(other, "write-itself"), "PRETEND to write")
        trace = list(read_trace(tmp_path / "runs" / outcome.state.run_id / "trace.jsonl"))
        quiet = list(read_trace(tmp_path / "runs" / pretended.state.run_id / "trace.jsonl"))
    assert outcome.state.status is Status.COMPLETED, outcome.state.error
    assert escaped.read_text() == ESCAPE_TEXT
    kinds = [r["kind"] for r in trace]
    assert kinds.index("file_write") < kinds.index("tool_result") < kinds.index("warning") < kinds.index("turn")
    [refused] = [r for r in trace if r["kind"] == "file_write"]
    assert refused["refused"].startswith("Refused:") and refused["path"] == str(escaped)
    [warning] = [r for r in trace if r["kind"] == "warning"]
    assert warning["call_id"] == "call_w" and warning["path"] == str(escaped)
    assert warning["text"].startswith(f"the agent wrote {escaped} itself, outside the workspace {acp_workspace}")

    runs = str(tmp_path / "runs")
    shown = cli_here("show", outcome.state.run_id, "--runs-dir", runs).stdout.splitlines()
    result = shown.index("[tool] Wrote file successfully.")
    assert shown[result + 1] == f"[warning] {warning['text']}", shown
    as_json = json.loads(cli_here("show", outcome.state.run_id, "--runs-dir", runs, "--json").stdout)
    assert as_json["warnings"] == [{"text": warning["text"], "call_id": "call_w", "path": str(escaped)}]

    assert pretended.state.status is Status.COMPLETED and not (other / ESCAPE_PATH).exists()
    assert not [r for r in quiet if r["kind"] == "warning"], "success reported, nothing written: no warning"
    assert "[warning]" not in cli_here("show", pretended.state.run_id, "--runs-dir", runs).stdout


async def test_a_refused_write_the_agent_makes_itself_after_its_turn_ended_is_still_a_warning(
        tmp_path: Path, acp_workspace: Path):
    """The call reported done and the turn ended before the agent's own write landed (OpenCode on a
    loaded host): the turn's last look waits for it, and the warning is on the call that said so."""
    escaped = (acp_workspace / ESCAPE_PATH).resolve()
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        outcome = await harness.start(agent(acp_workspace, "write-itself"), "LATE write outside")
        trace = list(read_trace(tmp_path / "runs" / outcome.state.run_id / "trace.jsonl"))
    assert outcome.state.status is Status.COMPLETED, outcome.state.error
    assert escaped.read_text() == ESCAPE_TEXT
    kinds = [r["kind"] for r in trace]
    assert kinds.index("tool_result") < kinds.index("warning") < kinds.index("turn")
    [warning] = [r for r in trace if r["kind"] == "warning"]
    assert warning["call_id"] == "call_w" and warning["path"] == str(escaped)


async def test_a_refused_write_the_agent_made_before_asking_the_client_is_still_a_warning(
        tmp_path: Path, acp_workspace: Path):
    """OpenCode's own write landed before its request to the client was served (a loaded host):
    the file was already there at the refusal, holding what the agent asked to write. It is
    the agent's write all the same, and the warning says so; a file that held that content
    before the turn began is not the agent's doing, and nothing is said."""
    escaped = (acp_workspace / ESCAPE_PATH).resolve()
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        outcome = await harness.start(agent(acp_workspace, "write-itself"), "FIRST write outside")
        trace = list(read_trace(tmp_path / "runs" / outcome.state.run_id / "trace.jsonl"))
        os.utime(escaped, ns=(escaped.stat().st_atime_ns, escaped.stat().st_mtime_ns - 3_600_000_000_000))
        again = await harness.start(agent(acp_workspace, "write-itself"), "PRETEND to write, it is there")
        quiet = list(read_trace(tmp_path / "runs" / again.state.run_id / "trace.jsonl"))
    assert outcome.state.status is Status.COMPLETED, outcome.state.error
    kinds = [r["kind"] for r in trace]
    assert kinds.index("file_write") < kinds.index("tool_result") < kinds.index("warning") < kinds.index("turn")
    [warning] = [r for r in trace if r["kind"] == "warning"]
    assert warning["call_id"] == "call_w" and warning["path"] == str(escaped)
    assert warning["text"].startswith(f"the agent wrote {escaped} itself, outside the workspace {acp_workspace}")
    assert [r for r in quiet if r["kind"] == "file_write" and r["refused"]], "the second write was refused too"
    assert not [r for r in quiet if r["kind"] == "warning"], "an hour-old file with that content: no warning"


async def test_a_refused_write_asked_after_the_call_was_reported_done_is_a_warning_on_that_call(
        tmp_path: Path, acp_workspace: Path):
    """OpenCode on a loaded host: its own write, the call reported done, and only then its
    request to the client, refused. The warning is on the call whose input named the file."""
    escaped = (acp_workspace / ESCAPE_PATH).resolve()
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        outcome = await harness.start(agent(acp_workspace, "write-itself"), "AFTER write outside")
        trace = list(read_trace(tmp_path / "runs" / outcome.state.run_id / "trace.jsonl"))
    assert outcome.state.status is Status.COMPLETED, outcome.state.error
    kinds = [r["kind"] for r in trace]
    assert kinds.index("tool_result") < kinds.index("file_write") < kinds.index("warning") < kinds.index("turn")
    [warning] = [r for r in trace if r["kind"] == "warning"]
    assert warning["call_id"] == "call_w" and warning["path"] == str(escaped)


async def test_a_call_keeps_one_name_and_shows_the_input_that_came_after_its_start(
        tmp_path: Path, acp_workspace: Path):
    """OpenCode starts a call ``write`` with ``{}`` and names it by its file's path later: the
    trace and the transcript keep one name and show the input the agent reported (item 14)."""
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        outcome = await harness.start(agent(acp_workspace, "write-itself"), "PRETEND to write")
        trace = list(read_trace(tmp_path / "runs" / outcome.state.run_id / "trace.jsonl"))
    [start] = [r for r in trace if r["kind"] == "tool_start"]
    [result] = [r for r in trace if r["kind"] == "tool_result"]
    assert (start["name"], result["name"]) == ("write", "write")
    assert json.loads(start["args"]) == {"filePath": str((acp_workspace / ESCAPE_PATH).resolve()),
                                         "content": ESCAPE_TEXT}
    [call] = [c for m in outcome.state.messages for c in m.get("tool_calls") or ()]
    assert call["function"] == {"name": "write", "arguments": start["args"]}
    shown = cli_here("show", outcome.state.run_id, "--runs-dir", str(tmp_path / "runs")).stdout
    assert f"[assistant → write] {start['args']}  (call_w)" in shown


async def test_a_follow_up_loads_the_agents_session_in_a_new_process(tmp_path: Path, acp_workspace: Path):
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        state = harness.create(agent(acp_workspace, "loads"), "write the file")
        running = asyncio.create_task(harness.run(state.run_id, wait_for_decision=0))
        await waiting(harness, state.run_id)
        await harness.decide(state.run_id, "approve")
        assert (await running).state.status is Status.COMPLETED
        (acp_workspace / WRITE_NAME).unlink()

        again = asyncio.create_task(harness.run(state.run_id, message="write it once more", wait_for_decision=0))
        for _ in range(600):  # the new approval: a key of its own, as the agent reuses its call id
            pending = harness.store.load(state.run_id).interruption
            if isinstance(pending, NeedsApproval) and pending.call_id == "call_1#2":
                break
            await asyncio.sleep(0.05)
        assert (await harness.decide(state.run_id, "approve")).ok
        final = (await again).state
        sessions = [r for r in read_trace(tmp_path / "runs" / state.run_id / "trace.jsonl")
                    if r["kind"] == "agent_session"]
    assert final.status is Status.COMPLETED and final.turns == 2
    assert (acp_workspace / WRITE_NAME).exists()
    assert [m["content"] for m in final.messages if m["role"] == "user"] == ["write the file", "write it once more"]
    assert not any("(replayed)" in str(m.get("content")) for m in final.messages), "the replay is not recorded twice"
    assert len(sessions) == 2 and sessions[0]["session_id"] == sessions[1]["session_id"]


async def test_a_follow_up_is_refused_in_words_when_the_agent_cannot_load_its_session(
        tmp_path: Path, acp_workspace: Path):
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        done = await harness.start(agent(acp_workspace, "write-outside"), "go")
        with pytest.raises(StateError, match="cannot load its earlier session"):
            await harness.run(done.state.run_id, message="and then?")
        with pytest.raises(StateError, match="a follow-up goes on from it"):
            await harness.run(done.state.run_id)
        after = harness.store.load(done.state.run_id)
    assert after.status is Status.COMPLETED
    assert "and then?" not in str(after.messages), "a refused follow-up changes nothing"


@pytest.mark.parametrize(("argv", "words"), [
    (["/bin/cat"], "is not a usable ACP agent"),
    ([sys.executable, "-c", "import sys; sys.exit(4)"], "is not an ACP agent"),
])
def test_a_command_that_is_not_an_acp_agent_is_one_line_and_no_run(tmp_path: Path, argv, words):
    config = tmp_path / "tether.toml"
    config.write_text(f"[agents.bad]\nacp = {json.dumps(argv)}\n")
    env = {**os.environ, "TETHER_HOME": str(tmp_path / "home"), "TETHER_CONFIG": str(config)}
    done = subprocess.run([sys.executable, "-m", "tether.tui.cli", "run", "--agent", "bad", "--prompt", "x"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"tether: error: {config}: agents.bad.acp: ") and words in line, line
    assert line.endswith("fix the command, or check it runs the agent's ACP mode")
    runs = tmp_path / "home" / "runs"
    assert not runs.exists() or not any(runs.iterdir()), "no run was made"


def test_a_run_whose_process_was_killed_mid_turn_ends_in_words_and_takes_a_follow_up(
        tmp_path: Path, acp_workspace: Path):
    """SIGKILL of the process driving an ACP run: the agent dies with it (its launcher), the
    run is left `running` on disk; the next operation ends it in words (its turn is not done
    again), and a follow-up goes on in the agent's session."""
    config = tmp_path / "tether.toml"
    pythonpath = os.environ.get("PYTHONPATH", "")
    config.write_text(f'[agents.fake]\nacp = {json.dumps(fake_agent("loads"))}\nworkspace = "{acp_workspace}"\n'
                      f'env = {{ PYTHONPATH = "{pythonpath}" }}\n')
    env = {**os.environ, "TETHER_HOME": str(tmp_path), "TETHER_CONFIG": str(config)}
    run = subprocess.Popen([sys.executable, "-m", "tether.tui.cli", "run", "--agent", "fake", "--prompt", "write it",
                            "--run-id", "k1", "--wait-for-decision"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        async def until_waiting() -> None:
            async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
                await waiting(harness, "k1")
        asyncio.run(until_waiting())
        run.kill()
        run.wait(timeout=30)
    finally:
        if run.poll() is None:
            run.kill()

    def no_agent_left() -> bool:
        return not processes_with(str(acp_workspace))
    for _ in range(200):
        if no_agent_left():
            break
        time.sleep(0.05)
    assert no_agent_left(), "the agent died with the process that drove it"
    resumed = cli_here("resume", "k1", env=env)  # the CLI's main, in this process: the killed one's successor
    assert resumed.returncode == 5, resumed.stderr
    assert "ended mid-turn, and the agent with it" in resumed.stdout
    assert "tether resume k1 --message TEXT" in resumed.stdout
    assert not (acp_workspace / WRITE_NAME).exists(), "the turn was not done again behind the operator's back"

    async def follow_up() -> Status:
        async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
            before = harness.store.load("k1").interruption
            going = asyncio.create_task(harness.run("k1", message="write it now", wait_for_decision=0))
            await waiting(harness, "k1", other_than=before)
            assert (await harness.decide("k1", "approve")).ok
            return (await going).state.status
    assert asyncio.run(follow_up()) is Status.COMPLETED
    assert (acp_workspace / WRITE_NAME).exists()


async def test_an_agent_that_dies_while_it_waits_for_a_decision_ends_the_run(tmp_path: Path, acp_workspace: Path):
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        state = harness.create(agent(acp_workspace, "die-asking"), "write the file")
        outcome = await asyncio.wait_for(harness.run(state.run_id, wait_for_decision=0), 60)
        late = await harness.decide(state.run_id, "approve")
    final = outcome.state
    assert final.status is Status.INTERRUPTED
    assert "status 5" in final.interruption.reason and "dies while it asks" in final.interruption.reason
    assert not late.ok, "nothing waits for a decision any more"
    assert not (acp_workspace / WRITE_NAME).exists()


@pytest.mark.parametrize(("mode", "status", "words"), [
    ("malformed", Status.COMPLETED, "still here"),
    ("garbage", Status.FAILED, "sent 20 malformed frames in a row"),
    ("flood", Status.COMPLETED, "4999"),
])
async def test_bad_frames_and_floods_through_a_run(tmp_path: Path, acp_workspace: Path, mode, status, words):
    """A few lines that are not JSON-RPC are skipped, a run of them ends the run in words, and a
    flood (a 600 KB frame, then 5,000 chunks) lands whole in the transcript."""
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        final = (await asyncio.wait_for(harness.start(agent(acp_workspace, mode), "go"), 120)).state
        kinds = [r["kind"] for r in read_trace(tmp_path / "runs" / final.run_id / "trace.jsonl")]
    assert final.status is status, (final.status, final.error)
    shown = final.answer if status is Status.COMPLETED else final.error
    assert words in (shown or ""), shown
    assert "text_delta" not in kinds, "streamed pieces are not kept in the trace"
    assert not processes_with(str(acp_workspace.parent))


def test_tether_agents_shows_what_an_acp_agent_says_of_itself(tmp_path: Path):
    config = tmp_path / "tether.toml"
    config.write_text(f"[agents.fake]\nacp = {json.dumps(fake_agent('loads'))}\n\n"
                      f"[agents.cat]\nacp = [\"/bin/cat\"]\n")
    env = {**os.environ, "TETHER_HOME": str(tmp_path / "home"), "TETHER_CONFIG": str(config)}
    shown = subprocess.run([sys.executable, "-m", "tether.tui.cli", "agents"], env=env, capture_output=True, text=True,
                           timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "fake  ACP agent: " in shown.stdout
    assert "fake-agent 1.0.0; auth: none; loads sessions: yes" in shown.stdout
    assert "cat  ACP agent: /bin/cat" in shown.stdout and "is not a usable ACP agent" in shown.stdout
    listed = cli_here("agents", "--json", env=env)  # the CLI's main in this process; the listing above is a real one
    rows = {r["name"]: r for r in json.loads(listed.stdout)}
    assert rows["fake"]["acp"]["agent"] == "fake-agent" and rows["fake"]["acp"]["load_session"] is True
    assert "error" in rows["cat"]["acp"]


def test_an_acp_agents_environment_is_saved_as_written_and_what_it_took_is_a_secret(
        tmp_path: Path, acp_workspace: Path, monkeypatch):
    monkeypatch.setenv("TETHER_TEST_ACP_KEY", "sk-very-secret-123")
    command = AcpCommand(tuple(fake_agent("normal")), {"AGENT_KEY": "${TETHER_TEST_ACP_KEY}", "PLAIN": "yes"})
    coder = Agent(name="fake", model="acp:fake", acp=command, workspace=acp_workspace)
    assert command.resolved_env() == ({"AGENT_KEY": "sk-very-secret-123", "PLAIN": "yes"}, ("sk-very-secret-123",))
    async def run() -> Status:
        async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
            assert "sk-very-secret-123" in harness.secrets(coder)
            state = harness.create(coder, "write the file")
            going = asyncio.create_task(harness.run(state.run_id, wait_for_decision=0))
            await waiting(harness, state.run_id)
            await harness.decide(state.run_id, "approve")
            return (await going).state.status
    assert asyncio.run(run()) is Status.COMPLETED
    saved = b"".join(p.read_bytes() for p in (tmp_path / "runs").rglob("*") if p.is_file())  # the index too
    assert b"${TETHER_TEST_ACP_KEY}" in saved, "the run remembers the reference"
    assert b"sk-very-secret-123" not in saved, "never the value"
    monkeypatch.delenv("TETHER_TEST_ACP_KEY")
    with pytest.raises(AgentError, match="env.AGENT_KEY names \\$\\{TETHER_TEST_ACP_KEY\\}, which is not set"):
        command.resolved_env()


def test_the_hint_after_a_budget_stop_is_a_resume_that_works(tmp_path: Path, acp_workspace: Path):
    """An ACP run goes on only with a follow-up in its session: the hint ``tether run`` and
    ``tether show`` give after a budget stop says so, and the command it gives goes on
    (issue 37, item 16)."""
    import re
    import shlex

    from tether.approvals import Rule
    from tether.store.files.store import RunStore

    config = tmp_path / "tether.toml"
    pythonpath = os.environ.get("PYTHONPATH", "")
    config.write_text(f'[agents.fake]\nacp = {json.dumps(fake_agent("loads"))}\nworkspace = "{acp_workspace}"\n'
                      f'env = {{ PYTHONPATH = "{pythonpath}" }}\n')
    env = {**os.environ, "TETHER_HOME": str(tmp_path), "TETHER_CONFIG": str(config)}
    RunStore(tmp_path / "runs").rule_add(Rule("allow", "edit", "the fake agent's writes", "alice", source="acp"))
    capped = cli_here("run", "--agent", "fake", "--prompt", "write it", "--run-id", "b1", "--budget", "0.01", env=env)
    assert capped.returncode == Status.BUDGET_EXCEEDED.exit_code, capped.stderr
    shown = cli_here("show", "b1", env=env).stdout
    for said in (capped.stdout, shown):
        [hint] = re.findall(r"tether resume b1[^\n;]*", said)
        assert hint == "tether resume b1 --budget USD --message TEXT", said
    refused = cli_here("resume", "b1", env=env)  # as the old hint said: refused, naming the command that works
    assert refused.returncode != 0 and hint in refused.stderr, refused.stderr
    goes_on = cli_here(*shlex.split(hint.replace("USD", "1").replace("TEXT", "'write it again'"))[1:], env=env)
    assert goes_on.returncode == 0, goes_on.stderr + goes_on.stdout
    final = RunStore(tmp_path / "runs").load("b1")
    assert final.status is Status.COMPLETED and final.turns == 2
    assert [m["content"] for m in final.messages if m["role"] == "user"] == ["write it", "write it again"]


async def test_show_of_an_acp_run_prints_what_the_agent_was_sent_not_tethers_system_prompt(
        tmp_path: Path, acp_workspace: Path):
    """Tether's instructions never reach an ACP agent: ``tether show`` says so in their place,
    as the console does, and ``--json`` leaves them out (issue 37, item 13)."""
    coder = agent(acp_workspace, "write-outside")
    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        outcome = await harness.start(coder, "go")
    runs = str(tmp_path / "runs")
    shown = cli_here("show", outcome.state.run_id, "--runs-dir", runs).stdout
    assert coder.instructions not in shown and "[system]" not in shown, shown
    assert "(Tether's instructions are not sent to an ACP agent: it brings its own)" in shown
    assert "[user] go" in shown
    as_json = json.loads(cli_here("show", outcome.state.run_id, "--runs-dir", runs, "--json").stdout)
    assert [m["role"] for m in as_json["messages"]] == ["user", "assistant"]

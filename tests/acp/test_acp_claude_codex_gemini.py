"""Claude, Codex and Gemini CLI (``make agents``) as Tether runs, offline, against the coding
endpoint on loopback, each in the wire API it speaks: each path once for real.

- an approved write lands, and its approval showed the diff;
- a rejection's words reach the model's next request (Codex answers a rejection by cancelling
  its turn: the run goes on with the operator's words all the same);
- Stop mid-stream: the run is ``interrupted`` and no process of the agent is left (ps);
- Gemini runs with ``fs = false``: it cannot create a file through the client's ``fs/*``.
- the agent file's model chosen through the agent's config option (again after a resume), its
  slash commands, a shell command's output and exit code, and its killed process started again.

Without the agents these skip with one reason; with ``CI`` set they fail.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
from pathlib import Path

import pytest

from tether.agents.agent import AcpCommand, Agent
from tether.demo.acp_agents import launch_claude, launch_codex, launch_gemini, missing_new
from tether.demo.agents import DEMO
from tether.demo.provider.coding import PLAIN_ANSWER, ScriptedEndpoint
from tether.demo.provider.server import running_app
from tether.harness import Harness
from tether.store.trace import read_trace
from tether.vocab.state import Cancelled, Limits, MaxBudget, Pricing, Status
from tests.acp.driving import session_open, waiting
from tests.acp.procs import alive_in

CAP_S = float(os.environ.get("AGENT_CAP_S", "120"))
LAUNCH = {"claude": launch_claude, "codex": launch_codex, "gemini": launch_gemini}
KEYS = {"claude": {}, "codex": {"mode": "read-only"}, "gemini": {"fs": False}}


def agent(name: str, home: Path, url: str, workspace: Path) -> Agent:
    launch = LAUNCH[name](home, url.removesuffix("/v1"))
    return Agent(name=name, model="scripted", workspace=workspace,
                 acp=AcpCommand(tuple(launch.command), launch.env, 10.0, **KEYS[name]))


def said_to_model(endpoint: ScriptedEndpoint) -> str:
    return json.dumps(endpoint.requests)


@pytest.fixture
def place(tmp_path: Path) -> tuple[Path, Path]:
    why = missing_new()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    home.mkdir()
    return workspace, home


@pytest.mark.parametrize("name", ["claude", "codex", "gemini"])
async def test_an_approved_write_lands_and_a_rejections_words_reach_the_model(name: str, tmp_path: Path, place):
    workspace, home = place
    endpoint = ScriptedEndpoint(workspace=workspace)
    target = workspace / "hello.txt"
    async with running_app(endpoint.app()) as url, Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        coder = agent(name, home, url, workspace)
        state = harness.create(coder, "WRITE hello.txt CONTENT approved words")
        running = asyncio.create_task(harness.run(state.run_id, wait_for_decision=0))
        asked = await asyncio.wait_for(waiting(harness, state.run_id), CAP_S)
        assert (await harness.decide(state.run_id, "approve", by="alice")).ok
        first = (await asyncio.wait_for(running, CAP_S)).state
        assert first.status is Status.COMPLETED, first.error
        assert target.read_text().strip() == "approved words"
        # Usage as each reports it: Claude's usage_update with cost, Codex's without (context
        # tokens, priced at the run's prices), Gemini's prompt result's _meta.quota.
        assert first.prompt_tokens > 0 and first.estimated_turns == [], (first.prompt_tokens, first.estimated_turns)

        again = asyncio.create_task(harness.run(state.run_id, message="WRITE other.txt CONTENT no",
                                                wait_for_decision=0))
        await asyncio.wait_for(waiting(harness, state.run_id, other_than=asked), CAP_S)
        assert (await harness.decide(state.run_id, "reject", "use notes.md instead", by="alice")).ok
        second = (await asyncio.wait_for(again, CAP_S)).state
        trace = list(read_trace(tmp_path / "runs" / state.run_id / "trace.jsonl"))
    assert second.status is Status.COMPLETED, (second.status, second.error)
    assert not (workspace / "other.txt").exists()
    assert "use notes.md instead" in said_to_model(endpoint), "the operator's words reached the model"
    assert any(r["kind"] == "approval_required" and "approved words" in (r.get("diff") or "") for r in trace)
    assert [r["verdict"] for r in trace if r["kind"] == "approval_decision"] == ["approved", "rejected"]
    sessions = [r["session_id"] for r in trace if r["kind"] == "agent_session"]
    warnings = [r["text"] for r in trace if r["kind"] == "warning"]
    finishes = [r["finish_reason"] for r in trace if r["kind"] == "turn"]
    if name == "gemini" and sessions[0] != sessions[1]:
        # It advertises session/load and fails it ("No previous sessions found") unless it saved
        # the session before its process closed, which it does or not by its own timing: when
        # it fails, a new session, said in words; when it loads, no warning (the else branch).
        assert len(warnings) == 1 and "runs in a new session" in warnings[0], warnings
    else:  # the follow-up goes on in the agent's own session (Claude and Codex resume it)
        assert sessions[0] == sessions[1] and not warnings, warnings
    if name == "codex":  # it cancels its turn on a rejection: the run went on with the words all the same
        assert finishes[-2:] == ["cancelled", "end_turn"], finishes
    assert not alive_in(workspace), alive_in(workspace)


@pytest.mark.parametrize("name", ["claude", "codex", "gemini"])
async def test_stop_mid_stream_leaves_no_process(name: str, tmp_path: Path, place):
    workspace, home = place
    endpoint = ScriptedEndpoint(workspace=workspace)
    async with running_app(endpoint.app()) as url, Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        state = harness.create(agent(name, home, url, workspace), "HOLD on")
        running = asyncio.create_task(harness.run(state.run_id))
        await asyncio.wait_for(session_open(harness, state.run_id), CAP_S)
        await asyncio.wait_for(endpoint.holding.wait(), CAP_S)
        assert (await harness.stop(state.run_id, "enough", by="bob")).ok
        stopped = (await asyncio.wait_for(running, CAP_S)).state
    assert stopped.status is Status.INTERRUPTED
    assert stopped.interruption == Cancelled("enough", "bob")
    assert not alive_in(workspace), alive_in(workspace)


async def test_claude_after_a_stop_a_follow_up_gets_its_own_answer(tmp_path: Path, place):
    """Claude's trap: after a cancel, its *next* prompt returns ``end_turn`` at once while the
    cancelled turn runs on. Tether ends the agent with the stopped run, and the follow-up
    resumes the session in a new process: the follow-up's answer is its own."""
    workspace, home = place
    endpoint = ScriptedEndpoint(workspace=workspace)
    async with running_app(endpoint.app()) as url, Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        state = harness.create(agent("claude", home, url, workspace), "HOLD on")
        running = asyncio.create_task(harness.run(state.run_id))
        await asyncio.wait_for(session_open(harness, state.run_id), CAP_S)
        await asyncio.wait_for(endpoint.holding.wait(), CAP_S)
        assert (await harness.stop(state.run_id, "enough", by="bob")).ok
        assert (await asyncio.wait_for(running, CAP_S)).state.status is Status.INTERRUPTED
        asked = len(endpoint.requests)
        after = (await asyncio.wait_for(harness.run(state.run_id, message="what now?"), CAP_S)).state
        trace = list(read_trace(tmp_path / "runs" / state.run_id / "trace.jsonl"))
    assert after.status is Status.COMPLETED, after.error
    assert after.answer == PLAIN_ANSWER, after.answer
    assert len(endpoint.requests) > asked, "the follow-up's turn reached the model"
    sessions = [r["session_id"] for r in trace if r["kind"] == "agent_session"]
    assert len(sessions) == 2 and sessions[0] == sessions[1]
    assert not alive_in(workspace), alive_in(workspace)


@pytest.mark.parametrize("name", ["codex", "gemini"])
async def test_a_budget_is_crossed_on_usage_reported_without_cost(name: str, tmp_path: Path, place):
    """Codex reports tokens without cost (usage_update), Gemini only in its prompt result's
    ``_meta.quota``: both priced at the agent's price, and a budget crossed ends the run."""
    workspace, home = place
    endpoint = ScriptedEndpoint(workspace=workspace)
    async with running_app(endpoint.app()) as url, Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        coder = agent(name, home, url, workspace)
        priced = Agent(name=name, model="scripted", workspace=workspace, acp=coder.acp,
                       pricing=Pricing(1.0, 2.0, source="config"), limits=Limits(budget_usd=0.0000001))
        capped = (await asyncio.wait_for(harness.start(priced, "say something"), CAP_S)).state
    assert capped.status is Status.BUDGET_EXCEEDED, (capped.status, capped.error)
    assert capped.interruption == MaxBudget()
    assert capped.prompt_tokens > 0 and capped.cost_usd > 0
    assert not alive_in(workspace), alive_in(workspace)


MODELS = {"claude": "haiku", "codex": "gpt-5.4-mini", "gemini": None}
"""The agent file's ``model`` for each: Claude's and Codex's are among their config option's
models (chosen with ``session/set_config_option``); Gemini CLI lists no config options."""


@pytest.mark.parametrize("name", ["claude", "codex", "gemini"])
async def test_the_model_slash_commands_shell_output_and_a_restart_on_the_real_agent(name: str, tmp_path: Path, place):
    """The features docs/acp.md lists, on each real agent, in two runs of one agent file entry:
    its ``model`` chosen through the agent's config option (Gemini CLI lists none); its slash
    commands (``available_commands_update``) kept; a shell command's output and exit code, which
    Claude and Codex report in ``_meta.terminal_output`` (Gemini CLI reports neither); then its
    process killed between two turns (after a rejection, before the words go to it) and started
    again in its session, said in a warning: Claude and Codex by ``session/resume``, in the
    model chosen; Gemini CLI by ``session/load``, which it fails when it had not saved the
    session yet (then a new session)."""
    workspace, home = place
    endpoint = ScriptedEndpoint(workspace=workspace)
    pids: list[int] = []

    def kill_after_the_first_turn(event) -> None:
        if event.kind == "agent_session":
            pids.append(event.pid)
        elif event.kind == "turn" and event.turn == 1 and len(pids) == 1:
            os.killpg(pids[0], signal.SIGKILL)  # between turns: the rejection's words are next

    async with running_app(endpoint.app()) as url, Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        plain = agent(name, home, url, workspace)
        coder = Agent(name=name, model="scripted", workspace=workspace,
                      acp=dataclasses.replace(plain.acp, model=MODELS[name]))
        shell = (await asyncio.wait_for(harness.start(coder, "SHELL echo from-the-shell"), CAP_S)).state
        state = harness.create(coder, "WRITE hello.txt CONTENT no")
        running = asyncio.create_task(harness.run(state.run_id, wait_for_decision=0, sinks=[kill_after_the_first_turn]))
        await asyncio.wait_for(waiting(harness, state.run_id), CAP_S)
        assert (await harness.decide(state.run_id, "reject", "call it other.txt", by="alice")).ok
        restarted_run = (await asyncio.wait_for(running, CAP_S)).state
        shell_trace = list(read_trace(tmp_path / "runs" / shell.run_id / "trace.jsonl"))
        trace = list(read_trace(tmp_path / "runs" / state.run_id / "trace.jsonl"))
    models_asked = [body.get("model") for body in endpoint.requests if body.get("model")]

    assert shell.status is Status.COMPLETED, shell.error
    commands = [r["commands"] for r in shell_trace if r["kind"] == "agent_commands"]
    assert commands and all(c["name"] for c in commands[-1]), "its slash commands are kept"
    outputs = [r for r in shell_trace if r["kind"] == "tool_output"]
    if name == "gemini":  # no _meta.terminal_output: its shell call's result has no output
        assert outputs == [] and [r for r in shell_trace if r["kind"] == "tool_result"]
    else:  # the output as it came, then the exit (Codex's sandboxed shell needs bwrap: its code is its own)
        assert outputs and outputs[-1]["exited"] and outputs[-1]["exit_code"] is not None, outputs
        if name == "claude":
            assert "from-the-shell" in "".join(r["data"] or "" for r in outputs) and outputs[-1]["exit_code"] == 0

    assert restarted_run.status is Status.COMPLETED, (restarted_run.error, restarted_run.interruption, [(r["kind"], r.get("text") or r.get("finish_reason") or r.get("reason")) for r in trace])
    assert "call it other.txt" in said_to_model(endpoint)
    warnings = [r["text"] for r in trace if r["kind"] == "warning"]
    restarted = [w for w in warnings if "process had ended between turns (it was killed by signal 9): Tether "
                 f"started it again (pid {pids[1]})" in w]
    assert len(restarted) == 1, warnings
    if name == "gemini":
        assert restarted[0].endswith(("by session/load (it replayed its history)",
                                      "(without its memory of the earlier turns)")), restarted
        assert not [r for r in trace if r["kind"] == "config_options"]
    else:
        assert restarted[0].endswith("by session/resume"), restarted
        configs = [r["options"] for r in trace if r["kind"] == "config_options"]
        assert ("model", MODELS[name]) in [(o["id"], o["value"]) for o in configs[-1]], configs
        assert MODELS[name] in str(models_asked[-1]), models_asked  # after the restart too
    assert not alive_in(workspace), alive_in(workspace)

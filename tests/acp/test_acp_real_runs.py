"""Real ACP agents (OpenCode, Qwen Code; ``make agents``) as Tether runs, offline, against a
scripted endpoint on loopback: what an operator does with them, through the harness.

- a write rejected with words: the next request the model receives carries them;
- a follow-up, in a new agent process that loads the session: a write approved lands;
- Stop mid-stream: the run is ``interrupted`` and no process is left;
- a budget crossed: the turn is cancelled and the run ends ``budget_exceeded``;
- a file OpenCode writes itself outside its workspace, after Tether refused the write: a warning.

Without the agents (no npm) these skip with one reason; with ``CI`` set they fail.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tether.agents.agent import AcpCommand, Agent
from tether.harness import Harness
from tether.demo.provider.server import running_app
from tether.vocab.state import Cancelled, Limits, MaxBudget, Pricing, Status
from tether.store.trace import read_trace
from tether.demo.agents import DEMO
from tests.acp import installed as agents
from tests.acp.driving import session_open, waiting
from tests.acp.endpoint import DONE_ANSWER, ScriptedEndpoint
from tests.acp.procs import alive_in

CAP_S = 120.0


def real_agent(name: str, home: Path, base_url: str, workspace: Path, **kw) -> Agent:
    launch = agents.launch_opencode(home, base_url) if name == "opencode" else agents.launch_qwen(home, base_url)
    return Agent(name=name, model="scripted", acp=AcpCommand(tuple(launch.command), launch.env, 10.0),
                 workspace=workspace, **kw)


def said_to_model(endpoint: ScriptedEndpoint) -> str:
    return json.dumps([m.get("content") for body in endpoint.requests for m in body.get("messages") or []])


@pytest.fixture
def place(tmp_path: Path) -> tuple[Path, Path]:
    agents.require_agents()
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    home.mkdir()
    return workspace, home


# Each real path once (the ACP tour drives OpenCode's approval and Stop, Qwen Code's rejection,
# both in one console): here Qwen Code's follow-up through session/load, OpenCode's reported
# cost against a budget; the fake agent drives the rest.
@pytest.mark.parametrize("name", ["qwen"])
async def test_a_rejection_reaches_the_model_and_a_follow_up_writes(name: str, tmp_path: Path, place):
    workspace, home = place
    endpoint = ScriptedEndpoint()
    target = workspace / "hello.txt"
    async with running_app(endpoint.app()) as base_url, Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        # Qwen Code reports tokens, no cost: priced at the agent's price (a model nobody prices costs nothing)
        coder = real_agent(name, home, base_url, workspace, pricing=Pricing(1.0, 2.0, source="config"))
        state = harness.create(coder, f"WRITE {target} CONTENT first try")
        running = asyncio.create_task(harness.run(state.run_id, wait_for_decision=0))
        asked = await asyncio.wait_for(waiting(harness, state.run_id), CAP_S)
        assert "Allow" in asked.why or "allow" in asked.why
        assert (await harness.decide(state.run_id, "reject", "use notes.md instead", by="alice")).ok
        rejected = (await asyncio.wait_for(running, CAP_S)).state
        assert rejected.status is Status.COMPLETED, rejected.error
        assert not target.exists()
        assert "use notes.md instead" in said_to_model(endpoint), "the operator's words reached the model"

        # A follow-up: a new agent process, the same session loaded, a write allowed this time.
        again = asyncio.create_task(harness.run(state.run_id, message=f"WRITE {target} CONTENT second try",
                                                wait_for_decision=0))
        await asyncio.wait_for(waiting(harness, state.run_id, other_than=asked), CAP_S)
        assert (await harness.decide(state.run_id, "approve", by="alice")).ok
        final = (await asyncio.wait_for(again, CAP_S)).state
        trace = list(read_trace(tmp_path / "runs" / state.run_id / "trace.jsonl"))
    assert final.status is Status.COMPLETED, final.error
    assert target.read_text() == "second try"
    assert final.answer and DONE_ANSWER in final.answer
    sessions = [r for r in trace if r["kind"] == "agent_session"]
    assert len(sessions) == 2 and sessions[0]["session_id"] == sessions[1]["session_id"]
    assert [r["verdict"] for r in trace if r["kind"] == "approval_decision"] == ["rejected", "approved"]
    assert any(r["kind"] == "approval_required" and "second try" in (r.get("diff") or "") for r in trace)
    assert any(r["kind"] == "file_write" and r["path"] == str(target) for r in trace)
    assert final.prompt_tokens > 0 and final.cost_usd > 0
    assert not alive_in(workspace)


@pytest.mark.parametrize("name", ["opencode"])
async def test_a_file_the_agent_writes_itself_outside_its_workspace_is_a_warning(name: str, tmp_path: Path, place):
    """OpenCode does its own file I/O: Tether refuses its write outside the workspace, and it
    writes the file anyway. The trace says so in a warning after the call's result, and the
    call has one name and the input OpenCode reported (issue 37, items 2 and 14)."""
    workspace, home = place
    outside = tmp_path / "x" / "outside.txt"
    endpoint = ScriptedEndpoint()
    async with running_app(endpoint.app()) as base_url, Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        state = harness.create(real_agent(name, home, base_url, workspace), f"WRITE {outside} CONTENT escape attempt")
        running = asyncio.create_task(harness.run(state.run_id, wait_for_decision=0))
        folder = await asyncio.wait_for(waiting(harness, state.run_id), CAP_S)  # the folder outside, first
        assert (await harness.decide(state.run_id, "approve", by="alice")).ok
        edit = await asyncio.wait_for(waiting(harness, state.run_id, other_than=folder), CAP_S)
        assert (await harness.decide(state.run_id, "approve", by="alice")).ok
        final = (await asyncio.wait_for(running, CAP_S)).state
        trace = list(read_trace(tmp_path / "runs" / state.run_id / "trace.jsonl"))
    assert final.status is Status.COMPLETED, final.error
    assert outside.read_text() == "escape attempt", "OpenCode wrote it itself"
    kinds = [r["kind"] for r in trace]
    # OpenCode asks Tether to write before or after it reports the call done, by its own timing.
    assert max(kinds.index("file_write"), kinds.index("tool_result")) < kinds.index("warning") < kinds.index("turn")
    [refused] = [r for r in trace if r["kind"] == "file_write"]
    assert refused["refused"] and refused["path"] == str(outside)
    [start] = [r for r in trace if r["kind"] == "tool_start"]
    [result] = [r for r in trace if r["kind"] == "tool_result"]
    [warning] = [r for r in trace if r["kind"] == "warning"]
    assert result["ok"] and warning["call_id"] == result["call_id"] == start["call_id"]
    assert warning["path"] == str(outside)
    assert warning["text"].startswith(f"the agent wrote {outside} itself, outside the workspace {workspace}")
    # One name for the call, wherever it is named, and the input OpenCode reported after its start.
    assert {start["name"], result["name"], folder.tool_name, edit.tool_name} == {"write"}
    assert f"for {outside.parent}" in folder.why and f"for {outside}" in edit.why
    assert json.loads(start["args"]) == {"filePath": str(outside), "content": "escape attempt"}
    [call] = [c for m in final.messages for c in m.get("tool_calls") or ()]
    assert call["function"] == {"name": "write", "arguments": start["args"]}
    assert not alive_in(workspace)


@pytest.mark.parametrize("name", ["opencode"])
async def test_stop_mid_stream_and_a_budget_crossed(name: str, tmp_path: Path, place):
    workspace, home = place
    endpoint = ScriptedEndpoint()
    async with running_app(endpoint.app()) as base_url, Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        state = harness.create(real_agent(name, home, base_url, workspace), "HOLD on")
        running = asyncio.create_task(harness.run(state.run_id))
        await asyncio.wait_for(session_open(harness, state.run_id), CAP_S)
        await asyncio.wait_for(endpoint.holding.wait(), CAP_S)
        assert (await harness.stop(state.run_id, "enough", by="bob")).ok
        stopped = (await asyncio.wait_for(running, CAP_S)).state
        assert not alive_in(workspace), alive_in(workspace)

        budget = real_agent(name, home, base_url, workspace, limits=Limits(budget_usd=0.0000001))
        capped = (await asyncio.wait_for(harness.start(budget, "say something"), CAP_S)).state
    assert stopped.status is Status.INTERRUPTED
    assert stopped.interruption == Cancelled("enough", "bob")
    assert capped.status is Status.BUDGET_EXCEEDED, (capped.status, capped.error)
    assert capped.interruption == MaxBudget()
    assert not alive_in(workspace)


# The audit's escape ("Wave 4 · first", item 2): OpenCode, approved, wrote outside its workspace
# with its own file I/O. Sandboxed, the same approvals leave nothing outside; Qwen Code too.
@pytest.mark.parametrize("name", ["opencode", "qwen"])
async def test_a_sandboxed_real_agent_approved_to_write_outside_writes_nothing_there(name: str, tmp_path: Path,
                                                                                     place) -> None:
    workspace, home = place
    outside = tmp_path / "elsewhere" / "outside.txt"
    outside.parent.mkdir()
    endpoint = ScriptedEndpoint()
    async with running_app(endpoint.app()) as base_url, Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        agent = real_agent(name, home, base_url, workspace, sandbox="workspace")
        state = harness.create(agent, f"WRITE {outside} CONTENT escape attempt")
        running = asyncio.create_task(harness.run(state.run_id, wait_for_decision=0))
        asked = None
        while not running.done():  # approve everything it asks (an external folder, then the edit)
            ask = asyncio.create_task(waiting(harness, state.run_id, other_than=asked))
            await asyncio.wait({ask, running}, timeout=CAP_S, return_when=asyncio.FIRST_COMPLETED)
            if ask.done():
                asked = ask.result()
                assert (await harness.decide(state.run_id, "approve", by="alice")).ok
            else:
                ask.cancel()
        final = (await running).state
        trace = list(read_trace(tmp_path / "runs" / state.run_id / "trace.jsonl"))
    assert not outside.exists(), "the sandbox kept the write out"
    session = next(r for r in trace if r["kind"] == "agent_session")
    assert str(workspace) in session["sandbox"]["writable"]
    results = json.dumps([r for r in trace if r["kind"] in ("tool_result", "file_write")])
    assert "outside the workspace" in results, results  # Tether refused the fs request first
    if name == "opencode":  # which OpenCode then made itself, and the kernel refused: the run says so
        assert any(r["kind"] == "tool_result" and not r["ok"] and str(outside) in (r.get("error") or "")
                   for r in trace), results
        said = [r["text"] for r in trace if r["kind"] == "warning"]
        assert said == [f"Tether refused the write of {outside}, outside the workspace, and the agent's "
                        f"{session['sandbox']['backend']} sandbox kept it from writing the file itself: "
                        "nothing was written there"], said
    assert final.status is not Status.FAILED, final.error
    assert not alive_in(workspace)

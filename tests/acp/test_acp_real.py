"""tether.acp against the real agents ``make agents`` installs (OpenCode, Qwen Code), offline,
against a scripted endpoint on loopback: a write allowed through a permission request lands in
the workspace; a cancel mid-stream ends the turn ``cancelled`` and no process is left.

Without the agents (no npm) these skip with one reason; with ``CI`` set they fail.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from tether.acp import AcpSession
from tether.acp.events import (
    AcpEvent,
    AgentExited,
    FileWritten,
    OtherUpdate,
    PermissionAsked,
    TextChunk,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
    UsageReported,
)
from tether.provider.server import running_app

from tests.acp import agents
from tests.acp.endpoint import DONE_ANSWER, ScriptedEndpoint
from tests.acp.procs import alive_in, group_alive

CAP_S = 90.0  # a cold start of either agent took up to 8 s here with the machine busy
# The rawInput of each agent's permission request for a write (OpenCode sends a diff there,
# not the {filePath, content} of its tool_call_update).
WRITE_ARGS = {"opencode": {"filepath", "diff"}, "qwen": {"file_path", "content"}}
ALLOW_ONCE = {"opencode": "once", "qwen": "proceed_once"}


@pytest.mark.parametrize("agent", ["opencode", "qwen"])
async def test_a_real_agent_writes_when_allowed_and_stops_when_cancelled(agent: str, tmp_path: Path) -> None:
    agents.require_agents()
    endpoint = ScriptedEndpoint()
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    seen: list[AcpEvent] = []
    asked: list[PermissionAsked] = []

    def on_event(event: AcpEvent) -> None:
        seen.append(event)
        if isinstance(event, PermissionAsked):
            asked.append(event)
            option = event.request.option("allow_once")
            assert option is not None
            event.request.decide(option.option_id, tool_call_id=event.request.tool_call_id,
                                 args_hash=event.request.args_hash)

    async with running_app(endpoint.app()) as base_url:
        launch = agents.launch_opencode(home, base_url) if agent == "opencode" else agents.launch_qwen(home, base_url)
        started = time.monotonic()
        async with AcpSession(launch.command, workspace=workspace, env=launch.env, on_event=on_event,
                              init_timeout_s=CAP_S) as session:
            initialized = time.monotonic()
            await session.new_session()
            target = workspace / "hello.txt"
            turn_started = time.monotonic()
            ended = await asyncio.wait_for(session.prompt(f"WRITE {target} CONTENT hello from {agent}"), CAP_S)
            wrote_in = time.monotonic() - turn_started

            assert ended == TurnEnded("end_turn")
            assert target.read_text() == f"hello from {agent}"
            assert [e for e in seen if isinstance(e, FileWritten)] == [FileWritten(str(target), len(target.read_text()))]
            request = asked[0].request
            assert {o.kind for o in request.options} >= {"allow_once", "allow_always", "reject_once"}
            assert [o.option_id for o in request.options if o.kind == "allow_once"] == [ALLOW_ONCE[agent]]
            assert request.kind == "edit" and request.diffs and request.diffs[0].new_text == f"hello from {agent}"
            assert set(request.raw_input) == WRITE_ARGS[agent]
            tools = [e for e in seen if isinstance(e, ToolCallStarted | ToolCallUpdated)]
            assert tools[-1].status == "completed"
            assert DONE_ANSWER in "".join(e.text for e in seen if isinstance(e, TextChunk))
            assert any(isinstance(e, UsageReported) and (e.total_tokens or e.cost_amount) for e in seen)

            stream = asyncio.create_task(session.prompt("HOLD on"))
            await asyncio.wait_for(endpoint.holding.wait(), CAP_S)
            cancel_started = time.monotonic()
            killed = await session.cancel(grace_s=10.0)
            cancelled = await asyncio.wait_for(stream, CAP_S)
            cancel_took = time.monotonic() - cancel_started
            assert (cancelled, killed) == (TurnEnded("cancelled"), False)
            pid = session.pid
            if agent == "qwen":  # its first update is a frame of ~560 KB: it arrived whole
                assert OtherUpdate("available_commands_update") in seen
        closed_in = time.monotonic() - cancel_started - cancel_took

    assert pid is not None and not group_alive(pid)
    assert not alive_in(workspace), alive_in(workspace)
    assert [e.expected for e in seen if isinstance(e, AgentExited)] == [True]
    print(f"\n{agent}: initialize {initialized - started:.2f} s, write turn {wrote_in:.2f} s, "
          f"cancel mid-stream {cancel_took * 1000:.0f} ms, close {closed_in:.2f} s, "
          f"{len(endpoint.requests)} model requests")

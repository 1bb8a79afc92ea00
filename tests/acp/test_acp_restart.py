"""A dead agent started again: the fake agent's process is killed between two turns of a run
(after a rejection, before its words go to the agent as the next prompt), and the run goes on
in a new process, in its session, by ``session/resume`` (``sessions`` mode) or ``session/load``
(``loads`` mode); the run's record says so in words, and the next turn is answered."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from tether.agents.agent import AcpCommand, Agent
from tether.demo.agents import DEMO
from tether.harness import Harness
from tether.observe.trace import read_trace
from tether.run.state import Status
from tests.acp.conftest import fake_agent
from tests.acp.driving import waiting
from tests.acp.procs import alive_in


@pytest.mark.parametrize(("mode", "how"), [("sessions", "by session/resume"),
                                           ("loads", "by session/load (it replayed its history)")])
async def test_an_agent_killed_between_turns_is_started_again_in_its_session(tmp_path: Path, acp_workspace: Path,
                                                                             mode: str, how: str):
    env = {"FAKE_AGENT_LOG": str(tmp_path / "agent.log")}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    agent = Agent(name="fake", model="acp:fake", workspace=acp_workspace,
                  acp=AcpCommand(tuple(fake_agent(mode)), env, 5.0))
    pids: list[int] = []

    def kill_after_the_first_turn(event) -> None:
        if event.kind == "agent_session":
            pids.append(event.pid)
        elif event.kind == "turn" and event.turn == 1:
            os.killpg(pids[0], signal.SIGKILL)  # between turns: the rejection's words are next

    async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        state = harness.create(agent, "write the file")
        running = asyncio.create_task(harness.run(state.run_id, wait_for_decision=0,
                                                  sinks=[kill_after_the_first_turn]))
        first = await waiting(harness, state.run_id)
        assert (await harness.decide(state.run_id, "reject", "call it other.txt", by="alice")).ok
        await waiting(harness, state.run_id, other_than=first)  # the second turn asks again, in a new process
        assert (await harness.decide(state.run_id, "approve", by="alice")).ok
        final = (await running).state
        trace = list(read_trace(tmp_path / "runs" / state.run_id / "trace.jsonl"))
    assert final.status is Status.COMPLETED, final.error
    warnings = [r["text"] for r in trace if r["kind"] == "warning"]
    assert len(pids) == 2 and pids[0] != pids[1]
    assert warnings == [f"the agent fake-agent's process had ended between turns (it was killed by signal 9): "
                        f"Tether started it again (pid {pids[1]}) and it went on in its session fake-1 {how}"], warnings
    assert [m["content"] for m in final.messages if m["role"] == "user"] == [
        "write the file", "The operator alice declined this call: call it other.txt. Nothing was done."]
    assert final.messages[-1] == {"role": "assistant", "content": "Done."}
    assert not any("(replayed)" in str(m.get("content")) for m in final.messages), "the replay is not taken twice"
    assert (acp_workspace / "out.txt").exists()
    assert not alive_in(acp_workspace)

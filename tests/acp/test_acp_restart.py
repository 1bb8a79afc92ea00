"""A dead agent started again: the fake agent's process is killed between two turns of a run
(after a rejection, before its words go to the agent as the next prompt), and the run goes on
in a new process, in its session, by ``session/resume`` (``sessions`` mode) or ``session/load``
(``loads`` mode); the run's record says so in words, and the next turn is answered."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tether.agents.agent import AcpCommand, Agent
from tether.demo.agents import DEMO
from tether.harness import Harness
from tether.store.trace import read_trace
from tether.vocab.state import Status
from tests.acp.conftest import fake_agent
from tests.acp.driving import waiting
from tests.acp.procs import alive_in
from tests.support import cli_here


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


@pytest.mark.parametrize(("killed", "died"), [
    ("tether", ("the process that drove the run ended mid-turn, and the agent with it", "")),
    ("agent", ("the agent ", " was killed by signal 9 during session/prompt")),  # the agent named by its command
])
def test_a_dead_agent_is_started_again_by_a_follow_up_from_another_tether_process(tmp_path: Path,
                                                                                  acp_workspace: Path, killed, died):
    """A ``tether run`` process holds a run while its agent asks; then it is SIGKILLed (the agent
    dies with it), or the agent alone is. A ``tether resume RUN --message`` in a new process
    starts the agent again, goes on in its session by ``session/resume``, and the run says so."""
    log = tmp_path / "agent.log"
    config = tmp_path / "tether.toml"
    config.write_text(f'[agents.fake]\nacp = {json.dumps(fake_agent("sessions"))}\nworkspace = "{acp_workspace}"\n'
                      f'env = {{ PYTHONPATH = "{os.environ.get("PYTHONPATH", "")}", FAKE_AGENT_LOG = "{log}" }}\n')
    env = {**os.environ, "TETHER_HOME": str(tmp_path), "TETHER_CONFIG": str(config)}
    tether = [sys.executable, "-m", "tether.tui.cli"]
    trace = tmp_path / "runs" / "k1" / "trace.jsonl"
    run = subprocess.Popen([*tether, "run", "--agent", "fake", "--prompt", "write it", "--run-id", "k1",
                            "--wait-for-decision"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        async def until_waiting() -> None:
            async with Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
                await waiting(harness, "k1")
        asyncio.run(until_waiting())
        if killed == "tether":
            run.kill()
        else:
            [first] = [r["pid"] for r in read_trace(trace) if r["kind"] == "agent_session"]
            os.killpg(first, signal.SIGKILL)
        run.wait(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait(timeout=30)
    for _ in range(200):
        if not alive_in(acp_workspace):
            break
        time.sleep(0.05)
    assert not alive_in(acp_workspace), "the agent is dead"
    follow = subprocess.run([*tether, "resume", "k1", "--message", "QUIET go on", "--json"], env=env,
                            capture_output=True, text=True, timeout=120)
    assert follow.returncode == 0, (follow.stdout, follow.stderr)
    assert json.loads(follow.stdout)["answer"] == "Noted in fake-1."
    records = list(read_trace(trace))
    again = [r["pid"] for r in records if r["kind"] == "agent_session"][-1]
    [said] = [r["text"] for r in records if r["kind"] == "warning"]
    assert said.startswith(f"the agent fake-agent had died with the run's last turn ({died[0]}") and said.endswith(
        f"{died[1]}): Tether started it again (pid {again}) and it went on in its session fake-1 by session/resume"), \
        said
    assert [(e["method"], e.get("session_id")) for e in map(json.loads, log.read_text().splitlines())
            if e["method"] in ("session/new", "session/resume")] == [("session/new", "fake-1"),
                                                                     ("session/resume", "fake-1")]
    shown = cli_here("show", "k1", env=env)
    assert said in " ".join(shown.stdout.split()), shown.stdout
    assert not alive_in(acp_workspace)

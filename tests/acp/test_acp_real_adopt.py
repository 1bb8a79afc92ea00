"""``session/list`` adoption on the real agents (``make agents``), offline against the coding
endpoint: a first Tether run leaves a session in the agent's own store; the agent lists it in
its workspace (:func:`tether.acp.offer.agent_offer`, as New run and ``tether agents sessions``
ask); a second run adopts it, and the model's next request carries the first run's words,
which only the adopted session has. One short path per agent.

Without the agents these skip with one reason; with ``CI`` set they fail.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from tether.acp.offer import agent_offer
from tether.demo.agents import DEMO
from tether.demo.provider.coding import ScriptedEndpoint
from tether.demo.provider.server import running_app
from tether.harness import Harness
from tether.store.trace import read_trace
from tether.vocab.state import Status
from tests.acp.procs import alive_in
from tests.acp.test_acp_claude_codex_gemini import CAP_S, agent, place  # noqa: F401 (place: a fixture)


@pytest.mark.parametrize("name", ["claude", "codex"])
async def test_a_session_the_real_agent_lists_is_adopted_as_a_run(name: str, tmp_path, place):
    workspace, home = place
    endpoint = ScriptedEndpoint(workspace=workspace)
    async with running_app(endpoint.app()) as url, Harness(tmp_path / "runs", agent_sets=(DEMO,)) as harness:
        coder = agent(name, home, url, workspace)
        first = (await asyncio.wait_for(harness.start(coder, "keep the word marigold in mind"), CAP_S)).state
        assert first.status is Status.COMPLETED, first.error
        [made] = [r["session_id"] for r in read_trace(tmp_path / "runs" / first.run_id / "trace.jsonl")
                  if r["kind"] == "agent_session"]
        offer = await asyncio.wait_for(agent_offer(coder, choices=False), CAP_S)
        assert offer.lists and offer.adopts == "session/resume", offer  # both advertise list and resume
        assert made in [s.get("sessionId") for s in offer.sessions], offer.sessions
        second = (await asyncio.wait_for(harness.start(coder, "which word was it", adopt=made), CAP_S)).state
        trace = list(read_trace(tmp_path / "runs" / second.run_id / "trace.jsonl"))
    assert second.status is Status.COMPLETED, second.error
    [adopted] = [r for r in trace if r["kind"] == "agent_session"]
    assert adopted["session_id"] == made and adopted["adopted"] == offer.adopts
    asked = [json.dumps(r) for r in endpoint.requests if "which word was it" in json.dumps(r)]
    assert asked and "marigold" in asked[-1], "the model was sent the adopted session's earlier turn"
    assert not alive_in(workspace), alive_in(workspace)

"""The console streams a real endpoint's reply: the run's last assistant message grows on
screen before the turn is over, and the cost meter shows the turn's speed."""

from __future__ import annotations

from pathlib import Path

from tether.agents.agent import Agent
from tether.harness import Harness
from tether.demo.provider.server import running_app
from tether.vocab.state import Status
from tether.demo.agents import DEMO
from tests.support import SIZE, SlowStream, WORDS, finish, settle, still_console, wait_for



async def test_the_reply_grows_in_the_transcript_as_it_streams(tmp_path: Path):
    server = SlowStream(hold_after=3)  # the endpoint sends three words, then holds the stream
    async with running_app(server.app()) as url:
        harness = Harness(tmp_path / "runs", stream="auto", agent_sets=(DEMO,))
        app = still_console(harness=harness)
        async with app.run_test(size=SIZE) as pilot:
            agent = Agent("streamer", "m", base_url=url, tools=["tether:list_files"], workspace=tmp_path)
            rid = harness.create(agent, "count").run_id
            app.states[rid] = harness.load(rid)
            app.start_run(rid)
            app.select(rid)
            partial = "".join(WORDS[:3])
            await wait_for(pilot, lambda: partial in app.transcript_view.text, "the first words on screen")
            assert "".join(WORDS) not in app.transcript_view.text  # the rest is not there yet
            assert app.states[rid].turns == 0  # the turn is not over: the text came as it streamed
            server.release.set()
            await settle(pilot, app, "the run to finish")
            assert app.states[rid].status is Status.COMPLETED
            assert app.transcript_view.text.count("".join(WORDS)) == 1  # the answer, once
            meter = str(app.console_screen.query_one("#cost-numbers").render())
            assert "first token" in meter and "tok/s" in meter
            await finish(pilot, app)
        await harness.aclose()


async def test_the_embedded_demo_does_not_stream_by_default(tmp_path: Path):
    harness = Harness(tmp_path / "runs", tmp_path / "ws", stream="auto", agent_sets=(DEMO,))
    assert harness.client._stream is False
    agent = Agent("real", "m", base_url="http://127.0.0.1:9/v1", tools=["tether:list_files"], workspace=tmp_path)
    assert harness._client_for(agent, None)._stream is True
    await harness.aclose()

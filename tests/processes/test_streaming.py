"""Streaming: the reply's text reaches views as it arrives, the trace keeps one line a turn,
and Stop closes a stream at once."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path


from tether.agents.agent import Agent
from tether.vocab.cancel import CancelSignal
from tether.vocab.events import TextDelta
from tether.harness import Harness
from tether.demo.provider.server import running_app
from tether.vocab.state import Cancelled, Status
from tether.store.trace import read_trace
from tether.demo.agents import DEMO
from tests.conftest import Recorder
from tests.support import WORDS, SlowStream


def agent(url: str, tmp: Path) -> Agent:
    return Agent("streamer", "m", base_url=url, tools=["tether:list_files"], workspace=tmp)


async def test_text_arrives_in_pieces_and_the_trace_keeps_one_turn_line(tmp_path: Path):
    recorder = Recorder()
    server = SlowStream()
    async with running_app(server.app()) as url:
        async with Harness(tmp_path / "runs", stream=True, agent_sets=(DEMO,)) as h:
            out = await h.start(agent(url, tmp_path), "count", sinks=[recorder])
    assert out.state.status is Status.COMPLETED and out.state.answer == "".join(WORDS)
    deltas = [e.text for e in recorder.events if isinstance(e, TextDelta)]
    assert deltas == WORDS
    # Each piece was seen before the turn ended: the deltas come before the Turn event.
    kinds = [e.kind for e in recorder.events]
    assert kinds.index("turn") > max(i for i, k in enumerate(kinds) if k == "text_delta")
    trace = list(read_trace(tmp_path / "runs" / out.state.run_id / "trace.jsonl"))
    assert not [r for r in trace if r["kind"] == "text_delta"]
    (turn,) = [r for r in trace if r["kind"] == "turn"]
    assert turn["completion_tokens"] == 5 and turn["ttft_ms"] > 0 and turn["tokens_per_s"] > 0


async def test_stop_during_a_stream_closes_it_at_once(tmp_path: Path):
    recorder = Recorder()
    server = SlowStream(hold_after=2)
    signal = CancelSignal()
    async with running_app(server.app()) as url:
        async with Harness(tmp_path / "runs", stream=True, agent_sets=(DEMO,)) as h:
            running = asyncio.create_task(h.start(agent(url, tmp_path), "count", sinks=[recorder], signal=signal))
            await recorder.wait_for(lambda e: isinstance(e, TextDelta) and e.text == WORDS[1])
            signal.cancel("operator pressed Stop")
            out = await running
            await asyncio.wait_for(server.closed_early.wait(), 10)  # the server saw the client go
    assert out.state.status is Status.INTERRUPTED and out.state.interruption == Cancelled("operator pressed Stop")
    assert server.sent == WORDS[:2] and out.state.turns == 0  # the cut reply was never paid for
    server.release.set()


async def test_cli_prints_the_stream_and_json_stays_one_object(tmp_path: Path):
    server = SlowStream()
    async with running_app(server.app()) as url:
        async def tether(*args: str) -> tuple[int, str]:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "tether.tui.cli", "run", "--base-url", url, "--model", "m", "--prompt", "count",
                "--stream", "--runs-dir", str(tmp_path / "runs"), "--workspace", str(tmp_path), *args,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ})
            out, err = await proc.communicate()
            assert not err, err
            return proc.returncode or 0, out.decode()

        code, human = await tether()
        assert code == 0
        assert human.splitlines()[0] == "".join(WORDS)  # the reply as it streamed, then the summary
        code, text = await tether("--json")
    assert code == 0 and json.loads(text)["answer"] == "".join(WORDS)

"""A streamed reply on the console: from a delta leaving the endpoint to it being on screen.

A streaming endpoint on loopback (in its own process, so its timing is not the console's)
sends a reply in pieces, one every ``GAP_S``, each carrying a marker, and records the wall
time at which it wrote each piece. The console, driven headlessly as ``tether`` runs it,
shows the run; a hook on its transcript view notes when a piece first reaches the view,
and the time of the screen refresh that follows it is the piece's "on screen" time. The
figure is the difference of the two wall clocks (one machine, one clock).

Run: ``.venv/bin/python -m tests.benchmarks.bench_stream``
"""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tether.agents.agent import Agent
from tether.harness import Harness
from tether.models.processes import free_port, stop_process
from tether.tui.app import TetherApp
from tether.tui.state.options import ConsoleOptions
from tether.demo.agents import DEMO

PIECES = 60
GAP_S = 0.05
TRIALS = 3

SERVER = r'''
import asyncio, json, sys, time
from starlette.applications import Starlette
from starlette.responses import StreamingResponse
from starlette.routing import Route
import uvicorn

PIECES, GAP, LOG = int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]

def chunk(delta, finish=None, usage=None):
    body = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n"

async def completions(request):
    async def events():
        sent = []
        yield chunk({"role": "assistant"})
        for i in range(PIECES):
            await asyncio.sleep(GAP)
            sent.append(time.time())
            yield chunk({"content": f"<{i}> "})
        yield chunk({}, "stop")
        yield chunk({}, None, {"prompt_tokens": 10, "completion_tokens": PIECES, "total_tokens": 10 + PIECES})
        yield "data: [DONE]\n\n"
        with open(LOG, "a") as f:
            f.write(json.dumps(sent) + "\n")
    return StreamingResponse(events(), media_type="text/event-stream")

uvicorn.run(Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])]),
            host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
'''


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))]


async def _trial(url: str, tmp: Path, log: Path, index: int) -> list[float]:
    harness = Harness(tmp / "runs", stream="auto", agent_sets=(DEMO,))
    app = TetherApp(ConsoleOptions(timings=False), harness=harness)
    shown: dict[int, float] = {}
    async with app.run_test(size=(160, 45)) as pilot:
        view = app.transcript_view
        show = view.show

        def watched_show(state, footer=None, *rest, **kw):  # the benchmark's hook, not the console's
            show(state, footer, *rest, **kw)
            text = footer.plain if footer is not None else ""
            for i in range(PIECES):
                if i not in shown and f"<{i}>" in text:
                    app.call_after_refresh(lambda i=i: shown.setdefault(i, time.time()))

        view.show = watched_show  # type: ignore[method-assign]
        agent = Agent("streamer", "m", base_url=url, tools=["tether:list_files"], workspace=tmp)
        rid = harness.create(agent, "count", run_id=f"stream-{index}").run_id
        app.states[rid] = harness.load(rid)
        app.start_run(rid)
        app.select(rid)
        deadline = time.monotonic() + 60
        while app.active and time.monotonic() < deadline:
            await pilot.pause(0.02)
        await app.stop_all()
    await harness.aclose()
    sent = json.loads(log.read_text().splitlines()[index])
    return [(shown[i] - sent[i]) * 1000 for i in range(PIECES) if i in shown]


async def _run() -> list[float]:
    with tempfile.TemporaryDirectory(prefix="tether-stream-") as tmp:
        tmp_path = Path(tmp)
        log = tmp_path / "sent.jsonl"
        port = free_port()
        server = subprocess.Popen([sys.executable, "-c", SERVER, str(port), str(PIECES), str(GAP_S), str(log)])
        try:
            url = f"http://127.0.0.1:{port}/v1"
            for _ in range(100):  # until it listens
                try:
                    with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                        break
                except OSError:
                    await asyncio.sleep(0.05)
            delays: list[float] = []
            for index in range(TRIALS):
                delays += await _trial(url, tmp_path, log, index)
            return delays
        finally:
            stop_process(server)


def main() -> None:
    delays = asyncio.run(_run())
    print(f"streamed reply on the console, a delta leaving the endpoint -> on screen: {len(delays)} pieces "
          f"({TRIALS} replies of {PIECES}, one piece every {GAP_S * 1000:.0f} ms): median {statistics.median(delays):.1f} ms, "
          f"p99 {percentile(delays, 99):.1f} ms, max {max(delays):.1f} ms")


if __name__ == "__main__":
    main()

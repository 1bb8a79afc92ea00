"""How the provider's request time grows with the transcript.

Every request resends the whole transcript and the provider recounts its tokens, so
without the per-message cache a run's cost per request would grow with its length.
This measures a request at 10, 100 and 1,000 messages the way a run sees it: the
previous request (the same transcript minus the two newest messages) has already been
served, so only the new messages are uncounted. Times are in-process (httpx's ASGI
transport, no socket), medians of several repetitions, each on a transcript the
provider has not seen before. It then times counting alone, with and without a cache.

Run: ``.venv/bin/python -m tests.benchmarks.bench_provider``
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import httpx

from tether.demo.provider import create_app
from tether.models.tokens import TokenCounter

SIZES = (10, 100, 1000)
REPETITIONS = 15
NEW_PER_REQUEST = 2  # an assistant tool call and its result


def transcript(size: int, run: int) -> list[dict[str, Any]]:
    """A runaway-style transcript of exactly ``size`` messages, unique to ``run``."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": f"Which file mentions a timeout? (run {run})"},
    ]
    turn = 0
    while len(messages) < size:
        call_id = f"c{turn}"
        call = {"id": call_id, "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        content = f"run {run}, turn {turn}:\naccess.log\nerrors.log\nnotes.txt"
        messages.append({"role": "tool", "tool_call_id": call_id, "content": content})
        turn += 1
    return messages


async def request_ms(http: httpx.AsyncClient, messages: list[dict[str, Any]]) -> float:
    body = json.dumps({"model": "runaway", "messages": messages}).encode()
    start = time.perf_counter()
    response = await http.post("/chat/completions", content=body, headers={"Content-Type": "application/json"})
    elapsed = time.perf_counter() - start
    response.raise_for_status()
    return elapsed * 1000


async def warm_request_ms(http: httpx.AsyncClient, size: int, run: int) -> float:
    messages = transcript(size, run)
    await request_ms(http, messages[:-NEW_PER_REQUEST])  # the previous turn's request
    return await request_ms(http, messages)


def timed_ms(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def counting_ms(size: int, first_run: int) -> tuple[float, float]:
    """Median time to count a prompt with a fresh counter, and with one that has seen
    all but the newest messages."""
    cold, warm = [], []
    for run in range(first_run, first_run + REPETITIONS):
        messages = transcript(size, run)
        cold_counter = TokenCounter()
        cold.append(timed_ms(lambda: cold_counter.prompt_tokens(messages)))
        warm_counter = TokenCounter()
        warm_counter.prompt_tokens(messages[:-NEW_PER_REQUEST])
        warm.append(timed_ms(lambda: warm_counter.prompt_tokens(messages)))
    return statistics.median(cold), statistics.median(warm)


async def request_medians() -> dict[int, float]:
    transport = httpx.ASGITransport(app=create_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://tether/v1") as http:
        await request_ms(http, transcript(10, run=-1))  # load the encoding before timing
        return {
            size: statistics.median([await warm_request_ms(http, size, run) for run in range(REPETITIONS)])
            for size in SIZES
        }


def main() -> None:
    medians = asyncio.run(request_medians())
    base = medians[SIZES[0]]
    print(f"Provider request time, in-process, warm cache ({NEW_PER_REQUEST} new messages per request), "
          f"median of {REPETITIONS}:")
    print(f"  {'messages':>8}  {'ms':>8}  {'ratio to 10':>11}")
    for size, ms in medians.items():
        print(f"  {size:>8}  {ms:>8.2f}  {ms / base:>11.1f}")

    size = SIZES[-1]
    cold, warm = counting_ms(size, first_run=REPETITIONS)
    print(f"Prompt counting at {size} messages, median of {REPETITIONS}:")
    print(f"  without cache (fresh counter):  {cold:8.2f} ms")
    print(f"  with cache ({NEW_PER_REQUEST} new messages):     {warm:8.2f} ms  ({cold / warm:.0f}x faster)")


if __name__ == "__main__":
    main()

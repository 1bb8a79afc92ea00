"""What a step's save, an operation's open, and the harness's time per turn cost on
PostgreSQL, beside the file store measured in the same process.

``python -m tests.benchmarks.bench_pgstore``: starts its own servers (tests/pg.py), one
with fsync off (as the tests run it) and one durable (fsync on, the default), on loopback.
A "step" is what a plan run's turn saves: one ~600-byte message, the header, two trace
lines. Medians of 5 rounds of 200 saves; open+release: medians of 5 rounds of 20.

Harness time: a run's wall time minus the provider time its turns report (the embedded
scripted provider), for a 3-turn ``plan`` run (median of 30), and per turn for ``runaway``
runs capped at 10 turns (median of 20) and at 1,000 turns (median of 3).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tether.vocab.events import ToolResult, Turn
from tether.harness import Harness
from tether.store.postgres.store import PgStore
from tether.vocab.state import Limits, RunState
from tether.store.files.store import RunStore
from tether.demo.agents import DEMO
from tests import pg

SAVES = 200
OPENS = 20
ROUNDS = 5
TEXT = "The file timeout.log says: connection timed out after 30 s. " * 10


def _steps(store, run_id: str) -> float:
    store.create(RunState(run_id=run_id, model="plan", messages=[{"role": "user", "content": "q"}]))
    state, handle = store.open(run_id)
    trace = handle.trace()
    try:
        started = time.perf_counter()
        for i in range(SAVES):
            state.messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": TEXT})
            state.turns += 1
            state.per_turn_prompt_tokens.append(100 + i)
            trace.write(Turn(run_id=run_id, turn=state.turns, prompt_tokens=100, completion_tokens=10,
                             total_tokens=110, cost_usd=0.0, finish_reason="tool_calls", provider_ms=1.0))
            trace.write(ToolResult(run_id=run_id, call_id=f"c{i}", name="read_file", ms=1.0, ok=True))
            handle.save(state)
        return (time.perf_counter() - started) / SAVES * 1e6
    finally:
        trace.close()
        handle.release()


def _opens(store, run_id: str) -> float:
    started = time.perf_counter()
    for _ in range(OPENS):
        _, handle = store.open(run_id)
        handle.release()
    return (time.perf_counter() - started) / OPENS * 1e3


async def _overheads(store: Any, workspace: Path, scenario: str, turns: int | None, runs: int) -> list[float]:
    """Each run's harness time in ms: its wall time minus its turns' provider time."""
    provider: dict[str, float] = {}

    def sink(event: Any) -> None:
        if isinstance(event, Turn):
            provider[event.run_id] = provider.get(event.run_id, 0.0) + (event.provider_ms or 0.0)

    out = []
    async with Harness(workspace=workspace, store=store, sinks=[sink], agent_sets=(DEMO,)) as harness:
        limits = Limits(max_turns=turns) if turns is not None else None
        for i in range(runs + 1):  # the first warms up (the control channel, the rank file)
            state = await asyncio.to_thread(harness.new_run, scenario, limits=limits)
            outcome = await harness.run(state.run_id)
            if i:
                out.append(outcome.ms - provider.get(state.run_id, 0.0))
    return out


def harness_times(store: Any, workspace: Path) -> dict[str, float]:
    """The harness's time: a 3-turn plan run (ms), and per turn at 10 and 1,000 turns (ms)."""
    plan = asyncio.run(_overheads(store, workspace, "plan", None, 30))
    ten = asyncio.run(_overheads(store, workspace, "runaway", 10, 20))
    thousand = asyncio.run(_overheads(store, workspace, "runaway", 1000, 3))
    return {"plan run": statistics.median(plan), "per turn at 10": statistics.median(ten) / 10,
            "per turn at 1,000": statistics.median(thousand) / 1000}


def measure(name: str, store, workspace: Path, baseline: dict[str, float] | None = None) -> dict[str, float]:
    saves = [_steps(store, f"{name}-{r}") for r in range(ROUNDS)]
    opens = [_opens(store, f"{name}-0") for _ in range(ROUNDS)]
    print(f"{name:<28} save {statistics.median(saves):8.1f} µs   open+release {statistics.median(opens):6.2f} ms")
    times = harness_times(store, workspace)
    for what, ms in times.items():
        ratio = f"  ({ms / baseline[what]:.1f}× the file store)" if baseline else ""
        print(f"{'':<28} harness time, {what:<18} {ms:7.3f} ms{ratio}")
    return times


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        baseline = measure("file store", RunStore(Path(tmp) / "runs"), Path(tmp) / "ws")
        for durable in (False, True):
            try:
                server = pg.start(durable=durable)
            except pg.PgUnavailable as exc:
                print(f"postgresql: not measured ({exc})")
                return
            try:
                store = PgStore(server.url)
                measure(f"postgresql, fsync {'on' if durable else 'off'}", store, Path(tmp) / "ws", baseline)
                store.close()
            finally:
                server.stop()


if __name__ == "__main__":
    main()

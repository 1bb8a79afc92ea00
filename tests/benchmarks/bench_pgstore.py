"""What a step's save and an operation's open cost on PostgreSQL, beside the file store.

``python -m tests.benchmarks.bench_pgstore``: starts its own servers (tests/pg.py), one
with fsync off (as the tests run it) and one durable (fsync on, the default), on loopback.
A "step" is what a plan run's turn saves: one ~600-byte message, the header, two trace
lines. Medians of 5 rounds of 200 saves; open+release: medians of 5 rounds of 20.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from tether.events import ToolResult, Turn
from tether.pgstore import PgStore
from tether.state import RunState
from tether.store import RunStore
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


def measure(name: str, store) -> None:
    saves = [_steps(store, f"{name}-{r}") for r in range(ROUNDS)]
    opens = [_opens(store, f"{name}-0") for _ in range(ROUNDS)]
    print(f"{name:<28} save {statistics.median(saves):8.1f} µs   open+release {statistics.median(opens):6.2f} ms")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        measure("file store", RunStore(Path(tmp) / "runs"))
    for durable in (False, True):
        server = pg.start(durable=durable)
        try:
            store = PgStore(server.url)
            measure(f"postgresql, fsync {'on' if durable else 'off'}", store)
            store.close()
        finally:
            server.stop()


if __name__ == "__main__":
    main()

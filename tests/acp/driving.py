"""Driving ACP runs in tests: wait for what a console would see on the store, never sleep
for it."""

from __future__ import annotations

import asyncio
import contextlib

from tether.harness import Harness
from tether.vocab.state import NeedsApproval, StateError
from tether.store.trace import read_trace


async def waiting(harness: Harness, run_id: str, *, other_than: NeedsApproval | None = None) -> NeedsApproval:
    """The run's pending approval, once the agent has asked (read from the store, as any
    console would); with ``other_than``, a later one than that."""
    for _ in range(1800):
        with contextlib.suppress(StateError):  # another process may not have made it yet
            state = harness.store.load(run_id)
            if isinstance(state.interruption, NeedsApproval) and state.interruption != other_than:
                return state.interruption
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id} never waited for approval")


def kinds(harness: Harness, run_id: str) -> list[str]:
    path = harness.store.root / run_id / "trace.jsonl"
    return [record["kind"] for record in read_trace(path)] if path.exists() else []


async def session_open(harness: Harness, run_id: str) -> None:
    """Once the agent has its session (its trace says so), and its turn has begun."""
    for _ in range(600):
        if "agent_session" in kinds(harness, run_id):
            await asyncio.sleep(0.2)  # the prompt is on its way; the agent streams
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"run {run_id}'s agent never opened a session")

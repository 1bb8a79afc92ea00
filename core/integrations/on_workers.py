"""Paused openai-agents runs on the worker queue (``tether worker``, :mod:`tether.workers`).

An openai-agents run whose agent was given by reference saves the SDK's paused ``RunState``
with the run while a call waits for a decision (:mod:`tether.integrations.openai_agents`).
When its program is gone and a live worker serves the store, a decision does not run the rest of
it in the deciding process: the run goes on :data:`QUEUE`, which every worker takes from
(:func:`tether.workers.decide.enqueue_paused`), and the decision goes to its workflow like any
worker run's (:func:`tether.workers.decide.decide`). The worker that takes it then records the
decision and goes on from the saved state (:func:`operation`), and a worker that dies meanwhile
leaves it to the next one, as for Tether's own runs. This module is below the workers: it
imports none of them.

A worker must import the agent's reference (its module on the worker's path) and the SDK;
one that cannot leaves the run waiting, with a note in its trace. A program's run that is
not paused (its loop was running when its program died) cannot be rebuilt by anyone: a
worker leaves it as it is.

Nothing here imports the SDK until a worker goes on with a run.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tether.agents.agent import resolve_ref
from tether.integrations._common import Tracker
from tether.store.protocol import call
from tether.vocab.state import NeedsApproval, RunState, StateError

QUEUE = "tether-programs"
"""The queue of the paused program runs; every worker listens to it."""
SAVED = "openai_agents"  # the key of the saved RunState in the run's agent record (openai_agents.SAVED)


class Decides(Tracker, Protocol):
    """What a worker's harness is to a program's run (:class:`tether.Harness`): a tracker that
    also decides a call of a run nobody holds. Typed here, so that the integrations import
    nothing of the harness, which imports the operator actions, which go on with such runs."""

    async def approve(self, run_id: str, note: str = "", **options: Any) -> Any:
        ...

    async def reject(self, run_id: str, reason: str = "", **options: Any) -> Any:
        ...


@dataclass(frozen=True, slots=True)
class Went:
    """How a worker left the run: its state now (what the worker's step reports)."""

    state: RunState


def is_program(state: RunState) -> bool:
    """A run a program reported (through :meth:`tether.Harness.track`), not Tether's loop's."""
    return state.agent is not None and bool(state.agent.spec.get("program"))


def paused(state: RunState) -> bool:
    """A program's run paused at an approval with its state saved, so another process can go on."""
    return is_program(state) and isinstance(state.interruption, NeedsApproval) \
        and isinstance(state.agent.spec.get(SAVED), dict)  # type: ignore[union-attr]


def builds(state: RunState) -> None:
    """Raise :class:`StateError`, in words, unless this process can go on with the run."""
    saved = state.agent.spec.get(SAVED) if state.agent is not None else None
    if not isinstance(saved, dict) or not saved.get("agent"):
        raise StateError(f"run {state.run_id} is a program's run that is not paused with its state saved: "
                         "its program's loop cannot be rebuilt here")
    try:
        importlib.import_module("agents")  # the SDK: pip install 'tether[integrations]'
        resolve_ref(str(saved["agent"]))
    except (ImportError, ValueError, AttributeError) as exc:
        raise StateError(f"the openai-agents agent {saved['agent']} cannot be built here: {exc}") from None


def operation(harness: Decides, state: RunState,
              decision: dict[str, Any] | None) -> Callable[[], Awaitable[Went]] | None:
    """What a worker's drive step does with a program's run: record the decision it was sent
    and go on from the saved state; go on at once when the decision was recorded before a
    worker died; None to leave it (waiting for a decision, ended, or not paused)."""
    if not paused(state):
        return None
    waiting = state.interruption
    assert isinstance(waiting, NeedsApproval)
    run_id = state.run_id
    if waiting.call_id in state.approvals and state.approvals[waiting.call_id].complete:
        async def go_on() -> Went:
            # lazy: the openai-agents SDK, only on a worker that goes on with a program's run (see the module)
            from tether.integrations.openai_agents import resume

            await resume(harness, run_id)
            return Went(await call(harness.store, harness.store.load, run_id))

        return go_on
    if decision is None or decision.get("call_id") != waiting.call_id:
        return None

    async def decide() -> Went:
        decided = dict(call_id=waiting.call_id, by=decision.get("by") or "operator", rule=decision.get("rule"),
                       account=decision.get("account"), decided_at=decision.get("ts"))
        if decision.get("kind") == "approve":
            done = await harness.approve(run_id, decision.get("text") or "", args=decision.get("args"),
                                         unchecked=decision.get("unchecked") is True, **decided)
        else:
            done = await harness.reject(run_id, decision.get("text") or "", **decided)
        return Went(done.state)

    return decide

"""A decision on an openai-agents program's run that paused at an approval, taken where its
program is gone (``tether approve``, a console, a worker).

A run of an agent given by reference saves the SDK's paused ``RunState`` with the run
(:mod:`tether.integrations.openai_agents`). The decision is recorded on the run, then the
rest of it goes on here from that state, as its program would have. Nothing here imports
the SDK until a run goes on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tether.run.controls import take_decision, vet_decision
from tether.run.driver import RunDriver
from tether.store.hold import open_run, release
from tether.vocab.state import NeedsApproval, RunState, StateError
from tether.store.protocol import call

if TYPE_CHECKING:
    from tether.integrations._common import Tracker
    from tether.vocab.events import EventSink
    from tether.store.control import ControlRequest


def paused_program(state: RunState) -> bool:
    """A run an openai-agents program paused at an approval and saved, with its agent by
    reference: a decision can go on with it in this process, though the program is gone."""
    return state.agent is not None and bool(state.agent.spec.get("openai_agents")) \
        and isinstance(state.interruption, NeedsApproval)


async def decide_paused(harness: Tracker, run_id: str, request: ControlRequest,
                        sinks: Sequence[EventSink]) -> RunState:
    """Record the decision on the paused run, then go on with it from its saved state
    (:func:`tether.integrations.openai_agents.resume`); the run as it then stopped."""
    # lazy: the openai-agents SDK, only for a paused program's run (tether.actions.adopting imports this)
    from tether.integrations.openai_agents import resume

    state, handle = await open_run(harness.store, run_id)
    try:
        # an edit is checked against the schema its program reported
        taken, refused = take_decision(state, request, lambda: vet_decision(None, state, request))
        run = RunDriver(state, handle, handle.trace(()))
        try:
            await run.record(taken)
        finally:
            run.trace.close()
    finally:
        await release(handle)
    if refused is not None:
        raise refused
    await resume(harness, run_id, sinks=sinks)
    return await call(harness.store, harness.store.load, run_id)

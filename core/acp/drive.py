"""An ACP agent's run, driven for the harness (:meth:`tether.Harness.run` on an agent with ``acp``).

The harness opens and holds the run, as for its own loop; here the agent's process takes the
turns (:class:`tether.acp.run.AcpRun`), and this decides what happens to a run whose agent
died with the process that drove it: it ends in words, and a follow-up goes on in its session.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.acp.run import AcpRun, Rules
from tether.acp.sessions import ORPHANED, died_words
from tether.run.controls import decision_wait
from tether.vocab.events import EventSink, run_stopped
from tether.vocab.state import (
    Cancelled, MaxBudget, MaxTurns, NeedsApproval, RunState, StateError, Status, pending_calls,
)
from tether.vocab.wording import acp_follow_up
from tether.store.protocol import Handle, Store, TraceSink, call
from tether.workspaces import checkpoints, lifecycle

if TYPE_CHECKING:
    from tether.agents.agent import Agent
    from tether.vocab.cancel import CancelSignal
    from tether.run.controls import Controls

log = logging.getLogger(__name__)


async def drive_acp(state: RunState, agent: Agent, handle: Handle, trace: TraceSink, signal: CancelSignal,
                    controls: Controls, sinks: Sequence[EventSink], prepare: Callable[[RunState], list[Any]],
                    wait_for_decision: float | None, deciding: bool, follow_up: bool, session: Any, *,
                    store: Store, rules: Rules | None, hold: Callable[[Callable[[Any], None]], None],
                    workspaces_dir: Path, fleet: Any = None) -> tuple[RunState, list[dict[str, Any]]]:
    """A run of an ACP agent, held by the harness: its process drives the turns (:class:`AcpRun`).
    The agent waits on its permission requests anyway, so this process always holds the run
    while it waits for a decision (``wait_for_decision``'s deadline still applies). ``sinks``
    are all the operation's; ``hold`` registers the run's emitter with the harness, once it
    is driven here. A run with a workspace of its own (``isolation``) has it made under
    ``workspaces_dir`` and set up before the agent starts, and found again by a follow-up; the
    agent works there. ``fleet``: the fleet budgets' check (:class:`tether.acp.run.FleetCheck`), or
    None. Returns the run as it stopped, and the tool calls it ran."""
    run_id = state.run_id
    if deciding:
        raise StateError(f"run {run_id}'s agent {agent.name} speaks ACP, and its process is gone: a permission "
                         "request is answered only while the agent waits for it. Start a new run")

    def emit(event: Any) -> None:
        event.run_id = run_id
        if event.traced:
            trace.write(event)
        for sink in sinks:
            try:
                sink(event)
            except Exception:  # a broken view must not break the run it is watching
                log.exception("event sink %r failed on %s", sink, event.kind)

    async def save() -> None:
        state.updated_at = time.time()
        await handle.asave(state)

    async def decide(waiting: NeedsApproval) -> Any:
        return await controls.wait_for_decision(waiting, decision_wait(waiting, wait_for_decision or 0))

    records = await call(store, lambda: [r for r in store.read_trace(run_id)
                                              if r.get("kind") == "agent_session"])
    earlier = records[-1] if records else None
    if earlier is not None and (state.status is Status.RUNNING or isinstance(state.interruption, NeedsApproval)):
        # Saved as running, with a session: the process that drove it died, and its agent
        # with it (a worker's recovery, a resume). Its turn is not done again behind the
        # operator's back: the run ends in words, and a follow-up goes on in that session.
        await _orphaned(state, handle, trace, sinks)
        if not follow_up:
            return state, []
    if earlier is not None:  # it goes on only with a follow-up, in the session it had: loaded again
        if not follow_up:
            stopped_by = state.interruption.type if isinstance(state.interruption, MaxTurns | MaxBudget) else None
            raise StateError(f"run {run_id} is an ACP agent's: it goes on with a follow-up, "
                             f"{acp_follow_up(run_id, stopped_by)}")
        AcpRun.check_follow_up(state, agent, earlier)  # before the follow-up's words are saved
    died = died_words(state) if earlier is not None else None  # before the run is running again
    hold(emit)
    await controls.adopt()
    for event in prepare(state):  # raised limits, a follow-up's words
        emit(event)
    await save()
    ready: Callable[[], Awaitable[str | None]] | None = None
    if state.run_workspace is not None:
        root = lifecycle.locate(state, workspaces_dir)

        async def make_ready() -> str | None:  # made and set up before the agent starts, found again after
            await lifecycle.prepare(state, emit=emit, save=save, signal=signal)
            return root

        ready = make_ready
        if session is not None and session.workspace != Path(str(root)).resolve():
            session = None  # started in the agent's folder (the caller closes it): the run's own is elsewhere
    run = AcpRun(state, agent, emit=emit, save=save, signal=signal, decide=decide, earlier=earlier, died=died,
                 session=session, expect=controls.expect, rules=rules, ready=ready,
                 after_change=None if state.run_workspace is None else checkpoints.after_change_hook(), fleet=fleet)
    controls.vet = run.vet
    final = await run.run()
    if state.run_workspace is not None:
        await lifecycle.note_changes(state, save)  # for tether runs' +/- counts
    await controls.close()
    return final, run.tool_runs


async def _orphaned(state: RunState, handle: Handle, trace: TraceSink, sinks: Sequence[EventSink]) -> None:
    reason = f"{ORPHANED}; a follow-up goes on in its session: {acp_follow_up(state.run_id)}"
    for unfinished in pending_calls(state):  # calls the agent never finished: said in their slots
        state.messages.append({"role": "tool", "tool_call_id": unfinished["id"], "content": f"not finished: {reason}"})
        state.failed_calls.append(unfinished["id"])
    state.status, state.interruption, state.error = Status.INTERRUPTED, Cancelled(reason), None
    event = run_stopped(state, reason)
    trace.write(event)
    for sink in sinks:
        with contextlib.suppress(Exception):
            sink(event)
    state.updated_at = time.time()
    await handle.asave(state)

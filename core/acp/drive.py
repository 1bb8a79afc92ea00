"""An ACP agent's run, driven for the harness (:meth:`tether.Harness.run` on an agent with ``acp``).

The harness opens and holds the run, as for its own loop, and hands it here as its driver
(:class:`tether.run.driver.RunDriver`: what emits, saves, checkpoints and finishes it); the
agent's process takes the turns (:class:`tether.acp.run.AcpRun`), and this decides what happens
to a run whose agent died with the process that drove it: it ends in words, and a follow-up
goes on in its session.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.acp.run import AcpRun, AcpRunOptions, FleetCheck, Rules
from tether.acp.sessions import ORPHANED, died_words
from tether.run.controls import decision_wait
from tether.run.driver import Operation, RunDriver
from tether.vocab.state import (
    Cancelled, MaxBudget, MaxTurns, NeedsApproval, RunState, StateError, Status, pending_calls,
)
from tether.vocab.wording import acp_follow_up
from tether.store.protocol import Store, call
from tether.workspaces import checkpoints, lifecycle

if TYPE_CHECKING:
    from tether.agents.agent import Agent
    from tether.vocab.cancel import CancelSignal
    from tether.run.controls import Controls


@dataclass(frozen=True)
class AcpHost:
    """What the harness lends an ACP run: its ``store``, the standing ``rules`` (None: people
    decide), ``hold`` (registers the run's emitter with the harness, once it is driven here),
    ``workspaces_dir`` (where a run with a workspace of its own has it) and the fleet budgets'
    check (:class:`tether.acp.run.FleetCheck`, or None)."""

    store: Store
    rules: Rules | None
    hold: Callable[[Callable[[Any], None]], None]
    workspaces_dir: Path
    fleet: FleetCheck | None = None


async def drive_acp(run: RunDriver, agent: Agent, signal: CancelSignal, controls: Controls, operation: Operation,
                    host: AcpHost) -> tuple[RunState, list[dict[str, Any]]]:
    """A run of an ACP agent, held by the harness: its process drives the turns (:class:`AcpRun`).
    The agent waits on its permission requests anyway, so this process always holds the run
    while it waits for a decision (``operation.wait_for_decision``'s deadline still applies). A
    run with a workspace of its own (``isolation``) has it made under ``host.workspaces_dir`` and
    set up before the agent starts, and found again by a follow-up; the agent works there.
    Returns the run as it stopped, and the tool calls it ran."""
    state, store = run.state, host.store
    run_id = state.run_id
    if operation.decision is not None:
        raise StateError(f"run {run_id}'s agent {agent.name} speaks ACP, and its process is gone: a permission "
                         "request is answered only while the agent waits for it. Start a new run")

    async def decide(waiting: NeedsApproval) -> Any:
        return await controls.wait_for_decision(waiting, decision_wait(waiting, operation.wait_for_decision or 0))

    records = await call(store, lambda: [r for r in store.read_trace(run_id)
                                              if r.get("kind") == "agent_session"])
    earlier = records[-1] if records else None
    follow_up = operation.follow_up
    if earlier is not None and (state.status is Status.RUNNING or isinstance(state.interruption, NeedsApproval)):
        # Saved as running, with a session: the process that drove it died, and its agent
        # with it (a worker's recovery, a resume). Its turn is not done again behind the
        # operator's back: the run ends in words, and a follow-up goes on in that session.
        await _orphaned(run)
        if not follow_up:
            return state, []
    if earlier is not None:  # it goes on only with a follow-up, in the session it had: loaded again
        if not follow_up:
            stopped_by = state.interruption.type if isinstance(state.interruption, MaxTurns | MaxBudget) else None
            raise StateError(f"run {run_id} is an ACP agent's: it goes on with a follow-up, "
                             f"{acp_follow_up(run_id, stopped_by)}")
        AcpRun.check_follow_up(state, agent, earlier)  # before the follow-up's words are saved
    died = died_words(state) if earlier is not None else None  # before the run is running again
    host.hold(run.emit)
    await controls.adopt()
    for event in operation.prepare(state):  # raised limits, a follow-up's words
        run.emit(event)
    await run.save()
    ready: Callable[[], Awaitable[str | None]] | None = None
    session = operation.acp_session
    if state.run_workspace is not None:
        root = lifecycle.locate(state, host.workspaces_dir)
        run.after_change = checkpoints.after_change_hook()

        async def make_ready() -> str | None:  # made and set up before the agent starts, found again after
            await lifecycle.prepare(state, emit=run.emit, save=run.save, signal=signal)
            return root

        ready = make_ready
        if session is not None and session.workspace != Path(str(root)).resolve():
            session = None  # started in the agent's folder (the caller closes it): the run's own is elsewhere
    acp = AcpRun(run, agent, signal, decide, AcpRunOptions(
        earlier=earlier, died=died, session=session, expect=controls.expect, rules=host.rules, ready=ready,
        fleet=host.fleet))
    controls.vet = acp.vet
    final = await acp.run()
    if state.run_workspace is not None:
        await lifecycle.note_changes(state, run.save)  # for tether runs' +/- counts
    await controls.close()
    return final, acp.tool_runs


async def _orphaned(run: RunDriver) -> None:
    state = run.state
    reason = f"{ORPHANED}; a follow-up goes on in its session: {acp_follow_up(state.run_id)}"
    for unfinished in pending_calls(state):  # calls the agent never finished: said in their slots
        state.messages.append({"role": "tool", "tool_call_id": unfinished["id"], "content": f"not finished: {reason}"})
        state.failed_calls.append(unfinished["id"])
    await run.finish(Status.INTERRUPTED, reason, Cancelled(reason))

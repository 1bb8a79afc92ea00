"""A decision on a run that nobody holds: this process adopts the run, makes the decision
(refused in words if another process took the run first, or after the call's deadline),
and goes on with it. The run's route is found here, once, for every front that decides
this way (``tether approve|reject``, the web pages and their signed links, the console,
:meth:`tether.harness.Harness.approve` and ``reject``, the queue workers):

- a spent "ask" fleet budget: decided on the saved run, through its driver, then the run goes
  on if it was allowed (:mod:`tether.approvals.budget_ask`);
- a merge of the run's own workspace that waits for a decision (:mod:`tether.workspaces.merging`);
- an openai-agents program's run, paused with its state saved (:mod:`tether.integrations.paused`);
- otherwise the run's own driver, Tether's loop or an ACP agent, which applies the rules,
  the deadline and the two-person check as it takes the decision
  (:func:`tether.run.controls.take_decision`).

Its own module, not :mod:`tether.actions.control`'s: ``tether stop`` loads that one alone.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from tether.approvals import budget_ask
from tether.approvals.deadlines import lapse
from tether.approvals.decisions import TooLate
from tether.integrations.paused import decide_paused, paused_program
from tether.run.driver import Operation, Outcome, RunDriver
from tether.store.control import ControlRequest
from tether.store.hold import open_run, release
from tether.store.protocol import Store, call
from tether.vocab.cancel import CancelSignal
from tether.vocab.events import EventSink
from tether.vocab.state import NeedsApproval, RunState, StateError
from tether.workspaces import merging


async def account_of(store: Store, given: str | None = None, *, rule: str | None = None) -> str | None:
    """The account a decision counts as (:mod:`tether.vocab.people`): ``given`` (a web login's),
    none for a rule's, else this process's on the store (:meth:`Store.account`)."""
    return given if given is not None or rule is not None else await call(store, store.account)


async def adopt(harness: Any, run_id: str, request: ControlRequest, *, signal: CancelSignal | None = None,
                sinks: Sequence[EventSink] = (), wait_for_decision: float | None = None) -> Outcome:
    """Nobody holds the run: this process takes it, makes the decision ``request`` carries
    (its ``ts``: when it was made, if before now, a queue worker's), and goes on with it; the
    outcome. ``harness`` (:class:`tether.harness.Harness`) drives the run."""
    store: Store = harness.store
    if request.account is None:
        request = replace(request, account=await account_of(store, rule=request.rule))
    state = await call(store, store.load, run_id)
    started = time.perf_counter()
    if budget_ask.waits_on_budget(state):  # a spent "ask" fleet budget: decided here, then the run goes on
        state, goes_on = await _budget_decided(store, run_id, request, [*harness.sinks, *sinks])
        if not goes_on:
            return Outcome(state)
        return await harness.operate(run_id, Operation(signal=signal, sinks=sinks,
                                                       wait_for_decision=wait_for_decision))
    if merging.waits_on_merge(state) or merging.merging(state):
        final, _ = await merging.decide(store, run_id, request)
        return Outcome(final, [], (time.perf_counter() - started) * 1000)
    if paused_program(state):
        final = await decide_paused(harness, run_id, request, sinks)
        return Outcome(final, [], (time.perf_counter() - started) * 1000)
    return await harness.operate(run_id, Operation(signal=signal, sinks=sinks, wait_for_decision=wait_for_decision,
                                                   decision=request))


async def _budget_decided(store: Store, run_id: str, request: ControlRequest,
                          sinks: Sequence[EventSink]) -> tuple[RunState, bool]:
    """:func:`tether.approvals.budget_ask.decide` on the saved run (held while it is made),
    its events recorded by the run's driver: the run as it then is, and whether it goes on
    (approved by as many people as it needs)."""
    state, handle = await open_run(store, run_id)
    run = RunDriver(state, handle, handle.trace(()), sinks)
    late: TooLate | None = None
    try:
        if not budget_ask.waits_on_budget(state):
            raise StateError(f"run {run_id} no longer waits on its budget call (status {state.status.value})")
        lapsed = lapse(state, at=request.ts)  # made after its deadline: the deadline's instead, not this
        events = [] if lapsed is None else list(lapsed.events)
        if lapsed is not None and not lapsed.waits:
            late = TooLate(lapsed.words)
        else:
            events.append(budget_ask.decide(state, request))
        await run.record(events, told_once_saved=True)  # (the web page answers once its decision is recorded)
    finally:
        run.trace.close()
        await release(handle)
    if late is not None:
        raise late
    decision = state.approvals[state.interruption.call_id] if isinstance(state.interruption, NeedsApproval) else None
    return state, decision is not None and (decision.verdict == "rejected" or decision.complete)

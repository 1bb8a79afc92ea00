"""Stop and decide a run, whoever asks: the console, ``tether stop|approve|reject``, the web
pages and their signed links, the ACP server, the queue workers.

Each finds the run's route once, in this order:

1. a queue worker's workflow that waits for a decision on it (a store with workers:
   :mod:`tether.workers.decide`, whose modules load only then);
2. the process that holds the run, through the store's control channel
   (:func:`tether.store.operate.request`), which refuses in words what no process could act on;
3. nobody: a decision is made here, this process adopting the run and going on with it
   (:func:`tether.actions.adopting.adopt`); a Stop is refused in words (nothing runs).

The process that holds the run (or adopts it) applies the rules, the decision deadline and
the two-person check as it takes the decision (:func:`tether.run.controls.take_decision`),
so a decision is checked the same whichever front made it and whichever route it took.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tether.store import operate
from tether.store.control import ControlReply, ControlRequest
from tether.store.owner import Owner
from tether.store.protocol import Store, call
from tether.vocab.state import StateError

StopHere = Callable[[str, str, str], "ControlReply | None"]
"""Stops the run at once when this process drives it (``run_id, reason, by``); None when it does not."""


class NoRun(StateError):
    """The store has no run of that id (a web page answers 404)."""


async def stop(store: Store, run_id: str, reason: str, *, by: str, here: StopHere | None = None) -> ControlReply:
    """Stop a run whichever process runs it: this one (``here``: its signal fires at once), a
    queue worker's workflow that waits for a decision on it, or the process that holds it,
    whose tool is cut off in words, or whose waiting call is declined in words. The reply
    says what happened, in words (nothing to stop, orphaned...). :class:`NoRun` for a run
    the store does not have."""
    if here is not None:
        stopped = here(run_id, reason, by)
        if stopped is not None:
            return stopped
    if not await call(store, store.exists, run_id):
        raise NoRun(f"no run {run_id} in {store.where}")
    request = ControlRequest("stop", reason, by=by)
    if store.workers:
        # lazy: DBOS's modules, only for a store with workers (tether stop's cold start, test_cold_start)
        from tether.workers import decide as workers

        waiting = await workers.stop_waiting(store, run_id, request)
        if waiting is not None:
            return waiting
    return await operate.request(store, run_id, request)


async def request(store: Store, run_id: str, what: ControlRequest) -> ControlReply:
    """Have the process that holds the run act on ``what`` (:func:`tether.store.operate.request`):
    refused in words, changing nothing, when no process could."""
    return await operate.request(store, run_id, what)


async def answered(store: Store, run_id: str, what: ControlRequest, owner: Owner,
                   reply: ControlReply | None) -> ControlReply:
    """The words for ``what``, already sent to ``owner`` (``tether stop``'s quick path,
    :mod:`tether.store.files.quickstop`), given its answer or the lack of one."""
    return await operate.answered(store, run_id, what, owner, reply)


async def deliver(store: Store, run_id: str, request: ControlRequest) -> ControlReply | None:
    """Hand a decision to whoever holds the run waiting for it: a queue worker's workflow
    (PostgreSQL), else the process that holds the run. None when nobody holds it: then the
    decision is the caller's to make on the run itself (:func:`tether.actions.adopting.adopt`)."""
    if store.workers:
        queued = await _worker_decide(store, run_id, request)
        if queued is not None:
            return queued
    owner = await call(store, store.owner, run_id)
    if owner is not None and owner.alive:
        return await operate.request(store, run_id, request)
    return None


async def _worker_decide(store: Store, run_id: str, request: ControlRequest) -> ControlReply | None:
    """:func:`tether.workers.decide.decide`: the decision sent to the workflow that waits for it, if one does."""
    # lazy: DBOS's modules, only for a store with workers (tether stop's cold start, test_cold_start)
    from tether.workers import decide as workers

    return await workers.decide(store, run_id, request)


async def follow_up(harness: Any, run_id: str, message: str, *, signal: Any = None, sinks: Sequence[Any] = (),
                    **limits: Any) -> Any:
    """The operator's next words to a run nobody holds (it is not running and waits for no
    decision): this process adopts the run, adds them to its transcript and goes on from
    them, a completed run too (:meth:`tether.harness.Harness.run`); the outcome. ``limits``:
    ``max_turns``, ``budget_usd``, ``wait_for_decision``, as for a resume."""
    return await harness.run(run_id, signal=signal, sinks=sinks, message=message, **limits)

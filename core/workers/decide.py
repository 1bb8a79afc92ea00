"""Decisions and stops for a run whose workflow waits in the queue while no process holds it.

A decision goes two ways: into the run's control channel (which orders the deciders: the
first decision on a call is the one) and, as a DBOS message, to the workflow, which waits
for it durably (a worker that dies meanwhile does not lose it).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tether.store.protocol import Store
from tether.approvals.holding import too_late
from tether.integrations import on_workers as programs
from tether.run.controls import repeated
from tether.approvals.decisions import already_decided, check_edit, end_waiting
from tether.store.hold import amend
from tether.vocab.state import NeedsApproval, RunState, StateError, Status
from tether.store.control import ControlReply, ControlRequest
from tether.workers.database import _db_words, client, close_client
from tether.workers.names import DECISION_TOPIC
from tether.workers.queue import enqueue
from tether.workers.view import _workflow_status, queue_view

if TYPE_CHECKING:
    from tether.vocab.events import Event

async def decide(store: Store, run_id: str, request: ControlRequest) -> ControlReply | None:
    """Approve or reject the call a worker-run run waits on, from any process: the decision
    is recorded in the run's control channel (first come, first served: a second decider is
    told who decided) and sent to the run's workflow as a DBOS message, which waits for it
    durably (a worker that dies meanwhile does not lose it). None when no workflow waits for
    the run (a file store, a run that is not a worker's, or one a process holds): decide the
    usual way then. ``request``: an approval (its edited ``args``, ``unchecked``: a program's
    run's edit taken without a schema to check it) or a rejection."""
    if not store.workers:
        return None
    return await asyncio.to_thread(_decide, store, run_id, request)


async def stop_waiting(store: Store, run_id: str, request: ControlRequest) -> ControlReply | None:
    """A Stop for a run the worker queue holds but no process drives: one that waits in the
    queue is stopped by the worker that takes it, before anything else; for one whose
    workflow waits for a decision, the run is stopped on the store, its call declined in
    words, and the workflow stops waiting (the worker's slot is free again). None otherwise
    (a worker drives it: the control channel reaches it)."""
    if not store.workers or request.kind != "stop":
        return None
    return await asyncio.to_thread(_stop_waiting, store, run_id, request)


def _stop_waiting(store: Store, run_id: str, request: ControlRequest) -> ControlReply | None:
    status = _workflow_status(store, run_id)
    if status not in ("PENDING", "ENQUEUED", "DELAYED"):
        return None
    owner = store.owner(run_id)
    if owner is not None and owner.alive:
        return None  # a worker drives it: the control channel reaches the tool
    state = store.load(run_id)
    if state.status is Status.RUNNING:
        # Queued (or between a dead worker and the one recovering it): the worker that takes
        # it handles the request first, before any model turn.
        store.control_append(run_id, request)
        return ControlReply(True, f"run {run_id} waits in the worker queue; the stop is recorded and the worker "
                            "that takes it stops it before anything else", pending=True)
    waiting = state.interruption
    if not isinstance(waiting, NeedsApproval):
        return None

    def stop(state: RunState) -> list[Event]:  # (decided meanwhile: nothing is left to close)
        return end_waiting(state, request.text, request.by) if isinstance(state.interruption, NeedsApproval) else []

    if not amend(store, run_id, stop):
        return None  # a process took it meanwhile: the control channel reaches it
    _send(store, run_id, request, f"run {run_id} is stopped, but the stop was not sent to its worker")
    return ControlReply(True, f"run {run_id} is stopped: {waiting.tool_name} ({waiting.call_id}), which waited in "
                        "the worker queue for a decision, is declined in words, and its worker stops waiting")


def enqueue_paused(store: Store, run_id: str) -> bool:
    """Put a paused program run that no process holds on the worker queue, for the decision
    about to be sent to it (blocking). False when it is not one (or a process holds it)."""
    owner = store.owner(run_id)
    if owner is not None and owner.alive:
        return False  # its program waits with it: the decision reaches it there
    state = store.load(run_id)
    if not programs.paused(state):
        return False
    if not any(w.alive and programs.QUEUE in w.queues for w in queue_view(store).workers.values()):
        return False  # no worker serves the store now: the deciding process goes on with it
    enqueue(store, state)
    return True


def _decide(store: Store, run_id: str, request: ControlRequest) -> ControlReply | None:
    kind, call_id, args, by = request.kind, request.call_id, request.args, request.by
    if _workflow_status(store, run_id) not in ("PENDING", "ENQUEUED") and not enqueue_paused(store, run_id):
        return None
    owner = store.owner(run_id)
    if owner is not None and owner.alive:
        return None  # a process drives it now: the control channel reaches that process
    state = store.load(run_id)
    waiting = state.interruption if isinstance(state.interruption, NeedsApproval) else None
    last = max(state.approvals.values(), key=lambda d: d.ts, default=None)
    if waiting is None:
        if last is not None:
            return ControlReply(False, already_decided(last))
        return ControlReply(False, f"run {run_id} is not waiting for a decision ({state.status.value})")
    if call_id and call_id != waiting.call_id:
        return ControlReply(False, f"run {run_id} waits for a decision on {waiting.call_id}, not {call_id}")
    earlier = state.approvals.get(waiting.call_id)
    if earlier is not None and earlier.complete:
        return ControlReply(False, already_decided(earlier))
    if too_late(waiting, time.time()):
        return None  # not the workflow's: the deciding process applies the deadline and says so
    mine = replace(request, call_id=waiting.call_id)
    repeat = repeated(waiting, mine)
    if repeat is not None:
        return ControlReply(False, repeat)
    if kind == "approve" and args is not None and programs.is_program(state):
        # Checked here, against the schema its program reported, before the worker is told:
        # a refused edit is said to the operator, not found later in a worker's trace.
        problem = check_edit(None, state, waiting.call_id, args, unchecked=request.unchecked)
        if problem:
            return ControlReply(False, problem)
    store.control_append(run_id, mine)
    # The channel orders the requests: the first decision on this call is the one.
    first = next((r for r in store.control_read(run_id, state.control_seen)
                  if r.kind in ("approve", "reject") and r.call_id == waiting.call_id), mine)
    if first.id != mine.id:
        done = "approved" if first.kind == "approve" else "rejected"
        return ControlReply(False, f"already decided: {done} by {first.by}; there is one decision per call")
    _send(store, run_id, first, f"the decision on run {run_id} was recorded but not sent to its worker")
    done = "approved" if kind == "approve" else "rejected"
    return ControlReply(True, f"{done} {waiting.tool_name} ({waiting.call_id}) by {by}; the worker queue "
                        f"goes on with run {run_id}")


def _send(store: Store, run_id: str, request: ControlRequest, failed: str) -> None:
    """Send ``request`` to the run's workflow, which waits for it (blocking); ``failed`` says
    what a database error left undone."""
    dbos_client = client(store.spec)
    try:
        dbos_client.send(run_id, _message(request), DECISION_TOPIC, idempotency_key=f"{run_id}:{request.id}")
    except Exception as exc:
        raise StateError(_db_words(exc, store, failed)) from None
    finally:
        close_client(dbos_client)


def _message(request: ControlRequest) -> dict[str, Any]:
    return {"kind": request.kind, "text": request.text, "call_id": request.call_id, "by": request.by,
            "id": request.id, "args": request.args, "rule": request.rule, "account": request.account,
            "ts": request.ts, "unchecked": request.unchecked}


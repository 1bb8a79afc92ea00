"""A decision handed to whoever holds the run waiting for it: a queue worker's workflow
(PostgreSQL, :func:`tether.workers.decide.decide`), else the process that holds the run.

Light on purpose: ``tether approve``, ``tether rules add`` and the web's approvals import it,
and only a store with workers loads the workers' modules. The approvals' own code
(:func:`tether.approvals.commands.apply_to_waiting`) is given it rather than importing it:
the approvals sit below the workers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tether.store.protocol import call

if TYPE_CHECKING:
    from tether.store.control import ControlReply, ControlRequest
    from tether.store.protocol import Store


async def deliver(store: Store, run_id: str, request: ControlRequest) -> ControlReply | None:
    """Hand a decision to whoever holds the run waiting for it: a queue worker's workflow
    (PostgreSQL), else the process that holds the run. None when nobody holds it: then the
    decision is the caller's to make on the run itself."""
    from tether.store import operate

    if store.workers:
        queued = await _worker_decide(store, run_id, request)
        if queued is not None:
            return queued
    owner = await call(store, store.owner, run_id)
    if owner is not None and owner.alive:
        return await operate.request(store, run_id, request)
    return None


async def _worker_decide(store: Store, run_id: str, request: ControlRequest) -> ControlReply | None:
    """:func:`tether.workers.decide.decide`, with what of this decision it takes. An edited approval
    it cannot carry does not go to it (approving the model's arguments instead of the
    operator's would be the wrong decision): the caller decides on the run itself."""
    import inspect

    from tether.workers import decide as workers

    accepted = inspect.signature(workers.decide).parameters
    if request.args is not None and "args" not in accepted:
        return None
    extra = {name: getattr(request, name) for name in ("args", "rule", "account", "unchecked")
             if getattr(request, name) is not None and name in accepted}
    return await workers.decide(store, run_id, "approve" if request.kind == "approve" else "reject", request.text,
                               by=request.by, call_id=request.call_id, **extra)

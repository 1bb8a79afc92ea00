"""Acting on a run from another process: a control request sent, and its answer in words.

:func:`request` is what ``tether stop``, ``approve`` and ``reject``, the console and the web
pages call. It looks at the run first (its saved status, whether a process holds it) and
refuses in words, changing nothing, when no process could act on the request; else it has
the store record it and tell the run's owner (:meth:`tether.store.protocol.Store.deliver`),
and words the answer, or the lack of one, for a person (see :mod:`tether.store.control`).
"""

from __future__ import annotations

from tether.vocab.wording import already_decided
from tether.vocab.state import NeedsApproval, Status
from tether.store.control import ControlReply, ControlRequest
from tether.store.owner import Owner
from tether.store.protocol import Store, call


async def request(store: Store, run_id: str, what: ControlRequest) -> ControlReply:
    """Append ``what`` to the run's control channel and have the process that runs the run
    act on it; its answer, in words. Refused in words, changing nothing, when no process
    could act on it (a run that has stopped, one that waits for approval with no process)."""
    state = await call(store, store.load, run_id)
    owner = await call(store, store.owner, run_id)
    alive = owner is not None and owner.alive and not owner.kept
    if what.kind == "stop" and not alive and state.status is not Status.RUNNING:
        if isinstance(state.interruption, NeedsApproval):
            return ControlReply(False, f"nothing to stop: run {run_id} is waiting for approval of "
                                f"{state.interruption.tool_name} and no process is running it; "
                                f"tether reject {run_id} --reason TEXT declines the call")
        return ControlReply(False, f"nothing to stop: run {run_id} has already stopped ({state.status.value})")
    if not alive:
        if state.status is Status.RUNNING:  # its process died: the request waits for the adopter
            await call(store, store.control_append, run_id, what)
            if owner is not None and owner.kept:  # its keeper lives (tether.store.keeper): its next hook takes it
                return ControlReply(False, f"run {run_id} is {owner.command or 'a program'}'s (pid {owner.pid} on "
                                    f"{owner.host}), which reports in at its hooks: the {what.kind} is recorded "
                                    "and lands at its next hook", pending=True)
            who = f" (pid {owner.pid} on {owner.host})" if owner is not None else ""
            return ControlReply(False, f"run {run_id} is orphaned: the process that ran it{who} ended "
                                f"without stopping it. The {what.kind} is recorded and applies when the run "
                                f"is adopted (tether resume {run_id})", pending=True)
        last = max(state.approvals.values(), key=lambda d: d.ts, default=None)
        if what.kind in ("approve", "reject") and last is not None and not isinstance(state.interruption, NeedsApproval):
            # Decided (and let go of) between the caller's look and ours: say by whom.
            return ControlReply(False, already_decided(last))
        return ControlReply(False, f"no process holds run {run_id} ({state.status.value}): "
                            f"tether {what.kind} {run_id} acts on it directly")
    reply = await store.deliver(run_id, what, owner.control)
    return await answered(store, run_id, what, owner, reply)


async def answered(store: Store, run_id: str, what: ControlRequest, owner: Owner,
                   reply: ControlReply | None) -> ControlReply:
    """The words for ``what``, delivered to ``owner`` (alive when it was sent), given its
    answer: the answer itself, or, when the process let go of the run or did not answer,
    where the run is now."""
    now = await call(store, store.owner, run_id)
    if (reply is None or reply.gone) and not (now is not None and now.alive):
        # It let go of the run between our look and our poke: say where the run is now.
        state = await call(store, store.load, run_id)
        last = max(state.approvals.values(), key=lambda d: d.ts, default=None)
        if what.kind in ("approve", "reject") and last is not None and not isinstance(state.interruption, NeedsApproval):
            verdict = "approved" if what.kind == "approve" else "rejected"
            if (last.verdict, last.by, last.text) == (verdict, what.by, what.text):
                # Ours: the process took it and finished the run before our poke reached it.
                return ControlReply(True, f"{verdict} by {last.by}; the process that held {run_id} went on "
                                    f"with it (it is {state.status.value} now)")
            return ControlReply(False, already_decided(last))
        return ControlReply(False, f"the process running {run_id} let go of it before it answered "
                            f"(it is {state.status.value} now); nothing was done")
    if reply is None:
        return ControlReply(False, f"the process running {run_id} (pid {owner.pid} on {owner.host}) did not "
                            f"answer; the {what.kind} is recorded and applies if the run is adopted", pending=True)
    return reply

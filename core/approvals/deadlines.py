"""Decision deadlines for runs that nobody holds.

A run whose process waits for a decision applies its own deadline (the harness cuts the
wait to it, and the loop answers the overdue call). A run left waiting on the store, with
no process, has nobody to do that: whoever adopts it applies the deadline when its loop
asks again, and until then ``tether runs`` does, here, without driving the run on:

* ``reject``: the call is declined in words ("No decision within 10 min: the call was
  declined"), and the run stays interrupted with that reason; ``tether resume`` goes on
  and the model reads the rejection;
* ``stop``: the run stays interrupted, no longer waiting, with the reason;
* ``escalate``: the escalation is recorded (the notification channel reads it) and the
  call waits one more deadline, after which it is rejected.

A deadline never approves.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from tether.approvals.holding import overdue
from tether.approvals.rules import format_duration
from tether.run.events import RunStopped
from tether.run.decisions import DEADLINE, reject
from tether.run.state import Cancelled, NeedsApproval, StateError, Status

if TYPE_CHECKING:
    from tether.store.protocol import Store


def apply_due(store: Store, *, now: float | None = None) -> list[str]:
    """Apply the passed deadlines of the runs waiting on ``store`` that no live process holds;
    what was done, in words, one line a run. A run that another process takes meanwhile is
    left to it."""
    now = time.time() if now is None else now
    done: list[str] = []
    for summary in store.summaries():
        due = (summary.interruption or {}).get("deadlineAt") if summary.waiting else None
        if due is None or due > now or (summary.owner is not None and summary.owner.alive):
            continue
        try:
            state, handle = store.open(summary.run_id)
        except (StateError, OSError):
            continue  # taken by another process, or gone: not ours to decide
        try:
            waiting = state.interruption
            if state.status is not Status.INTERRUPTED or not isinstance(waiting, NeedsApproval) \
                    or waiting.deadline_at is None or waiting.deadline_at > now:
                continue
            trace = handle.trace()
            # The deadline it was given, counted from the asking (escalated: once more, as long).
            extra = max(waiting.deadline_at - (waiting.asked_at or waiting.deadline_at), 1.0)
            step = overdue(waiting, extra, now=now)
            if step.event is not None:
                state.interruption = step.waiting
                step.event.run_id = state.run_id
                trace.write(step.event)
                done.append(f"{state.run_id}: {step.words} on {waiting.tool_name}; escalated, it waits "
                            f"{format_duration(extra)} more")
            else:
                waited = format_duration(now - (waiting.asked_at or waiting.deadline_at))
                reason = f"no decision on {waiting.tool_name} ({waiting.call_id}) within {waited}"
                if step.action == "stop":
                    words = f"{reason}: the run was stopped"
                else:
                    trace.write(reject(state, waiting.call_id, step.words, DEADLINE))
                    state.approvals[waiting.call_id].asked_at = waiting.asked_at
                    words = f"{reason}: the call was rejected; tether resume {state.run_id} goes on"
                state.interruption = Cancelled(words, DEADLINE)
                trace.write(RunStopped(run_id=state.run_id, status=state.status.value, reason=words, turns=state.turns,
                                       cost_usd=state.cost_usd, interruption=state.interruption.to_dict()))
                done.append(f"{state.run_id}: {words}")
            state.updated_at = now
            handle.save(state)
            trace.close()
        finally:
            handle.release()
    return done

"""Decision deadlines for runs that no process drives.

A run whose process waits for a decision applies its own deadline (the harness cuts the
wait to it, and the loop answers the overdue call). A run left waiting on the store, with
no process, has nobody to do that: whoever adopts it applies the deadline when its loop
asks again; ``tether runs`` does, without driving the run on (:mod:`tether.actions.deadlines`);
and so does a decision that comes after the deadline (:func:`lapse`, from
:func:`tether.run.controls.take_decision`), which is then not taken, whoever made it:

* ``reject``: the call is declined in words ("No decision within 10 min: the call was
  declined"), and the run stays interrupted with that reason; ``tether resume`` goes on
  and the model reads the rejection;
* ``stop``: the run stays interrupted, its call declined in words, with the reason;
* ``escalate``: the escalation is recorded (the notification channel reads it) and the
  call waits one more deadline, after which it is rejected.

A deadline never approves.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from tether.vocab import budget_call
from tether.approvals.holding import overdue
from tether.vocab.rules import format_duration
from tether.approvals.decisions import DEADLINE, already_decided, declined, end_waiting, reject
from tether.vocab.events import Event, run_stopped
from tether.vocab.state import Cancelled, NeedsApproval, RunState, Status


@dataclass(frozen=True, slots=True)
class Lapsed:
    """A passed deadline, applied to a run no loop drives: the events that record it, and
    what it did in words."""

    events: list[Event]
    words: str
    """What a decision that came too late is told: the deadline passed, and what it did."""
    summary: str
    """One line for ``tether runs``: ``no decision on delete_file (call_1_0) within 4 s: the run was stopped``."""
    waits: bool = False
    """Escalated: the call still waits, for one more deadline, and may still be decided."""


def lapse(state: RunState, *, at: float | None = None) -> Lapsed | None:
    """Apply the deadline of the call ``state`` waits on, if it had passed by ``at`` (when a
    decision was made; now by default): escalate it, stop the run, or reject the call, as
    :func:`~tether.approvals.holding.overdue` says. None when it had not passed."""
    at = time.time() if at is None else at
    waiting = state.interruption
    if state.status is not Status.INTERRUPTED or not isinstance(waiting, NeedsApproval) \
            or waiting.deadline_at is None or waiting.deadline_at > at:
        return None
    # The deadline it was given, counted from the asking (escalated: once more, as long).
    extra = max(waiting.deadline_at - (waiting.asked_at or waiting.deadline_at), 1.0)
    step = overdue(waiting, extra, now=at)
    if step.event is not None:
        state.interruption = step.waiting
        step.event.run_id = state.run_id
        escalated = f"{step.words} on {waiting.tool_name}; escalated, it waits {format_duration(extra)} more"
        return Lapsed([step.event], escalated, escalated, waits=True)
    if step.action == "stop":
        events = end_waiting(state, step.words, DEADLINE)
        summary = f"{step.words}: the run was stopped"
    else:
        reason = f"no decision on {waiting.tool_name} ({waiting.call_id}) within {step.within}"
        budget = budget_call.undecided(state, waiting)  # a fleet budget's call: its run then ends as a budget exit
        then = "ends it as a budget exit" if budget else "goes on"
        summary = f"{reason}: the call was rejected; tether resume {state.run_id} {then}"
        events = [declined(state, waiting, step.words, DEADLINE) if budget
                  else reject(state, waiting.call_id, step.words, DEADLINE)]
        state.interruption = Cancelled(summary, DEADLINE)
        events.append(run_stopped(state, summary))
    decided = state.approvals[waiting.call_id]
    decided.ts = min(step.due, time.time())  # decided by the deadline, when it passed, however late one looked
    words = f"{already_decided(decided)}. Run {state.run_id} stays interrupted: tether resume {state.run_id} goes on"
    return Lapsed(events, words, summary)

"""A call held for people: how long it may wait, and what its deadline comes to.

Tether's loop, the ACP bridge and the run API each hold calls for people; this is the one
place that says how long (an ``ask`` rule's deadline, else the run's) and what happens when
nobody decided in time (escalate once, stop the run, or reject: never approve).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from tether.vocab.rules import Call, Rule, Verdict, decide, format_duration
from tether.vocab.events import ApprovalEscalated
from tether.vocab.state import NeedsApproval, Policies

log = logging.getLogger(__name__)


async def verdict_of(read: Callable[[], Awaitable[Sequence[Rule]]] | None, call: Call) -> Verdict | None:
    """What the store's standing rules say of ``call`` (None: no rule fits, people decide).
    Rules that cannot be read decide nothing: the call waits for people, as without rules."""
    if read is None:
        return None
    try:
        rules = await read()
    except Exception as exc:
        log.warning("run %s: the standing rules could not be read (%s); people decide", call.run_id, exc)
        return None
    return decide(rules, call) if rules else None


def deadline_of(ask: Rule | None, policies: Policies) -> tuple[float | None, str]:
    """How long a held call waits, and what happens then: the ``ask`` rule's, else the run's."""
    if ask is not None and ask.deadline_s:
        return ask.deadline_s, ask.on_deadline
    return policies.decision_deadline_s, policies.on_deadline


@dataclass(frozen=True, slots=True)
class Overdue:
    """What a call whose deadline passed comes to."""

    action: Literal["escalate", "stop", "reject"]
    waiting: NeedsApproval
    """Escalated: the call with its one more deadline; else as it was."""
    words: str
    """``no decision within 10 min`` (a rejection's reason), or a Stop's reason."""
    within: str
    """The deadline the call was given, worded: ``10 min``."""
    due: float
    """When that deadline passed (escalated: the one more deadline's end)."""
    event: ApprovalEscalated | None = None


def overdue(waiting: NeedsApproval, deadline_s: float | None, *, now: float | None = None) -> Overdue:
    """The step a call takes once its deadline has passed: someone else is asked once
    (``escalate``, then one more ``deadline_s`` from the first deadline), the run stops, or
    the call is rejected. Worded by the deadline the call was given ("no decision within
    4 s"), not by when someone happened to look."""
    now = time.time() if now is None else now
    due = waiting.deadline_at if waiting.deadline_at is not None else now
    asked = waiting.asked_at if waiting.asked_at is not None else due
    if waiting.on_deadline == "escalate" and not waiting.escalated and deadline_s:
        if due + deadline_s > now:
            later = replace(waiting, deadline_at=due + deadline_s, escalated=True)
            event = ApprovalEscalated(run_id="", call_id=waiting.call_id, tool=waiting.tool_name,
                                      waited_s=round(now - asked, 3), deadline_at=due + deadline_s)
            within = format_duration(due - asked)
            return Overdue("escalate", later, f"no decision within {within}", within, due, event)
        due += deadline_s  # nobody looked before the escalation's deadline passed too: it rejects
    within = format_duration(due - asked)
    if waiting.on_deadline == "stop":
        return Overdue("stop", waiting, f"no decision on {waiting.tool_name} ({waiting.call_id}) within {within}",
                       within, due)
    return Overdue("reject", waiting, f"no decision within {within}", within, due)


def too_late(waiting: NeedsApproval, at: float) -> bool:
    """Whether a decision made at ``at`` comes after the call's deadline, for good: the one
    check every decision passes, wherever it is taken. An escalated call may still be
    decided until its one more deadline (counted from the first, as :func:`overdue` does)."""
    if waiting.deadline_at is None or at < waiting.deadline_at:
        return False
    if waiting.on_deadline == "escalate" and not waiting.escalated:
        asked = waiting.asked_at if waiting.asked_at is not None else waiting.deadline_at
        return at >= waiting.deadline_at + max(waiting.deadline_at - asked, 1.0)
    return True


def late_words(waiting: NeedsApproval, at: float, run_id: str) -> str:
    """What a decision made at ``at``, after the call's deadline (:func:`too_late`), is told by
    the process that holds the run: the deadline passed, and what that process does of it."""
    asked = waiting.asked_at if waiting.asked_at is not None else waiting.deadline_at
    step = overdue(waiting, max((waiting.deadline_at or at) - (asked or at), 1.0), now=at)
    did = "stops the run" if step.action == "stop" else "declines the call"
    return (f"too late: the decision deadline of {waiting.tool_name} ({waiting.call_id}) passed ({step.words}); "
            f"the process running {run_id} {did}, and nothing was done. This decision was not taken")

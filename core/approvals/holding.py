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

from tether.approvals.rules import Call, Rule, Verdict, decide, format_duration
from tether.run.events import ApprovalEscalated
from tether.run.state import NeedsApproval, Policies

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
    event: ApprovalEscalated | None = None


def overdue(waiting: NeedsApproval, deadline_s: float | None, *, now: float | None = None) -> Overdue:
    """The step a call takes once its deadline has passed: someone else is asked once
    (``escalate``, then one more ``deadline_s``), the run stops, or the call is rejected."""
    now = time.time() if now is None else now
    asked = waiting.asked_at if waiting.asked_at is not None else now
    waited = format_duration(now - asked)
    if waiting.on_deadline == "escalate" and not waiting.escalated and deadline_s:
        later = replace(waiting, deadline_at=now + deadline_s, escalated=True)
        event = ApprovalEscalated(run_id="", call_id=waiting.call_id, tool=waiting.tool_name,
                                  waited_s=round(now - asked, 3), deadline_at=later.deadline_at or now)
        return Overdue("escalate", later, f"no decision within {waited}", event)
    if waiting.on_deadline == "stop":
        return Overdue("stop", waiting, f"no decision on {waiting.tool_name} ({waiting.call_id}) within {waited}")
    return Overdue("reject", waiting, f"no decision within {waited}")

"""The call a spent ``ask`` fleet budget holds a run on (:mod:`tether.approvals.budget_ask`), as
the deadlines (:mod:`tether.approvals.deadlines`) and every listing know it: its name, and
whether it is still to be decided (its rejection is :func:`tether.approvals.decisions.declined`).
It imports no events: the listings read the name."""

from __future__ import annotations

from tether.vocab.state import NeedsApproval, RunState

BUDGET = "budget"
"""The name of the call a spent ``ask`` budget is asked as (what rules name: ``--ask budget``)."""


def undecided(state: RunState, waiting: NeedsApproval | None) -> bool:
    """Whether ``waiting`` is a budget call nobody has finished deciding (none, or one of two)."""
    if waiting is None or waiting.tool_name != BUDGET or not waiting.call_id.startswith(f"{BUDGET}:"):
        return False
    decision = state.approvals.get(waiting.call_id)
    return decision is None or (decision.verdict == "approved" and not decision.complete)

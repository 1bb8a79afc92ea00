"""The call a spent ``ask`` fleet budget holds a run on (:mod:`tether.approvals.budget_ask`), as
the deadlines (:mod:`tether.approvals.deadlines`) also know it: its name, whether it is still
to be decided, and its rejection by a deadline."""

from __future__ import annotations

from tether.vocab.events import ApprovalDecision
from tether.vocab.state import Decision, NeedsApproval, RunState, args_hash

BUDGET = "budget"
"""The name of the call a spent ``ask`` budget is asked as (what rules name: ``--ask budget``)."""


def undecided(state: RunState, waiting: NeedsApproval | None) -> bool:
    """Whether ``waiting`` is a budget call nobody has finished deciding (none, or one of two)."""
    if waiting is None or waiting.tool_name != BUDGET or not waiting.call_id.startswith(f"{BUDGET}:"):
        return False
    decision = state.approvals.get(waiting.call_id)
    return decision is None or (decision.verdict == "approved" and not decision.complete)


def declined(state: RunState, waiting: NeedsApproval, text: str, by: str) -> ApprovalDecision:
    """Reject the budget call ``waiting`` (a deadline's ``reject``): recorded, and the run's next
    check (:func:`tether.approvals.budget_ask.check`) ends it as a budget exit, as a person's rejection does."""
    state.approvals[waiting.call_id] = Decision(waiting.call_id, "rejected", args_hash(waiting.args), text, by,
                                                tool=BUDGET, args=waiting.args, asked_at=waiting.asked_at)
    return ApprovalDecision(run_id=state.run_id, call_id=waiting.call_id, tool=BUDGET, verdict="rejected",
                            text=f"declined by {by}: {text}", by=by)

"""``on_exceed = "ask"``: a fleet budget that, once spent, holds a running Tether run before its
next model call for a decision on a call named ``budget`` (docs/costs.md).

The call's id is ``budget:NAME@PERIOD:HEX`` and its arguments ``{"usd": N}``: what approving it
adds to the budget for that run only (a decision on it keeps the amount decided in its ``args``) (the approver names another amount with ``tether approve
RUN --args '{"usd": 2}'``; by default the budget's own ``usd``). The run then goes on until the
period's spend reaches the budget's ``usd`` plus what was approved for it this period, and asks
again. Rejecting ends the run as a budget exit, in words. Standing rules apply as to any call
(``tether rules add --allow budget`` approves at once with the default amount, ``--deny`` ends
the run, ``--ask budget --approvals 2`` wants two people), and so does a deadline (the ``ask``
rule's, else the run's ``decision_deadline_s``): at it the call is escalated once, or the run
stops with the call declined (``stop``), or the call is rejected (``reject``), which ends the
run as a budget exit, as a person's rejection does. Like the merge
(:mod:`tether.workspaces.merging`), the decision is taken on the saved run, then the run goes on
(:mod:`tether.actions.adopting`, through the run's driver).
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from tether.store.protocol import Store
from tether.vocab.audit import run_source
from tether.vocab.budget_call import BUDGET, undecided
from tether.approvals.holding import deadline_of, overdue, verdict_of
from tether.vocab.rules import Call
from tether.vocab.events import ApprovalDecision, ApprovalRequired
from tether.vocab.state import Cancelled, Decision, NeedsApproval, RunState, StateError, Status, args_hash
from tether.approvals.decisions import DEADLINE, close_on_stop, declined
import asyncio



def _prefix(budget: Any) -> str:
    return f"{BUDGET}:{budget.key()}:"


def lifted(state: RunState, budget: Any) -> float:
    """What approvals have added to ``budget`` for this run this period (dollars)."""
    total = 0.0
    for call_id, d in state.approvals.items():
        if call_id.startswith(_prefix(budget)) and d.verdict == "approved" and d.complete:
            total += amount(d.args, budget.usd)
    return total


def amount(args: str | None, default: float) -> float:
    if not args:
        return default
    return float(json.loads(args).get("usd", default))


def check_amount(args: str | None) -> str | None:
    """Why an approver's ``--args`` cannot lift a budget, in words, or None."""
    if args is None:
        return None
    parsed = json.loads(args)
    usd = parsed.get("usd") if isinstance(parsed, dict) else None
    extra = sorted(set(parsed) - {"usd"}) if isinstance(parsed, dict) else []
    if extra or isinstance(usd, bool) or not isinstance(usd, (int, float)) or not usd > 0:
        return ('a budget\'s approval takes {"usd": N}, N dollars more than 0 for this run (e.g. --args '
                '\'{"usd": 2}\'); nothing was decided')
    return None


def waits_on_budget(state: RunState) -> bool:
    waiting = state.interruption
    return (state.status is Status.INTERRUPTED and isinstance(waiting, NeedsApproval)
            and waiting.tool_name == BUDGET and waiting.call_id.startswith(f"{BUDGET}:"))


async def ask(budget: Any, total: float, state: RunState, rules: Any, emit: Any) -> NeedsApproval | str | None:
    """The run's ``budget`` call for a spent ``ask`` budget: a rule's allow (recorded, None: go
    on), a rule's deny (words: a budget exit), else the approval the run waits on."""
    why = (f"budget {budget.name} (${budget.usd:.2f}/{budget.per}) reached: ${total:.2f} spent; approve to go on "
           f"(approving adds ${budget.usd:.2f} for this run; another amount: --args '{{\"usd\": N}}')")
    call_id = f"{_prefix(budget)}{uuid.uuid4().hex[:8]}"
    raw = json.dumps({"usd": budget.usd})
    agent = state.agent.name if state.agent is not None else state.model
    verdict = await verdict_of(rules, Call(BUDGET, {"usd": budget.usd, "budget": budget.name}, agent,
                                           run_source(state), state.run_id))
    rule = verdict.rule if verdict is not None else None
    if rule is not None and rule.effect in ("allow", "deny"):
        by = f"rule {rule.id}"
        approved = rule.effect == "allow"
        state.approvals[call_id] = Decision(call_id, "approved" if approved else "rejected", args_hash(raw),
                                            rule.note(), by, used=not approved, tool=BUDGET, args=raw, rule=rule.id,
                                            asked_at=time.time())
        emit(ApprovalDecision(run_id=state.run_id, call_id=call_id, tool=BUDGET,
                              verdict="approved" if approved else "rejected", text=verdict.words(), by=by,  # type: ignore[union-attr]
                              rule=rule.id))
        return None if approved else f"{why.split('; approve')[0]}; declined by {by}: the run ended as a budget exit"
    needed = rule.approvals if rule is not None else 1
    deadline_s, on_deadline = deadline_of(rule, state.policies)
    asked_at = time.time()
    waiting = NeedsApproval(call_id, BUDGET, raw, why, asked_at, needed, (),
                            asked_at + deadline_s if deadline_s else None, on_deadline, rule=rule.id if rule else None)
    emit(ApprovalRequired(run_id=state.run_id, call_id=call_id, tool=BUDGET, args=raw, why=why,
                          needed=needed if needed > 1 else None, deadline_at=waiting.deadline_at,
                          on_deadline=on_deadline if waiting.deadline_at else None, rule=waiting.rule))
    return waiting


def _past_deadline(state: RunState, waiting: NeedsApproval, emit: Any) -> NeedsApproval | Cancelled | None:
    """The step a budget call whose deadline passed takes (as any call's, tether.approvals.holding):
    escalated (the call it waits on now), the run stopped with the call declined (``stop``), or
    the call rejected (recorded; None: the check then ends the run as a budget exit)."""

    assert waiting.deadline_at is not None
    step = overdue(waiting, max(waiting.deadline_at - (waiting.asked_at or waiting.deadline_at), 1.0))
    if step.event is not None:
        step.event.run_id = state.run_id
        emit(step.event)
        return step.waiting
    if step.action == "stop":
        emit(close_on_stop(state, waiting.call_id, step.words, DEADLINE, asked_at=waiting.asked_at, tool=BUDGET))
        return Cancelled(step.words, DEADLINE)
    emit(declined(state, waiting, step.words, DEADLINE))
    return None


def decide(state: RunState, request: Any) -> ApprovalDecision:
    """``tether approve`` / ``reject`` (any route) on a run waiting on its ``budget`` call,
    made on its state: the event that records it. An approval lifts the budget for this run by
    its ``usd``; a rejection is recorded, and the run, going on, ends at once as a budget exit
    (:func:`check`)."""
    waiting = state.interruption
    assert isinstance(waiting, NeedsApproval)
    if request.call_id not in (None, waiting.call_id):
        raise StateError(f"run {state.run_id} waits on its budget call {waiting.call_id}, not {request.call_id}")
    if request.kind != "approve":
        state.approvals[waiting.call_id] = Decision(waiting.call_id, "rejected", args_hash(waiting.args), request.text,
                                                    request.by, tool=BUDGET, args=waiting.args,
                                                    asked_at=waiting.asked_at, account=request.account)
        return ApprovalDecision(run_id=state.run_id, call_id=waiting.call_id, tool=BUDGET, verdict="rejected",
                                text=f"declined by {request.by}" + (f": {request.text}" if request.text else ""),
                                by=request.by)
    problem = check_amount(request.args)
    if problem:
        raise StateError(problem)
    if request.by in waiting.approvers:
        raise StateError(f"{request.by} approved budget call {waiting.call_id} already: another person must")
    approvers = [*waiting.approvers, request.by]
    decision = Decision(waiting.call_id, "approved", args_hash(request.args or waiting.args), request.text,
                        request.by, tool=BUDGET, args=request.args or waiting.args, approvers=approvers if waiting.needed > 1 else [],
                        needed=waiting.needed, asked_at=waiting.asked_at, account=request.account)
    state.approvals[waiting.call_id] = decision
    tally = f"{len(approvers)} of {waiting.needed}" if waiting.needed > 1 else None
    if not decision.complete:
        state.interruption = NeedsApproval(waiting.call_id, BUDGET, waiting.args, waiting.why, waiting.asked_at,
                                           waiting.needed, tuple(approvers), rule=waiting.rule)
    usd = amount(request.args, json.loads(waiting.args)["usd"])
    return ApprovalDecision(run_id=state.run_id, call_id=waiting.call_id, tool=BUDGET,
                            verdict="approved" if decision.complete else "pending",
                            text=f"approved by {request.by}: ${usd:.2f} more for this run", by=request.by,
                            args=request.args, tally=tally)


async def check(fleet: Any, store: Store, state: RunState, rules: Any, emit: Any,
                asked: NeedsApproval | None = None, *, settle: bool = False) -> str | NeedsApproval | Cancelled | None:
    """The fleet budgets before a model call: their levels reached go into the run's trace, a
    reached ``stop`` budget's words stop the run, a reached ``ask`` budget asks.
    ``asked``: the call the run waited on before (undecided, or one of two approved): it is
    waited on again, not asked anew, unless its deadline passed, which is then applied (a
    :class:`Cancelled`: the run stops, its call declined). ``settle``: the run is ending; its
    spend is charged and its levels said, nothing is stopped or asked (None)."""

    reached, levels = await asyncio.to_thread(fleet.before_call, store, state)
    emit = emit or (lambda event: None)
    for event in levels:
        emit(event)
    if settle:
        return None
    if not undecided(state, asked):
        asked = None
    elif asked is not None and asked.deadline_at is not None and time.time() >= asked.deadline_at:
        after = _past_deadline(state, asked, emit)
        if isinstance(after, Cancelled):
            return after
        asked = after
    for call_id, d in state.approvals.items():  # a rejected budget call: the run ends here
        if call_id.startswith(f"{BUDGET}:") and d.verdict == "rejected" and not d.used:
            d.used = True
            name = call_id.split(":", 2)[1].rsplit("@", 1)[0]
            return (f"budget {name} reached: going on past it was declined by {d.by}"
                    + (f" ({d.text})" if d.text else "") + "; the run ended as a budget exit")
    if isinstance(reached, tuple):
        if asked is not None and asked.call_id.startswith(_prefix(reached[0])):
            return asked  # the same call, waited on again (its deadline counts from its asking)
        return await ask(*reached, state, rules, emit)
    return reached

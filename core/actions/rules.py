"""A new standing rule decides the calls already waiting that it fits (``tether rules add``,
the console's rule made from a call): each decision goes the way a person's does
(:func:`tether.actions.control.deliver`), recorded as the rule's (``rule R4``)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tether.actions.control import deliver
from tether.approvals.holding import too_late
from tether.store.control import ControlRequest
from tether.store.protocol import Store, call
from tether.vocab.audit import run_source
from tether.vocab.rules import Call, Rule, decide
from tether.vocab.state import NeedsApproval, RunState, StateError

if TYPE_CHECKING:
    from tether.store.summary import RunSummary


@dataclass(frozen=True, slots=True)
class Applied:
    """What a new rule did to one waiting call: ``decided`` when it was delivered."""

    run_id: str
    call_id: str
    tool: str
    decided: bool
    words: str


def waits_for_approval(summary: RunSummary) -> bool:
    """The run holds a call for a decision (saved interrupted at it, or saved running by a
    process that waits for one)."""
    return (summary.interruption or {}).get("type") == NeedsApproval.type and summary.status in ("interrupted",
                                                                                                "running")


def call_of(state: RunState, waiting: NeedsApproval) -> Call:
    """The waiting call as the rules see it (the agent as the loop names it)."""
    try:
        args = json.loads(waiting.args or "{}")
    except ValueError:
        args = {}
    agent = state.agent.name if state.agent is not None else state.model
    return Call(waiting.tool_name, args if isinstance(args, dict) else {}, agent, run_source(state),  # type: ignore[arg-type]
                state.run_id)


def held_back(rule: Rule, waiting: NeedsApproval, now: float) -> str | None:
    """Why ``rule`` (an allow or a deny), which fits ``waiting``, still does not decide it, in
    words; None when it does: a rule made after the call's deadline is as late as a person
    (the deadline decides), and an allow does not stand in for the people a two-person call
    needs."""
    if too_late(waiting, now):
        return f"its decision deadline has passed: the deadline decides it ({waiting.on_deadline}), not a rule"
    if rule.effect == "allow" and waiting.needed > 1:
        return f"a rule does not count as a person: the call needs {waiting.needed} people, so it waits for them"
    return None


def decides_now(rule: Rule, state: RunState, waiting: NeedsApproval, now: float | None = None) -> str | None:
    """Why ``rule``, made from the call ``waiting`` in ``state`` (the console's rule made from
    a call), does not decide that call now, in words; None when its decision goes the way a
    person's does."""
    missed = rule.misses(call_of(state, waiting))
    if missed is not None:
        return f"rule {rule.id} does not fit this call ({missed}): it still waits for a decision"
    if rule.effect == "ask":  # an ask decides nothing: it holds the calls it fits for people
        return (f"rule {rule.id} asks for people ({rule.describe()}): it decides nothing by itself, so this call "
                "still waits for a decision")
    held = held_back(rule, waiting, time.time() if now is None else now)
    return None if held is None else f"rule {rule.id} is saved, but {held}; this call still waits for a decision"


async def apply_to_waiting(store: Store, rule: Rule) -> list[Applied]:
    """Deliver ``rule``'s decision to every call on the store that waits for one and that
    the store's rules, ``rule`` among them, now leave to ``rule`` (an allow or a deny): to
    the process (or the queue worker's workflow) that holds the run waiting, through the
    control channel, as any decision. A run nobody holds is left for its next resume: the
    loop consults the rules itself. An allow does not stand in for the people a
    two-person call needs."""
    if rule.effect == "ask":
        return []
    rules = await call(store, store.rules)
    out: list[Applied] = []
    for summary in await call(store, store.summaries):
        if not waits_for_approval(summary):
            continue
        try:
            state = await call(store, store.load, summary.run_id)
        except StateError:
            continue
        waiting = state.interruption
        if not isinstance(waiting, NeedsApproval):
            continue
        verdict = decide(rules, call_of(state, waiting))
        if verdict is None or verdict.rule.id != rule.id:
            continue
        what = f"{waiting.tool_name} ({waiting.call_id}) in {state.run_id}"
        held = held_back(rule, waiting, time.time())
        if held is not None:
            out.append(Applied(state.run_id, waiting.call_id, waiting.tool_name, False,
                               f"{rule.id} fits {what}, but {held}"))
            continue
        kind = "approve" if rule.effect == "allow" else "reject"
        request = ControlRequest(kind, rule.note(), call_id=waiting.call_id, by=f"rule {rule.id}", rule=rule.id)
        reply = await deliver(store, state.run_id, request)
        if reply is None:
            out.append(Applied(state.run_id, waiting.call_id, waiting.tool_name, False,
                               f"{rule.id} fits {what}, which no process holds: it decides the call when the run "
                               f"goes on (tether resume {state.run_id})"))
        elif reply.ok:
            verb = "approved" if kind == "approve" else "rejected"
            out.append(Applied(state.run_id, waiting.call_id, waiting.tool_name, True, f"{rule.id} {verb} {what}"))
        else:
            out.append(Applied(state.run_id, waiting.call_id, waiting.tool_name, False,
                               f"{rule.id} fits {what}, but: {reply.words}"))
    return out

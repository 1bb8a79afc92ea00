"""The record of decisions: who decided what, on which call, by what, and how long it waited.

Every decision a run holds (:attr:`tether.vocab.state.RunState.approvals`) is also a row of the
store's index, written when the run is saved, so ``tether decisions`` answers from the
index for the whole store without replaying a journal. :func:`records_of` is the one
place that turns a run into those rows; both stores call it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from tether.vocab.budget_call import BUDGET
from tether.vocab import people

if TYPE_CHECKING:
    from tether.vocab.state import RunState


@dataclass(frozen=True, slots=True)
class DecisionRecord:
    """One decision, as ``tether decisions`` lists it."""

    run_id: str
    call_id: str
    tool: str
    agent: str
    source: str
    """``tether``, ``acp`` or ``program``."""
    args: str
    """The arguments the model asked with (JSON)."""
    edited_args: str | None
    """The operator's, when edited before approval."""
    verdict: str
    """``approved``, ``rejected`` or ``pending`` (some of the people a call needs approved)."""
    words: str
    """The note or reason, as the decider gave it."""
    by: str
    """The person's name (``--as`` name, a web login, or user@host), or ``rule R3``."""
    rule: str | None
    approvers: tuple[str, ...]
    ts: float
    waited_s: float | None
    """From the call's asking to this decision, when known."""
    account: str | None = None
    """The account that authenticated the decision (:mod:`tether.vocab.people`), when a person's."""
    accounts: tuple[str, ...] = ()
    """The account of each of :attr:`approvers`, in the same order."""
    needed: int = 1
    """How many people the call needs: a ``pending`` record has some of them."""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["approvers"] = list(self.approvers)
        data["accounts"] = list(self.accounts)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "DecisionRecord":
        return cls(**{**data, "approvers": tuple(data.get("approvers") or ()),
                      "accounts": tuple(data.get("accounts") or ())})

    @property
    def outcome(self) -> str:
        """The verdict as a listing shows it: ``1 of 2`` while a call that needs several
        people still waits for some of them."""
        if self.verdict == "pending" and self.needed > 1:
            return f"{len(self.approvers)} of {self.needed}"
        return self.verdict

    @property
    def deciders(self) -> str:
        """Who decided, as shown: every approver of a call that needs several people, else the
        one decider, each with the account that counts when the name does not say it."""
        if self.approvers:
            return people.shown_all(self.approvers, self.accounts)
        return people.shown(self.by, self.account)


@dataclass(frozen=True, slots=True)
class DecisionQuery:
    """Which decisions to list: since a time, by an agent's runs, by a decider; newest first."""

    since: float | None = None
    agent: str | None = None
    by: str | None = None
    """A person's name or account, or a rule's id (``R3``): matched without regard to case."""
    limit: int | None = None

    def admits(self, record: DecisionRecord) -> bool:
        """The same selection as a store's query, for stores that filter in Python."""
        if self.since is not None and record.ts < self.since:
            return False
        if self.agent is not None and record.agent != self.agent:
            return False
        return self.by is None or any(people.same(self.by, who) for who in (
            record.by, record.rule, record.account, *record.approvers, *record.accounts))


def records_of(state: RunState) -> Iterator[DecisionRecord]:
    """The decisions ``state`` holds, as index rows."""
    calls = _calls(state)
    agent = state.agent.name if state.agent is not None else ""
    source = run_source(state)
    for call_id, decision in state.approvals.items():
        tool, args = calls.get(call_id, (decision.tool, "{}"))
        edited = decision.args
        if call_id not in calls and decision.tool == BUDGET:  # a fleet budget's: the dollars asked or lifted
            args, edited = decision.args or "{}", None
        verdict = decision.verdict if decision.complete else "pending"
        waited = decision.ts - decision.asked_at if decision.asked_at is not None else None
        yield DecisionRecord(state.run_id, call_id, decision.tool or tool, agent, source, args, edited,
                             verdict, decision.text, decision.by, decision.rule, tuple(decision.approvers),
                             decision.ts, None if waited is None else max(0.0, round(waited, 3)),
                             decision.account, tuple(decision.accounts), decision.needed)


def run_source(state: RunState) -> str:
    """Where a run's turns come from: ``acp`` for an ACP agent's; for one reported through
    the run API, its framework (``openai-agents``, ``pydantic-ai``, ``claude-code``) or
    ``program``; else ``tether``."""
    spec = state.agent.spec if state.agent is not None else {}
    if spec.get("acp"):
        return "acp"
    return str(spec.get("program") or "tether")


def _calls(state: RunState) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for message in state.messages:
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or ():
                fn = call.get("function") or {}
                args = fn.get("arguments")
                out[str(call.get("id"))] = (str(fn.get("name") or ""),
                                            args if isinstance(args, str) else json.dumps(args or {}))
    return out


def when(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts))

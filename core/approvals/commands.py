"""What ``tether rules`` and ``tether decisions`` do with a store, worded for a terminal.

The CLI (:mod:`tether.tui.cli`) parses the command line and prints; the work is here: times
and durations as an operator types them, the tools and agents a new rule is checked
against, a new rule deciding the calls already waiting, a call's rules explained, the
record of decisions as a table. Every refusal is a :class:`~tether.approvals.RuleError`
or a :class:`~tether.vocab.state.StateError` in words, raised before anything is changed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tether.vocab.audit import DecisionRecord, run_source, when
from tether.approvals.holding import too_late
from tether.vocab.rules import Call, Rule, RuleError, decide, explain, format_duration, parse_duration
from tether.store.protocol import call
from tether.vocab import people
from tether.vocab.state import Decision, NeedsApproval, RunState, StateError
from tether.vocab.text import clean

if TYPE_CHECKING:
    from tether.agents.sets import AgentSet
    from tether.store.control import ControlReply, ControlRequest
    from tether.store.summary import RunSummary
    from tether.store.protocol import Store

Deliver = Callable[["Store", str, "ControlRequest"], Awaitable["ControlReply | None"]]
"""Hands a decision to whoever holds the run waiting for it; None when nobody does."""

ARGS_SHOWN = 48
"""How much of a call's arguments a line of ``tether decisions`` shows."""


# ---- times as typed: 2026-12-03, 2026-12-03T10:00, or a duration ------------------------

def parse_time(text: str, *, option: str, ago: bool, now: float | None = None) -> float:
    """``text`` as a time: an ISO date or date and time (local unless it says otherwise),
    or a duration (``7d``, ``2h``) before ``now`` (``ago``) or after it."""
    now = time.time() if now is None else now
    cleaned = text.strip()
    try:
        return datetime.fromisoformat(cleaned.replace("Z", "+00:00")).timestamp()
    except ValueError:
        pass
    try:
        seconds = parse_duration(cleaned)
    except RuleError:
        direction = "ago" if ago else "from now"
        raise RuleError(f"{option} {text!r} is neither a date nor a duration: write 2026-12-01, "
                        f"2026-12-01T09:00, or a duration {direction} such as 7d or 2h") from None
    return now - seconds if ago else now + seconds


def deadline_policy(deadline: str | None, on_deadline: str | None) -> dict[str, Any]:
    """``--decision-deadline`` and ``--on-deadline`` as a run's policies
    (:class:`tether.vocab.state.Policies`); what is unset is left out, so the agent's own hold."""
    out: dict[str, Any] = {}
    if deadline is not None:
        out["decision_deadline_s"] = parse_duration(deadline)
    if on_deadline is not None:
        out["on_deadline"] = on_deadline
    return out


# ---- what a new rule is checked against ------------------------------------------------

def known_tools(config: Any, agent_sets: Sequence[AgentSet] = ()) -> tuple[dict[str, Mapping[str, Any] | None],
                                                                             list[str]]:
    """The tools known here with their JSON schemas (the agent file's agents' own tools and
    those of the agent sets' agents; an MCP server's are known only once started, so they are
    not here), and the agents' names (the agent file's and the sets': the demo scenarios)."""
    tools: dict[str, Mapping[str, Any] | None] = {}
    agents: list[str] = []
    for agent_set in agent_sets:
        agents.extend(agent_set.agents())
        tools.update({t.name: t.parameters for t in agent_set.tools()})
    if config is not None:
        for name, agent in config.agents().items():
            agents.append(name)
            for tool in agent.tool_list:
                tools[tool.name] = tool.parameters
    return tools, agents


# ---- listing rules ------------------------------------------------------------------------

def rule_line(rule: Rule, now: float) -> str:
    """One rule as ``tether rules`` shows it: id, what it does and fits, scope, why, who and
    when, and its expiry (an expired one is marked)."""
    line = f"{rule.id:<5} {rule.describe()}  [{rule.scope}]  {rule.reason}  ({rule.by}, {when(rule.created)[:10]})"
    if rule.expires is not None:
        line += f"  {'EXPIRED' if rule.expired(now) else 'expires'} {when(rule.expires)[:16]}"
    return clean(line, keep_newlines=False)


def rule_json(rule: Rule, now: float) -> dict[str, Any]:
    return {**rule.to_dict(), "describe": rule.describe(), "expired": rule.expired(now)}


# ---- a new rule decides the calls already waiting ---------------------------------------

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


async def apply_to_waiting(store: Store, rule: Rule, deliver: Deliver) -> list[Applied]:
    """Deliver ``rule``'s decision to every call on the store that waits for one and that
    the store's rules, ``rule`` among them, now leave to ``rule`` (an allow or a deny): to
    the process (or the queue worker's workflow) that holds the run waiting, through the
    control channel, as any decision. A run nobody holds is left for its next resume: the
    loop consults the rules itself. An allow does not stand in for the people a
    two-person call needs. ``deliver`` hands a decision to whoever holds a run
    (:func:`tether.workers.deliver.deliver`, given by the caller: the approvals import no worker)."""
    from tether.store.control import ControlRequest

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
        if too_late(waiting, time.time()):  # a rule made after the deadline is as late as a person
            out.append(Applied(state.run_id, waiting.call_id, waiting.tool_name, False,
                               f"{rule.id} fits {what}, but its decision deadline has passed: the deadline "
                               f"decides it ({waiting.on_deadline}), not a rule"))
            continue
        if rule.effect == "allow" and waiting.needed > 1:
            out.append(Applied(state.run_id, waiting.call_id, waiting.tool_name, False,
                               f"{rule.id} fits {what}, which needs {waiting.needed} people: left for them"))
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


# ---- tether rules explain ---------------------------------------------------------------

def explain_call(state: RunState, call_id: str, rules: Sequence[Rule], now: float | None = None) -> list[str]:
    """Which of ``rules`` decide call ``call_id`` of the run, and why each other does not;
    with how the call was decided, when it was."""
    found = None
    for message in state.messages:
        for tool_call in message.get("tool_calls") or ():
            if tool_call.get("id") == call_id:
                found = tool_call.get("function") or {}
    if found is None:
        raise StateError(f"run {state.run_id} has no call {call_id!r}; tether show {state.run_id} lists its calls "
                         "(the id after each one)")
    raw = found.get("arguments")
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw or {}
    except ValueError:
        args = {}
    agent = state.agent.name if state.agent is not None else state.model
    subject = Call(str(found.get("name") or ""), args if isinstance(args, dict) else {}, agent,
                   run_source(state), state.run_id)  # type: ignore[arg-type]
    lines = [f"{call_id}: {subject.tool} {_short(raw if isinstance(raw, str) else json.dumps(args), 200)} "
             f"(agent {agent}, source {subject.source})"]
    decision = state.approvals.get(call_id)
    if decision is not None:
        lines.append(f"recorded: {recorded_words(decision)}, {when(decision.ts)}")
    lines.append(f"the store's {len(rules)} rule{'s' if len(rules) != 1 else ''} now:")
    lines += ["  " + line for line in explain(rules, subject, now=now)]
    return [clean(line, keep_newlines=False) for line in lines]


def recorded_words(decision: Decision) -> str:
    """How a call was decided, in words: ``approved by ana``; for a call that needs several
    people, how far it is (``1 of 2 approved (ana): one more person must approve…``)."""
    if decision.needed > 1 and decision.verdict == "approved":
        return people.still_needed(decision.needed, decision.approvers, decision.accounts)
    return f"{decision.verdict} by {people.shown(decision.by, decision.account)}"


# ---- tether decisions -------------------------------------------------------------------

def decision_line(record: DecisionRecord) -> str:
    """One decision: when, run, tool, arguments (short), verdict, by whom, how long it waited
    (raw: :func:`decision_table` makes the table display-safe, once for all its lines). A
    call that needs several people still waiting shows how far it is (``1 of 2``), and
    every approver with the account that counts."""
    verdict = record.outcome
    if record.edited_args is not None:
        verdict += " (edited)"
    waited = "-" if record.waited_s is None else format_duration(round(record.waited_s, 1))
    args = _short(record.edited_args if record.edited_args is not None else record.args, ARGS_SHOWN)
    return (f"{when(record.ts)}  {record.run_id:<36} {record.tool:<16} {args:<{ARGS_SHOWN}}  "
            f"{verdict:<9} {_one_line(record.deciders):<20} {waited}")


def decision_table(records: Iterable[DecisionRecord]) -> str:
    """``tether decisions``' table: a header, then a line a decision, in ``records``' order."""
    header = (f"{'when':<19}  {'run':<36} {'tool':<16} {'arguments':<{ARGS_SHOWN}}  {'verdict':<9} "
              f"{'by':<20} waited")
    return clean("\n".join([header, *map(decision_line, records)]))


def decisions_json(records: Sequence[DecisionRecord]) -> str:
    """``tether decisions --json``: each record's fields, as :meth:`DecisionRecord.to_dict`
    gives them, read straight off the record (``to_dict``'s ``asdict`` copies each one
    deeply: a second for 10,000 records, where this takes a tenth of that)."""
    names = [f.name for f in fields(DecisionRecord)]
    return json.dumps([{name: getattr(r, name) for name in names} for r in records])


def _one_line(text: str) -> str:
    return text if "\n" not in text else text.replace("\n", " ")


def _short(text: str | None, limit: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def expiry_note(rule: Rule) -> str | None:
    """A word on a rule that will not last (shown when it is added)."""
    if rule.expires is None:
        return None
    return f"it expires {when(rule.expires)[:16]} (in {format_duration(rule.expires - time.time())})"



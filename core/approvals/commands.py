"""What ``tether rules`` and ``tether decisions`` do with a store, worded for a terminal.

The CLI (:mod:`tether.tui.cli`) parses the command line and prints; the work is here: times
and durations as an operator types them, the tools and agents a new rule is checked
against, a call's rules explained, the record of decisions as a table (a new rule deciding
the calls already waiting is an operator's action: :mod:`tether.actions.rules`). Every
refusal is a :class:`~tether.approvals.RuleError` or a :class:`~tether.vocab.state.StateError`
in words, raised before anything is changed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import fields
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tether.vocab.audit import DecisionRecord, run_source, when
from tether.vocab.rules import Call, Rule, RuleError, explain, format_duration, parse_duration
from tether.vocab import people
from tether.vocab.state import Decision, RunState, StateError
from tether.vocab.text import clean

if TYPE_CHECKING:
    from tether.agents.sets import AgentSet

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



"""Deciding a call that waits for approval: approve it (once per person it needs), reject it,
check the operator's edited arguments, and the words the model reads about each decision.

Plain functions over :class:`~tether.vocab.state.RunState`, so that the harness, a deadline,
an ACP agent and a program all decide a call the same way, and the loop reads the same
words back when it goes on.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tether.agents.tools.base import Tool, offered_name, schema_problem
from tether.vocab import budget_call, people
from tether.vocab.wording import DEADLINE, already_decided
from tether.vocab.events import ApprovalDecision, Event, run_stopped
from tether.vocab.state import Cancelled, Decision, NeedsApproval, RunState, StateError, Status, args_hash, pending_calls
from tether.vocab.text import json_words

if TYPE_CHECKING:
    import jsonschema


def _operator(by: str) -> str:
    return "the operator" if not by or by == "operator" else f"the operator {by}"


class TooLate(StateError):
    """A decision that came after its call's deadline: not taken. The deadline was applied
    instead, and the words say so, and what it did."""


def declined_words(reason: str, by: str = "operator") -> str:
    reason = reason.strip().rstrip(".")
    if by.startswith("rule "):
        return f"Declined by {by} ({reason}). Nothing was done."
    if by == DEADLINE:
        return f"{reason.capitalize()}: the call was declined. Nothing was done."
    return f"{_operator(by).capitalize()} declined this call: {reason or 'no reason given'}. Nothing was done."


def approved_words(note: str, by: str = "operator") -> str:
    note = note.strip().rstrip(".")
    who = by if by.startswith("rule ") else _operator(by)
    return f"Approved by {who}{f' ({note})' if note else ''}."


def edited_words(decision: Decision, asked: str) -> str:
    """What the model reads when its call ran with the operator's arguments."""
    def shown(raw: str | None) -> str:
        try:
            return json.dumps(json.loads(raw or "{}"), ensure_ascii=False)
        except ValueError:
            return str(raw)

    return (f"{approved_words(decision.text, decision.by)[:-1]}, with changed arguments: it ran with "
            f"{shown(decision.args)} (you asked for {shown(asked)}).")



def _waiting_call(state: RunState, call_id: str | None) -> dict[str, Any]:
    waiting = state.interruption
    if state.status is not Status.INTERRUPTED or not isinstance(waiting, NeedsApproval):
        earlier = state.approvals.get(call_id) if call_id else None
        if earlier is None and isinstance(waiting, Cancelled) and waiting.by == DEADLINE:
            earlier = max(state.approvals.values(), key=lambda d: d.ts, default=None)  # what the deadline decided
        if earlier is not None and earlier.by == DEADLINE:
            raise TooLate(already_decided(earlier))
        if earlier is not None:
            raise StateError(f"call {call_id} of run {state.run_id} was already {earlier.verdict} by "
                             f"{earlier.by}; there is one decision per call")
        if isinstance(waiting, Cancelled):
            by = f", by {waiting.by}" if waiting.by else ""
            raise StateError(f"run {state.run_id} is not waiting for an approval: it was stopped ({waiting.reason}{by})")
        raise StateError(f"run {state.run_id} is not waiting for an approval (status {state.status.value})")
    wanted = call_id or waiting.call_id
    for call in pending_calls(state):
        if call.get("id") == wanted:
            return call
    raise StateError(f"run {state.run_id} has no pending call {wanted!r}")


def approve(state: RunState, call_id: str | None = None, note: str = "", by: str = "operator", *,
            args: str | None = None, rule: str | None = None, account: str | None = None) -> ApprovalDecision:
    """Approve the waiting call, bound to its id and exact arguments; it runs on resume.

    ``args``: the operator's edited arguments (JSON, already checked against the tool's
    schema: :func:`check_edit`); the approval binds to them, and to the model's arguments it
    answers. ``account``: what authenticated the decision (:mod:`tether.vocab.people`). A call
    that needs two people is approved once by each account: the first approval is recorded
    as ``1 of 2`` and the call keeps waiting; the same person twice (the same account, or
    the same name) is refused."""
    call = _waiting_call(state, call_id)
    fn = call["function"]
    asked = fn.get("arguments") or "{}"
    waiting = state.interruption if isinstance(state.interruption, NeedsApproval) else None
    needed = waiting.needed if waiting is not None and waiting.call_id == call["id"] else 1
    earlier = state.approvals.get(call["id"])
    approvers: list[str] = []
    accounts: list[str] = []
    if earlier is not None and not earlier.complete and earlier.verdict == "approved":
        repeat = people.repeat_words(fn.get("name", ""), call["id"], earlier.needed, earlier.approvers,
                                     earlier.accounts, by, account)
        if repeat is not None:
            raise StateError(repeat)
        if (earlier.args or None) != (args or None):
            raise StateError(f"{', '.join(earlier.approvers)} approved {fn.get('name', '')} with "
                             f"{'the arguments ' + earlier.args if earlier.args else 'the model’s arguments'}: "
                             "a second approval must be of the same arguments (or reject it)")
        approvers, accounts, needed = list(earlier.approvers), people.padded(earlier.approvers, earlier.accounts), \
            earlier.needed
    approvers.append(by)
    accounts.append(account or "")
    bound = args_hash(args) if args is not None else args_hash(asked)
    decision = Decision(call["id"], "approved", bound, note, by, tool=fn.get("name", ""), args=args,
                        asked_hash=args_hash(asked) if args is not None else None, rule=rule,
                        approvers=approvers if needed > 1 else [], needed=needed,
                        asked_at=_asked_at(waiting, earlier), account=account,
                        accounts=accounts if needed > 1 and any(accounts) else [])
    state.approvals[call["id"]] = decision
    tally = f"{len(approvers)} of {needed}" if needed > 1 else None
    words = approved_words(note, by)
    if tally and not decision.complete:
        words = f"{words} {tally} approved: {needed - len(approvers)} more must approve."
    return ApprovalDecision(run_id=state.run_id, call_id=call["id"], tool=fn.get("name", ""),
                            verdict="approved" if decision.complete else "pending", text=words, by=by,
                            args=args, rule=rule, tally=tally)


class _KeyTwice(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _keys_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _KeyTwice(key)
        out[key] = value
    return out


def parse_edit(text: str) -> dict[str, Any]:
    """The operator's edited arguments (``tether approve --args``, the console's editor, the
    web page's form) as a JSON object; a ValueError, in words, when they are not one. A key
    given twice is refused: JSON readers keep the last one silently, and the operator may
    have meant the first."""
    try:
        parsed = json.loads(text, object_pairs_hook=_keys_once)
    except _KeyTwice as twice:
        raise ValueError(f"the edited arguments give the key {json.dumps(twice.key, ensure_ascii=False)} twice: "
                         "say each key once") from None
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"the edited arguments are not JSON ({json_words(exc)})") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"the edited arguments must be a JSON object of the call's arguments, "
                         f"not {type(parsed).__name__}")
    return parsed


def edit_json(text: str) -> str:
    """:func:`parse_edit`'s arguments as the compact JSON a decision carries."""
    return json.dumps(parse_edit(text), ensure_ascii=False)


def check_edit(tools: dict[str, Tool] | None, state: RunState, call_id: str | None, edited: str, *,
               unchecked: bool = False) -> str | None:
    """Why the operator's edited arguments for the waiting call cannot be used, in words, or
    None when they fit the tool's schema. ``tools``: the run's agent's (Tether's own loop);
    None for a program's run, whose waiting call carries the schema its program reported
    (:attr:`NeedsApproval.schema`). Where no schema is known the edit is refused, unless
    ``unchecked``: the operator takes it as it is."""
    waiting = state.interruption if isinstance(state.interruption, NeedsApproval) else None
    try:
        call = _waiting_call(state, call_id)
        name = str((call.get("function") or {}).get("name", ""))
    except StateError as exc:
        # A program's run may have reports after its waiting call (tether.run.tracked): its
        # waiting record names the call.
        if tools is not None or waiting is None or state.status is not Status.INTERRUPTED \
                or call_id not in (None, waiting.call_id):
            return str(exc)
        name = waiting.tool_name
    try:
        parsed = parse_edit(edited)
    except ValueError as exc:
        return f"{exc}; nothing was decided"
    if tools is not None:
        tool = tools.get(name) or next((t for t in tools.values() if offered_name(t.name) == name), None)
        if tool is None:
            return f"the arguments of {name} cannot be edited: the tool is not known here"
        problem = tool.check_args(parsed)
    elif waiting is not None and waiting.schema is not None:
        problem = _reported_schema_problem(waiting.schema, parsed)
    elif unchecked:
        return None
    else:
        return (f"the edited arguments cannot be checked: run {state.run_id}'s program did not report the schema of "
                f"{name}'s arguments, so Tether cannot tell whether the tool takes them; nothing was decided. "
                f"To approve them unchecked: tether approve {state.run_id} --args JSON --unchecked")
    return None if problem is None else f"the edited arguments do not fit {name}: {problem}; nothing was decided"


class NotASchema(ValueError):
    """A schema a program reported is no JSON schema (jsonschema's words): it would check nothing."""


def reported_validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    """The checker of a schema a program reported (its ``$schema``'s draft, else 2020-12, as
    for Tether's own tools); :class:`NotASchema` when it is no JSON schema."""
    # lazy: jsonschema loads at the first check, not at start-up (tests/processes/test_cold_start.py: stop and runs load none)
    import jsonschema

    kind = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        kind.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        raise NotASchema(exc.message) from None
    return kind(schema)


def _reported_schema_problem(schema: dict[str, Any], args: dict[str, Any]) -> str | None:
    """How ``args`` break a schema a program reported (:func:`schema_problem`), or None. A
    schema that is no JSON schema is said so: it checks nothing."""
    # lazy: jsonschema's (referencing) loads at the first check, not at start-up (tests/processes/test_cold_start.py)
    from referencing.exceptions import Unresolvable

    try:
        return schema_problem(reported_validator(schema), args)
    except NotASchema as exc:
        return f"the schema its program reported is not a JSON schema ({exc})"
    except Unresolvable as exc:  # a $ref that points nowhere
        return f"the schema its program reported cannot be read ({exc})"


def _asked_at(waiting: NeedsApproval | None, earlier: Decision | None) -> float | None:
    if earlier is not None and earlier.asked_at is not None:
        return earlier.asked_at
    return waiting.asked_at if waiting is not None else None


def reject(state: RunState, call_id: str | None = None, reason: str = "", by: str = "operator", *,
           rule: str | None = None, account: str | None = None) -> ApprovalDecision:
    """Decline the waiting call and write the decision, in words, into its result slot. Any
    one rejection rejects a call that needs two people."""
    call = _waiting_call(state, call_id)
    waiting = state.interruption if isinstance(state.interruption, NeedsApproval) else None
    return _reject_call(state, call, reason, by, rule=rule,
                        asked_at=_asked_at(waiting, state.approvals.get(call["id"])), account=account)


def _reject_call(state: RunState, call: dict[str, Any], reason: str, by: str, *, rule: str | None = None,
                 asked_at: float | None = None, account: str | None = None) -> ApprovalDecision:
    fn = call["function"]
    decision = Decision(call["id"], "rejected", args_hash(fn.get("arguments") or "{}"), reason, by, used=True,
                        tool=fn.get("name", ""), rule=rule, asked_at=asked_at, account=account)
    state.approvals[call["id"]] = decision
    words = declined_words(reason, by)
    state.messages.append({"role": "tool", "tool_call_id": call["id"], "content": words})
    state.failed_calls.append(call["id"])
    return ApprovalDecision(run_id=state.run_id, call_id=call["id"], tool=fn.get("name", ""),
                            verdict="rejected", text=words, by=by, rule=rule)


def close_on_stop(state: RunState, call_id: str, reason: str, by: str | None, *,
                  asked_at: float | None = None, tool: str = "") -> ApprovalDecision:
    """A Stop (a person's, or a deadline's ``stop``) of a run whose call waits for a decision
    ends the run, and the call with it: declined in words the model reads if the run goes on,
    and recorded as a decision by whoever stopped it, so ``tether decisions`` and ``tether
    show`` say what became of it."""
    call = next((c for c in pending_calls(state) if c.get("id") == call_id), None)
    if call is None:  # a call of Tether's own, not the model's (a fleet budget's: tether.approvals.budget_ask)
        waiting = state.interruption
        tool = tool or (waiting.tool_name if isinstance(waiting, NeedsApproval) else "")
        words = declined_words(f"the run was stopped ({reason})", by or "operator")
        state.approvals[call_id] = Decision(call_id, "rejected", "", f"the run was stopped ({reason})",
                                            by or "operator", used=True, tool=tool, asked_at=asked_at)
        return ApprovalDecision(run_id=state.run_id, call_id=call_id, tool=tool, verdict="rejected", text=words,
                                by=by or "operator")
    return _reject_call(state, call, f"the run was stopped ({reason})", by or "operator", asked_at=asked_at)


def end_waiting(state: RunState, reason: str, by: str | None) -> list[Event]:
    """Stop a run saved waiting for a decision (no loop drives it): its call is closed
    (:func:`close_on_stop`) and the run is ``interrupted`` with the reason. The events that
    record it, for the run's trace."""
    waiting = state.interruption
    if state.status is not Status.INTERRUPTED or not isinstance(waiting, NeedsApproval):
        raise StateError(f"run {state.run_id} is not waiting for an approval (status {state.status.value})")
    decided = close_on_stop(state, waiting.call_id, reason, by,
                            asked_at=_asked_at(waiting, state.approvals.get(waiting.call_id)))
    state.interruption = Cancelled(reason, by)
    return [decided, run_stopped(state, f"{reason} (by {by})" if by and by != DEADLINE else reason)]


def declined(state: RunState, waiting: NeedsApproval, text: str, by: str) -> ApprovalDecision:
    """Reject the budget call ``waiting`` (a deadline's ``reject``): recorded, and the run's next
    check (:func:`tether.approvals.budget_ask.check`) ends it as a budget exit, as a person's rejection does."""
    state.approvals[waiting.call_id] = Decision(waiting.call_id, "rejected", args_hash(waiting.args), text, by,
                                                tool=budget_call.BUDGET, args=waiting.args, asked_at=waiting.asked_at)
    return ApprovalDecision(run_id=state.run_id, call_id=waiting.call_id, tool=budget_call.BUDGET, verdict="rejected",
                            text=f"declined by {by}: {text}", by=by)

"""A Tether run as an editor sees it: its events, and its saved transcript, as ACP
``session/update`` notifications; how its end reads as a stop reason, and in words.

Everything here is a pure translation, so the events are read the moment they are emitted
(:class:`EventUpdates` is called from the run's own sinks, synchronously) and the state a
turn or a tool result refers to is the state of that moment, not of whenever the editor is
written to.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, Union

import acp
from acp import schema

from tether.vocab.events import (
    ApprovalDecision, Event, Plan, TextDelta, Thought, ToolProgress, ToolResult, ToolStart, Turn,
)
from tether.vocab.state import (
    Cancelled, MaxBudget, MaxTurns, NeedsApproval, ProviderOutage, RunState, Status, StopConditionMet,
)
from tether.models.tokens import content_text

SessionUpdate = Union[
    schema.UserMessageChunk, schema.AgentMessageChunk, schema.AgentThoughtChunk, schema.ToolCallStart,
    schema.ToolCallProgress, schema.AgentPlanUpdate, schema.UsageUpdate,
]
"""The updates Tether sends (a subset of what ``session/update`` may carry)."""

MAX_CONTENT_CHARS = 4000  # a tool's output shown in the editor; the whole of it stays on the store
_TITLE_ARGS_CHARS = 60
_KINDS: dict[str, schema.ToolKind] = {
    "read_file": "read", "list_files": "search", "delete_file": "delete", "write_file": "edit", "research": "think",
}
_RETRYING = "\n[the endpoint failed mid-reply: asking again]\n"


class EventUpdates:
    """One run's events as the updates an editor shows, made when each event is emitted.

    A turn's text arrives as deltas when the endpoint streams, else whole with the turn (the
    embedded scripted provider does not stream): the turn's text is sent once either way.
    A tool call is announced (``tool_call``) when the model asks for it, so the editor shows
    it before it runs or waits for a decision; its progress and result update it. A
    subagent's events (another run id) are its own run's, not this session's."""

    def __init__(self, run_id: str, state_of: Callable[[str], RunState | None]) -> None:
        self.run_id = run_id
        self._state_of = state_of
        self._streamed: set[int] = set()  # turns whose text came as deltas
        self._announced: set[str] = set()

    def __call__(self, event: Event) -> list[SessionUpdate]:
        if event.run_id != self.run_id:
            return []
        state = self._state_of(self.run_id)
        if isinstance(event, TextDelta):
            return self._delta(event)
        if isinstance(event, Turn):
            return self._turn(event, state)
        if isinstance(event, ToolStart):
            if event.call_id in self._announced:
                return [acp.update_tool_call(event.call_id, status="in_progress")]
            self._announced.add(event.call_id)
            return [announce(event.call_id, event.name, event.args, "in_progress")]
        if isinstance(event, ToolProgress) and event.call_id:
            return [acp.update_tool_call(event.call_id, status="in_progress", content=[_text(event.label)])]
        if isinstance(event, ToolResult):
            text = _tool_output(state, event.call_id) if state is not None else event.preview
            return [acp.update_tool_call(event.call_id, status="completed" if event.ok else "failed",
                                         content=[_text(text)])]
        if isinstance(event, ApprovalDecision):
            return [_decision(event)]
        if isinstance(event, Thought) and event.text:
            return [acp.update_agent_thought_text(event.text)]
        if isinstance(event, Plan):
            return [acp.update_plan([acp.plan_entry(e.get("content", ""), status=_plan_status(e.get("status")))
                                     for e in event.entries])]
        return []

    def _delta(self, event: TextDelta) -> list[SessionUpdate]:
        if event.text is None:  # the attempt failed and is asked again: what was shown cannot be taken back
            return [acp.update_agent_message_text(_RETRYING)] if event.turn in self._streamed else []
        self._streamed.add(event.turn)
        return [acp.update_agent_message_text(event.text)] if event.text else []

    def _turn(self, event: Turn, state: RunState | None) -> list[SessionUpdate]:
        out: list[SessionUpdate] = []
        message = _last_assistant(state)
        if message is not None:
            text = content_text(message.get("content"))
            if text and event.turn not in self._streamed:
                out.append(acp.update_agent_message_text(text))
            for call in message.get("tool_calls") or ():
                call_id = str(call.get("id") or "")
                if call_id and call_id not in self._announced:
                    self._announced.add(call_id)
                    fn = call.get("function") or {}
                    out.append(announce(call_id, str(fn.get("name") or "?"), str(fn.get("arguments") or ""),
                                        "pending"))
        out.append(usage_update(event.total_tokens, event.cost_usd, state, turn=event.turn,
                                prompt_tokens=event.prompt_tokens, completion_tokens=event.completion_tokens,
                                estimated=event.estimated))
        return out


def announce(call_id: str, name: str, args: str, status: schema.ToolCallStatus) -> schema.ToolCallStart:
    """A ``tool_call``: its name and a short form of its arguments as the title, the arguments
    themselves as ``rawInput``."""
    return acp.start_tool_call(call_id, tool_title(name, args), kind=tool_kind(name), status=status,
                               raw_input=raw_input(args))


def tool_kind(name: str) -> schema.ToolKind:
    """What kind of call the editor shows (its icon): Tether's file tools by name, else other."""
    return _KINDS.get(name, "other")


def tool_title(name: str, args: str) -> str:
    parsed = raw_input(args)
    if parsed in ({}, "", None):
        return name
    shown = json.dumps(parsed, separators=(",", ":"), ensure_ascii=False) if not isinstance(parsed, str) else parsed
    return f"{name} {shown if len(shown) <= _TITLE_ARGS_CHARS else shown[:_TITLE_ARGS_CHARS - 1] + '…'}"


def raw_input(args: str) -> Any:
    """A call's arguments as JSON when they are JSON (as the model sent them otherwise)."""
    try:
        return json.loads(args) if args else {}
    except ValueError:
        return args


def usage_update(used: int, cost_usd: float, state: RunState | None, **tether: Any) -> schema.UsageUpdate:
    """``usage_update``: the tokens of the last model call (what is in its context) and the run's
    running cost. Tether does not know a model's context window, so ``size`` is 0; what Tether
    counts besides (this turn's tokens, whether the price is assumed) is in ``_meta.tether``."""
    meta = {key: value for key, value in tether.items()}
    if state is not None:
        meta["assumedPrice"] = bool(state.pricing.assumed)
    return schema.UsageUpdate(session_update="usage_update", used=max(0, int(used)), size=0,
                              cost=schema.Cost(amount=round(cost_usd, 6), currency="USD"),
                              field_meta={"tether": _camel(meta)})


def replay(state: RunState) -> list[SessionUpdate]:
    """A saved run as the updates of its whole conversation (``session/load``): the prompts,
    the replies, every call with its arguments and result, and the cost so far. A call that
    has no result yet (one that waits for a decision) stays pending."""
    out: list[SessionUpdate] = []
    failed = set(state.failed_calls)
    for message in state.messages:
        role = message.get("role")
        text = content_text(message.get("content"))
        if role == "user" and text:
            out.append(acp.update_user_message_text(text))
        elif role == "assistant":
            if text:
                out.append(acp.update_agent_message_text(text))
            for call in message.get("tool_calls") or ():
                fn = call.get("function") or {}
                out.append(announce(str(call.get("id") or ""), str(fn.get("name") or "?"),
                                    str(fn.get("arguments") or ""), "pending"))
        elif role == "tool":
            call_id = str(message.get("tool_call_id") or "")
            out.append(acp.update_tool_call(call_id, status="failed" if call_id in failed else "completed",
                                            content=[_text(text)]))
    if state.turns:
        last = state.per_turn_prompt_tokens[-1] if state.per_turn_prompt_tokens else 0
        out.append(usage_update(last, state.cost_usd, state, turns=state.turns))
    return out


def stop_reason(state: RunState, *, cancelled: bool) -> schema.StopReason:
    """How a prompt turn ends, from how the run stopped. ACP has no reason for a budget: a
    spending cap reads as ``max_tokens``, the nearest; a failed run as ``refusal`` (Tether
    will not go on), its words sent first."""
    if cancelled:
        return "cancelled"  # whatever the run did meanwhile: the editor asked, and ACP wants this answer
    if state.status is Status.MAX_TURNS_EXCEEDED:
        return "max_turn_requests"
    if state.status is Status.BUDGET_EXCEEDED:
        return "max_tokens"
    if state.status is Status.FAILED:
        return "refusal"
    if state.status is Status.INTERRUPTED and isinstance(state.interruption, (Cancelled, NeedsApproval)):
        return "cancelled"  # stopped from a console (a run that waits is left waiting by a Stop)
    return "end_turn"


def end_words(state: RunState) -> str | None:
    """What the editor is told when a run stops other than with an answer: why, and how it
    goes on. None for a completed run (its answer says it all)."""
    run = state.run_id
    if state.status is Status.COMPLETED or state.status is Status.RUNNING:
        return None
    if state.status is Status.FAILED:
        return f"run {run} failed: {state.error or 'no reason was given'}"
    match state.interruption:
        case Cancelled(reason=reason, by=by):
            return f"run {run} was stopped{f' by {by}' if by else ''}: {reason}; the next prompt goes on from here"
        case NeedsApproval(tool_name=tool, call_id=call_id):
            return (f"run {run} waits for a decision on {tool} ({call_id}): decide it in Tether (tether approve|reject "
                    f"{run}), or send a prompt to be asked again")
        case MaxTurns():
            return (f"run {run} reached its turn cap ({state.limits.max_turns} model calls); the next prompt goes on "
                    "with as many again")
        case MaxBudget():
            budget = state.limits.budget_usd
            return (f"run {run} reached its budget (${state.cost_usd:.4f} of ${budget or 0:.4f}); raise it with "
                    f"tether resume {run} --budget USD")
        case ProviderOutage(reason=reason) | StopConditionMet(reason=reason):
            return f"run {run} stopped: {reason}; the next prompt goes on from here"
    return f"run {run} stopped ({state.status.value})"


def prompt_text(blocks: Iterable[Any]) -> str:
    """A prompt's words: its text blocks, and a link for each resource it points to (ACP's
    baseline content; Tether's agents read text only)."""
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, schema.TextContentBlock):
            parts.append(block.text)
        elif isinstance(block, schema.ResourceContentBlock):
            parts.append(f"[{block.name}]({block.uri})")
        elif isinstance(block, schema.EmbeddedResourceContentBlock):
            resource = block.resource
            text = getattr(resource, "text", None)
            parts.append(f"{resource.uri}:\n{text}" if text is not None else str(resource.uri))
    return "\n".join(p for p in parts if p)


def _decision(event: ApprovalDecision) -> schema.ToolCallProgress:
    """A decision on a call, on the call: a rejection fails it (the model reads the words);
    an approval (or one person's of two) is shown, and the call's own start follows."""
    words = event.text or f"{event.verdict} by {event.by}"
    if event.tally:
        words += f" ({event.tally})"
    if event.verdict == "rejected":
        return acp.update_tool_call(event.call_id, status="failed", content=[_text(words)])
    return acp.update_tool_call(event.call_id, content=[_text(words)])


def _tool_output(state: RunState, call_id: str) -> str:
    for message in reversed(state.messages):
        if message.get("role") == "tool" and message.get("tool_call_id") == call_id:
            text = content_text(message.get("content"))
            return text if len(text) <= MAX_CONTENT_CHARS else text[:MAX_CONTENT_CHARS] + "\n[cut: the rest is on the store]"
    return ""


def _last_assistant(state: RunState | None) -> dict[str, Any] | None:
    for message in reversed(state.messages if state is not None else ()):
        if message.get("role") == "assistant":
            return message
    return None


def _text(text: str) -> schema.ContentToolCallContent:
    return acp.tool_content(acp.text_block(text))


def _plan_status(status: str | None) -> schema.PlanEntryStatus:
    return status if status in ("pending", "in_progress", "completed") else "pending"  # type: ignore[return-value]


def _camel(values: dict[str, Any]) -> dict[str, Any]:
    def camel(name: str) -> str:
        head, *rest = name.split("_")
        return head + "".join(part.capitalize() for part in rest)

    return {camel(key): value for key, value in values.items()}


"""The scripted provider's scenarios: each reply is a pure function of the request.

A scenario sees three things, all derived from the messages it is sent:

* ``t``, the turn index: the number of assistant messages in the request;
* the tool text: the content of every tool message so far, joined by newlines;
* the messages themselves, for the rare script that needs more (``research``).

Nothing else: no clock, no randomness, no memory of earlier requests. That is what
lets a run be killed and resumed against the provider and get the same replies, and
what lets tests ask a model to loop, repeat itself or misbehave on demand.

Every answer a scenario can give is a module constant, so tests and the harness can
compare against it instead of retyping it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Message content is read exactly as the token counter renders it (a string, or the
# text of its parts); tether.models.tokens keeps that helper private, hence the alias.
from tether.models.tokens import content_text

PLAN_ANSWER = "errors.log mentions a timeout: worker 7 timed out after 30000 ms."
RECOVER_HINT = "Call list_files"
RECOVER_ANSWER = "errors.log mentions a timeout."
RECOVER_GIVE_UP = "I could not read the file, so I do not know."
DESTRUCTIVE_DECLINED = "I did not delete anything: you declined the deletion."
DESTRUCTIVE_DELETED = "Deleted access.log to free space."
REPEAT_ANSWER = "notes.txt says: Remember to rotate your logs."
REPEAT_WRITE_ANSWER = "Deleted access.log."
SLOW_ANSWER = "The archive scan found {n} entries."
SLOW_UNFINISHED = "The archive scan did not finish ({n} entries scanned)."
SLOW_NO_COUNT = "The archive scan did not report how many entries it scanned."
RESEARCH_QUESTION = "Which file mentions a timeout?"
RESEARCH_PREFIX = "Research result: "
TICKET_CLOSED = "Ticket 42 is closed as a duplicate of 17."
TICKET_KEPT = "I left ticket 42 open. The tool said: {said}"

# "scanned 1200 of 1200 entries" (finished) or "(630 of 1200 entries scanned)" (stopped).
_SCANNED = re.compile(r"scanned\s+(\d[\d,]*)|(\d[\d,]*) of \d[\d,]* entries scanned", re.IGNORECASE)
_UNFINISHED = re.compile(r"cancel|did not finish|interrupted", re.IGNORECASE)

Message = Mapping[str, Any]


@dataclass(frozen=True)
class ToolCall:
    """One function call of a reply, ``arguments`` already a JSON string as on the wire."""

    id: str
    name: str
    arguments: str

    def to_wire(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True)
class Reply:
    """What the scripted model says: text, or tool calls (then ``content`` is None)."""

    content: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.tool_calls else "stop"

    def wire_tool_calls(self) -> list[dict[str, Any]]:
        return [call.to_wire() for call in self.tool_calls]


Script = Callable[[int, str, Sequence[Message]], Reply]


@dataclass(frozen=True)
class Scenario:
    """A named script with the one-line description shown by ``/v1/models`` and the console."""

    name: str
    description: str
    script: Script

    def reply(self, messages: Sequence[Message]) -> Reply:
        return self.script(turn_index(messages), tool_text(messages), messages)


def turn_index(messages: Sequence[Message]) -> int:
    return sum(1 for m in messages if m.get("role") == "assistant")


def tool_text(messages: Sequence[Message]) -> str:
    return "\n".join(_tool_contents(messages))


def _tool_contents(messages: Sequence[Message]) -> list[str]:
    return [content_text(m.get("content")) for m in messages if m.get("role") == "tool"]


def _call(t: int, name: str, call_id: str | None = None, **arguments: Any) -> Reply:
    """A reply with one tool call; the id defaults to ``call_{t}_0`` (deterministic)."""
    args = json.dumps(arguments, separators=(",", ":"))
    return Reply(tool_calls=(ToolCall(call_id or f"call_{t}_0", name, args),))


def _answer(text: str) -> Reply:
    return Reply(content=text)


def _plan(t: int, tool_text: str, messages: Sequence[Message]) -> Reply:
    if t == 0:
        return _call(t, "list_files")
    if t == 1:
        return _call(t, "read_file", path="errors.log")
    return _answer(PLAN_ANSWER)


def _runaway(t: int, tool_text: str, messages: Sequence[Message]) -> Reply:
    return _call(t, "list_files", call_id=f"c{t}")


def _recover(t: int, tool_text: str, messages: Sequence[Message]) -> Reply:
    if t == 0:
        return _call(t, "read_file", path="timeout.log")
    if RECOVER_HINT not in tool_text:
        return _answer(RECOVER_GIVE_UP)
    if t == 1:
        return _call(t, "list_files")
    if t == 2:
        return _call(t, "read_file", path="errors.log")
    return _answer(RECOVER_ANSWER)


def _destructive(t: int, tool_text: str, messages: Sequence[Message]) -> Reply:
    if t == 0:
        return _call(t, "list_files")
    if t == 1:
        return _call(t, "delete_file", path="access.log")
    declined = "declined" in tool_text.lower()
    return _answer(DESTRUCTIVE_DECLINED if declined else DESTRUCTIVE_DELETED)


def _repeat(t: int, tool_text: str, messages: Sequence[Message]) -> Reply:
    if t < 2:
        return _call(t, "read_file", call_id=f"r{t}", path="notes.txt")
    return _answer(REPEAT_ANSWER)


def _repeat_baseline(t: int, tool_text: str, messages: Sequence[Message]) -> Reply:
    if t == 0:
        return _call(t, "read_file", call_id="r0", path="notes.txt")
    return _answer(REPEAT_ANSWER)


def _repeat_write(t: int, tool_text: str, messages: Sequence[Message]) -> Reply:
    if t < 2:
        return _call(t, "delete_file", call_id=f"w{t}", path="access.log")
    return _answer(REPEAT_WRITE_ANSWER)


def _forbidden(t: int, tool_text: str, messages: Sequence[Message]) -> Reply:
    return _call(t, "read_file", path="secrets.env")


def _slow(t: int, tool_text: str, messages: Sequence[Message]) -> Reply:
    if t == 0:
        return _call(t, "scan_archive")
    found = _SCANNED.search(tool_text)
    if found is None:
        return _answer(SLOW_NO_COUNT)
    n = int((found.group(1) or found.group(2)).replace(",", ""))
    template = SLOW_UNFINISHED if _UNFINISHED.search(tool_text) else SLOW_ANSWER
    return _answer(template.format(n=n))


def _ticket(t: int, tool_text: str, messages: Sequence[Message]) -> Reply:
    if t == 0:
        return _call(t, "close_ticket", call_id="close_42", ticket=42, reason="duplicate of 17")
    results = _tool_contents(messages)
    said = results[-1] if results else ""
    if "ticket 42 closed" in said.lower():
        return _answer(TICKET_CLOSED)
    return _answer(TICKET_KEPT.format(said=said))  # declined, denied or failed: the words, quoted


def _research(t: int, tool_text: str, messages: Sequence[Message]) -> Reply:
    if t == 0:
        return _call(t, "research", question=RESEARCH_QUESTION)
    results = _tool_contents(messages)
    return _answer(RESEARCH_PREFIX + (results[-1] if results else ""))


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("plan", "list the files, read errors.log, answer", _plan),
        Scenario("runaway", "calls list_files every turn and never answers", _runaway),
        Scenario("recover", "reads a missing file; answers only if the error says what to do", _recover),
        Scenario("destructive", "deletes access.log (needs approval); answers per the decision", _destructive),
        Scenario("repeat", "reads notes.txt twice with identical arguments, then answers", _repeat),
        Scenario("repeat_baseline", "reads notes.txt once, then answers", _repeat_baseline),
        Scenario("repeat_write", "deletes access.log in two consecutive turns, then answers", _repeat_write),
        Scenario("forbidden", "reads secrets.env every turn and never gives up", _forbidden),
        Scenario("slow", "runs the slow scan_archive tool, then reports its count", _slow),
        Scenario("ticket", "closes ticket 42 (close_ticket needs approval); answers per the tool's result", _ticket),
        Scenario("research", "asks a research subagent, then answers with its summary", _research),
        Scenario("research_child", "the research subagent: the plan script", _plan),
    )
}

"""The scripted provider's Anthropic Messages API (``POST /v1/messages``), for Claude Code.

Claude Code runs headless and offline against it (measured with Claude Code 2.1.197; docs/integrations.md,
"Claude Code"): it sends
``HEAD /`` first, then ``POST /v1/messages?beta=true`` with ``stream: true``, its system
prompt, its tools and the transcript as Anthropic content blocks. The reply is a pure
function of the request body, as for the chat-completions API (:mod:`tether.demo.provider.app`):

* the request's messages are read as chat-completions messages (:func:`chat_messages`: a
  ``tool_use`` block is a tool call, a ``tool_result`` block a ``tool`` message that keeps
  its ``is_error``), so a script is a :class:`~tether.demo.provider.scenarios.Scenario` like any
  other, and ``t`` is the number of assistant messages;
* the script's :class:`~tether.demo.provider.scenarios.Reply` goes back as content blocks, a
  ``text`` block and ``tool_use`` blocks, streamed in Anthropic's events (``message_start``,
  ``content_block_start``/``delta``/``stop``, ``message_delta`` with the usage and the
  ``stop_reason``, ``message_stop``) or as one ``message`` object.

The scripts (:data:`SCENARIOS`, chosen by the request's ``model``) are for Claude Code's own
tools; they are not the chat-completions scenarios, and ``/v1/models`` does not list them.

Every request is handed to ``record`` (when given) as it arrives, so a test can say what the
next request after a decision carried (a hook's deny reason comes back as a ``tool_result``).
Usage is counted with :mod:`tether.models.tokens` over the messages, the system prompt and the
tools, as the chat-completions API counts them.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from tether.demo.provider.scenarios import Message, Reply, Scenario, ToolCall
from tether.models.tokens import TokenCounter, content_text

__all__ = ["COMMANDS_DONE", "COMMANDS_MODEL", "COMMANDS_REFUSED", "NOTHING_TO_RUN", "SCENARIOS", "Messages",
           "ReceivedRequest", "chat_messages"]

COMMANDS_MODEL = "claude-scripted-commands"
"""The script for Claude Code's ``Bash`` tool: run each command the prompt lists, then answer."""
COMMANDS_DONE = "Ran {n} command(s); the last one said: {output}"
COMMANDS_REFUSED = "The call came back as an error, so I stopped there: {reason}"
NOTHING_TO_RUN = "There was nothing to run."
_RUN = re.compile(r"^Run:[ \t]*\n(?P<commands>(?:[^\n]+\n?)+)", re.MULTILINE)
_PIECE_CHARS = 12
_STREAM_HEADERS = {"Cache-Control": "no-cache"}


@dataclass(frozen=True)
class ReceivedRequest:
    """One request to ``/v1/messages``, as the endpoint read it (never its headers' key)."""

    body: dict[str, Any]
    session_id: str | None
    """Claude Code's ``x-claude-code-session-id`` header: the hooks' ``session_id``."""


class Messages:
    """The ``/v1/messages`` endpoint: parse, script, answer; each request handed to ``record``."""

    def __init__(self, counter: TokenCounter, record: Callable[[ReceivedRequest], None] | None = None) -> None:
        self.counter = counter
        self.record = record

    async def root(self, request: Request) -> Response:
        """``HEAD /`` (Claude Code's reachability check): 200 with no body. ``GET /`` stays the 404
        it always was."""
        if request.method == "HEAD":
            return Response(status_code=200)
        raise HTTPException(404)  # answered by the app's handler, in the shape it always was

    async def create(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body = json.loads(raw)
        except ValueError as exc:
            return _error(400, "invalid_request_error", f"The request body is not valid JSON: {exc}.")
        except RecursionError:
            return _error(400, "invalid_request_error", "The request body is not valid JSON: arrays or objects "
                          "nested too deep.")
        problem = _problem(body)
        if problem:
            return _error(400, "invalid_request_error", problem)
        if self.record is not None:
            self.record(ReceivedRequest(body, request.headers.get("x-claude-code-session-id")))
        scenario = SCENARIOS.get(body["model"])
        if scenario is None:
            known = ", ".join(SCENARIOS)
            return _error(404, "not_found_error", f"model: {body['model']} (the scripted models are {known})")
        messages = chat_messages(body)
        reply = scenario.reply(messages)
        message = self._message(body, raw, messages, reply)
        if body.get("stream"):
            events = _events(message)  # built whole first: a stream never fails half-way
            return StreamingResponse(_replay(events), media_type="text/event-stream", headers=_STREAM_HEADERS)
        return JSONResponse(message)

    def _message(self, body: dict[str, Any], raw: bytes, messages: list[dict[str, Any]],
                 reply: Reply) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if reply.content is not None:
            content.append({"type": "text", "text": reply.content})
        for call in reply.tool_calls:
            content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": json.loads(call.arguments)})
        tools = [{"type": "function", "function": {"name": t.get("name"), "description": t.get("description", ""),
                                                   "parameters": t.get("input_schema", {})}}
                 for t in body.get("tools") or [] if isinstance(t, dict)]
        usage = {
            "input_tokens": self.counter.prompt_tokens(messages, tools or None),
            "output_tokens": self.counter.completion_tokens(reply.content, reply.wire_tool_calls()),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        return {"id": "msg_" + hashlib.sha256(raw).hexdigest()[:24], "type": "message", "role": "assistant",
                "model": body["model"], "content": content,
                "stop_reason": "tool_use" if reply.tool_calls else "end_turn", "stop_sequence": None, "usage": usage}


def chat_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A Messages request's system prompt and messages as chat-completions messages: text
    blocks joined (a user's by lines), ``tool_use`` blocks as the assistant's tool calls, ``tool_result`` blocks as
    ``tool`` messages (with their ``is_error``). Claude Code's ``role: system`` entries among
    the messages stay system messages."""
    chat: list[dict[str, Any]] = []
    system = _block_text(body.get("system"))
    if system:
        chat.append({"role": "system", "content": system})
    for message in body.get("messages") or []:
        role = message.get("role")
        blocks = _blocks(message.get("content"))
        if role == "assistant":
            text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
            calls = [{"id": b.get("id", ""), "type": "function",
                      "function": {"name": b.get("name", ""), "arguments": json.dumps(b.get("input") or {})}}
                     for b in blocks if b.get("type") == "tool_use"]
            out: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                out["tool_calls"] = calls
            chat.append(out)
            continue
        text = []
        for block in blocks:
            if block.get("type") == "tool_result":
                chat.append({"role": "tool", "tool_call_id": block.get("tool_use_id", ""),
                             "content": _block_text(block.get("content")), "is_error": bool(block.get("is_error"))})
            elif block.get("type") == "text":
                text.append(block.get("text", ""))
        if text:
            chat.append({"role": "system" if role == "system" else "user", "content": "\n".join(text)})
    return chat


# ---- the scripts ------------------------------------------------------------------------


def _commands(t: int, tool_text: str, messages: Sequence[Message]) -> Reply:
    """Run, one ``Bash`` call a turn, each line the prompt lists after a line ``Run:``; then
    answer with the last output. A refused call (a ``tool_result`` with ``is_error``: a hook's
    deny, Claude Code's own refusal) ends it at once with an answer that quotes the reason."""
    results = [m for m in messages if m.get("role") == "tool"]
    if results and results[-1].get("is_error"):
        return Reply(content=COMMANDS_REFUSED.format(reason=content_text(results[-1].get("content"))))
    listed = _RUN.search("\n".join(content_text(m.get("content")) for m in messages if m.get("role") == "user"))
    commands = [line.strip() for line in listed.group("commands").splitlines() if line.strip()] if listed else []
    if not commands:
        return Reply(content=NOTHING_TO_RUN)
    if t < len(commands):
        args = json.dumps({"command": commands[t], "description": f"Run step {t + 1}"})
        return Reply(tool_calls=(ToolCall(f"toolu_scripted_{t:02d}", "Bash", args),))
    output = content_text(results[-1].get("content")) if results else ""
    return Reply(content=COMMANDS_DONE.format(n=len(commands), output=output.strip() or "(nothing)"))


SCENARIOS: dict[str, Scenario] = {
    s.name: s for s in (
        Scenario(COMMANDS_MODEL, "runs each command listed after 'Run:' with Bash; quotes a refusal", _commands),
    )
}


# ---- the wire ---------------------------------------------------------------------------


def _problem(body: Any) -> str | None:
    if not isinstance(body, dict):
        return "The request body must be a JSON object."
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model: Field required (a non-empty string)."
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        return "messages: a non-empty list of message objects is required."
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        return f"max_tokens: a positive integer is required; got {max_tokens!r}."
    for i, message in enumerate(messages):
        content = message.get("content")
        if not (isinstance(content, str) or (isinstance(content, list) and all(isinstance(b, dict) for b in content))):
            return f"messages.{i}.content: a string or a list of content blocks is required."
    return None


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)]


def _block_text(content: Any) -> str:
    return "".join(b.get("text", "") for b in _blocks(content) if b.get("type") == "text")


def _events(message: dict[str, Any]) -> list[bytes]:
    """The stream of a message: its start (no content, the input tokens), each block opened,
    filled in pieces and closed, the stop reason with the output tokens, the stop."""
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "stop_sequence": None,
             "usage": {**usage, "output_tokens": 1}}
    events = [_event("message_start", {"type": "message_start", "message": start}),
              _event("ping", {"type": "ping"})]
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            opened, pieces = {"type": "text", "text": ""}, [{"type": "text_delta", "text": piece}
                                                             for piece in _pieces(block["text"])]
        else:
            opened = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            pieces = [{"type": "input_json_delta", "partial_json": piece}
                      for piece in _pieces(json.dumps(block["input"]))]
        events.append(_event("content_block_start", {"type": "content_block_start", "index": index,
                                                     "content_block": opened}))
        events += [_event("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
                   for delta in pieces]
        events.append(_event("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(_event("message_delta", {"type": "message_delta",
                                           "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                                           "usage": {"output_tokens": usage["output_tokens"]}}))
    events.append(_event("message_stop", {"type": "message_stop"}))
    return events


def _event(name: str, data: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()


def _pieces(text: str) -> list[str]:
    return [text[i: i + _PIECE_CHARS] for i in range(0, len(text), _PIECE_CHARS)]


async def _replay(events: list[bytes]) -> AsyncIterator[bytes]:
    for event in events:
        yield event


def _error(status: int, type_: str, message: str) -> JSONResponse:
    """An error in the shape Anthropic's clients parse: ``{"type": "error", "error": {type, message}}``."""
    return JSONResponse({"type": "error", "error": {"type": type_, "message": message}}, status_code=status)

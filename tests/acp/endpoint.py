"""A scripted chat-completions endpoint for real ACP agents (OpenCode, Qwen Code) on loopback.

Why not the product's scripted provider (``tether.provider``): its scenarios see only the
messages, but a coding agent's write tool has a different name and argument shape per agent
(OpenCode: ``write {filePath, content}``; Qwen Code: ``write_file {file_path, content}``), which
only the request's ``tools`` list tells. This endpoint reads that list, streams like a real
provider (SSE, with a usage chunk), records every request body (the tests read what the model
was sent), and can hold a stream open so a test can Stop an agent mid-stream.

The script, read from the last user message:
- ``WRITE <path> CONTENT <text>``: call the agent's write tool once, then answer ``DONE_ANSWER``;
- ``HOLD``: stream a few words, then hold the stream until the client goes away;
- anything else: answer ``PLAIN_ANSWER``.
A request without tools (a title or summary call) is answered with ``TITLE_ANSWER``.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

DONE_ANSWER = "The file is written."
PLAIN_ANSWER = "Nothing to do."
TITLE_ANSWER = "A scripted session"
HOLD_WORDS = ["Thinking ", "about ", "it "]
USAGE = {"prompt_tokens": 120, "completion_tokens": 12, "total_tokens": 132}

_WRITE = re.compile(r"WRITE (\S+) CONTENT (.+?)(?:\n|$|<)", re.S)
# The write tool of each agent, by name, and how it spells its arguments.
WRITE_TOOLS: dict[str, tuple[str, str]] = {"write": ("filePath", "content"), "write_file": ("file_path", "content")}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None) -> str:
    body: dict[str, Any] = {"id": "chatcmpl-acp", "object": "chat.completion.chunk", "created": 0, "model": "m",
                            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        body["usage"] = usage
        body["choices"] = []
    return f"data: {json.dumps(body)}\n\n"


class ScriptedEndpoint:
    """The endpoint's state: the requests it was sent, and whether a held stream is open."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.holding = asyncio.Event()  # set while a HOLD stream is open
        self.held_closed = asyncio.Event()  # set when the client went away from a held stream

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/v1/chat/completions", self._completions, methods=["POST"]),
                                 Route("/v1/models", self._models, methods=["GET"])])

    async def _models(self, request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "scripted", "object": "model", "owned_by": "tests"}]})

    async def _completions(self, request: Request) -> StreamingResponse:
        body = await request.json()
        self.requests.append(body)
        return StreamingResponse(self._events(body), media_type="text/event-stream")

    async def _events(self, body: dict[str, Any]) -> AsyncIterator[str]:
        tools = {t.get("function", {}).get("name") for t in body.get("tools") or []}
        messages = body.get("messages") or []
        last = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
        last_user = _text(messages[last].get("content")) if last >= 0 else ""
        # A tool result since the last user message: this turn's write is done.
        answered = any(m.get("role") == "tool" for m in messages[last + 1:])
        yield _chunk({"role": "assistant", "content": ""})
        if not tools:
            yield _chunk({"content": TITLE_ANSWER})
        elif "HOLD" in last_user and not answered:
            async for piece in self._hold():
                yield piece
        elif (found := _WRITE.search(last_user)) and not answered:
            name = next((n for n in WRITE_TOOLS if n in tools), None)
            if name is not None:
                path_key, content_key = WRITE_TOOLS[name]
                args = json.dumps({path_key: found.group(1), content_key: found.group(2).strip()})
                call = {"index": 0, "id": "call_write_0", "type": "function",
                        "function": {"name": name, "arguments": args}}
                yield _chunk({"tool_calls": [call]})
                yield _chunk({}, "tool_calls")
                yield _chunk({}, None, USAGE)
                yield "data: [DONE]\n\n"
                return
            yield _chunk({"content": f"No write tool among {sorted(tools)}."})
        else:
            yield _chunk({"content": DONE_ANSWER if answered else PLAIN_ANSWER})
        yield _chunk({}, "stop")
        yield _chunk({}, None, USAGE)
        yield "data: [DONE]\n\n"

    async def _hold(self) -> AsyncIterator[str]:
        try:
            for word in HOLD_WORDS:
                yield _chunk({"content": word})
                await asyncio.sleep(0.01)
            self.holding.set()
            await asyncio.Event().wait()  # until the client goes away (or the server stops)
            yield ""  # never reached: keeps this an async generator
        finally:
            self.holding.clear()
            self.held_closed.set()

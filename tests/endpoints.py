"""Tiny chat-completions endpoints for tests: scripted replies by turn, echoing, failing."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

Reply = dict[str, Any]


def call(name: str, arguments: str | dict, call_id: str) -> dict[str, Any]:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


def completion(content: str | None = None, tool_calls: list[dict] | None = None,
               usage: dict | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "test",
        "choices": [{"index": 0, "finish_reason": "tool_calls" if tool_calls else "stop",
                     "message": {"role": "assistant", "content": content, "tool_calls": tool_calls}}],
    }
    if usage is not False:
        body["usage"] = usage or {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    return body


def scripted_app(script: Callable[[int, Request, dict], dict[str, Any]]) -> Starlette:
    """An endpoint whose reply is ``script(turn, request, body)``; turn = assistant messages so far."""

    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        turn = sum(1 for m in body["messages"] if m.get("role") == "assistant")
        request.app.state.requests += 1
        return JSONResponse(script(turn, request, body))

    app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
    app.state.requests = 0
    return app


def turns(*replies: dict[str, Any]) -> Starlette:
    """Reply ``replies[t]`` at turn t (the last one repeats)."""
    return scripted_app(lambda t, _r, _b: replies[min(t, len(replies) - 1)])

"""The scripted provider as an ASGI app speaking the chat-completions API.

Clients written for real providers (the official ``openai`` package among them) are
run against it unchanged, so every shape here is the one they parse: the
``chat.completion`` object, the ``chat.completion.chunk`` SSE stream, the model list
and the ``{"error": {...}}`` body of every failure. The reply is a pure function of
the request body (see ``scenarios``); even ``created`` and the completion id are
derived from it, so the same request always gets the same bytes back. The only
state is the fault plan's counters (see ``faults``).

Usage is counted with ``tether.models.tokens`` over its documented rendering, so a harness
holding the same transcript reproduces every number exactly.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tether.demo.provider.anthropic import Messages, ReceivedRequest
from tether.demo.provider.faults import FaultKind, FaultPlan
from tether.demo.provider.scenarios import SCENARIOS, Reply, Scenario, turn_index
from tether.models.tokens import TokenCounter, encoding, render_completion

logger = logging.getLogger(__name__)

# Fixed rather than the clock: a reply must be a pure function of the request.
CREATED = 1_735_689_600
_ROLES = ("assistant", "developer", "system", "tool", "user")
# Small, so that even a short reply streams in several deltas, as a real one does.
_STREAM_PIECE_CHARS = 12
_DRIP_INTERVAL_S = 0.5
# 120 bytes, one every 0.5 s: about a minute, and never a complete JSON document.
_DRIP_BODY = b'{"object": "chat.completion", "choices": [{"message": {"content": "'.ljust(120, b".")
_GARBAGE_BODY = b'{"id": "chatcmpl-garbage", "object": "chat.completion", "choices": [{"index": 0, "mess'

Endpoint = Callable[[Request], Awaitable[Response]]


class RequestError(ValueError):
    """A malformed request: answered with a 400 whose message says what is wrong."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class ChatRequest:
    """A validated request: only the fields the provider acts on."""

    completion_id: str
    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    stream: bool
    include_usage: bool
    max_tokens: int | None


@dataclass(frozen=True)
class Completion:
    """A reply after ``max_tokens``, with its finish reason and usage."""

    reply: Reply
    finish_reason: str
    usage: dict[str, int]


def create_app(
    latency_ms: float = 0,
    faults: FaultPlan | None = None,
    retry_after: float = 1.0,
    counter: TokenCounter | None = None,
    usage_scale: float = 1.0,
    record: Callable[[ReceivedRequest], None] | None = None,
) -> Starlette:
    """The provider app: ``latency_ms`` delays every completion, ``faults`` injects failures,
    ``retry_after`` is the 429's ``Retry-After`` in seconds, ``usage_scale`` multiplies the
    prompt tokens it reports (an endpoint that counts more than Tether does, as real ones may).
    Beside it, Anthropic's Messages API for Claude Code (:mod:`tether.demo.provider.anthropic`),
    whose every request is handed to ``record``."""
    provider = _Provider(latency_ms / 1000, faults or FaultPlan(), retry_after, counter or TokenCounter(),
                         usage_scale)
    messages = Messages(provider.counter, record)
    return Starlette(
        routes=[
            Route("/", messages.root, methods=["GET", "HEAD"]),
            Route("/v1/messages", _guarded(messages.create), methods=["POST"]),
            Route("/v1/chat/completions", _guarded(provider.chat_completions), methods=["POST"]),
            Route("/v1/models", _guarded(provider.list_models), methods=["GET"]),
            Route("/v1/models/{model:path}", _guarded(provider.retrieve_model), methods=["GET"]),
        ],
        exception_handlers={HTTPException: _http_error},
    )


class _Provider:
    """The endpoints, sharing one configuration and one fault plan."""

    def __init__(self, latency_s: float, faults: FaultPlan, retry_after: float, counter: TokenCounter,
                 usage_scale: float = 1.0) -> None:
        self.latency_s = latency_s
        self.faults = faults
        self.retry_after = retry_after
        self.counter = counter
        self.usage_scale = usage_scale

    async def chat_completions(self, request: Request) -> Response:
        if self.latency_s > 0:
            await asyncio.sleep(self.latency_s)
        try:
            chat = _parse_request(await request.body())
        except RequestError as exc:
            return _error_response(400, str(exc), "invalid_request_error", param=exc.param)
        scenario = SCENARIOS.get(chat.model)
        if scenario is None:
            return _model_not_found(chat.model)
        turn = turn_index(chat.messages)
        fault = self.faults.take(turn)
        if fault is not None:
            return self._fault_response(fault, turn)
        completion = self._complete(chat, scenario)
        if chat.stream:
            # Every event is built before the first byte is sent: a stream never fails half-way.
            events = _sse_events(chat, completion)
            headers = {"Cache-Control": "no-cache"}
            return StreamingResponse(_replay(events), media_type="text/event-stream", headers=headers)
        return JSONResponse(_completion_body(chat, completion))

    async def list_models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [_model_object(name) for name in SCENARIOS]})

    async def retrieve_model(self, request: Request) -> Response:
        name = request.path_params["model"]
        if name not in SCENARIOS:
            return _model_not_found(name)
        return JSONResponse(_model_object(name))

    def _complete(self, chat: ChatRequest, scenario: Scenario) -> Completion:
        reply = scenario.reply(chat.messages)
        completion_tokens = self.counter.completion_tokens(reply.content, reply.wire_tool_calls())
        finish_reason = reply.finish_reason
        if chat.max_tokens is not None and completion_tokens > chat.max_tokens:
            reply, completion_tokens, finish_reason = _truncate(reply, chat.max_tokens), chat.max_tokens, "length"
        prompt_tokens = self.counter.prompt_tokens(chat.messages, chat.tools)
        if self.usage_scale != 1.0:
            prompt_tokens = round(prompt_tokens * self.usage_scale)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        return Completion(reply, finish_reason, usage)

    def _fault_response(self, fault: FaultKind, turn: int) -> Response:
        where = f"(injected fault at turn {turn})"
        if fault is FaultKind.RATE_LIMIT:
            return _error_response(
                429,
                f"Rate limit reached {where}. Please try again in {self.retry_after:g}s.",
                "requests",
                "rate_limit_exceeded",
                headers={"Retry-After": f"{self.retry_after:g}"},
            )
        if fault is FaultKind.SERVER_ERROR:
            return _error_response(500, f"The server had an error processing your request {where}.", "server_error")
        if fault is FaultKind.UNAUTHORIZED:
            message = f"Incorrect API key provided {where}."
            return _error_response(401, message, "invalid_request_error", "invalid_api_key")
        if fault is FaultKind.GARBAGE:
            return Response(_GARBAGE_BODY, media_type="application/json")
        return StreamingResponse(_drip(), media_type="application/json")


def _parse_request(body: bytes) -> ChatRequest:
    """Validate a chat-completions body; raise RequestError saying what is wrong."""
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise RequestError(f"The request body is not valid JSON: {exc}.") from None
    except RecursionError:
        raise RequestError("The request body is not valid JSON: arrays or objects nested too deep.") from None
    if not isinstance(data, dict):
        raise RequestError("The request body must be a JSON object.")
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise RequestError("'model' is required and must be a non-empty string.", "model")
    messages = data.get("messages")
    if messages is None:
        raise RequestError("Missing required parameter: 'messages'.", "messages")
    if not isinstance(messages, list) or not messages:
        raise RequestError("'messages' must be a non-empty list of message objects.", "messages")
    for i, message in enumerate(messages):
        _check_message(f"messages[{i}]", message)
    tools = data.get("tools")
    if tools is not None and not (isinstance(tools, list) and all(isinstance(t, dict) for t in tools)):
        raise RequestError("'tools' must be a list of tool objects.", "tools")
    stream = data.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise RequestError("'stream' must be a boolean.", "stream")
    options = data.get("stream_options")
    if options is not None and not isinstance(options, dict):
        raise RequestError("'stream_options' must be an object.", "stream_options")
    return ChatRequest(
        completion_id="chatcmpl-" + hashlib.sha256(body).hexdigest()[:29],
        model=model,
        messages=messages,
        tools=tools or None,
        stream=bool(stream),
        include_usage=bool(options and options.get("include_usage")),
        max_tokens=_max_tokens(data),
    )


def _check_message(where: str, message: Any) -> None:
    if not isinstance(message, dict):
        raise RequestError(f"'{where}' must be an object.", where)
    role = message.get("role")
    if role not in _ROLES:
        raise RequestError(f"'{where}.role' must be one of {', '.join(_ROLES)}; got {role!r}.", f"{where}.role")
    content = message.get("content")
    if not (content is None or isinstance(content, str) or _is_list_of_objects(content)):
        raise RequestError(f"'{where}.content' must be a string, null or a list of content parts.", f"{where}.content")
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        raise RequestError(f"Missing required parameter: '{where}.tool_call_id'.", f"{where}.tool_call_id")
    calls = message.get("tool_calls")
    if calls is None:
        return
    if not _is_list_of_objects(calls):
        raise RequestError(f"'{where}.tool_calls' must be a list of tool calls.", f"{where}.tool_calls")
    for j, call in enumerate(calls):
        fn = call.get("function")
        if not (isinstance(fn, dict) and isinstance(fn.get("name"), str) and isinstance(fn.get("arguments"), str)):
            param = f"{where}.tool_calls[{j}].function"
            raise RequestError(f"'{param}' must have a string 'name' and a string 'arguments'.", param)


def _is_list_of_objects(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _max_tokens(data: dict[str, Any]) -> int | None:
    """The completion limit; ``max_completion_tokens`` (the newer name) wins over ``max_tokens``."""
    limits = {key: data[key] for key in ("max_completion_tokens", "max_tokens") if data.get(key) is not None}
    for key, value in limits.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise RequestError(f"'{key}' must be a positive integer; got {value!r}.", key)
    return next(iter(limits.values()), None)


def _truncate(reply: Reply, limit: int) -> Reply:
    """The reply a model gives when it hits ``limit`` tokens: the first ``limit`` tokens of its
    rendering. A tool call cut in its arguments keeps the cut (invalid) JSON, as real models do;
    a call that had not started yet is dropped."""
    wire_calls = reply.wire_tool_calls()
    tokens = encoding().encode_ordinary(render_completion(reply.content, wire_calls))
    # decode_bytes + "ignore": a strict prefix of the rendering even if a character was split.
    room = len(encoding().decode_bytes(tokens[:limit]).decode("utf-8", "ignore"))
    kept = []
    for i, call in enumerate(reply.tool_calls):
        # Where this call's arguments start in the rendering, without restating its format.
        start = len(render_completion(reply.content, wire_calls[: i + 1])) - len(call.arguments)
        if start > room:
            break
        kept.append(replace(call, arguments=call.arguments[: room - start]))
    content = None if reply.content is None else reply.content[:room]
    return Reply(content=content, tool_calls=tuple(kept))


def _completion_body(chat: ChatRequest, completion: Completion) -> dict[str, Any]:
    reply = completion.reply
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = reply.wire_tool_calls()
    return {
        "id": chat.completion_id,
        "object": "chat.completion",
        "created": CREATED,
        "model": chat.model,
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": completion.finish_reason}],
        "usage": completion.usage,
    }


def _chunks(chat: ChatRequest, completion: Completion) -> list[dict[str, Any]]:
    """The stream of a completion: role, content pieces, tool calls (name first, then the
    arguments in pieces), the finish reason, and the usage chunk when asked for."""

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return _chunk_envelope(chat, [choice], None)

    reply = completion.reply
    # content null (not "") when the reply is tool calls, so a client reassembles it exactly.
    chunks = [chunk({"role": "assistant", "content": None if reply.content is None else ""})]
    chunks += [chunk({"content": piece}) for piece in _pieces(reply.content or "")]
    for index, call in enumerate(reply.tool_calls):
        opening = {"index": index, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}
        chunks.append(chunk({"tool_calls": [opening]}))
        chunks += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in _pieces(call.arguments)
        ]
    chunks.append(chunk({}, completion.finish_reason))
    if chat.include_usage:
        chunks.append(_chunk_envelope(chat, [], completion.usage))
    return chunks


def _chunk_envelope(chat: ChatRequest, choices: list[dict[str, Any]], usage: dict[str, int] | None) -> dict[str, Any]:
    envelope: dict[str, Any] = {
        "id": chat.completion_id,
        "object": "chat.completion.chunk",
        "created": CREATED,
        "model": chat.model,
        "choices": choices,
    }
    if chat.include_usage:
        envelope["usage"] = usage
    return envelope


def _pieces(text: str) -> list[str]:
    return [text[i : i + _STREAM_PIECE_CHARS] for i in range(0, len(text), _STREAM_PIECE_CHARS)]


def _sse_events(chat: ChatRequest, completion: Completion) -> list[bytes]:
    events = [f"data: {json.dumps(chunk)}\n\n".encode() for chunk in _chunks(chat, completion)]
    return [*events, b"data: [DONE]\n\n"]


async def _replay(events: list[bytes]) -> AsyncIterator[bytes]:
    for event in events:
        yield event


async def _drip() -> AsyncIterator[bytes]:
    """A body that trickles one byte at a time; cancelled when the client disconnects."""
    for i in range(len(_DRIP_BODY)):
        if i:
            await asyncio.sleep(_DRIP_INTERVAL_S)
        yield _DRIP_BODY[i : i + 1]


def _model_object(name: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": CREATED, "owned_by": "tether"}


def _model_not_found(model: str) -> Response:
    known = ", ".join(SCENARIOS)
    message = f"The model {model!r} does not exist: it must name a scenario ({known})."
    return _error_response(404, message, "invalid_request_error", "model_not_found", param="model")


def _error_response(
    status: int,
    message: str,
    type_: str,
    code: str | None = None,
    *,
    param: str | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    """An error in the shape OpenAI clients parse: ``{"error": {message, type, param, code}}``."""
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Routing errors (unknown path, wrong method) in the same shape as every other error."""
    assert isinstance(exc, HTTPException)
    message = f"{exc.detail}: {request.method} {request.url.path}"
    return _error_response(exc.status_code, message, "invalid_request_error", headers=exc.headers)


def _guarded(endpoint: Endpoint) -> Endpoint:
    """Turn any unexpected exception into a 500 in the OpenAI shape: no traceback reaches a
    client, and in-process callers (httpx's ASGI transport) get a response, not a raise.
    A client that hung up before its body was read (during ``--latency-ms``, say: the crash
    campaign does it on purpose) is normal, not a failure: one line, no traceback, and an
    empty answer that the server drops. The log names the route only; request headers (and
    so any API key) are never logged."""

    @functools.wraps(endpoint)
    async def guarded(request: Request) -> Response:
        try:
            return await endpoint(request)
        except ClientDisconnect:
            logger.warning("tether provider: the client went away mid-request (%s %s)",
                           request.method, request.url.path)
            return Response(status_code=499)  # nobody reads it: the server discards it
        except Exception:
            logger.exception("scripted provider failed on %s %s", request.method, request.url.path)
            return _error_response(500, "The scripted provider failed to handle the request.", "server_error")

    return guarded

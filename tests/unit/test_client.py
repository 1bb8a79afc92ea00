"""The model client against small fault-injecting servers.

Most servers run in-process through ``httpx.ASGITransport``; the ones whose fault lives
in the transport (a refused port, a body that drips, a connection cut mid-stream) run on
real loopback under uvicorn and are always stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
from collections.abc import AsyncIterator, Callable
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tether.vocab.cancel import CancelSignal, RunCancelled
from tether.models.client import SEGMENT_BYTES, EncodedTranscript, ModelClient, ModelReply, ProviderError, RetryNotice
from tether.models.tokens import TokenCounter

KEY = "sk-test-SECRET-0123456789abcdef"
BASE = "http://test/v1"
URL = f"{BASE}/chat/completions"
MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Which file mentions a timeout?"},
]
TOOLS = [
    {"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "list_files", "parameters": {"type": "object"}}},
]
USAGE = {"prompt_tokens": 42, "completion_tokens": 7, "total_tokens": 49}
TOOL_MESSAGE = {
    "role": "assistant",
    "content": "Let me look.",
    "tool_calls": [
        {"id": "call_a", "type": "function", "function": {"name": "list_files", "arguments": "{}"}},
        {"id": "call_b", "type": "function", "function": {"name": "read_file", "arguments": '{"path":"errors.log"}'}},
    ],
}
ANSWER = {"role": "assistant", "content": "errors.log mentions a timeout."}

Handler = Callable[[dict, Request], Response]


def completion(message: dict = ANSWER, *, usage: dict | None = USAGE) -> dict:
    finish = "tool_calls" if message.get("tool_calls") else "stop"
    body = {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": finish}]}
    if usage is not None:
        body["usage"] = usage
    return body


def chunks(message: dict = ANSWER, *, usage: dict | None = USAGE) -> list[dict]:
    """``message`` as OpenAI streams it: content in pieces, each call's id and name
    first and its arguments in three-character pieces, the finish, then usage."""

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    text = message.get("content") or ""
    out += [chunk({"content": text[i : i + 4]}) for i in range(0, len(text), 4)]
    for index, call in enumerate(message.get("tool_calls") or ()):
        fn = call["function"]
        head = {"index": index, "id": call["id"], "type": "function", "function": {"name": fn["name"], "arguments": ""}}
        out.append(chunk({"tool_calls": [head]}))
        args = fn["arguments"]
        out += [
            chunk({"tool_calls": [{"index": index, "function": {"arguments": args[i : i + 3]}}]})
            for i in range(0, len(args), 3)
        ]
    out.append(chunk({}, "tool_calls" if message.get("tool_calls") else "stop"))
    if usage is not None:
        out.append({"object": "chat.completion.chunk", "choices": [], "usage": usage})
    return out


def sse(events: list[dict], *, done: bool = True) -> bytes:
    lines = [f"data: {json.dumps(e)}\n\n" for e in events]
    if done:
        lines.append("data: [DONE]\n\n")
    return "".join(lines).encode()


def ok(message: dict = ANSWER, *, usage: dict | None = USAGE) -> Handler:
    """Answer ``message``, streamed when the request asks for a stream."""

    def handle(body: dict, request: Request) -> Response:
        if body.get("stream"):
            return Response(sse(chunks(message, usage=usage)), media_type="text/event-stream")
        return JSONResponse(completion(message, usage=usage))

    return handle


def status(code: int, message: str = "", headers: dict | None = None) -> Handler:
    def handle(body: dict, request: Request) -> Response:
        error = {"error": {"message": message, "type": "test", "code": None}} if message else {}
        return JSONResponse(error, status_code=code, headers=headers)

    return handle


def raw(content: bytes, media_type: str = "application/json") -> Handler:
    return lambda body, request: Response(content, media_type=media_type)


class Fake:
    """A chat-completions endpoint that plays its handlers in order, then ``default``."""

    def __init__(self, *handlers: Handler, default: Handler | None = None) -> None:
        self.handlers = list(handlers)
        self.default = default or ok()
        self.bodies: list[bytes] = []
        self.auth: list[str | None] = []
        self.framing: list[tuple[str | None, str | None]] = []  # (content-length, transfer-encoding)
        self.app = Starlette(routes=[Route("/v1/chat/completions", self.endpoint, methods=["POST"])])

    async def endpoint(self, request: Request) -> Response:
        raw_body = await request.body()
        self.bodies.append(raw_body)
        self.auth.append(request.headers.get("authorization"))
        self.framing.append((request.headers.get("content-length"), request.headers.get("transfer-encoding")))
        handler = self.handlers.pop(0) if self.handlers else self.default
        return handler(json.loads(raw_body), request)

    @property
    def requests(self) -> int:
        return len(self.bodies)

    def client(self, **kw) -> ModelClient:
        kw.setdefault("backoff_base_s", 0.001)
        kw.setdefault("backoff_cap_s", 0.002)
        return ModelClient(BASE, KEY, transport=httpx.ASGITransport(app=self.app), **kw)


class Ceilings:
    """An rng that records each jitter range asked for and answers its midpoint."""

    def __init__(self) -> None:
        self.ranges: list[tuple[float, float]] = []

    def uniform(self, a: float, b: float) -> float:
        self.ranges.append((a, b))
        return (a + b) / 2


async def ask(client: ModelClient, **kw) -> ModelReply:
    kw.setdefault("signal", CancelSignal())
    return await client.complete("m", MESSAGES, TOOLS, max_tokens=kw.pop("max_tokens", 64), **kw)


def same_reply(a: ModelReply, b: ModelReply) -> bool:
    fields = ("content", "tool_calls", "finish_reason", "prompt_tokens", "completion_tokens", "usage_estimated")
    return all(getattr(a, f) == getattr(b, f) for f in fields)


# --- loopback servers --------------------------------------------------------------


class _Server(uvicorn.Server):
    """uvicorn on a free loopback port that says when it is listening, and leaves the
    test process's signal handlers alone."""

    def __init__(self, app: Starlette) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", timeout_graceful_shutdown=2)
        super().__init__(config)
        self.listening = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self):
        yield

    async def startup(self, sockets=None) -> None:
        await super().startup(sockets)
        self.listening.set()


@contextlib.asynccontextmanager
async def serving(app: Starlette) -> AsyncIterator[str]:
    """Serve ``app`` on loopback for the block; yields the base URL; always stops it."""
    server = _Server(app)
    serve = asyncio.create_task(server.serve())
    listening = asyncio.create_task(server.listening.wait())
    try:
        await asyncio.wait({serve, listening}, return_when=asyncio.FIRST_COMPLETED)
        if not server.listening.is_set():
            serve.result()  # startup failed: raise why
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        listening.cancel()
        server.should_exit = True
        await serve


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- happy path ----------------------------------------------------------------------


async def test_reply_and_request_shape() -> None:
    fake = Fake(ok(TOOL_MESSAGE))
    async with fake.client() as client:
        reply = await ask(client, max_tokens=64)
    assert reply.content == "Let me look."
    assert reply.tool_calls == TOOL_MESSAGE["tool_calls"]
    assert reply.finish_reason == "tool_calls"
    assert (reply.prompt_tokens, reply.completion_tokens, reply.usage_estimated) == (42, 7, False)
    assert reply.provider_ms > 0
    assert reply.message() == TOOL_MESSAGE
    expected = {"model": "m", "messages": MESSAGES, "tools": TOOLS, "tool_choice": "auto", "max_tokens": 64}
    assert fake.bodies == [json.dumps(expected, separators=(",", ":")).encode()]
    assert fake.auth == [f"Bearer {KEY}"]


def _long_transcript(turns: int) -> list[dict]:
    """A transcript whose tool results are 10 KB each (non-ASCII included)."""
    messages = list(MESSAGES)
    for t in range(turns):
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            {"id": f"c{t}", "type": "function", "function": {"name": "read_file", "arguments": '{"path":"a.log"}'}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{t}", "content": f"line {t} é " * 1000})
    return messages


@pytest.mark.parametrize("loopback", [False, True], ids=["asgi", "loopback"])
async def test_a_long_transcript_arrives_whole_with_its_length(loopback: bool) -> None:
    """Past one segment the body goes out in chunks: the server must still get exactly
    the JSON of the whole request, framed by Content-Length (not re-framed as chunked),
    and a retried request sends all of it again."""
    fake = Fake(ok(TOOL_MESSAGE), ok(TOOL_MESSAGE), ok(TOOL_MESSAGE), status(503), default=ok(TOOL_MESSAGE))
    transcript = EncodedTranscript()
    messages = _long_transcript(10)
    async with contextlib.AsyncExitStack() as stack:
        if loopback:
            url = await stack.enter_async_context(serving(fake.app))
            client = ModelClient(url, KEY, backoff_base_s=0.001, backoff_cap_s=0.002)
        else:
            client = fake.client()
        await stack.enter_async_context(client)
        for _ in range(4):  # the transcript grows across segment boundaries between requests
            await client.complete("m", messages, TOOLS, max_tokens=64, signal=CancelSignal(), transcript=transcript)
            messages += _long_transcript(10)[2:]
    sent = [json.loads(body) for body in fake.bodies]
    assert [len(s["messages"]) for s in sent] == [22, 42, 62, 82, 82]  # the last one answered 503 once
    assert sent[-1] == {"model": "m", "messages": messages[:82], "tools": TOOLS, "tool_choice": "auto", "max_tokens": 64}
    assert fake.bodies[-2] == fake.bodies[-1] and len(fake.bodies[-1]) > 4 * SEGMENT_BYTES
    assert fake.framing == [(str(len(body)), None) for body in fake.bodies]


def test_a_request_copies_at_most_one_segment_of_the_transcript() -> None:
    """What was sent before is reused as it is (the same bytes objects); only the open
    segment, at most about SEGMENT_BYTES, is copied per request."""
    transcript = EncodedTranscript()
    frame = transcript.frame("m", TOOLS, 64, False)
    messages = _long_transcript(30)
    first = transcript.body(frame, messages)
    messages += _long_transcript(1)[2:]
    second = transcript.body(frame, messages)
    expected = {"model": "m", "messages": messages, "tools": TOOLS, "tool_choice": "auto", "max_tokens": 64}
    assert bytes(second) == json.dumps(expected, separators=(",", ":"), ensure_ascii=False).encode()
    assert second.length == len(bytes(second))
    assert all(type(chunk) is bytes for chunk in second.chunks)  # immutable: httpx may hold them
    reused = [c for c in second.chunks if any(c is old for old in first.chunks)]
    assert len(reused) >= len(bytes(second)) // SEGMENT_BYTES - 1
    fresh = [c for c in second.chunks if c not in reused]
    assert max(map(len, fresh)) < SEGMENT_BYTES + 12_000 + len(frame[1])
    # The same transcript object given a different (shorter) transcript starts over.
    assert json.loads(bytes(transcript.body(frame, MESSAGES)))["messages"] == MESSAGES
    # The frame is kept only while model, options and tools stay the same.
    assert transcript.frame("m", TOOLS, 64, False) is frame
    other = json.loads(bytes(transcript.body(transcript.frame("m2", list(TOOLS), 32, True), MESSAGES)))
    assert {k: v for k, v in other.items() if k != "messages"} == {
        "model": "m2", "tools": TOOLS, "tool_choice": "auto", "max_tokens": 32,
        "stream": True, "stream_options": {"include_usage": True}}


async def test_optional_fields_left_out() -> None:
    fake = Fake()
    async with ModelClient(BASE, transport=httpx.ASGITransport(app=fake.app)) as client:
        reply = await client.complete("m", MESSAGES, None, max_tokens=None, signal=CancelSignal())
    assert json.loads(fake.bodies[0]) == {"model": "m", "messages": MESSAGES}
    assert fake.auth == [None]
    assert reply.message() == ANSWER


async def test_odd_but_usable_tool_calls_are_normalised() -> None:
    message = {"role": "assistant", "content": None,
               "tool_calls": [{"function": {"name": "read_file", "arguments": {"path": "a"}}}]}
    fake = Fake(raw(json.dumps({"choices": [{"message": message}], "usage": USAGE}).encode()))
    async with fake.client() as client:
        reply = await ask(client)
    assert reply.tool_calls == [
        {"id": "", "type": "function", "function": {"name": "read_file", "arguments": '{"path":"a"}'}}
    ]
    assert reply.finish_reason == "tool_calls"


def test_base_url() -> None:
    assert ModelClient("http://127.0.0.1:8000/v1/").url == "http://127.0.0.1:8000/v1/chat/completions"
    with pytest.raises(ValueError, match="base URL"):
        ModelClient("localhost:8000/v1")


# --- retries -------------------------------------------------------------------------


async def test_429_honours_retry_after_then_succeeds() -> None:
    fake = Fake(status(429, "slow down", {"Retry-After": "0.05"}))
    notices: list[RetryNotice] = []
    async with fake.client(retry_after_cap_s=1.0) as client:
        reply = await ask(client, on_retry=notices.append)
    assert reply.content == ANSWER["content"]
    assert fake.requests == 2
    assert notices == [
        RetryNotice(1, 429, f"provider is rate limiting (429 Too Many Requests) at {URL}: slow down", 0.05)
    ]


def _http_date(delta: timedelta) -> str:
    return format_datetime(datetime.now(timezone.utc) + delta, usegmt=True)


@pytest.mark.parametrize(
    ("header", "wait"),
    [
        ("100", 0.02),  # capped
        (_http_date(timedelta(hours=1)), 0.02),  # an HTTP-date, capped
        (_http_date(timedelta(hours=-1)), 0.0),  # an HTTP-date already past
        ("soon", 0.0015),  # unreadable: jittered backoff instead (the rng's midpoint)
    ],
    ids=["seconds", "date-ahead", "date-past", "unreadable"],  # stable: the dates change by the second
)
async def test_retry_after_forms(header: str, wait: float) -> None:
    fake = Fake(status(429, headers={"Retry-After": header}))
    notices: list[RetryNotice] = []
    async with fake.client(retry_after_cap_s=0.02, rng=Ceilings(), backoff_base_s=0.003, backoff_cap_s=1.0) as client:
        await ask(client, on_retry=notices.append)
    assert [n.wait_s for n in notices] == [wait]


async def test_5xx_twice_then_success_with_jitter_from_injected_rng() -> None:
    fake = Fake(status(500), status(503, "overloaded"))
    rng = Ceilings()
    notices: list[RetryNotice] = []
    async with fake.client(rng=rng, backoff_base_s=0.01, backoff_cap_s=0.015) as client:
        reply = await ask(client, on_retry=notices.append)
    assert reply.content == ANSWER["content"]
    assert fake.requests == 3
    # Full jitter over [0, min(cap, base * 2^(n-1))], drawn from the injected rng.
    assert rng.ranges == [(0.0, 0.01), (0.0, 0.015)]
    assert [(n.attempt, n.status, n.wait_s) for n in notices] == [(1, 500, 0.005), (2, 503, 0.0075)]
    assert notices[1].reason == f"provider failed (503 Service Unavailable) at {URL}: overloaded"


async def test_jitter_is_deterministic_for_a_seeded_rng() -> None:
    import random

    waits = []
    for _ in range(2):
        notices: list[RetryNotice] = []
        async with Fake(status(500), status(500)).client(rng=random.Random(7)) as client:
            await ask(client, on_retry=notices.append)
        waits.append([n.wait_s for n in notices])
    assert waits[0] == waits[1] and len(set(waits[0])) == 2


async def test_5xx_forever_gives_up_with_the_last_reason() -> None:
    fake = Fake(default=status(502, "upstream gone"))
    async with fake.client(max_retries=2) as client:
        with pytest.raises(ProviderError) as caught:
            await ask(client)
    assert fake.requests == 3
    err = caught.value
    assert (err.status, err.retryable) == (502, True)
    assert re.fullmatch(re.escape(f"provider failed (502 Bad Gateway) at {URL}: upstream gone (gave up after 3 attempts")
                        + r" over \d+\.\d s\)", err.message), err.message
    assert err.attempts == 3 and err.seconds >= 0


@pytest.mark.parametrize(
    ("code", "text"),
    [
        (400, "provider rejected the request (400 Bad Request)"),
        (401, "provider rejected the API key (401 Unauthorized)"),
        (403, "provider refused access (403 Forbidden)"),
        (404, "provider has no such endpoint or model (404 Not Found)"),
        (422, "provider rejected the request (422 Unprocessable Entity)"),
    ],
)
async def test_permanent_errors_are_not_retried(code: int, text: str) -> None:
    fake = Fake(default=status(code, "Incorrect API key provided"))
    notices: list[RetryNotice] = []
    async with fake.client() as client:
        with pytest.raises(ProviderError) as caught:
            await ask(client, on_retry=notices.append)
    assert fake.requests == 1 and notices == []
    err = caught.value
    assert (err.status, err.retryable) == (code, False)
    assert str(err) == f"{text} at {URL}: Incorrect API key provided"


async def test_permanent_error_without_the_openai_shape() -> None:
    fake = Fake(lambda body, request: Response(b"<html>nope</html>", status_code=404, media_type="text/html"))
    async with fake.client() as client:
        with pytest.raises(ProviderError, match=r"^provider has no such endpoint or model \(404 Not Found\) at \S+$"):
            await ask(client)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"<html>502 Bad Gateway</html>", "the body is not JSON"),
        (b'{"choices": []}', "no choices"),
        (b'{"object": "chat.completion"}', "no choices"),
        (b'{"choices": [{"index": 0}]}', "no choices[0].message"),
        (b'{"choices": [{"message": {"content": 5}}]}', "content is not text"),
        (b'{"choices": [{"message": {"tool_calls": {}}}]}', "tool_calls is not a list"),
        (b'{"choices": [{"message": {"tool_calls": [{"function": {}}]}}]}', "tool call 0 has no function name"),
    ],
)
async def test_malformed_200_is_retried(body: bytes, why: str) -> None:
    fake = Fake(raw(body))
    notices: list[RetryNotice] = []
    async with fake.client() as client:
        reply = await ask(client, on_retry=notices.append)
    assert reply.content == ANSWER["content"] and fake.requests == 2
    assert [(n.status, n.reason) for n in notices] == [(200, f"malformed reply from {URL}: {why}")]


async def test_refused_connection_names_the_url() -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    notices: list[RetryNotice] = []
    async with ModelClient(url, KEY, max_retries=1, backoff_base_s=0.001) as client:
        with pytest.raises(ProviderError) as caught:
            await ask(client, on_retry=notices.append)
    expected = f"could not connect to {url}/chat/completions: connection refused"
    assert caught.value.message.startswith(f"{expected} (gave up after 2 attempts over ")
    assert (caught.value.status, caught.value.retryable) == (None, True)
    assert [n.reason for n in notices] == [expected]


# --- deadline and cancellation ---------------------------------------------------------


async def _drip(request: Request) -> Response:
    """A 200 whose body never ends: one byte every 20 ms, well within any read timeout."""
    stream = (await request.json()).get("stream")

    async def forever():
        for _ in range(1500):  # bounded, in case a client never hangs up
            yield b":" if stream else b" "
            await asyncio.sleep(0.02)

    return StreamingResponse(forever(), media_type="text/event-stream" if stream else "application/json")


@pytest.mark.parametrize("stream", [False, True])
async def test_dripping_server_trips_the_deadline(stream: bool) -> None:
    app = Starlette(routes=[Route("/v1/chat/completions", _drip, methods=["POST"])])
    async with serving(app) as url, ModelClient(url, KEY, read_timeout=5.0, deadline_s=0.5, stream=stream) as client:
        with pytest.raises(ProviderError) as caught:
            # The outer bound only keeps a regression from hanging the suite.
            await asyncio.wait_for(ask(client), timeout=30)
    assert caught.value.message == "no complete reply within 0.5 s (deadline, 1 attempt)"
    assert caught.value.retryable


async def test_deadline_names_the_last_failure() -> None:
    fake = Fake(default=status(503))
    async with fake.client(deadline_s=0.2, max_retries=1000) as client:
        with pytest.raises(ProviderError) as caught:
            await ask(client)
    assert re.fullmatch(r"no complete reply within 0\.2 s \(deadline, \d+ attempts\); last failure: "
                        + re.escape(f"provider failed (503 Service Unavailable) at {URL}"), caught.value.message)


async def test_stop_during_retry_after_wait_raises_run_cancelled() -> None:
    fake = Fake(status(429, headers={"Retry-After": "30"}))
    signal = CancelSignal()
    stoppers: list[asyncio.Task] = []

    async def stop() -> None:
        signal.cancel("operator pressed Stop")

    def on_retry(notice: RetryNotice) -> None:
        stoppers.append(asyncio.create_task(stop()))

    async with fake.client(retry_after_cap_s=30.0, deadline_s=60.0) as client:
        with pytest.raises(RunCancelled, match="operator pressed Stop"):
            await ask(client, signal=signal, on_retry=on_retry)
    await asyncio.gather(*stoppers)
    assert fake.requests == 1


async def test_stop_during_the_request_and_task_cancellation_propagate() -> None:
    arrived = asyncio.Event()

    async def hang(request: Request) -> Response:
        arrived.set()
        await asyncio.Event().wait()
        raise AssertionError("never answered")

    app = Starlette(routes=[Route("/v1/chat/completions", hang, methods=["POST"])])
    for how in ("signal", "task"):
        arrived.clear()
        signal = CancelSignal()
        async with ModelClient(BASE, KEY, transport=httpx.ASGITransport(app=app)) as client:
            call = asyncio.create_task(ask(client, signal=signal))
            await arrived.wait()
            if how == "signal":
                signal.cancel("stop")
                with pytest.raises(RunCancelled):
                    await call
            else:
                call.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await call



async def test_stop_lets_the_guarded_work_finish_its_cleanup_first() -> None:
    signal, started, cleaned = CancelSignal(), asyncio.Event(), []

    async def work() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            await asyncio.sleep(0)  # cleanup that itself awaits (closing a connection)
            cleaned.append("closed")

    guarded = asyncio.create_task(signal.guard(work()))
    await started.wait()
    signal.cancel("operator pressed Stop")
    with pytest.raises(RunCancelled, match="operator pressed Stop"):
        await guarded
    assert cleaned == ["closed"]
    with pytest.raises(RunCancelled):  # once fired, nothing more is started
        await signal.guard(asyncio.sleep(0))

# --- usage ---------------------------------------------------------------------------------


def counted(message: dict, tools: list[dict] | None = TOOLS) -> tuple[int, int]:
    counter = TokenCounter()
    return (
        counter.prompt_tokens(MESSAGES, tools),
        counter.completion_tokens(message.get("content"), message.get("tool_calls")),
    )


@pytest.mark.parametrize("usage", [None, {"prompt_tokens": 3}, {"prompt_tokens": "3", "completion_tokens": 1}])
async def test_missing_usage_is_counted_locally(usage: dict | None) -> None:
    fake = Fake(ok(TOOL_MESSAGE, usage=usage))
    async with fake.client() as client:
        reply = await ask(client)
    assert reply.usage_estimated
    assert (reply.prompt_tokens, reply.completion_tokens) == counted(TOOL_MESSAGE)


# --- streaming --------------------------------------------------------------------------


@pytest.mark.parametrize("message", [ANSWER, TOOL_MESSAGE])
async def test_stream_assembles_the_same_reply(message: dict) -> None:
    fake = Fake(ok(message), ok(message))
    async with fake.client() as plain, fake.client(stream=True) as streaming:
        whole = await ask(plain)
        assembled = await ask(streaming)
    assert same_reply(whole, assembled)
    assert assembled.message() == message
    sent = json.loads(fake.bodies[1])
    assert (sent["stream"], sent["stream_options"]) == (True, {"include_usage": True})


async def test_stream_cut_before_usage_is_estimated() -> None:
    fake = Fake(raw(sse(chunks(TOOL_MESSAGE, usage=None), done=False), "text/event-stream"))
    async with fake.client(stream=True) as client:
        reply = await ask(client)
    assert reply.usage_estimated and reply.finish_reason == "tool_calls"
    assert reply.tool_calls == TOOL_MESSAGE["tool_calls"]
    assert (reply.prompt_tokens, reply.completion_tokens) == counted(TOOL_MESSAGE)


@pytest.mark.parametrize("whole", [True, False])
async def test_stream_connection_dropped_on_loopback(whole: bool) -> None:
    """The server dies mid-stream. After the finish chunk the message is whole and only
    usage is lost; before it, the attempt failed."""
    events = chunks(TOOL_MESSAGE, usage=None)
    if not whole:
        events = events[:-1]

    async def cut(request: Request) -> Response:
        async def body():
            for event in events:
                yield f"data: {json.dumps(event)}\n\n".encode()
            raise ConnectionAbortedError("test: drop the connection")

        return StreamingResponse(body(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/chat/completions", cut, methods=["POST"])])
    async with serving(app) as url, ModelClient(url, KEY, stream=True, max_retries=0) as client:
        if whole:
            reply = await ask(client)
            assert reply.usage_estimated and reply.tool_calls == TOOL_MESSAGE["tool_calls"]
        else:
            with pytest.raises(ProviderError, match=r"failed: peer closed connection .*\(gave up after 1 attempt over \d+\.\d s\)$"):
                await ask(client)


async def test_stream_cut_mid_message_is_retried() -> None:
    partial = chunks(TOOL_MESSAGE)[:-3]  # no finish, no usage
    fake = Fake(raw(sse(partial, done=False), "text/event-stream"), default=ok(TOOL_MESSAGE))
    notices: list[RetryNotice] = []
    async with fake.client(stream=True) as client:
        reply = await ask(client, on_retry=notices.append)
    assert reply.tool_calls == TOOL_MESSAGE["tool_calls"] and not reply.usage_estimated
    assert [n.reason for n in notices] == [f"stream from {URL} ended before the message was complete"]


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (sse([{"error": {"message": "model crashed"}}]), f"provider failed mid-stream at {URL}: model crashed"),
        (b"data: {not json\n\n", f"malformed stream from {URL}: a chunk is not a completion chunk"),
        (sse([{"choices": [5]}]), f"malformed stream from {URL}: a chunk is not a completion chunk"),
    ],
)
async def test_bad_stream_chunks_are_retried(body: bytes, why: str) -> None:
    fake = Fake(raw(body, "text/event-stream"))
    notices: list[RetryNotice] = []
    async with fake.client(stream=True) as client:
        await ask(client, on_retry=notices.append)
    assert [n.reason for n in notices] == [why]


async def test_stream_request_answered_without_a_stream() -> None:
    fake = Fake(lambda body, request: JSONResponse(completion(TOOL_MESSAGE)))
    async with fake.client(stream=True) as client:
        reply = await ask(client)
    assert reply.tool_calls == TOOL_MESSAGE["tool_calls"] and not reply.usage_estimated


# --- secrets ------------------------------------------------------------------------------


def echo_auth(code: int) -> Handler:
    """A careless provider that repeats the Authorization header back."""

    def handle(body: dict, request: Request) -> Response:
        auth = request.headers["authorization"]
        if code != 200:
            return JSONResponse({"error": {"message": f"bad header {auth}"}}, status_code=code)
        call = {"id": "c", "type": "function", "function": {"name": "read_file", "arguments": json.dumps({"path": auth})}}
        message = {"role": "assistant", "content": f"you sent {auth}; key {KEY}", "tool_calls": [call]}
        return JSONResponse(completion(message))

    return handle


async def test_api_key_never_leaves_the_module() -> None:
    fake = Fake(echo_auth(500), echo_auth(200), echo_auth(401))
    notices: list[RetryNotice] = []
    async with fake.client() as client:
        reply = await ask(client, on_retry=notices.append)
        with pytest.raises(ProviderError) as caught:
            await ask(client)
    assert KEY not in repr(reply) and KEY not in repr(notices)
    assert reply.content == "you sent [redacted]; key [redacted]"
    assert reply.tool_calls[0]["function"]["arguments"] == '{"path": "[redacted]"}'
    assert notices[0].reason.endswith("bad header [redacted]")
    assert KEY not in str(caught.value) and "bad header [redacted]" in str(caught.value)


async def test_api_key_redacted_in_errors_after_retries() -> None:
    fake = Fake(default=echo_auth(503))
    async with fake.client(max_retries=1) as client:
        with pytest.raises(ProviderError) as caught:
            await ask(client)
    assert KEY not in str(caught.value) and "[redacted]" in str(caught.value)


async def test_placeholder_keys_are_not_secrets() -> None:
    """Local servers take keys like "none"; redacting those would mangle replies."""
    fake = Fake(ok({"role": "assistant", "content": "none of the files"}))
    async with ModelClient(BASE, "none", transport=httpx.ASGITransport(app=fake.app)) as client:
        reply = await ask(client)
    assert reply.content == "none of the files"


# --- against the scripted provider ------------------------------------------------------------


async def test_scripted_provider_faults_and_stream() -> None:
    """The provider's own injections: a 429, a 500 and a garbage body before turn 0's
    reply; the streamed reply equals the whole one and usage matches local counting."""
    provider = pytest.importorskip("tether.demo.provider")
    faults = provider.FaultPlan.parse("429@0,500@0,garbage@0")
    app = provider.create_app(faults=faults, retry_after=0.01)
    notices: list[RetryNotice] = []
    transport = httpx.ASGITransport(app=app)
    async with (
        ModelClient(BASE, KEY, transport=transport, backoff_base_s=0.001) as plain,
        ModelClient(BASE, KEY, transport=transport, stream=True) as streaming,
    ):
        whole = await plain.complete("plan", MESSAGES, TOOLS, max_tokens=None, signal=CancelSignal(), on_retry=notices.append)
        assembled = await streaming.complete("plan", MESSAGES, TOOLS, max_tokens=None, signal=CancelSignal())
    assert [n.status for n in notices] == [429, 500, 200]
    assert notices[0].wait_s == 0.01
    assert same_reply(whole, assembled) and not whole.usage_estimated
    assert whole.tool_calls[0]["function"]["name"] == "list_files"
    assert (whole.prompt_tokens, whole.completion_tokens) == counted(whole.message())


async def test_requests_in_flight_at_once_spread_over_a_few_pools():
    """20 requests at once from one client go over three connection pools (8 + 8 + 4), each
    reply reaches its own request, and the next burst reuses the same pools."""
    gate, arrived = asyncio.Event(), []

    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        arrived.append(body)
        if len(arrived) == 20:
            gate.set()
        await gate.wait()  # held until all 20 are in flight
        return JSONResponse(completion({"role": "assistant", "content": body["messages"][-1]["content"]}))

    app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
    async with serving(app) as url, ModelClient(url) as client:
        async def ask(i: int) -> str:
            reply = await client.complete("m", [{"role": "user", "content": f"q{i}"}], None, max_tokens=None,
                                          signal=CancelSignal())
            return reply.content

        for _ in range(2):
            gate.clear()
            arrived.clear()
            assert await asyncio.gather(*(ask(i) for i in range(20))) == [f"q{i}" for i in range(20)]
            assert len(client._pools) == 3

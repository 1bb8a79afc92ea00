"""The scripted provider, driven the way real clients drive it: through the official
``openai`` package, in-process (httpx's ASGI transport) and over a real loopback socket."""

from __future__ import annotations

import asyncio
import json
import threading
from contextlib import asynccontextmanager
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import openai
import pytest

from tether.demo.provider import SCENARIOS, FaultPlan, create_app
from tether.demo.provider import scenarios as sc
from tether.demo.provider.server import running_provider
from tether.models.tokens import TokenCounter, encoding

API_KEY = "sk-test-do-not-echo-4242"


def _tool(name: str, properties: dict[str, Any] | None = None) -> dict[str, Any]:
    schema = {"type": "object", "properties": properties or {}, "required": list(properties or {})}
    return {"type": "function", "function": {"name": name, "description": name, "parameters": schema}}


TOOLS = [
    _tool("list_files"),
    _tool("read_file", {"path": {"type": "string"}}),
    _tool("delete_file", {"path": {"type": "string"}}),
    _tool("scan_archive"),
    _tool("research", {"question": {"type": "string"}}),
    _tool("close_ticket", {"ticket": {"type": "integer"}, "reason": {"type": "string"}}),
]

# Plausible tool results, keyed by (tool, the argument that matters).
RESULTS: dict[tuple[str, str], str] = {
    ("list_files", ""): "access.log\nerrors.log\nnotes.txt\nsecrets.env",
    ("read_file", "errors.log"): "12:00:03 ERROR worker 7 timed out after 30000 ms",
    ("read_file", "notes.txt"): "Remember to rotate your logs.",
    ("read_file", "timeout.log"): "Error: no such file: timeout.log. Call list_files to see what exists.",
    ("read_file", "secrets.env"): "Error: permission denied: secrets.env",
    ("delete_file", "access.log"): "Deleted access.log.",
    ("scan_archive", ""): "scanned 1200 of 1200 entries",
    ("research", sc.RESEARCH_QUESTION): sc.PLAN_ANSWER,
    ("close_ticket", "42"): "Ticket 42 closed: duplicate of 17.",
}
GENERIC_ERROR = {("read_file", "timeout.log"): "Error"}
DECLINED = {("delete_file", "access.log"): "The operator declined this call: keep the logs. Nothing was done."}
TICKET_DECLINED = {("close_ticket", "42"): "The operator ann declined this call: 17 is another bug. Nothing was done."}
SCAN_CANCELLED = {("scan_archive", ""): "The scan was cancelled after it scanned 400 of 1200 entries."}


@dataclass(frozen=True)
class Turn:
    """One assistant reply, reduced to what a script decides: a call, or an answer."""

    content: str | None = None
    name: str | None = None
    args: dict[str, Any] | None = None
    call_id: str | None = None


def call(name: str, **args: Any) -> Turn:
    return Turn(name=name, args=args)


def answer(text: str) -> Turn:
    return Turn(content=text)


def _decision(turn: Turn) -> Turn:
    return Turn(content=turn.content, name=turn.name, args=turn.args)


def _result_for(name: str, args: Mapping[str, Any], overrides: Mapping[tuple[str, str], str]) -> str:
    key = (name, str(next(iter(args.values()), "")))
    return {**RESULTS, **overrides}[key]


def _openai_client(app: Any) -> openai.AsyncOpenAI:
    transport = httpx.ASGITransport(app=app)
    http_client = httpx.AsyncClient(transport=transport, base_url="http://tether/v1")
    return openai.AsyncOpenAI(base_url="http://tether/v1", api_key=API_KEY, http_client=http_client, max_retries=0)


def _start(question: str = "Which file mentions a timeout?") -> list[dict[str, Any]]:
    return [{"role": "system", "content": "You are a careful assistant."}, {"role": "user", "content": question}]


async def drive(
    client: openai.AsyncOpenAI,
    model: str,
    turns: int,
    overrides: Mapping[tuple[str, str], str] | None = None,
    messages: list[dict[str, Any]] | None = None,
) -> tuple[list[Turn], list[list[dict[str, Any]]]]:
    """A minimal harness: ask, run the calls with plausible results, repeat until an
    answer or ``turns`` replies. Returns the replies and the request sent for each."""
    messages = list(messages or _start())
    replies: list[Turn] = []
    requests: list[list[dict[str, Any]]] = []
    while len(replies) < turns:
        requests.append(list(messages))
        resp = await client.chat.completions.create(model=model, messages=messages, tools=TOOLS)
        msg = resp.choices[0].message
        messages.append(msg.model_dump(exclude_none=True, include={"role", "content", "tool_calls"}))
        if not msg.tool_calls:
            assert resp.choices[0].finish_reason == "stop"
            replies.append(Turn(content=msg.content))
            break
        assert resp.choices[0].finish_reason == "tool_calls" and msg.content is None
        (tc,) = msg.tool_calls
        args = json.loads(tc.function.arguments)
        replies.append(Turn(name=tc.function.name, args=args, call_id=tc.id))
        content = _result_for(tc.function.name, args, overrides or {})
        messages.append({"role": "tool", "tool_call_id": tc.id, "content": content})
    return replies, requests


@pytest.fixture
def client() -> openai.AsyncOpenAI:
    return _openai_client(create_app())


@pytest.fixture
async def provider_url() -> AsyncIterator[str]:
    async with running_provider() as url:
        yield url


# --- every scenario's script, turn by turn ---------------------------------------------

PLAN = [call("list_files"), call("read_file", path="errors.log"), answer(sc.PLAN_ANSWER)]

SCRIPTS: list[tuple[str, str, Mapping[tuple[str, str], str], list[Turn]]] = [
    ("plan", "plan", {}, PLAN),
    ("research_child", "research_child", {}, PLAN),
    (
        "recover-descriptive",
        "recover",
        {},
        [
            call("read_file", path="timeout.log"),
            call("list_files"),
            call("read_file", path="errors.log"),
            answer(sc.RECOVER_ANSWER),
        ],
    ),
    ("recover-generic", "recover", GENERIC_ERROR, [call("read_file", path="timeout.log"), answer(sc.RECOVER_GIVE_UP)]),
    (
        "destructive-approved",
        "destructive",
        {},
        [call("list_files"), call("delete_file", path="access.log"), answer(sc.DESTRUCTIVE_DELETED)],
    ),
    (
        "destructive-declined",
        "destructive",
        DECLINED,
        [call("list_files"), call("delete_file", path="access.log"), answer(sc.DESTRUCTIVE_DECLINED)],
    ),
    (
        "repeat",
        "repeat",
        {},
        [call("read_file", path="notes.txt")] * 2 + [answer(sc.REPEAT_ANSWER)],
    ),
    ("repeat_baseline", "repeat_baseline", {}, [call("read_file", path="notes.txt"), answer(sc.REPEAT_ANSWER)]),
    (
        "repeat_write",
        "repeat_write",
        {},
        [call("delete_file", path="access.log")] * 2 + [answer(sc.REPEAT_WRITE_ANSWER)],
    ),
    ("slow-finished", "slow", {}, [call("scan_archive"), answer(sc.SLOW_ANSWER.format(n=1200))]),
    ("slow-cancelled", "slow", SCAN_CANCELLED, [call("scan_archive"), answer(sc.SLOW_UNFINISHED.format(n=400))]),
    (
        "ticket-closed",
        "ticket",
        {},
        [call("close_ticket", ticket=42, reason="duplicate of 17"), answer(sc.TICKET_CLOSED)],
    ),
    (
        "ticket-declined",
        "ticket",
        TICKET_DECLINED,
        [
            call("close_ticket", ticket=42, reason="duplicate of 17"),
            answer(sc.TICKET_KEPT.format(said=TICKET_DECLINED[("close_ticket", "42")])),
        ],
    ),
    (
        "research",
        "research",
        {},
        [call("research", question=sc.RESEARCH_QUESTION), answer(sc.RESEARCH_PREFIX + sc.PLAN_ANSWER)],
    ),
]


@pytest.mark.parametrize(("model", "overrides", "expected"), [s[1:] for s in SCRIPTS], ids=[s[0] for s in SCRIPTS])
async def test_scenario_script(client: openai.AsyncOpenAI, model: str, overrides: Any, expected: list[Turn]) -> None:
    replies, _ = await drive(client, model, turns=len(expected) + 2, overrides=overrides)
    assert [_decision(r) for r in replies] == expected


def test_every_scenario_is_scripted_here() -> None:
    never_answering = {"runaway", "forbidden"}
    assert {s[1] for s in SCRIPTS} | never_answering == set(SCENARIOS)


async def test_runaway_calls_list_files_forever_with_turn_ids(client: openai.AsyncOpenAI) -> None:
    replies, _ = await drive(client, "runaway", turns=6)
    assert replies == [Turn(name="list_files", args={}, call_id=f"c{t}") for t in range(6)]


async def test_forbidden_never_gives_up(client: openai.AsyncOpenAI) -> None:
    replies, _ = await drive(client, "forbidden", turns=5)
    assert [_decision(r) for r in replies] == [call("read_file", path="secrets.env")] * 5


@pytest.mark.parametrize(("model", "ids"), [("repeat", ["r0", "r1"]), ("repeat_write", ["w0", "w1"])])
async def test_repeats_carry_two_call_ids(client: openai.AsyncOpenAI, model: str, ids: list[str]) -> None:
    replies, _ = await drive(client, model, turns=3)
    assert [r.call_id for r in replies[:2]] == ids
    assert replies[0].args == replies[1].args


def test_slow_reads_a_count_with_thousands_separator() -> None:
    result = {"role": "tool", "tool_call_id": "x", "content": "scanned 1,200 of 1,200"}
    messages = [*_start(), {"role": "assistant", "content": None}, result]
    assert SCENARIOS["slow"].reply(messages).content == sc.SLOW_ANSWER.format(n=1200)


# --- sync, async and streaming clients over a real socket -----------------------------


async def test_sync_client_over_loopback(provider_url: str) -> None:
    def ask() -> Any:
        with openai.OpenAI(base_url=provider_url, api_key=API_KEY, max_retries=0) as sync_client:
            return sync_client.chat.completions.create(model="plan", messages=_start(), tools=TOOLS)

    # The server runs in this event loop, so the blocking client runs in a thread.
    resp = await asyncio.to_thread(ask)
    assert resp.object == "chat.completion" and resp.id.startswith("chatcmpl-")
    assert resp.choices[0].message.tool_calls[0].function.name == "list_files"


async def test_async_client_over_loopback(provider_url: str) -> None:
    async with openai.AsyncOpenAI(base_url=provider_url, api_key=API_KEY, max_retries=0) as real:
        replies, _ = await drive(real, "plan", turns=5)
        models = await real.models.list()
    assert [_decision(r) for r in replies] == PLAN
    assert [m.id for m in models.data] == list(SCENARIOS)
    assert {m.owned_by for m in models.data} == {"tether"}


@pytest.mark.parametrize("model", ["plan", "research", "destructive"])
async def test_streaming_reassembles_to_the_plain_reply(provider_url: str, model: str) -> None:
    """At every turn of a script (tool-call replies and answers), the stream carries exactly
    the plain reply, read by hand and by the client's own stream helper."""
    async with openai.AsyncOpenAI(base_url=provider_url, api_key=API_KEY, max_retries=0) as real:
        _, requests = await drive(real, model, turns=5)
        for messages in requests:
            await _assert_stream_matches(real, model, messages)


async def _assert_stream_matches(real: openai.AsyncOpenAI, model: str, messages: list[Any]) -> None:
    plain = await real.chat.completions.create(model=model, messages=messages, tools=TOOLS)
    stream = await real.chat.completions.create(
        model=model, messages=messages, tools=TOOLS, stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in stream]
    async with real.chat.completions.stream(
        model=model, messages=messages, tools=TOOLS, stream_options={"include_usage": True}
    ) as helper:
        final = await helper.get_final_completion()

    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices == [] and chunks[-1].usage == plain.usage
    assert all(c.usage is None for c in chunks[:-1])
    finishes = [c.choices[0].finish_reason for c in chunks[:-1] if c.choices[0].finish_reason]
    assert finishes == [plain.choices[0].finish_reason]
    assert _reassemble(chunks) == plain.choices[0].message.model_dump(exclude_none=True)

    assert final.usage == plain.usage
    assert final.choices[0].finish_reason == plain.choices[0].finish_reason
    assert _essence(final.choices[0].message) == _essence(plain.choices[0].message)


def _essence(message: Any) -> tuple[Any, ...]:
    """What a message says, ignoring the extras the stream helper adds (index, parsed args)."""
    calls = [(tc.id, tc.type, tc.function.name, tc.function.arguments) for tc in message.tool_calls or []]
    return message.role, message.content, calls


def _reassemble(chunks: list[Any]) -> dict[str, Any]:
    """Rebuild the message from its deltas, the way a hand-written client would."""
    message: dict[str, Any] = {"role": "assistant"}
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if delta.content is not None:
            message["content"] = message.get("content", "") + delta.content
        for tc in delta.tool_calls or []:
            slot = calls.setdefault(tc.index, {"function": {"arguments": ""}})
            if tc.id:
                slot.update(id=tc.id, type=tc.type)
                slot["function"]["name"] = tc.function.name
            slot["function"]["arguments"] += tc.function.arguments or ""
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


async def test_stream_without_usage_has_no_usage_chunk(client: openai.AsyncOpenAI) -> None:
    stream = await client.chat.completions.create(model="plan", messages=_start(), tools=TOOLS, stream=True)
    chunks = [chunk async for chunk in stream]
    assert all(chunk.choices for chunk in chunks)
    assert all(chunk.usage is None for chunk in chunks)


# --- errors ------------------------------------------------------------------------------


async def test_unknown_model_is_not_found(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as caught:
        await client.chat.completions.create(model="gpt-nope", messages=_start())
    error = caught.value
    assert error.status_code == 404 and error.code == "model_not_found" and error.type == "invalid_request_error"
    assert "gpt-nope" in error.message and "plan" in error.message


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=create_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://tether/v1") as raw:
        yield raw


GOOD_MESSAGES = [{"role": "user", "content": "hi"}]


def _plan_with(**fields: Any) -> dict[str, Any]:
    return {"model": "plan", "messages": GOOD_MESSAGES, **fields}


MALFORMED: list[tuple[str, bytes | dict[str, Any], str]] = [
    ("not-json", b"{not json", "not valid JSON"),
    ("not-utf8", b"\xff\xfe", "not valid JSON"),
    ("not-an-object", b"[1, 2]", "JSON object"),
    ("no-model", {"messages": GOOD_MESSAGES}, "'model'"),
    ("no-messages", {"model": "plan"}, "Missing required parameter: 'messages'"),
    ("messages-not-list", {"model": "plan", "messages": "hi"}, "'messages' must be a non-empty list"),
    ("messages-empty", {"model": "plan", "messages": []}, "'messages' must be a non-empty list"),
    ("message-not-object", {"model": "plan", "messages": ["hi"]}, "'messages[0]' must be an object"),
    ("bad-role", _plan_with(messages=[{"role": "robot", "content": "x"}]), "'messages[0].role' must be one of"),
    ("bad-content", {"model": "plan", "messages": [{"role": "user", "content": 7}]}, "'messages[0].content'"),
    (
        "tool-without-id",
        {"model": "plan", "messages": [*GOOD_MESSAGES, {"role": "tool", "content": "x"}]},
        "'messages[1].tool_call_id'",
    ),
    (
        "bad-tool-call",
        {"model": "plan", "messages": [{"role": "assistant", "tool_calls": [{"function": {"name": "x"}}]}]},
        "'messages[0].tool_calls[0].function'",
    ),
    ("tools-not-list", _plan_with(tools={"a": 1}), "'tools' must be a list"),
    ("max-tokens-zero", _plan_with(max_tokens=0), "'max_tokens' must be a positive"),
    ("max-tokens-str", _plan_with(max_tokens="5"), "'max_tokens' must be a positive"),
    ("max-tokens-bool", _plan_with(max_completion_tokens=True), "'max_completion_tokens'"),
    ("stream-not-bool", _plan_with(stream="yes"), "'stream' must be a boolean"),
]


@pytest.mark.parametrize(("body", "says"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
async def test_malformed_request_is_400_saying_why(http: httpx.AsyncClient, body: Any, says: str) -> None:
    kwargs = {"content": body} if isinstance(body, bytes) else {"json": body}
    resp = await http.post("/chat/completions", headers={"Authorization": f"Bearer {API_KEY}"}, **kwargs)
    assert resp.status_code == 400
    error = resp.json()["error"]
    assert error["type"] == "invalid_request_error" and says in error["message"]
    assert API_KEY not in resp.text


async def test_messages_missing_through_the_openai_client(client: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        await client.post("/chat/completions", body={"model": "plan"}, cast_to=object)
    assert "messages" in caught.value.message


async def test_unexpected_exception_is_a_500_without_traceback_or_key(caplog: pytest.LogCaptureFixture) -> None:
    class BrokenCounter(TokenCounter):
        def prompt_tokens(self, messages: Any, tools: Any = None) -> int:
            raise RuntimeError("boom inside the counter")

    transport = httpx.ASGITransport(app=create_app(counter=BrokenCounter()))
    async with httpx.AsyncClient(transport=transport, base_url="http://tether/v1") as raw:
        resp = await raw.post(
            "/chat/completions",
            json={"model": "plan", "messages": GOOD_MESSAGES},
            headers={"Authorization": f"Bearer {API_KEY}"},
        )
    assert resp.status_code == 500
    assert resp.json()["error"]["type"] == "server_error"
    assert "boom" not in resp.text and "Traceback" not in resp.text
    assert API_KEY not in caplog.text


async def test_unknown_route_is_an_openai_shaped_404(http: httpx.AsyncClient) -> None:
    resp = await http.get("/embeddings")
    assert resp.status_code == 404 and "error" in resp.json()


async def test_retrieve_model(client: openai.AsyncOpenAI) -> None:
    assert (await client.models.retrieve("slow")).id == "slow"
    with pytest.raises(openai.NotFoundError):
        await client.models.retrieve("gpt-nope")


# --- faults --------------------------------------------------------------------------------


def _at_turn(turn: int) -> list[dict[str, Any]]:
    """A request at the given turn index (that many assistant messages)."""
    messages = _start()
    for t in range(turn):
        messages.append({"role": "assistant", "content": None, "tool_calls": [_wire_call(f"c{t}")]})
        messages.append({"role": "tool", "tool_call_id": f"c{t}", "content": "access.log"})
    return messages


def _wire_call(call_id: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": "list_files", "arguments": "{}"}}


@pytest.fixture
async def faulty() -> Callable[[str], Any]:
    """Start a real provider with a fault plan; yields an AsyncOpenAI client factory."""

    @asynccontextmanager
    async def start(spec: str) -> AsyncIterator[openai.AsyncOpenAI]:
        async with running_provider(faults=FaultPlan.parse(spec), retry_after=1.0) as url:
            async with openai.AsyncOpenAI(base_url=url, api_key=API_KEY, max_retries=0) as real:
                yield real

    return start


async def test_429_once_with_retry_after(faulty: Any) -> None:
    async with faulty("429@1") as real:
        await real.chat.completions.create(model="runaway", messages=_at_turn(0))
        with pytest.raises(openai.RateLimitError) as caught:
            await real.chat.completions.create(model="runaway", messages=_at_turn(1))
        assert caught.value.response.headers["retry-after"] == "1"
        assert caught.value.code == "rate_limit_exceeded"
        resp = await real.chat.completions.create(model="runaway", messages=_at_turn(1))
    assert resp.choices[0].message.tool_calls[0].id == "c1"


async def test_500_twice_then_passes(faulty: Any) -> None:
    async with faulty("500@2x2") as real:
        for _ in range(2):
            with pytest.raises(openai.InternalServerError):
                await real.chat.completions.create(model="runaway", messages=_at_turn(2))
        resp = await real.chat.completions.create(model="runaway", messages=_at_turn(2))
    assert resp.choices[0].finish_reason == "tool_calls"


async def test_401_is_an_authentication_error_without_the_key(faulty: Any) -> None:
    async with faulty("401@0") as real:
        with pytest.raises(openai.AuthenticationError) as caught:
            await real.chat.completions.create(model="plan", messages=_at_turn(0))
    assert caught.value.code == "invalid_api_key"
    assert API_KEY not in caught.value.response.text


async def test_garbage_is_a_200_that_is_not_json() -> None:
    async with running_provider(faults=FaultPlan.parse("garbage@0")) as url:
        async with httpx.AsyncClient(base_url=url) as raw:
            resp = await raw.post("/chat/completions", json={"model": "plan", "messages": _at_turn(0)})
            again = await raw.post("/chat/completions", json={"model": "plan", "messages": _at_turn(0)})
    assert resp.status_code == 200
    with pytest.raises(json.JSONDecodeError):
        json.loads(resp.text)
    assert again.json()["object"] == "chat.completion"


async def test_drip_makes_a_client_read_time_out() -> None:
    async with running_provider(faults=FaultPlan.parse("drip@0")) as url:
        async with httpx.AsyncClient(base_url=url, timeout=httpx.Timeout(5.0, read=0.2)) as raw:
            with pytest.raises(httpx.ReadTimeout):
                await raw.post("/chat/completions", json={"model": "plan", "messages": _at_turn(0)})


async def test_drip_stops_when_the_client_disconnects() -> None:
    """Drive the ASGI app directly: once the client is gone, the app returns at once
    instead of trickling for a minute."""
    app = create_app(faults=FaultPlan.parse("drip@0"))
    body = json.dumps({"model": "plan", "messages": _at_turn(0)}).encode()
    first_byte = asyncio.Event()
    requested = False
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": body, "more_body": False}
        await first_byte.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body":
            first_byte.set()

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/chat/completions",
        "raw_path": b"/v1/chat/completions",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json")],
        "server": ("tether", 80),
        "client": ("127.0.0.1", 1),
    }
    # A safety net, not a timing assertion: the drip alone would run for a minute.
    await asyncio.wait_for(app(scope, receive, send), timeout=30)
    body_bytes = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    assert sent[0]["status"] == 200 and len(body_bytes) < 10


async def test_a_client_gone_before_its_body_is_read_is_one_line_without_traceback(
        caplog: pytest.LogCaptureFixture) -> None:
    """What uvicorn does when the client hung up during the latency: the body read finds a
    disconnect. Not a failure: a one-line warning, no traceback, no 500 logged."""
    app = create_app()
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
             "method": "POST", "scheme": "http", "path": "/v1/chat/completions",
             "raw_path": b"/v1/chat/completions", "query_string": b"", "root_path": "",
             "headers": [(b"content-type", b"application/json")], "server": ("tether", 80),
             "client": ("127.0.0.1", 1)}
    await app(scope, receive, send)
    [record] = caplog.records
    assert record.getMessage() == "tether provider: the client went away mid-request (POST /v1/chat/completions)"
    assert record.exc_info is None and "failed" not in caplog.text


BAD_SPECS = ["429", "429@", "418@1", "500@1x0", "429@-1", "429@1,,500@2", "429@1x", "drip@one"]


@pytest.mark.parametrize("spec", BAD_SPECS)
def test_bad_fault_spec_is_a_clear_value_error(spec: str) -> None:
    with pytest.raises(ValueError, match=r"fault|KIND@TURN"):
        FaultPlan.parse(spec)


def test_fault_spec_parses() -> None:
    plan = FaultPlan.parse(" 429@1, 500@2x2,401@0,garbage@1,DRIP@1 ")
    assert [(f.kind.value, f.turn, f.times) for f in plan.faults] == [
        ("429", 1, 1),
        ("500", 2, 2),
        ("401", 0, 1),
        ("garbage", 1, 1),
        ("drip", 1, 1),
    ]
    assert [plan.take(1) for _ in range(4)] == ["429", "garbage", "drip", None]
    assert FaultPlan.parse("").take(0) is None


def test_fault_counters_are_thread_safe() -> None:
    plan = FaultPlan.parse("500@3x500")
    fired: list[int] = []

    def hammer() -> None:
        fired.append(sum(plan.take(3) is not None for _ in range(200)))

    threads = [threading.Thread(target=hammer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(fired) == 500


# --- statelessness -------------------------------------------------------------------------


async def test_same_request_twice_gives_the_same_bytes(http: httpx.AsyncClient) -> None:
    request = {"model": "destructive", "messages": _at_turn(1), "tools": TOOLS}
    first = await http.post("/chat/completions", json=request)
    second = await http.post("/chat/completions", json=request)
    assert first.status_code == 200 and first.content == second.content


@pytest.mark.parametrize(
    ("model", "overrides"), [("plan", {}), ("recover", {}), ("destructive", DECLINED), ("repeat_write", {})]
)
async def test_a_cut_transcript_continues_exactly_as_the_uncut_one(model: str, overrides: Any) -> None:
    uncut, requests = await drive(_openai_client(create_app()), model, turns=10, overrides=overrides)
    for cut, prefix in enumerate(requests):
        # A fresh provider, as after a crash: only the transcript carries over.
        resumed, _ = await drive(_openai_client(create_app()), model, turns=10, overrides=overrides, messages=prefix)
        assert resumed == uncut[cut:]


# --- max_tokens, latency ---------------------------------------------------------------------


async def test_max_tokens_cuts_an_answer(client: openai.AsyncOpenAI) -> None:
    _, requests = await drive(client, "plan", turns=3)
    resp = await client.chat.completions.create(model="plan", messages=requests[2], tools=TOOLS, max_tokens=5)
    expected = encoding().decode(encoding().encode_ordinary(sc.PLAN_ANSWER)[:5])
    assert resp.choices[0].finish_reason == "length"
    assert resp.choices[0].message.content == expected
    assert resp.usage.completion_tokens == 5


async def test_max_completion_tokens_cuts_tool_call_arguments(client: openai.AsyncOpenAI) -> None:
    full = await client.chat.completions.create(model="research", messages=_start(), tools=TOOLS)
    cut = await client.chat.completions.create(
        model="research", messages=_start(), tools=TOOLS, max_completion_tokens=10
    )
    full_args = full.choices[0].message.tool_calls[0].function.arguments
    cut_call = cut.choices[0].message.tool_calls[0]
    assert full.usage.completion_tokens > 10
    assert cut.choices[0].finish_reason == "length" and cut.usage.completion_tokens == 10
    assert cut_call.function.name == "research" and cut_call.id == "call_0_0"
    assert full_args.startswith(cut_call.function.arguments) and cut_call.function.arguments != full_args
    with pytest.raises(json.JSONDecodeError):
        json.loads(cut_call.function.arguments)


async def test_max_tokens_above_the_reply_changes_nothing(client: openai.AsyncOpenAI) -> None:
    plain = await client.chat.completions.create(model="plan", messages=_start(), tools=TOOLS)
    roomy = await client.chat.completions.create(model="plan", messages=_start(), tools=TOOLS, max_tokens=1000)
    assert roomy.choices == plain.choices and roomy.usage == plain.usage


async def test_latency_is_awaited_before_the_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    delays: list[float] = []

    async def record(seconds: float) -> None:
        delays.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", record)
    client = _openai_client(create_app(latency_ms=250))
    await client.chat.completions.create(model="plan", messages=_start())
    assert delays == [0.25]

"""The scripted provider's request parsers (``tether.demo.provider.app``): a chat-completions body
(``_parse_request``) and, through the whole app, both APIs it serves (``/v1/chat/completions``
and Anthropic's ``/v1/messages``), as any client may send them.

The rule: any body is a reply or a 4xx whose body says what is wrong, in the shape the
clients parse; never a 500 (the provider's own failure), and never a hang."""

from __future__ import annotations

import asyncio
import json
import httpx
import pytest
from hypothesis import given, strategies as st

from tether.demo.provider.app import ChatRequest, RequestError, _parse_request, create_app
from tether.demo.provider.scenarios import SCENARIOS

from tests.fuzz.strategies import dumps, garbage_lines, json_values, objects_with, texts

ROLES = ["assistant", "developer", "system", "tool", "user", "robot"]
calls = objects_with({"id": texts, "type": st.just("function"), "function": objects_with(
    {"name": st.sampled_from(["list_files", "read_file", "delete_file", "x"]),
     "arguments": st.one_of(json_values.map(json.dumps), texts)})})
chat_messages = objects_with({"role": st.sampled_from(ROLES), "content": st.one_of(texts, st.lists(objects_with(
    {"type": st.sampled_from(["text", "image_url"]), "text": texts}), max_size=2)),
    "tool_call_id": texts, "tool_calls": st.lists(calls, max_size=2), "name": texts})
chat_bodies = objects_with({
    "model": st.sampled_from(sorted(SCENARIOS) + ["", "gpt-4"]),
    "messages": st.lists(chat_messages, max_size=4),
    "tools": st.lists(objects_with({"type": st.just("function"), "function": json_values}), max_size=2),
    "stream": st.booleans(), "stream_options": objects_with({"include_usage": st.booleans()}),
    "max_tokens": st.integers(-2, 50), "max_completion_tokens": st.integers(-2, 50),
})
blocks = objects_with({"type": st.sampled_from(["text", "tool_use", "tool_result", "image", "thinking"]),
                       "text": texts, "id": texts, "name": texts, "input": json_values, "tool_use_id": texts,
                       "content": st.one_of(texts, json_values), "is_error": st.booleans()})
anthropic_bodies = objects_with({
    "model": st.sampled_from(sorted(SCENARIOS) + ["", "claude"]),
    "max_tokens": st.integers(-2, 50),
    "system": st.one_of(texts, st.lists(blocks, max_size=2)),
    "messages": st.lists(objects_with({"role": st.sampled_from(["user", "assistant", "system"]),
                                       "content": st.one_of(texts, st.lists(blocks, max_size=3))}), max_size=3),
    "tools": st.lists(objects_with({"name": texts, "description": texts, "input_schema": json_values}), max_size=2),
    "stream": st.booleans(),
})


@given(st.one_of(chat_bodies.map(dumps), garbage_lines))
def test_any_chat_body_is_a_request_or_a_worded_400(body: bytes) -> None:
    try:
        chat = _parse_request(body)
    except RequestError as exc:
        assert str(exc)
    else:
        assert isinstance(chat, ChatRequest) and chat.messages


APP = create_app()


async def _post(path: str, body: bytes) -> httpx.Response:
    transport = httpx.ASGITransport(app=APP)
    async with httpx.AsyncClient(transport=transport, base_url="http://provider") as client:
        return await asyncio.wait_for(client.post(path, content=body, headers={"content-type": "application/json"}),
                                      30)  # a hang fails


def answered(response: httpx.Response) -> None:
    assert response.status_code in (200, 400, 404), (response.status_code, response.text[:300])
    if response.status_code != 200:
        error = response.json()["error"]
        assert error["message"]
    elif response.headers["content-type"].startswith("text/event-stream"):
        assert response.text.startswith(("data: ", "event: "))
    else:
        assert isinstance(response.json(), dict)


@given(st.one_of(chat_bodies.map(dumps), garbage_lines))
def test_any_chat_completion_request_is_answered_without_a_500(body: bytes) -> None:
    answered(asyncio.run(_post("/v1/chat/completions", body)))


@given(st.one_of(anthropic_bodies.map(dumps), garbage_lines))
def test_any_messages_request_is_answered_without_a_500(body: bytes) -> None:
    answered(asyncio.run(_post("/v1/messages", body)))


# ---- bugs the campaign found, kept as regressions -----------------------------------------

@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages"])
@pytest.mark.parametrize("body", [b"[" * 5_000 + b"]" * 5_000, b'{"model": "plan", "messages": ' + b"[" * 5_000],
                         ids=["deep", "deep-torn"])
def test_found_bodies_are_a_worded_400(path: str, body: bytes) -> None:
    response = asyncio.run(_post(path, body))
    assert response.status_code == 400 and "JSON" in response.json()["error"]["message"]

"""Token accounting: the provider's usage is the documented rendering counted with
o200k_base, and the encoding loads offline from the shipped, hash-checked rank file."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
import tiktoken.load

import tether.models.tokens
from tether.demo.provider import create_app
from tether.models.tokens import O200K_SHA256, TokenCounter, encoding, rank_file_path, ranks_cache_path

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file in the workspace.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    }
]
ARGS = '{"path": "errors.log"}'


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _text_part(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a careful assistant."},
    # The list form of content: its text parts count, in order.
    {"role": "user", "content": [_text_part("Which file "), _text_part("mentions a timeout?")]},
    {"role": "assistant", "content": None, "tool_calls": [_call("a1", "list_files", "{}")]},
    {"role": "tool", "tool_call_id": "a1", "content": "access.log\nerrors.log\nnotes.txt"},
    {"role": "assistant", "content": "Reading it.", "tool_calls": [_call("a2", "read_file", ARGS)]},
    {"role": "tool", "tool_call_id": "a2", "content": "worker 7 timed out after 30000 ms"},
]

# The rendering, written out by hand from the docstring of tether.models.tokens, so that a drift
# in the rendering fails here even if the counter and the provider drift together.
RENDERED_MESSAGES = [
    "<|system|>\nYou are a careful assistant.",
    "<|user|>\nWhich file mentions a timeout?",
    "<|assistant|>\n\n<|call|>list_files {}",
    "<|tool|>a1\naccess.log\nerrors.log\nnotes.txt",
    '<|assistant|>\nReading it.\n<|call|>read_file {"path": "errors.log"}',
    "<|tool|>a2\nworker 7 timed out after 30000 ms",
]
RENDERED_TOOLS = "<|tools|>" + json.dumps(TOOLS, sort_keys=True, separators=(",", ":"))
RENDERED_ANSWER = "errors.log mentions a timeout: worker 7 timed out after 30000 ms."
MESSAGE_OVERHEAD = REPLY_PRIMING = 3


def _count(text: str) -> int:
    return len(encoding().encode_ordinary(text))


async def _usage(model: str, messages: list[dict[str, Any]]) -> tuple[dict[str, int], dict[str, Any]]:
    transport = httpx.ASGITransport(app=create_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://tether/v1") as http:
        resp = await http.post("/chat/completions", json={"model": model, "messages": messages, "tools": TOOLS})
    body = resp.json()
    return body["usage"], body["choices"][0]["message"]


async def test_usage_equals_the_counter_over_the_documented_rendering() -> None:
    usage, message = await _usage("plan", MESSAGES)
    counter = TokenCounter()
    assert usage["prompt_tokens"] == counter.prompt_tokens(MESSAGES, TOOLS)
    assert usage["completion_tokens"] == counter.completion_tokens(message["content"], message.get("tool_calls"))
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


async def test_usage_equals_an_independent_count_of_the_rendering() -> None:
    usage, message = await _usage("plan", MESSAGES)
    prompt = REPLY_PRIMING + sum(_count(r) + MESSAGE_OVERHEAD for r in RENDERED_MESSAGES) + _count(RENDERED_TOOLS)
    assert message["content"] == RENDERED_ANSWER
    assert usage == {
        "prompt_tokens": prompt,
        "completion_tokens": _count(RENDERED_ANSWER),
        "total_tokens": prompt + _count(RENDERED_ANSWER),
    }


async def test_tool_call_completion_is_counted_as_documented() -> None:
    usage, message = await _usage("plan", MESSAGES[:2])
    assert message["tool_calls"][0]["function"] == {"name": "list_files", "arguments": "{}"}
    assert usage["completion_tokens"] == _count("\n<|call|>list_files {}")


def test_marker_text_in_a_message_is_ordinary_text() -> None:
    assert _count("<|endoftext|>") > 1


def test_encoding_loads_with_no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def no_network(*args: Any, **kwargs: Any) -> None:
        raise OSError("network disabled by the test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(tether.models.tokens, "_encoding", None)

    enc = encoding()
    assert enc.name == "o200k_base"
    assert enc.encode_ordinary("hello world") == [24912, 2375]


def test_a_corrupted_rank_file_is_rejected(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # An empty cache: tiktoken reads the copy itself and checks it (an empty *setting*
    # would turn caching off, and with it the check).
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    corrupted = tmp_path / "o200k_base.tiktoken"
    shutil.copyfile(rank_file_path(), corrupted)
    data = bytearray(corrupted.read_bytes())
    data[100] ^= 0x01
    corrupted.write_bytes(bytes(data))

    with pytest.raises(ValueError, match="Hash mismatch"):
        tiktoken.load.load_tiktoken_bpe(str(corrupted), expected_hash=O200K_SHA256)


def test_counter_only_encodes_what_is_new(monkeypatch: pytest.MonkeyPatch) -> None:
    """A transcript that grows by one message costs one new encoding, not a recount."""
    encoded: list[str] = []
    real_count = tether.models.tokens.count_text

    def spy(text: str) -> int:
        encoded.append(text)
        return real_count(text)

    monkeypatch.setattr(tether.models.tokens, "count_text", spy)
    counter = TokenCounter()
    first = counter.prompt_tokens(MESSAGES[:5], TOOLS)
    encoded.clear()
    grown = counter.prompt_tokens(MESSAGES, TOOLS)

    assert encoded == [RENDERED_MESSAGES[5]]
    assert grown == first + _count(RENDERED_MESSAGES[5]) + MESSAGE_OVERHEAD


# ---- the parsed ranks, kept between processes ---------------------------------------------

def _fresh(monkeypatch: pytest.MonkeyPatch, cache: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.setattr(tether.models.tokens, "_encoding", None)


def test_the_parsed_ranks_are_kept_and_the_next_process_reads_them_instead_of_the_file(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fresh(monkeypatch, tmp_path / "cache")
    assert encoding().encode_ordinary("hello world") == [24912, 2375]
    kept = ranks_cache_path()
    assert kept is not None and kept.parent == tmp_path / "cache" / "tether" and kept.is_file()

    def no_parse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the rank file was parsed again")

    _fresh(monkeypatch, tmp_path / "cache")
    monkeypatch.setattr(tiktoken.load, "load_tiktoken_bpe", no_parse)
    assert encoding().encode_ordinary("hello world") == [24912, 2375]


@pytest.mark.parametrize("damage", ["torn", "tampered"])
def test_a_damaged_cache_is_not_used_and_is_written_again_whole(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, damage: str) -> None:
    _fresh(monkeypatch, tmp_path / "cache")
    encoding()
    kept = ranks_cache_path()
    assert kept is not None
    whole = kept.read_bytes()
    if damage == "torn":
        kept.write_bytes(whole[:len(whole) // 2])
    else:  # a byte of the ranks changed, their digest left as it was
        tampered = bytearray(whole)
        tampered[len(whole) // 2] ^= 0x01
        kept.write_bytes(bytes(tampered))
    assert kept.read_bytes() != whole
    _fresh(monkeypatch, tmp_path / "cache")
    assert encoding().encode_ordinary("hello world") == [24912, 2375]
    assert kept.read_bytes() == whole


def test_a_cache_folder_that_cannot_be_made_costs_nothing_but_the_parse(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go")
    _fresh(monkeypatch, blocker)
    assert encoding().encode_ordinary("hello world") == [24912, 2375]
    assert blocker.read_text() == "a file where the cache folder would go"

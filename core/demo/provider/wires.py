"""The coding endpoint's other wire APIs: Anthropic Messages (Claude's ACP adapter), the OpenAI
Responses API (Codex) and Google's ``generateContent``/``streamGenerateContent`` (Gemini CLI).

The script (:class:`tether.demo.provider.coding.ScriptedEndpoint`) is written once, over
chat-completions messages and the names of the request's tools. Each wire here has two halves:
- ``*_messages(body)``: the request read as chat-completions messages and its tool names (a
  tool call as an assistant's ``tool_calls``, a tool's result as a ``tool`` message);
- ``*_stream(steps)``: the script's steps (:class:`Text` pieces, at most one :class:`Write`)
  sent back as that API streams, with :data:`USAGE`'s token counts, as each wire spells usage.
Streams are rendered lazily, step by step, so that a held stream (``HOLD``, a task's answer
being read) stays open until the client goes away, whichever API it speaks.

Codex's ``apply_patch`` is a *custom* (freeform) tool: its call carries a patch as plain text
(``*** Begin Patch`` / ``*** Add File: PATH`` / ``+line`` / ``*** End Patch``), sent as a
``custom_tool_call`` output item, not a JSON function call.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from tether.demo.provider.anthropic import chat_messages

__all__ = ["USAGE", "Text", "Write", "anthropic_messages", "anthropic_stream", "gemini_json", "gemini_messages",
           "gemini_stream", "patch_of", "patch_path", "responses_messages", "responses_stream"]

USAGE = {"prompt_tokens": 120, "completion_tokens": 12, "total_tokens": 132}
_CALLS = itertools.count()  # a call id is never used twice: agents key their permission requests by it


@dataclass(frozen=True)
class Text:
    """A piece of the model's answer."""

    text: str


@dataclass(frozen=True)
class Write:
    """The model's call of the agent's write tool ``name``, with its arguments (``args``: the
    JSON arguments of a function tool; for Codex's freeform ``apply_patch``, ``{"input": PATCH}``)."""

    name: str
    args: dict[str, Any]


def patch_of(path: str, content: str) -> str:
    """Codex's ``apply_patch`` input that creates ``path`` holding ``content``."""
    lines = content.splitlines() or [""]
    return "*** Begin Patch\n*** Add File: " + path + "\n" + "".join(f"+{line}\n" for line in lines) + "*** End Patch\n"


_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.M)


def patch_path(patch: str) -> str | None:
    """The first file a patch names."""
    found = _PATCH_FILE.search(patch)
    return found.group(1).strip() if found else None


def _sse(data: dict[str, Any], event: str | None = None) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(data)}\n\n"


# ---- Anthropic Messages (Claude) ---------------------------------------------------------


def anthropic_messages(body: dict[str, Any]) -> tuple[list[dict[str, Any]], set[str]]:
    tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict) and t.get("name")}
    return chat_messages(body), tools


async def anthropic_stream(steps: AsyncIterator[Text | Write], model: str) -> AsyncIterator[str]:
    usage = {"input_tokens": USAGE["prompt_tokens"], "output_tokens": 1, "cache_creation_input_tokens": 0,
             "cache_read_input_tokens": 0}
    start = {"id": "msg_scripted", "type": "message", "role": "assistant", "model": model, "content": [],
             "stop_reason": None, "stop_sequence": None, "usage": usage}
    yield _sse({"type": "message_start", "message": start}, "message_start")
    index, text_open, stop = 0, False, "end_turn"
    async for step in steps:
        if isinstance(step, Text):
            if not text_open:
                yield _sse({"type": "content_block_start", "index": index,
                            "content_block": {"type": "text", "text": ""}}, "content_block_start")
                text_open = True
            yield _sse({"type": "content_block_delta", "index": index,
                        "delta": {"type": "text_delta", "text": step.text}}, "content_block_delta")
            continue
        if text_open:
            yield _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
            index, text_open = index + 1, False
        block = {"type": "tool_use", "id": f"toolu_scripted_{next(_CALLS)}", "name": step.name, "input": {}}
        yield _sse({"type": "content_block_start", "index": index, "content_block": block}, "content_block_start")
        yield _sse({"type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta", "partial_json": json.dumps(step.args)}},
                   "content_block_delta")
        yield _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
        index, stop = index + 1, "tool_use"
    if text_open:
        yield _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
    yield _sse({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": USAGE["completion_tokens"]}}, "message_delta")
    yield _sse({"type": "message_stop"}, "message_stop")


# ---- the OpenAI Responses API (Codex) ----------------------------------------------------


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(str(p.get("text", "")) for p in content or [] if isinstance(p, dict) and p.get("text"))


def responses_messages(body: dict[str, Any]) -> tuple[list[dict[str, Any]], set[str]]:
    """A Responses request's ``input`` items as chat messages; a custom tool's call keeps its
    text as ``{"input": TEXT, "path": FILE}``."""
    tools = {t.get("name") for t in body.get("tools") or [] if isinstance(t, dict) and t.get("name")}
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    chat: list[dict[str, Any]] = []
    if body.get("instructions"):
        chat.append({"role": "system", "content": str(body["instructions"])})
    for item in items or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role")
            role = "system" if role == "developer" else role
            parts = [p for p in item.get("content") or [] if isinstance(p, dict)] \
                if isinstance(item.get("content"), list) else item.get("content")
            chat.append({"role": role, "content": parts if role == "user" else _content_text(parts)})
        elif kind in ("function_call", "custom_tool_call"):
            if kind == "custom_tool_call":
                text = str(item.get("input", ""))
                arguments = json.dumps({"input": text, "path": patch_path(text)})
            else:
                arguments = str(item.get("arguments", "{}"))
            call = {"id": item.get("call_id", ""), "type": "function",
                    "function": {"name": item.get("name", ""), "arguments": arguments}}
            chat.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            chat.append({"role": "tool", "tool_call_id": item.get("call_id", ""),
                         "content": output if isinstance(output, str) else json.dumps(output)})
    return chat, tools


async def responses_stream(steps: AsyncIterator[Text | Write], model: str, custom: set[str]) -> AsyncIterator[str]:
    """The Responses API's events: ``response.created``, a message item's text deltas, a
    ``function_call`` or ``custom_tool_call`` item (``custom``: the freeform tools' names),
    ``response.completed`` with the usage."""
    response = {"id": "resp_scripted", "object": "response", "created_at": 0, "status": "in_progress",
                "model": model, "output": []}
    seq = 0

    def event(kind: str, **data: Any) -> str:
        nonlocal seq
        seq += 1
        return _sse({"type": kind, "sequence_number": seq, **data}, kind)

    yield event("response.created", response=response)
    yield event("response.in_progress", response=response)
    output: list[dict[str, Any]] = []
    text: list[str] = []
    index = 0

    def message_done() -> dict[str, Any]:
        return {"type": "message", "id": "msg_scripted", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": "".join(text), "annotations": []}]}

    async for step in steps:
        if isinstance(step, Text):
            if not text:
                yield event("response.output_item.added", output_index=index,
                            item={**message_done(), "status": "in_progress", "content": []})
                yield event("response.content_part.added", output_index=index, item_id="msg_scripted",
                            content_index=0, part={"type": "output_text", "text": "", "annotations": []})
            text.append(step.text)
            yield event("response.output_text.delta", output_index=index, item_id="msg_scripted", content_index=0,
                        delta=step.text)
            continue
        if text:
            done = message_done()
            yield event("response.output_text.done", output_index=index, item_id="msg_scripted", content_index=0,
                        text="".join(text))
            yield event("response.output_item.done", output_index=index, item=done)
            output.append(done)
            index, text = index + 1, []
        call = next(_CALLS)
        if step.name in custom:
            item = {"type": "custom_tool_call", "id": f"ctc_scripted_{call}", "call_id": f"call_scripted_{call}",
                    "name": step.name, "input": str(step.args.get("input", "")), "status": "completed"}
        else:
            item = {"type": "function_call", "id": f"fc_scripted_{call}", "call_id": f"call_scripted_{call}",
                    "name": step.name, "arguments": json.dumps(step.args), "status": "completed"}
        yield event("response.output_item.added", output_index=index, item={**item, "status": "in_progress"})
        yield event("response.output_item.done", output_index=index, item=item)
        output.append(item)
        index += 1
    if text:
        done = message_done()
        yield event("response.output_text.done", output_index=index, item_id="msg_scripted", content_index=0,
                    text="".join(text))
        yield event("response.output_item.done", output_index=index, item=done)
        output.append(done)
    usage = {"input_tokens": USAGE["prompt_tokens"], "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": USAGE["completion_tokens"], "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": USAGE["total_tokens"]}
    yield event("response.completed", response={**response, "status": "completed", "output": output, "usage": usage})


# ---- Google generateContent (Gemini CLI) -------------------------------------------------


def gemini_messages(body: dict[str, Any]) -> tuple[list[dict[str, Any]], set[str]]:
    tools = {d.get("name") for t in body.get("tools") or [] if isinstance(t, dict)
             for d in t.get("functionDeclarations") or [] if isinstance(d, dict) and d.get("name")}
    chat: list[dict[str, Any]] = []
    system = body.get("systemInstruction") or body.get("system_instruction")
    if isinstance(system, dict):
        chat.append({"role": "system", "content": _content_text(system.get("parts"))})
    for content in body.get("contents") or []:
        if not isinstance(content, dict):
            continue
        parts = [p for p in content.get("parts") or [] if isinstance(p, dict)]
        calls = [{"id": f"gemini_{i}", "type": "function",
                  "function": {"name": p["functionCall"].get("name", ""),
                               "arguments": json.dumps(p["functionCall"].get("args") or {})}}
                 for i, p in enumerate(parts) if isinstance(p.get("functionCall"), dict)]
        results = [p["functionResponse"] for p in parts if isinstance(p.get("functionResponse"), dict)]
        texts = [{"type": "text", "text": p["text"]} for p in parts if isinstance(p.get("text"), str)]
        if content.get("role") == "model":
            chat.append({"role": "assistant", "content": _content_text(texts) or None,
                         **({"tool_calls": calls} if calls else {})})
            continue
        chat += [{"role": "tool", "tool_call_id": r.get("id", r.get("name", "")),
                  "content": json.dumps(r.get("response"))} for r in results]
        if texts:
            chat.append({"role": "user", "content": texts})
    return chat, tools


def _gemini_usage() -> dict[str, int]:
    return {"promptTokenCount": USAGE["prompt_tokens"], "candidatesTokenCount": USAGE["completion_tokens"],
            "totalTokenCount": USAGE["total_tokens"]}


def _gemini_chunk(parts: list[dict[str, Any]], finish: str | None, model: str) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    chunk: dict[str, Any] = {"candidates": [candidate], "modelVersion": model}
    if finish:
        candidate["finishReason"] = finish
        chunk["usageMetadata"] = _gemini_usage()
    return chunk


async def gemini_stream(steps: AsyncIterator[Text | Write], model: str) -> AsyncIterator[str]:
    async for step in steps:
        part = {"text": step.text} if isinstance(step, Text) else {"functionCall": {"name": step.name,
                                                                                    "args": step.args}}
        yield _sse(_gemini_chunk([part], None, model))
    yield _sse(_gemini_chunk([{"text": ""}], "STOP", model))


def _example(schema: Any) -> Any:
    """A value that fits a JSON schema: an enum's first value, an object's every property."""
    if not isinstance(schema, dict):
        return None
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        return {name: _example(sub) for name, sub in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 0
    if kind == "boolean":
        return False
    return "scripted"


def gemini_json(body: dict[str, Any], model: str) -> dict[str, Any]:
    """A non-streamed answer (Gemini CLI's router and checks want JSON that fits their schema)."""
    config = body.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    text = json.dumps(_example(schema)) if schema else "OK"
    return _gemini_chunk([{"text": text}], "STOP", model)

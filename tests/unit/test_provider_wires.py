"""The coding endpoint (``tether provider --coding``) speaks each agent's wire API, from one
script: Anthropic Messages (Claude), the OpenAI Responses API (Codex, with its freeform
``apply_patch``) and Google's ``streamGenerateContent``/``generateContent`` (Gemini CLI).

Each test is what an agent sends and what it must read back: the write tool called with the
file's path and content, the answer after the tool's result, a rejection's words answered, and
the usage each API reports."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from tether.demo.provider.coding import DONE_ANSWER, PLAIN_ANSWER, ScriptedEndpoint
from tether.demo.provider.server import running_app
from tether.demo.provider.wires import patch_of, patch_path

DECLINED = "alice declined this call: use notes.md instead. Nothing was done."


def events(reply: httpx.Response) -> list[dict]:
    return [json.loads(line[6:]) for line in reply.text.splitlines() if line.startswith("data: {")]


async def post(url: str, path: str, body: dict) -> httpx.Response:
    async with httpx.AsyncClient(timeout=30) as client:
        reply = await client.post(url.removesuffix("/v1") + path, json=body)
    assert reply.status_code == 200, reply.text
    return reply


@pytest.fixture
async def served(tmp_path: Path):
    endpoint = ScriptedEndpoint(workspace=tmp_path)
    async with running_app(endpoint.app()) as url:
        yield endpoint, url, tmp_path


CLAUDE_TOOLS = [{"name": "Write", "input_schema": {"type": "object"}}, {"name": "Bash", "input_schema": {}}]


async def test_anthropic_messages_call_claudes_write_tool_then_answer(served):
    endpoint, url, workspace = served
    ask = {"model": "claude", "max_tokens": 100, "stream": True, "tools": CLAUDE_TOOLS,
           "messages": [{"role": "user", "content": [{"type": "text", "text": "<context/>"},
                                                      {"type": "text", "text": "WRITE a.txt CONTENT hi"}]}]}
    got = events(await post(url, "/v1/messages", ask))
    assert got[0]["type"] == "message_start"
    tool = [e for e in got if e["type"] == "content_block_start" and e["content_block"]["type"] == "tool_use"]
    assert tool[0]["content_block"]["name"] == "Write"
    args = "".join(e["delta"]["partial_json"] for e in got if e.get("delta", {}).get("type") == "input_json_delta")
    assert json.loads(args) == {"file_path": str(workspace / "a.txt"), "content": "hi"}
    end = next(e for e in got if e["type"] == "message_delta")
    assert end["delta"]["stop_reason"] == "tool_use" and end["usage"]["output_tokens"] == 12

    ask["messages"] += [{"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Write",
                                                           "input": json.loads(args)}]},
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}]
    got = events(await post(url, "/v1/messages", ask))
    text = "".join(e["delta"]["text"] for e in got if e.get("delta", {}).get("type") == "text_delta")
    assert text == DONE_ANSWER
    assert len(endpoint.requests) == 2


CODEX_TOOLS = [{"type": "function", "name": "exec_command", "parameters": {}},
               {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}}]


async def test_responses_api_calls_codexs_freeform_apply_patch_and_reports_usage(served):
    _, url, workspace = served
    ask = {"model": "gpt-5.4", "stream": True, "instructions": "be brief", "tools": CODEX_TOOLS,
           "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<env/>"}]},
                     {"type": "message", "role": "user",
                      "content": [{"type": "input_text", "text": "WRITE b.txt CONTENT two words"}]}]}
    got = events(await post(url, "/v1/responses", ask))
    assert got[0]["type"] == "response.created"
    done = [e["item"] for e in got if e["type"] == "response.output_item.done"]
    assert [item["type"] for item in done] == ["custom_tool_call"]
    patch = done[0]["input"]
    assert patch == patch_of(str(workspace / "b.txt"), "two words")
    assert patch.startswith("*** Begin Patch\n*** Add File: ") and "+two words\n" in patch
    completed = got[-1]
    assert completed["type"] == "response.completed"
    assert completed["response"]["usage"]["input_tokens"] == 120
    assert completed["response"]["output"] == done

    # The operator's rejection words, in a later turn: answered, naming the file from the patch.
    ask["input"] += [{"type": "custom_tool_call", "call_id": "c1", "name": "apply_patch", "input": patch},
                     {"type": "custom_tool_call_output", "call_id": "c1", "output": "aborted"},
                     {"type": "message", "role": "user", "content": [{"type": "input_text", "text": DECLINED}]}]
    got = events(await post(url, "/v1/responses", ask))
    text = "".join(e["delta"] for e in got if e["type"] == "response.output_text.delta")
    assert "Use notes.md instead" in text and "b.txt" in text
    assert [e["item"]["type"] for e in got if e["type"] == "response.output_item.done"] == ["message"]


def test_a_patch_names_its_file():
    assert patch_path(patch_of("/w/x.py", "a\nb")) == "/w/x.py"
    assert patch_path("no patch") is None


GEMINI_TOOLS = [{"functionDeclarations": [{"name": "read_file"}, {"name": "write_file"}]}]


async def test_gemini_stream_calls_write_file_and_answers_a_json_router(served):
    _, url, workspace = served
    ask = {"contents": [{"role": "user", "parts": [{"text": "WRITE c.txt CONTENT gem"}]}], "tools": GEMINI_TOOLS,
           "systemInstruction": {"parts": [{"text": "you are gemini"}]}}
    got = events(await post(url, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", ask))
    parts = [p for e in got for p in e["candidates"][0]["content"]["parts"]]
    call = next(p["functionCall"] for p in parts if "functionCall" in p)
    assert call == {"name": "write_file", "args": {"file_path": str(workspace / "c.txt"), "content": "gem"}}
    assert got[-1]["candidates"][0]["finishReason"] == "STOP"
    assert got[-1]["usageMetadata"]["totalTokenCount"] == 132

    ask["contents"] += [{"role": "model", "parts": [{"functionCall": call}]},
                        {"role": "user", "parts": [{"functionResponse": {"name": "write_file",
                                                                         "response": {"output": "ok"}}}]}]
    got = events(await post(url, "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", ask))
    assert "".join(p.get("text", "") for e in got for p in e["candidates"][0]["content"]["parts"]) == DONE_ANSWER

    router = {"contents": [{"role": "user", "parts": [{"text": "which model?"}]}],
              "generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": {
                  "type": "object", "properties": {"reasoning": {"type": "string"},
                                                   "model_choice": {"type": "string", "enum": ["flash", "pro"]}}}}}
    answer = (await post(url, "/v1beta/models/gemini-2.5-flash:generateContent", router)).json()
    assert json.loads(answer["candidates"][0]["content"]["parts"][0]["text"]) == {"reasoning": "scripted",
                                                                                   "model_choice": "flash"}


async def test_a_plain_prompt_is_answered_in_each_wire(served):
    _, url, _ = served
    user = "what is here?"
    claude = events(await post(url, "/v1/messages", {"model": "c", "max_tokens": 9, "stream": True,
                                                     "tools": CLAUDE_TOOLS,
                                                     "messages": [{"role": "user", "content": user}]}))
    codex = events(await post(url, "/v1/responses", {"model": "m", "stream": True, "tools": CODEX_TOOLS,
                                                     "input": user}))
    gemini = events(await post(url, "/v1beta/models/g:streamGenerateContent?alt=sse",
                               {"contents": [{"role": "user", "parts": [{"text": user}]}], "tools": GEMINI_TOOLS}))
    assert "".join(e["delta"]["text"] for e in claude if e.get("delta", {}).get("type") == "text_delta") == PLAIN_ANSWER
    assert "".join(e["delta"] for e in codex if e["type"] == "response.output_text.delta") == PLAIN_ANSWER
    assert "".join(p.get("text", "") for e in gemini for p in e["candidates"][0]["content"]["parts"]) == PLAIN_ANSWER


def test_codex_and_gemini_usage_reports_are_read():
    from tether.acp.events import UsageReported
    from tether.acp.translate import call_tokens, quota_usage

    quota = {"quota": {"token_count": {"input_tokens": 120, "output_tokens": 12}, "model_usage": []}}
    assert quota_usage(quota) == UsageReported("prompt_response", input_tokens=120, output_tokens=12)
    assert quota_usage({"other": 1}) is None and quota_usage(None) is None
    assert call_tokens(UsageReported("usage_update", context_used=132, context_size=258400)) == (132, 0)
    assert call_tokens(UsageReported("usage_update", context_used=121, cost_amount=0.1)) is None  # Claude's: a cost
    assert call_tokens(UsageReported("meta", input_tokens=40, output_tokens=8)) == (40, 8)

"""The local-model eval's MCP task and its chat handler, without a model.

The MCP task (``tether.demo.local_eval.run_mcp_task``) runs against a scripted chat-completions
endpoint on loopback and the real MCP time server; the chat handler that serves the local
models' tool calls runs against a stand-in for ``llama_cpp.Llama`` that answers by script.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.endpoints import call, completion, scripted_app
from tether.demo.local_eval import (
    MCP_TOOL,
    clock_times,
    eval_markdown,
    grade_time,
    last_result,
    mcp_markdown,
    run_mcp_task,
)
from tether.models.local import CHATML, GEMMA, choice_grammar, render_prompt, tool_chat_handler
from tether.demo.provider.server import running_app

TIME_TOOLS = [{"type": "function", "function": {
    "name": "get_current_time", "description": "Get the current time in a timezone.",
    "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}}, "required": ["timezone"]}}}]
RESULT = '{"timezone": "UTC", "datetime": "2026-12-03T09:41:07+00:00", "day_of_week": "Thursday", "is_dst": false}'


def tool_result(body: dict[str, Any]) -> str:
    return next(m["content"] for m in body["messages"] if m.get("role") == "tool")


def hhmm(result: str, shift_h: int = 0) -> str:
    when = datetime.fromisoformat(json.loads(result)["datetime"]) + timedelta(hours=shift_h)
    return when.strftime("%H:%M")


# ---- the MCP task ----------------------------------------------------------------------

async def test_the_model_calls_the_mcp_tool_and_states_its_time(tmp_path: Path) -> None:
    offered: list[list[str]] = []

    def script(turn: int, _request: Request, body: dict[str, Any]) -> dict[str, Any]:
        offered.append([t["function"]["name"] for t in body.get("tools") or ()])
        if turn == 0:
            return completion(tool_calls=[call(MCP_TOOL, {"timezone": "UTC"}, "call_1")])
        return completion(f"It is {hhmm(tool_result(body))} UTC right now.")

    async with running_app(scripted_app(script)) as url:
        row = await run_mcp_task(url, "scripted", root=tmp_path, task_timeout_s=60)

    assert offered and all(set(names) == {"get_current_time", "convert_time"} for names in offered)
    assert row["status"] == "completed" and row["turns"] == 2
    assert (row["calls"], row["tool_starts"], row["tool_runs"], row["mcp_calls"]) == (1, 1, 1, 1)
    assert json.loads(row["tool_returned"])["timezone"] == "UTC"
    assert row["right"] is True and row["why"] == f"says {hhmm(row['tool_returned'])}, the time the tool returned"
    table = mcp_markdown(row)
    assert "| mcp_time | completed | 2 | 1 | 1 | 1 |" in table and "| yes | says " in table
    assert "\n" not in table.split("\n")[-2]  # the tool's JSON is on one line of the table


async def test_a_made_up_time_is_graded_wrong(tmp_path: Path) -> None:
    def script(turn: int, _request: Request, body: dict[str, Any]) -> dict[str, Any]:
        if turn == 0:
            return completion(tool_calls=[call(MCP_TOOL, {"timezone": "UTC"}, "call_1")])
        return completion(f"It is {hhmm(tool_result(body), shift_h=5)}.")

    async with running_app(scripted_app(script)) as url:
        row = await run_mcp_task(url, "scripted", root=tmp_path, task_timeout_s=60)
    assert row["status"] == "completed" and row["tool_starts"] == 1
    assert row["right"] is False
    assert row["why"] == (f"says {hhmm(row['tool_returned'], 5)}; the tool returned {hhmm(row['tool_returned'])}")


async def test_an_answer_without_the_tool_is_wrong(tmp_path: Path) -> None:
    async with running_app(scripted_app(lambda _t, _r, _b: completion("It is 12:00 UTC."))) as url:
        row = await run_mcp_task(url, "scripted", root=tmp_path, task_timeout_s=60)
    assert row["status"] == "completed" and (row["tool_starts"], row["tool_runs"]) == (0, 0)
    assert row["tool_returned"] is None and row["right"] is False
    assert row["why"] == "get_current_time returned nothing, so no time in the answer is the tool's"


async def test_the_task_timeout_stops_the_run_through_its_signal(tmp_path: Path) -> None:
    async def never(_request: Request) -> JSONResponse:
        await asyncio.sleep(60)
        return JSONResponse(completion("too late"))

    app = Starlette(routes=[Route("/v1/chat/completions", never, methods=["POST"])])
    async with running_app(app) as url:
        row = await run_mcp_task(url, "scripted", root=tmp_path, task_timeout_s=0.5)
    assert row["status"] == "interrupted" and "task timeout" in row["answer"]
    assert row["right"] is False and row["why"] == "no answer"


# ---- grading ---------------------------------------------------------------------------

@pytest.mark.parametrize(("answer", "right"), [
    ("It is 09:41 UTC.", True),
    ("The current time in UTC is 9:41 am.", True),
    ("It's 09:41:07.", True),
    ("2026-12-03T09:41:07+00:00", True),
    ("It is 9:41 pm.", False),   # 21:41
    ("It is 10:41.", False),
    ("It is 09:14.", False),
    ("It is nine forty-one.", False),  # words are not read
    ("I called get_current_time.", False),
])
def test_grade_time(answer: str, right: bool) -> None:
    assert grade_time(answer, RESULT).right is right


def test_grade_time_says_why() -> None:
    assert grade_time(None, RESULT).why == "no answer"
    assert grade_time("It is 9:41.", "Error: the server is down").why == "get_current_time returned no time"
    assert grade_time("Noon.", RESULT).why == "missing: the time the tool returned (09:41)"
    assert clock_times("12:05 am, then 12:05 pm, 7:5, 25:00") == [(0, 5), (12, 5)]


def test_last_result_is_that_of_the_tool_named() -> None:
    messages = [
        {"role": "assistant", "content": "", "tool_calls": [call("convert_time", {}, "a"), call(MCP_TOOL, {}, "b")]},
        {"role": "tool", "tool_call_id": "a", "content": "converted"},
        {"role": "tool", "tool_call_id": "b", "content": RESULT},
        {"role": "assistant", "content": "It is 09:41."},
    ]
    assert last_result(messages) == RESULT and last_result(messages, "convert_time") == "converted"
    assert last_result(messages[:1]) is None


def test_eval_table_keeps_each_answer_on_one_line() -> None:
    row = {"task": "notes", "status": "completed", "turns": 2, "tool_runs": 1, "declined": 0, "wall_ms": 1.0,
           "cost_usd": 0.0, "right": False, "why": "missing: x", "answer": "a | b\n\nc"}
    totals = {"turns": 2, "tool_runs": 1, "declined": 0, "wall_ms": 1.0, "mean_turn_ms": 0.5, "cost_usd": 0.0,
              "right": 0, "tasks": 1}
    text = eval_markdown({"model": "m", "base_url": "u", "tasks": [row], "totals": totals})
    assert "| a \\| b c |" in text
    long = eval_markdown({"model": "m", "base_url": "u", "tasks": [{**row, "answer": "word " * 100}],
                          "totals": totals})
    assert " […] |" in long and long.count("word") == 60


# ---- the chat handler ------------------------------------------------------------------

def test_the_prompt_shows_tool_results_in_the_models_own_turns() -> None:
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What time is it?"},
                {"role": "assistant", "content": "", "tool_calls": [call(MCP_TOOL, {"timezone": "UTC"}, "c1")]},
                {"role": "tool", "tool_call_id": "c1", "content": RESULT}]
    chatml = render_prompt(CHATML, messages, TIME_TOOLS)
    assert chatml.startswith("<|im_start|>system\nBe brief.\n\nYou can call these functions:")
    assert "functions.get_current_time: Get the current time in a timezone." in chatml
    assert ('<|im_start|>assistant\nfunctions.get_current_time:\n{"timezone": "UTC"}<|im_end|>\n'
            f"<|im_start|>user\nResult of functions.get_current_time:\n{RESULT}<|im_end|>\n") in chatml
    assert chatml.endswith("<|im_start|>assistant\n")
    gemma = render_prompt(GEMMA, messages, TIME_TOOLS)
    assert gemma.startswith("<start_of_turn>user\nBe brief.\n\nYou can call these functions:")
    assert "What time is it?<end_of_turn>\n<start_of_turn>model\nfunctions.get_current_time:" in gemma
    assert "system" not in gemma and gemma.endswith("<start_of_turn>model\n")
    assert render_prompt(CHATML, messages[:2], None) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat time is it?<|im_end|>\n"
        "<|im_start|>assistant\n")


def test_choice_grammar() -> None:
    assert choice_grammar(["a", "b.c"], answer=True) == 'root ::= "functions.a:" | "functions.b.c:" | "message:"\n'
    assert choice_grammar(["a"], answer=False) == 'root ::= "functions.a:"\n'


class ScriptedLlama:
    """Stands in for ``llama_cpp.Llama``: each completion returns the next scripted text."""

    def __init__(self, *texts: str) -> None:
        self.texts = list(texts)
        self.calls: list[dict[str, Any]] = []

    def create_completion(self, *, prompt: str, grammar: Any = None, **kw: Any) -> dict[str, Any]:
        self.calls.append({"prompt": prompt, "grammar": grammar, **kw})
        return {"model": "m", "choices": [{"text": self.texts.pop(0), "finish_reason": "stop"}],
                "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": 3}}


needs_llama_cpp = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None,
                                     reason="the handler builds grammars with llama_cpp: the [local] extra")


@needs_llama_cpp
def test_the_handler_calls_a_tool_then_answers() -> None:
    handler = tool_chat_handler(CHATML)
    messages = [{"role": "user", "content": "What time is it?"}]
    llama = ScriptedLlama("functions.get_current_time:", '{"timezone": "UTC"}')
    reply = handler(llama=llama, messages=messages, tools=TIME_TOOLS, tool_choice="auto", max_tokens=64)
    choice = reply["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    (made,) = choice["message"]["tool_calls"]
    assert made["function"] == {"name": "get_current_time", "arguments": '{"timezone": "UTC"}'}
    assert llama.calls[1]["prompt"].endswith("<|im_start|>assistant\nfunctions.get_current_time:\n")
    first_prompt = len(llama.calls[0]["prompt"]) // 4
    assert reply["usage"] == {"prompt_tokens": first_prompt, "completion_tokens": 6, "total_tokens": first_prompt + 6}

    messages += [choice["message"], {"role": "tool", "tool_call_id": made["id"], "content": RESULT}]
    llama = ScriptedLlama("message:", " It is 09:41 UTC. ")
    reply = handler(llama=llama, messages=messages, tools=TIME_TOOLS, tool_choice="auto", max_tokens=64)
    assert reply["choices"][0]["message"] == {"role": "assistant", "content": "It is 09:41 UTC."}
    assert RESULT in llama.calls[1]["prompt"] and llama.calls[1]["prompt"].endswith("assistant\nmessage:\n")
    assert llama.calls[1]["grammar"] is None and "<|im_end|>" in llama.calls[1]["stop"]


def test_the_handler_without_tools_and_streamed() -> None:
    handler = tool_chat_handler(GEMMA)
    llama = ScriptedLlama("Hello.")
    chunks = list(handler(llama=llama, messages=[{"role": "user", "content": "Hi"}], stream=True, max_tokens=8))
    assert len(llama.calls) == 1 and llama.calls[0]["prompt"] == "<start_of_turn>user\nHi<end_of_turn>\n" \
                                                                  "<start_of_turn>model\n"
    assert [c["choices"][0]["delta"] for c in chunks] == [{"role": "assistant"}, {"content": "Hello."}, {}]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"


@needs_llama_cpp
def test_the_handler_honours_a_named_tool_choice() -> None:
    llama = ScriptedLlama('{"timezone": "UTC"}')
    reply = tool_chat_handler(CHATML)(llama=llama, messages=[{"role": "user", "content": "Time?"}], tools=TIME_TOOLS,
                                      tool_choice={"type": "function", "function": {"name": MCP_TOOL}})
    assert len(llama.calls) == 1 and reply["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == MCP_TOOL
    with pytest.raises(ValueError, match="not among the tools"):
        tool_chat_handler(CHATML)(llama=llama, messages=[], tools=TIME_TOOLS,
                                  tool_choice={"type": "function", "function": {"name": "nope"}})

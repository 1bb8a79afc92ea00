"""``make eval-local``: ``tether eval`` and one task through an MCP tool, against a small model
on a local llama.cpp server (:mod:`tether.models.local` serves it).

``python -m tether.demo.local_eval`` starts the server, runs the eval's tasks against it, then
one task whose only tool is the reference time server's ``get_current_time`` (graded against
the time the tool returned), and stops the server whatever happens. docs/eval-local.md has the
models, the chat formats and the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether.demo.evaluate import UNATTENDED, EvalConfig, markdown, run_eval, waiting_for_approval
from tether.demo.lab import markdown_table, outcome_words, stop_after
from tether.models.local import DEFAULT_MODEL, MODELS, local_model, local_server, missing_extra
from tether.agents.agent import Agent
from tether.agents.mcp.server import MCPServer
from tether.harness import Harness
from tether.observe.report import summary
from tether.vocab.state import Limits


MCP_TASK = "mcp_time"
MCP_PROMPT = "What time is it now in UTC? Use the get_current_time tool."
MCP_INSTRUCTIONS = ("You are an agent with tools. Use a tool to find out what you need, then answer the user "
                    "in one sentence.")
MCP_TOOL = "get_current_time"


def time_server() -> Any:
    """The reference MCP time server (``mcp-server-time``), on UTC, its annotations trusted
    (``get_current_time`` is read-only: no approval)."""

    return MCPServer("time", command=sys.executable, args=("-m", "mcp_server_time", "--local-timezone", "UTC"),
                     trust_annotations=True)


@dataclass(frozen=True)
class TimeGrade:
    right: bool
    why: str


_ISO_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ](\d{2}):(\d{2})")
_CLOCK = re.compile(r"(?<![\d:])(\d{1,2}):(\d{2})(?::\d{2}(?:\.\d+)?)?(?:\s*([ap])\.?\s?m\b\.?)?(?![\d])",
                    re.IGNORECASE)


def tool_time(text: str | None) -> tuple[int, int] | None:
    """(hour, minute) of the time a ``get_current_time`` result holds, or None."""
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    found = _ISO_TIME.search(str(data.get("datetime", "")) if isinstance(data, dict) else text)
    return (int(found.group(1)), int(found.group(2))) if found else None


def clock_times(answer: str) -> list[tuple[int, int]]:
    """Every hh:mm the answer states (``09:41``, ``9:41:07``, ``2026-12-03T09:41``, ``9:41 pm``)."""
    times = []
    for m in _CLOCK.finditer(answer):
        hour, minute, half = int(m.group(1)), int(m.group(2)), (m.group(3) or "").lower()
        if half == "p" and hour < 12:
            hour += 12
        elif half == "a" and hour == 12:
            hour = 0
        if hour < 24 and minute < 60:
            times.append((hour, minute))
    return times


def grade_time(answer: str | None, returned: str | None) -> TimeGrade:
    """Right when the answer states the hour and minute the tool returned."""
    if answer is None:
        return TimeGrade(False, "no answer")
    if returned is None:
        return TimeGrade(False, f"{MCP_TOOL} returned nothing, so no time in the answer is the tool's")
    want = tool_time(returned)
    if want is None:
        return TimeGrade(False, f"{MCP_TOOL} returned no time")
    said = clock_times(answer)
    shown = f"{want[0]:02d}:{want[1]:02d}"
    if want in said:
        return TimeGrade(True, f"says {shown}, the time the tool returned")
    if said:
        return TimeGrade(False, f"says {', '.join(f'{h:02d}:{m:02d}' for h, m in said)}; the tool returned {shown}")
    return TimeGrade(False, f"missing: the time the tool returned ({shown})")


def last_result(messages: list[dict[str, Any]], tool: str = MCP_TOOL) -> str | None:
    """What the last call of ``tool`` returned, from the transcript."""
    names = {c.get("id"): (c.get("function") or {}).get("name") for m in messages if m.get("role") == "assistant"
             for c in m.get("tool_calls") or ()}
    results = [m.get("content") for m in messages
               if m.get("role") == "tool" and names.get(m.get("tool_call_id")) == tool]
    return str(results[-1]) if results else None


async def run_mcp_task(base_url: str, model: str, *, max_turns: int = 3, max_tokens: int = 128,
                       task_timeout_s: float | None = 60.0, root: Path | None = None,
                       server: Any = None) -> dict[str, Any]:
    """One run of an agent whose only tools are the MCP time server's, on ``model`` at
    ``base_url``: did it call the tool, what did the tool return, and does the answer state
    that time. Stopped through its run's signal after ``task_timeout_s``, like the eval's tasks."""

    agent = Agent(name="mcp-time", model=model, base_url=base_url, instructions=MCP_INSTRUCTIONS,
                  mcp_servers=[server or time_server()], limits=Limits(max_turns=max_turns, max_tokens=max_tokens))
    starts: list[str] = []

    def count_starts(event: Any) -> None:
        if event.kind == "tool_start":
            starts.append(event.name)

    with tempfile.TemporaryDirectory(prefix="tether-mcp-task-") as tmp:
        where = Path(root) if root is not None else Path(tmp)
        async with Harness(where / "runs", where / "workspace") as harness:
            state = harness.create(agent, MCP_PROMPT)
            started = time.perf_counter()
            with stop_after(task_timeout_s, f"task timeout: {task_timeout_s} s") as signal:
                outcome = await harness.run(state.run_id, signal=signal, sinks=[count_starts])
                tool_runs, declined = list(outcome.tool_runs), 0
                while waiting_for_approval(outcome.state) and declined < max_turns:
                    outcome = await harness.reject(state.run_id, UNATTENDED, signal=signal, sinks=[count_starts])
                    tool_runs += outcome.tool_runs
                    declined += 1
            wall_ms = (time.perf_counter() - started) * 1000
    s = summary(outcome.state, tool_runs, wall_ms)
    returned = last_result(outcome.state.messages)
    asked = sum(1 for m in outcome.state.messages if m.get("role") == "assistant" for c in m.get("tool_calls") or ()
                if (c.get("function") or {}).get("name") == MCP_TOOL)
    grade = grade_time(s["answer"], returned)
    return {"task": MCP_TASK, "prompt": MCP_PROMPT, "status": s["status"], "turns": s["turns"],
            "calls": asked, "tool_starts": len(starts), "tool_runs": len(tool_runs),
            "mcp_calls": sum(1 for r in tool_runs if r["name"] == MCP_TOOL),
            "tool_returned": returned, "right": grade.right, "why": grade.why, "answer": outcome_words(s),
            "wall_ms": s["ms"], "cost_usd": s["cost_usd"], "run_id": s["run_id"],
            "runs_dir": str(where / "runs") if root is not None else None}


MCP_COLUMNS = ("task", "status", "turns", "calls", "tool_starts", "tool_runs", "tool_returned", "right", "why",
               "answer", "wall_ms")
ANSWER_CHARS = 300
"""Answers longer than this are cut in the tables (``--json`` has them whole)."""


def _one_line(value: Any, cut: int | None = None) -> Any:
    """A table cell's text on one line (answers are free text; the table escapes pipes)."""
    if not isinstance(value, str):
        return value
    text = " ".join(value.split())
    return text if cut is None or len(text) <= cut else text[:cut].rstrip() + " […]"


def mcp_markdown(row: dict[str, Any]) -> str:
    """The MCP task as a one-row table. ``calls``: the model's calls of get_current_time;
    ``tool_starts``: the tool_start events (a repeated read-only call is answered from the
    run's earlier result, with no new start); ``tool_runs``: the tools run."""
    cells = {k: _one_line(row[k], ANSWER_CHARS if k == "answer" else None) for k in MCP_COLUMNS}
    return f"MCP task: {row['prompt']} (tools: the MCP time server's)\n\n{markdown_table([cells])}\n"


def eval_markdown(result: dict[str, Any]) -> str:
    """The eval's table (:func:`tether.demo.evaluate.markdown`) with each answer on one line."""
    tidy = {**result, "tasks": [{**r, "answer": _one_line(r["answer"], ANSWER_CHARS), "why": _one_line(r["why"])}
                                for r in result["tasks"]]}
    return markdown(tidy)


# ---- the command -----------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m tether.demo.local_eval",
                                     description="run tether eval, and one task through an MCP tool, against a "
                                                 "small model on a local llama.cpp server")
    parser.add_argument("--model", choices=list(MODELS), default=DEFAULT_MODEL)
    parser.add_argument("--chat-format", metavar="NAME",
                        help="a llama.cpp chat format instead of the model's own (e.g. chatml-function-calling)")
    parser.add_argument("--max-turns", type=int, default=6)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--task-timeout", type=float, default=60.0, metavar="SECONDS")
    parser.add_argument("--no-mcp", action="store_true", help="skip the MCP task")
    parser.add_argument("--out", type=Path, metavar="FILE.md")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    m = local_model(args.model)
    problem = missing_extra(m)
    if problem:
        print(f"local model unavailable: {problem}", file=sys.stderr)
        return 2
    with local_server(m, chat_format=args.chat_format) as base_url:
        cfg = EvalConfig(base_url=base_url, model=m.alias, max_turns=args.max_turns,
                         max_tokens=args.max_tokens, task_timeout_s=args.task_timeout)
        result = asyncio.run(run_eval(cfg))
        result["chat_format"] = args.chat_format or m.chat_format
        text = eval_markdown(result)
        if not args.no_mcp:
            row = asyncio.run(run_mcp_task(base_url, m.alias, max_turns=min(args.max_turns, 3),
                                           max_tokens=args.max_tokens, task_timeout_s=args.task_timeout))
            result["mcp_task"] = row
            text += "\n" + mcp_markdown(row)
    text = f"{m.title}, chat format `{result['chat_format']}`\n\n{text}"
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
    print(json.dumps(result) if args.json else text)
    return 0


if __name__ == "__main__":
    sys.exit(main())


if __name__ == "__main__":
    sys.exit(main())

"""Summaries of runs, as the CLI prints them and the lab and tests read them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tether.state import Cancelled, MaxBudget, MaxTurns, NeedsApproval, ProviderOutage, RunState, StopConditionMet
from tether.store import TRACE_FILE
from tether.text import clean
from tether.trace import read_trace

SUMMARY_KEYS = (
    "run_id", "status", "interruption", "error", "turns", "tool_runs", "prompt_tokens",
    "completion_tokens", "cost_usd", "child_cost_usd", "per_turn_prompt_tokens", "assumed_price", "estimated_turns",
    "answer", "ms",
)


def summary(state: RunState, tool_runs: list[dict[str, Any]], ms: float) -> dict[str, Any]:
    """The CLI's ``--json`` object: exactly :data:`SUMMARY_KEYS`."""
    return {
        "run_id": state.run_id,
        "status": state.status.value,
        "interruption": None if state.interruption is None else state.interruption.to_dict(),
        "error": state.error,
        "turns": state.turns,
        "tool_runs": tool_runs,
        "prompt_tokens": state.prompt_tokens,
        "completion_tokens": state.completion_tokens,
        "cost_usd": round(state.cost_usd, 8),
        "child_cost_usd": round(state.child_cost_usd, 8),
        "per_turn_prompt_tokens": list(state.per_turn_prompt_tokens),
        "assumed_price": state.pricing.assumed,
        "estimated_turns": list(state.estimated_turns),
        "answer": state.answer,
        "ms": round(ms, 1),
    }


def recorded_tool_runs(run_dir: Path) -> list[dict[str, Any]]:
    """Every tool run the trace records, across all the processes that ran it."""
    runs = []
    for record in read_trace(run_dir / TRACE_FILE):
        if record.get("kind") == "tool_start":
            try:
                args = json.loads(record.get("args") or "{}")
            except ValueError:
                args = record.get("args")
            runs.append({"name": record.get("name"), "args": args})
    return runs


def recorded_ms(run_dir: Path) -> float:
    """Wall time the run was being worked on: each process's start to its stop."""
    total, started = 0.0, None
    for record in read_trace(run_dir / TRACE_FILE):
        kind = record.get("kind")
        if kind == "run_started":
            started = record.get("ts")
        elif kind == "run_stopped" and started is not None:
            total += (record.get("ts", started) - started) * 1000
            started = None
    return total


def text_summary(state: RunState, tool_runs: int, ms: float) -> str:
    """The chapter's one-line summary, the answer, and the per-turn prompt tokens."""
    cap = state.limits.max_turns if state.limits.max_turns is not None else "none"
    line = (f"{state.model}, cap {cap}  turns={state.turns}  tools={tool_runs}  in={state.prompt_tokens}  "
            f"out={state.completion_tokens}  cost=${state.cost_usd:.4f}  ms={ms:.0f}  status={state.status.value}")
    if state.child_cost_usd:
        line += f"  (children ${state.child_cost_usd:.4f})"
    out = [line]
    if state.answer is not None:
        out.append(f"answer: {state.answer}")
    match state.interruption:
        case NeedsApproval(call_id=call_id, tool_name=tool, args=args):
            out.append(f"waiting for approval: {tool} {args} (call {call_id}); "
                       f"tether approve|reject {state.run_id}")
        case Cancelled(reason=reason):
            out.append(f"cancelled: {reason}")
        case ProviderOutage(reason=reason):
            out.append(f"provider outage: {reason}; tether resume {state.run_id} goes on once the endpoint is back")
        case StopConditionMet(reason=reason):
            out.append(f"stopped by a stop condition: {reason}; tether resume {state.run_id} goes on")
        case MaxTurns() | MaxBudget() as limit:
            out.append(f"stopped by {limit.type}; raise the limit with tether resume {state.run_id}")
    budget = state.limits.budget_usd
    if budget is not None and state.cost_usd > budget:
        out.append(f"note: spend ${state.cost_usd:.4f} exceeds the ${budget:.4f} budget by "
                   f"${state.cost_usd - budget:.4f} (soft mode overshoots by at most one turn)")
    if state.error:
        out.append(f"error: {state.error}")
    if state.pricing.assumed:
        out.append(f"assumed price: ${state.pricing.input_per_million:g} / ${state.pricing.output_per_million:g} "
                   f"per million input / output tokens (no price configured for {state.model})")
    if state.estimated_turns:
        turns = ", ".join(map(str, state.estimated_turns))
        out.append(f"usage not reported by the endpoint for turn{'s' if len(state.estimated_turns) > 1 else ''} "
                   f"{turns}: those tokens were counted by Tether")
    out.append("per-turn prompt tokens: " + " ".join(str(n) for n in state.per_turn_prompt_tokens))
    return clean("\n".join(out))

"""Summaries of runs, as the CLI prints them and the lab and tests read them."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from tether.vocab.budget_call import BUDGET
from tether.vocab.people import still_needed
from tether.vocab.state import Cancelled, MaxBudget, MaxTurns, NeedsApproval, ProviderOutage, RunState, StopConditionMet

if TYPE_CHECKING:
    from collections.abc import Iterable

    from tether.store.summary import RunSummary
    from tether.store.protocol import Store
    from tether.store.owner import Owner

from tether.vocab.text import clean
from tether.vocab.wording import acp_follow_up, overshoot


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


LISTING_KEYS = SUMMARY_KEYS + (
    "model", "agent", "parent_run_id", "task", "created_at", "updated_at", "budget_usd", "max_turns",
    "liveness", "owner", "source", "workspace", "forked_from",
)
"""``tether runs --json``: each run's :data:`SUMMARY_KEYS`, then what the index adds."""


def listing(run: RunSummary, tool_runs: list[dict[str, Any]], ms: float) -> dict[str, Any]:
    """A row of ``tether runs --json`` from a run's summary: exactly :data:`LISTING_KEYS`.
    ``status`` is the saved one; ``liveness`` says whether a ``running`` run is being run
    (``"running"``) or was left by a process that died (``"orphaned"``)."""
    return {
        "run_id": run.run_id,
        "status": run.status,
        "interruption": run.interruption,
        "error": run.error,
        "turns": run.turns,
        "tool_runs": tool_runs,
        "prompt_tokens": run.prompt_tokens,
        "completion_tokens": run.completion_tokens,
        "cost_usd": round(run.cost_usd, 8),
        "child_cost_usd": round(run.child_cost_usd, 8),
        "per_turn_prompt_tokens": list(run.per_turn_prompt_tokens),
        "assumed_price": run.assumed_price,
        "estimated_turns": list(run.estimated_turns),
        "answer": run.answer,
        "ms": round(ms, 1),
        "model": run.model,
        "agent": run.agent,
        "parent_run_id": run.parent_run_id,
        "task": run.task,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
        "budget_usd": run.budget_usd,
        "max_turns": run.max_turns,
        "liveness": run.liveness,
        "owner": None if run.owner is None else run.owner.to_dict(),
        "source": run.source,
        "workspace": run.workspace,
        "forked_from": run.forked_from,
    }


def _clock(ts: float | None, now: float) -> str:
    if ts is None:
        return "?"
    same_day = time.localtime(ts)[:3] == time.localtime(now)[:3]
    return time.strftime("%H:%M:%S" if same_day else "%Y-%m-%d %H:%M:%S", time.localtime(ts))


def owner_words(run_id: str, liveness: str | None, owner: Owner | None, *, long: bool = False) -> str:
    """Who runs a running run (``1234@host since 12:03:04``), or that it is orphaned."""
    now = time.time()
    if liveness == "running":
        if owner is None or owner.pid is None:
            return "held by a process that has not said who it is"
        words = f"{owner.where} since {_clock(owner.since, now)}"
        if not long and (owner.command or "").startswith("tether worker "):
            words += f" ({owner.command[len('tether '):]})"  # which queue worker: its executor id
        elif owner.kept:  # no process holds it: its keeper lives (tether.store.keeper)
            words += f" ({owner.command or 'its program'}, between hooks: Stop lands at its next hook)"
        if long:
            if owner.user:
                words += f" as {owner.user}"
            if owner.heartbeat is not None:
                words += f", heartbeat {max(0.0, now - owner.heartbeat):.0f} s ago"
            if owner.command and not owner.kept:
                words += f" ({owner.command})"
        return words
    if liveness == "queued":
        return "waits in the worker queue (tether worker --store URL takes it)"
    if liveness == "orphaned":
        was = f" (was {owner.where} since {_clock(owner.since, now)})" if owner and owner.pid is not None else ""
        return f"no process holds it{was}; tether resume {run_id} adopts it"
    return ""


def recorded_records(records: Iterable[dict[str, Any]]) -> tuple[list[dict[str, Any]], float]:
    """The tool runs and the wall time a trace's records say."""
    runs: list[dict[str, Any]] = []
    total, started = 0.0, None
    for record in records:
        kind = record.get("kind")
        if kind == "tool_start":
            try:
                args = json.loads(record.get("args") or "{}")
            except ValueError:
                args = record.get("args")
            runs.append({"name": record.get("name"), "args": args})
        elif kind == "run_started":
            started = record.get("ts")
        elif kind == "run_stopped" and started is not None:
            total += (record.get("ts", started) - started) * 1000
            started = None
    return runs, total


def warnings_of(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The warnings a trace's records hold (:class:`tether.vocab.events.RunWarning`), oldest
    first: each one's ``text``, and the ``call_id`` and ``path`` it is about, when known."""
    return [{"text": str(r.get("text") or ""), "call_id": r.get("call_id"), "path": r.get("path")}
            for r in records if r.get("kind") == "warning"]


SYSTEM_NOT_SENT = "Tether's instructions are not sent to an ACP agent: it brings its own"
"""What a view says in place of an ACP run's system prompt (:func:`as_sent`)."""


def as_sent(state: RunState) -> list[dict[str, Any]]:
    """The run's transcript as its agent was sent it. A run keeps Tether's system prompt from
    its making, but an ACP agent never receives it (it brings its own instructions), so its
    run's views leave it out and say :data:`SYSTEM_NOT_SENT` where they say anything."""
    if not state.of_acp_agent:
        return state.messages
    return [m for m in state.messages if m.get("role") != "system"]


def recorded_all(store: Store, run_ids: list[str]) -> dict[str, tuple[list[dict[str, Any]], float]]:
    """:func:`recorded_records` of each run's trace, through :meth:`Store.trace_digests`: the file store
    keeps the digests in its index (a changed trace is read again); a database reads each."""
    return store.trace_digests(run_ids, recorded_records)


def _cost(state: RunState) -> str:
    """The run's cost, or "unknown" for a run whose model has no price and paid nothing priced."""
    return "unknown" if state.pricing.unknown and not state.cost_usd else f"${state.cost_usd:.4f}"


def text_summary(state: RunState, tool_runs: int, ms: float) -> str:
    """The chapter's one-line summary, the answer, and the per-turn prompt tokens."""
    cap = state.limits.max_turns if state.limits.max_turns is not None else "none"
    line = (f"{state.model}, cap {cap}  turns={state.turns}  tools={tool_runs}  in={state.prompt_tokens}  "
            f"out={state.completion_tokens}  cost={_cost(state)}  ms={ms:.0f}  status={state.status.value}")
    if state.child_cost_usd:
        line += f"  (children ${state.child_cost_usd:.4f})"
    out = [line]
    if state.answer is not None:
        out.append(f"answer: {state.answer}")
    match state.interruption:
        case NeedsApproval(call_id=call_id, tool_name=tool, args=args, options=options) as waiting:
            how_far = f"; {still_needed(waiting.needed, waiting.approvers, waiting.accounts)}" \
                if waiting.needed > 1 else ""
            out.append(f"waiting for approval: {tool} {args} (call {call_id}){how_far}; "
                       f"tether approve|reject {state.run_id}")
            if tool == BUDGET:  # a fleet budget's call: its words say which, what is spent, how to lift it
                out.append(waiting.why)
            if options:  # an ACP agent's: what --option answers with, by id
                offered = ", ".join(f"{o.get('id')} ({o.get('name')}, {str(o.get('kind')).replace('_', ' ')})"
                                    for o in options)
                out.append(f"options: {offered}; tether approve|reject {state.run_id} --option ID")
        case Cancelled(reason=reason):
            out.append(f"cancelled: {reason}")
        case ProviderOutage(reason=reason):
            out.append(f"provider outage: {reason}; tether resume {state.run_id} goes on once the endpoint is back")
        case StopConditionMet(reason=reason):
            out.append(f"stopped by a stop condition: {reason}; tether resume {state.run_id} goes on")
        case MaxTurns() | MaxBudget() as limit if state.of_acp_agent:  # it goes on in the agent's session
            out.append(f"stopped by {limit.type}; raise the limit and go on in the agent's session with "
                       f"{acp_follow_up(state.run_id, limit.type)}")
        case MaxTurns() | MaxBudget() as limit:
            out.append(f"stopped by {limit.type}; raise the limit with tether resume {state.run_id}")
    budget = state.limits.budget_usd
    if budget is not None and state.cost_usd > budget:
        out.append(f"note: {overshoot(state.cost_usd, budget)} (soft mode overshoots by at most one turn)")
    if state.error:
        out.append(f"error: {state.error}")
    if state.pricing.assumed:
        out.append(f"assumed price: ${state.pricing.input_per_million:g} / ${state.pricing.output_per_million:g} "
                   f"per million input / output tokens (no price configured for {state.model})")
    elif state.pricing.unknown:
        out.append(f"price unknown for {state.model}: {state.prompt_tokens} / {state.completion_tokens} tokens "
                   f"counted, not priced (neither the agent file nor genai-prices knows it; tether prices "
                   f"{state.model})" + (f"; its ${state.limits.budget_usd:g} budget cannot hold"
                                        if state.limits.budget_usd is not None else ""))
    if state.estimated_turns:
        turns = ", ".join(map(str, state.estimated_turns))
        out.append(f"usage not reported by the endpoint for turn{'s' if len(state.estimated_turns) > 1 else ''} "
                   f"{turns}: those tokens were counted by Tether")
    out.append("per-turn prompt tokens: " + " ".join(str(n) for n in state.per_turn_prompt_tokens))
    return clean("\n".join(out))

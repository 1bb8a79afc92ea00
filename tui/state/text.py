"""Turning run data into screen text, safely.

Everything a run produces (model output, tool output, file contents, arguments, error
messages, even run ids read from disk) is untrusted: it is never parsed as markup and its
control characters are replaced by visible stand-ins before it reaches a widget, so a file
holding ``[/]``, ``[bold red]`` or ``\\x1b[2J`` cannot break, restyle or clear the screen.
Build :class:`rich.text.Text` from :func:`clean` strings and append styles separately.
"""

from __future__ import annotations

import json
from typing import Any

from rich.text import Text

from tether.vocab.state import Cancelled, NeedsApproval, ProviderOutage, StopConditionMet, RunState, Status
from tether.vocab.text import clean
from tether.vocab.wording import money, one_line


def plain(value: Any, style: str = "") -> Text:
    """Untrusted text as a Text object (no markup is ever parsed)."""
    return Text(clean(value), style=style)


def pretty_args(raw: Any) -> str:
    """Tool-call arguments, pretty-printed when they are JSON (for dialogs)."""
    try:
        return json.dumps(json.loads(raw), indent=2, ensure_ascii=False) if isinstance(raw, str) else \
            json.dumps(raw, indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(raw)


# ---- status -------------------------------------------------------------------

_BADGES: dict[str, str] = {
    "running": "● running",
    "completed": "✔ completed",
    "failed": "✖ failed",
    "max_turns_exceeded": "⏹ turn cap",
    "budget_exceeded": "$ budget",
    "approval": "⏸ approval",
    "cancelled": "■ stopped",
    "interrupted": "■ stopped",
    "outage": "⚡ outage",
    "stale": "◌ not live",
    "orphaned": "◌ orphaned",
    "queued": "◷ queued",
    "worker_error": "✖ failed",
}
_COLOURS = {
    "running": "bold yellow", "completed": "green", "failed": "bold red",
    "max_turns_exceeded": "magenta", "budget_exceeded": "magenta", "approval": "bold cyan",
    "cancelled": "yellow", "interrupted": "yellow", "outage": "bold magenta", "stale": "bright_black", "orphaned": "bold bright_black",
    "queued": "cyan",
    "worker_error": "bold red",
}


def badge_key(state: RunState, *, live: bool, worker_error: str | None = None) -> str:
    if worker_error and not live:
        return "worker_error"
    status = state.status
    if status is Status.RUNNING:
        return "running" if live else "stale"
    if status is Status.INTERRUPTED:
        match state.interruption:
            case NeedsApproval():
                return "approval"
            case Cancelled():
                return "cancelled"
            case ProviderOutage():
                return "outage"
        return "interrupted"
    return status.value


def badge(key: str) -> Text:
    return Text(_BADGES.get(key, key), style=_COLOURS.get(key, ""))


def stop_reason(state: RunState, *, live: bool, last_reason: str | None = None,
                worker_error: str | None = None) -> str:
    """Why the run is where it is, in words."""
    if worker_error and not live:
        return f"the console's worker for this run failed: {worker_error}"
    status = state.status
    if status is Status.RUNNING:
        if live:
            return "running"
        return ("not running in this console: another process holds it, or the process that ran it "
                "ended without saving a stop (R resumes it)")
    if last_reason:
        return last_reason
    if status is Status.COMPLETED:
        return "the model answered"
    if status is Status.FAILED:
        return state.error or "failed"
    if status is Status.MAX_TURNS_EXCEEDED:
        return f"turn cap reached: {state.turns} of {state.limits.max_turns} turns"
    if status is Status.BUDGET_EXCEEDED:
        budget = state.limits.budget_usd
        return f"budget reached: spent {money(state.cost_usd)} of {money(budget)}"
    match state.interruption:
        case NeedsApproval(tool_name=tool, call_id=call_id):
            return f"waiting for approval of {tool} ({call_id})"
        case Cancelled(reason=reason) | StopConditionMet(reason=reason):
            return reason or "cancelled"
        case ProviderOutage(reason=reason):
            return f"provider outage: {reason} (R resumes once the endpoint is back)"
    return status.value

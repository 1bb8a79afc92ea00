"""The words of a Claude Code session, both ways: what its transcript and a tool's response
say (read by the hooks of :mod:`tether.integrations.claude_code`), and what a hook answers
Claude Code (a permission decision, or the session stopped).

Plain functions over JSON, kept apart from the hook's process and the run it reports to, so
that Claude Code's formats are in one place.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.vocab.state import RunState

_MAX_RESULT_CHARS = 16_000


def model_calls(path: Path) -> list[tuple[str, dict[str, Any], list[str]]]:
    """The transcript's assistant messages, one per model call in order: the model, the usage
    (its last record: the final count) and the text blocks."""
    calls: dict[str, tuple[str, dict[str, Any], list[str]]] = {}
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue  # a line being written as we read
        message = record.get("message") if isinstance(record, dict) and record.get("type") == "assistant" else None
        if not isinstance(message, dict) or not isinstance(message.get("id"), str):
            continue
        model, usage, texts = calls.get(message["id"], ("", {}, []))
        content = message.get("content")
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "text" and block.get("text"):
                texts.append(str(block["text"]))
        calls[message["id"]] = (str(message.get("model") or model), message.get("usage") or usage, texts)
    return list(calls.values())


def started_here(state: RunState, call_id: str) -> bool:
    return any(c.get("id") == call_id for m in state.messages if m.get("role") == "assistant"
               for c in m.get("tool_calls") or ())


def result_text(response: Any) -> str:
    """A tool's result as the model read it: a shell's output and errors, else the response."""
    if isinstance(response, dict) and ("stdout" in response or "stderr" in response):
        text = "\n".join(str(response.get(k) or "") for k in ("stdout", "stderr") if response.get(k))
        text = text or "(no output)"
    elif isinstance(response, str):
        text = response
    else:
        text = json.dumps(response, ensure_ascii=False, default=str)
    return text if len(text) <= _MAX_RESULT_CHARS else text[:_MAX_RESULT_CHARS] + " [cut]"




def decision(verdict: str, words: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"hookEventName": "PreToolUse", "permissionDecision": verdict,
                           "permissionDecisionReason": words}
    if args is not None:
        out["updatedInput"] = args  # the operator's edited arguments: the call runs with them
    return {"hookSpecificOutput": out}


def stopping(event: str, words: str) -> dict[str, Any] | None:
    """How a hook stops the session: ``PreToolUse`` denies (``continue: false`` would let the
    call run first); ``PostToolUse`` and ``UserPromptSubmit`` stop it; the rest cannot."""
    if event == "PreToolUse":
        return decision("deny", f"{words} The call was not run.")
    if event in ("PostToolUse", "UserPromptSubmit"):
        return {"continue": False, "stopReason": words}
    return None


def after_the_end(event: str, state: RunState) -> dict[str, Any] | None:
    """A hook after the run has ended: a Stop or a limit keeps stopping the session; a run
    that completed or failed (its bookkeeping) never stops the user's work."""
    if not state.status.resumable:
        return None
    interruption, limits, status = state.interruption, state.limits, state.status.value
    reason = getattr(interruption, "reason", None) or status.replace("_", " ")
    if status == "budget_exceeded" and limits.budget_usd is not None:
        reason = f"the budget of ${limits.budget_usd:.4f} is spent (${state.cost_usd:.4f})"  # as the run API says
    elif status == "max_turns_exceeded" and limits.max_turns is not None:
        reason = f"the turn cap of {limits.max_turns} is reached"
    return stopping(event, ended_words(state.run_id, reason, getattr(interruption, "by", None), interruption))


def ended_words(run_id: str, reason: str, by: str | None, interruption: Any) -> str:
    reason = reason.strip().rstrip(".")
    if getattr(interruption, "type", None) == "cancelled":  # a Stop (tether.vocab.state.Cancelled)
        who = "the operator" if not by or by == "operator" else f"the operator {by}"
        return f"{who[0].upper()}{who[1:]} stopped this session in Tether (run {run_id}): {reason}."
    return f"Tether ended this session's run {run_id}: {reason}."

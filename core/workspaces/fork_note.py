"""What a fork of an ACP agent's run tells the agent (docs/checkpoints.md#fork-an-acp-agents-run).

An ACP agent's session cannot be cut at a step, and ``session/fork`` copies it whole (used only
at the run's last checkpoint, :func:`tether.acp.sessions.first_session`), so the fork starts a
new session and its first prompt says in
words what was done up to checkpoint N: the user's prompts, the tool calls and their outcomes,
the agent's answers, each shortened, read from the origin's transcript up to N.
"""

from __future__ import annotations

import json
from typing import Any

from tether.vocab.text import clean

FORK_NOTE = "fork"
"""The ``tether`` mark of the note's message (:func:`tether.acp.run._last_user_text` puts it before
the words that follow it)."""
LINES = 60
"""At most this many lines of what was done; the earliest beyond are counted, not shown."""


def _short(text: Any, n: int) -> str:
    words = " ".join(clean(str(text or "")).split())
    return words if len(words) <= n else words[:n - 1] + "…"


def _arguments(raw: Any) -> str:
    try:
        args = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return _short(raw, 160)
    if isinstance(args, dict):
        return _short(", ".join(f"{k}={v}" for k, v in args.items()), 160)
    return _short(args, 160)


def done_up_to(messages: list[dict[str, Any]]) -> list[str]:
    """One line per thing done in ``messages`` (an ACP run's transcript up to a checkpoint)."""
    results = {m.get("tool_call_id"): m for m in messages if m.get("role") == "tool"}
    lines: list[str] = []
    for m in messages:
        role = m.get("role")
        if role == "user":
            if m.get("tether") == "rewind":
                lines.append(f"- Tether rewound the files: {_short(m.get('content'), 200)}")
            else:
                lines.append(f"- The user asked: {_short(m.get('content'), 400)}")
        elif role == "assistant":
            for call in m.get("tool_calls") or ():
                fn = call.get("function") or {}
                result = results.get(call.get("id"))
                outcome = "no result" if result is None else f"result: {_short(result.get('content'), 160)}"
                lines.append(f"- You called {_short(fn.get('name'), 80)}({_arguments(fn.get('arguments'))}): {outcome}")
            if m.get("content"):
                lines.append(f"- You answered: {_short(m.get('content'), 300)}")
    if len(lines) > LINES:
        lines = [f"- ({len(lines) - LINES + 1} earlier steps left out)"] + lines[-(LINES - 1):]
    return lines


def fork_note(messages: list[dict[str, Any]], origin: str, step: int) -> str:
    """The first prompt of an ACP run's fork (before the fork's ``--message``, if any)."""
    done = done_up_to(messages) or ["- Nothing yet."]
    return (f"(Tether forked this from run {origin} at checkpoint {step}, in a new session: the files of your "
            f"workspace are as they were at that step. What was done up to there:\n" + "\n".join(done)
            + "\nRead the files again before you rely on them. Go on with the task from that point.)")

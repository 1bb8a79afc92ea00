"""How a trace record reads as one line: the console's trace pane and ``tether watch``.

One wording for both, so a line in a terminal following a run reads the same as the
line the console shows for it. Everything in a record came from a run (model output,
tool arguments, error messages): it is untrusted, and the line is made safe for a
terminal (:func:`tether.vocab.text.clean`: control characters made visible, newlines folded)
and cut to a bounded width. Nothing here imports the console.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from tether.vocab.state import Decision
from tether.vocab.text import clean

KIND_WIDTH = 18
LINE_LIMIT = 400


def money(value: float | None) -> str:
    if value is None:
        return "–"
    return f"${value:.4f}" if value < 100 else f"${value:,.2f}"


def overshoot(spent: float, budget: float) -> str:
    """How far ``spent`` passed ``budget``, in words that show the difference.

    At four decimals a spend a hundredth of a cent over its budget reads "$0.0100 exceeds
    the $0.0100 budget by $0.0000": both figures get as many digits as it takes for the
    overshoot to show (up to ten), and a spend equal to its budget at that precision
    "reached" it rather than exceeding it by nothing.
    """
    over = spent - budget
    for digits in range(4, 11):
        if round(over, digits) > 0:
            return (f"spend ${spent:,.{digits}f} exceeds the ${budget:,.{digits}f} budget by "
                    f"${over:,.{digits}f}")
    return f"spend {money(spent)} reached the {money(budget)} budget"


def acp_follow_up(run_id: str, stopped_by: str | None = None) -> str:
    """The command an ACP agent's run goes on with: a follow-up in the agent's session
    (``--message``), the limit it stopped at raised (``stopped_by``: ``max_budget`` or
    ``max_turns``, else none); a plain ``tether resume`` of it is refused."""
    raised = {"max_budget": " --budget USD", "max_turns": " --max-turns N"}.get(stopped_by or "", "")
    return f"tether resume {run_id}{raised} --message TEXT"


def one_line(value: Any, limit: int = 120) -> str:
    """``value`` as one display-safe line of at most ``limit`` characters."""
    text = clean(value, keep_newlines=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _clock(ts: float, timings: bool) -> str:
    if not timings or not ts:
        return ""
    t = time.localtime(ts)
    return time.strftime("%H:%M:%S", t) + f".{int((ts % 1) * 1000):03d} "


def describe(r: dict[str, Any], timings: bool = True) -> str:
    """The interesting fields of one trace record, as a short line."""
    kind = r.get("kind")
    if kind == "run_started":
        return ("resumed" if r.get("resumed") else "started") + f" model={r.get('model')}"
    if kind == "turn":
        tail = f"  {r.get('provider_ms', 0):.0f} ms" if timings else ""
        calls = r.get("tool_calls") or 0
        then = f"{calls} tool call{'s' if calls != 1 else ''}" if calls else str(r.get("finish_reason"))
        return (f"turn {r.get('turn')}  in {r.get('prompt_tokens')} out {r.get('completion_tokens')}  "
                f"total {money(r.get('cost_usd'))}  → {then}{tail}")
    if kind == "provider_retry":
        return f"retry {r.get('attempt')} after {r.get('status')}: {r.get('reason')} (wait {r.get('wait_s')} s)"
    if kind == "tool_start":
        return f"{r.get('name')} {r.get('args')}  {r.get('call_id')}"
    if kind == "tool_progress":
        return f"{r.get('name')}: {r.get('label')}"
    if kind == "tool_result":
        state = "ok" if r.get("ok") else f"error ({r.get('error')})"
        if r.get("cached"):
            state += ", cached"
        tail = f"  {r.get('ms', 0):.0f} ms" if timings else ""
        return f"{r.get('name')} {state}  {r.get('call_id')}{tail}"
    if kind == "approval_required":
        return f"{r.get('tool')} {r.get('args')}  {r.get('call_id')}: {r.get('why')}"
    if kind == "approval_decision":
        return f"{r.get('verdict')} {r.get('tool')} {r.get('call_id')}: {r.get('text')}"
    if kind == "worker_note":
        return f"{r.get('text')}"
    if kind == "agent_session":
        return (f"{r.get('agent_name')} {r.get('agent_version')}  session {r.get('session_id')}  pid {r.get('pid')}"
                + ("  (loads sessions)" if r.get("load_session") else "")
                + (f"  {sandbox_words(r['sandbox'])}" if r.get("sandbox") else "")
                + {"session/fork": "  (a fork: session/fork of the origin's session)",
                   "told": "  (a fork: a new session, told in words)"}.get(str(r.get("fork") or ""), ""))
    if kind == "tool_output":
        return (f"{r.get('name')}: {exit_words(r.get('exit_code'), r.get('signal'))}" if r.get("exited")
                else f"{r.get('name')}: {str(r.get('data') or '').rstrip()}")
    if kind == "agent_commands":
        return commands_words(r.get("commands") or [])
    if kind == "plan":
        marks = {"completed": "[x]", "in_progress": "[~]"}
        return "  ".join(f"{marks.get(e.get('status'), '[ ]')} {e.get('content')}" for e in r.get("entries") or [])
    if kind == "thought":
        return f"(thought, turn {r.get('turn')}) {r.get('text')}"
    if kind == "file_write":
        if r.get("refused"):
            return f"refused {r.get('path')}: {r.get('refused')}"
        return f"wrote {r.get('path')} ({r.get('size')} bytes)"
    if kind == "warning":
        return f"WARNING {r.get('text')}" + (f"  {r.get('call_id')}" if r.get("call_id") else "")
    if kind == "workspace_ready":
        where = f"{r.get('workspace_kind')} {r.get('path')}"
        if r.get("branch"):
            where += f" on {r.get('branch')}"
        return ("made " if r.get("made") else "found ") + where + f" from {str(r.get('base') or '')[:12]}"
    if kind == "workspace_setup":
        code = r.get("exit_code")
        state = "could not start" if code is None else "ok" if code == 0 else f"exit {code}"
        tail = f"  {r.get('ms', 0):.0f} ms" if timings else ""
        last = str(r.get("output") or "").strip().splitlines()[-1:]
        return f"{r.get('command')}: {state}{tail}" + (f"  {last[0]}" if last else "")
    if kind == "workspace_checked":
        code = r.get("exit_code")
        state = "could not start" if code is None else "passed" if code == 0 else f"failed (exit {code})"
        last = str(r.get("output") or "").strip().splitlines()[-1:]
        return f"check {r.get('command')}: {state}" + (f"  {last[0]}" if last else "")
    if kind == "workspace_merged":
        return str(r.get("words") or f"merged into {r.get('into')} as {str(r.get('commit'))[:12]}")
    if kind == "workspace_discarded":
        return f"removed {r.get('path')}" + (f" and its branch {r.get('branch')}" if r.get("branch") else "") \
            + (f" (by {r.get('by')})" if r.get("by") else "")
    if kind == "run_stopped":
        return f"{r.get('status')}: {r.get('reason')}  turns={r.get('turns')} cost={money(r.get('cost_usd'))}"
    return json.dumps({k: v for k, v in r.items() if k not in ("kind", "run_id", "seq", "ts")}, default=str)


def sandbox_words(sandbox: dict[str, Any]) -> str:
    """An agent session's sandbox as ``tether show`` and the trace pane word it."""
    writable = ", ".join(str(path) for path in sandbox.get("writable") or ())
    return f"sandbox: {sandbox.get('backend')}, writes only {writable}"


def format_record(r: dict[str, Any], *, timings: bool = True, prefix: str = "") -> str:
    """One trace record as the trace pane shows it: ``#seq  time  kind  what``, on one
    display-safe line."""
    kind = str(r.get("kind", "?"))
    line = f"#{r.get('seq', 0):<5} {_clock(r.get('ts', 0.0), timings)}{prefix}{kind:<{KIND_WIDTH}} {describe(r, timings)}"
    return one_line(line, LINE_LIMIT)


def commands_words(commands: list[dict[str, str]]) -> str:
    """An ACP agent's slash commands, as ``tether show`` and the trace list them."""
    return "  ".join(f"/{c.get('name')}" + (f" <{c['hint']}>" if c.get("hint") else "")
                     + (f" ({c['description']})" if c.get("description") else "") for c in commands) or "none"


def config_words(options: Sequence[dict[str, Any]]) -> str:
    """An ACP agent's session config options as it last stated them, for ``tether show`` and
    the console: ``config: Model=fake-large, Effort=high`` (names and current values)."""
    return "config: " + ", ".join(f"{o.get('name') or o.get('id')}={_on_off(o.get('value'))}" for o in options)


def _on_off(value: Any) -> str:
    return "on" if value is True else "off" if value is False else str(value)


def exit_words(exit_code: int | None, signal: str | None) -> str:
    """How a shell command ended, in the words the transcript and the trace use."""
    if signal:
        return f"ended by signal {signal}"
    return "exit code ?" if exit_code is None else f"exit code {exit_code}"


DEADLINE = "deadline"
"""Who decides when nobody did in time (a rejection, never an approval)."""


def already_decided(decision: Decision) -> str:
    """Why another decision on a decided call is refused, in words: who decided it first. When
    its deadline did, the words say the deadline passed and what it did."""
    if decision.by == DEADLINE:
        return (f"too late: the decision deadline of {decision.tool or 'the call'} ({decision.call_id}) had passed, "
                f"and the deadline decided it: {decision.text}; the call was declined, nothing was done, and this "
                "decision was not taken")
    return f"already decided: {decision.verdict} by {decision.by}; there is one decision per call"

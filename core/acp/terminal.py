"""A shell call's output, as an ACP agent reports it to a client that advertises
``_meta.terminal_output`` (the extension Zed's Claude and Codex adapters speak): the call's
updates carry ``_meta.terminal_info`` (its terminal), ``terminal_output`` (``data``, as it
comes) and ``terminal_exit`` (``exit_code``, ``signal``). Tether runs no terminal for the
agent (it advertises no ``terminal/*``); it only shows what the agent's own shell printed:
live in the trace (``tool_output``), and as the call's result in the transcript when the
agent gives no text of its own.
"""

from __future__ import annotations

MAX_KEPT = 64 * 1024  # characters of a call's output kept for its result (the start is dropped)


def kept(so_far: str, data: str) -> str:
    """The call's output with ``data`` added, its last ``MAX_KEPT`` characters."""
    out = so_far + data
    return out[-MAX_KEPT:]


def shell_text(output: str, end: str) -> str:
    """The call's result as the transcript shows it: its output, then its exit code."""
    return "\n".join(p for p in (output.rstrip("\n"), f"[{end}]" if end else "") if p)

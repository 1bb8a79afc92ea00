"""A run's journal: one append-only file per run, so every step costs the same.

``<runs_dir>/<run_id>/journal.jsonl`` holds two kinds of line: ``{"m": message}`` adds a
message to the transcript; ``{"commit": header}`` makes everything before it the saved
state. The header is the run without its transcript (:meth:`RunState.header`), its
``message_count``, and, for the list fields that only grow, just the entries added since
the previous commit; a field that seldom changes (the limits, the prices, the workspace...) is
in a commit only when it changed, and read from the last commit that has it. A save is a single ``write`` of its new messages and its commit line.
Loading keeps the last complete commit; anything after it (a crash mid-write leaves at most
a torn tail) is cut off before the next write (:meth:`tether.store.files.handle.RunHandle.attach`).

Rewriting the state each step would make a long run quadratic; here a step writes its new
messages and a header whose size does not grow with the run. Durability against a crashed
*process* comes from the single write and the commit rule, not from fsync (a power cut may
lose the last steps, never tear one). :class:`tether.store.files.tail.JournalTail` applies
commits the same way, reading only what was appended.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tether.vocab.state import RunState, StateError
from tether.store.files.layout import NOT_A_RUN

# Header fields that only grow: a commit carries what was appended since the last one.
GROWING_FIELDS = ("per_turn_prompt_tokens", "estimated_turns")
# Header fields that seldom change: a commit carries them only when they did (the first
# commit, and a compaction's, carries them all). A step changes its counts, costs, status and
# times; these stay as they were for most steps, and were most of each commit's bytes: the
# limits, prices, policies, workspace and who started the run are written once, a run's
# agent reference at creation and when its MCP tools are first listed.
STICKY_FIELDS = ("agent", "model", "usage_ratio", "interruption", "error", "approvals", "parent_run_id", "children",
                 "limits", "pricing", "policies", "base_url", "workspace", "run_workspace", "intents", "failed_calls",
                 "created_at", "rewinds", "forked_from", "operator", "operator_name")


def dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def header_of(state: RunState, since: dict[str, int] | None = None) -> dict[str, Any]:
    return {**state.header(since), "message_count": len(state.messages)}


def commit_bytes(messages: list[dict[str, Any]], header: dict[str, Any]) -> bytes:
    """Journal lines for ``messages`` followed by the commit of ``header``."""
    lines = [dumps({"m": m}) for m in messages]
    lines.append(dumps({"commit": header}))
    return ("\n".join(lines) + "\n").encode()


def read_journal(path: Path, *, missing: str | None = None) -> tuple[RunState, int]:
    """Replay a journal up to its last complete commit; return the state and where it ends.
    No journal there (or something else in its place) is a StateError saying ``missing``."""
    messages: list[dict[str, Any]] = []
    uncommitted: list[dict[str, Any]] = []
    grown: dict[str, list[Any]] = {f: [] for f in GROWING_FIELDS}
    header: dict[str, Any] | None = None
    sticky: dict[str, Any] = {}
    committed_bytes = offset = 0
    try:
        f = open(path, "rb")
    except NOT_A_RUN:
        raise StateError(missing or f"no saved run at {path}") from None
    with f:
        for number, line in enumerate(f, 1):
            offset += len(line)
            if not line.endswith(b"\n"):
                break  # a torn tail: the write a crash interrupted
            try:
                record = json.loads(line)
                if "m" in record:
                    uncommitted.append(record["m"])
                    continue
                header = dict(record["commit"])
                for name in GROWING_FIELDS:
                    grown[name].extend(header.pop(name, ()))
                for name in STICKY_FIELDS:
                    if name in header:
                        sticky[name] = header[name]
                    elif name in sticky:
                        header[name] = sticky[name]
            except (ValueError, TypeError, KeyError, RecursionError) as exc:  # RecursionError: nested too deep
                raise StateError(f"corrupt journal {path} at line {number}: {exc}") from None
            messages.extend(uncommitted)
            uncommitted.clear()
            committed_bytes = offset
            if header.get("message_count") != len(messages):
                raise StateError(f"corrupt journal {path} at line {number}: "
                                 f"{len(messages)} messages, the commit says {header.get('message_count')}")
    if header is None:
        raise StateError(f"corrupt journal {path}: no committed state")
    del header["message_count"]
    return RunState.from_dict({**header, **grown, "messages": messages}), committed_bytes

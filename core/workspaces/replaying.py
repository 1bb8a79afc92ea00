"""Replay a Tether run's recorded model replies against today's tools, without calling the
model (``tether replay RUN [--to N]``; docs/checkpoints.md#replay).

Each tool call the model made is run again, in order, with the arguments it was recorded
with, in a scratch folder that starts as the run's workspace started (its base commit's files;
for a run without a workspace of its own, a copy of its agent's folder as it is today). Each
result is compared with the one recorded; the first that differs is reported, and the replay
goes on to the end (or checkpoint N), so every difference is listed. Nothing of the run, its
workspace or its store is changed, and no model is asked.

Calls that were never run are skipped, in words: rejected by a person or a rule, answered from
the dedupe cache, or a subagent (``research``). A run whose agent or tools are gone is refused
in words: there is nothing to replay against.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether.agents.tools.base import Tool, ToolContext
from tether.agents.workspace import Workspace
from tether.vocab.cancel import CancelSignal
from tether.vocab.ledger import Ledger
from tether.vocab.state import RunState, StateError
from tether.workspaces.checkpoints import find
from tether.workspaces.git import git

MAX_TOOL_OUTPUT_CHARS = 16_000  # as the loop keeps a result (tether.run.loop)
SKIPPED_TOOLS = frozenset({"research"})  # runs a subagent: a model would be asked


@dataclass(slots=True)
class ReplayedCall:
    step: int
    """The call's place among the run's tool calls, from 1."""
    call_id: str
    tool: str
    outcome: str
    """``same``, ``different`` or ``skipped``."""
    recorded: str = ""
    now: str = ""
    why: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "call_id": self.call_id, "tool": self.tool, "outcome": self.outcome,
                "recorded": self.recorded, "now": self.now, "why": self.why}


@dataclass(slots=True)
class Replay:
    run_id: str
    calls: list[ReplayedCall] = field(default_factory=list)
    started_from: str = ""

    @property
    def first_difference(self) -> ReplayedCall | None:
        return next((c for c in self.calls if c.outcome == "different"), None)


def _recorded_calls(state: RunState, upto: int) -> list[tuple[dict[str, Any], str | None]]:
    """Each tool call of the first ``upto`` messages, with its recorded result (None: none)."""
    messages = state.messages[:upto]
    results = {m.get("tool_call_id"): str(m.get("content") or "") for m in messages if m.get("role") == "tool"}
    return [(call, results.get(call.get("id"))) for m in messages if m.get("role") == "assistant"
            for call in m.get("tool_calls") or ()]


async def _scratch_from(state: RunState, folder: Path) -> Path:
    """The folder the replay's tools work in, made in ``folder``: as the run's workspace started."""
    ws = state.run_workspace
    if ws is not None and ws.base_commit is not None and ws.stage in ("made", "ready"):
        index = str(folder / ".replay-index")
        where: dict[str, str] = {"cwd": str(folder), "work_tree": str(folder / "tree")}
        if ws.kind == "copy":
            assert ws.meta is not None
            where["git_dir"] = str(Path(ws.meta) / "git")
        else:
            assert ws.repo is not None
            where["cwd"] = ws.repo
        await asyncio.to_thread((folder / "tree").mkdir)
        await git("read-tree", ws.base_commit, index=index, **where)
        await git("checkout-index", "-a", "-f", index=index, **where)
        root = folder / "tree" / ws.subdir if ws.subdir else folder / "tree"
        return root
    source = Path(state.workspace) if state.workspace else None
    target = folder / "tree"
    if source is not None and source.is_dir():
        await asyncio.to_thread(shutil.copytree, source, target, symlinks=True)
    else:
        await asyncio.to_thread(target.mkdir)
    return target


async def replay(state: RunState, tools: dict[str, Tool], *, to: int | None = None) -> Replay:
    """Replay ``state``'s tool calls against ``tools`` (the agent's as they are today)."""
    upto = len(state.messages)
    if to is not None:
        ws = state.run_workspace
        if ws is None or ws.stage not in ("made", "ready"):
            raise StateError(f"run {state.run_id} has no workspace of its own, so no checkpoints: --to needs one")
        upto = max(0, (await find(ws, state.run_id, to)).messages) if to else \
            next((i for i, m in enumerate(state.messages) if m.get("role") == "assistant"), upto)
    calls = _recorded_calls(state, upto)
    gone = sorted({str((c.get("function") or {}).get("name")) for c, _ in calls} - set(tools) - SKIPPED_TOOLS)
    if gone:
        raise StateError(f"run {state.run_id} called {', '.join(gone)}, which its agent has no more: there is "
                         "nothing to replay those against; restore the tool, then replay")
    rejected = {k for k, d in state.approvals.items() if d.verdict == "rejected"}
    out = Replay(state.run_id)
    with tempfile.TemporaryDirectory(prefix=f"tether-replay-{state.run_id[:40]}-") as tmp:
        folder = Path(tmp)
        root = await _scratch_from(state, folder)
        out.started_from = "its workspace's base" if state.run_workspace is not None else \
            "a copy of its agent's folder as it is now"
        ledger = Ledger(folder / "ledger.jsonl", fsync=False)
        signal = CancelSignal()
        for step, (call, recorded) in enumerate(calls, 1):
            fn = call.get("function") or {}
            name, call_id = str(fn.get("name")), str(call.get("id"))
            entry = ReplayedCall(step, call_id, name, "skipped", recorded or "")
            out.calls.append(entry)
            if recorded is None:
                entry.why = "it has no recorded result"
            elif call_id in rejected:
                entry.why = "it was rejected, never run"
            elif name in SKIPPED_TOOLS:
                entry.why = "it runs a subagent, which would ask a model"
            else:
                entry.now = await _run(tools[name], fn.get("arguments"), state, call_id, root, ledger, signal)
                same = recorded == entry.now or recorded.endswith(" " + entry.now)  # after an approval's words
                entry.outcome = "same" if same else "different"
    return out


async def _run(tool: Tool, raw: Any, state: RunState, call_id: str, root: Path, ledger: Ledger,
               signal: CancelSignal) -> str:
    try:
        args = json.loads(raw) if isinstance(raw, str) else (raw or {})
    except ValueError:
        return "the recorded arguments are not JSON"
    ctx = ToolContext(run_id=f"replay-{state.run_id}", call_id=call_id, signal=signal, progress=lambda _: None,
                      workspace=Workspace(root), ledger=ledger)
    try:
        text = await tool.run(args, ctx)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # as the loop words a failed call
        text = "Error" if state.policies.tool_errors == "generic" else f"Error: {str(exc) or type(exc).__name__}"
    if len(text) > MAX_TOOL_OUTPUT_CHARS:
        cut = len(text) - MAX_TOOL_OUTPUT_CHARS
        text = text[:MAX_TOOL_OUTPUT_CHARS] + f"\n[output truncated: {cut} more characters not shown]"
    return text

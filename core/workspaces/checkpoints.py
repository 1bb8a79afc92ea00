"""A checkpoint after every step that changed a run's workspace (docs/checkpoints.md).

A checkpoint is a git commit of the whole workspace, as it is on disk, on a private ref of
the run's: ``refs/tether/RUN_ID/N``, N counting from 1 (0 is the workspace's base). It is
made with an index of Tether's own (``GIT_INDEX_FILE``: ``META/checkpoint.index``), so the
user's index, HEAD and branch, and the worktree's own index the agent may use, are never
written:

    git add -A :/          (into the checkpoint index: untracked files in, ignored ones out)
    git write-tree         (the same tree as the last checkpoint's: no checkpoint)
    git commit-tree TREE -p LAST -m ...   and, at the same time, git diff-tree LAST_TREE TREE
    git update-ref refs/tether/RUN_ID/N COMMIT ""   (refused if N exists: never overwritten)

In a worktree the refs are in the user's repository (refs are shared by its worktrees; none
is a branch, so nothing shows in ``git branch``); in a copy, in Tether's own repository beside
it. The index keeps git's stat data from one checkpoint to the next, so only the files that
changed are read again. Every git command is an asyncio subprocess, and file work goes
through :func:`asyncio.to_thread`: nothing blocks the event loop.

A checkpoint's message is one line of JSON after its subject: the step, the call and tool that
made it, the transcript's length then (what a rewind cuts back to), the turn, and a label.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from tether.vocab import faultpoints
from tether.vocab.events import Event, RunWarning
from tether.vocab.state import RunState, RunWorkspace
from tether.workspaces.git import GitError, git
from tether.workspaces.make import place, private_index
from tether.vocab.state import StateError
from tether.workspaces.changes import _parse

REF_ROOT = "refs/tether/"
KINDS = ("worktree", "copy")
"""The workspaces checkpointed: a run's own (not a session's folder a run only records)."""
INDEX_FILE = "checkpoint.index"
log = logging.getLogger(__name__)


def ref_prefix(run_id: str) -> str:
    return f"{REF_ROOT}{run_id}/"


def ref_of(run_id: str, step: int) -> str:
    return f"{ref_prefix(run_id)}{step}"


@dataclass(slots=True, kw_only=True)
class CheckpointTaken(Event):
    """The run's workspace was checkpointed after a step that changed it (``files``: how many
    files the step changed; ``label``: why, when it was not a tool call, e.g. a rewind)."""

    kind: ClassVar[str] = "checkpoint"
    step: int
    commit: str
    files: int
    call_id: str | None = None
    tool: str | None = None
    label: str | None = None
    messages: int = 0


@dataclass(slots=True)
class Checkpoint:
    """One checkpoint, as :func:`listing` reads it back from git."""

    step: int
    commit: str
    tree: str
    at: float
    messages: int
    """The transcript's length when it was taken: a rewind to it cuts the transcript here."""
    call_id: str | None = None
    tool: str | None = None
    label: str | None = None
    turn: int = 0
    files: list[dict[str, Any]] = field(default_factory=list)
    """What the step changed against the checkpoint before: ``path``, ``added``, ``deleted``
    (None for a binary file), ``status``."""
    parent: str = ""
    """The commit before it (the checkpoint before, or the base)."""

    def to_dict(self) -> dict[str, Any]:
        return {"step": self.step, "commit": self.commit, "tree": self.tree, "at": self.at,
                "messages": self.messages, "call_id": self.call_id, "tool": self.tool, "label": self.label,
                "turn": self.turn, "files": self.files}


def _index(ws: RunWorkspace) -> Path:
    assert ws.meta is not None
    return Path(ws.meta) / INDEX_FILE


def _seed(ws: RunWorkspace) -> None:
    """The checkpoint index starts as a copy of the private index the workspace was read with
    (git's stat data for every file), so the first checkpoint does not hash every file."""
    own, kept = _index(ws), private_index(ws)
    if not own.exists() and kept.exists():
        own.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(kept, own)  # its time kept: entries as new as it stay "racily clean", checked by content


async def _steps(ws: RunWorkspace, run_id: str) -> dict[int, str]:
    """The run's checkpoints in git: step -> commit."""
    out = await git("for-each-ref", "--format=%(refname) %(objectname)", ref_prefix(run_id), **place(ws))
    found: dict[int, str] = {}
    for line in out.splitlines():
        ref, _, commit = line.partition(" ")
        tail = ref[len(ref_prefix(run_id)):]
        if tail.isdigit():
            found[int(tail)] = commit
    return found


class Checkpointer:
    """Takes a run's checkpoints, one after another (one process holds a run at a time)."""

    def __init__(self, ws: RunWorkspace, run_id: str) -> None:
        self.ws, self.run_id = ws, run_id
        self._last: tuple[int, str, str] | None = None  # step, commit, tree

    async def last(self) -> tuple[int, str, str]:
        """The last checkpoint (step 0: the base), read from git once."""
        if self._last is None:
            steps = await _steps(self.ws, self.run_id)
            step = max(steps, default=0)
            commit = steps.get(step) or str(self.ws.base_commit)
            tree = (await git("rev-parse", f"{commit}^{{tree}}", **place(self.ws))).strip()
            self._last = (step, commit, tree)
        return self._last

    async def take(self, state: RunState, *, call_id: str | None = None, tool: str | None = None,
                   label: str | None = None, always: bool = False) -> CheckpointTaken | None:
        """Checkpoint the workspace as it is now; None when nothing changed since the last one
        (``always``: a checkpoint even then, e.g. the present state before a rewind)."""
        ws, where = self.ws, place(self.ws)
        await asyncio.to_thread(_seed, ws)
        index = str(_index(ws))
        await git("add", "-A", *(("--force",) if ws.ignored else ()), "--", ":/", index=index, **where)
        tree = (await git("write-tree", index=index, **where)).strip()
        step, parent, last_tree = await self.last()
        if tree == last_tree and not always:
            return None
        step += 1
        body = {"step": step, "call_id": call_id, "tool": tool, "label": label, "messages": len(state.messages),
                "turn": state.turns, "at": time.time()}
        message = f"tether checkpoint {step} of {self.run_id}\n\n{json.dumps(body, separators=(',', ':'))}\n"
        made, changed = await asyncio.gather(
            git("commit-tree", tree, "-p", parent, "-m", message, identity=True, **where),
            git("diff-tree", "-r", "--no-renames", "--name-only", "-z", last_tree, tree, **where))
        commit = made.strip()
        faultpoints.boundary("checkpoint_committed")  # a crash here: an unreferenced commit, no checkpoint
        await git("update-ref", ref_of(self.run_id, step), commit, "", **where)
        self._last = (step, commit, tree)
        return CheckpointTaken(run_id=self.run_id, step=step, commit=commit, call_id=call_id, tool=tool,
                               label=label, files=len([p for p in changed.split("\0") if p]),
                               messages=len(state.messages))


AfterChange = Callable[[RunState, str, str], Awaitable[Event | None]]


def after_change_hook() -> AfterChange:
    """The loop's hook (:attr:`tether.run.loop.LoopEnv.after_change`): after a call of a tool
    that is not read-only, a checkpoint of the run's own workspace, when it has one that is
    ready. A checkpoint that fails is a warning in the trace, never the run's end."""
    takers: dict[str, Checkpointer] = {}
    one_at_a_time = asyncio.Lock()  # an ACP agent's calls may end together: their checkpoints in turn

    async def after_change(state: RunState, call_id: str, tool: str) -> Event | None:
        """``call_id`` empty: not after a call (the end of a turn, a program's own), ``tool`` its label."""
        ws = state.run_workspace
        if ws is None or ws.kind not in KINDS or ws.stage != "ready" or ws.base_commit is None:
            return None
        taker = takers.get(state.run_id)
        if taker is None or taker.ws is not ws:
            taker = takers[state.run_id] = Checkpointer(ws, state.run_id)
        try:
            async with one_at_a_time:
                if not call_id:
                    return await taker.take(state, label=tool)
                return await taker.take(state, call_id=call_id, tool=tool)
        except (GitError, OSError) as exc:
            log.warning("checkpoint of run %s failed: %s", state.run_id, exc)
            return RunWarning(run_id=state.run_id, text=f"no checkpoint after {tool} ({call_id or 'its turn'}): "
                              f"{exc}", call_id=call_id or None)

    return after_change


async def listing(ws: RunWorkspace, run_id: str, *, files: bool = True) -> list[Checkpoint]:
    """The run's checkpoints, oldest first, with what each step changed (``files``)."""
    where = place(ws)
    fmt = "%(refname)%00%(objectname)%00%(tree)%00%(parent)%00%(committerdate:unix)%00%(contents:body)%00%00"
    out = await git("for-each-ref", f"--format={fmt}", ref_prefix(run_id), **where)
    found: list[tuple[Checkpoint, str]] = []
    for record in out.split("\0\0"):
        parts = record.strip("\n").split("\0")
        if len(parts) < 6 or not parts[0].startswith(ref_prefix(run_id)):
            continue
        ref, commit, tree, parent, at, body = parts[:6]
        tail = ref[len(ref_prefix(run_id)):]
        if not tail.isdigit():
            continue
        try:
            meta = json.loads(body.strip() or "{}")
        except ValueError:
            meta = {}
        found.append((Checkpoint(int(tail), commit, tree, float(meta.get("at") or at or 0), int(meta.get("messages") or 0),
                                 meta.get("call_id"), meta.get("tool"), meta.get("label"), int(meta.get("turn") or 0)),
                      parent.split(" ")[0]))
    found.sort(key=lambda pair: pair[0].step)
    for cp, parent in found:
        cp.parent = parent
    if files:
        counted = await asyncio.gather(*(_numstat(ws, parent, cp.commit) for cp, parent in found))
        for (cp, _), stat in zip(found, counted):
            cp.files = stat
    return [cp for cp, _ in found]


async def step_diff(ws: RunWorkspace, cp: Checkpoint, path: str) -> str:
    """The unified diff of ``path`` made by the step checkpoint ``cp`` closed."""
    if not cp.parent:
        return ""
    return await git("diff-tree", "-p", "--no-renames", "--no-ext-diff", "--no-color", cp.parent, cp.commit, "--",
                     f":(top,literal){path}", **place(ws))


async def _numstat(ws: RunWorkspace, parent: str, commit: str) -> list[dict[str, Any]]:
    if not parent:
        return []
    out = await git("diff-tree", "-r", "--no-renames", "--raw", "--numstat", "-z", parent, commit, **place(ws))

    return [f.to_dict() for f in _parse(out)]


async def find(ws: RunWorkspace, run_id: str, step: int) -> Checkpoint:
    """Checkpoint ``step`` of the run (0: the base), or a StateError in words."""
    if step == 0:
        assert ws.base_commit is not None
        tree = (await git("rev-parse", f"{ws.base_commit}^{{tree}}", **place(ws))).strip()
        return Checkpoint(0, ws.base_commit, tree, ws.made_at or 0.0, -1, label="the workspace as it was made")
    for cp in await listing(ws, run_id, files=False):
        if cp.step == step:
            return cp
    raise StateError(f"run {run_id} has no checkpoint {step}: tether checkpoints {run_id} lists them")

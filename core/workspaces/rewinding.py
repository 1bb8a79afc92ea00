"""Rewind a run to one of its checkpoints, and undo a rewind (docs/checkpoints.md).

A rewind restores the run's workspace to checkpoint N and cuts its transcript back to the
length it had then. It first takes a checkpoint of the present state (``before``), so an undo
brings back everything, whatever the agent or its shell did. An undo is a rewind too: back to
the ``before`` of the last one, with the messages that one cut put back; so it can be undone
in its turn. The cut messages stay in the record: the trace's ``rewound`` line carries them
(``tether show --all`` shows them). Decisions, rules and costs are never taken back.

Crash safety, as the workspaces' own steps (:mod:`tether.workspaces.lifecycle`): the rewind is
recorded in the run's state (``rewinds``, stage ``recorded``) with everything it needs (the
tree to restore, where the transcript is cut, the ``before`` checkpoint) and saved, with its
trace line, before anything is touched (boundary ``rewind_recorded``); the files are restored
(boundary ``rewind_restored``); then the transcript is cut and the record marked ``restored``,
in one save. Each step can be done again, so :func:`finish` (called by the next command on the
run) completes a rewind a crash cut short: the workspace is never left between the two.

Files are restored with the checkpoint index: ``git add -A`` (the index is the disk), then
``git read-tree -u --reset TREE``, which writes the files that differ and removes those the
tree lacks. Ignored files are left alone; the branch's commits (a worktree's HEAD) and the
worktree's own index are not moved.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from tether.store.protocol import Store
from tether.vocab import faultpoints
from tether.vocab.events import Event
from tether.vocab.state import Cancelled, RunState, StateError, Status, interruption_from_dict
from tether.workspaces.checkpoints import Checkpointer, _index, _numstat, find
from tether.workspaces.git import git
from tether.workspaces.lifecycle import note_changes
from tether.workspaces.make import place
from tether.store.hold import open_run, release
from tether.store.protocol import call
import asyncio


@dataclass(slots=True, kw_only=True)
class Rewound(Event):
    """A rewind (or an undo, ``undoes`` the rewind it takes back) was recorded: ``cut`` holds
    the messages it takes out of the transcript, kept here for ``tether show --all`` and for
    its own undo."""

    kind: ClassVar[str] = "rewound"
    rewind: int
    to: int | None
    undoes: int | None = None
    before: int = 0
    """The checkpoint of the state before it."""
    cut_at: int = 0
    cut: list[dict[str, Any]]
    by: str = ""


Save = Callable[[], Awaitable[None]]
Rewrite = Callable[[int], Awaitable[None]]
Records = Callable[[], Iterable[dict[str, Any]]]


def _workspace(state: RunState) -> Any:
    ws = state.run_workspace
    if ws is None or ws.kind not in ("worktree", "copy") or ws.stage != "ready" or ws.base_commit is None:
        raise StateError(f"run {state.run_id} has no workspace of its own that is ready, so it has no checkpoints "
                         "to go back to (isolation = \"worktree\" or \"copy\" gives it one)")
    return ws


def _first_reply(state: RunState) -> int:
    """Where the transcript is cut for checkpoint 0: before the first reply of the model."""
    return next((i for i, m in enumerate(state.messages) if m.get("role") == "assistant"), len(state.messages))


async def rewind(state: RunState, emit: Callable[[Event], None], save: Save, rewrite: Rewrite, *,
                 to: int, by: str) -> str:
    """Take the run back to checkpoint ``to``; its words. ``emit`` traces an event, ``save``
    saves the state, ``rewrite(start)`` saves it with its transcript changed from ``start``."""
    ws = _workspace(state)
    target = await find(ws, state.run_id, to)
    taker = Checkpointer(ws, state.run_id)
    before = await taker.take(state, label=f"before the rewind to {to}", always=True)
    assert before is not None
    emit(before)
    cut_at = len(state.messages) if state.of_acp_agent else (_first_reply(state) if to == 0 else target.messages)
    cut_at = min(cut_at, len(state.messages))
    # An ACP agent is told which files went back (its session keeps what it did): present -> N.
    files = await _numstat(ws, before.commit, target.commit) if state.of_acp_agent else []
    return await _apply(state, emit, save, rewrite, kind="rewind", to=to, undoes=None, tree=target.tree,
                        before=before.step, cut_at=cut_at, restore=[], by=by,
                        files=[{"path": f["path"], "status": f["status"]} for f in files])


async def undo(state: RunState, emit: Callable[[Event], None], save: Save, rewrite: Rewrite, records: Records, *,
               by: str) -> str:
    """Take the last rewind (or undo) back: files and transcript as they were before it."""
    ws = _workspace(state)
    if not state.rewinds:
        raise StateError(f"run {state.run_id} was never rewound: there is nothing to undo")
    last = state.rewinds[-1]
    earlier = next((r for r in records() if r.get("kind") == Rewound.kind and r.get("rewind") == last["id"]), None)
    if earlier is None:
        raise StateError(f"run {state.run_id}: the trace has no record of rewind {last['id']}'s cut messages, "
                         "so it cannot be undone")
    target = await find(ws, state.run_id, int(last["before"]))
    taker = Checkpointer(ws, state.run_id)
    before = await taker.take(state, label=f"before the undo of rewind {last['id']}", always=True)
    assert before is not None
    emit(before)
    cut_at = min(int(last["cut_at"]), len(state.messages))
    return await _apply(state, emit, save, rewrite, kind="undo", to=target.step, undoes=int(last["id"]),
                        tree=target.tree, before=before.step, cut_at=cut_at, restore=list(earlier.get("cut") or ()),
                        by=by, status=last.get("status"), interruption=last.get("interruption"))


async def _apply(state: RunState, emit: Callable[[Event], None], save: Save, rewrite: Rewrite, *, kind: str,
                 to: int, undoes: int | None, tree: str, before: int, cut_at: int, restore: list[dict[str, Any]],
                 by: str, status: str | None = None, interruption: dict[str, Any] | None = None,
                 files: list[dict[str, Any]] | None = None) -> str:
    number = len(state.rewinds) + 1
    record = {"files": files or [], "id": number, "kind": kind, "to": to, "undoes": undoes, "tree": tree, "before": before,
              "cut_at": cut_at, "restore": len(restore), "at": time.time(), "by": by, "stage": "recorded",
              "status": state.status.value, "interruption": None if state.interruption is None
              else state.interruption.to_dict(), "status_after": status, "interruption_after": interruption,
              "cut": len(state.messages) - cut_at}
    emit(Rewound(run_id=state.run_id, rewind=number, to=to, undoes=undoes, before=before, cut_at=cut_at,
                 cut=state.messages[cut_at:], by=by))
    state.rewinds.append(record)
    await save()
    faultpoints.boundary("rewind_recorded")
    return await _restore(state, rewrite, record, restore)


async def _restore(state: RunState, rewrite: Rewrite, record: dict[str, Any], restore: list[dict[str, Any]]) -> str:
    ws = _workspace(state)
    where, index = place(ws), str(_index(ws))
    await git("add", "-A", *(("--force",) if ws.ignored else ()), "--", ":/", index=index, **where)
    await git("read-tree", "-u", "--reset", record["tree"], index=index, **where)
    faultpoints.boundary("rewind_restored")
    cut_at = int(record["cut_at"])
    state.messages[cut_at:] = restore
    if state.of_acp_agent and record["kind"] == "rewind":  # its session cannot be cut: it is told, with the next prompt
        state.messages.append({"role": "user", "tether": "rewind", "content": rewind_note(record)})
    if record["kind"] == "undo" and record.get("status_after"):
        state.status = Status(record["status_after"])
        state.interruption = interruption_from_dict(record.get("interruption_after"))
    else:
        reason = f"rewound to checkpoint {record['to']}: tether resume {state.run_id} goes on from there"
        state.status, state.interruption, state.error = Status.INTERRUPTED, Cancelled(reason, record["by"] or None), None
    record["stage"] = "restored"
    await rewrite(cut_at)
    if record["kind"] == "undo":
        return (f"run {state.run_id}: rewind {record['undoes']} undone (rewind {record['id']}): the workspace is as "
                f"checkpoint {record['to']} kept it, the transcript has {len(state.messages)} messages again; "
                f"tether rewind {state.run_id} --undo takes this back too")
    cut = (f"its transcript cut from {cut_at + int(record['cut'])} to {cut_at} messages" if record["cut"] else
           "its transcript as it was" + (" (an ACP agent's session cannot be cut)" if state.of_acp_agent else ""))
    return (f"run {state.run_id} rewound to checkpoint {record['to']} (rewind {record['id']}): its workspace is "
            f"restored, {cut} "
            f"(the present was kept as checkpoint {record['before']}); tether rewind {state.run_id} --undo takes it back")


NOTE_FILES = 40
"""At most this many files are named in an ACP agent's rewind note; the rest are counted."""


def rewind_note(record: dict[str, Any]) -> str:
    """What an ACP agent is told with its next prompt after a rewind: the step, and which files
    went back to it (restored, brought back, or removed), as the rewind's record keeps them."""
    n = record["to"]
    how = {"changed": f"restored to checkpoint {n}", "added": f"brought back as at checkpoint {n}",
           "deleted": f"removed: it did not exist at checkpoint {n}"}
    files = list(record.get("files") or ())
    named = [f"- {f['path']} ({how.get(f['status'], how['changed'])})" for f in files[:NOTE_FILES]]
    if len(files) > NOTE_FILES:
        named.append(f"- and {len(files) - NOTE_FILES} more files")
    listed = ("\nThe files it restored:\n" + "\n".join(named)) if named else (
        "\nNo file differed from that checkpoint.")
    return (f"(Tether restored the files of your workspace to checkpoint {n}: every change made after it, by you "
            f"or a command, is undone there.{listed}\nRead the files again before you rely on them.)")


async def finish(state: RunState, rewrite: Rewrite, records: Records) -> str | None:
    """Complete a rewind a crash cut short (stage ``recorded``); its words, or None."""
    if not state.rewinds or state.rewinds[-1].get("stage") != "recorded":
        return None
    record = state.rewinds[-1]
    restore: list[dict[str, Any]] = []
    if record["kind"] == "undo":
        earlier = next((r for r in records() if r.get("kind") == Rewound.kind
                        and r.get("rewind") == record["undoes"]), None)
        restore = list((earlier or {}).get("cut") or ())
    words = await _restore(state, rewrite, record, restore)
    return f"a rewind cut short was finished: {words}"


async def rewind_run(store: Store, run_id: str, *, to: int | None, by: str) -> tuple[RunState, list[str]]:
    """``tether rewind`` on a store: the run opened (a run a process holds is refused in words,
    nothing changed), a rewind cut short finished first, then rewound to ``to`` (None: the
    last rewind undone). The run as left, and the words of what was done."""


    holder = await call(store, store.owner, run_id)
    if holder is not None and holder.alive:
        raise StateError(f"run {run_id} is running ({holder.where}): stop it first (tether stop {run_id}), "
                         "then rewind it; nothing was changed")
    read = await call(store, lambda: list(store.read_trace(run_id)))
    try:
        state, handle = await open_run(store, run_id)
    except StateError as exc:  # taken by another process since
        raise StateError(f"{exc}; stop it first (tether stop {run_id}); nothing was changed") from None
    trace = handle.trace()
    said: list[str] = []

    async def save() -> None:
        await handle.asave(state)

    async def rewrite(start: int) -> None:
        await asyncio.to_thread(handle.rewrite, state, start)  # type: ignore[attr-defined]

    try:
        finished = await finish(state, rewrite, lambda: read)
        if finished is not None:
            said.append(finished)
        if to is None:
            said.append(await undo(state, trace.write, save, rewrite, lambda: read, by=by))
        else:
            said.append(await rewind(state, trace.write, save, rewrite, to=to, by=by))
        await note_changes(state, save)  # tether runs' +/- counts, as the files are now
    finally:
        trace.close()
        await release(handle)
    return state, said

"""The workspace of a program's run (:meth:`tether.Harness.track` with ``workspace=`` and
``isolation=``): made as an agent run's is, given to the program as ``run.workspace``.

``isolation="worktree"`` or ``"copy"`` gives the run a workspace of its own, made from
``workspace`` under the harness's workspaces folder (and its ``setup`` run) before the block
runs; a reporter that attaches to the run later (a hook process) finds the same one. With no
isolation, ``run.workspace`` is ``workspace`` itself. What the run changed is noted when the
block ends, for ``tether runs``; ``tether diff`` and the Changes pane read it as for any run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from tether.agents.agent import ISOLATIONS
from tether.agents.workspace import find_repo
from tether.vocab.events import WorkspaceReady
from tether.vocab.state import RunWorkspace
from tether.workspaces import lifecycle
from tether.workspaces.changes import snapshot
from tether.workspaces.git import GitError
from tether.workspaces.checkpoints import after_change_hook

if TYPE_CHECKING:
    from tether.run.tracked import TrackedRun

log = logging.getLogger(__name__)


def plan(workspace: Path | str | None, isolation: str | None, *, base: str | None = None,
         setup: Sequence[str] = ()) -> RunWorkspace | None:
    """The workspace a program's run about to be made gets, or None; ValueError in words
    before any run is made when it cannot have one."""
    kind = isolation or "none"
    if kind not in ISOLATIONS:
        raise ValueError(f"isolation is one of {', '.join(ISOLATIONS)}; not {isolation!r}")
    if (base is not None or setup) and kind == "none":
        raise ValueError("base and setup apply to a run's own workspace: add isolation=\"worktree\" (or \"copy\")")
    if kind == "none":
        return None
    if workspace is None:
        raise ValueError(f"isolation={kind!r} needs the folder the run gets its own {kind} of: workspace=")
    folder = Path(workspace).expanduser()
    if not folder.is_dir():
        raise ValueError(f"workspace={str(workspace)!r} is not a folder")
    if kind == "worktree" and find_repo(folder) is None:
        raise ValueError(f"a worktree needs a git repository, and {folder} is not in one: use isolation=\"copy\", "
                         "or make it a repository (git init)")
    return RunWorkspace(kind=kind, source=str(folder.resolve()), base=(base or "HEAD") if kind == "worktree" else "",
                        setup=list(setup))


@contextlib.asynccontextmanager
async def given(run: TrackedRun, planned: RunWorkspace | None, workspace: Path | str | None,
                workspaces_dir: Path) -> AsyncIterator[None]:
    """Make (or find again) the run's workspace and set ``run.workspace``; what the run
    changed there is kept in its state as the block ends (for ``tether runs``). A run made now
    takes ``planned``; an attached one keeps the workspace it had. A workspace that cannot be
    made or set up raises :class:`lifecycle.WorkspaceError` (the run fails in its words); a
    Stop during the setup, :class:`tether.vocab.cancel.RunCancelled`."""
    state = run.state
    if state.run_workspace is None and planned is not None:
        state.run_workspace = planned
        state.workspace = planned.source
    if state.run_workspace is None:
        if workspace is not None:
            state.workspace = str(Path(workspace).expanduser())
        run.workspace = Path(state.workspace) if state.workspace else None
        yield
        return
    root = lifecycle.locate(state, workspaces_dir)
    if state.run_workspace.kind == "none":  # a session's own folder, recorded: nothing to make or check
        run.workspace = Path(str(root))
        yield
        return
    lifecycle.usable(state)
    await lifecycle.prepare(state, emit=run.driver.emit, save=run.driver.save, signal=run.signal)
    run.workspace = Path(str(root))

    run.driver.after_change = after_change_hook()  # run.checkpoint(label)
    try:
        yield
    except asyncio.CancelledError:
        raise
    except BaseException:
        await lifecycle.note_changes(state, run.driver.save)
        raise
    await lifecycle.note_changes(state, run.driver.save)


async def record_folder(run: TrackedRun, folder: str | Path | None, workspaces_dir: Path) -> None:
    """Record the folder a session works in (Claude Code's ``cwd``) as the run's workspace of
    kind ``none``: nothing is made or removed, but ``tether diff``, ``tether runs`` and the
    Changes pane read what the session changed in the git repository the folder is in,
    against the files as they were now (staged into Tether's private index, not the user's).
    A folder in no repository is recorded nowhere (there is nothing to diff against)."""
    state = run.state
    if folder is None or state.run_workspace is not None or not Path(folder).is_dir():
        return
    top = find_repo(folder)
    if top is None:
        return
    inside = os.path.relpath(os.path.realpath(folder), top)
    meta = Path(os.path.realpath(workspaces_dir)) / lifecycle.META_DIR / state.run_id
    ws = RunWorkspace(kind="none", source=str(folder), base="", stage="ready", path=str(top), meta=str(meta),
                      repo=str(top), subdir="" if inside == "." else Path(inside).as_posix(),
                      host=lifecycle.this_host(), made_at=time.time())
    try:
        ws.base_commit = await snapshot(ws)
    except (GitError, OSError) as exc:
        log.warning("run %s: the files of %s could not be read: %s", state.run_id, folder, exc)
        return
    ws.changes = {"files": 0, "added": 0, "deleted": 0, "at": ws.made_at}
    state.run_workspace = ws
    state.workspace = str(folder)
    run.workspace = Path(str(ws.root))
    run.driver.emit(WorkspaceReady(run_id=state.run_id, workspace_kind="none", path=str(top), base=ws.base_commit,
                             made=False, branch=None, host=ws.host or ""))
    await run.driver.save()


async def note(run: TrackedRun) -> None:
    """What the run changed so far, kept in its state (for ``tether runs``)."""
    await lifecycle.note_changes(run.state, run.driver.save)

"""A run's workspace through the run's life: planned when the run is made, made and set up
when it first starts, found again by every later operation, its changes noted when each
operation ends, and discarded on request.

Each step that touches the disk is preceded by a save of the run that says what is about to
happen (:attr:`tether.vocab.state.RunWorkspace.stage`), and each is safe to do again
(:mod:`tether.workspaces.make`). So a crash at any point leaves a run that the next command
finishes: ``creating`` is made again from scratch by the next operation (no agent has worked in
it yet), ``made`` runs its setup again, ``discarding`` is finished by the next ``tether discard``,
and every other command says so in words instead of using a half-made workspace.

The harness calls these for Tether's own loop; an ACP agent's session, a worker and the run
API can use the same calls with the run's state.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from tether.agents.agent import Agent, AgentError
from tether.agents.workspace import find_repo
from tether.vocab import faultpoints
from tether.vocab.cancel import CancelSignal, RunCancelled
from tether.run.loop import RunLoop
from tether.vocab.events import WorkspaceDiscarded, WorkspaceReady, WorkspaceSetup
from tether.vocab.state import RunState, RunWorkspace, StateError
from tether.workspaces import make
from tether.workspaces.changes import changes
from tether.workspaces.git import BRANCH_PREFIX, GitError, branch_exists, repo_and_commit
from tether.workspaces.setup import run_setup

log = logging.getLogger(__name__)
META_DIR = ".tether"
"""Under the workspaces folder: each run's side folder (its private index, a copy's base)."""
LIVE_STAGES = frozenset({"made", "ready"})


class WorkspaceError(Exception):
    """The run's workspace could not be made or set up: the run ends failed, in these words."""


def this_host() -> str:
    return socket.gethostname()


def plan_for(agent: Agent, isolation: str | None = None) -> RunWorkspace | None:
    """The workspace a run of ``agent`` about to be made gets (``isolation``: ``worktree``, ``copy``
    or ``none`` instead of the agent's own), or None; :class:`AgentError` in words when it cannot
    have one. Nothing is touched on the disk until the run starts."""
    chosen = agent.isolation if isolation is None else replace(agent.isolation, kind=isolation)  # checked again
    if chosen.kind == "none":
        return None
    if agent.workspace is None:
        raise AgentError(f"agent {agent.name} has no folder to give each run its own {chosen.kind} of: give it a "
                         "workspace")
    if chosen.kind == "worktree" and find_repo(agent.workspace) is None:
        raise AgentError(f"a worktree needs a git repository, and agent {agent.name}'s folder {agent.workspace} is "
                         "not in one: use copy, or make it a repository (git init)")
    return RunWorkspace(kind=chosen.kind, source=str(agent.workspace),
                        base=(chosen.base or "HEAD") if chosen.kind == "worktree" else "",
                        setup=list(chosen.setup), checks=list(chosen.checks), ignored=chosen.ignored)


def locate(state: RunState, workspaces_dir: Path) -> str | None:
    """The folder the run's agent works in (its tools' root): decided here the first time, from
    the run's id, as ``WORKSPACES/RUN_ID``; None for a run without a workspace of its own."""
    ws = state.run_workspace
    if ws is None:
        return None
    if ws.path is None:
        root = Path(os.path.realpath(workspaces_dir))
        ws.path = str(root / state.run_id)
        ws.meta = str(root / META_DIR / state.run_id)
        if ws.kind == "worktree":
            ws.branch = BRANCH_PREFIX + state.run_id
            top = find_repo(ws.source)  # git says the same when the workspace is made (_decide)
            if top is not None:
                ws.repo = str(top)
                inside = os.path.relpath(os.path.realpath(ws.source), top)
                ws.subdir = "" if inside == "." else Path(inside).as_posix()
    return ws.root


def usable(state: RunState, host: str | None = None) -> None:
    """Refuse, in words and before anything is used up or shown, a run whose workspace is on
    another host, being discarded, discarded, or gone."""
    ws = state.run_workspace
    if ws is None:
        return
    host = host or this_host()
    run_id = state.run_id
    if ws.host is not None and ws.host != host:
        raise StateError(f"run {run_id} works in {ws.path} on the host {ws.host} (this is {host}): use it there")
    if ws.stage == "discarding":
        raise StateError(f"run {run_id}: the discard of its workspace was cut short; tether discard {run_id} "
                         "finishes it")
    if ws.stage == "discarded":
        raise StateError(f"run {run_id}: its workspace was discarded (tether discard), so there is nothing of it "
                         "to go on with or to show; its transcript stays")
    if ws.stage in LIVE_STAGES and ws.path is not None and not os.path.isdir(ws.path):
        raise StateError(f"run {run_id}: its workspace {ws.path} is gone (removed outside Tether); tether "
                         f"discard {run_id} forgets it")


Emit = Callable[[Any], None]
Save = Callable[[], Awaitable[None]]


async def prepare(state: RunState, *, emit: Emit, save: Save, signal: CancelSignal) -> None:
    """Make the run's workspace if it is not made yet, run its setup if that has not passed, and
    say in the trace where the run works. :class:`WorkspaceError` in words when it cannot be
    made or its setup fails (the workspace is then kept, for a look); a Stop during the setup
    raises :class:`tether.vocab.cancel.RunCancelled` (the setup runs again on resume)."""
    ws = state.run_workspace
    assert ws is not None and ws.path is not None, "locate() the workspace first"
    made = fresh = False
    try:
        if ws.stage == "planned":
            await _decide(state, ws)
            ws.stage, ws.host, fresh = "creating", this_host(), True
            await save()  # the intent, before the disk is touched
            faultpoints.boundary("workspace_creating")
        if ws.stage == "creating":
            await make.create(ws, fresh=fresh)
            faultpoints.boundary("workspace_made")
            ws.stage, ws.made_at, made = "made", time.time(), True
            ws.changes = {"files": 0, "added": 0, "deleted": 0, "at": ws.made_at}
            await save()
    except GitError as exc:
        raise WorkspaceError(f"the run's workspace could not be made: {exc}") from None
    except OSError as exc:
        raise WorkspaceError(f"the run's workspace could not be made at {ws.path}: {exc.strerror or exc}") from None
    emit(WorkspaceReady(run_id=state.run_id, workspace_kind=ws.kind, path=ws.path, base=ws.base_commit or "",
                        made=made, branch=ws.branch, host=ws.host or ""))
    if ws.stage == "made":
        env = {"TETHER_RUN_ID": state.run_id, "TETHER_WORKSPACE": ws.root or ws.path}
        for command in ws.setup:
            result = await run_setup(command, ws.root or ws.path, signal_=signal, env=env)
            emit(WorkspaceSetup(run_id=state.run_id, command=command, exit_code=result.exit_code,
                                output=result.output, ms=round(result.ms, 1)))
            if not result.ok:
                ws.setup_failed = result.words()
                await save()
                raise WorkspaceError(f"{ws.setup_failed}. The workspace is kept at {ws.path} for a look: tether "
                                     f"resume {state.run_id} --message TEXT runs the setup again and goes on; "
                                     f"tether discard {state.run_id} removes it")
        ws.stage, ws.setup_failed = "ready", None
        await save()


async def begin(state: RunState, loop: RunLoop, signal: CancelSignal) -> RunState | None:
    """:func:`prepare` for Tether's own loop: the run's end when it has no workspace to work in
    (failed, in words; or interrupted by a Stop during its setup, which runs again on resume),
    else None, and the loop goes on."""
    if state.run_workspace is None:
        return None
    try:
        await prepare(state, emit=loop.emit, save=loop.save, signal=signal)
    except WorkspaceError as exc:
        return await loop.fail(str(exc))
    except RunCancelled as exc:
        return await loop.stop_before_start(exc)
    return None


async def _decide(state: RunState, ws: RunWorkspace) -> None:
    """Where the workspace comes from, checked before anything is made: the repository, the
    agent's folder in it and the base commit (a worktree), or the folder (a copy)."""
    assert ws.path is not None
    source = Path(ws.source)
    if not source.is_dir():
        raise WorkspaceError(f"the agent's folder {source} is not a folder any more")
    if os.path.lexists(ws.path):
        raise WorkspaceError(f"{ws.path} is there already and is not this run's: move it away, then resume the run")
    if ws.kind == "copy":
        if Path(ws.path).is_relative_to(os.path.realpath(source)):
            raise WorkspaceError(f"the agent's folder {source} holds Tether's workspaces ({Path(ws.path).parent}): "
                                 "a copy of it would copy itself; set TETHER_HOME elsewhere")
        return
    assert ws.branch is not None
    try:
        repo, ws.base_commit = await repo_and_commit(source, ws.base)
    except GitError as exc:
        raise WorkspaceError(f"the run's workspace could not be made: {exc}") from None
    if ws.repo is None or os.path.realpath(repo) != os.path.realpath(ws.repo):
        raise WorkspaceError(f"git finds the repository of {source} at {repo}, not at {ws.repo} where its .git "
                             "is: Tether cannot tell which to make the worktree of")
    if await branch_exists(repo, ws.branch) is not None:
        raise WorkspaceError(f"the branch {ws.branch} is there already in {repo} and is not this run's: rename or "
                             "remove it, then resume the run")


async def note_changes(state: RunState, save: Save) -> None:
    """Keep what the run has changed so far in its state (:attr:`RunWorkspace.changes`), for a
    listing to show without running git. A failure to read them is logged, never the run's."""
    ws = state.run_workspace
    if ws is None or ws.stage not in LIVE_STAGES:
        return
    try:
        found = await changes(ws)
    except (GitError, OSError) as exc:
        log.warning("run %s: its changes could not be read: %s", state.run_id, exc)
        return
    ws.changes = {**found.counts(), "at": time.time()}
    await save()


async def discard(state: RunState, *, save: Save, trace: Emit, by: str = "") -> str:
    """Remove the run's workspace and its branch; the run and its transcript stay. Words that
    say what was removed. The caller holds the run (a live run cannot be discarded)."""
    ws = state.run_workspace
    if ws is None:
        raise StateError(f"run {state.run_id} has no workspace of its own: its agent works in its folder")
    if ws.stage == "discarded":
        return f"run {state.run_id}: its workspace was discarded already"
    if ws.kind == "none":
        raise StateError(f"run {state.run_id} worked in its session's own folder {ws.root}: Tether made nothing "
                         "there, so it removes nothing")
    host = this_host()
    if ws.host is not None and ws.host != host:
        raise StateError(f"run {state.run_id} works in {ws.path} on the host {ws.host}: discard it there "
                         f"(this is {host})")
    if ws.stage == "planned":  # never started: nothing was made
        ws.stage = "discarded"
        await save()
        return f"run {state.run_id}: its workspace had not been made (the run never started); nothing to remove"
    ws.stage = "discarding"
    await save()  # the intent, before anything is removed
    faultpoints.boundary("workspace_discarding")
    try:
        await make.remove(ws)
    except GitError as exc:
        raise StateError(f"run {state.run_id}: its workspace could not be removed ({exc}); tether discard "
                         f"{state.run_id} tries again") from None
    faultpoints.boundary("workspace_removed")
    ws.stage, ws.changes = "discarded", None
    trace(WorkspaceDiscarded(run_id=state.run_id, path=ws.path or "", branch=ws.branch, by=by))
    await save()
    what = f"{ws.path}" + (f" and the branch {ws.branch}" if ws.branch else "")
    return f"run {state.run_id}: removed {what}; its transcript stays"

"""Fork a run from one of its checkpoints (docs/checkpoints.md#fork-a-run-from-a-checkpoint).

The new run has the first messages of the old one's transcript (as long as it was at
checkpoint N: exact, so a resume sends the model that prefix), and a workspace of its own
that starts at checkpoint N. It records ``forked_from`` (the run, the step, the commit). It
is made ``interrupted``, so ``tether resume NEW [--message TEXT]`` goes on from there.

Its workspace is made when it first runs, as any run's (:mod:`tether.workspaces.lifecycle`):

* **worktree**: from the checkpoint's commit, which is in the same repository (its ``base``
  is that commit, so ``tether diff NEW`` shows what the fork did after N);
* **copy**: the checkpoint is in the old run's own repository, so its files are written out
  now into a folder of Tether's (``WORKSPACES/.tether/forks/NEW``), which the new run's copy
  is made from.

An ACP agent's run: its session cannot be cut, so the fork is a new run of the same agent whose
first prompt says in words what was done up to N (:mod:`tether.workspaces.fork_note`); its
first ``tether resume`` starts a new session in the fork's workspace. At the run's last checkpoint
(the conversation then is the one at N) ``session`` (the origin's agent session) is kept in
``forked_from``, and an agent that advertises ``sessionCapabilities.fork`` forks it instead.

The old run is only read: it may be live.
"""

from __future__ import annotations

import asyncio
import copy
import os
import shutil
from dataclasses import replace
from pathlib import Path

from tether.vocab.state import Cancelled, RunState, RunWorkspace, StateError, Status
from tether.workspaces.checkpoints import find, listing
from tether.workspaces.fork_note import FORK_NOTE, fork_note
from tether.workspaces.git import git
from tether.workspaces.lifecycle import META_DIR
from tether.workspaces.make import COPY_GIT
from tether.workspaces.rewinding import _first_reply, _workspace

FORKS_DIR = "forks"


async def fork(origin: RunState, step: int, run_id: str, workspaces_dir: Path, *, session: str | None = None) -> RunState:
    """The new run (not saved: the caller creates it on the store), forked from ``origin`` at
    checkpoint ``step``. StateError in words when there is no such checkpoint."""
    ws = _workspace(origin)
    cp = await find(ws, origin.run_id, step)
    cut = _first_reply(origin) if step == 0 else min(cp.messages, len(origin.messages))
    messages = copy.deepcopy(origin.messages[:cut])
    if origin.of_acp_agent:  # a new session, told in words what was done up to N (fork_note)
        messages = [{"role": "user", "tether": FORK_NOTE, "content": fork_note(messages, origin.run_id, step)}]
    calls = {c.get("id") for m in messages for c in m.get("tool_calls") or ()}
    new_ws = RunWorkspace(kind=ws.kind, source=ws.source, base=cp.commit if ws.kind == "worktree" else "",
                          setup=list(ws.setup), checks=list(ws.checks), ignored=ws.ignored)
    if ws.kind == "copy":
        new_ws.source = await _files_of(ws, cp.commit, Path(os.path.realpath(workspaces_dir)) / META_DIR / FORKS_DIR
                                        / run_id)
    reason = f"forked from {origin.run_id} at checkpoint {step}: tether resume {run_id} goes on from there"
    return RunState(
        run_id=run_id, model=origin.model, messages=messages, status=Status.INTERRUPTED,
        interruption=Cancelled(reason), limits=replace(origin.limits),
        policies=replace(origin.policies, auto_approve=list(origin.policies.auto_approve)),
        pricing=replace(origin.pricing), base_url=origin.base_url, workspace=origin.workspace,
        run_workspace=new_ws, agent=origin.agent,
        approvals={k: v for k, v in origin.approvals.items() if k in calls},
        failed_calls=[c for c in origin.failed_calls if c in calls],
        forked_from={"run_id": origin.run_id, "step": step, "commit": cp.commit, "messages": cut,
                     **({"session": session} if session and origin.of_acp_agent and origin.status is not Status.RUNNING
                        and step == max(c.step for c in await listing(ws, origin.run_id)) else {})})


async def _files_of(ws: RunWorkspace, commit: str, folder: Path) -> str:
    """Checkpoint ``commit`` of a copy, its files written out into ``folder`` (made here; the
    caller has checked the fork's id is free, so a folder there is a crashed fork's, replaced)."""
    assert ws.meta is not None
    if folder.exists():  # left by a fork of this id that a crash stopped before its run was made
        await asyncio.to_thread(shutil.rmtree, folder)
    await asyncio.to_thread(folder.mkdir, parents=True)
    index = str(folder.parent / f".{folder.name}.index")
    where = {"cwd": str(folder), "git_dir": str(Path(ws.meta) / COPY_GIT), "work_tree": str(folder)}
    try:
        await git("read-tree", commit, index=index, **where)
        await git("checkout-index", "-a", "-f", index=index, **where)
    finally:
        Path(index).unlink(missing_ok=True)
    return str(folder)

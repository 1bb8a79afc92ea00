"""Making a run's workspace and removing it, each step safe to do again.

A workspace is made from a record whose stage is ``creating`` (its path, branch and base
commit decided and saved before anything was touched: :mod:`tether.workspaces.lifecycle`).
:func:`create` first clears whatever a crash in an earlier attempt may have left at that path,
then makes it whole; :func:`remove` removes whatever of it is there. So the step a crash
interrupted is simply done again by the next command.

Two kinds:

* **worktree**: ``git worktree add -b tether/RUN_ID PATH BASE`` in the agent's repository.
  The agent works on its own branch; the user's checkout, index, HEAD and branch are not
  touched. Tether reads the run's changes with an index of its own (the worktree's index,
  copied once it is checked out, so git need not hash every file again).
* **copy**: the folder is copied (symbolic links kept as links), and a snapshot of it is
  committed to a repository of Tether's own beside it (``META/git``, bare, its work tree the
  copy). The snapshot, not the original folder, is the base the run's changes are read
  against: the original may change meanwhile, and the snapshot diffs with git's own tools
  (``.gitignore`` honoured, binary files told apart), as a worktree does. The copy holds no
  ``.git`` of its own, so the agent sees the folder as it was.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

from tether.vocab.state import RunWorkspace
from tether.workspaces.git import GitError, branch_exists, git, worktree_gitdir

BASE_REF = "refs/tether/base"
"""A copy's base snapshot, in its own repository (kept from git's garbage collection)."""
INDEX_FILE = "index"
COPY_GIT = "git"


def place(ws: RunWorkspace) -> dict[str, str]:
    """How git reaches the workspace: its folder, and for a copy the repository beside it."""
    assert ws.path is not None and ws.meta is not None, "a workspace that was never planned"
    if ws.kind == "copy":
        return {"cwd": ws.path, "git_dir": str(Path(ws.meta) / COPY_GIT), "work_tree": ws.path}
    return {"cwd": ws.path}


def private_index(ws: RunWorkspace) -> Path:
    assert ws.meta is not None
    return Path(ws.meta) / INDEX_FILE


async def create(ws: RunWorkspace, *, fresh: bool = False) -> None:
    """Make the workspace ``ws`` names (stage ``creating``), after clearing what an earlier
    attempt left (``fresh``: there was none, its intent was saved just now and its path and
    branch found free). :class:`GitError` in words when git refuses."""
    assert ws.path is not None and ws.meta is not None
    if not fresh:
        await remove(ws, keep_branch=True)
    meta = Path(ws.meta)
    await asyncio.to_thread(meta.mkdir, parents=True, exist_ok=True)
    if ws.kind == "worktree":
        await _add_worktree(ws, fresh)
    else:
        await _copy(ws)


async def _add_worktree(ws: RunWorkspace, fresh: bool) -> None:
    assert ws.repo is not None and ws.branch is not None and ws.path is not None and ws.base_commit is not None
    at = None if fresh else await branch_exists(ws.repo, ws.branch)
    if at is None:
        await git("worktree", "add", "-q", "-b", ws.branch, ws.path, ws.base_commit, cwd=ws.repo)
    elif at == ws.base_commit:  # made by the attempt a crash cut short: nothing was done on it
        await git("worktree", "add", "-q", ws.path, ws.branch, cwd=ws.repo)
    else:
        raise GitError(f"the branch {ws.branch} in {ws.repo} is not this run's (it points at {at[:12]}, "
                       f"not the base {ws.base_commit[:12]}): rename or remove it, then resume the run")
    own = worktree_gitdir(ws.path)
    if own is not None and (own / "index").exists():
        # The worktree's index as checked out: git's stat data for every file, so reading the
        # run's changes the first time hashes only what changed. A copy, so its mtime is after
        # the files' (git would hash again any file as new as its index).
        await asyncio.to_thread(shutil.copyfile, own / "index", private_index(ws))


async def _copy(ws: RunWorkspace) -> None:
    assert ws.path is not None and ws.meta is not None
    await asyncio.to_thread(shutil.copytree, ws.source, ws.path, symlinks=True)
    repo = str(Path(ws.meta) / COPY_GIT)
    await git("init", "-q", "--bare", repo, cwd=ws.meta)
    where = place(ws)
    index = str(private_index(ws))
    await git("add", "-A", "--", ".", index=index, **where)
    tree = (await git("write-tree", index=index, **where)).strip()
    commit = (await git("commit-tree", "-m", f"the folder {ws.source} as the run started", tree,
                        identity=True, **where)).strip()
    await git("update-ref", BASE_REF, commit, **where)
    ws.base_commit = commit


async def remove(ws: RunWorkspace, *, keep_branch: bool = False) -> None:
    """Remove the workspace's folder, its worktree entry, Tether's side folder and (unless
    ``keep_branch``) its branch, whichever of them are there."""
    if ws.kind == "worktree" and ws.repo is not None and Path(ws.repo).is_dir():
        if ws.path is not None and worktree_gitdir(ws.path) is not None:
            # --force twice: the agent's uncommitted work goes too, and a locked worktree.
            await git("worktree", "remove", "--force", "--force", ws.path, cwd=ws.repo, ok=(0, 128))
    if ws.path is not None:
        await asyncio.to_thread(_rmtree, ws.path)
    if ws.kind == "worktree" and ws.repo is not None and Path(ws.repo).is_dir():
        await git("worktree", "prune", cwd=ws.repo)
        if not keep_branch and ws.branch is not None and await branch_exists(ws.repo, ws.branch) is not None:
            await git("branch", "-D", "-q", ws.branch, cwd=ws.repo)
    if ws.meta is not None:
        await asyncio.to_thread(_rmtree, ws.meta)


def _rmtree(path: str) -> None:
    if os.path.islink(path) or os.path.isfile(path):
        os.unlink(path)
    elif os.path.isdir(path):
        shutil.rmtree(path)

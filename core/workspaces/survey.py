"""Every run's workspace, and what git and the workspaces folder hold that no run owns
(``tether workspaces``).

A row per run that has a workspace, from the store's summaries (no journal is read): its run's
status, how far it was made, its size and age, and what the run had changed in it when its
last operation ended. Beside them, in words, what does not add up:

* a worktree git knows on a ``tether/`` branch, or such a branch, that no run of this store
  owns (the store was emptied, the run was deleted, a discard was done by hand);
* a folder in the workspaces folder that no run owns;
* and the reverse: a run whose workspace is gone, or that git no longer knows as a worktree,
  or whose making or discard was cut short (the command that finishes it is named).

The repositories looked at are those the store's runs came from, and those the worktrees in
the workspaces folder point at (so a worktree of a run the store lost is still found).
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tether.store.summary import RunSummary
from tether.workspaces.git import BRANCH_PREFIX, GitError, git, worktree_gitdir, worktrees
from tether.workspaces.lifecycle import LIVE_STAGES, META_DIR, this_host


@dataclass(slots=True)
class Row:
    run_id: str
    status: str
    """The run's status as a listing shows it (``orphaned`` for a running run nobody runs)."""
    kind: str
    stage: str
    path: str | None
    branch: str | None
    host: str | None
    size: int | None
    """Bytes on disk (None: not there, or on another host)."""
    age_s: float | None
    changes: dict[str, Any] | None
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": self.status, "kind": self.kind, "stage": self.stage,
                "path": self.path, "branch": self.branch, "host": self.host, "size": self.size, "age_s": self.age_s,
                "changes": self.changes, "problem": self.problem}


@dataclass(frozen=True, slots=True)
class Stray:
    """Something git or the workspaces folder holds that no run of the store owns."""

    what: str
    """``worktree``, ``branch`` or ``folder``."""
    path: str | None
    branch: str | None
    repo: str | None
    words: str

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, "path": self.path, "branch": self.branch, "repo": self.repo, "words": self.words}


@dataclass(slots=True)
class Survey:
    rows: list[Row] = field(default_factory=list)
    strays: list[Stray] = field(default_factory=list)


async def survey(summaries: list[RunSummary], workspaces_dir: Path) -> Survey:
    """The workspaces of ``summaries`` (a store's), and the strays (see the module)."""
    host = this_host()
    now = time.time()
    out = Survey()
    owned_paths: set[str] = set()
    owned_branches: set[tuple[str, str]] = set()
    repos: set[str] = set()
    for run in summaries:
        ws = run.workspace
        if not ws or ws.get("kind") == "none":  # a session's own folder: not Tether's to list or prune
            continue
        path, here = ws.get("path"), ws.get("host") in (None, host)
        stage = str(ws.get("stage"))
        if stage != "discarded":
            if path:
                owned_paths.add(os.path.realpath(path))
            if ws.get("repo") and ws.get("branch"):
                owned_branches.add((str(ws["repo"]), str(ws["branch"])))
        if here and ws.get("repo"):
            repos.add(str(ws["repo"]))
        size = await asyncio.to_thread(_size, path) if here and path and stage != "discarded" else None
        made_at = ws.get("made_at")
        out.rows.append(Row(run.run_id, run.shown_status, str(ws.get("kind")), stage, path, ws.get("branch"),
                            ws.get("host"), size, None if made_at is None else max(0.0, now - made_at),
                            ws.get("changes"), _problem(run.run_id, ws, here, size)))
    folders = await asyncio.to_thread(_folders, workspaces_dir)
    for folder in folders:
        gitdir = worktree_gitdir(folder)
        if gitdir is not None and gitdir.parent.name == "worktrees":  # REPO/.git/worktrees/NAME
            repos.add(str(gitdir.parent.parent.parent))
    listed: dict[str, set[str]] = {}
    for repo in sorted(repos):
        if not Path(repo).is_dir():
            continue
        try:
            out.strays += await _strays_in(repo, owned_paths, owned_branches, listed)
        except GitError as exc:
            out.strays.append(Stray("repository", None, None, repo, f"git could not list its worktrees: {exc}"))
    known_worktrees = set().union(*listed.values()) if listed else set()
    for row in out.rows:
        if row.kind == "worktree" and row.stage in LIVE_STAGES and row.problem is None and row.path \
                and row.host in (None, host) and os.path.realpath(row.path) not in known_worktrees:
            row.problem = (f"git does not know {row.path} as a worktree any more; tether discard {row.run_id} "
                           "removes what is left")
    for folder in folders:
        if os.path.realpath(folder) not in owned_paths and os.path.realpath(folder) not in known_worktrees:
            out.strays.append(Stray("folder", str(folder), None, None,
                                    f"the folder {folder} is no run's workspace: remove it if nothing in it is needed"))
    return out


async def _strays_in(repo: str, owned_paths: set[str], owned_branches: set[tuple[str, str]],
                     listed: dict[str, set[str]]) -> list[Stray]:
    found: list[Stray] = []
    checked_out: set[str] = set()
    paths: set[str] = set()
    for entry in await worktrees(repo):
        branch = entry.get("branch", "").removeprefix("refs/heads/")
        path = entry.get("worktree", "")
        paths.add(os.path.realpath(path))
        if not branch.startswith(BRANCH_PREFIX):
            continue
        checked_out.add(branch)
        if os.path.realpath(path) not in owned_paths:
            gone = " (its folder is gone: git worktree prune forgets it)" if "prunable" in entry else ""
            found.append(Stray("worktree", path, branch, repo,
                               f"git has a worktree {path} on {branch} that no run of this store owns{gone}: "
                               f"git -C {repo} worktree remove --force {path} removes it"))
    listed[repo] = paths
    refs = await git("for-each-ref", "--format=%(refname)", f"refs/heads/{BRANCH_PREFIX}", cwd=repo)
    for ref in refs.split():
        branch = ref.removeprefix("refs/heads/")
        if branch not in checked_out and (repo, branch) not in owned_branches:
            found.append(Stray("branch", None, branch, repo,
                               f"the branch {branch} in {repo} is no run's: git -C {repo} branch -D {branch} "
                               "removes it (merge it first if its work is wanted)"))
    return found


def _problem(run_id: str, ws: dict[str, Any], here: bool, size: int | None) -> str | None:
    stage = ws.get("stage")
    if not here:
        return f"on the host {ws.get('host')}"
    if stage == "creating":
        return f"its making was cut short: tether resume {run_id} makes it again"
    if stage == "discarding":
        return f"its discard was cut short: tether discard {run_id} finishes it"
    merge = ws.get("merge") or {}
    if merge.get("stage") == "merging":
        return f"its merge into {merge.get('into')} was cut short: tether merge {run_id} finishes it"
    if stage in LIVE_STAGES and size is None:
        return f"its folder is gone: tether discard {run_id} forgets it"
    return None


def _folders(workspaces_dir: Path) -> list[Path]:
    try:
        return sorted(p for p in workspaces_dir.iterdir() if p.name != META_DIR and p.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        return []


def _size(path: str) -> int | None:
    """The bytes of the files under ``path`` (links not followed), or None when it is not there."""
    if not os.path.isdir(path):
        return None
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                continue
    return total

"""Whether a run's work would merge into a branch, found without changing anything.

:func:`merge_check` is the dry run a merge asks before it is put to people as a decision:

* the run's work as it is now (its worktree read as :mod:`tether.workspaces.changes` reads it,
  committed uncommitted work included) is merged with the target branch by ``git merge-tree
  --write-tree``, which writes objects only: no checkout, no index, no ref is touched. The
  files that conflict are listed.
* where the target branch is checked out (the main checkout or another worktree), the files
  there with uncommitted changes (or untracked) that the merge would write are listed too:
  merging into that checkout would overwrite them (vibe-kanban #543), so the merge is refused
  in words while they are there, and the changes are kept.

The merge itself is not here: it is a decision bound to :attr:`MergeCheck.tree`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from tether.vocab.state import RunWorkspace
from tether.workspaces.changes import changes
from tether.workspaces.git import GitError, git, worktrees


@dataclass(frozen=True, slots=True)
class MergeCheck:
    into: str
    """The target branch."""
    target: str
    """The commit the target branch is at."""
    work: str
    """The run's work as a commit (its workspace read now, on its base): what would be merged."""
    tree: str | None
    """The merged tree when the merge is clean, else None."""
    conflicts: tuple[str, ...] = ()
    """Files both sides changed in ways git cannot merge."""
    checked_out: tuple[str, ...] = ()
    """Worktrees (paths) where the target branch is checked out: a merge updates them."""
    dirty: tuple[str, ...] = ()
    """Files with uncommitted changes in those checkouts that the merge would write over."""

    @property
    def ok(self) -> bool:
        return self.tree is not None and not self.dirty

    def words(self) -> str:
        """What stands in the way, in words (empty when nothing does)."""
        out = []
        if self.conflicts:
            out.append(f"it conflicts with {self.into} in {_listed(self.conflicts)}")
        if self.dirty:
            where = ", ".join(self.checked_out)
            out.append(f"{self.into} is checked out at {where} with uncommitted changes to {_listed(self.dirty)}, "
                       "which the merge would write over: commit or stash them there first (they are kept)")
        return "; ".join(out)


def _listed(paths: tuple[str, ...], shown: int = 5) -> str:
    names = ", ".join(paths[:shown])
    return names + (f" and {len(paths) - shown} more" if len(paths) > shown else "")


async def merge_check(ws: RunWorkspace, into: str) -> MergeCheck:
    """Whether the run's work in ``ws`` merges into the branch ``into`` of its repository
    (:class:`MergeCheck`); nothing is changed. :class:`GitError` in words when it cannot be
    checked: a copy (no repository to merge into), a branch that is not there."""
    if ws.kind != "worktree" or ws.repo is None or ws.path is None or ws.base_commit is None:
        raise GitError("only a worktree's run can be merged into a branch; a copy has no repository of its own")
    repo = ws.repo
    if into.startswith("-"):
        raise GitError(f"{into!r} is not a branch")
    target = (await git("rev-parse", "--verify", "--quiet", f"refs/heads/{into}", cwd=repo, ok=(0, 1))).strip()
    if not target:
        raise GitError(f"there is no branch {into!r} in {repo}")
    found = await changes(ws)
    work = (await git("commit-tree", "-p", ws.base_commit, "-m", f"the work of the run on {ws.branch}", found.tree,
                      cwd=repo, identity=True)).strip()
    out = await git("merge-tree", "--write-tree", "--no-messages", "--name-only", "-z", target, work,
                    cwd=repo, ok=(0, 1))
    fields = [f for f in out.split("\0") if f]
    conflicts = tuple(dict.fromkeys(fields[1:]))
    tree = fields[0] if fields and not conflicts else None
    written = set((await git("diff", "--name-only", "-z", "--no-renames", target, fields[0], cwd=repo)).split("\0")) \
        - {""} if fields else set()
    checked_out, dirty = [], []
    for entry in await worktrees(repo):
        if entry.get("branch") != f"refs/heads/{into}" or "prunable" in entry:
            continue
        path = entry["worktree"]
        checked_out.append(path)
        dirty += [f for f in await _uncommitted(path) if f in written or f in conflicts]
    return MergeCheck(into, target, work, tree, conflicts, tuple(checked_out), tuple(sorted(set(dirty))))


async def _uncommitted(checkout: str) -> list[str]:
    """Files with changes not committed in ``checkout``, staged or not, and untracked ones;
    read without writing its index (``--no-optional-locks``)."""
    out = await git("--no-optional-locks", "status", "--porcelain", "-z", "--untracked-files=all", cwd=checkout)
    fields = out.split("\0")
    files: list[str] = []
    i = 0
    while i < len(fields):
        entry = fields[i]
        if len(entry) > 3:
            files.append(entry[3:])
            if entry[0] in "RC":  # a rename's or copy's source follows
                i += 1
                files.append(fields[i])
        i += 1
    return [os.path.normpath(f) for f in files]

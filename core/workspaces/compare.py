"""Two runs' work compared (``tether diff RUN RUN2``): what each changed from its base, and
where their workspaces differ, file by file. For two forks of one run, or two agents given
one task.

Each workspace is read as :func:`tether.workspaces.changes.changes` reads it (every file, by
whoever written, staged into Tether's private index), which leaves its tree in the object
database; the two trees are then diffed by git. Both must be worktrees of one repository
(their objects are shared); two copies, or worktrees of two repositories, are refused in words.
"""

from __future__ import annotations

from dataclasses import dataclass

from tether.vocab.state import RunWorkspace, StateError
from tether.workspaces.changes import Changes, FileChange, _parse, changes
from tether.workspaces.git import git


@dataclass(frozen=True, slots=True)
class Comparison:
    first: Changes
    second: Changes
    differ: tuple[FileChange, ...]
    """From the first run's workspace to the second's: ``added`` in the second only, ``deleted``
    in the first only."""
    diff: str | None


async def compare(a: RunWorkspace, b: RunWorkspace, *, names: tuple[str, str], text: bool = True) -> Comparison:
    if a.kind != "worktree" or b.kind != "worktree" or a.repo is None or a.repo != b.repo:
        raise StateError(f"runs {names[0]} and {names[1]} do not work in worktrees of one repository, so git cannot "
                         f"compare them: diff -ru {a.path} {b.path} does")
    first, second = await changes(a), await changes(b)
    raw = await git("diff", "--no-renames", "--no-ext-diff", "--raw", "--numstat", "-z", first.tree, second.tree,
                    cwd=a.repo)
    unified = None
    if text:
        unified = await git("diff", "--no-renames", "--no-ext-diff", "--no-color", first.tree, second.tree, cwd=a.repo)
    return Comparison(first, second, _parse(raw), unified)

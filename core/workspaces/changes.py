"""What a run changed in its workspace: files added, changed and deleted, with their line
counts, and a file's unified diff, against the workspace's base.

Read from the files as they are now, whoever wrote them: the agent's file tools, a shell
command, a build. Untracked files count, ignored ones (``.gitignore``) do not. Every file is
staged into Tether's private index of the workspace (``GIT_INDEX_FILE``: a copy, used, then
put back in place), and that index is diffed against the base commit, so commits the agent
made on its branch count as well, and the worktree's own index, which the agent may use, is
left alone. The private index keeps git's stat data from one reading to the next, so a file
that did not change is not read again.

:attr:`Changes.tree` is the git tree of the workspace as read: it names its content exactly,
which is what a merge decision will be bound to.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from dataclasses import dataclass
from typing import Any, Literal

from tether.vocab.state import RunWorkspace
from tether.workspaces.git import git
from tether.workspaces.make import place, private_index

_STATUS = {"A": "added", "D": "deleted"}  # every other letter (M, T) is a change


@dataclass(frozen=True, slots=True)
class FileChange:
    path: str
    """Relative to the workspace's top, ``/``-separated."""
    status: Literal["added", "changed", "deleted"]
    added: int | None
    """Lines added; None for a binary file."""
    deleted: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "status": self.status, "added": self.added, "deleted": self.deleted,
                "binary": self.added is None}


@dataclass(frozen=True, slots=True)
class Changes:
    files: tuple[FileChange, ...]
    tree: str
    """The workspace's content as read (a git tree id)."""

    @property
    def added(self) -> int:
        return sum(f.added or 0 for f in self.files)

    @property
    def deleted(self) -> int:
        return sum(f.deleted or 0 for f in self.files)

    def words(self) -> str:
        return stat_words(len(self.files), self.added, self.deleted)

    def counts(self) -> dict[str, int]:
        return {"files": len(self.files), "added": self.added, "deleted": self.deleted}


def stat_words(files: int, added: int, deleted: int) -> str:
    """``+12 −3 in 4 files`` (``no changes`` for none)."""
    if not files:
        return "no changes"
    return f"+{added} \u2212{deleted} in {files} file{'s' if files != 1 else ''}"


class _Staged:
    """Tether's private index of the workspace with every file staged, for the ``async with``
    block: a copy of the kept one, put back in its place after (another reader meanwhile
    works on its own copy; the last to finish leaves its copy, every one is whole)."""

    def __init__(self, ws: RunWorkspace) -> None:
        self.ws = ws
        self.kept = private_index(ws)
        self.path = self.kept.with_name(f"{self.kept.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}")

    async def __aenter__(self) -> str:
        def copy() -> None:
            self.kept.parent.mkdir(parents=True, exist_ok=True)
            if self.kept.exists():
                # Its time kept: git trusts an entry's stat data only if the file is older than the
                # index; a copy dated now would make a same-size rewrite in the index's second look
                # unchanged when git leaves the copy unwritten (nothing else changed).
                shutil.copy2(self.kept, self.path)

        await asyncio.to_thread(copy)
        await git("add", "-A", "--", ":/", index=str(self.path), **place(self.ws))
        return str(self.path)

    async def __aexit__(self, kind: object, *rest: object) -> None:
        def finish() -> None:
            if kind is None:
                os.replace(self.path, self.kept)
            else:
                self.path.unlink(missing_ok=True)

        await asyncio.to_thread(finish)


async def snapshot(ws: RunWorkspace) -> str:
    """The git tree of the workspace as it is now (every file staged into the private index):
    the base a session's own folder is read against (kind ``none``)."""
    async with _Staged(ws) as index:
        return (await git("write-tree", index=index, **place(ws))).strip()


async def changes(ws: RunWorkspace) -> Changes:
    """What the run changed in ``ws`` so far (:class:`Changes`). :class:`GitError` in words."""
    assert ws.base_commit is not None
    where = place(ws)
    async with _Staged(ws) as index:
        out = await git("diff", "--cached", "--no-renames", "--no-ext-diff", "--raw", "--numstat", "-z",
                        ws.base_commit, index=index, **where)
        tree = (await git("write-tree", index=index, **where)).strip()
    return Changes(_parse(out), tree)


def _parse(out: str) -> tuple[FileChange, ...]:
    """``--raw --numstat -z``: every file's raw line (``:modes shas STATUS\\0path\\0``) first,
    then its counts (``added\\tdeleted\\tpath\\0``; ``-`` for a binary file)."""
    fields = out.split("\0")
    status: dict[str, str] = {}
    counts: dict[str, tuple[int | None, int | None]] = {}
    i = 0
    while i < len(fields):
        field = fields[i]
        if field.startswith(":"):
            status[fields[i + 1]] = field.rsplit(" ", 1)[-1][:1]
            i += 2
            continue
        if field:
            added, deleted, path = field.split("\t", 2)
            counts[path] = (None if added == "-" else int(added), None if deleted == "-" else int(deleted))
        i += 1
    return tuple(FileChange(path, _STATUS.get(letter, "changed"), *counts.get(path, (0, 0)))  # type: ignore[arg-type]
                 for path, letter in sorted(status.items()))


async def diff(ws: RunWorkspace, paths: tuple[str, ...] = ()) -> str:
    """The unified diff of ``paths`` (every changed file when none), against the base."""
    assert ws.base_commit is not None
    specs = [f":(top,literal){p}" for p in paths] or [":/"]
    async with _Staged(ws) as index:
        return await git("diff", "--cached", "--no-renames", "--no-ext-diff", "--no-color", ws.base_commit,
                         "--", *specs, index=index, **place(ws))

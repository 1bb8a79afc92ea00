"""The folder the file tools may touch (the demo's sample that fills one: :mod:`tether.agents.sample`).

Every path a model sends is hostile until :meth:`Workspace.resolve` has confined it to
the root. Confinement is decided on the *real* path (symlinks resolved), compared
component-wise with the real root, so neither ``..``, a symlink that leaves, nor a
sibling directory whose name merely starts with the root's name gets through.
Which files may be read is a policy of the tools (:meth:`Workspace.is_forbidden`), not of
file modes: the tests run as root, and root reads everything.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

from tether.agents.tool_errors import PathRefused

MAX_PATH_BYTES = 4096
MAX_COMPONENT_BYTES = 255
_SHOWN_CHARS = 80


def _show(path: str) -> str:
    """A path quoted for an error message: escaped (no control characters reach the
    transcript or the console) and cut short (a refused path may be huge)."""
    text = repr(path)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 1] + "…"


class Workspace:
    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.realpath(root))

    def resolve(self, path: object) -> Path:
        """The real path ``path`` names inside the root, or :class:`PathRefused`.

        The path need not exist (a tool reports that itself), but every existing
        component is followed, so a new file under a symlinked directory that points
        outside is refused as well.
        """
        if not isinstance(path, str):
            raise PathRefused(f"path refused: expected a string, got {type(path).__name__}")
        if not path:
            raise PathRefused("path refused: the path is empty; name a file in the workspace")
        if "\x00" in path:
            raise PathRefused("path refused: it contains a NUL byte")
        try:
            encoded = path.encode("utf-8", errors="surrogateescape")
        except UnicodeEncodeError:
            raise PathRefused("path refused: it is not valid text (unpaired surrogate)") from None
        if len(encoded) > MAX_PATH_BYTES:
            raise PathRefused(
                f"path refused: it is {len(encoded)} bytes long (the limit is {MAX_PATH_BYTES})"
            )
        longest = max(len(part) for part in encoded.split(b"/"))
        if longest > MAX_COMPONENT_BYTES:
            raise PathRefused(
                f"path refused: one of its names is {longest} bytes long "
                f"(the limit is {MAX_COMPONENT_BYTES})"
            )
        if os.path.isabs(path):
            raise PathRefused(
                f"path refused: {_show(path)} is absolute; paths are relative to the workspace"
            )
        lexical = os.path.normpath(path)
        if lexical == ".." or lexical.startswith("../"):
            raise PathRefused(f"path refused: {_show(path)} climbs out of the workspace with '..'")
        real = Path(os.path.realpath(self.root / path))
        if not real.is_relative_to(self.root):
            raise PathRefused(
                f"path refused: {_show(path)} leads outside the workspace through a symbolic link"
            )
        return real

    def relative(self, real: Path) -> str:
        """How a resolved path is named to the model: relative to the root, ``/``-separated."""
        return real.relative_to(self.root).as_posix()

    @staticmethod
    def is_forbidden(relpath: str) -> bool:
        """Environment files (``.env``, ``secrets.env``, any ``*.env``) hold credentials:
        no tool reads them, whatever the file modes say."""
        return PurePosixPath(relpath).name.lower().endswith(".env")

    def list_entries(self) -> list[tuple[str, int]]:
        """(name, size) of the top-level files, sorted by name; dotfiles and anything
        that resolves outside the root (a symlink leaving it) are left out."""
        entries: list[tuple[str, int]] = []
        with os.scandir(self.root) as listing:
            for entry in listing:
                if entry.name.startswith("."):
                    continue
                try:
                    if entry.is_symlink():
                        # Only a link can lead elsewhere: it is confined like a path a model sends.
                        real = self.resolve(entry.name)
                        if real.is_file():
                            entries.append((entry.name, real.stat().st_size))
                    elif entry.is_file(follow_symlinks=False):
                        entries.append((entry.name, entry.stat(follow_symlinks=False).st_size))
                except (PathRefused, OSError):  # refused, or gone since the listing
                    continue
        return sorted(entries)


def find_repo(folder: Path | str) -> Path | None:
    """The top folder of the git repository ``folder`` is in (where its ``.git`` is: a folder,
    or a worktree's file), or None. Read from the disk alone, without starting git, so an agent
    file that asks for a worktree of a folder that is in no repository is refused as it is
    loaded (:mod:`tether.workspaces` makes the worktree)."""
    here = Path(os.path.realpath(folder))
    for candidate in (here, *here.parents):
        if (candidate / ".git").exists():
            return candidate
    return None


"""``fs/read_text_file`` and ``fs/write_text_file``, confined to the session's workspace.

The agent names absolute paths. A path is served only if it resolves (symlinks followed, ``..``
collapsed) inside the workspace; anything else gets a JSON-RPC error whose message the agent
reads and can tell its model. The file I/O runs in a worker thread: a large file must not
stall the event loop the console draws on.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from acp import RequestError


class OutsideWorkspace(RequestError):
    """A path outside the workspace (an error the agent reads, code -32602 invalid params)."""

    def __init__(self, path: str, workspace: Path) -> None:
        super().__init__(-32602, f"Refused: {path} is outside the workspace {workspace}; "
                                 "only files inside it can be read or written.", {"path": path})


class Workspace:
    """The folder an ACP session may read and write through the client."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def resolve(self, path: str) -> Path:
        """The path as the file system takes it (symlinks followed, ``..`` collapsed), relative
        paths from the root; inside the workspace or not."""
        candidate = Path(path)
        if not candidate.is_absolute():
            candidate = self.root / candidate
        return Path(os.path.realpath(candidate))

    def confine(self, path: str) -> Path:
        """The resolved path, or OutsideWorkspace. Relative paths are taken from the root."""
        resolved = self.resolve(path)
        if not resolved.is_relative_to(self.root):
            raise OutsideWorkspace(path, self.root)
        return resolved

    async def read(self, path: str, line: int | None, limit: int | None) -> str:
        """The file's text, from 1-based ``line`` for ``limit`` lines when given."""
        target = self.confine(path)
        try:
            text = await asyncio.to_thread(target.read_text, encoding="utf-8", errors="replace")
        except FileNotFoundError:
            raise RequestError(-32002, f"Resource not found: {path}", {"uri": path}) from None
        except OSError as exc:
            raise RequestError(-32603, f"Cannot read {path}: {exc.strerror or exc}", {"path": path}) from None
        if line is None and limit is None:
            return text
        lines = text.splitlines(keepends=True)
        start = max((line or 1) - 1, 0)
        end = None if limit is None else start + max(limit, 0)
        return "".join(lines[start:end])

    async def write(self, path: str, content: str) -> int:
        """Write ``content`` (UTF-8), making parent folders; return the size in bytes."""
        target = self.confine(path)
        data = content.encode("utf-8")

        def write() -> None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)

        try:
            await asyncio.to_thread(write)
        except OSError as exc:
            raise RequestError(-32603, f"Cannot write {path}: {exc.strerror or exc}", {"path": path}) from None
        return len(data)

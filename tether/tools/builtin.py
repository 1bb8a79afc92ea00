"""The built-in file tools: list, read, and delete (a write that needs approval).

Every path goes through :meth:`Workspace.resolve` before anything touches the disk,
and errors are worded for the model: a missing file says to call ``list_files``,
because the ``recover`` scenario (and a real model) acts on exactly that hint.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any, ClassVar

import aiofiles.os

from tether.tools.base import (
    InvalidArguments,
    NotFound,
    PermissionDenied,
    Tool,
    ToolContext,
    ToolError,
)
from tether.workspace import Workspace

_NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


def _path_schema(description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"path": {"type": "string", "description": description}},
        "required": ["path"],
        "additionalProperties": False,
    }


def _workspace(ctx: ToolContext) -> Workspace:
    if ctx.workspace is None:  # an Agent with file tools always has one; a hand-made loop may not
        raise PermissionDenied("this agent has no workspace: the file tools have no folder to work in")
    return ctx.workspace


def _target(workspace: Workspace, args: dict[str, Any], verb: str) -> tuple[str, Path]:
    """Confine ``args["path"]`` and apply the forbidden-file policy. Returns the name
    shown to the model and the real path (which need not exist).

    The policy is checked on the requested name *and* the resolved one, so neither
    ``x.env -> notes.txt`` nor ``alias.txt -> secrets.env`` gets around it.
    """
    if "path" not in args:
        raise InvalidArguments("missing argument 'path': name a file from list_files")
    requested = args["path"]
    real = workspace.resolve(requested)
    rel = workspace.relative(real)
    if workspace.is_forbidden(requested) or workspace.is_forbidden(rel):
        raise PermissionDenied(f"permission denied: {rel} may not be {verb} by this agent")
    return rel, real


def _read_head(path: Path, limit: int) -> bytes:
    with open(path, "rb") as handle:
        return handle.read(limit)


# Open, read and close in one trip to a worker thread (``aiofiles.open`` makes three).
_read_head_off_loop = aiofiles.os.wrap(_read_head)


def _require_file(rel: str, real: Path) -> int:
    """Check that ``real`` is a regular file and return its size, or raise the error the
    model should see instead (missing, a directory, a device or FIFO that would block)."""
    try:
        info = real.stat()
    except FileNotFoundError:
        raise NotFound(f"no such file: {rel}. Call list_files to see what exists.") from None
    except OSError as exc:
        raise ToolError(f"could not access {rel}: {exc.strerror}") from None
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{rel} is a directory, not a file. Call list_files to see the files.")
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{rel} is not a regular file")
    return info.st_size


class ListFiles(Tool):
    name = "list_files"
    ref = "tether:list_files"
    description = "List the files in the workspace with their sizes in bytes."
    parameters = _NO_ARGS

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        return list_files_text(_workspace(ctx))


def list_files_text(workspace: Workspace) -> str:
    """What ``list_files`` answers: each entry with its size, then how many there are."""
    entries = workspace.list_entries()
    lines = [
        f"{name}  {size} bytes{'  (not readable)' if workspace.is_forbidden(name) else ''}"
        for name, size in entries
    ]
    lines.append(f"{len(entries)} file{'' if len(entries) == 1 else 's'}")
    return "\n".join(lines)


class ReadFile(Tool):
    name = "read_file"
    ref = "tether:read_file"
    description = "Read a text file from the workspace. Paths are relative to the workspace."
    parameters = _path_schema("File to read, relative to the workspace, e.g. 'errors.log'.")
    max_bytes: ClassVar[int] = 1_000_000  # a huge file must not exhaust memory

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        rel, real = _target(_workspace(ctx), args, "read")
        _require_file(rel, real)
        try:
            data = await _read_head_off_loop(real, self.max_bytes + 1)
        except OSError as exc:
            raise ToolError(f"could not read {rel}: {exc.strerror}") from None
        text = data[: self.max_bytes].decode("utf-8", errors="replace")
        if len(data) > self.max_bytes:
            text += f"\n[truncated: only the first {self.max_bytes} bytes of {rel} are shown]"
        return text


class DeleteFile(Tool):
    """A write: the ledger entry under ``run_id:call_id`` decides whether to act, replay the
    recorded result, or settle a deletion a crash left unrecorded. A symlink inside the
    workspace is followed, like read_file: the file it names is what is deleted."""

    name = "delete_file"
    ref = "tether:delete_file"
    description = "Delete a file from the workspace. Needs the operator's approval."
    parameters = _path_schema("File to delete, relative to the workspace.")
    read_only = False
    needs_approval = True

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        key = ctx.idempotency_key
        entry = await ctx.ledger.alookup(key)
        rel, real = _target(_workspace(ctx), args, "deleted")
        if entry is not None and entry.intent.get("path") != rel:
            recorded = entry.intent.get("path")
            raise ToolError(f"call {key} was recorded as deleting {recorded}, not {rel}")
        # A replay answers exactly as the first time did, so the model reads the same
        # transcript as in a run that never crashed; the trace says it was a replay.
        if entry is not None and entry.status == "done":
            ctx.progress(f"already done under {key}: replaying the recorded result")
            return entry.result or ""
        if entry is not None and not real.exists():
            # Begun, never recorded, file gone: the deletion happened, then the process died.
            result = f"Deleted {rel} ({entry.intent['size']} bytes)."
            await ctx.ledger.acomplete(key, result)
            ctx.progress(f"deleted before an interruption under {key}: now recorded")
            return result
        size = _require_file(rel, real)
        await ctx.ledger.abegin(key, {"tool": self.name, "path": rel, "size": size})
        await aiofiles.os.remove(real)
        result = f"Deleted {rel} ({size} bytes)."
        await ctx.ledger.acomplete(key, result)
        return result

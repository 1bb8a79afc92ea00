"""The built-in file tools: list, read, and write and delete (writes that need approval).

Every path goes through :meth:`Workspace.resolve` before anything touches the disk,
and errors are worded for the model: a missing file says to call ``list_files``,
because the ``recover`` scenario (and a real model) acts on exactly that hint.

The two writes declare a preview (:meth:`Tool.preview`) for the people approving them:
``write_file`` the unified diff of the text, ``delete_file`` the file's size and first
lines. A preview confines its path exactly as the call would (the same :func:`_target`),
so a path the call would refuse shows the call's own refusal; it only stats and reads.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, ClassVar

import aiofiles.os

from tether.vocab.preview import Preview, unified_diff
from tether.agents.tools.base import Tool, ToolContext
from tether.agents.tool_errors import InvalidArguments, NotFound, PermissionDenied, ToolError
from tether.agents.workspace import Workspace

__all__ = ["DeleteFile", "ListFiles", "ReadFile", "WriteFile", "list_files_text"]

_NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


def _path_schema(description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"path": {"type": "string", "description": description}},
        "required": ["path"],
        "additionalProperties": False,
    }


def _workspace(ctx: ToolContext) -> Workspace:
    return _folder(ctx.workspace)


def _folder(workspace: Workspace | None) -> Workspace:
    if workspace is None:  # an Agent with file tools always has one; a hand-made loop may not
        raise PermissionDenied("this agent has no workspace: the file tools have no folder to work in")
    return workspace


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
    return _file_size(rel, info)


def _file_size(rel: str, info: os.stat_result) -> int:
    """The size of a regular file, or the error the model should see for anything else (a
    directory; a device or FIFO, which would block)."""
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{rel} is a directory, not a file. Call list_files to see the files.")
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{rel} is not a regular file")
    return info.st_size


def _writable(rel: str, real: Path) -> int | None:
    """The size of the regular file ``real``, None when there is none yet (and its folder
    exists), or the error the model should see (a directory, a device, a missing folder)."""
    try:
        info = real.stat()
    except FileNotFoundError:
        if not real.parent.is_dir():
            raise NotFound(f"no such folder for {rel}: write_file writes into folders that exist. "
                           "Call list_files to see what exists.") from None
        return None
    except OSError as exc:
        raise ToolError(f"could not access {rel}: {exc.strerror}") from None
    return _file_size(rel, info)


def _write(path: Path, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)


_write_off_loop = aiofiles.os.wrap(_write)

# ---- what a write would change (read-only: the previews only stat and read) ----------

PREVIEW_READ_BYTES = 256_000
"""How much of a file a preview reads to diff it. A longer file is summarised instead:
nobody reviews a longer diff in a dialog, and difflib grows slow on it."""
_HEAD_BYTES = 8_192  # delete_file's preview: enough for the first lines of any text file
_HEAD_LINES = 10


def _lines(text: str) -> str:
    n = len(text.splitlines())
    return f"{n} line{'' if n == 1 else 's'}"


def _text_of(data: bytes, *, cut: bool) -> str | None:
    """``data`` as text, or None for a binary file (a NUL byte, or not UTF-8). When ``data``
    is the start of a longer file, a character cut at its end does not make it binary."""
    if b"\x00" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if cut and exc.start >= len(data) - 3 and exc.end == len(data):
            return data[:exc.start].decode("utf-8", errors="replace")
        return None


def _content(args: dict[str, Any]) -> str:
    content = args.get("content")
    if not isinstance(content, str):
        raise InvalidArguments("missing argument 'content': the text the file should hold")
    return content


def _write_preview(rel: str, real: Path, content: str) -> Preview:
    new = _lines(content)
    size = _writable(rel, real)
    if size is None:
        return Preview("diff", f"create {rel} (new file, {new})", unified_diff(rel, None, content))
    replacement = f"{new} ({len(content.encode('utf-8'))} bytes)"
    if size > PREVIEW_READ_BYTES:
        return Preview("summary", f"write {rel}",
                       f"{rel} holds {size} bytes, too many to diff here; the write replaces them with {replacement}.")
    old = _text_of(_read_head(real, PREVIEW_READ_BYTES), cut=False)
    if old is None:
        return Preview("summary", f"write {rel}",
                       f"binary file, {size} bytes: the write replaces it with text, {replacement}.")
    diff = unified_diff(rel, old, content)
    if not diff:
        return Preview("summary", f"write {rel}", f"no change: {rel} already holds this text ({new}).")
    return Preview("diff", f"write {rel} ({_lines(old)} → {new})", diff)


def _delete_preview(rel: str, real: Path) -> Preview:
    try:
        size = _require_file(rel, real)
    except NotFound:
        return Preview("summary", f"delete {rel}", f"no such file: {rel}. The call would delete nothing.")
    head = _read_head(real, _HEAD_BYTES)
    text = _text_of(head, cut=size > len(head))
    if size == 0:
        shown = "empty file, 0 bytes"
    elif text is None:
        shown = f"binary file, {size} bytes"
    else:
        lines = text.splitlines()
        shown = "\n".join(lines[:_HEAD_LINES])
        if size > len(head) or len(lines) > _HEAD_LINES:
            shown += f"\n… (the first {min(len(lines), _HEAD_LINES)} lines of {size} bytes)"
    return Preview("summary", f"delete {rel} ({size} bytes)", shown)


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


class _WorkspaceWrite(Tool):
    """What the two built-in writes declare alike: they change the workspace, so each call
    waits for approval, and the reason says that (a tool of the user's says its own)."""

    read_only = False
    needs_approval = True

    def approval_reason(self) -> str:
        return "it writes to the workspace"


class DeleteFile(_WorkspaceWrite):
    """A write: the ledger entry under ``run_id:call_id`` decides whether to act, replay the
    recorded result, or settle a deletion a crash left unrecorded. A symlink inside the
    workspace is followed, like read_file: the file it names is what is deleted."""

    name = "delete_file"
    ref = "tether:delete_file"
    description = "Delete a file from the workspace. Needs the operator's approval."
    parameters = _path_schema("File to delete, relative to the workspace.")

    def preview(self, args: dict[str, Any], workspace: Workspace | None) -> Preview:
        """The file's size and first lines (or that it is binary, or missing)."""
        rel, real = _target(_folder(workspace), args, "deleted")
        return _delete_preview(rel, real)

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


class WriteFile(_WorkspaceWrite):
    """A write, made idempotent by the ledger like :class:`DeleteFile`: a call recorded as
    done replays its result; one begun but not recorded (the process died mid-write) is
    written again, which gives the same file. The text replaces the file's in place (its
    mode and a symlink inside the workspace are kept); a missing folder is not created."""

    name = "write_file"
    ref = "tether:write_file"
    description = ("Write a text file in the workspace, replacing what it holds (or creating it). "
                   "Needs the operator's approval.")
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File to write, relative to the workspace."},
            "content": {"type": "string", "description": "The whole text the file should hold."},
        },
        "required": ["path", "content"],
        "additionalProperties": False,
    }
    max_bytes: ClassVar[int] = 1_000_000  # what read_file would read back whole

    def preview(self, args: dict[str, Any], workspace: Workspace | None) -> Preview:
        """The unified diff of the file's text against ``content`` (a new file: all added)."""
        rel, real = _target(_folder(workspace), args, "written")
        return _write_preview(rel, real, self._text(args))

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> str:
        key = ctx.idempotency_key
        entry = await ctx.ledger.alookup(key)
        rel, real = _target(_workspace(ctx), args, "written")
        if entry is not None and entry.intent.get("path") != rel:
            raise ToolError(f"call {key} was recorded as writing {entry.intent.get('path')}, not {rel}")
        if entry is not None and entry.status == "done":
            ctx.progress(f"already done under {key}: replaying the recorded result")
            return entry.result or ""
        data = self._text(args).encode("utf-8")
        existed = _writable(rel, real) is not None
        if entry is not None:  # begun before a crash: answer as that first attempt would have
            existed = bool(entry.intent.get("existed", existed))
        await ctx.ledger.abegin(key, {"tool": self.name, "path": rel, "size": len(data), "existed": existed})
        try:
            await _write_off_loop(real, data)
        except OSError as exc:
            raise ToolError(f"could not write {rel}: {exc.strerror}") from None
        result = f"{'Wrote' if existed else 'Created'} {rel} ({len(data)} bytes)."
        await ctx.ledger.acomplete(key, result)
        return result

    def _text(self, args: dict[str, Any]) -> str:
        content = _content(args)
        size = len(content.encode("utf-8"))
        if size > self.max_bytes:
            raise InvalidArguments(f"content is {size} bytes; write_file writes at most {self.max_bytes}")
        return content

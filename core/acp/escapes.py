"""Writes an ACP agent made itself, outside its workspace, after Tether refused them.

Tether serves ``fs/write_text_file`` inside the workspace only, but that refusal contains only
the agents that write through the client. Others do their own file I/O: OpenCode 1.18.33
asks the client to write, reads the refusal, writes the file itself and reports "Wrote file
successfully." (measured here). Left at that, the trace would say "refused" of a file that is
on disk. So a write refused for being outside the workspace is remembered with the file as it
was then, and once a call reports success (and again when the turn ends) the disk is looked
at: a file there that was made or changed since the refusal was written by the agent itself,
and the run says so in a warning. So was a file that holds exactly what the agent asked to
write and was changed during the turn: OpenCode's own write may land before its request to
the client is served (measured on a loaded host), so the file as it was at the refusal is
already the agent's.

This tells; it does not contain. Containing such an agent takes the operating system (a
sandbox around its process, ``sandbox = "workspace"``), not the protocol: docs/acp.md says which
agents write themselves. In a sandboxed run the same look says that the sandbox kept the file out.
The functions here touch the disk and block: callers run them in a worker thread.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RefusedWrite:
    """A write refused as outside the workspace: the file the agent named (resolved), the file
    as it was then (size and mtime in ns; None when there was none), and the SHA-256 of the
    content the agent asked to write."""

    path: str
    before: tuple[int, int] | None
    digest: str = ""


def refused_write(path: Path, content: str) -> RefusedWrite:
    """Remember a write refused now, before the agent hears of it (it may write itself next)."""
    return RefusedWrite(str(path), _seen(path), _digest(content.encode("utf-8")))


def wrote_itself(refused: RefusedWrite, since_ns: int) -> bool:
    """Whether the agent wrote the refused file itself: it is there, and not as it was at the
    refusal (made, or changed since); or it was changed after ``since_ns`` (the turn's start)
    and holds exactly the refused content (written before the refusal)."""
    path = Path(refused.path)
    now = _seen(path)
    if now is None:
        return False
    if now != refused.before:
        return True
    if not refused.digest or now[1] < since_ns:
        return False
    try:
        return _digest(path.read_bytes()) == refused.digest
    except OSError:
        return False


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def warning_words(refused: RefusedWrite, workspace: Path | None) -> str:
    """The warning the run records, in words an operator reads at a glance."""
    where = f" {workspace}" if workspace is not None else ""
    return (f"the agent wrote {refused.path} itself, outside the workspace{where}, after Tether refused the write: "
            "Tether's file guard does not contain an agent that does its own file I/O")


def sandboxed_words(refused: RefusedWrite, backend: str) -> str:
    """What the run records of a refused write in a sandboxed run: the file is not there, and the
    agent could not have made it itself."""
    return (f"Tether refused the write of {refused.path}, outside the workspace, and the agent's {backend} sandbox "
            "kept it from writing the file itself: nothing was written there")


def _seen(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except (OSError, ValueError):  # not there, not reachable, or not a path the system takes
        return None
    return stat.st_size, stat.st_mtime_ns

"""What a call would change, shown to the people deciding it before they decide.

A tool declares a preview (:meth:`tether.agents.tools.base.Tool.preview`); the loop asks for it
once, when the call starts waiting, through :func:`tether.agents.tools.preview.preview_call`, and
keeps the result on the waiting call (``NeedsApproval.preview``, :meth:`Preview.to_dict`) so
every console and process shows the same thing. An ACP agent's permission request already
carries its diffs: :func:`preview_of_acp` makes them the same :class:`Preview`.

Rules every preview obeys, and why:

* **Read-only.** It is computed before anyone approved anything, so it may read but never
  write. The built-in previews only stat and read, and sync previews run in a worker
  thread (:func:`asyncio.to_thread`) so a slow disk does not freeze the console.
* **Bounded.** A person reads it in a dialog: at most :data:`MAX_LINES` lines and
  :data:`MAX_BYTES` bytes, then a "… N more lines" note and ``truncated=True``.
* **Never in the way.** A preview that raises or takes longer than
  :data:`tether.agents.tools.preview.TIMEOUT` seconds
  becomes a ``failed`` preview that says so in words; the decision goes on without it.
  (A sync preview that never returns keeps its worker thread: Python cannot stop a thread.)
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

__all__ = ["MAX_BYTES", "MAX_LINES", "Preview", "PreviewKind", "bounded", "failed", "preview_of_acp", "unified_diff"]

PreviewKind = Literal["diff", "summary", "failed"]
_KINDS: tuple[PreviewKind, ...] = ("diff", "summary", "failed")

MAX_LINES = 200
"""Lines of a preview a dialog shows; the rest is counted in a note."""
MAX_BYTES = 16_000
"""Bytes of a preview kept (UTF-8), so one minified line cannot fill the record either."""


@dataclass(frozen=True, slots=True)
class Preview:
    """What a call would change: a unified ``diff``, a ``summary`` in words, or why the
    preview ``failed``. ``title`` is one line ("write notes.txt (3 → 4 lines)"); ``text``
    is at most :data:`MAX_LINES` lines, ``truncated`` when some were left out."""

    kind: PreviewKind
    title: str
    text: str
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "title": self.title, "text": self.text}
        if self.truncated:  # written only when set, like the other optional fields of a record
            out["truncated"] = True
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Preview:
        """The preview a record holds; an unknown kind (a newer writer) reads as a summary."""
        kind = data.get("kind")
        return cls(cast("PreviewKind", kind) if kind in _KINDS else "summary", str(data.get("title") or ""),
                   str(data.get("text") or ""), bool(data.get("truncated", False)))


def failed(title: str, words: str) -> Preview:
    """A preview that could not be made, saying why: shown, and the decision goes on."""
    return Preview("failed", title, f"preview failed: {words}")


def unified_diff(path: str, old: str | None, new: str) -> str:
    """The change from ``old`` to ``new`` as a unified diff, named as git names it
    (``a/path``, ``b/path``; ``/dev/null`` when ``old`` is None, a new file). Empty when
    nothing changes. A last line without a newline is marked as git marks it, so two
    texts that differ only there do not show the same."""
    lines = difflib.unified_diff((old or "").splitlines(keepends=True), new.splitlines(keepends=True),
                                 "/dev/null" if old is None else f"a/{path}", f"b/{path}")
    out = []
    for line in lines:
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def bounded(preview: Preview, *, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES) -> Preview:
    """``preview`` cut to ``max_lines`` lines and ``max_bytes`` bytes, with a note that says
    how much was left out."""
    lines = preview.text.splitlines()
    kept: list[str] = []
    size = 0
    cut_line = False
    for line in lines[:max_lines]:
        cost = len(line.encode("utf-8")) + 1
        if size + cost > max_bytes:
            if not kept:  # one huge line: show its start rather than nothing
                kept.append(line.encode("utf-8")[:max_bytes].decode("utf-8", errors="ignore") + "…")
                cut_line = True
            break
        kept.append(line)
        size += cost
    if len(kept) == len(lines) and not cut_line:
        return preview
    more = len(lines) - len(kept)
    note = f"… {more} more line{'' if more == 1 else 's'}" if more else f"… (cut at {max_bytes} bytes)"
    return Preview(preview.kind, preview.title, "\n".join([*kept, note]), truncated=True)


def preview_of_acp(content: Iterable[Any] | None, workspace: Path | str | None = None) -> Preview | None:
    """The diffs an ACP agent's tool call carries, as one ``diff`` preview; None without any.

    ``content`` is the tool call's content as it comes: ACP's ``FileEditToolCallContent``
    objects, :class:`tether.acp.events.Diff` (``PermissionRequest.diffs``), or plain dicts
    (``{"type": "diff", "path", "oldText", "newText"}``, the wire form); anything else (text,
    terminals) is left out. ``oldText`` null means a new file. Paths inside ``workspace``
    are shown relative to it, as Tether's own tools name them.
    """
    edits = [edit for edit in map(_acp_diff, content or ()) if edit is not None]
    if not edits:
        return None
    root = Path(workspace) if workspace is not None else None
    parts: list[str] = []
    names: list[str] = []
    for path, old, new in edits:
        name = _shown(path, root)
        names.append(name)
        parts.append(unified_diff(name, old, new) or f"no change to {name}\n")
    if len(edits) == 1:
        path, old, new = edits[0]
        title = (f"create {names[0]} (new file, {_count(new)})" if old is None
                 else f"edit {names[0]} ({_count(old)} → {_count(new)})")
    else:
        title = f"edit {len(edits)} files: {', '.join(names)}"
    return bounded(Preview("diff", title, "".join(parts)))


def _acp_diff(item: Any) -> tuple[str, str | None, str] | None:
    """(path, old text, new text) of one content item that is a diff, else None."""
    if isinstance(item, Mapping):
        if item.get("type", "diff") != "diff":
            return None
        path, old, new = item.get("path"), item.get("oldText", item.get("old_text")), \
            item.get("newText", item.get("new_text"))
    else:
        if getattr(item, "type", "diff") != "diff":
            return None
        path, old, new = getattr(item, "path", None), getattr(item, "old_text", None), getattr(item, "new_text", None)
    if not isinstance(path, str) or not isinstance(new, str) or not (old is None or isinstance(old, str)):
        return None
    return path, old, new


def _shown(path: str, root: Path | None) -> str:
    if root is not None:
        try:
            return Path(path).relative_to(root).as_posix()
        except ValueError:
            pass
    return path.lstrip("/")


def _count(text: str) -> str:
    n = len(text.splitlines())
    return f"{n} line{'' if n == 1 else 's'}"

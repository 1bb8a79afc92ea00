"""What a call waiting for approval would change and how it must be decided, as screen text.

Pure functions from a :class:`~tether.vocab.state.NeedsApproval` (its preview, its tally of
people, its deadline) to :class:`rich.text.Text`, for the decision dialogs. A preview is a
:class:`tether.vocab.preview.Preview` as a dict (``kind``: ``diff``, ``summary`` or
``failed``; ``title``, ``text``, ``truncated``); it is read as a dict here, so a preview
of a newer kind shows as its text.
"""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text

from tether.approvals import format_duration
from tether.vocab.state import NeedsApproval
from tether.tui.state.text import clean

DIFF_LINES = 400  # a longer diff shows its first lines and says how many more
DIFF_LINE_CHARS = 500


def diff_text(diff: str, more: str = "tether trace RUN_ID has the whole diff") -> Text:
    """A unified diff, coloured (+ green, - red, @@ dim), bounded; ``more`` says where the rest is."""
    lines = diff.splitlines()
    out = Text()
    for i, line in enumerate(lines[:DIFF_LINES]):
        if i:
            out.append("\n")
        line = clean(line)
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        elif line.startswith("@@"):
            style = "dim"
        else:
            style = ""
        out.append(line if len(line) <= DIFF_LINE_CHARS else line[:DIFF_LINE_CHARS] + "…", style=style)
    if len(lines) > DIFF_LINES:
        out.append(f"\n… {len(lines) - DIFF_LINES} more lines ({more})", style="dim")
    return out


def diff_summary(diff: str) -> str:
    lines = diff.splitlines()
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    files = sum(1 for line in lines if line.startswith("+++"))
    return (f"{added} line{'' if added == 1 else 's'} added, {removed} removed"
            + (f", in {files} files" if files > 1 else ""))


def preview_heading(preview: dict[str, Any]) -> str:
    """The line above a preview: its title, and for a diff how much it changes."""
    kind, title, text = str(preview.get("kind") or ""), str(preview.get("title") or ""), str(preview.get("text") or "")
    if kind == "failed":
        return f"{title}: no preview" if title else "no preview"
    words = title
    if kind == "diff" and text:
        words = f"{title}: {diff_summary(text)}" if title else diff_summary(text)
    if preview.get("truncated"):
        words += " (shortened)"
    return words or kind


def preview_body(preview: dict[str, Any]) -> Text:
    """The preview itself: a diff coloured, a summary as text, a failure as a warning that
    does not stand in the way of deciding."""
    kind, text = str(preview.get("kind") or ""), str(preview.get("text") or "")
    if kind == "failed":
        words = text.removeprefix("preview failed: ").strip() or "no reason given"
        return Text(f"preview failed: {clean(words)} (you can still decide)", style="yellow")
    if kind == "diff":
        body = diff_text(text)
    else:
        body = Text(clean(text))
    if preview.get("truncated"):
        body.append("\n… shortened: the call may change more than this shows", style="dim")
    return body


def tally_words(waiting: NeedsApproval) -> str | None:
    """``1 of 2 approved (alice)`` for a call that needs more than one person; else None."""
    if waiting.needed <= 1:
        return None
    if waiting.approvers:
        return clean(waiting.progress)
    return f"{waiting.progress}: it needs {waiting.needed} different people"


_AT_DEADLINE = {"reject": "rejects", "stop": "stops the run", "escalate": "escalates to someone else"}


def _then(waiting: NeedsApproval) -> str:
    return "rejects" if waiting.escalated else _AT_DEADLINE.get(waiting.on_deadline, waiting.on_deadline)


def deadline_clock(waiting: NeedsApproval) -> str | None:
    """``rejects at 14:05``: the deadline as a time of day (it never goes stale on screen)."""
    if waiting.deadline_at is None:
        return None
    return f"{_then(waiting)} at {time.strftime('%H:%M', time.localtime(waiting.deadline_at))}"


def deadline_words(waiting: NeedsApproval, now: float | None = None) -> str | None:
    """``rejects in 9 min`` (or stops, escalates) when the call has a deadline; else None."""
    if waiting.deadline_at is None:
        return None
    then = _then(waiting)
    left = waiting.deadline_at - (time.time() if now is None else now)
    if left <= 0:
        words = f"the deadline has passed: it {then} as soon as its run is looked at"
    else:
        shown = round(left) if left < 60 else round(left / 60) * 60 if left < 3600 else round(left / 360) * 360
        words = f"{then} in {format_duration(max(shown, 1))}"
    return f"escalated once; {words}" if waiting.escalated else words

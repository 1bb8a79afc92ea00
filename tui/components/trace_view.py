"""The live trace of the selected run: one line per event, following the tail.

A plain :class:`~textual.widgets.Log` (strings, never markup, bounded by ``max_lines``,
rendered lazily: only the visible lines), written only with the lines added since the
last refresh, keeps a run that emits thousands of events a second cheap to show; it is anchored to the tail
(``Widget.anchor``) until the operator scrolls up, so they are not yanked back, and
follows again once they scroll to the end. Lines are formatted once, when their event arrives, by :func:`format_record`.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Iterable, Sequence
from itertools import takewhile
from pathlib import Path
from typing import Any, Self

from rich.cells import cell_len
from rich.highlighter import Highlighter
from rich.text import Text
from textual.cache import LRUCache
from textual.events import Resize
from textual.geometry import Size
from textual.reactive import Reactive
from textual.widgets import Log


from tui.components.line_view import scroll_bars_follow
from tui.text import money, one_line

MAX_LINES = 1000
KIND_STYLES = {
    "run_started": "bold green",
    "turn": "cyan",
    "provider_retry": "yellow",
    "tool_start": "blue",
    "tool_progress": "dim blue",
    "tool_result": "magenta",
    "approval_required": "bold yellow",
    "approval_decision": "bold yellow",
    "run_stopped": "bold red",
}
KIND_WIDTH = 18


def _clock(ts: float, timings: bool) -> str:
    if not timings or not ts:
        return ""
    t = time.localtime(ts)
    return time.strftime("%H:%M:%S", t) + f".{int((ts % 1) * 1000):03d} "


def describe(r: dict[str, Any], timings: bool = True) -> str:
    """The interesting fields of one trace record, as a short line."""
    kind = r.get("kind")
    if kind == "run_started":
        return ("resumed" if r.get("resumed") else "started") + f" model={r.get('model')}"
    if kind == "turn":
        tail = f"  {r.get('provider_ms', 0):.0f} ms" if timings else ""
        calls = r.get("tool_calls") or 0
        then = f"{calls} tool call{'s' if calls != 1 else ''}" if calls else str(r.get("finish_reason"))
        return (f"turn {r.get('turn')}  in {r.get('prompt_tokens')} out {r.get('completion_tokens')}  "
                f"total {money(r.get('cost_usd'))}  → {then}{tail}")
    if kind == "provider_retry":
        return f"retry {r.get('attempt')} after {r.get('status')}: {r.get('reason')} (wait {r.get('wait_s')} s)"
    if kind == "tool_start":
        return f"{r.get('name')} {r.get('args')}  {r.get('call_id')}"
    if kind == "tool_progress":
        return f"{r.get('name')}: {r.get('label')}"
    if kind == "tool_result":
        state = "ok" if r.get("ok") else f"error ({r.get('error')})"
        if r.get("cached"):
            state += ", cached"
        tail = f"  {r.get('ms', 0):.0f} ms" if timings else ""
        return f"{r.get('name')} {state}  {r.get('call_id')}{tail}"
    if kind == "approval_required":
        return f"{r.get('tool')} {r.get('args')}  {r.get('call_id')}: {r.get('why')}"
    if kind == "approval_decision":
        return f"{r.get('verdict')} {r.get('tool')} {r.get('call_id')}: {r.get('text')}"
    if kind == "run_stopped":
        return f"{r.get('status')}: {r.get('reason')}  turns={r.get('turns')} cost={money(r.get('cost_usd'))}"
    return json.dumps({k: v for k, v in r.items() if k not in ("kind", "run_id", "seq", "ts")}, default=str)


def format_record(r: dict[str, Any], *, timings: bool = True, prefix: str = "") -> str:
    kind = str(r.get("kind", "?"))
    line = f"#{r.get('seq', 0):<5} {_clock(r.get('ts', 0.0), timings)}{prefix}{kind:<{KIND_WIDTH}} {describe(r, timings)}"
    return one_line(line, 400)


def tail_records(path: Path, limit: int = MAX_LINES, max_bytes: int = 512 * 1024) -> list[dict[str, Any]]:
    """The last ``limit`` complete records of a trace file, reading at most ``max_bytes``."""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            start = max(0, size - max_bytes)
            f.seek(start)
            data = f.read()
    except OSError:
        return []
    lines = data.split(b"\n")
    if start:
        lines = lines[1:]  # the first line may be cut
    out: deque[dict[str, Any]] = deque(maxlen=limit)
    for line in lines:
        if not line:
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):
            out.append(record)
    return list(out)


class KindHighlighter(Highlighter):
    def highlight(self, text: Text) -> None:
        plain = text.plain
        for kind, style in KIND_STYLES.items():
            at = plain.find(kind + " ")
            if 0 <= at < 40:
                text.stylize(style, at, at + len(kind))
                break
        text.stylize("dim", 0, min(len(plain), 6))


class TraceView(Log):
    """The selected run's trace. Showing another run writes its lines into this one view
    (a millisecond for a full buffer) rather than displaying another view, which costs a
    layout pass of the whole screen; where the operator left each recent run's trace is
    kept."""

    BORDER_TITLE = "Trace"
    RUNS_KEPT = 6  # runs whose scroll position is kept
    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)  # see line_view

    def watch_virtual_size(self, virtual_size: Size) -> None:
        scroll_bars_follow(self, virtual_size)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_lines=MAX_LINES, highlight=True, auto_scroll=False, **kwargs)
        self.highlighter = KindHighlighter()
        self._last = 0  # number of the last buffer line shown
        self._run_id: str | None = None
        self._left_at: LRUCache[str, float] = LRUCache(self.RUNS_KEPT)  # scroll_y, for runs not followed

    def write_lines(self, lines: Iterable[str], scroll_end: bool | None = None) -> Self:
        lines = list(lines)
        super().write_lines(lines, scroll_end)
        # Log measures the widest line in a thread and applies it later; do it now, so what
        # is on screen does not depend on when that thread finishes (it finds the same width).
        if lines:
            widest = max(cell_len(line) for line in lines)
            if widest > self._width:
                self._width = widest
                self.virtual_size = Size(self._width, self.line_count)
        return self

    def on_mount(self) -> None:
        self.anchor()  # follow the tail; scrolling up releases it, scrolling to the end re-anchors
        follow_tail(self)

    def on_resize(self, event: Resize) -> None:
        # RichLog renders the lines written before its size was known on its first resize
        # (its own handler runs too); keep the tail in view once they are there.
        follow_tail(self)

    def show(self, run_id: str | None, buffer: Sequence[tuple[int, str]]) -> None:
        """Show ``run_id``'s trace lines, ``buffer``; for the run already shown, add those
        not shown yet."""
        if run_id == self._run_id:
            self.sync(buffer)
            return
        if self._run_id is not None:
            if self.is_anchored and not getattr(self, "_anchor_released", False):
                self._left_at.discard(self._run_id)
            else:
                self._left_at.set(self._run_id, self.scroll_y)
        self._run_id = run_id
        self.clear()
        self._last = 0
        left_at = self._left_at.get(run_id) if run_id is not None else None
        if left_at is None:
            self.anchor()
        else:
            self.release_anchor()  # the lines written next do not scroll to the tail
        self.sync(buffer)
        if left_at is not None:
            self.scroll_to(y=left_at, animate=False, immediate=True)

    def sync(self, buffer: Sequence[tuple[int, str]]) -> None:
        """Show the lines of ``buffer`` (numbered, oldest first) not shown yet."""
        if not buffer:
            return
        first, last = buffer[0][0], buffer[-1][0]
        if last <= self._last:
            return
        if self._last < first and self._last:  # lines were dropped from the buffer since: start over
            self.clear()
            lines = [line for _, line in buffer]
        else:  # line numbers increase but are not contiguous (one counter for every buffer)
            new = list(takewhile(lambda item: item[0] > self._last, reversed(buffer)))
            lines = [line for _, line in reversed(new)]
        self.write_lines(lines)
        self._last = last
        follow_tail(self)


def follow_tail(widget: Any) -> None:
    """Keep an anchored view at the end after new content (the anchor is released when
    the operator scrolls up, and then this does nothing)."""
    if widget.is_anchored and not getattr(widget, "_anchor_released", False):
        # now: a later scroll would override a position restored meanwhile (the views'
        # sizes are set at once, see line_view)
        widget.scroll_end(animate=False, immediate=True, x_axis=False)

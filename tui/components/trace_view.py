"""The live trace of the selected run: one line per event, following the tail.

The view draws the app's bounded buffer of the run's lines (strings, never markup,
formatted once, when their event arrives, by :func:`format_record`), rendering only the
lines on screen and keeping them, so a run that emits thousands of events a second stays
cheap to show. It is anchored to the tail (``Widget.anchor``) until the operator scrolls
up, so they are not yanked back, and follows again once they scroll to the end.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Sequence
from itertools import takewhile
from pathlib import Path
from typing import Any

from rich.cells import cell_len
from rich.highlighter import Highlighter
from rich.style import Style
from rich.text import Text
from textual.cache import LRUCache
from textual.events import Resize
from textual.geometry import Size
from textual.selection import Selection
from textual.strip import Strip

from tether.tui.components.line_view import LineView
from tether.tui.text import money, one_line

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


class TraceView(LineView, can_focus=True):
    """The selected run's trace, drawn from the app's buffer of the run's lines.

    A line is rendered once, when it first comes on screen, and kept (by its number,
    unique across runs) while it may come back: ``Log`` renders every visible line on
    every repaint, which under a flood is every frame. Showing another run points this
    one view at that run's buffer, and where the operator left each recent run is kept.
    Text can be selected with the mouse, as in ``Log``."""

    BORDER_TITLE = "Trace"
    RUNS_KEPT = 6  # runs whose scroll position is kept
    STRIPS_KEPT = 200  # lines kept rendered: a screenful for a few runs (a line is a dozen objects for the GC)
    DEFAULT_CSS = """
    TraceView {
        background: $surface;
        color: $text;
        overflow: scroll;
        &:focus { background-tint: $foreground 5%; }
    }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.highlighter = KindHighlighter()
        self._run_id: str | None = None
        self._buffer: Sequence[tuple[int, str]] = ()
        self._shown = (0, 0)  # (lines, number of the last) when last synced
        self._left_at: LRUCache[str, float] = LRUCache(self.RUNS_KEPT)  # scroll_y, for runs not followed
        self._strips: LRUCache[tuple[int, Style], Strip] = LRUCache(self.STRIPS_KEPT)

    @property
    def lines(self) -> list[str]:
        return [line for _, line in self._buffer]

    @property
    def line_count(self) -> int:
        return len(self._buffer)

    def on_mount(self) -> None:
        self.anchor()  # follow the tail; scrolling up releases it, scrolling to the end re-anchors
        follow_tail(self)

    def on_resize(self, event: Resize) -> None:
        follow_tail(self)

    def show(self, run_id: str | None, buffer: Sequence[tuple[int, str]]) -> None:
        """Show ``run_id``'s trace lines, ``buffer`` (numbered, oldest first, bounded: the
        oldest are dropped as new ones come); for the run already shown, what changed."""
        if run_id != self._run_id:
            if self._run_id is not None:
                if is_following(self):
                    self._left_at.discard(self._run_id)
                else:
                    self._left_at.set(self._run_id, self.scroll_y)
            self._run_id, self._buffer, self._shown = run_id, buffer, (0, 0)
            left_at = self._left_at.get(run_id) if run_id is not None else None
            self._set_height()
            if left_at is None:
                self.anchor()
            else:
                self.scroll_to(y=left_at, animate=False, immediate=True)  # releases the anchor
            return
        self._buffer = buffer
        count, last = self._shown
        if (len(buffer), buffer[-1][0] if buffer else 0) == self._shown:
            return
        # line numbers increase but are not contiguous (one counter for every buffer)
        added = sum(1 for _ in takewhile(lambda item: item[0] > last, reversed(buffer)))
        dropped = count + added - len(buffer)
        self._set_height()
        if dropped > 0 and not is_following(self):  # an operator reading back keeps their lines
            self.scroll_to(y=max(0, self.scroll_y - dropped), animate=False, immediate=True)
        follow_tail(self)

    def _set_height(self) -> None:
        buffer = self._buffer
        self._shown = (len(buffer), buffer[-1][0] if buffer else 0)
        self.virtual_size = Size(0, len(buffer))
        self.refresh()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        line_no = scroll_y + y
        width = self.scrollable_content_region.width
        style = self.base_style
        if line_no >= len(self._buffer):
            return Strip.blank(width, style)
        number, line = self._buffer[line_no]
        selection = self.text_selection
        if selection is None:
            strip = self._strips.get((number, style))
            if strip is None:
                strip = self._render(line, style)
                self._strips.set((number, style), strip)
        else:
            strip = self._render(line, style, selection.get_span(line_no))
        return strip.crop_extend(scroll_x, scroll_x + width, style).apply_offsets(scroll_x, line_no)

    def _render(self, line: str, style: Style, selected: tuple[int, int] | None = None) -> Strip:
        text = Text(line, no_wrap=True)
        text.stylize(style)
        text = self.highlighter(text)
        if selected is not None:
            start, end = selected
            text.stylize(self.screen.get_component_rich_style("screen--selection"),
                         start, len(text) if end == -1 else end)
        return Strip(text.render(self.app.console), cell_len(line))

    def get_selection(self, selection: Selection) -> tuple[str, str] | None:
        return selection.extract("\n".join(self.lines)), "\n"

    def selection_updated(self, selection: Selection | None) -> None:
        self.refresh()


def is_following(widget: Any) -> bool:
    """Whether an anchored view still follows its tail (the operator did not scroll up)."""
    return bool(widget.is_anchored and not getattr(widget, "_anchor_released", False))


def follow_tail(widget: Any) -> None:
    """Keep an anchored view at the end after new content (the anchor is released when
    the operator scrolls up, and then this does nothing)."""
    if is_following(widget):
        # now: a later scroll would override a position restored meanwhile (the views'
        # sizes are set at once, see line_view)
        widget.scroll_end(animate=False, immediate=True, x_axis=False)

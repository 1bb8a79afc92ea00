"""The live trace of the selected run: one line per event, following the tail.

The view draws the app's bounded buffer of the run's lines (strings, never markup,
formatted once, when their event arrives, by :func:`tether.vocab.wording.format_record`, the
wording ``tether watch`` prints too), rendering only the lines on screen and keeping
them, so a run that emits thousands of events a second stays cheap to show. It is
anchored to the tail (``Widget.anchor``) until the operator scrolls up, so they are not
yanked back, and follows again once they scroll to the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import takewhile
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

from tether.store.trace import tail_records
from tether.tui.widgets.line_view import LineView
from tether.tui.state.pump import MAX_LINES
from tether.vocab.wording import KIND_WIDTH, describe, format_record

__all__ = ["KIND_STYLES", "KIND_WIDTH", "MAX_LINES", "TraceView", "describe", "follow_tail", "format_record",
           "is_following", "tail_records"]

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
    "agent_session": "bold blue",
    "plan": "blue",
    "agent_commands": "blue",
    "thought": "dim italic",
    "file_write": "green",
    "warning": "bold yellow",
}
WHOLE_LINE = {"thought": "dim italic"}  # a thought reads as an aside: the whole line is dimmed


class KindHighlighter(Highlighter):
    def highlight(self, text: Text) -> None:
        plain = text.plain
        found: tuple[int, str, str] | None = None  # the kind word nearest the start (a thought's "turn 1" is not one)
        for kind, style in KIND_STYLES.items():
            at = plain.find(kind + " ")
            if 0 <= at < 40 and (found is None or at < found[0]):
                found = (at, kind, style)
        if found is not None:
            at, kind, style = found
            text.stylize(WHOLE_LINE.get(kind, style), at, len(plain) if kind in WHOLE_LINE else at + len(kind))
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

"""The transcript of the selected run: messages, tool calls, results and decisions in words.

Incremental: the transcript of a live run only grows, so each refresh adds the messages
since the last one; a change of run renders it again, and a stop or resume replaces only
the footer. Only the last :attr:`TranscriptView.MAX_MESSAGES` messages are kept (a
1,000-turn run has 2,000 of them); ``tether show RUN_ID`` prints them all.

Virtualised: the view keeps one renderable per message and the number of lines it wraps
to, and renders lines only for the messages on screen (a few dozen kept, least recently
shown dropped). A ``RichLog`` keeps every wrapped line as a rendered strip; thousands of
them per kept view made the cyclic garbage collector's full passes, which stall the
screen, several times longer.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from itertools import accumulate
from typing import Any

from rich.console import Group
from rich.padding import Padding
from rich.segment import Segment
from rich.text import Text
from textual.events import Resize
from textual.geometry import Size
from textual.strip import Strip

from core.state import RunState
from tui.components.line_view import LineView
from tui.components.trace_view import follow_tail
from tui.text import clean, one_line

ROLE_STYLES = {
    "system": "dim",
    "user": "bold green",
    "assistant": "bold cyan",
    "tool": "bold magenta",
}
TOOL_LINES = 24
MIN_WIDTH = 20  # narrower panes still wrap at this width (and scroll sideways)
TOOL_CHARS = 4000


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def render_message(message: dict[str, Any], names: dict[str, str]) -> Text | Group:
    role = str(message.get("role", "?"))
    out = Text()
    text = _content(message)
    if role == "system":
        out.append("system  ", style=ROLE_STYLES["system"])
        out.append(one_line(text, 100), style="dim")
        return out
    if role == "tool":
        call_id = str(message.get("tool_call_id", ""))
        out.append("  ← ", style="magenta")
        out.append(clean(names.get(call_id, "tool")), style=ROLE_STYLES["tool"])
        out.append(f"  {clean(call_id)}", style="dim")
        body = clean(text) if text else "(empty result: nothing was written for this call)"
        lines = body.split("\n")
        joined = "\n".join(lines[:TOOL_LINES])
        if len(joined) > TOOL_CHARS:
            joined = joined[:TOOL_CHARS] + "…"
        result = Text(joined, style="italic yellow" if _is_decision(body) else "")
        if len(lines) > TOOL_LINES:
            result.append(f"\n… {len(lines) - TOOL_LINES} more lines", style="dim")
        return ToolBlock(out, result)
    out.append(f"{role}  ", style=ROLE_STYLES.get(role, "bold"))
    if text:
        out.append(clean(text))
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        call_id = str(call.get("id", ""))
        names[call_id] = str(fn.get("name", ""))
        out.append("\n  → ", style="cyan")
        out.append(clean(fn.get("name", "")), style="bold")
        out.append(" ")
        out.append(one_line(fn.get("arguments") or "{}", 400))
        out.append(f"  {clean(call_id)}", style="dim")
    return out


class ToolBlock(Group):
    """A tool result: a heading line and the result, indented (wrapped lines stay indented)."""

    def __init__(self, heading: Text, body: Text) -> None:
        super().__init__(heading, Padding(body, (0, 0, 0, 4)))
        self.plain = heading.plain + "\n" + body.plain


def _is_decision(text: str) -> bool:
    return text.startswith(("The operator declined", "Approved by the operator", "cancelled by the operator"))


class TranscriptView(LineView, can_focus=True):
    BORDER_TITLE = "Transcript"
    MAX_MESSAGES = 200
    RENDERED_KEPT = 64  # messages whose wrapped lines are kept (those on screen and a few more)
    DEFAULT_CSS = """
    TranscriptView {
        background: $surface;
        color: $foreground;
        overflow-y: scroll;
        &:focus { background-tint: $foreground 5%; }
    }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._run_id: str | None = None
        self._count = 0  # messages of the run rendered so far
        self._hidden = 0  # of those, not kept (the oldest)
        self._footer: str | None = None  # plain text of the footer shown (always the last item)
        self._names: dict[str, str] = {}
        # what is shown: one renderable per item, with a stable id and its height at _width
        self._items: list[Text | Group] = []
        self._ids: list[int] = []
        self._heights: list[int] = []
        self._starts: list[int] | None = None  # first line of each item (None: to compute)
        self._next_id = 0
        self._width = 0
        self._rendered: OrderedDict[int, list[Strip]] = OrderedDict()

    def on_mount(self) -> None:
        self.anchor()  # follow the tail until the operator scrolls up
        follow_tail(self)

    def on_resize(self, event: Resize) -> None:
        self._set_width(self.scrollable_content_region.width)
        follow_tail(self)

    # ---- what is shown -------------------------------------------------------------
    def show(self, state: RunState | None, footer: Text | None = None) -> None:
        """Show ``state``'s transcript and, under it, ``footer`` (how the run stopped).

        Another run, or a transcript that shrank, is rendered again; otherwise only the new
        messages are added, and a changed footer replaces the old one."""
        if state is None:
            if self._run_id is not None:
                self._reset()
            return
        messages = state.messages
        footer_plain = footer.plain if footer is not None else None
        if state.run_id != self._run_id or len(messages) < self._count:
            self._reset()
            self._run_id = state.run_id
            self.anchor()
        elif footer_plain == self._footer and len(messages) == self._count:
            return
        self._drop_footer()
        new = messages[self._count:]
        skipped = max(0, len(new) - self.MAX_MESSAGES)
        if skipped:  # names of calls answered in the part shown but made before it
            for m in new[:skipped]:
                for call in m.get("tool_calls") or ():
                    self._names[str(call.get("id", ""))] = str((call.get("function") or {}).get("name", ""))
        for message in new[skipped:]:
            self._add(render_message(message, self._names))
        self._count = len(messages)
        self._hidden += skipped
        self._trim()
        if footer is not None:
            self._add(footer)
            self._footer = footer_plain
        self._changed()
        follow_tail(self)

    def _reset(self) -> None:
        self._run_id = None
        self._count = self._hidden = 0
        self._footer = None
        self._names = {}
        self._items.clear()
        self._ids.clear()
        self._heights.clear()
        self._rendered.clear()
        self._changed()

    def _add(self, item: Text | Group) -> None:
        self._items.append(item)
        self._ids.append(self._next_id)
        self._next_id += 1
        self._heights.append(len(self._lines_of(len(self._items) - 1)) if self._width else 0)

    def _drop_footer(self) -> None:
        if self._footer is not None and self._items:
            self._items.pop()
            self._heights.pop()
            self._rendered.pop(self._ids.pop(), None)
        self._footer = None

    def _trim(self) -> None:
        """Keep the newest MAX_MESSAGES messages, with a line saying how many are not shown."""
        has_notice = bool(self._items) and self._ids[0] < 0
        excess = len(self._items) - has_notice - self.MAX_MESSAGES
        if excess > 0:
            start = int(has_notice)
            for item_id in self._ids[start:start + excess]:
                self._rendered.pop(item_id, None)
            del self._items[start:start + excess], self._ids[start:start + excess]
            del self._heights[start:start + excess]
            self._hidden += excess
        if len(self._names) > 2 * self.MAX_MESSAGES:  # results follow their calls: old names are done with
            for call_id in list(self._names)[: len(self._names) - self.MAX_MESSAGES]:
                del self._names[call_id]
        if self._hidden:
            notice = Text(f"… {self._hidden} earlier messages not shown (tether show {one_line(self._run_id)})",
                          style="dim italic")
            if has_notice:
                self._rendered.pop(self._ids[0], None)
                self._items[0], self._ids[0] = notice, -1 - self._next_id
            else:
                self._items.insert(0, notice)
                self._ids.insert(0, -1 - self._next_id)
                self._heights.insert(0, 0)
            self._next_id += 1
            self._heights[0] = len(self._lines_of(0)) if self._width else 0

    # ---- lines --------------------------------------------------------------------------
    def _set_width(self, width: int) -> None:
        width = max(width, MIN_WIDTH)
        if width == self._width:
            return
        self._width = width
        self._rendered.clear()
        self._heights = [len(self._lines_of(i)) for i in range(len(self._items))]
        self._changed()

    def _lines_of(self, index: int) -> list[Strip]:
        """The wrapped lines of item ``index`` at the current width (kept for a while)."""
        item_id = self._ids[index]
        strips = self._rendered.get(item_id)
        if strips is not None:
            self._rendered.move_to_end(item_id)
            return strips
        console = self.app.console
        lines = Segment.split_lines(console.render(self._items[index], console.options.update_width(self._width)))
        strips = Strip.from_lines(list(lines)) or [Strip.blank(self._width)]
        self._rendered[item_id] = strips
        while len(self._rendered) > self.RENDERED_KEPT:
            self._rendered.popitem(last=False)
        return strips

    def _changed(self) -> None:
        self._starts = None
        self.virtual_size = Size(self._width, sum(self._heights))
        self.refresh()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        line_no = scroll_y + y
        if self._starts is None:
            self._starts = list(accumulate(self._heights, initial=0))[:-1]
        style = self.base_style
        if not self._items or line_no >= self.virtual_size.height:
            return Strip.blank(width, style)
        index = bisect_right(self._starts, line_no) - 1
        strip = self._lines_of(index)[line_no - self._starts[index]]
        return strip.crop_extend(scroll_x, scroll_x + width, style).apply_style(style)

    @property
    def line_count(self) -> int:
        """Wrapped lines of what is shown."""
        return self.virtual_size.height

    @property
    def items(self) -> list[str]:
        """The plain text of each item shown (note, messages, footer), before wrapping."""
        return [item.plain for item in self._items]

    @property
    def text(self) -> str:
        return "\n".join(self.items)

    @property
    def screen_text(self) -> str:
        """The lines as wrapped on screen."""
        return "\n".join(strip.text for i in range(len(self._items)) for strip in self._lines_of(i))

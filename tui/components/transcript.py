"""The transcript of the selected run: messages, tool calls, results and decisions in words.

Rendering is incremental: the transcript of a live run only grows, so each refresh writes
the messages added since the last one. A change of run or of status renders it again.
Only the last :attr:`TranscriptView.MAX_MESSAGES` messages are shown (a 1,000-turn run
has 2,000 of them); ``tether show RUN_ID`` prints them all.
"""

from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.padding import Padding
from rich.text import Text
from textual.events import Resize
from textual.geometry import Size
from textual.widgets import RichLog

from core.state import RunState
from tui.components.trace_view import follow_tail
from tui.text import clean, one_line

ROLE_STYLES = {
    "system": "dim",
    "user": "bold green",
    "assistant": "bold cyan",
    "tool": "bold magenta",
}
TOOL_LINES = 24
MAX_LINES = 4000  # rendered lines kept per view (a few hundred messages)
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


class TranscriptView(RichLog):
    BORDER_TITLE = "Transcript"
    MAX_MESSAGES = 200

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(wrap=True, markup=False, highlight=False, auto_scroll=False, min_width=20,
                         max_lines=MAX_LINES, **kwargs)
        self._run_id: str | None = None
        self._count = 0
        self._footer: str | None = None  # plain text of the footer shown
        self._footer_lines: int | None = 0  # strips it took (None: not known yet)
        self._names: dict[str, str] = {}
        self._plain: list[str] = []

    def on_mount(self) -> None:
        self.anchor()  # follow the tail until the operator scrolls up
        follow_tail(self)

    def on_resize(self, event: Resize) -> None:
        # RichLog renders the lines written before its size was known on its first resize
        # (its own handler runs too); keep the tail in view once they are there.
        follow_tail(self)

    def _put(self, text: Text | Group, scroll_end: bool | None = None) -> None:
        self._plain.append(text.plain)
        if len(self._plain) > self.MAX_MESSAGES + 2:
            del self._plain[: len(self._plain) - self.MAX_MESSAGES - 2]
        self.write(text, scroll_end=scroll_end)

    def show(self, state: RunState | None, footer: Text | None = None) -> None:
        """Show ``state``'s transcript and, under it, ``footer`` (how the run stopped).

        Another run, or a transcript that shrank, is rendered again; otherwise only the new
        messages are written, and a changed footer replaces the old one in place (a stop or
        a resume does not re-render hundreds of messages)."""
        if state is None:
            if self._run_id is not None:
                self._reset()
            return
        messages = state.messages
        footer_plain = footer.plain if footer is not None else None
        footer_changed = footer_plain != self._footer
        if (state.run_id != self._run_id or len(messages) < self._count
                or (footer_changed and self._footer_lines is None)):
            self._render_all(state, footer)
            return
        if footer_changed:
            self._drop_footer()
        if len(messages) > self._count:
            new = messages[self._count:]
            if len(new) > self.MAX_MESSAGES:
                new = new[-self.MAX_MESSAGES:]
            for message in new:
                self._put(render_message(message, self._names), scroll_end=False)
            self._count = len(messages)
        if footer_changed and footer is not None:
            self._put_footer(footer)
        follow_tail(self)

    def _reset(self) -> None:
        self.clear()
        self._plain.clear()
        self._run_id = None
        self._count = 0
        self._footer, self._footer_lines = None, 0

    def _render_all(self, state: RunState, footer: Text | None) -> None:
        self._reset()
        self._run_id = state.run_id
        self._names = {}
        messages = state.messages
        start = max(0, len(messages) - self.MAX_MESSAGES)
        if start:
            # names of calls answered in the shown part but made before it
            for m in messages[:start]:
                for call in m.get("tool_calls") or ():
                    self._names[str(call.get("id", ""))] = str((call.get("function") or {}).get("name", ""))
            self._put(Text(f"… {start} earlier messages not shown (tether show {one_line(state.run_id)})",
                           style="dim italic"))
        for message in messages[start:]:
            self._put(render_message(message, self._names))
        self._count = len(messages)
        if footer is not None:
            self._put_footer(footer)
        self.anchor()

    def _put_footer(self, footer: Text) -> None:
        before = len(self.lines)
        self._put(footer, scroll_end=False)
        self._footer = footer.plain
        # Lines written before the size is known are rendered later: their count is unknown.
        self._footer_lines = len(self.lines) - before if self._size_known else None

    def _drop_footer(self) -> None:
        if self._footer is None:
            return
        if self._footer_lines:
            del self.lines[-self._footer_lines:]
            self._line_cache.clear()
            self.virtual_size = Size(self.virtual_size.width, len(self.lines))
            self.refresh()
        if self._plain and self._plain[-1] == self._footer:
            self._plain.pop()
        self._footer, self._footer_lines = None, 0

    @property
    def text(self) -> str:
        """The plain text of what is shown, before wrapping (for tests)."""
        return "\n".join(self._plain)

    @property
    def screen_text(self) -> str:
        """The rendered lines, as wrapped on screen."""
        return "\n".join(strip.text for strip in self.lines)

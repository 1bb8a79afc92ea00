"""The transcript of the selected run: messages, tool calls, results and decisions in words.

Rendering is incremental: the transcript of a live run only grows, so each refresh writes
the messages added since the last one. A change of run or of status renders it again.
Only the last :attr:`TranscriptView.MAX_MESSAGES` messages are shown (a 1,000-turn run
has 2,000 of them); ``tether show RUN_ID`` prints them all.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import RichLog

from core.state import RunState
from tui.text import clean, one_line

ROLE_STYLES = {
    "system": "dim",
    "user": "bold green",
    "assistant": "bold cyan",
    "tool": "bold magenta",
}
TOOL_LINES = 24
TOOL_CHARS = 4000


def _content(message: dict[str, Any]) -> str:
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content)
    return str(content)


def render_message(message: dict[str, Any], names: dict[str, str]) -> Text:
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
        out.append(f"  {clean(call_id)}\n", style="dim")
        body = clean(text) if text else "(empty result: nothing was written for this call)"
        lines = body.split("\n")
        shown = lines[:TOOL_LINES]
        joined = "\n".join("    " + line for line in shown)
        if len(joined) > TOOL_CHARS:
            joined = joined[:TOOL_CHARS] + "…"
        style = "italic yellow" if _is_decision(body) else ""
        out.append(joined, style=style)
        if len(lines) > TOOL_LINES:
            out.append(f"\n    … {len(lines) - TOOL_LINES} more lines", style="dim")
        return out
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


def _is_decision(text: str) -> bool:
    return text.startswith(("The operator declined", "Approved by the operator", "cancelled by the operator"))


class TranscriptView(RichLog):
    BORDER_TITLE = "Transcript"
    MAX_MESSAGES = 300

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(wrap=True, markup=False, highlight=False, auto_scroll=False, min_width=20,
                         max_lines=20_000, **kwargs)
        self._key: tuple[Any, ...] | None = None
        self._count = 0
        self._names: dict[str, str] = {}
        self._plain: list[str] = []

    def _put(self, text: Text, scroll_end: bool | None = None) -> None:
        self._plain.append(text.plain)
        if len(self._plain) > self.MAX_MESSAGES + 2:
            del self._plain[: len(self._plain) - self.MAX_MESSAGES - 2]
        self.write(text, scroll_end=scroll_end)

    def show(self, state: RunState | None, key: tuple[Any, ...], footer: Text | None = None) -> None:
        """Show ``state``'s transcript; ``key`` changes whenever a full re-render is due."""
        if state is None:
            if self._key is not None:
                self.clear()
                self._plain.clear()
                self._key = None
            return
        messages = state.messages
        if key != self._key or len(messages) < self._count:
            self.clear()
            self._plain.clear()
            self._key = key
            self._names = {}
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
                self._put(footer)
            self.scroll_end(animate=False, immediate=False)
            return
        if len(messages) > self._count:
            follow = self.is_vertical_scroll_end or self.max_scroll_y == 0
            new = messages[self._count:]
            if len(new) > self.MAX_MESSAGES:
                new = new[-self.MAX_MESSAGES:]
            for message in new:
                self._put(render_message(message, self._names), scroll_end=False)
            self._count = len(messages)
            if follow:
                self.scroll_end(animate=False, immediate=False)

    @property
    def text(self) -> str:
        """The plain text of what is shown, before wrapping (for tests)."""
        return "\n".join(self._plain)

    @property
    def screen_text(self) -> str:
        """The rendered lines, as wrapped on screen."""
        return "\n".join(strip.text for strip in self.lines)

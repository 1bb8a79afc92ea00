"""The transcript of the selected run: messages, tool calls, results and decisions in words.

Incremental: the transcript of a live run only grows, so each refresh adds the messages
since the last one, and a stop or resume replaces only the footer. The transcripts of the
runs shown last are kept (:class:`TranscriptDocument`): coming back to one adds only what
its run did since. Only the last :attr:`TranscriptView.MAX_MESSAGES` messages are kept (a
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

from rich.console import Console, Group
from rich.padding import Padding
from rich.segment import Segment
from rich.text import Text
from textual.binding import Binding
from textual.cache import LRUCache
from textual.events import Resize
from textual.geometry import Size
from textual.strip import Strip

from tether.observe.report import SYSTEM_NOT_SENT
from tether.vocab.state import RunState
from tether.tui.state.agent_notes import Entry, Note, place
from tether.tui.widgets.line_view import LineView
from tether.tui.widgets.trace_view import follow_tail, is_following
from tether.tui.state.text import clean, one_line

ROLE_STYLES = {
    "system": "dim",
    "user": "bold green",
    "assistant": "bold cyan",
    "tool": "bold magenta",
}
TOOL_LINES = 24
MIN_WIDTH = 20  # narrower panes still wrap at this width (and scroll sideways)
TOOL_CHARS = 4000
THOUGHT_FOLDED_CHARS = 100  # a folded thought: its first line, cut here
THOUGHT_CHARS = 4000  # an unfolded one: at most this much (tether trace RUN_ID has it all)


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
    if role == "user" and message.get("tether") == "rejection":
        out.append("(sent by Tether as the agent's next prompt: ACP has no field for a rejection's reason)\n  ",
                   style="dim")
        out.append(clean(text), style="italic yellow")
        return out
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


def render_note(note: Note, unfolded: bool = False, workspace: str | None = None) -> Text | Group:
    """A line of an ACP agent's own (:mod:`tether.tui.state.agent_notes`): who it is, a thought
    (folded to one dim line unless ``unfolded``), a file it wrote (its path from the
    agent's ``workspace``, when it is inside: the trace has it whole), a warning."""
    out = Text()
    if note.kind == "session":
        out.append("agent  ", style="bold blue")
        out.append(clean(note.text), style="bold")
        out.append(f"  {one_line(note.detail, 80)}", style="dim")
        return out
    if note.kind == "shell":  # a shell call's output, live, then its exit code
        for line in note.text.rstrip("\n").split("\n"):
            out.append(f"  │ {clean(line)}\n", style="dim")
        out.append(f"  └ {note.detail}", style="bold red" if note.failed else "dim")
        return out
    if note.kind == "warning":
        out.append("  ⚠ warning ", style="bold yellow")
        out.append(clean(note.text), style="yellow")
        return out
    if note.kind == "file_write":
        if note.failed:
            out.append("  ✖ refused ", style="bold red")
            out.append(clean(note.text))
            out.append(f": {one_line(note.detail, 300)}", style="red")
        else:
            out.append("  ✎ wrote ", style="bold green")
            out.append(clean(_inside(note.text, workspace)))
            out.append(f"  ({note.detail})", style="dim")
        return out
    text = note.text.strip()
    if not unfolded:
        first = text.split("\n", 1)[0]
        out.append("  ▸ thought  ", style="dim")
        out.append(one_line(first, THOUGHT_FOLDED_CHARS), style="dim italic")
        if len(first) > THOUGHT_FOLDED_CHARS or "\n" in text:
            out.append("  (t unfolds)", style="dim")
        return out
    out.append("  ▾ thought", style="dim")
    body = clean(text if len(text) <= THOUGHT_CHARS else text[:THOUGHT_CHARS] + "…")
    return ToolBlock(out, Text(body, style="dim italic"))


def _inside(path: str, workspace: str | None) -> str:
    """``path`` from ``workspace`` when it is inside it, else as it is."""
    if workspace:
        root = workspace.rstrip("/") + "/"
        if path.startswith(root) and len(path) > len(root):
            return path[len(root):]
    return path


PLAN_MARKS = {"completed": ("[x]", "green"), "in_progress": ("[~]", "bold yellow")}
PLAN_ENTRIES = 30  # a longer plan shows its first 30 entries and says how many more


def plan_text(entries: list[dict[str, Any]]) -> Text:
    """An ACP agent's plan as a checklist: ``[x]`` done, ``[~]`` in progress, ``[ ]`` to do."""
    done = sum(1 for e in entries if e.get("status") == "completed")
    out = Text("plan  ", style="bold blue")
    out.append(f"{done} of {len(entries)} done (the agent's latest plan)", style="dim")
    for entry in entries[:PLAN_ENTRIES]:
        status = str(entry.get("status") or "pending")
        mark, style = PLAN_MARKS.get(status, ("[ ]", "dim"))
        out.append("\n  ")
        out.append(f"{mark} ", style=style)
        out.append(one_line(entry.get("content") or "", 200), style="dim" if status == "completed" else "")
        if entry.get("priority") == "high":
            out.append("  high", style="red")
    if len(entries) > PLAN_ENTRIES:
        out.append(f"\n  … {len(entries) - PLAN_ENTRIES} more", style="dim")
    return out


class ToolBlock(Group):
    """A tool result: a heading line and the result, indented (wrapped lines stay indented)."""

    def __init__(self, heading: Text, body: Text) -> None:
        super().__init__(heading, Padding(body, (0, 0, 0, 4)))
        self.plain = heading.plain + "\n" + body.plain


def _is_decision(text: str) -> bool:
    return text.startswith(("The operator declined", "Approved by the operator", "cancelled by the operator"))


class TranscriptDocument:
    """One run's transcript as shown: a renderable per item (a note of the messages left
    out, the messages, the footer), the number of lines each wraps to at ``width``, and
    the wrapped lines of a few dozen items (those on screen and a few more).

    The view keeps the documents of the runs shown last, and where the operator left each
    one, so coming back to a run renders only what it added since."""

    def __init__(self, run_id: str, console: Console, max_messages: int, rendered_kept: int) -> None:
        self.run_id = run_id
        self.console = console
        self.max_messages = max_messages
        self.rendered_kept = rendered_kept
        self.scroll_y = 0.0  # where the operator left it, when not following the tail
        self.following = True
        self.width = 0
        self.workspace: str | None = None  # an ACP agent's folder: the paths it wrote are shown from there
        self.clear()

    def clear(self) -> None:
        """Forget what was rendered (the transcript shrank: it is rendered again)."""
        self.count = 0  # messages of the run rendered so far
        self.hidden = 0  # of those, not kept (the oldest)
        self.footer: str | None = None  # plain text of the footer shown (always the last item)
        self.entries: list[Entry] = []  # with notes: what was added, in order (messages and notes)
        self.names: dict[str, str] = {}
        self.items: list[Text | Group] = []
        self.ids: list[int] = []
        self.heights: list[int] = []
        self.starts: list[int] | None = None  # first line of each item (None: to compute)
        self.next_id = 0
        self.rendered: OrderedDict[int, list[Strip]] = OrderedDict()
        self.unfolded = False

    @property
    def height(self) -> int:
        return sum(self.heights)

    def update(self, messages: list[dict[str, Any]], footer: Text | None, notes: Any = None,
               unfolded: bool = False) -> bool:
        """Add the messages since the last update and put ``footer`` under them; False when
        nothing changed. ``notes``: an ACP agent's lines among the messages (see
        :meth:`_update_noted`); ``unfolded``: its thoughts shown whole."""
        if notes is not None or self.entries:
            if not self.entries and self.count:  # shown without notes so far: all of it again, in order
                self.clear()
            return self._update_noted(messages, footer, list(notes or ()), unfolded)
        footer_plain = footer.plain if footer is not None else None
        if footer_plain == self.footer and len(messages) == self.count:
            return False
        self._drop_footer()
        new = messages[self.count:]
        skipped = max(0, len(new) - self.max_messages)
        if skipped:  # names of calls answered in the part shown but made before it
            for m in new[:skipped]:
                for call in m.get("tool_calls") or ():
                    self.names[str(call.get("id", ""))] = str((call.get("function") or {}).get("name", ""))
        for message in new[skipped:]:
            self._add(render_message(message, self.names))
        self.count = len(messages)
        self.hidden += skipped
        self._trim()
        if footer is not None:
            self._add(footer)
            self.footer = footer_plain
        self.starts = None
        return True

    def _update_noted(self, messages: list[dict[str, Any]], footer: Text | None, notes: list[Note],
                      unfolded: bool) -> bool:
        """The messages and the notes in their order (:func:`tether.tui.state.agent_notes.place`):
        what came since is added; a note placed before what is shown (read back from history,
        or the thoughts folded the other way) has the transcript rendered again."""
        footer_plain = footer.plain if footer is not None else None
        entries, by_key = place(messages, notes)
        done = self.entries
        if unfolded != self.unfolded or entries[:len(done)] != done or len(messages) < self.count:
            self.clear()
            self.unfolded = unfolded
            done = self.entries
        if footer_plain == self.footer and len(entries) == len(done):
            return False
        self._drop_footer()
        new = entries[len(done):]
        skipped = max(0, len(new) - self.max_messages)
        for kind, at in new[:skipped]:
            if kind == "m":
                for call in messages[at].get("tool_calls") or ():
                    self.names[str(call.get("id", ""))] = str((call.get("function") or {}).get("name", ""))
        for kind, at in new[skipped:]:
            if kind == "m" and messages[at].get("role") == "system":  # the agent never saw it
                self._add(Text(f"system  {SYSTEM_NOT_SENT}", style="dim"))
            elif kind == "m":
                self._add(render_message(messages[at], self.names))
            else:
                self._add(render_note(by_key[at], unfolded, self.workspace))
        self.entries = entries
        self.count = len(messages)
        self.hidden += skipped
        self._trim()
        if footer is not None:
            self._add(footer)
            self.footer = footer_plain
        self.starts = None
        return True

    def _add(self, item: Text | Group) -> None:
        self.items.append(item)
        self.ids.append(self.next_id)
        self.next_id += 1
        self.heights.append(len(self.lines_of(len(self.items) - 1)) if self.width else 0)

    def _drop_footer(self) -> None:
        if self.footer is not None and self.items:
            self.items.pop()
            self.heights.pop()
            self.rendered.pop(self.ids.pop(), None)
        self.footer = None

    def _trim(self) -> None:
        """Keep the newest ``max_messages`` messages, with a line saying how many are not shown."""
        has_notice = bool(self.items) and self.ids[0] < 0
        excess = len(self.items) - has_notice - self.max_messages
        if excess > 0:
            start = int(has_notice)
            for item_id in self.ids[start:start + excess]:
                self.rendered.pop(item_id, None)
            del self.items[start:start + excess], self.ids[start:start + excess]
            del self.heights[start:start + excess]
            self.hidden += excess
        if len(self.names) > 2 * self.max_messages:  # results follow their calls: old names are done with
            for call_id in list(self.names)[: len(self.names) - self.max_messages]:
                del self.names[call_id]
        if self.hidden:
            notice = Text(f"… {self.hidden} earlier messages not shown (tether show {one_line(self.run_id)})",
                          style="dim italic")
            if has_notice:
                self.rendered.pop(self.ids[0], None)
                self.items[0], self.ids[0] = notice, -1 - self.next_id
            else:
                self.items.insert(0, notice)
                self.ids.insert(0, -1 - self.next_id)
                self.heights.insert(0, 0)
            self.next_id += 1
            self.heights[0] = len(self.lines_of(0)) if self.width else 0

    def set_width(self, width: int) -> bool:
        """Wrap at ``width`` cells; False when it already does."""
        width = max(width, MIN_WIDTH)
        if width == self.width:
            return False
        self.width = width
        self.rendered.clear()
        self.heights = [len(self.lines_of(i)) for i in range(len(self.items))]
        self.starts = None
        return True

    def lines_of(self, index: int) -> list[Strip]:
        """The wrapped lines of item ``index`` (kept for a while)."""
        item_id = self.ids[index]
        strips = self.rendered.get(item_id)
        if strips is not None:
            self.rendered.move_to_end(item_id)
            return strips
        console = self.console
        lines = Segment.split_lines(console.render(self.items[index], console.options.update_width(self.width)))
        strips = Strip.from_lines(list(lines)) or [Strip.blank(self.width)]
        self.rendered[item_id] = strips
        while len(self.rendered) > self.rendered_kept:
            self.rendered.popitem(last=False)
        return strips

    def line(self, line_no: int) -> Strip:
        """Wrapped line ``line_no`` (0 <= line_no < height)."""
        if self.starts is None:
            self.starts = list(accumulate(self.heights, initial=0))[:-1]
        index = bisect_right(self.starts, line_no) - 1
        return self.lines_of(index)[line_no - self.starts[index]]


class TranscriptView(LineView, can_focus=True):
    """The selected run's transcript. Showing another run swaps the document this one
    view draws, rather than displaying another view: a change of ``display`` costs a
    layout pass of the whole screen."""

    BORDER_TITLE = "Transcript"
    BINDINGS = [Binding("t", "toggle_thoughts", "Thoughts", id="transcript.thoughts",
                        tooltip="Unfold (or fold) the agent's thoughts")]
    MAX_MESSAGES = 200
    RENDERED_KEPT = 64  # messages whose wrapped lines are kept (those on screen and a few more)
    RUNS_KEPT = 6  # documents kept, the least recently shown dropped
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
        self._documents: LRUCache[str, TranscriptDocument] = LRUCache(self.RUNS_KEPT)
        self._document: TranscriptDocument | None = None
        self.unfolded = False
        """An ACP agent's thoughts are shown whole (``t``), rather than one dim line each."""
        self._last: tuple[RunState | None, Text | None, Any] = (None, None, None)

    @property
    def document(self) -> TranscriptDocument | None:
        """What is shown (None: no run)."""
        return self._document

    def on_mount(self) -> None:
        self.anchor()  # follow the tail until the operator scrolls up
        follow_tail(self)

    def on_resize(self, event: Resize) -> None:
        if self._document is not None and self._document.set_width(self.scrollable_content_region.width):
            self._changed()
        follow_tail(self)

    # ---- what is shown -------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "toggle_thoughts":  # greyed out but for a run whose agent thought aloud
            notes = self._last[2]
            return True if notes is not None and any(n.kind == "thought" for n in notes) else None
        return True

    def action_toggle_thoughts(self) -> None:
        self.unfolded = not self.unfolded
        state, footer, notes = self._last
        self.show(state, footer, notes)

    def show(self, state: RunState | None, footer: Text | None = None, notes: Any = None) -> None:
        """Show ``state``'s transcript and, under it, ``footer`` (how the run stopped).
        ``notes``: what its ACP agent said beside it (:class:`tether.tui.state.agent_notes.Note`),
        placed among its messages.

        A run shown recently is shown as it was left, with only its new messages added;
        a changed footer replaces the old one."""
        notes = list(notes) if notes is not None else None  # as it is now: the run's notes grow
        had_thoughts = self._last[2] is not None and any(n.kind == "thought" for n in self._last[2])
        self._last = (state, footer, notes)
        if had_thoughts != (notes is not None and any(n.kind == "thought" for n in notes)):
            self.refresh_bindings()
        if state is None:
            if self._document is not None:
                self._open(None)
            return
        if self._document is None or self._document.run_id != state.run_id:
            document = self._documents.get(state.run_id)
            if document is None:
                document = TranscriptDocument(state.run_id, self.app.console, self.MAX_MESSAGES, self.RENDERED_KEPT)
                self._documents.set(state.run_id, document)
            self._open(document)
        document = self._document
        assert document is not None
        if notes is not None and document.workspace is None:
            ref = state.agent
            document.workspace = str((ref.spec or {}).get("workspace") or "") if ref is not None else None
        if len(state.messages) < document.count:
            document.clear()
            self.anchor()
        if document.update(state.messages, footer, notes, self.unfolded):
            self._changed()
            follow_tail(self)

    def _open(self, document: TranscriptDocument | None) -> None:
        """Draw ``document``, from where the operator left it; remember where they left
        the one shown before."""
        previous = self._document
        if previous is not None:
            previous.following = is_following(self)
            previous.scroll_y = self.scroll_y
        self._document = document
        if document is not None:
            document.set_width(self.scrollable_content_region.width)
        self._changed()
        if document is None or document.following:
            self.anchor()
        else:
            self.scroll_to(y=document.scroll_y, animate=False, immediate=True)  # releases the anchor

    def _changed(self) -> None:
        document = self._document
        self.virtual_size = Size(document.width, document.height) if document is not None else Size(0, 0)
        self.refresh()

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        line_no = scroll_y + y
        style = self.base_style
        document = self._document
        if document is None or not document.items or line_no >= self.virtual_size.height:
            return Strip.blank(width, style)
        return document.line(line_no).crop_extend(scroll_x, scroll_x + width, style).apply_style(style)

    @property
    def line_count(self) -> int:
        """Wrapped lines of what is shown."""
        return self.virtual_size.height

    @property
    def items(self) -> list[str]:
        """The plain text of each item shown (note, messages, footer), before wrapping."""
        return [item.plain for item in self._document.items] if self._document is not None else []

    @property
    def text(self) -> str:
        return "\n".join(self.items)

    @property
    def screen_text(self) -> str:
        """The lines as wrapped on screen."""
        document = self._document
        if document is None:
            return ""
        return "\n".join(strip.text for i in range(len(document.items)) for strip in document.lines_of(i))

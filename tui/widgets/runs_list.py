"""The runs list: every run in the runs dir, children indented under their parent.

A line-API widget rather than a ``DataTable``: a live run changes its turns and cost
several times a second, and a ``DataTable`` re-renders every visible row on any cell
update or cursor move (its line cache is keyed on both). Here each row's line is rendered
once per content, width and highlight, and a change repaints only the lines it touches.
"""

from __future__ import annotations

from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.strip import Strip

from tether.tui.widgets.line_view import LineView
from tether.tui.state.rows import RunRow

__all__ = ["COLUMNS", "RunRow", "RunsList", "row_text"]

COLUMNS = (("status", "Status"), ("run", "Run (scenario-…)"), ("turns", "Turns"), ("cost", "Cost"))
WIDTHS = {"status": 11, "turns": 8, "cost": 8}  # fixed; the run column takes the rest
MIN_RUN_WIDTH = 8
HEADER_LINES = 1


def _fit(text: Text, width: int) -> Text:
    """``text`` cut or padded to exactly ``width`` cells, on one line."""
    out = text.copy()
    out.truncate(width, overflow="ellipsis")
    out.align("right" if text.justify == "right" else "left", width)
    return out


def _columns(width: int) -> list[tuple[str, int]]:
    """The columns that fit in ``width`` with their widths: the run column takes the rest;
    when it would be too narrow, cost and then turns are left out (never shown cut)."""
    keys = [key for key, _ in COLUMNS]
    for drop in ((), ("cost",), ("cost", "turns")):
        shown = [k for k in keys if k not in drop]
        fixed = sum(WIDTHS.get(k, 0) for k in shown) + len(shown) - 1  # a space between columns
        if width - fixed >= MIN_RUN_WIDTH or len(shown) == 2:
            return [(k, WIDTHS.get(k, max(1, width - fixed))) for k in shown]
    raise AssertionError("unreachable")


def row_text(cells: dict[str, Text], width: int) -> Text:
    return Text(" ").join(_fit(cells[key], cell_width) for key, cell_width in _columns(width))


class RunsList(LineView, can_focus=True):
    """A row per run, keyed by run id. The app owns the data; this widget only shows it
    and says which run the operator moved to (:class:`RunsList.Highlighted`).

    A move by the operator is painted when the app answers with :meth:`show_cursor`,
    after it has shown the run moved to: a cursor painted on its own would be a frame of
    its own, and would hold the run's detail back by one or two frames."""

    BORDER_TITLE = "Runs"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "jump(0)", "First run", show=False),
        Binding("end", "jump(-1)", "Last run", show=False),
    ]
    COMPONENT_CLASSES: ClassVar[set[str]] = {"runs-list--header", "runs-list--cursor",
                                             "runs-list--cursor-blurred"}
    DEFAULT_CSS = """
    RunsList {
        overflow-x: hidden;
        background: $surface;
        color: $foreground;
        &:focus { background-tint: $foreground 5%; }
        & > .runs-list--header { text-style: bold; background: $panel; color: $foreground; }
        & > .runs-list--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
            text-style: $block-cursor-text-style;
        }
        & > .runs-list--cursor-blurred {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
        }
    }
    """

    class Highlighted(Message):
        """The operator moved the cursor to ``run_id`` (keys or mouse)."""

        def __init__(self, runs_list: RunsList, run_id: str) -> None:
            super().__init__()
            self.runs_list = runs_list
            self.run_id = run_id

        @property
        def control(self) -> RunsList:
            return self.runs_list

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._rows: dict[str, RunRow] = {}
        self._order: list[str] = []
        self._cursor = 0
        self._lines: dict[tuple[str, int, str], tuple[RunRow, Strip]] = {}  # (run, width, look)
        self._unpainted: set[int] = set()  # rows the cursor left or reached, not repainted yet

    # ---- data -----------------------------------------------------------------------
    @property
    def order(self) -> list[str]:
        return list(self._order)

    @property
    def highlighted_run(self) -> str | None:
        if not self._order or not 0 <= self._cursor < len(self._order):
            return None
        return self._order[self._cursor]

    def set_rows(self, rows: list[RunRow], selected: str | None) -> None:
        """Replace the rows when the set or order of runs changed; otherwise update changed rows."""
        order = [r.run_id for r in rows]
        if order != self._order:
            self._order = order
            self._rows = {r.run_id: r for r in rows}
            self._lines.clear()
            self.virtual_size = Size(0, len(order) + HEADER_LINES)
            self._cursor = order.index(selected) if selected in self._rows else min(self._cursor, len(order) - 1)
            self._cursor = max(0, self._cursor)
            self._unpainted.clear()
            self.refresh()
            self._scroll_to_cursor()
            return
        for row in rows:
            self.update_row(row)

    def update_row(self, row: RunRow) -> None:
        old = self._rows.get(row.run_id)
        if old == row or old is None:
            return
        self._rows[row.run_id] = row
        self._refresh_row(self._order.index(row.run_id))

    def select(self, run_id: str) -> None:
        """Move the cursor to ``run_id`` (the app's selection; no message is posted)."""
        if run_id in self._rows and self.highlighted_run != run_id:
            self._move_to(self._order.index(run_id), announce=False)

    def show_cursor(self) -> None:
        """Paint the cursor where the operator moved it (the app's answer to
        :class:`RunsList.Highlighted`)."""
        for index in self._unpainted:
            self._refresh_row(index)
        self._unpainted.clear()
        self._scroll_to_cursor()

    # ---- moving -------------------------------------------------------------------------
    def _move_to(self, index: int, *, announce: bool = True) -> None:
        if not self._order:
            return
        index = max(0, min(index, len(self._order) - 1))
        if index == self._cursor:
            return
        previous, self._cursor = self._cursor, index
        self._unpainted.update((previous, index))
        if announce:
            self.post_message(self.Highlighted(self, self._order[index]))
        else:
            self.show_cursor()

    def _scroll_to_cursor(self) -> None:
        visible = max(1, self.scrollable_content_region.height - HEADER_LINES)
        top = self.scroll_y
        if self._cursor < top:
            self.scroll_to(y=self._cursor, animate=False, immediate=True)
        elif self._cursor >= top + visible:
            self.scroll_to(y=self._cursor - visible + 1, animate=False, immediate=True)

    def action_cursor(self, step: int) -> None:
        self._move_to(self._cursor + step)

    def action_page(self, direction: int) -> None:
        page = max(1, self.scrollable_content_region.height - HEADER_LINES - 1)
        self._move_to(self._cursor + direction * page)

    def action_jump(self, index: int) -> None:
        self._move_to(index if index >= 0 else len(self._order) - 1)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y < HEADER_LINES:
            return
        index = offset.y - HEADER_LINES + int(self.scroll_y)
        if 0 <= index < len(self._order):
            self._move_to(index)

    def on_focus(self) -> None:
        self._lines.clear()  # the cursor's look follows focus
        self.refresh()

    def on_blur(self) -> None:
        self._lines.clear()
        self.refresh()

    def on_resize(self, event: events.Resize) -> None:
        self._lines.clear()
        self.virtual_size = Size(0, len(self._order) + HEADER_LINES)

    def _refresh_row(self, index: int) -> None:
        y = index - int(self.scroll_y) + HEADER_LINES
        if HEADER_LINES <= y < self.size.height:
            self.refresh(Region(0, y, self.size.width, 1))

    # ---- rendering -----------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if y < HEADER_LINES:
            header = row_text({key: Text(label) for key, label in COLUMNS}, width)
            style = self.get_component_rich_style("runs-list--header")
            return self._strip(header, width, style)
        index = y - HEADER_LINES + int(self.scroll_y)
        if not 0 <= index < len(self._order):
            return Strip.blank(width, self.base_style)
        rid = self._order[index]
        row = self._rows[rid]
        look = "" if index != self._cursor else "cursor" if self.has_focus else "cursor-blurred"
        key = (rid, width, look)
        cached = self._lines.get(key)
        if cached is not None and cached[0] == row:
            return cached[1]
        if look:  # the cursor's colours win over the badge's, as in a table
            strip = self._strip(row_text(row.cells(), width), width, self.base_style,
                                over=self.get_component_rich_style(f"runs-list--{look}"))
        else:
            strip = self._strip(row_text(row.cells(), width), width, self.base_style)
        self._lines[key] = (row, strip)
        return strip

    def _strip(self, text: Text, width: int, style: Style, over: Style | None = None) -> Strip:
        segments = Segment.apply_style(text.render(self.app.console), style, over)
        pad = style + over if over is not None else style
        return Strip(segments).adjust_cell_length(width, pad).simplify()

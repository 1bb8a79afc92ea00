"""Pending approvals across every run: tool, arguments, run, why (three lines each)."""

from __future__ import annotations

from textual.widgets import OptionList
from textual.widgets.option_list import Option

from tether.tui.state.rows import Pending

__all__ = ["ApprovalsPane", "Pending"]


class ApprovalsPane(OptionList):
    BORDER_TITLE = "Pending approvals"

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._items: list[Pending] = []

    def on_mount(self) -> None:
        self.border_subtitle = "none"

    @property
    def items(self) -> list[Pending]:
        return list(self._items)

    @property
    def current(self) -> Pending | None:
        index = self.highlighted
        if index is None or not 0 <= index < len(self._items):
            return None
        return self._items[index]

    def set_items(self, items: list[Pending]) -> None:
        if items == self._items:
            return
        keep = self.current
        with self.prevent(OptionList.OptionHighlighted):
            self.clear_options()
            self.add_options([Option(p.prompt(), id=f"{p.run_id}\x00{p.call_id}") for p in items])
            self._items = list(items)
            if keep in self._items:
                self.highlighted = self._items.index(keep)
            elif items:
                self.highlighted = 0
        self.border_subtitle = f"{len(items)} waiting · Enter approves" if items else "none"

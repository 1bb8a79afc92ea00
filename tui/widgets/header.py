"""The console's header: Textual's, with a subtitle that repaints the title alone.

The subtitle counts runs (``4 runs · 1 running · 0 waiting for approval``) and changes
whenever a run starts or stops. Set as ``App.sub_title``, a reactive, it repainted the whole
screen, and Textual's title (a ``Static``) then asked for a layout pass as well: the frame
after a run started carried both, so the first key pressed on a new run was slower to show
than the keys after it. The title's size is fixed by CSS (the
header's width, one line), so no layout can change.
"""

from __future__ import annotations

from collections.abc import Iterator

from textual.app import App
from textual.visual import VisualType
from textual.widget import Widget
from textual.widgets import Header

from tether.tui.textual_internals import HeaderTitle


class _FixedTitle(HeaderTitle):
    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        super().update(content, layout=False)


class ConsoleHeader(Header):
    def compose(self) -> Iterator[Widget]:
        for widget in super().compose():
            yield _FixedTitle() if type(widget) is HeaderTitle else widget

    def show_sub_title(self, sub_title: str) -> None:
        """Make ``sub_title`` the app's and show it, repainting the title alone."""
        if sub_title != self.app.sub_title:
            self.app.set_reactive(App.sub_title, sub_title)
            self.query_one(HeaderTitle).update(self.format_title())

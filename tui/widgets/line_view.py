"""The base of the console's line-API views: their style is read once per repaint, and a
change of their scrollable size repaints them alone.

``rich_style`` walks every ancestor's styles and blends their colours; asked for on each
line (blank rows, padding, the cursor row), it was most of the time these views took to
repaint while a run flooded the console with events.

Textual's ``virtual_size`` asks for a layout pass of the whole screen when it changes,
which a view that only grows (or shows another run) does on every refresh, and that pass
costs about as much as the repaint itself. What the pass does for a view is update its scroll bars, which :func:`scroll_bars_follow` does directly (a
scroll bar that appears or goes away still asks for the pass, as it changes the view's
content width).
"""

from __future__ import annotations

from rich.style import Style
from textual.geometry import Region, Size
from textual.reactive import Reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tether.tui.textual_internals import scroll_bars_follow


class LineView(ScrollView):
    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)
    _pass_style: Style | None = None

    def watch_virtual_size(self, virtual_size: Size) -> None:
        scroll_bars_follow(self, virtual_size)

    def render_lines(self, crop: Region) -> list[Strip]:
        self._pass_style = self.rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._pass_style = None

    @property
    def base_style(self) -> Style:
        """This view's style for the lines being rendered (fresh outside a repaint)."""
        return self._pass_style if self._pass_style is not None else self.rich_style

"""The base of the console's line-API views: their style is read once per repaint.

``rich_style`` walks every ancestor's styles and blends their colours; asked for on each
line (blank rows, padding, the cursor row), it was most of the time these views took to
repaint while a run flooded the console with events.
"""

from __future__ import annotations

from rich.style import Style
from textual.geometry import Region
from textual.scroll_view import ScrollView
from textual.strip import Strip


class LineView(ScrollView):
    _pass_style: Style | None = None

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

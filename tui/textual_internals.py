"""Every private Textual API the console uses, in one place, each with its reason.

Textual is pinned to the minor version these were checked against (``textual>=8.2.8,<8.3``
in pyproject.toml), and tests/console/test_textual_internals.py fails on a Textual that lacks one
of them, so an upgrade says what to look at again instead of breaking at run time. The
calls are speed-ups of the console under a flood of events; each has a public fallback
that is slower, not wrong. One is a widget's name in the stylesheet, which no import would
catch: renamed, the rule would silently apply to nothing.
"""

from __future__ import annotations

from textual.geometry import Size
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets._header import HeaderTitle

__all__ = ["HeaderTitle", "USES", "has_unpainted_widgets", "paint_now", "scroll_bars_follow"]

USES: dict[str, str] = {
    "textual.widgets._header.HeaderTitle":
        "the header's title is replaced by one that never asks for a layout pass when the "
        "subtitle (the run counts) changes (tether.tui.widgets.header).",
    "textual.widgets._toast.ToastRack":
        "named in app.tcss (Dialog > ToastRack): a dialog's notifications are laid out below it, "
        "not over its buttons (tether.tui.screens.forms.Dialog).",
    "Widget._scroll_update":
        "a line view that grows updates its scroll bars directly, rather than through a layout "
        "pass of the whole screen (tether.tui.widgets.line_view).",
    "Screen._on_idle":
        "the console screen paints a change the operator asked for once the screen is idle, "
        "not at the update timer's next frame (tether.tui.screens.console.ConsoleScreen).",
    "Screen._dirty_widgets":
        "whether the screen has repaints pending, read by that idle handler.",
    "Screen._on_timer_update":
        "the call that paints the pending repaints at once, as Textual's Pilot does.",
}


def scroll_bars_follow(view: Widget, virtual_size: Size) -> None:
    """Bring ``view``'s scroll bars (thumbs, and whether they show) to ``virtual_size``
    and keep its scroll offset within it, as Textual's layout pass does."""
    view._scroll_update(virtual_size)


def has_unpainted_widgets(screen: Screen) -> bool:
    return bool(screen._dirty_widgets)


def paint_now(screen: Screen) -> None:
    screen._on_timer_update()

"""A one-line footer of the screen's bindings, greyed out when they do not apply.

Textual's ``Footer`` recomposes a widget per key whenever the bindings change, which the
console does on most selection changes (Stop applies to a running run, Approve to a
waiting one); under load that cost showed in the key-to-effect latency. This bar renders
the same information (``Screen.active_bindings``, with ``check_action`` deciding enabled
or greyed) as one line of text, and a click on a key presses it.

It shows what a key does now: while a text field has the focus, a plain character key
(``e``) is typed into it, so the bar leaves that key out and shows the one that works there
for the same action (``ctrl+e``), as the focus moves.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import events
from textual.keys import format_key, key_to_character
from textual.widgets import Input, Static, TextArea


def typed_in_a_field(key: str) -> bool:
    """Whether a text field with the focus takes ``key`` as a character (``e``, ``R``, ``/``,
    space) rather than letting a binding have it."""
    char = key_to_character(key) or format_key(key)
    return len(char) == 1 and char.isascii() and char.isprintable()


class KeyBar(Static):
    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        background: $footer-background;
        color: $footer-foreground;
        padding: 0 1;
    }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self._spans: list[tuple[int, int, str, bool]] = []  # start, end, key, enabled
        self.keys: list[tuple[str, str, bool]] = []  # (key, description, enabled) as shown

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self.call_after_refresh(self.update_keys)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Any) -> None:
        self.update_keys()

    def update_keys(self) -> None:
        text = Text(no_wrap=True, overflow="ellipsis")
        spans: list[tuple[int, int, str, bool]] = []
        keys: list[tuple[str, str, bool]] = []
        seen: set[str] = set()
        typing = isinstance(self.screen.focused, (Input, TextArea))
        for key, active in self.screen.active_bindings.items():
            binding = active.binding
            if not binding.show or binding.action in seen:
                continue
            if typing and not binding.priority and typed_in_a_field(key):
                continue  # the field takes it as a character: the bar shows what works there
            seen.add(binding.action)
            display = binding.key_display or self.app.get_key_display(binding)
            start = len(text)
            text.append(f" {display} ", style="bold #ffa62b" if active.enabled else "dim")
            text.append(f"{binding.description} ", style="" if active.enabled else "dim")
            spans.append((start, len(text), key, active.enabled))
            keys.append((key, binding.description, active.enabled))
            text.append(" ")
        text.append(" ctrl+p ", style="bold #ffa62b")
        text.append("palette")
        spans.append((len(text) - 15, len(text), "ctrl+p", True))
        if (spans, keys) != (self._spans, self.keys):
            self._spans, self.keys = spans, keys
            self.update(text, layout=False)  # always one line

    def on_click(self, event: events.Click) -> None:
        x = event.x - 1  # padding
        for start, end, key, enabled in self._spans:
            if start <= x < end and enabled:
                self.app.simulate_key(key)
                return

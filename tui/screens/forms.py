"""The frame every dialog shares: Esc cancels; a form submits on Enter or its button, and a
value that does not parse is said in the dialog, which stays open."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Select, Static

from tether.tui.widgets.key_bar import KeyBar
from tether.tui.state.text import clean


def kv(key: str, value: str, style: str = "") -> Text:
    out = Text()
    out.append(f"{key:<10}", style="dim")
    out.append(clean(value), style=style)
    return out


def parse_int(text: str, what: str) -> int | None:
    """A form's whole number of at least 1 (blank: None); a ValueError says what is wrong, in words."""
    text = text.strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{what} must be a whole number, not {text!r}") from None
    if value < 1:
        raise ValueError(f"{what} must be at least 1")
    return value


def parse_money(text: str, what: str) -> float | None:
    """A form's amount in dollars, more than zero (blank: None; a leading ``$`` is allowed)."""
    text = text.strip().lstrip("$")
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{what} must be an amount in dollars, not {text!r}") from None
    if value <= 0:
        raise ValueError(f"{what} must be more than zero")
    return value


class Dialog(ModalScreen[Any]):
    """Common frame: Esc cancels, and a key bar at the bottom shows the dialog's own keys
    (over the console's, which do not apply while a dialog is up)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="dialog.cancel")]

    def on_mount(self) -> None:
        # Mounted here, after the dialog's own compose, so that no dialog has to remember it
        # (Textual calls each class's on_mount: the dialog's own runs too).
        if not self.query(KeyBar):
            self.mount(KeyBar(classes="dialog-keys"))

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#cancel")
    def _cancel_pressed(self) -> None:
        self.dismiss(None)


class FormSelect(Select[Any]):
    """A form's list field: Enter submits the form, as in its text fields (Textual's Select
    opens its list on Enter); Space, the arrows or a click open the list. Enter inside the
    open list still picks an option: the list has the focus then."""

    BINDINGS = [Binding("enter", "submit", "Submit", show=False)]

    class Submitted(Message):
        """Enter on the field, with its list closed."""

    def action_submit(self) -> None:
        self.post_message(self.Submitted())


class FormDialog(Dialog):
    """A form that becomes a request: Enter in a field (a text or a list field) or the
    primary button (``#submit``) submits it; a value that does not parse is shown in words
    and the dialog stays open."""

    def request(self) -> Any:
        raise NotImplementedError

    def form_footer(self, submit: str, hint: str) -> ComposeResult:
        """The line ``_submit`` writes a bad value's error to, the buttons, and the key hint."""
        yield Static("", id="error")
        with Horizontal(classes="buttons"):
            yield Button(submit, variant="primary", id="submit")
            yield Button("Cancel", id="cancel")
        yield Static(Text(hint, style="dim"))

    @on(Input.Submitted)
    @on(FormSelect.Submitted)
    @on(Button.Pressed, "#submit")
    def _submit(self) -> None:
        try:
            request = self.request()
        except ValueError as exc:
            self.query_one("#error", Static).update(Text(str(exc), style="bold red"))
            return
        self.dismiss(request)

"""Approve a call with edited arguments (issue 25): the model's arguments as pretty JSON in
an editor; approving sends the operator's as the decision's ``args``.

What is not a JSON object (or gives a key twice) is refused here in words, and nothing is
sent. Whether the edit fits the tool's schema is the run's to say, with the same check as
``tether approve --args`` and the web page (it refuses in words, consuming nothing).
Arguments left as the model asked are an ordinary approval.
"""

from __future__ import annotations

import json

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Static, TextArea

from tether.approvals.decisions import edit_json
from tether.vocab.state import NeedsApproval
from tether.tui.screens.forms import Dialog, kv
from tether.tui.state.text import clean, one_line, pretty_args


def edited_args(text: str, asked: str) -> str | None:
    """The operator's arguments as compact JSON, or None when they are the model's own.
    A ValueError, in words, when they are not a JSON object (:func:`tether.approvals.decisions.parse_edit`)."""
    try:
        edited = edit_json(text)
    except ValueError as exc:
        raise ValueError(f"{exc}; nothing was sent") from None
    try:
        if json.loads(asked) == json.loads(edited):
            return None
    except ValueError:
        pass
    return edited


class ArgsEditor(Dialog):
    """Dismisses with ``(note, args)``: ``args`` the edited arguments (compact JSON), or
    None when they were left as the model asked; or None (Esc: nothing decided)."""

    BINDINGS = [Binding("ctrl+s", "approve", "Approve", priority=True, id="args_editor.approve")]

    def __init__(self, run_id: str, waiting: NeedsApproval, note: str = "") -> None:
        super().__init__()
        self.run_id = run_id
        self.waiting = waiting
        self.note = note

    def compose(self) -> ComposeResult:
        waiting = self.waiting
        with Vertical(classes="dialog", id="args-editor"):
            yield Label(Text(f"Approve {clean(waiting.tool_name)} with edited arguments", style="bold"),
                        classes="dialog-title")
            yield Static(kv("run", self.run_id))
            yield Static(kv("call id", waiting.call_id))
            yield Static(kv("asked", one_line(waiting.args, 200)))
            yield Label("Arguments (JSON; the tool runs with these, and the model reads that they changed)",
                        classes="field-label")
            yield TextArea(clean(pretty_args(waiting.args)), id="args-text", classes="args-text", soft_wrap=False)
            yield Label("Note (optional)", classes="field-label")
            yield Input(value=self.note, placeholder="why you changed them, kept with the decision", id="note")
            yield Static("", id="error")
            with Horizontal(classes="buttons"):
                yield Button("Approve with these", variant="success", id="approve")
                yield Button("Cancel", id="cancel")
            yield Static(Text("ctrl+s approves · Tab moves · Esc goes back, nothing decided", style="dim"))

    def on_mount(self) -> None:
        self.query_one("#args-text", TextArea).focus()

    @on(Button.Pressed, "#approve")
    @on(Input.Submitted, "#note")
    def _approve(self) -> None:
        self.action_approve()

    def action_approve(self) -> None:
        try:
            args = edited_args(self.query_one("#args-text", TextArea).text, self.waiting.args)
        except ValueError as exc:
            self.query_one("#error", Static).update(Text(str(exc), style="bold red"))
            return
        self.dismiss((self.query_one("#note", Input).value, args))

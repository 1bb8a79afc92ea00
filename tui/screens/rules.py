"""The standing rules on the store, as a screen: list, add, remove (issue 25).

The screen shows what it is given (:meth:`RulesScreen.show`) and posts what the operator
asks for (:class:`RulesScreen.Add`, :class:`RulesScreen.Remove`); the app reads and
writes the store, off the event loop for a store that blocks, and polls the rules on its
owner-check timer while this screen is up, so a rule added by another process appears.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Button, DataTable, Label, Static

from tether.approvals import Rule
from tether.tui.screens.forms import Dialog
from tether.tui.widgets.key_bar import KeyBar
from tether.tui.state.text import clean, one_line

COLUMNS = ("id", "effect", "rule", "scope", "reason", "by", "made", "expires")
_EFFECT_STYLE = {"allow": "green", "deny": "bold red", "ask": "yellow"}


def _date(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def rule_row(rule: Rule, now: float) -> tuple[Text, ...]:
    """One rule as the table's cells (an expired rule dim, its expiry marked)."""
    expired = rule.expired(now)
    dim = "dim" if expired else ""
    if rule.expires is None:
        expires = Text("never", style="dim")
    elif expired:
        expires = Text(f"expired {_date(rule.expires)}", style="bold red")
    else:
        expires = Text(_date(rule.expires))
    return (Text(clean(rule.id), style="bold"), Text(rule.effect, style=_EFFECT_STYLE.get(rule.effect, "")),
            Text(one_line(rule.describe(), 70), style=dim), Text(one_line(rule.scope, 30), style=dim),
            Text(one_line(rule.reason, 50), style=dim), Text(one_line(rule.by, 24), style=dim),
            Text(_date(rule.created), style=dim), expires)


class RulesScreen(Screen[None]):
    """The store's rules, oldest first (the order the store keeps them)."""

    BINDINGS = [
        Binding("a", "add", "Add", id="rules.add"),
        Binding("d,delete", "remove", "Remove", id="rules.remove", tooltip="Remove the highlighted rule"),
        Binding("escape,L", "close", "Back", id="rules.close"),
    ]

    class Add(Message):
        """The operator asks for a new rule (the empty editor)."""

    class Remove(Message):
        """The operator asks to remove ``rule`` (the app asks to confirm)."""

        def __init__(self, rule: Rule) -> None:
            super().__init__()
            self.rule = rule

    def __init__(self) -> None:
        super().__init__(id="rules-screen")
        self.rules: list[Rule] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="rules-body"):
            yield Label(Text("Standing rules", style="bold"), classes="screen-title")
            yield Static(Text("Each decides, at once, the calls it fits: deny beats ask beats allow, and the "
                              "narrowest is cited. Every process sharing the store follows them.", style="dim"))
            table: DataTable[Text] = DataTable(id="rules", cursor_type="row", zebra_stripes=True)
            table.add_columns(*COLUMNS)
            yield table
            yield Static("", id="rules-empty")
        yield KeyBar(id="rules-keys")

    def on_mount(self) -> None:
        self.query_one("#rules", DataTable).focus()
        self._say_empty()

    def show(self, rules: Sequence[Rule], now: float | None = None) -> None:
        """List ``rules`` (the cursor stays on the rule it was on)."""
        now = time.time() if now is None else now
        rules = list(rules)
        if rules == self.rules and not any(r.expires is not None for r in rules):
            return
        table = self.query_one("#rules", DataTable)
        keep = self.current
        table.clear()
        for rule in rules:
            table.add_row(*rule_row(rule, now), key=rule.id)
        self.rules = rules
        if keep is not None and any(r.id == keep.id for r in rules):
            table.move_cursor(row=[r.id for r in rules].index(keep.id))
        self._say_empty()

    def _say_empty(self) -> None:
        words = "" if self.rules else "No rules yet: a adds one, as does \"Always allow…\" in a decision dialog."
        self.query_one("#rules-empty", Static).update(Text(words, style="dim"))

    @property
    def current(self) -> Rule | None:
        """The highlighted rule."""
        table = self.query_one("#rules", DataTable)
        row = table.cursor_row
        return self.rules[row] if self.rules and 0 <= row < len(self.rules) else None

    def action_add(self) -> None:
        self.post_message(self.Add())

    def action_remove(self) -> None:
        rule = self.current
        if rule is not None:
            self.post_message(self.Remove(rule))

    def action_close(self) -> None:
        self.dismiss(None)


class ConfirmDialog(Dialog):
    """Yes or no to one thing, said in ``question`` and ``detail``; dismisses with True."""

    BINDINGS = [Binding("y", "yes", "Yes", id="confirm.yes"), Binding("n", "cancel", "No", id="confirm.no")]

    def __init__(self, question: str, detail: str = "", yes: str = "Remove") -> None:
        super().__init__()
        self.question = question
        self.detail = detail
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="confirm"):
            yield Label(Text(clean(self.question), style="bold"), classes="dialog-title")
            if self.detail:
                yield Static(Text(clean(self.detail)))
            with Horizontal(classes="buttons"):
                yield Button(self.yes, variant="error", id="yes")
                yield Button("Cancel", id="cancel")
            yield Static(Text(f"y or its button: {self.yes.lower()} · n or Esc: keep it", style="dim"))

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    @on(Button.Pressed, "#yes")
    def action_yes(self) -> None:
        self.dismiss(True)

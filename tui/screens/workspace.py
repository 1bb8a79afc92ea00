"""The dialogs of a run's merge and discard (``M`` and ``X``): what to merge into, and what
became of it, in the core's own words (:mod:`tether.actions.workspace`)."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.widgets import Button, Input, Label, Static

from tether.vocab.state import RunState
from tether.workspaces.changes import stat_words
from tether.tui.screens.forms import Dialog, FormDialog, FormSelect, kv
from tether.tui.state.text import clean, one_line


@dataclass(frozen=True)
class MergeRequest:
    into: str | None
    """The branch to merge into; None: the one checked out in the run's repository."""
    squash: bool = False


class MergeDialog(FormDialog):
    """Where the selected run's work goes: a branch (blank: the one checked out), and whether
    as one commit. Merge checks it (conflicts, a dirty target, the agent file's checks) and
    puts it to the rules and to people as the call ``merge``."""

    def __init__(self, state: RunState) -> None:
        super().__init__()
        self.state = state

    def compose(self) -> ComposeResult:
        st = self.state
        ws = st.run_workspace
        assert ws is not None
        changed = ws.changes or {}
        with Vertical(classes="dialog", id="merge"):
            yield Label(Text(f"Merge {one_line(st.run_id, 60)}", style="bold"), classes="dialog-title")
            yield Static(kv("work", f"{ws.branch or ws.path} in {ws.repo or ws.source}"))
            if changed:
                yield Static(kv("changes", stat_words(changed.get("files", 0), changed.get("added", 0),
                                                      changed.get("deleted", 0)) + " (as of its last step)"))
            if ws.checks:
                yield Static(kv("checks", "; ".join(ws.checks) + " (run before it asks)"))
            with Grid(classes="form"):
                yield Label("Into")
                yield Input(placeholder="blank: the branch checked out there", id="into")
                yield Label("Squash")
                yield FormSelect([("no: a merge commit", False), ("yes: one commit of the work", True)],
                                 value=False, allow_blank=False, id="squash")
            yield Static(Text("Nothing is merged until the merge is approved: by a rule, or by people in the "
                              "approvals.", style="dim"))
            yield from self.form_footer("Merge", "Enter checks the merge and asks for it · Esc cancels")

    def on_mount(self) -> None:
        self.query_one("#into", Input).focus()

    def request(self) -> MergeRequest:
        into = self.query_one("#into", Input).value.strip()
        if into.startswith("-") or any(c.isspace() for c in into):
            raise ValueError(f"{into!r} is not a branch name")
        return MergeRequest(into or None, bool(self.query_one("#squash", FormSelect).value))


class OutcomeDialog(Dialog):
    """What became of a merge or a discard, in words; Enter or Esc closes it."""

    BINDINGS = [Binding("enter", "cancel", "Close", id="outcome.close")]
    AUTO_FOCUS = "#close"  # focused once composed (a query in on_mount could run before it was)

    def __init__(self, title: str, words: str, *, ok: bool = True) -> None:
        super().__init__()
        self.title_words = title
        self.words = words
        self.ok = ok

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog", id="outcome"):
            yield Label(Text(clean(self.title_words), style="bold" if self.ok else "bold red"),
                        classes="dialog-title")
            yield Static(Text(clean(self.words)), id="outcome-words")
            with Horizontal(classes="buttons"):
                yield Button("Close", variant="primary", id="close")

    @on(Button.Pressed, "#close")
    def _close(self) -> None:
        self.dismiss(None)

"""The Follow up dialog (``m``): the operator's next words to the agent of a run that is not
running (an ACP agent's slash commands offered as they are typed). It dismisses with the
words, or None (Esc)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Input, Label, Static

from tether.vocab.state import RunState
from tether.tui.screens.forms import FormDialog, kv
from tether.tui.widgets.slash import SlashCommands, suggester
from tether.tui.state.text import one_line, stop_reason


class FollowUpDialog(FormDialog):
    """The operator's next words to the agent of a run that is not running: a conversation,
    not only a task (a completed run goes on from them)."""

    def __init__(self, state: RunState, commands: Sequence[dict[str, str]] = ()) -> None:
        super().__init__()
        self.state = state
        self.commands = list(commands)  # an ACP agent's slash commands (tether.tui.widgets.slash)

    def compose(self) -> ComposeResult:
        st = self.state
        with Vertical(classes="dialog", id="follow-up"):
            yield Label(Text(f"Follow up on {one_line(st.run_id, 60)}", style="bold"), classes="dialog-title")
            yield Static(kv("now", f"{st.status.value}: {stop_reason(st, live=False)}"))
            hint = "what to tell the agent next" + (" (/ lists its commands)" if self.commands else "")
            yield Input(placeholder=hint, id="message", suggester=suggester(self.commands), select_on_focus=False)
            if self.commands:
                yield SlashCommands(self.commands, id="slash-commands")
            yield from self.form_footer("Send", "Enter sends · Esc cancels" + (
                " · / then Tab picks a command" if self.commands else ""))

    @on(Input.Changed, "#message")
    def _typed(self, event: Input.Changed) -> None:
        for box in self.query(SlashCommands):
            box.narrow(event.value)

    def on_mount(self) -> None:
        self.query_one("#message", Input).focus()

    def request(self) -> str:
        text = self.query_one("#message", Input).value.strip()
        if not text:
            raise ValueError("type what to tell the agent")
        return text

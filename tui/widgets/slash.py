"""An ACP agent's slash commands in the follow-up box (ACP ``available_commands_update``).

The agent lists its commands (name, description, and what its argument is); the run's trace
keeps the last list (``agent_commands``). In the follow-up box, typing ``/`` lists them with
their descriptions under the field, narrowed as the name is typed; Tab goes to the list and
Enter (or a click) picks one: the field then holds ``/name `` for its argument. The field also
completes the name in place (Textual's suggester: Right accepts it). What is sent is the text
as typed, ``/name args``: the agent reads its commands out of the prompt (ACP has no other way).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual import on
from textual.suggester import SuggestFromList
from textual.widgets import Input, OptionList
from textual.widgets.option_list import Option


def suggester(commands: Sequence[dict[str, str]]) -> SuggestFromList | None:
    """The field's in-place completion of a command's name (None: the agent has none)."""
    return SuggestFromList([f"/{c['name']} " for c in commands], case_sensitive=False) if commands else None


def command_label(command: dict[str, str]) -> Text:
    label = Text(f"/{command['name']}", style="bold")
    if command.get("hint"):
        label.append(f" <{command['hint']}>", style="italic")
    if command.get("description"):
        label.append(f"  {command['description']}", style="dim")
    return label


class SlashCommands(OptionList):
    """The agent's commands that match what the field ``#message`` holds, shown while it holds
    ``/`` and a name being typed (no argument yet)."""

    DEFAULT_CSS = "SlashCommands { height: auto; max-height: 8; display: none; }"

    def __init__(self, commands: Sequence[dict[str, str]], **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.commands = list(commands)

    def narrow(self, typed: str) -> None:
        """Show the commands whose name starts with what follows ``/`` in ``typed``; hide the
        list when ``typed`` is not a command's name being typed."""
        if not typed.startswith("/") or " " in typed:
            self.display = False
            return
        wanted = typed[1:].lower()
        matches = [c for c in self.commands if c["name"].lower().startswith(wanted)]
        self.clear_options()
        self.add_options([Option(command_label(c), id=c["name"]) for c in matches])
        self.display = bool(matches)
        if matches:
            self.highlighted = 0

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        field = self.screen.query_one("#message", Input)
        field.value = f"/{event.option.id} "
        field.action_end()
        self.display = False
        field.focus()

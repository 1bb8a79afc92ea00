"""The help (``F1``): every key of the console and what it does."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Label, Static

from tether.tui.screens.forms import Dialog


HELP_KEYS = (
    ("s", "Stop the selected run, whichever process runs it: fires its signal, even inside a running "
          "tool (scan_archive)."),
    ("m", "Follow up on the selected run that is not running: your next words to its agent, and the run "
          "goes on from them (a completed run too; an ACP agent's session is loaded again)."),
    ("a", "Approve the selected run's pending call (a dialog shows tool, arguments, what it would change); a process "
          "waiting for the decision gets it. An ACP agent's request shows its diff and its options: Enter "
          "allows once, a button picks another (allow always)."),
    ("e", "Approve the pending call with edited arguments (JSON): the tool runs with yours and the model reads "
          "that they changed. In the Approve dialog too: e off the Note field, ctrl+e anywhere. Not for an ACP "
          "agent's call."),
    ("r", "Reject it: the reason is written into the transcript in words; nothing is done. Approve and Reject "
          "also offer \"Always allow…\" and \"Always deny…\": a standing rule made from the call."),
    ("L", "The standing rules: list, add (a), remove (d). Each decides at once the calls it fits."),
    ("D", "Every decision on the store, newest first: who (a person or a rule), when, how long it waited; "
          "Enter goes to its run."),
    ("$", "What the runs cost: spend per day over 30 days, by agent and by model as bars, the fleet budgets; "
          "Enter goes to a row's dearest run."),
    ("n", "New run: an agent (the agent file's, or a demo scenario), its task, turn cap, budget "
          "and mode, tool-error policy, dedupe, isolation (none, worktree, copy)."),
    ("R", "Resume a run stopped by its turn cap, its budget or Stop, with raised limits; adopt an "
          "orphaned run."),
    ("c", "The selected run's changes in its own workspace, in place of its trace: the files added, changed and "
          "deleted with their +/- lines, and the highlighted file's diff, as the run writes them. c again: the trace."),
    ("M", "Merge the selected run's work into a branch: checked (conflicts, a target with changes it would write "
          "over, the agent file's checks), then a decision in the approvals like any call; merged when approved."),
    ("X", "Discard the selected run's workspace and its branch (asks first); its transcript stays."),
    ("← →", "In the Changes pane: move between the run's checkpoints (← from the live view: the last one), each "
            "step's files and diff; → past the last: live again."),
    ("B", "On a checkpoint shown: rewind the run to it, workspace and transcript (asks first; tether rewind RUN "
          "--undo brings it back)."),
    ("F", "On a checkpoint shown: fork the run there, a new run with its workspace and transcript up to it."),
    ("t", "On the transcript: unfold (or fold) an ACP agent's thoughts."),
    ("↑ ↓", "Select a run (the mouse works too)."),
    ("Tab", "Move between panes: runs, approvals, transcript, trace."),
    ("ctrl+p", "Command palette: every action above, by name."),
    ("F1", "This help."),
    ("q, ctrl+q", "Quit: running runs are stopped and saved first; runs waiting for approval stay on disk."),
)


class HelpScreen(Dialog):
    BINDINGS = [Binding("escape,f1,q", "cancel", "Close", id="help.close")]

    def compose(self) -> ComposeResult:
        keys = Table.grid(padding=(0, 2))
        keys.add_column(style="bold cyan", no_wrap=True)
        keys.add_column()
        for key, what in HELP_KEYS:
            keys.add_row(key, what)
        with Vertical(classes="dialog", id="help"):
            yield Label(Text("Tether console", style="bold"), classes="dialog-title")
            yield Static(keys)
            yield Static(Text("\nGreyed-out keys in the footer do not apply to the selected run. Runs live on "
                              "disk: quit at any time and the console shows them again, approvals included.",
                              style="dim"))
            with Horizontal(classes="buttons"):
                yield Button("Close", id="close")

    @on(Button.Pressed, "#close")
    def _close(self) -> None:
        self.dismiss(None)

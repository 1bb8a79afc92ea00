"""Every decision on the store, newest first, as a screen (issue 25's audit trail).

When, run, tool, arguments (the operator's when edited), verdict, by whom (a person or a
rule) and how long the call waited. Filtered by agent and by decider; Enter on a row
goes to its run. The screen shows what it is given (:meth:`DecisionsScreen.show`) and
posts what the operator asks for: the app queries the store (off the event loop for a
store that blocks) and goes to the run.
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
from textual.widgets import DataTable, Input, Label, Static

from tether.approvals import DecisionQuery, DecisionRecord, format_duration
from tether.tui.widgets.key_bar import KeyBar
from tether.tui.state.text import clean, one_line

LIMIT = 500
COLUMNS = ("when", "run", "tool", "arguments", "verdict", "by", "waited")
_VERDICT_STYLE = {"approved": "green", "rejected": "red", "pending": "yellow"}


def waited_words(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    return format_duration(round(seconds) if seconds < 60 else round(seconds / 60) * 60 if seconds < 3600
                           else round(seconds / 360) * 360) if seconds >= 1 else "<1 s"


def decision_row(record: DecisionRecord) -> tuple[Text, ...]:
    args = Text(one_line(record.args, 40), style="dim")
    if record.edited_args is not None:
        args = Text("✎ ", style="bold yellow")
        args.append(one_line(record.edited_args, 38))
    by = Text(one_line(record.deciders, 40), style="cyan" if record.rule else "")
    return (Text(time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.ts))), Text(one_line(record.run_id, 36)),
            Text(one_line(record.tool, 24), style="bold"), args,
            Text(record.outcome, style=_VERDICT_STYLE.get(record.verdict, "")), by,
            Text(waited_words(record.waited_s), style="dim"))


class DecisionsScreen(Screen[None]):
    """The store's decisions (at most :data:`LIMIT`), newest first."""

    BINDINGS = [
        Binding("escape,D", "close", "Back", id="decisions.close"),
        Binding("slash", "filter", "Filter", key_display="/", id="decisions.filter"),
        Binding("f5", "reload", "Reload", id="decisions.reload"),
    ]

    class Query(Message):
        """The operator asks for the decisions ``query`` selects."""

        def __init__(self, query: DecisionQuery) -> None:
            super().__init__()
            self.query = query

    class Chosen(Message):
        """Enter on a decision: go to its run."""

        def __init__(self, run_id: str) -> None:
            super().__init__()
            self.run_id = run_id

    def __init__(self) -> None:
        super().__init__(id="decisions-screen")
        self.records: list[DecisionRecord] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="decisions-body"):
            yield Label(Text("Decisions", style="bold"), classes="screen-title")
            with Horizontal(id="decision-filters"):
                yield Input(placeholder="agent (blank: every agent)", id="agent")
                yield Input(placeholder="by: a person, or a rule's id such as R3 (blank: anyone)", id="by")
            table: DataTable[Text] = DataTable(id="decisions", cursor_type="row", zebra_stripes=True)
            table.add_columns(*COLUMNS)
            yield table
            yield Static("", id="decisions-count")
        yield KeyBar(id="decisions-keys")

    def on_mount(self) -> None:
        self.query_one("#decisions", DataTable).focus()
        self.action_reload()

    @property
    def query_asked(self) -> DecisionQuery:
        """What the filters select."""
        agent = self.query_one("#agent", Input).value.strip() or None
        by = self.query_one("#by", Input).value.strip() or None
        return DecisionQuery(agent=agent, by=by, limit=LIMIT)

    def action_reload(self) -> None:
        self.post_message(self.Query(self.query_asked))

    def action_filter(self) -> None:
        self.query_one("#agent", Input).focus()

    def action_close(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted)
    def _filtered(self) -> None:
        self.action_reload()
        self.query_one("#decisions", DataTable).focus()

    def show(self, records: Sequence[DecisionRecord], query: DecisionQuery | None = None) -> None:
        """List ``records`` (the answer to ``query``: an answer to an older query is dropped)."""
        if query is not None and query != self.query_asked:
            return
        table = self.query_one("#decisions", DataTable)
        table.clear()
        self.records = list(records)
        for i, record in enumerate(self.records):
            table.add_row(*decision_row(record), key=str(i))
        n = len(self.records)
        words = f"{n} decision{'' if n == 1 else 's'}" + (f" (the newest {LIMIT})" if n >= LIMIT else "")
        if not n:
            words = "no decisions" + (" fit the filters" if query and (query.agent or query.by) else " yet")
        self.query_one("#decisions-count", Static).update(Text(clean(words) + " · Enter goes to its run", style="dim"))

    @on(DataTable.RowSelected, "#decisions")
    def _chosen(self, event: DataTable.RowSelected) -> None:
        index = event.cursor_row
        if 0 <= index < len(self.records):
            self.post_message(self.Chosen(self.records[index].run_id))

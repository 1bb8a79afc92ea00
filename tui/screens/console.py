"""The console's main screen, and the two messages the app posts to itself.

:class:`ConsoleScreen` lays out the panes (the runs list and the approvals on the left; the
selected run's header, cost, transcript and trace (or its changes) on the right; the key bar) and holds the
keys that act on the selected run. :class:`Flush` is how the event pump asks for the views
to catch up (messages up); :class:`Shown` says that a change the operator asked for reached
the screen, for the tests and the benchmarks that time it.
"""

from __future__ import annotations

import time

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Static

from tether.tui.widgets.approvals import ApprovalsPane
from tether.tui.widgets.changes import ChangesPane
from tether.tui.widgets.cost_meter import CostMeter
from tether.tui.widgets.header import ConsoleHeader
from tether.tui.widgets.key_bar import KeyBar
from tether.tui.widgets.runs_list import RunsList
from tether.tui.widgets.trace_view import TraceView
from tether.tui.widgets.transcript import TranscriptView
from tether.tui.textual_internals import has_unpainted_widgets, paint_now


class Flush(Message):
    """Posted by the event pump when the views are out of date (at most one pending)."""


class Shown(Message):
    """A change the operator asked for is on the screen: a run ``selected``, or ``stopped``.
    Posted after the refresh that painted it; ``at`` is when (``time.perf_counter``)."""

    def __init__(self, what: str, run_id: str) -> None:
        super().__init__()
        self.what = what
        self.run_id = run_id
        self.at = time.perf_counter()


class ConsoleScreen(Screen[None]):
    """The main screen. Its bindings act on the selected run and are greyed out in the
    footer (``App.check_action`` returns None) when they do not apply to it."""

    BINDINGS = [
        Binding("s", "app.stop", "Stop", id="tether.stop", tooltip="Stop the selected run"),
        Binding("a", "app.approve", "Approve", id="tether.approve", tooltip="Approve the pending call"),
        Binding("e", "app.edit", "Edit", show=False, id="tether.edit",  # the footer keeps Help and Quit in 80 columns
                tooltip="Approve the pending call with edited arguments"),
        Binding("r", "app.reject", "Reject", id="tether.reject", tooltip="Reject the pending call, in words"),
        Binding("n", "app.new_run", "New run", id="tether.new_run"),
        Binding("R", "app.resume", "Resume", key_display="R", id="tether.resume",
                tooltip="Resume with raised limits"),
        Binding("m", "app.follow_up", "Follow up", id="tether.follow_up",
                tooltip="Tell the agent of a run that is not running what to do next"),
        Binding("f1", "app.help", "Help", id="tether.help"),
        Binding("q", "app.quit", "Quit", id="tether.quit", tooltip="Stop running runs cleanly, then quit"),
        Binding("L", "app.rules", "Rules", key_display="L", id="tether.rules",
                tooltip="The standing rules: list, add, remove"),
        Binding("D", "app.decisions", "Decisions", key_display="D", id="tether.decisions",
                tooltip="Every decision on the store: who approved what, when"),
        Binding("dollar_sign", "app.costs", "Costs", key_display="$", show=False, id="tether.costs",
                tooltip="What the runs cost: per day, by agent and model; the fleet budgets"),
        Binding("c", "app.changes", "Changes", show=False, id="tether.changes",
                tooltip="What the selected run changed in its own workspace, live (c again: its trace)"),
        Binding("M", "app.merge", "Merge", key_display="M", show=False, id="tether.merge",
                tooltip="Merge the selected run's work into a branch: checked, then a decision"),
        Binding("X", "app.discard", "Discard", key_display="X", show=False, id="tether.discard",
                tooltip="Remove the selected run's workspace and branch (asks first); its transcript stays"),
        Binding("left", "app.checkpoint_earlier", "Earlier", show=False, priority=True, id="tether.checkpoint_earlier",
                tooltip="In the Changes pane: the checkpoint before (from the live view: the last)"),
        Binding("right", "app.checkpoint_later", "Later", show=False, priority=True, id="tether.checkpoint_later",
                tooltip="In the Changes pane: the checkpoint after (past the last: the live view)"),
        Binding("B", "app.rewind_here", "Rewind", key_display="B", show=False, id="tether.rewind",
                tooltip="Rewind the run to the checkpoint shown (asks first; tether rewind --undo takes it back)"),
        Binding("F", "app.fork_here", "Fork", key_display="F", show=False, id="tether.fork",
                tooltip="A new run from the checkpoint shown: its workspace and transcript up to there"),
    ]

    paint_when_settled = False
    """Set when the operator is waiting for a change: paint it once every widget it touched
    has said so, not at the update timer's next frame."""

    async def _on_idle(self, event: events.Idle) -> None:
        # Textual's update timer, resumed by a change, fires a frame or two after its last
        # frame, and under a flood of events there always was one: that wait was a large part
        # of the time from a key to its effect. The screen is idle once the widgets' repaint
        # requests are in, so paint then, with the call Textual's Pilot makes to paint at once.
        if self.paint_when_settled and has_unpainted_widgets(self):
            self.paint_when_settled = False
            paint_now(self)
        await super()._on_idle(event)

    def compose(self) -> ComposeResult:
        yield ConsoleHeader(show_clock=False, icon="⛓")
        with Horizontal(id="body"):
            with Vertical(id="left"):
                yield RunsList(id="runs")
                yield ApprovalsPane(id="approvals")
            with Vertical(id="right"):
                yield Static(id="run-header")
                yield CostMeter(id="cost")
                with Vertical(id="transcripts"):
                    yield TranscriptView(classes="transcript")
                with Vertical(id="traces"):
                    yield TraceView(classes="trace")
                yield ChangesPane(id="changes")
        yield KeyBar(id="keys")

    def on_mount(self) -> None:
        self.app.console_ready()  # type: ignore[attr-defined]

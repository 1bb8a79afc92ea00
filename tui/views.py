"""The views: from the model to the widgets, and the selection.

A collaborator of :class:`~tether.tui.app.TetherApp`, made by it with the model, the pump,
the store client and the options, and the app as the :class:`ViewsHost` it asks for the
screen, timers and notifications; the app's handlers of the widgets' messages call it.
Attributes down: the model and the pump's trace
buffers are read, and each widget is handed what it shows, only what changed, on the
:class:`~tether.tui.screens.console.Flush` the pump posts (at most every ``FLUSH_INTERVAL_S``, at once
for a start, a stop or an approval). Messages up: the runs list and the approvals pane say
what was highlighted, and the selection follows. The operator's alerts (a new call waiting
for approval, a budget crossed) are said here, once each, as the model finds them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol
from urllib.parse import urlsplit

from rich.text import Text
from textual.css.query import NoMatches
from textual.message import Message
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Static

from tether.approvals import run_source
from tether.vocab.state import NeedsApproval, Status
from tether.vocab.wording import config_words
from tether.run.tracked import what_it_can
from tether.tui.widgets.approval_view import deadline_clock, tally_words
from tether.tui.widgets.approvals import ApprovalsPane
from tether.tui.widgets.changes import ChangesPane
from tether.tui.widgets.cost_meter import CostMeter
from tether.tui.widgets.header import ConsoleHeader
from tether.tui.widgets.run_pane import RunPane
from tether.tui.widgets.runs_list import RunsList
from tether.tui.widgets.trace_view import TraceView
from tether.tui.widgets.transcript import TranscriptView, plan_text
from tether.tui.state.model import ConsoleModel, agent_label, count, is_acp
from tether.tui.state.options import ConsoleOptions
from tether.tui.state.pump import EventPump
from tether.tui.screens.console import ConsoleScreen, Shown
from tether.tui.state.store_client import StoreClient
from tether.tui.state.text import badge, clean, money, one_line


def store_label(where: str) -> str:
    """A store's URL as the header shows it, short: ``user@host:port/db``, from the URL
    without its password (``tether.store.postgres.connection.redact``), and without its query."""
    try:
        parts = urlsplit(where)
        if not parts.scheme.startswith("postgres"):
            return where
        user = f"{parts.username}@" if parts.username else ""
        port = f":{parts.port}" if parts.port else ""
        return f"{user}{parts.hostname or ''}{port}{parts.path}"
    except ValueError:
        return "the database"


class ViewsHost(Protocol):
    """What the views ask of the console (the app is one)."""

    @property
    def console_up(self) -> bool: ...  # the console screen is composed

    @property
    def console_screen(self) -> ConsoleScreen: ...

    def set_timer(self, delay: float, callback: Callable[[], Any]) -> Timer: ...

    def call_after_refresh(self, callback: Callable[..., Any], *args: Any) -> bool: ...

    def post_message(self, message: Message) -> bool: ...

    def bell(self) -> None: ...

    def notify(self, message: str, **how: Any) -> None: ...  # App.notify: title, severity, markup, timeout


class ConsoleViews:
    """The views, for one console."""

    def __init__(self, host: ViewsHost, model: ConsoleModel, pump: EventPump, client: StoreClient,
                 options: ConsoleOptions) -> None:
        self.host = host
        self.model = model
        self.pump = pump
        self.client = client
        self.options = options
        self.keys_dirty = True  # what applies to the selected run may have changed: the keys are looked at again
        self._applies: tuple[Any, ...] = (None, None, None, None)
        self.alerts: list[str] = []  # what the operator was alerted to (bell and notification), in words
        self._transcript_view: TranscriptView
        self._trace_view: TraceView

    def attach(self, screen: ConsoleScreen) -> None:
        """The console screen is composed: its transcript and trace views, kept."""
        self._transcript_view = screen.query_one(TranscriptView)
        self._trace_view = screen.query_one(TraceView)

    @property
    def console_screen(self) -> ConsoleScreen:
        return self.host.console_screen

    def flush(self) -> None:
        """The pump asked for a refresh: now, or when the flush interval is up."""
        wait = self.pump.wait_s()
        if wait > 0:
            self.host.set_timer(wait, self.show_events)
        else:
            self.show_events()

    def show_events(self) -> None:
        """Bring the views up to date with every event collected so far, now. (Not named
        ``_flush``: Textual's App calls its own ``_flush`` when a print is flushed.)"""
        try:
            self._flush_views()
        except NoMatches:  # the console is being torn down; the states are already up to date
            pass

    def _flush_views(self) -> None:
        if self.pump.urgent:  # a run started or stopped, or waits for the operator: show it now
            self._paint_now()
        if not self.host.console_up:
            self.pump.flush_pending = False
            return
        drained = self.pump.drain()
        for rid in drained.stopped:
            self.host.call_after_refresh(self._shown, "stopped", rid)
        screen = self.console_screen
        self._refresh_runs_list(drained.dirty, structure=drained.structure)
        if drained.approvals:
            screen.query_one("#approvals", ApprovalsPane).set_items(self.model.pending_approvals())
            self._alert_approvals()
        if drained.dirty:
            self._alert_budgets(drained.dirty)
        sel = self.model.selected
        if sel is not None and (sel in drained.dirty or sel in drained.traced):
            self.refresh_detail()
        if drained.status_changed or drained.structure or self.keys_dirty:
            self.keys_dirty = False
            self._refresh_bindings_if_changed()
            self.refresh_subtitle()

    # ---- alerts ------------------------------------------------------------------------------
    def _alert_approvals(self) -> None:
        """A new call waiting for approval anywhere on the store: the bell, and its words."""
        fresh = self.model.new_approvals()
        if not fresh:
            return
        self.host.bell()
        for p in fresh:
            words = f"{one_line(p.tool, 40)} {one_line(p.args, 160)}"
            self.alerts.append(f"approval: {p.run_id}: {words}")
            self.host.notify(words, title=f"{one_line(p.run_id, 60)} waits for approval", severity="warning",
                             markup=False, timeout=15)

    def _alert_budgets(self, dirty: Iterable[str]) -> None:
        for rid, level, st in self.model.budget_crossings(dirty):
            words = (f"spent {money(st.cost_usd)} of its {money(st.limits.budget_usd)} budget "
                     f"({level:.0%})")
            self.alerts.append(f"budget {level:.0%}: {rid}")
            self.host.notify(words, title=f"{one_line(rid, 60)}: budget {level:.0%}",
                             severity="error" if level >= 1 else "warning", markup=False, timeout=10)

    def _refresh_runs_list(self, dirty: set[str] | None = None, *, structure: bool = False) -> None:
        model = self.model
        runs = self.console_screen.query_one("#runs", RunsList)
        if structure:
            order = model.ordered_ids()
            runs.set_rows([model.row(r) for r in order], model.selected)
        else:
            targets = set(runs.order) if dirty is None else {r for d in dirty for r in (d, model.root_of(d))}
            for rid in targets:
                if rid in model.states:
                    runs.update_row(model.row(rid))
        label = count(len(model.states), "run")
        if runs.border_subtitle != label:  # setting it repaints the whole list, every flush
            runs.border_subtitle = label

    def _header_text(self, rid: str) -> Text:
        model = self.model
        st = model.states[rid]
        key = model.badge_key(rid)
        out = Text()
        out.append(one_line(rid, 80), style="bold")
        out.append("  ")
        out.append_text(badge(key))
        label = agent_label(st)
        shown = st.model if label == st.model else f"{label} ({st.model})"
        out.append(f"   {one_line(shown, 60)}", style="dim")
        notes = model.agent_notes.get(rid)
        if notes is not None and notes.agent:  # an ACP agent: who answered, as it says
            out.append(f" · {one_line(notes.agent, 40)}", style="bold blue")
            if notes.config:  # its config options (model, mode…), as it last stated them
                out.append(f" · {one_line(config_words(notes.config).removeprefix('config: '), 80)}", style="blue")
        if st.parent_run_id:
            out.append(f"   subagent of {one_line(st.parent_run_id, 60)}", style="dim")
        can = what_it_can(run_source(st))
        if can is not None:  # not Tether's loop: say whose it is, and when Stop lands
            out.append("\nsource  ", style="dim")
            out.append(can, style="blue")
        out.append("\ntask    ", style="dim")
        out.append(one_line(st.task, 200))
        it = st.interruption
        out.append("\n")
        if st.status is Status.COMPLETED:
            out.append("answer  ", style="dim")
            out.append(one_line(st.answer or "", 300), style="green")
        elif key == "approval" and isinstance(it, NeedsApproval):
            out.append("waiting ", style="dim")
            out.append(f"{clean(it.tool_name)} {one_line(it.args, 120)} ({clean(it.call_id)})", style="bold")
            tally, deadline = tally_words(it), deadline_clock(it) if self.options.timings else None
            if tally or deadline:
                out.append(f"  {' · '.join(w for w in (tally, deadline) if w)}", style="bold yellow")
            out.append("  a approves · r rejects", style="dim")
        elif key == "queued":
            out.append("queued  ", style="dim")
            depth = model.queue.depth if model.queue is not None else 0
            out.append(f"waiting for a worker ({count(depth, 'run')} in the queue)", style="cyan")
        elif key == "running":
            out.append("running ", style="dim")
            out.append(one_line(model.activity.get(rid) or "asking the model", 200), style="bold")
            if model.can_stop(rid):
                out.append("  s stops it", style="dim")
        else:
            out.append("stopped ", style="dim")
            out.append(one_line(model.reason(rid), 300), style="yellow" if key != "failed" else "red")
            if model.can_resume(rid):
                out.append("  R resumes", style="dim")
        owner = model.owner_words(rid)
        who = model.who_decided(rid)
        if owner or who:
            out.append("\n")
            out.append("who     ", style="dim")
            out.append(one_line(" · ".join(w for w in (owner, who) if w), 300))
        return out

    def _transcript_footer(self, rid: str) -> Text | None:
        """What goes under the transcript: an ACP agent's plan (its last), then the reply
        streaming in, or how the run stopped."""
        notes = self.model.agent_notes.get(rid)
        plan = plan_text(notes.plan) if notes is not None and notes.plan else None
        footer = self._stop_footer(rid)
        if plan is None or footer is None:
            return plan or footer
        return Text("\n").join([plan, footer])

    def _stop_footer(self, rid: str) -> Text | None:
        model = self.model
        st = model.states[rid]
        if st.status is Status.RUNNING and model.is_live(rid):
            partial = model.streaming.get(rid)
            if not partial:
                return None
            # The reply as it streams in: the last assistant message, growing.
            out = Text("assistant  ", style="bold cyan")
            out.append(clean(partial))
            out.append("▌", style="blink")
            return out
        key = model.badge_key(rid)
        if st.status is Status.COMPLETED and key != "worker_error":
            if is_acp(st):
                return Text(f"── completed: {clean(model.reason(rid))} ──", style="dim green")
            return Text("── completed: the model answered ──", style="dim green")
        if model.waits_here(rid) or model.waits_in_process(rid):  # not stopped: its process holds it, waiting
            return Text(f"── {clean(model.reason(rid))}: a approves · r rejects ──", style="bold cyan")
        return Text(f"── {st.status.value}: {clean(model.reason(rid))} ──", style="bold yellow")

    @property
    def transcript_view(self) -> TranscriptView:
        """The transcript view (of the selected run)."""
        return self._transcript_view

    @property
    def trace_view(self) -> TraceView:
        """The trace view (of the selected run)."""
        return self._trace_view

    def refresh_detail(self) -> None:
        """The selected run's header and panes, now."""
        screen = self.console_screen
        rid = self.model.selected
        header = screen.query_one("#run-header", Static)
        transcript, trace = self.transcript_view, self.trace_view
        cost = screen.query_one("#cost", CostMeter)
        if rid is None or rid not in self.model.states:
            self._update_static(header, Text("No run selected. Press n to start one.", style="dim"))
            transcript.show(None)
            trace.show(None, ())
            cost.show(None)
            self.follow_changes()
            return
        st = self.model.states[rid]
        buffer = self.pump.buffer(rid)  # first: a run's history may hold its agent's notes
        notes = self.model.agent_notes.get(rid)
        self._update_static(header, self._header_text(rid))
        # An ACP run's transcript has its agent's notes among its messages (none yet: still so).
        transcript.show(st, self._transcript_footer(rid), notes.notes if notes is not None else [] if is_acp(st) else None)
        trace.show(rid, buffer)
        cost.show(st, speed=self.model.speed.get(rid))
        self.follow_changes()  # another run, or its workspace made: the panes of the run follow it

    def follow_changes(self) -> None:
        """Hand the selected run to every pane of the run (:class:`~tether.tui.widgets.run_pane.RunPane`,
        the Changes pane among them): each follows it if it is shown and not following it yet."""
        if not self.host.console_up:
            return
        rid = self.model.selected
        st = self.model.states.get(rid) if rid is not None else None
        for pane in self.console_screen.query(RunPane):
            pane.show_run(rid, st)

    @property
    def changes_pane(self) -> ChangesPane:
        return self.console_screen.query_one("#changes", ChangesPane)

    @property
    def changes_shown(self) -> bool:
        return bool(self.changes_pane.display)

    def toggle_changes(self) -> None:
        """Show the selected run's changes in place of its trace, or the trace again."""
        shown = self.changes_pane.toggle()
        self.console_screen.query_one("#traces").display = not shown
        if shown:
            self.follow_changes()

    def changes_read(self, event: ChangesPane.Read) -> None:
        """The runs list shows what the pane read, not only what the last operation kept."""
        ws = event.workspace
        if ws.changes is None or any(ws.changes.get(k) != v for k, v in event.counts.items()):
            ws.changes = {**event.counts, "at": time.time()}
            self.pump.mark(event.run_id)
        self.host.post_message(Shown("changes", event.run_id))

    @staticmethod
    def _update_static(widget: Static, text: Text) -> None:
        """Update only when the text changed: every refresh repaints the widget."""
        if getattr(widget, "_tether_last", None) != text:
            widget._tether_last = text  # type: ignore[attr-defined]
            widget.update(text, layout=False)  # fixed height: a layout pass would be wasted

    def refresh_subtitle(self) -> None:
        runs, running = self.model.counts()
        waiting = len(self.console_screen.query_one("#approvals", ApprovalsPane).items)
        queue = self.model.queue
        queued = f" · {queue.depth} queued" if queue is not None else ""
        where = f" · {store_label(self.client.where)}" if self.client.blocking else ""  # a store elsewhere: which
        watching = "read-only · " if self.model.refusal else ""
        failing = self.client.notify_lines  # the notifications' sender, failing: its first line, and how many more
        notes = f" · ⚠ {failing[0]}" + (f" (+{len(failing) - 1})" if len(failing) > 1 else "") if failing else ""
        self.console_screen.query_one(ConsoleHeader).show_sub_title(
            f"{watching}{count(runs, 'run')} · {running} running{queued} · {waiting} waiting for approval"
            f" · today {money(self.model.spend_today())}{where}{notes}")

    # ---- selection ------------------------------------------------------------------------
    def select(self, rid: str | None) -> None:
        if rid is None or rid not in self.model.states:
            return
        changed = rid != self.model.selected
        self.model.selected = rid
        if self.model.needs_load(rid):  # a run listed from its summary: its transcript now
            self.client.load(rid)
        runs = self.console_screen.query_one("#runs", RunsList)
        if rid not in runs.order:  # a run created since the last refresh: list it now, or keys act on a stale list
            self.pump.structure_dirty = False
            self._refresh_runs_list(structure=True)
        runs.select(rid)
        if changed:
            self.refresh_detail()
            self._refresh_bindings_if_changed()
            self.host.call_after_refresh(self._shown, "selected", rid)

    def _refresh_bindings_if_changed(self) -> None:
        rid = self.model.selected
        applies = (rid, *self.model.applies(rid))
        if applies[1:] != self._applies[1:]:
            self.console_screen.refresh_bindings()
        self._applies = applies

    def _shown(self, what: str, rid: str) -> None:
        self.host.post_message(Shown(what, rid))

    def run_highlighted(self, event: RunsList.Highlighted) -> None:
        """The runs list moved: the selection follows, painted at once."""
        self.select(event.run_id)
        event.runs_list.show_cursor()  # in the same frame as the run it moved to
        self._paint_now()

    def _paint_now(self) -> None:
        """Paint the change being made as soon as it reaches the screen (see ConsoleScreen)."""
        if self.host.console_up:
            self.console_screen.paint_when_settled = True

    def approval_highlighted(self) -> None:
        """A call moved to in the approvals pane, while it has the focus: its run is selected."""
        pane = self.console_screen.query_one("#approvals", ApprovalsPane)
        if pane.has_focus and pane.current is not None:
            self.select(pane.current.run_id)

    def approval_chosen(self) -> bool:
        """A call chosen in the approvals pane: its run is selected; True when there was one."""
        pane = self.console_screen.query_one("#approvals", ApprovalsPane)
        if pane.current is None:
            return False
        self.select(pane.current.run_id)
        return True

    def focused(self, widget: Widget | None) -> None:
        """The focus moved to ``widget``: the approvals pane selects the run of its call."""
        if isinstance(widget, ApprovalsPane) and widget.current is not None:
            self.select(widget.current.run_id)

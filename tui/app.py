"""The Tether console: a Textual app that supervises every run on a store.

The console is a client of the store with no special powers (docs/run-store.md, "How it follows the store"):
what it shows comes from watching the store, what it does goes through the harness and the
store's control channel, and when it runs a run itself it is one more owner. Its parts:

* :mod:`tether.tui.state.options`: what a console is asked to be, one frozen object;
* :mod:`tether.tui.state.model`: the console model, Textual-free: the runs, the selection, the
  pending approvals, who runs what, and what each key can do (``can_stop``,
  ``can_decide``, ``can_resume``);
* :mod:`tether.tui.state.pump`: the event pump: the events of the runs this console drives (its
  harness's sink, the fast path) and of the runs other processes drive (read back from
  their traces by :mod:`tether.tui.state.store_client`), dispatched by event class into the
  model and the trace buffers, with the flush throttle;
* this app, the shell: the options, the parts made and wired, start-up and shut-down, what
  applies to the selected run (the keys greyed out, the command palette). Each concern is
  a collaborator the app makes and hands what it needs, with itself as the host it asks
  the screen of (a Protocol in the collaborator's module), never a mixin:
  :class:`~tether.tui.following.StoreFollowing` (the store followed, the events in; it
  makes the pump and the store client), :class:`~tether.tui.views.ConsoleViews` (the
  widgets brought up to date, the selection), :class:`~tether.tui.run_actions.RunActions`
  (start, stop, resume, follow up), :class:`~tether.tui.decisions.DecisionActions`
  (approve, reject, edit, rules, the record of decisions),
  :class:`~tether.tui.workspace_actions.WorkspaceActions` (merge, discard) and
  :class:`~tether.tui.timeline.CheckpointTimeline` (the Changes pane's checkpoints). The
  keys' actions and the handlers of the widgets' and screens' messages are the app's, and
  call them;
* the screens (:mod:`tether.tui.screens`: the main screen, the dialogs) and the widgets
  (:mod:`tether.tui.widgets`), over the Textual-free state (:mod:`tether.tui.state`).
  Attributes down (the app reads the model and hands each widget what it shows), messages
  up (widgets post messages, the pump asks for a :class:`~tether.tui.screens.console.Flush`).

Event flow: the harness calls :meth:`TetherApp._sink` synchronously from the run's loop;
another process's events come from :class:`~tether.tui.state.store_client.StoreClient`, which
follows the store with inotify and reads only what was appended. Either way the pump queues
the event, marks the run dirty and, if no refresh is pending, posts one :class:`Flush`. The
app handles it at most every ``FLUSH_INTERVAL_S`` (at once for a start, a stop or an
approval): the changed rows of the runs list, the approvals pane, the selected run's
panes, incrementally. So a run emitting thousands of events a second costs the UI a few
refreshes a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from textual import on
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import OptionList
from textual.worker import Worker

from tether.agents.config import Config
from tether.observe.cost_figures import load_figures
from tether.harness import Harness
from tether.vocab.cancel import CancelSignal
from tether.vocab.events import Event
from tether.vocab.state import RunState
from tether.store.control import operator_name
from tether.tui.widgets.approvals import Pending
from tether.tui.widgets.changes import ChangesPane
from tether.tui.screens.help import HelpScreen
from tether.tui.screens.new_run import NewRunRequest
from tether.tui.widgets.runs_list import RunsList
from tether.tui.widgets.trace_view import TraceView
from tether.tui.widgets.transcript import TranscriptView
from tether.tui.decisions import DecisionActions
from tether.tui.following import StoreFollowing
from tether.tui.state.model import ConsoleModel
from tether.tui.screens.decisions import DecisionsScreen
from tether.tui.screens.rules import RulesScreen
from tether.tui.state.options import ConsoleOptions
from tether.tui.state.pump import EventPump
from tether.tui.run_actions import RunActions
from tether.tui.screens.console import ConsoleScreen, Flush
from tether.tui.state.store_client import StoreClient
from tether.tui.state.text import one_line
from tether.tui.timeline import TIMELINE_ACTIONS, CheckpointTimeline
from tether.tui.views import ConsoleViews
from tether.tui.workspace_actions import WorkspaceActions

YOUNG_GC_THRESHOLD = 10_000  # allocations between young collections while the console is up (Python: 700)
OWNER_CHECK_S = 1.0  # how often the locks of runs other processes hold are asked whether they live


class TetherApp(App[int]):
    """The console. Its parts are collaborators it makes and hands what they need (attributes
    down); the keys' actions and the handlers of the widgets' and screens' messages (messages
    up) are the app's, and call them."""

    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses elsewhere find it too
    TITLE = "Tether"
    SUB_TITLE = "agent runs"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True, id="tether.ctrl_quit"),
    ]

    def __init__(self, options: ConsoleOptions = ConsoleOptions(), *, harness: Harness | None = None) -> None:
        """``options``: what the console is asked to be (:class:`~tether.tui.state.options.ConsoleOptions`).
        ``harness``: the harness to drive runs with, as it is (the tests, the benchmarks); then
        the options that would build one (the store, the endpoint, the provider) are not read."""
        super().__init__()
        self.options = options
        self._owns_harness = harness is None
        self.harness = harness or Harness(options.runs_dir, options.workspace, config=options.config,
                                          base_url=options.base_url, api_key=options.api_key,
                                          latency_ms=options.latency_ms, embedded_url=options.provider_url,
                                          stream=options.stream, store=options.store,  # type: ignore[arg-type]
                                          agent_sets=options.agent_sets, operator_name=options.operator)
        self._owns_store = options.store is not None and harness is None
        if self._owns_harness and (options.otlp or any(os.environ.get(name) for name in (
                "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))):
            # lazy: OpenTelemetry's exporter, imported only when asked for
            from tether.observe.otel.sink import otel_sink_from_env

            sink = otel_sink_from_env(options.otlp, on_dropped=self.harness.note_dropped,
                                      state_of=self.harness.live.get, secrets=self.harness.secrets())
            if sink is not None:
                self.harness.sinks.append(sink)  # shut down with the harness when the console quits
        # What the console derives from its options, kept beside them:
        self.config: Config | None = options.config if options.config is not None else self.harness.config
        self.adhoc_workspace = Path(options.workspace) if options.workspace is not None else Path.cwd()
        operator = options.operator or operator_name()
        # the parts: the model (what the console knows), the pump (events in), the store client
        self.model = ConsoleModel(driving=self.harness.live, operator=operator)
        self.following = StoreFollowing(self, self.harness.store, self.model, options)
        self.pump: EventPump = self.following.pump
        self.client: StoreClient = self.following.client
        self.views = ConsoleViews(self, self.model, self.pump, self.client, options)
        self.runs = RunActions(self, self.harness, self.model, self.pump, self.client, options, config=self.config,
                               adhoc_workspace=self.adhoc_workspace, sink=self._sink)
        self.decisions = DecisionActions(self, self.harness, self.model, options, self.runs, config=self.config,
                                         trace_path=self.following.trace_path)
        self.workspace = WorkspaceActions(self, self.harness.store, self.model, self.pump)
        self.timeline = CheckpointTimeline(self, self.harness.store, self.harness.workspaces_dir, self.model,
                                           self.pump, took=self.workspace.took, outcome=self.workspace.outcome)
        self._watch_task: asyncio.Task[None] | None = None
        self._quitting = False
        self._console_up = False
        self._console_screen: ConsoleScreen
        self._gc_thresholds: tuple[int, ...] = ()

    # ---- the model's state, as the views and the tests read it ---------------------------
    @property
    def operator(self) -> str:
        """Who decides at this console (the model keeps it: every part reads it there)."""
        return self.model.operator

    @operator.setter
    def operator(self, name: str) -> None:
        self.model.operator = name

    @property
    def states(self) -> dict[str, RunState]:
        return self.model.states

    @property
    def console_up(self) -> bool:
        """The console screen is composed and lists the store's runs."""
        return self._console_up

    @property
    def quitting(self) -> bool:
        """The operator asked to quit: the runs are being stopped, then the console exits."""
        return self._quitting

    @property
    def active(self) -> dict[str, Worker[Any]]:
        return self.model.active

    @property
    def signals(self) -> dict[str, CancelSignal]:
        return self.model.signals

    @property
    def selected(self) -> str | None:
        return self.model.selected

    @property
    def worker_errors(self) -> dict[str, str]:
        return self.model.worker_errors

    @property
    def last_reason(self) -> dict[str, str]:
        return self.model.last_reason

    @property
    def load_problems(self) -> dict[str, str]:
        return self.model.load_problems

    @property
    def events_seen(self) -> int:
        return self.pump.events_seen

    @property
    def alerts(self) -> list[str]:
        """What the operator was alerted to (bell and notification), in words."""
        return self.views.alerts

    # ---- what following the store asks of the console (tether.tui.following.ConsoleHost) ----
    @property
    def rules_shown(self) -> bool:
        # A timer's look at the store can land while the app closes, its screens already gone.
        return bool(self.screen_stack) and isinstance(self.screen, RulesScreen)

    def keys_changed(self) -> None:
        self.views.keys_dirty = True

    def refresh_selected(self) -> None:
        self.views.refresh_detail()

    def refresh_subtitle(self) -> None:
        self.views.refresh_subtitle()

    async def reload_rules(self) -> None:
        await self.decisions.reload_rules()

    # ---- the event sink (the harness calls it from the run's loop: kept cheap), the store followed
    def _sink(self, event: Event) -> None:
        self.pump.sink(event)

    async def store_ready(self) -> None:
        """Wait until the console follows the store: what is written from then on is seen."""
        await self.following.ready()

    # ---- set-up ----------------------------------------------------------------
    def get_default_screen(self) -> Screen[Any]:
        self._console_screen = ConsoleScreen(id="console")
        return self._console_screen

    @property
    def console_screen(self) -> ConsoleScreen:
        return self._console_screen

    def console_ready(self) -> None:
        """The console screen is composed: list the runs on the store, follow it, start the --start runs."""
        self._console_up = True
        self.views.attach(self.console_screen)
        if not self.client.blocking:
            self.following.reload_runs()
        if self.options.watch or self.client.blocking:
            self._watch_task = asyncio.create_task(self.following.follow(), name="tether console: store watcher")
        if self.options.watch:
            self.set_interval(OWNER_CHECK_S, self.following.check_owners, name="tether console: owners")
        first_started: str | None = None
        for request in self.options.start:
            try:
                if self.harness.base_url:
                    rid = self.create_run(NewRunRequest(self.options.model or "", request), start=True)
                else:
                    rid = self.create_run(NewRunRequest(request), start=True)
            except Exception as exc:  # an unknown scenario must not stop the console
                self.notify(f"could not start {one_line(request)}: {one_line(exc)}", severity="error", markup=False)
                continue
            first_started = first_started or rid
        if first_started:
            self.select(first_started)
        elif self.states and self.selected is None:
            self.select(self.model.ordered_ids()[-1])
        if self.selected is None:
            self.views.refresh_detail()
        self.show_events()
        self.query_one("#runs", RunsList).focus()
        # What exists now (modules, widgets, the rank file) lives as long as the console:
        # keep it out of the cyclic collector, whose full passes over it stalled the screen
        # under load. And collect the young generation less often: rendering makes heaps of
        # short-lived objects that refcounting frees, and each young pass promotes the ones
        # alive at that moment, which brings the next full pass nearer (the key latencies with
        # and without: docs/performance-history.md, "The console under load"). Both undone when
        # the app unmounts.
        gc.collect()
        gc.freeze()
        self._gc_thresholds = gc.get_threshold()
        gc.set_threshold(YOUNG_GC_THRESHOLD, *self._gc_thresholds[1:])
        for note in self.options.notes:
            self.notify(note, severity="warning", markup=False, timeout=10)
        if self.load_problems:
            self.notify(f"skipped {len(self.load_problems)} unreadable run(s): "
                        + "; ".join(f"{one_line(k, 40)}: {one_line(v, 80)}" for k, v in self.load_problems.items()),
                        severity="warning", markup=False, timeout=10)

    async def on_unmount(self) -> None:
        task, self._watch_task = self._watch_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        await self.client.aclose()
        if self._owns_store:
            await asyncio.to_thread(self.harness.store.close)
        gc.unfreeze()
        if self._gc_thresholds:
            gc.set_threshold(*self._gc_thresholds)

    # ---- the views (tether.tui.views): attributes down, the widgets' messages up ------------
    def on_flush(self, message: Flush) -> None:
        self.views.flush()

    def show_events(self) -> None:
        """Bring the views up to date with every event collected so far, now."""
        self.views.show_events()

    def select(self, rid: str | None) -> None:
        self.views.select(rid)

    def follow_changes(self) -> None:
        self.views.follow_changes()

    @property
    def transcript_view(self) -> TranscriptView:
        """The transcript view (of the selected run)."""
        return self.views.transcript_view

    @property
    def trace_view(self) -> TraceView:
        """The trace view (of the selected run)."""
        return self.views.trace_view

    @property
    def changes_pane(self) -> ChangesPane:
        return self.views.changes_pane

    @property
    def changes_shown(self) -> bool:
        return self.views.changes_shown

    def action_changes(self) -> None:
        self.views.toggle_changes()

    @on(ChangesPane.Read)
    def _changes_read(self, event: ChangesPane.Read) -> None:
        self.views.changes_read(event)

    @on(RunsList.Highlighted, "#runs")
    def _run_highlighted(self, event: RunsList.Highlighted) -> None:
        self.views.run_highlighted(event)

    @on(OptionList.OptionHighlighted, "#approvals")
    def _approval_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self.views.approval_highlighted()

    @on(OptionList.OptionSelected, "#approvals")
    def _approval_chosen(self, event: OptionList.OptionSelected) -> None:
        if self.views.approval_chosen():
            self.action_approve()

    def on_descendant_focus(self, event: Any) -> None:
        self.views.focused(getattr(event, "widget", None))

    # ---- trace buffers ---------------------------------------------------------------
    def trace_lines(self, rid: str) -> list[str]:
        """The trace lines the console holds for a run (bounded)."""
        return [line for _, line in self.pump.buffer(rid)]

    # ---- derived views (the model's) -----------------------------------------------------------
    def is_live(self, rid: str) -> bool:
        return self.model.is_live(rid)

    def root_of(self, rid: str) -> str:
        return self.model.root_of(rid)

    def badge_key(self, rid: str) -> str:
        return self.model.badge_key(rid)

    def pending_approvals(self) -> list[Pending]:
        return self.model.pending_approvals()

    def reason(self, rid: str) -> str:
        return self.model.reason(rid)

    def can_stop(self, rid: str) -> bool:
        return self.model.can_stop(rid)

    def can_decide(self, rid: str) -> bool:
        return self.model.can_decide(rid)

    def can_resume(self, rid: str) -> bool:
        return self.model.can_resume(rid)

    # ---- what applies to a run ---------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in TIMELINE_ACTIONS:
            return self.timeline.check(action)
        checks: dict[str, Callable[[str], bool]] = {
            "stop": self.model.can_stop, "approve": self.model.can_decide, "reject": self.model.can_decide,
            "edit": self.model.can_decide,
            "resume": self.model.can_resume, "follow_up": self.model.can_follow_up,
            "merge": self.can_merge, "discard": self.can_discard,
        }
        check = checks.get(action)
        if check is None:
            return True
        rid = self.selected
        return True if rid is not None and check(rid) else None

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        rid = self.selected
        name = one_line(rid or "", 40)
        yield SystemCommand("New run", "Start a run: an agent or a demo scenario, its task, limits and policies",
                            self.action_new_run)
        yield SystemCommand("Help", "Keys and what they do (F1)", self.action_help)
        yield SystemCommand("Rules", "The standing rules that decide calls: list, add, remove (L)", self.action_rules)
        yield SystemCommand("Decisions", "Every decision on the store: who approved what, when (D)",
                            self.action_decisions)
        yield SystemCommand("Costs", "What the runs cost: per day, by agent and model; the fleet budgets ($)",
                            self.action_costs)
        if rid and self.can_stop(rid):
            yield SystemCommand("Stop run", f"Stop {name}: fire its cancellation signal", self.action_stop)
        if rid and self.can_decide(rid):
            yield SystemCommand("Approve call", f"Approve the pending call of {name}", self.action_approve)
            yield SystemCommand("Approve with edited arguments", f"Edit the arguments of {name}'s pending call, "
                                "then approve it (e)", self.action_edit)
            yield SystemCommand("Reject call", f"Reject the pending call of {name}, in words", self.action_reject)
        if rid and self.can_merge(rid):
            yield SystemCommand("Merge run", f"Merge {name}'s work into a branch: checked, then a decision (M)",
                                self.action_merge)
        if rid and self.can_discard(rid):
            yield SystemCommand("Discard workspace", f"Remove {name}'s workspace and branch; its transcript stays (X)",
                                self.action_discard)
        if rid and self.can_resume(rid):
            yield SystemCommand("Resume run", f"Resume {name} with raised limits", self.action_resume)
        for p in self.pending_approvals():
            if p.run_id != rid:
                yield SystemCommand(f"Go to {one_line(p.run_id, 40)}", f"waiting for approval of {p.tool}",
                                    lambda r=p.run_id: self.select(r), discover=False)

    # ---- runs: start, stop, resume, follow up, quit (tether.tui.run_actions) ------------------
    def create_run(self, request: NewRunRequest, *, run_id: str | None = None, start: bool = True) -> str:
        """Make a run of the agent ``request`` names (and start it)."""
        return self.runs.create_run(request, run_id=run_id, start=start)

    def start_run(self, rid: str, *, max_turns: int | None = None, budget_usd: float | None = None,
                  message: str | None = None) -> Worker[Any]:
        return self.runs.start_run(rid, max_turns=max_turns, budget_usd=budget_usd, message=message)

    async def stop_all(self) -> None:
        """Stop every run this console drives and wait for their workers."""
        await self.runs.stop_all()

    def action_stop(self) -> None:
        self.runs.stop()

    def action_new_run(self) -> None:
        self.runs.new_run()

    def action_resume(self) -> None:
        self.runs.resume()

    def action_follow_up(self) -> None:
        self.runs.follow_up()

    async def action_quit(self) -> None:
        """Stop running runs cleanly (fire their signals, wait for their workers so the
        state is saved), then exit. Runs waiting for approval just stay on disk; runs other
        processes run go on."""
        if self._quitting:
            return
        self._quitting = True
        await self.runs.stop_for_quit()
        if self._owns_harness:
            await self.harness.aclose()
        self.exit(0)

    # ---- decisions, the rules and the record (tether.tui.decisions) ---------------------------
    def action_approve(self) -> None:
        self.decisions.approve()

    def action_reject(self) -> None:
        self.decisions.reject()

    def action_edit(self) -> None:
        self.decisions.edit()

    def action_rules(self) -> None:
        self.decisions.show_rules()

    def action_decisions(self) -> None:
        self.decisions.show_decisions()

    @on(RulesScreen.Add)
    def _add_rule(self) -> None:
        self.decisions.add_rule()

    @on(RulesScreen.Remove)
    def _remove_rule(self, message: RulesScreen.Remove) -> None:
        self.decisions.remove_rule(message.rule)

    @on(DecisionsScreen.Query)
    def _decisions_asked(self, message: DecisionsScreen.Query) -> None:
        self.decisions.decisions_asked(message.query)

    @on(DecisionsScreen.Chosen)
    def _decision_chosen(self, message: DecisionsScreen.Chosen) -> None:
        self.decisions.decision_chosen(message.run_id)

    # ---- merge and discard (tether.tui.workspace_actions) -----------------------------------
    def can_merge(self, rid: str) -> bool:
        return self.workspace.can_merge(rid)

    def can_discard(self, rid: str) -> bool:
        return self.workspace.can_discard(rid)

    def action_merge(self) -> None:
        self.workspace.merge()

    def action_discard(self) -> None:
        self.workspace.discard()

    # ---- the Changes pane's checkpoints (tether.tui.timeline) ---------------------------------
    def action_checkpoint_earlier(self) -> None:
        self.timeline.move(-1)

    def action_checkpoint_later(self) -> None:
        self.timeline.move(1)

    def action_rewind_here(self) -> None:
        self.timeline.rewind_here()

    def action_fork_here(self) -> None:
        self.timeline.fork_here()

    @on(ChangesPane.FileHighlighted)
    def _step_file_highlighted(self, event: ChangesPane.FileHighlighted) -> None:
        self.timeline.file_highlighted(event.path)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_costs(self) -> None:
        """``$``: what the fleet cost (tether.tui.screens.costs)."""
        # lazy: the Costs screen loads plotext (its bar charts), only when $ is pressed
        from tether.tui.screens.costs import CostsScreen

        if not isinstance(self.screen, CostsScreen):
            harness = self.harness
            self.push_screen(CostsScreen(lambda: asyncio.to_thread(load_figures, harness.store, harness.fleet)))

    def on_costs_screen_chosen(self, message: Any) -> None:
        if message.run_id in self.states:
            if message.control is self.screen:  # the Costs screen it was chosen on is still up
                self.screen.dismiss(None)
            self.select(message.run_id)

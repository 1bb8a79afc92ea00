"""The Tether console: a Textual app that supervises every run on a store.

The console is a client of the store with no special powers (docs: WAVE2, "The console"):
what it shows comes from watching the store, what it does goes through the harness and the
store's control channel, and when it runs a run itself it is one more owner. Three parts:

* :mod:`tether.tui.model`: the console model, Textual-free: the runs, the selection, the
  pending approvals, who runs what, and what each key can do (``can_stop``,
  ``can_decide``, ``can_resume``);
* :mod:`tether.tui.pump`: the event pump: the events of the runs this console drives (its
  harness's sink, the fast path) and of the runs other processes drive (read back from
  their traces by :mod:`tether.tui.store_client`), dispatched by event class into the
  model and the trace buffers, with the flush throttle;
* the views: this app and :mod:`tether.tui.components`. Attributes down (the app reads the
  model and hands each widget what it shows), messages up (widgets post messages, the pump
  asks for a :class:`Flush`).

Event flow: the harness calls :meth:`TetherApp._sink` synchronously from the run's loop;
another process's events come from :class:`~tether.tui.store_client.StoreClient`, which
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
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import events, on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen
from textual.widgets import OptionList, Static
from textual.worker import Worker

from tether.demo import agents as demo
from tether.agents.agent import Agent
from tether.run.cancel import CancelSignal
from tether.agents.config import Config, ConfigError, find_config, load_config
from tether.approvals import Call, Checked, DecisionQuery, Rule, run_source
from tether.store.control import ControlReply, ControlRequest, operator_name
from tether.run.events import Event
from tether.harness import ADHOC_AGENT, Harness, Outcome, adhoc_agent
from tether.demo.provider.server import provider_process
from tether.store.protocol import Store, call
from tether.run.state import NeedsApproval, RunState, StateError, Status, new_run_id
from tether.store.files.tail import tail_records
from tether.run.tracked import what_it_can
from tether.tui.components.approvals import ApprovalsPane, Pending
from tether.tui.components.approval_view import deadline_clock, tally_words
from tether.tui.components.args_editor import ArgsEditor
from tether.tui.components.cost_meter import CostMeter
from tether.tui.components.decision import ACP_NO_EDIT
from tether.tui.components.decisions_screen import DecisionsScreen
from tether.tui.components.dialogs import (
    GRACE_S,
    AgentChoice,
    ApproveDialog,
    DecisionAnswer,
    FollowUpDialog,
    HelpScreen,
    NewRunDialog,
    NewRunRequest,
    RejectDialog,
    ResumeDialog,
    ResumeRequest,
)
from tether.tui.components.header import ConsoleHeader
from tether.tui.components.key_bar import KeyBar
from tether.tui.components.rule_editor import RuleContext, RuleEditor
from tether.tui.components.rules_screen import ConfirmDialog, RulesScreen
from tether.tui.components.runs_list import RunsList
from tether.tui.components.trace_view import TraceView
from tether.tui.components.transcript import TranscriptView, plan_text
from tether.tui.model import ConsoleModel, agent_label, count, is_acp
from tether.tui.pump import EventPump
from tether.tui.store_client import StoreClient
from tether.tui.text import badge, clean, money, one_line
from tether.tui.textual_internals import has_unpainted_widgets, paint_now

STOP_REASON = "operator pressed Stop"
QUIT_REASON = "operator quit the console"
QUIT_TIMEOUT_S = 15.0
YOUNG_GC_THRESHOLD = 10_000  # allocations between young collections while the console is up (Python: 700)
OWNER_CHECK_S = 1.0  # how often the locks of runs other processes hold are asked whether they live


def scenario_choices() -> dict[str, str]:
    """Scenario name -> description, without the internal ``*_child`` scripts."""
    return demo.scenarios()


def _where(base_url: str | None) -> str:
    return base_url or "the scripted provider"


def agent_choices(config: Config | None, *, base_url: str | None = None,
                  workspace: Path | None = None) -> list[AgentChoice]:
    """What the New run dialog offers: the agents of the agent file (built now, so one that
    cannot be is listed with the reason), then, with ``base_url``, a model at that endpoint,
    else the demo scenarios."""
    choices: list[AgentChoice] = []
    for name in config.names if config is not None else ():
        try:
            agent = config.agent(name)  # type: ignore[union-attr]
        except ConfigError as exc:
            choices.append(AgentChoice("agent", name, "cannot be built (choose it to see why)",
                                       problem=f"agent {name} cannot be started: {exc}"))
            continue
        if agent.acp is not None:  # its own process brings its model and tools
            command = " ".join([Path(agent.acp.argv[0]).name, *agent.acp.argv[1:]])
            where = agent.workspace if agent.workspace is not None else Path.cwd()
            task = f" · its task: {agent.prompt}" if agent.prompt else " · no task of its own"
            choices.append(AgentChoice(
                "agent", name, f"ACP agent: {command}",
                detail=f"{name} ({config.path.name}): an ACP agent, with its own model and tools: {command} "  # type: ignore[union-attr]
                       f"· in {where}{task}",
                model=agent.model, prompt=agent.prompt, limits=agent.limits, policies=agent.policies))
            continue
        tools = ", ".join(t.name for t in agent.tool_list) or "no tools"
        if agent.mcp_servers:
            tools += "; MCP: " + ", ".join(s.name for s in agent.mcp_servers)
        task = f" · its task: {agent.prompt}" if agent.prompt else " · no task of its own"
        choices.append(AgentChoice(
            "agent", name, f"{agent.model} at {_where(agent.base_url)}",
            detail=f"{name} ({config.path.name}): {agent.model} at {_where(agent.base_url)} "  # type: ignore[union-attr]
                   f"· tools: {tools}{task}",
            model=agent.model, prompt=agent.prompt, limits=agent.limits, policies=agent.policies))
    if base_url:
        where = workspace if workspace is not None else Path.cwd()
        choices.append(AgentChoice(
            "model", ADHOC_AGENT, f"a model at {base_url} (type its name below)",
            detail=f"the model you name, at {base_url}, with list_files, read_file and delete_file on {where}"))
        return choices
    for name, description in scenario_choices().items():
        task = demo.SCENARIO_TASKS.get(name)
        choices.append(AgentChoice(
            "demo", name, f"demo · {description}",
            detail=f"demo scenario {name}: {description}" + (f" · its task: {task}" if task else ""),
            model=name, prompt=task))
    return choices


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
        yield KeyBar(id="keys")

    def on_mount(self) -> None:
        self.app.console_ready()  # type: ignore[attr-defined]


class TetherApp(App[int]):
    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses elsewhere find it too
    TITLE = "Tether"
    SUB_TITLE = "agent runs"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", show=False, priority=True, id="tether.ctrl_quit"),
    ]

    def __init__(
        self,
        *,
        harness: Harness | None = None,
        runs_dir: Path | str | None = None,
        workspace: Path | str | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        start: Sequence[str] = (),
        latency_ms: float = 0.0,
        timings: bool = True,
        grace_s: float = GRACE_S,
        provider_url: str | None = None,
        notes: Sequence[str] = (),
        config: Config | None = None,
        agent: str | None = None,
        stream: bool | str = "auto",
        operator: str | None = None,
        watch: bool = True,
        otlp: str | None = None,
        store: Store | None = None,
    ) -> None:
        """``provider_url``: where the embedded scripted provider is served by a child process
        (:func:`tether.demo.provider.server.provider_process`, what ``tether`` does); without it and
        without ``base_url`` the provider runs in this process. ``notes``: said at start-up.
        ``config``: the agent file, whose agents the New run dialog offers; ``agent``: the
        one it preselects (an agent of the file, or a demo scenario). With ``base_url`` and
        ``model``, the dialog also offers that model at that endpoint with the file tools on
        ``workspace`` (default: the current directory), as ``tether run --base-url`` does.
        ``operator``: who the console's Stops and decisions are recorded as (``--as NAME``;
        default :func:`tether.store.control.operator_name`). ``timings``: show durations and
        times of day (off, nothing on screen depends on the clock).
        ``watch``: follow the store (other processes' runs, live); off, the console lists
        the runs once and sees only its own runs' events. ``otlp``: export the console's own
        runs' spans there (as ``OTEL_EXPORTER_OTLP_ENDPOINT`` does). ``store``: the run store
        to supervise (a :class:`tether.store.postgres.store.PgStore`, say; default: the file store at
        ``runs_dir``); the console closes it when it ends."""
        super().__init__()
        self._owns_harness = harness is None
        self.harness = harness or Harness(runs_dir, workspace, config=config, base_url=base_url, api_key=api_key,
                                          latency_ms=latency_ms, embedded_url=provider_url,
                                          stream=stream, store=store)  # type: ignore[arg-type]
        self._owns_store = store is not None and harness is None
        if self._owns_harness and (otlp or any(os.environ.get(name) for name in (
                "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))):
            from tether.observe.otel import otel_sink_from_env  # the exporter is imported only when asked for

            sink = otel_sink_from_env(otlp, on_dropped=self.harness.note_dropped, state_of=self.harness.live.get,
                                      secrets=self.harness.secrets())
            if sink is not None:
                self.harness.sinks.append(sink)  # shut down with the harness when the console quits
        self.config: Config | None = config if config is not None else self.harness.config
        self.initial_agent = agent
        self.adhoc_workspace = Path(workspace) if workspace is not None else Path.cwd()
        self.provider_url = provider_url
        self.startup_notes = list(notes)
        self.default_model = model
        self.start_requests = list(start)
        self.timings = timings
        self.grace_s = grace_s
        self.operator = operator or operator_name()
        self.watching = watch
        # the parts: the model (what the console knows), the pump (events in), the store client
        self.model = ConsoleModel(driving=self.harness.live, operator=self.operator)
        self.pump = EventPump(self.model, request_flush=self._request_flush, trace_path=self._trace_path,
                              timings=self.timings, on_buffer=self._trace_opened)
        self.client = StoreClient(self.harness.store, self.model, self.pump, on_owner=self._owner_changed,
                                  on_error=self._store_lost, on_listed=self._listed)
        self._checking = False
        self._watch_task: asyncio.Task[None] | None = None
        self._quitting = False
        self._bindings_dirty = True
        self._applies: tuple[Any, ...] = (None, None, None, None)
        self._console_up = False
        self._console_screen: ConsoleScreen
        self._transcript_view: TranscriptView
        self._trace_view: TraceView
        self.alerts: list[str] = []  # what the operator was alerted to (bell and notification), in words
        self._gc_thresholds: tuple[int, ...] = ()

    # ---- the model's state, as the views and the tests read it ---------------------------
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
        screen = self.console_screen
        self._transcript_view = screen.query_one(TranscriptView)
        self._trace_view = screen.query_one(TraceView)
        if not self.client.blocking:
            self.reload_runs()
        if self.watching or self.client.blocking:
            self._watch_task = asyncio.create_task(self._follow(), name="tether console: store watcher")
        if self.watching:
            self.set_interval(OWNER_CHECK_S, self._check_owners, name="tether console: owners")
        first_started: str | None = None
        for request in self.start_requests:
            try:
                if self.harness.base_url:
                    rid = self.create_run(NewRunRequest(self.default_model or "", request), start=True)
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
            self._refresh_detail()
        self.show_events()
        self.query_one("#runs", RunsList).focus()
        # What exists now (modules, widgets, the rank file) lives as long as the console:
        # keep it out of the cyclic collector, whose full passes over it stalled the screen
        # under load. And collect the young generation less often: rendering makes heaps of
        # short-lived objects that refcounting frees, and each young pass promotes the ones
        # alive at that moment, which brings the next full pass nearer (docs/performance.md
        # has the key latencies with and without). Both undone when the app unmounts.
        gc.collect()
        gc.freeze()
        self._gc_thresholds = gc.get_threshold()
        gc.set_threshold(YOUNG_GC_THRESHOLD, *self._gc_thresholds[1:])
        for note in self.startup_notes:
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
            close = getattr(self.harness.store, "close", None)
            if callable(close):
                await asyncio.to_thread(close)
        gc.unfreeze()
        if self._gc_thresholds:
            gc.set_threshold(*self._gc_thresholds)

    def reload_runs(self) -> None:
        """List every run on a store of local files, from its index (runs this console drives
        keep their live state). A network store is listed by the store client, off the loop."""
        self.client.take_listing(*self.client.listing())
        self.pump.structure_dirty = self.pump.approvals_dirty = True

    async def _follow(self) -> None:
        """What this console may do on the store (said up front), then follow the store."""
        if self.client.blocking:
            self.model.refusal = await self.client.refusal()
            await self.client.check_queue()
            self._bindings_dirty = True
            self._mark(structure=True)
        await self.client.run(follow=self.watching)

    def _listed(self) -> None:
        """A network store's first listing is in (it was taken off the loop): show it."""
        if self.selected is None and self.states:
            self.select(self.model.ordered_ids()[-1])
        self.show_events()

    def _store_lost(self, words: str, lost: bool = True) -> None:
        if lost:
            self.notify(words, title="not following the store", severity="error", markup=False, timeout=15)
        else:
            self.notify(words, title="the store is back", severity="information", markup=False, timeout=10)

    def _trace_opened(self, rid: str) -> None:
        self.client.prime(rid)

    async def store_ready(self) -> None:
        """Wait until the console follows the store: what is written from then on is seen."""
        await self.client.ready.wait()

    def _trace_path(self, rid: str) -> Path | None:
        return self.client.trace_path(rid)

    # ---- the event sink and the flush ----------------------------------------------------
    def _sink(self, event: Event) -> None:
        """Called synchronously by the run's loop for every event: keep it cheap."""
        self.pump.sink(event)

    def _request_flush(self) -> None:
        self.post_message(Flush())

    def _mark(self, run_id: str | None = None, *, structure: bool = False) -> None:
        self.pump.mark(run_id, structure=structure)

    def on_flush(self, message: Flush) -> None:
        wait = self.pump.wait_s()
        if wait > 0:
            self.set_timer(wait, self.show_events)
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
        if not self._console_up:
            self.pump.flush_pending = False
            return
        drained = self.pump.drain()
        for rid in drained.stopped:
            self.call_after_refresh(self._shown, "stopped", rid)
        screen = self.console_screen
        self._refresh_runs_list(drained.dirty, structure=drained.structure)
        if drained.approvals:
            screen.query_one("#approvals", ApprovalsPane).set_items(self.model.pending_approvals())
            self._alert_approvals()
        if drained.dirty:
            self._alert_budgets(drained.dirty)
        sel = self.selected
        if sel is not None and (sel in drained.dirty or sel in drained.traced):
            self._refresh_detail()
        if drained.status_changed or drained.structure or self._bindings_dirty:
            self._bindings_dirty = False
            self._refresh_bindings_if_changed()
            self._refresh_subtitle()

    # ---- alerts ------------------------------------------------------------------------------
    def _alert_approvals(self) -> None:
        """A new call waiting for approval anywhere on the store: the bell, and its words."""
        fresh = self.model.new_approvals()
        if not fresh:
            return
        self.bell()
        for p in fresh:
            words = f"{one_line(p.tool, 40)} {one_line(p.args, 160)}"
            self.alerts.append(f"approval: {p.run_id}: {words}")
            self.notify(words, title=f"{one_line(p.run_id, 60)} waits for approval", severity="warning",
                        markup=False, timeout=15)

    def _alert_budgets(self, dirty: Iterable[str]) -> None:
        for rid, level, st in self.model.budget_crossings(dirty):
            words = (f"spent {money(st.cost_usd)} of its {money(st.limits.budget_usd)} budget "
                     f"({level:.0%})")
            self.alerts.append(f"budget {level:.0%}: {rid}")
            self.notify(words, title=f"{one_line(rid, 60)}: budget {level:.0%}",
                        severity="error" if level >= 1 else "warning", markup=False, timeout=10)

    # ---- owners ------------------------------------------------------------------------------
    def _owner_changed(self, rid: str) -> None:
        self._bindings_dirty = True
        self.pump.mark(rid, structure=True)

    async def _check_owners(self) -> None:
        """A killed owner tells nobody: ask the store (its locks) once a second. And show the
        heartbeat's age, and the queue's depth."""
        if self._checking:  # the last check is still waiting on the store
            return
        self._checking = True
        try:
            for rid in await self.client.check_owners():
                self._owner_changed(rid)
            if await self.client.check_queue():
                self._mark(structure=True)
                self._bindings_dirty = True
            if await self.client.check_notifications():
                self._refresh_subtitle()
            if isinstance(self.screen, RulesScreen):  # a rule another process added or removed: shown
                await self._reload_rules()
        finally:
            self._checking = False
        rid = self.selected
        if rid is not None and rid in self.model.owners and not self.model.is_driven(rid):
            with contextlib.suppress(NoMatches):
                self._refresh_detail()

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

    def _refresh_runs_list(self, dirty: set[str] | None = None, *, structure: bool = False) -> None:
        model = self.model
        runs = self.console_screen.query_one("#runs", RunsList)
        if structure:
            order = model.ordered_ids()
            runs.set_rows([model.row(r) for r in order], self.selected)
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
            tally, deadline = tally_words(it), deadline_clock(it) if self.timings else None
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

    def _refresh_detail(self) -> None:
        screen = self.console_screen
        rid = self.selected
        header = screen.query_one("#run-header", Static)
        transcript, trace = self.transcript_view, self.trace_view
        cost = screen.query_one("#cost", CostMeter)
        if rid is None or rid not in self.states:
            self._update_static(header, Text("No run selected. Press n to start one.", style="dim"))
            transcript.show(None)
            trace.show(None, ())
            cost.show(None)
            return
        st = self.states[rid]
        buffer = self.pump.buffer(rid)  # first: a run's history may hold its agent's notes
        notes = self.model.agent_notes.get(rid)
        self._update_static(header, self._header_text(rid))
        # An ACP run's transcript has its agent's notes among its messages (none yet: still so).
        transcript.show(st, self._transcript_footer(rid), notes.notes if notes is not None else [] if is_acp(st) else None)
        trace.show(rid, buffer)
        cost.show(st, speed=self.model.speed.get(rid))

    @staticmethod
    def _update_static(widget: Static, text: Text) -> None:
        """Update only when the text changed: every refresh repaints the widget."""
        if getattr(widget, "_tether_last", None) != text:
            widget._tether_last = text  # type: ignore[attr-defined]
            widget.update(text, layout=False)  # fixed height: a layout pass would be wasted

    def _refresh_subtitle(self) -> None:
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
        if rid is None or rid not in self.states:
            return
        changed = rid != self.selected
        self.model.selected = rid
        if self.model.needs_load(rid):  # a run listed from its summary: its transcript now
            self.client.load(rid)
        runs = self.console_screen.query_one("#runs", RunsList)
        if rid not in runs.order:  # a run created since the last refresh: list it now, or keys act on a stale list
            self.pump.structure_dirty = False
            self._refresh_runs_list(structure=True)
        runs.select(rid)
        if changed:
            self._refresh_detail()
            self._refresh_bindings_if_changed()
            self.call_after_refresh(self._shown, "selected", rid)

    def _refresh_bindings_if_changed(self) -> None:
        rid = self.selected
        applies = (rid, *self.model.applies(rid))
        if applies[1:] != self._applies[1:]:
            self.console_screen.refresh_bindings()
        self._applies = applies

    def _shown(self, what: str, rid: str) -> None:
        self.post_message(Shown(what, rid))

    @on(RunsList.Highlighted, "#runs")
    def _run_highlighted(self, event: RunsList.Highlighted) -> None:
        self.select(event.run_id)
        event.runs_list.show_cursor()  # in the same frame as the run it moved to
        self._paint_now()

    def _paint_now(self) -> None:
        """Paint the change being made as soon as it reaches the screen (see ConsoleScreen)."""
        if self._console_up:
            self.console_screen.paint_when_settled = True

    @on(OptionList.OptionHighlighted, "#approvals")
    def _approval_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        pane = self.console_screen.query_one("#approvals", ApprovalsPane)
        if pane.has_focus and pane.current is not None:
            self.select(pane.current.run_id)

    @on(OptionList.OptionSelected, "#approvals")
    def _approval_chosen(self, event: OptionList.OptionSelected) -> None:
        pane = self.console_screen.query_one("#approvals", ApprovalsPane)
        if pane.current is not None:
            self.select(pane.current.run_id)
            self.action_approve()

    def on_descendant_focus(self, event: Any) -> None:
        widget = getattr(event, "widget", None)
        if isinstance(widget, ApprovalsPane) and widget.current is not None:
            self.select(widget.current.run_id)

    # ---- what applies to a run ---------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        checks: dict[str, Callable[[str], bool]] = {
            "stop": self.model.can_stop, "approve": self.model.can_decide, "reject": self.model.can_decide,
            "edit": self.model.can_decide,
            "resume": self.model.can_resume, "follow_up": self.model.can_follow_up,
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
        if rid and self.can_stop(rid):
            yield SystemCommand("Stop run", f"Stop {name}: fire its cancellation signal", self.action_stop)
        if rid and self.can_decide(rid):
            yield SystemCommand("Approve call", f"Approve the pending call of {name}", self.action_approve)
            yield SystemCommand("Approve with edited arguments", f"Edit the arguments of {name}'s pending call, "
                                "then approve it (e)", self.action_edit)
            yield SystemCommand("Reject call", f"Reject the pending call of {name}, in words", self.action_reject)
        if rid and self.can_resume(rid):
            yield SystemCommand("Resume run", f"Resume {name} with raised limits", self.action_resume)
        for p in self.pending_approvals():
            if p.run_id != rid:
                yield SystemCommand(f"Go to {one_line(p.run_id, 40)}", f"waiting for approval of {p.tool}",
                                    lambda r=p.run_id: self.select(r), discover=False)

    # ---- operations ------------------------------------------------------------------------------
    def agent_for(self, request: NewRunRequest) -> Agent:
        """The agent a request names: the agent file's ``request.agent``, a demo scenario, or
        (with ``--base-url``) the model at that endpoint. Raises ValueError in words."""
        if request.agent is not None:
            if self.config is None:
                raise ValueError(f"no agent file: agent {request.agent} needs ./tether.toml, --config FILE "
                                 "or $TETHER_CONFIG")
            return self.config.agent(request.agent)
        if demo.is_scenario(request.model):
            return self.harness.demo_agent(request.model)  # at --base-url when the scripted provider is served there
        base_url = self.harness.base_url
        if base_url:
            if not request.model:
                raise ValueError("give a model name (--model, or in the New run dialog)")
            # The key is the console's (LLM_API_KEY), as for every run it makes at --base-url.
            return adhoc_agent(request.model, base_url, self.adhoc_workspace, api_key_env=None)
        raise ValueError(f"unknown scenario {request.model!r}; the demo scenarios are: "
                         + ", ".join(scenario_choices()))

    def create_run(self, request: NewRunRequest, *, run_id: str | None = None, start: bool = True) -> str:
        """Make a run of the agent ``request`` names (and start it)."""
        agent = self.agent_for(request)
        if run_id is None and agent.name == ADHOC_AGENT and agent.source == "library":
            run_id = new_run_id(agent.model.replace("/", "_")[:24])  # listed by its model, as before
        state = self.harness.create(agent, request.prompt, run_id=run_id, limits=request.limits,
                                    policies=request.policies)
        self.model.put_state(state)
        self.model.ours.add(state.run_id)
        self.pump.structure_dirty = True
        if start:
            self.start_run(state.run_id)
        else:
            self._mark(state.run_id, structure=True)
        return state.run_id

    async def _create_and_start(self, request: NewRunRequest) -> None:
        """:meth:`create_run` for a store that waits on a network: the run is saved from a
        worker thread, then started here."""
        try:
            agent = self.agent_for(request)
            run_id = None
            if agent.name == ADHOC_AGENT and agent.source == "library":
                run_id = new_run_id(agent.model.replace("/", "_")[:24])
            state = await asyncio.to_thread(self.harness.create, agent, request.prompt, run_id=run_id,
                                            limits=request.limits, policies=request.policies)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.notify(f"could not start the run: {one_line(exc)}", severity="error", markup=False)
            return
        self.model.put_state(state)
        self.model.ours.add(state.run_id)
        self.pump.structure_dirty = True
        self.start_run(state.run_id)
        self.show_events()
        self.select(state.run_id)

    def start_run(self, rid: str, *, max_turns: int | None = None, budget_usd: float | None = None,
                  message: str | None = None) -> Worker[Any]:
        return self._launch(rid, lambda sig: self.harness.run(rid, signal=sig, sinks=[self._sink],
                                                              max_turns=max_turns, budget_usd=budget_usd,
                                                              message=message))

    def approve_run(self, rid: str, note: str = "", call_id: str | None = None, args: str | None = None) -> Worker[Any]:
        """Approve the call of a run nobody holds: this console takes the run and goes on with it.
        ``args``: the operator's edited arguments (JSON)."""
        return self._launch(rid, lambda sig: self.harness.approve(rid, note, call_id=call_id, signal=sig,
                                                                  sinks=[self._sink], by=self.operator, args=args),
                            deciding=call_id or "")

    def reject_run(self, rid: str, reason: str = "", call_id: str | None = None) -> Worker[Any]:
        return self._launch(rid, lambda sig: self.harness.reject(rid, reason, call_id=call_id, signal=sig,
                                                                 sinks=[self._sink], by=self.operator),
                            deciding=call_id or "")

    def stop_run(self, rid: str, reason: str = STOP_REASON) -> bool:
        """Stop a run this console drives (its signal, at once); False when it drives none."""
        root = self.root_of(rid)
        signal = self.signals.get(root)
        if signal is None or root not in self.active:
            return False
        signal.cancel(reason, self.operator)
        self._bindings_dirty = True
        return True

    def request_stop(self, rid: str, reason: str = STOP_REASON) -> Worker[Any]:
        """Stop a run another process runs, through the store's control channel (Harness.stop);
        the reply's words are shown."""
        root = self.root_of(rid)
        self.model.stopping.add(root)
        self._bindings_dirty = True
        self._mark(root)
        return self.run_worker(self._control(root, lambda: self.harness.stop(root, reason, by=self.operator),
                                             "Stop"),
                               name=f"stop {root}", group="control", exit_on_error=False)

    def deliver_decision(self, rid: str, verdict: str, text: str = "", call_id: str | None = None,
                         option: str | None = None, args: str | None = None, scope: str | None = None) -> Worker[Any]:
        """Hand a decision to the process that holds ``rid`` waiting for one (Harness.decide):
        another process, or this one for an ACP run it drives. ``option``: the ACP agent's
        option to answer with (None: allow once, or reject once); ``args``: edited arguments;
        ``scope``: for an "always" option, the scope of the rule Tether keeps of it."""
        def decide() -> Awaitable[ControlReply]:
            if scope is not None:  # the request Harness.decide makes, with the rule's scope
                kind = "approve" if verdict in ("approve", "approved") else "reject"
                return self.harness.request(rid, ControlRequest(kind, text, call_id=call_id, by=self.operator,
                                                                option=option, scope=scope))
            return self.harness.decide(rid, verdict, text, call_id=call_id, by=self.operator, option=option,
                                       args=args)

        return self.run_worker(
            self._control(rid, decide,
                          "Approve" if verdict == "approve" else "Reject"),
            name=f"decide {rid}", group="control", exit_on_error=False)

    def decide_for_worker(self, rid: str, verdict: str, text: str = "", call_id: str | None = None,
                          args: str | None = None, rule: str | None = None) -> Worker[Any]:
        """Hand a decision to the queue worker's workflow that waits for it (tether.workers.decide.decide);
        when no workflow waits after all, decide here as for a run nobody holds. ``rule``: the
        standing rule that decides (recorded as ``rule R4``), not this console's operator."""
        from tether.workers import decide as workers

        async def decide() -> ControlReply:
            by = f"rule {rule}" if rule is not None else self.operator
            reply = await workers.decide(self.harness.store, rid, verdict, text, by=by, call_id=call_id,  # type: ignore[arg-type]
                                        args=args, rule=rule)
            if reply is None:
                if rule is not None:  # a rule's decision: this console's loop reads the store's rules
                    self._launch(rid, lambda sig: self.harness.run(rid, signal=sig, sinks=[self._sink]),
                                 deciding=call_id or "")
                elif verdict == "approve":
                    self.approve_run(rid, text, call_id=call_id, args=args)
                else:
                    self.reject_run(rid, text, call_id=call_id)
                return ControlReply(True, f"no worker waits for run {rid}: this console goes on with it")
            return reply

        return self.run_worker(self._control(rid, decide, "Approve" if verdict == "approve" else "Reject"),
                               name=f"decide {rid}", group="control", exit_on_error=False)

    async def _control(self, rid: str, op: Callable[[], Awaitable[ControlReply]], what: str) -> ControlReply | None:
        try:
            reply = await op()
        except (StateError, OSError) as exc:
            reply = ControlReply(False, str(exc))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reply = ControlReply(False, f"{type(exc).__name__}: {exc}")
        finally:
            self.model.stopping.discard(rid)
            self._bindings_dirty = True
            self._mark(rid, structure=True)
        self.notify(reply.words, title=f"{what}: {one_line(rid, 60)}",
                    severity="information" if reply.ok else "warning", markup=False, timeout=10)
        return reply

    def _launch(self, rid: str, op: Callable[[CancelSignal], Awaitable[Outcome]], *,
                deciding: str | None = None) -> Worker[Any]:
        signal = CancelSignal()
        self.signals[rid] = signal
        self.client.driven_here(rid)
        shown = (self.worker_errors.pop(rid, None), self.last_reason.pop(rid, None))
        worker = self.run_worker(self._drive(rid, op, signal, shown, deciding), name=f"run {rid}", group="runs",
                                 exit_on_error=False, description=f"runs {rid}")
        self.active[rid] = worker
        self._bindings_dirty = True
        self._mark(rid, structure=True)
        return worker

    async def _drive(self, rid: str, op: Callable[[CancelSignal], Awaitable[Outcome]], signal: CancelSignal,
                     shown: tuple[str | None, str | None] = (None, None), deciding: str | None = None) -> None:
        try:
            outcome = await op(signal)
            self.model.put_state(outcome.state)
        except asyncio.CancelledError:
            raise
        except StateError as exc:
            # The harness refused before anything was used up (the run's agent cannot be
            # rebuilt, its tools changed, another process holds it, another console decided
            # first): the run is as it was.
            error, reason = shown
            if error is not None:
                self.worker_errors[rid] = error
            if reason is not None:
                self.last_reason[rid] = reason
            await self._reload(rid)
            words = str(exc)
            if deciding is not None:  # another console or process decided first, or is deciding
                words = await self._decided_elsewhere(rid, deciding) or words
            self.notify(words, title=f"{one_line(rid, 60)} was not changed", severity="error",
                        markup=False, timeout=15)
        except Exception as exc:  # a worker error never crashes the app: it is the run's failure reason
            self.worker_errors[rid] = f"{type(exc).__name__}: {exc}"
            self.notify(f"{type(exc).__name__}: {exc}", title=f"{one_line(rid, 60)} failed", severity="error",
                        markup=False, timeout=15)
            await self._reload(rid)
        finally:
            if self.active.get(rid) is not None:
                self.active.pop(rid, None)
            self.client.released(rid)
            with contextlib.suppress(Exception):
                self.model.set_owner(rid, await call(self.harness.store, self.harness.store.owner, rid))
            self._bindings_dirty = True
            self._mark(rid, structure=True)

    async def _decided_elsewhere(self, rid: str, call_id: str) -> str | None:
        """Words for a decision that lost the race to another one (None: that is not why)."""
        st = self.states.get(rid)
        if st is None:
            return None
        decision = st.approvals.get(call_id) if call_id else max(st.approvals.values(), key=lambda d: d.ts,
                                                                  default=None)
        if decision is not None and not decision.complete:  # a two-person call: the harness's words say why
            return None
        if decision is not None:
            return f"already decided: {decision.verdict} by {decision.by}; there is one decision per call"
        if self.model.held_elsewhere(rid) or await call(self.harness.store, self.harness.store.owner, rid) is not None:
            return (f"another console or process took run {rid} first (it is deciding or running it); "
                    "nothing was done here")
        return None

    async def _reload(self, rid: str) -> None:
        """The run as saved (after an operation that raised instead of returning it)."""
        try:
            self.model.put_state(await asyncio.to_thread(self.harness.store.load, rid))
        except Exception:
            pass

    # ---- actions (keys, palette) -------------------------------------------------------------------
    def refused(self, what: str) -> bool:
        """Say so on screen, and True, when this console may only watch the store (its role
        is read-only): nothing is sent, nothing changes."""
        why = self.model.refusal
        if why is None:
            return False
        self.notify(why, title=f"{what}: refused", severity="warning", markup=False, timeout=10)
        return True

    def action_stop(self) -> None:
        rid = self.selected
        if not rid or not self.can_stop(rid) or self.refused("Stop"):
            return
        if not self.stop_run(rid):
            self.request_stop(rid)

    def action_approve(self) -> None:
        self._decide(ApproveDialog, "approve")

    def action_reject(self) -> None:
        self._decide(RejectDialog, "reject")

    def _decide(self, dialog: Callable[..., Screen[Any]], verdict: str) -> None:
        """Open ``dialog`` on the selected run's waiting call; apply the note or reason it
        returns (with edited arguments, or a rule to save that decides it): delivered to
        the process waiting for it, or here."""
        rid = self.selected
        if not rid or not self.can_decide(rid) or self.refused("Approve" if verdict == "approve" else "Reject"):
            return
        waiting = self.states[rid].interruption
        if not isinstance(waiting, NeedsApproval):
            return
        ask = self.model.ask_of(rid, waiting.call_id)
        if ask is None and is_acp(self.states[rid]):  # not seen yet: its trace has it
            path = self._trace_path(rid)
            if path is not None:
                self.model.take_history(rid, tail_records(path))
                ask = self.model.ask_of(rid, waiting.call_id)

        def done(answer: DecisionAnswer | str | None) -> None:
            if answer is None or not self.can_decide(rid):
                return
            if isinstance(answer, DecisionAnswer) and answer.rule is not None:
                self.run_worker(self._rule_decides(rid, waiting, answer.rule, answer.option), name=f"rule {rid}",
                                group="control", exit_on_error=False)
                return
            if isinstance(answer, DecisionAnswer):
                self.send_decision(rid, "approve" if answer.args is not None else verdict, answer.text,
                                   waiting.call_id, option=answer.option, args=answer.args, scope=answer.scope)
            else:
                self.send_decision(rid, verdict, answer, waiting.call_id)

        self.push_screen(dialog(rid, waiting, grace_s=self.grace_s, ask=ask, acp=is_acp(self.states[rid]),
                                rules=self.rule_context(rid)), done)

    def send_decision(self, rid: str, verdict: str, text: str, call_id: str, *, option: str | None = None,
                      args: str | None = None, scope: str | None = None) -> None:
        """Decide ``call_id`` the way the run waits for it: delivered to the process that
        holds it, to the queue worker's workflow, or here (this console goes on with it).
        ``scope``: with an ACP agent's "always" option, the scope of the rule Tether keeps."""
        route = self.model.decide_route(rid)
        if route == "process":
            self.deliver_decision(rid, verdict, text, call_id=call_id, option=option, args=args, scope=scope)
        elif route == "worker":
            self.decide_for_worker(rid, verdict, text, call_id=call_id, args=args)
        elif verdict == "approve":
            self.approve_run(rid, text, call_id=call_id, args=args)
        else:
            self.reject_run(rid, text, call_id=call_id)

    def action_edit(self) -> None:
        """Approve the selected run's waiting call with edited arguments (``e``)."""
        rid = self.selected
        if not rid or not self.can_decide(rid) or self.refused("Edit and approve"):
            return
        waiting = self.states[rid].interruption
        if not isinstance(waiting, NeedsApproval):
            return
        if is_acp(self.states[rid]):
            self.notify(ACP_NO_EDIT, title="Edit and approve: refused", severity="warning", markup=False, timeout=10)
            return

        def done(answer: tuple[str, str | None] | None) -> None:
            if answer is not None and self.can_decide(rid):
                note, args = answer
                self.send_decision(rid, "approve", note, waiting.call_id, args=args)

        self.push_screen(ArgsEditor(rid, waiting), done)

    # ---- standing rules and the record of decisions (tether.approvals) ------------------------------
    def rule_context(self, rid: str | None = None) -> RuleContext:
        """What the rule editor checks a rule against: the tools of ``rid``'s agent (none
        known for an ACP agent, whose tools are its own), and the agents known here."""
        st = self.states.get(rid) if rid else None
        agents = set(self.config.names if self.config is not None else ()) | set(scenario_choices())
        agents |= {s.agent.name for s in self.states.values() if s.agent is not None}
        tools = None
        if st is not None and not is_acp(st):
            with contextlib.suppress(Exception):  # an agent that cannot be rebuilt: no warning about tools
                tools = {t.name: t.parameters for t in self.harness.agent_of(st).tool_list}
        agent = (st.agent.name if st.agent is not None else st.model) if st is not None else None
        return RuleContext(self.operator, tools, tuple(sorted(agents)), run_id=rid if st is not None else None,
                           agent=agent)

    async def _save_rule(self, checked: Checked) -> Rule | None:
        """Keep ``checked``'s rule on the store, and say so (with its warnings); None when the
        store refused it (said in words)."""
        store = self.harness.store
        try:
            rule = await call(store, store.rule_add, checked.rule)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.notify(one_line(exc, 400), title="the rule was not saved", severity="error", markup=False,
                        timeout=15)
            return None
        words = f"rule {rule.id}: {rule.describe()} ({rule.reason})"
        if checked.warnings:
            words += "\n" + "\n".join(f"warning: {w}" for w in checked.warnings)
        self.notify(words, title=f"rule {rule.id} saved", severity="warning" if checked.warnings else "information",
                    markup=False, timeout=15)
        await self._reload_rules()
        return rule

    async def _rule_decides(self, rid: str, waiting: NeedsApproval, checked: Checked, option: str | None) -> None:
        """Save the rule made from ``waiting``'s call, then let it decide that call, by the
        same path as a person's decision, recorded as ``rule R4``."""
        rule = await self._save_rule(checked)
        if rule is None:
            return
        st = self.states.get(rid)
        try:
            args = json.loads(waiting.args)
        except ValueError:
            args = {}
        agent = (st.agent.name if st.agent is not None else st.model) if st is not None else ""
        source = run_source(st) if st is not None else "tether"
        missed = rule.misses(Call(waiting.tool_name, args if isinstance(args, dict) else {}, agent, source, rid))  # type: ignore[arg-type]
        if missed is not None:
            self.notify(f"rule {rule.id} does not fit this call ({missed}): it still waits for a decision",
                        title=f"{one_line(rid, 60)}", severity="warning", markup=False, timeout=15)
            return
        if rule.effect == "allow" and waiting.needed > 1:  # a rule is not a person
            self.notify(f"rule {rule.id} is saved, but a rule does not count as a person: this call needs "
                        f"{waiting.needed} people, so it still waits for them",
                        title=f"{one_line(rid, 60)}", severity="warning", markup=False, timeout=15)
            return
        if not self.can_decide(rid):
            return
        verdict, by = ("approve" if rule.effect == "allow" else "reject"), f"rule {rule.id}"
        route = self.model.decide_route(rid)
        if route == "process":
            request = ControlRequest(verdict, rule.reason, call_id=waiting.call_id, by=by, rule=rule.id, option=option)
            await self._control(rid, lambda: self.harness.request(rid, request),
                                "Approve" if verdict == "approve" else "Reject")
        elif route == "worker":
            self.decide_for_worker(rid, verdict, rule.reason, call_id=waiting.call_id, rule=rule.id)
        else:  # nobody holds it: this console goes on with it, and its loop reads the store's rules
            self._launch(rid, lambda sig: self.harness.run(rid, signal=sig, sinks=[self._sink]),
                         deciding=waiting.call_id)

    def action_rules(self) -> None:
        if not isinstance(self.screen, RulesScreen):
            self.push_screen(RulesScreen())
            self.run_worker(self._reload_rules(), name="rules", group="rules", exclusive=True, exit_on_error=False)

    async def _reload_rules(self) -> None:
        """The store's rules onto the rules screen, when it is up."""
        screen = self.screen
        if not isinstance(screen, RulesScreen):
            return
        store = self.harness.store
        try:
            rules = await call(store, store.rules)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.notify(one_line(exc, 400), title="the rules could not be read", severity="error", markup=False)
            return
        if screen.is_attached:
            screen.show(rules)

    @on(RulesScreen.Add)
    def _add_rule(self) -> None:
        if self.refused("Add a rule"):
            return

        def done(checked: Checked | None) -> None:
            if checked is not None:
                self.run_worker(self._save_rule(checked), name="add rule", group="control", exit_on_error=False)

        self.push_screen(RuleEditor(self.rule_context()), done)

    @on(RulesScreen.Remove)
    def _remove_rule(self, message: RulesScreen.Remove) -> None:
        if self.refused("Remove a rule"):
            return
        rule = message.rule

        def done(yes: bool | None) -> None:
            if yes:
                self.run_worker(self._rule_removed(rule.id), name="remove rule", group="control", exit_on_error=False)

        self.push_screen(ConfirmDialog(f"Remove rule {rule.id}?", f"{rule.describe()} ({rule.reason}; {rule.by})"),
                         done)

    async def _rule_removed(self, rule_id: str) -> None:
        store = self.harness.store
        try:
            rule = await call(store, store.rule_remove, rule_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.notify(one_line(exc, 400), title=f"rule {rule_id} was not removed", severity="error", markup=False)
            return
        self.notify(f"{rule.describe()} ({rule.reason})", title=f"rule {rule.id} removed", markup=False)
        await self._reload_rules()

    def action_decisions(self) -> None:
        if not isinstance(self.screen, DecisionsScreen):
            self.push_screen(DecisionsScreen())  # it asks for its decisions when it mounts

    @on(DecisionsScreen.Query)
    def _decisions_asked(self, message: DecisionsScreen.Query) -> None:
        self.run_worker(self._load_decisions(message.query), name="decisions", group="decisions", exclusive=True,
                        exit_on_error=False)

    async def _load_decisions(self, query: DecisionQuery) -> None:
        store = self.harness.store
        try:
            records = await call(store, store.decisions, query)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.notify(one_line(exc, 400), title="the decisions could not be read", severity="error", markup=False)
            return
        screen = self.screen
        if isinstance(screen, DecisionsScreen):
            screen.show(records, query)

    @on(DecisionsScreen.Chosen)
    def _decision_chosen(self, message: DecisionsScreen.Chosen) -> None:
        if message.run_id not in self.states:
            self.notify(f"run {message.run_id} is not on this console's list (it may have been removed)",
                        severity="warning", markup=False)
            return
        if isinstance(self.screen, DecisionsScreen):
            self.screen.dismiss(None)
        self.select(message.run_id)

    def action_new_run(self) -> None:
        if self.refused("New run"):
            return

        def done(request: NewRunRequest | None) -> None:
            if request is None:
                return
            if self.client.blocking:  # the store waits on a network: make the run off the loop
                self.run_worker(self._create_and_start(request), name="new run", group="control",
                                exit_on_error=False)
                return
            try:
                rid = self.create_run(request)
            except Exception as exc:
                self.notify(f"could not start the run: {one_line(exc)}", severity="error", markup=False)
                return
            self.show_events()
            self.select(rid)

        choices = agent_choices(self.config, base_url=self.harness.base_url, workspace=self.adhoc_workspace)
        self.push_screen(NewRunDialog(choices, base_url=self.harness.base_url, default_model=self.default_model,
                                      initial=self.initial_agent), done)

    def action_resume(self) -> None:
        rid = self.selected
        if not rid or not self.can_resume(rid) or self.refused("Resume"):
            return
        if self.model.needs_load(rid):
            self.client.load(rid)

        def done(request: ResumeRequest | None) -> None:
            if request is not None and self.can_resume(rid):
                self.start_run(rid, max_turns=request.max_turns, budget_usd=request.budget_usd)

        self.push_screen(ResumeDialog(self.states[rid], self.last_reason.get(rid)), done)

    def action_follow_up(self) -> None:
        rid = self.selected
        if not rid or not self.model.can_follow_up(rid) or self.refused("Follow up"):
            return
        if self.model.needs_load(rid):
            self.client.load(rid)

        def done(message: str | None) -> None:
            if message is not None and self.model.can_follow_up(rid):
                self.start_run(rid, message=message)

        self.push_screen(FollowUpDialog(self.states[rid]), done)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        """Stop running runs cleanly (fire their signals, wait for their workers so the
        state is saved), then exit. Runs waiting for approval just stay on disk; runs other
        processes run go on."""
        if self._quitting:
            return
        self._quitting = True
        workers = self._stop_active()
        if workers:
            self.notify(f"stopping {len(workers)} running run(s) before quitting…", markup=False)
            try:
                await asyncio.wait_for(self.workers.wait_for_complete(workers), QUIT_TIMEOUT_S)
            except TimeoutError:
                pass
        if self._owns_harness:
            await self.harness.aclose()
        self.exit(0)

    async def stop_all(self) -> None:
        """Stop every run this console drives and wait for their workers."""
        workers = self._stop_active()
        if workers:
            await self.workers.wait_for_complete(workers)

    def _stop_active(self) -> list[Worker[Any]]:
        """Fire the signal of every run this console drives; return their unfinished workers."""
        workers = [w for w in self.active.values() if not w.is_finished]
        for rid in list(self.active):
            signal = self.signals.get(rid)
            if signal is not None:
                signal.cancel(QUIT_REASON, self.operator)
        return workers


def run_console(args: Any = None) -> int:
    """Entry point of ``tether`` and ``tether console``; returns the exit code (2: a usage
    error, said on stderr in one line before the console opens)."""
    start = list(getattr(args, "start", None) or [])
    base_url = getattr(args, "base_url", None)
    model = getattr(args, "model", None) or (os.environ.get("LLM_MODEL") if base_url else None)
    if base_url and not model:
        return _usage_error("with --base-url, give --model NAME (or LLM_MODEL)")
    if not base_url:
        unknown = [s for s in start if s not in scenario_choices()]
        if unknown:
            known = ", ".join(scenario_choices())
            return _usage_error(f"unknown scenario {unknown[0]!r}; the scripted provider knows: {known}")
    try:
        path = find_config(getattr(args, "config", None))
        config = load_config(path) if path is not None else None
    except ConfigError as exc:
        return _usage_error(str(exc))
    agent = getattr(args, "agent", None)
    if agent:
        problem = _agent_problem(agent, config, base_url)
        if problem:
            return _usage_error(problem)
    spec, runs_dir = getattr(args, "store", None), getattr(args, "runs_dir", None)
    if spec and runs_dir:
        return _usage_error("give --store or --runs-dir, not both")
    spec = spec or (None if runs_dir else os.environ.get("TETHER_STORE") or None)  # as tether.tui.cli.store_of
    try:
        store = open_console_store(spec) if spec else None
    except (StateError, OSError, ValueError, ImportError) as exc:
        return _usage_error(str(exc))
    options = dict(runs_dir=getattr(args, "runs_dir", None), workspace=getattr(args, "workspace", None),
                   base_url=base_url, api_key=os.environ.get("LLM_API_KEY") if base_url else None,
                   model=model, start=start, config=config, agent=agent,
                   stream=False if getattr(args, "no_stream", False) else "auto",
                   operator=getattr(args, "who", None), otlp=getattr(args, "otlp", None), store=store)
    if base_url:
        return _exit_code(TetherApp(**options))
    with contextlib.ExitStack() as stack:
        try:
            url: str | None = stack.enter_context(provider_process())
            notes = []
        except (RuntimeError, OSError) as exc:  # no child process: the same provider, in this process
            url, notes = None, [f"the scripted provider runs inside the console ({one_line(exc, 200)}); "
                                "long runs will make the screen slower"]
        return _exit_code(TetherApp(**options, provider_url=url, notes=notes))


def store_label(where: str) -> str:
    """A store's URL as the header shows it, short: ``user@host:port/db``, from the URL
    without its password (``tether.store.postgres.store.redact``), and without its query."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(where)
        if not parts.scheme.startswith("postgres"):
            return where
        user = f"{parts.username}@" if parts.username else ""
        port = f":{parts.port}" if parts.port else ""
        return f"{user}{parts.hostname or ''}{port}{parts.path}"
    except ValueError:
        return "the database"


def open_console_store(spec: str) -> Store:
    """The store ``spec`` names (a ``postgresql://`` URL or a directory), checked now, so
    that a store the console cannot reach is said before it opens (without the password)."""
    from tether.store.protocol import is_database, open_store

    store = open_store(spec)
    if not is_database(spec):
        return store
    try:
        store.check()  # type: ignore[attr-defined]
    except BaseException:
        store.close()  # type: ignore[attr-defined]
        raise
    return store


def _usage_error(message: str) -> int:
    print(f"tether: error: {one_line(message, 2000)}", file=sys.stderr)
    return 2


def _agent_problem(name: str, config: Config | None, base_url: str | None) -> str | None:
    """Why ``--agent NAME`` cannot be preselected (None: it can): an agent of the agent file
    that builds, or a demo scenario (offered when the console is not at ``--base-url``)."""
    if config is not None and name in config.names:
        try:
            config.agent(name)
        except ConfigError as exc:
            return str(exc)
        return None
    if not base_url and demo.is_scenario(name):
        return None
    if config is not None:
        known = f"the agents in {config.path}: {', '.join(config.names) or 'none'}"
    else:
        known = "there is no agent file (./tether.toml, --config FILE or $TETHER_CONFIG)"
    if not base_url:
        known += "; the demo agents: " + ", ".join(scenario_choices())
    return f"unknown agent {name!r}; {known}"


def _exit_code(app: TetherApp) -> int:
    result = app.run()
    if isinstance(result, int):
        return result
    return app.return_code or 0


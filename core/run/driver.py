"""What every driver of a run does with it the same way: emit, save, checkpoint, finish.

A run is driven by Tether's loop (:mod:`tether.run.loop`), an ACP agent (:mod:`tether.acp.run`),
or a program that reports into it (:mod:`tether.run.tracked`, Claude Code's hooks among them).
Each takes turns its own way, but hands what happens to one :class:`RunDriver`, so the trace,
the views and the OpenTelemetry export see every run alike, each save passes the crash
campaign's boundaries, and a run stops in one way: :meth:`RunDriver.finish`, the one place
a driver's ``run_stopped`` event is made (:func:`tether.vocab.events.run_stopped` builds it;
the approvals' ends of runs nobody drives use it too).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tether.vocab import faultpoints
from tether.vocab.cancel import CancelSignal
from tether.vocab.events import Event, EventSink, run_stopped
from tether.vocab.state import Interruption, RunState, Status
from tether.store.control import ControlRequest
from tether.store.protocol import Handle, TraceSink

log = logging.getLogger(__name__)

Checkpoint = Callable[[RunState, str, str], Awaitable[Event | None]]
"""A checkpoint of the run's own workspace after a call (run, call id, tool or label): its event,
or None when nothing changed (:func:`tether.workspaces.checkpoints.after_change_hook`)."""


def unchanged(state: RunState) -> list[Any]:
    """What an operation that changes nothing before the run goes on prepares (a decision
    changes it in its own way)."""
    return []


@dataclass
class Operation:
    """One operation on a run (a start, a resume, a decision, a follow-up), as the harness hands
    it to whichever driver takes the run's turns (:meth:`tether.Harness.run` says what each means).

    ``prepare`` changes the run before it goes on (raised limits, a follow-up's words) and returns
    their events; ``signal`` is the run's Stop (None: a new one); ``sinks`` the caller's own views;
    ``wait_for_decision`` how long to hold the run at an approval (None: stop there);
    ``decision`` one to apply first; ``follow_up`` whether the operator's next words were added (an
    ended run goes on from them); ``acp_session`` an ACP agent's process started for it already."""

    prepare: Callable[[RunState], list[Any]] = unchanged
    signal: CancelSignal | None = None
    sinks: Sequence[EventSink] = ()
    wait_for_decision: float | None = None
    decision: ControlRequest | None = None
    follow_up: bool = False
    acp_session: Any = None


@dataclass
class Outcome:
    """What one operation on a run did in this process: the run as it stopped, the tool calls
    it ran, and how long it took."""

    state: RunState
    tool_runs: list[dict[str, Any]] = field(default_factory=list)
    ms: float = 0.0

    @property
    def status(self) -> Status:
        return self.state.status


@dataclass
class RunDriver:
    """One run as its driver records it: its events fanned out to the trace and every sink,
    its state saved, its workspace checkpointed, and its end.

    ``sinks`` are all the operation's (the harness's and its caller's: the console, OpenTelemetry);
    ``after_change`` takes checkpoints (None: the run has no workspace of its own to keep)."""

    state: RunState
    handle: Handle
    trace: TraceSink
    sinks: Sequence[EventSink] = ()
    after_change: Checkpoint | None = None
    _saving: asyncio.Lock = field(default_factory=asyncio.Lock, init=False, repr=False)

    def emit(self, event: Event, *, tell: bool = True) -> None:
        """The event into the run's trace (when it is traced) and to each sink (``tell``); a
        sink that fails is logged, never raised: a broken view must not break the run it is
        watching."""
        event.run_id = self.state.run_id
        if event.traced:
            self.trace.write(event)
        if tell:
            self._tell(event)

    def _tell(self, event: Event) -> None:
        for sink in self.sinks:
            try:
                sink(event)
            except Exception:
                log.exception("event sink %r failed on %s", sink, event.kind)

    async def save(self) -> None:
        """Save the state, one save at a time (a store's save takes what is new since the last;
        a program's run saves from its control channel's task too), between the crash
        campaign's boundaries."""
        async with self._saving:
            self.state.updated_at = time.time()
            faultpoints.boundary("before_save")
            await self.handle.asave(self.state)
            faultpoints.boundary("after_save")

    async def record(self, events: Sequence[Event], *, told_once_saved: bool = False) -> None:
        """Emit ``events``, made on the state outside the driver (a decision, a deadline, a
        Stop of a run that waits), and save the state they describe; nothing when none.
        ``told_once_saved``: the sinks see them only after the save (a web page answers a
        decision once it is recorded); the trace has them before, as always."""
        for event in events:
            self.emit(event, tell=not told_once_saved)
        if events:
            await self.save()
        if told_once_saved:
            for event in events:
                self._tell(event)

    async def checkpoint(self, call_id: str, tool: str) -> Event | None:
        """A checkpoint of the run's own workspace after ``call_id`` of ``tool`` (or a label),
        emitted; None when nothing changed or the run keeps none."""
        if self.after_change is None:
            return None
        event = await self.after_change(self.state, call_id, tool)
        if event is not None:
            self.emit(event)
        return event

    def stop(self, status: Status, reason: str, interruption: Interruption | None = None, *,
             error: str | None = None) -> None:
        """The run stops ``status`` for ``reason``: set on its state and emitted, not saved yet
        (:meth:`finish` saves; a driver that has more to record first saves it itself)."""
        st = self.state
        st.status, st.interruption, st.error = status, interruption, error
        self.emit(run_stopped(st, reason))

    async def finish(self, status: Status, reason: str, interruption: Interruption | None = None, *,
                     error: str | None = None) -> RunState:
        """The run's end, one of its five exits: set, emitted and saved."""
        self.stop(status, reason, interruption, error=error)
        await self.save()
        return self.state

    def finish_blocking(self, status: Status, reason: str, *, error: str | None = None) -> RunState:
        """:meth:`finish` from a thread without an event loop (a queue worker parks a run it
        cannot drive: :mod:`tether.workers.recovery`), saved with the store's blocking save."""
        self.stop(status, reason, error=error)
        self.state.updated_at = time.time()
        faultpoints.boundary("before_save")
        self.handle.save(self.state)
        faultpoints.boundary("after_save")
        return self.state

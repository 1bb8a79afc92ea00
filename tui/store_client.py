"""The console as a client of the store: every run on it, whoever runs it, live.

:class:`StoreClient` lists the runs from the store's index (:meth:`RunStore.summaries`: a
stub per run, so 10,000 finished runs cost one query, not 10,000 replays), then follows the
store with :class:`tether.watch.RunWatcher` (inotify): for a run another process drives,
its journal is followed with a :class:`tether.tail.JournalTail` (its state, reading only
what was appended) and its trace with a :class:`tether.tail.TraceTail`, whose records go
through the same event pump as the console's own events
(:func:`tether.tail.event_from_record`). Its ``owner.json`` says who runs it; whether that
process is alive is the run's lock (checked by :meth:`StoreClient.check_owners`, since a
killed process changes no file). Runs this console drives are left to the in-process sink.

Textual-free; the app calls :meth:`run` in a task it cancels when it ends, and
:meth:`close` after it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable

from tether.index import RunSummary
from tether.state import StateError
from tether.store import JOURNAL_FILE, TRACE_FILE, RunStore
from tether.tail import JournalTail, TraceTail, event_from_record
from tether.tui.model import ConsoleModel
from tether.tui.pump import EventPump
from tether.watch import JOURNAL, NEW, OWNER, REMOVED, TRACE, RunChange, RunWatcher

log = logging.getLogger(__name__)


class StoreClient:
    def __init__(self, store: RunStore, model: ConsoleModel, pump: EventPump,
                 on_owner: Callable[[str], None] | None = None) -> None:
        self.store = store
        self.model = model
        self.pump = pump
        self.on_owner = on_owner  # a run's liveness changed (the app refreshes its keys)
        self.journals: dict[str, JournalTail] = {}
        self.traces: dict[str, TraceTail] = {}
        self.trace_sizes: dict[str, int] = {}  # each listed run's trace size when listed
        self.ready = asyncio.Event()
        self.batches = 0
        self._closed = False

    # ---- listing ---------------------------------------------------------------------------
    def listing(self) -> tuple[list[RunSummary], dict[str, str], dict[str, int]]:
        """The store's runs (from its index), the unreadable ones, and their traces' sizes."""
        problems: dict[str, str] = {}
        summaries = self.store.summaries(problems=problems)
        sizes: dict[str, int] = {}
        root = self.store.root
        for summary in summaries:
            try:
                sizes[summary.run_id] = os.stat(root / summary.run_id / TRACE_FILE).st_size
            except OSError:
                sizes[summary.run_id] = 0
        return summaries, problems, sizes

    def take_listing(self, summaries: list[RunSummary], problems: dict[str, str], sizes: dict[str, int]) -> bool:
        """Put a listing in the model (runs known in full keep their state); True when a run is new."""
        known = set(self.model.states)
        for rid, size in sizes.items():
            self.trace_sizes.setdefault(rid, size)
        self.model.list_summaries(s for s in summaries if not self.model.is_driven(s.run_id))
        self.model.load_problems.update(problems)
        for summary in summaries:  # a run another process drives: its state in full, followed
            rid = summary.run_id
            if self.model.held_elsewhere(rid) and rid not in self.journals:
                tail = self._follow_journal(rid)
                if tail is not None and tail.read() and tail.state is not None:
                    self.model.put_state(tail.state)
        return bool(set(self.model.states) - known)

    def load(self, rid: str) -> None:
        """``rid`` in full (a selected stub): from its journal tail when one follows it."""
        tail = self.journals.get(rid)
        if tail is not None and tail.state is not None:
            self.model.put_state(tail.state)
            return
        try:
            self.model.put_state(self.store.load(rid))
        except (StateError, OSError) as exc:
            self.model.load_problems[rid] = str(exc)

    # ---- following -----------------------------------------------------------------------------
    async def run(self) -> None:
        """Follow the store until cancelled."""
        try:
            async with RunWatcher(self.store.root) as watcher:
                # Runs made between the first listing and the watches: list again, once.
                listing = await asyncio.to_thread(self.listing)
                if self.take_listing(*listing):
                    self.pump.mark(structure=True)
                self.ready.set()
                async for batch in watcher:
                    self.apply(batch)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the console goes on without live updates from other processes
            log.warning("the console stopped watching %s: %s", self.store.root, exc)
            self.ready.set()

    def apply(self, batch: list[RunChange]) -> None:
        self.batches += 1
        model, pump = self.model, self.pump
        for change in batch:
            rid = change.run_id
            if REMOVED in change or model.is_driven(rid):
                continue  # the sink has the events of runs driven here
            structure = False
            if OWNER in change or NEW in change:
                if model.set_owner(rid, self.store.owner(rid)):
                    structure = True
                    if self.on_owner is not None:
                        self.on_owner(rid)
            if JOURNAL in change or NEW in change:
                before = model.states.get(rid)
                if rid in self.model.ours and not model.held_elsewhere(rid) and rid in model.states:
                    pass  # our own run's last saves: its state is the one we drove
                elif rid in model.stubs and rid not in self.journals and not model.held_elsewhere(rid) \
                        and rid != model.selected:
                    with contextlib.suppress(StateError, OSError):  # listed, not shown: its summary will do
                        structure |= model.put_summary(self.store.summary(rid))
                else:
                    tail = self._follow_journal(rid)
                    if tail is not None and tail.read() and tail.state is not None:
                        structure |= model.put_state(tail.state)
                after = model.states.get(rid)
                if after is not before and (before is None or after is None or _where(before) != _where(after)):
                    pump.approvals_dirty = True  # it may wait for approval now, or no longer
                pump.mark(rid)
            if TRACE in change and rid in model.ours and not model.held_elsewhere(rid):
                self.released(rid)  # what our own run wrote: seen through the sink
            elif TRACE in change:
                trace = self.traces.get(rid)
                if trace is None:
                    trace = self.traces[rid] = TraceTail(self.store.root / rid / TRACE_FILE,
                                                         offset=self.trace_sizes.get(rid, 0))
                events = [e for e in map(event_from_record, trace.read()) if e is not None]
                if events:
                    pump.feed(events)
            if structure:
                pump.mark(rid, structure=True)
        self._drop_finished()

    def _follow_journal(self, rid: str) -> JournalTail | None:
        tail = self.journals.get(rid)
        if tail is None:
            tail = self.journals[rid] = JournalTail(self.store.root / rid / JOURNAL_FILE)
        return tail

    def _drop_finished(self) -> None:
        """Close the tails of runs nobody runs any more and nobody looks at (their state stays)."""
        for rid in [r for r in self.journals if not self.model.is_live(r) and r != self.model.selected]:
            self.journals.pop(rid).close()

    def check_owners(self) -> list[str]:
        """Ask the locks of the runs held elsewhere whether their process still lives (a
        SIGKILLed owner changes no file); the runs whose liveness changed."""
        changed = []
        for rid, owner in list(self.model.owners.items()):
            if not owner.alive or self.model.is_driven(rid):
                continue
            if self.model.set_owner(rid, self.store.owner(rid)):
                changed.append(rid)
                tail = self.journals.get(rid)
                if tail is not None and tail.read() and tail.state is not None:
                    self.model.put_state(tail.state)
        return changed

    def driven_here(self, rid: str) -> None:
        """The console starts driving ``rid``: its events come from the sink now."""
        self.model.ours.add(rid)
        tail = self.journals.pop(rid, None)
        if tail is not None:
            tail.close()

    def released(self, rid: str) -> None:
        """The console stopped driving ``rid``: what its trace holds now was seen."""
        try:
            size = os.stat(self.store.root / rid / TRACE_FILE).st_size
        except OSError:
            size = 0
        self.traces[rid] = TraceTail(self.store.root / rid / TRACE_FILE, offset=size)
        self.trace_sizes[rid] = size

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for tail in self.journals.values():
            tail.close()
        self.journals.clear()


def _where(state: object) -> tuple[object, object]:
    return (getattr(state, "status", None), getattr(state, "interruption", None))

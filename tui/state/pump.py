"""The console's event pump: every run's events, its own and other processes', into the model.

Two intakes, one pump:

* :meth:`EventPump.sink` is the harness's event sink for the runs this console drives,
  called synchronously from the run's loop: it keeps a reference to the run's live
  :class:`RunState`, queues the event, marks the run dirty and asks for one flush;
* :meth:`EventPump.feed` takes the events of runs other processes drive, read back from
  their trace files (:class:`tether.store.files.tail.TraceTail`, :func:`tether.store.trace.event_from_record`);
  their states come from their journals (:class:`tether.store.files.tail.JournalTail`), put in the model
  by the store client.

At most one flush is pending (``request_flush`` is called once until :meth:`drain`), and
the app drains at most every :data:`FLUSH_INTERVAL_S` unless something urgent came (a run
started or stopped, or waits for the operator). :meth:`drain` dispatches on the event
classes (``match``), formats the newest events into the per-run trace buffers (bounded) and
says what changed, for the views. Textual-free.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tether.vocab.events import (ApprovalDecision, ApprovalRequired, Event, RunStarted, RunStopped, TextDelta, Turn)
from tether.store.trace import tail_records
from tether.vocab.wording import format_record
from tether.tui.state.agent_notes import NOTE_KINDS, TRACKED_KINDS
from tether.tui.state.model import ConsoleModel

# Under a flood the views are redrawn ten times a second. Each redraw costs the same however
# many events it shows, and it is CPU taken from the runs: ten a second is what reads as live.
FLUSH_INTERVAL_S = 0.1
TRACED_PER_FLUSH = 300  # events formatted into trace lines per refresh, the newest
MAX_LINES = 1000  # trace lines kept per run (what the trace view can show)
NOTED = NOTE_KINDS | TRACKED_KINDS
URGENT = frozenset({"run_started", "run_stopped", "approval_required", "approval_decision"})  # shown at once


@dataclass
class Drained:
    """What a drain changed, for the views."""

    dirty: set[str] = field(default_factory=set)  # runs whose row or detail may have changed
    traced: set[str] = field(default_factory=set)  # runs whose trace buffer got lines
    status_changed: bool = False  # a run started or stopped, or an approval came or went
    stopped: list[str] = field(default_factory=list)  # runs that stopped
    structure: bool = False  # the list's rows (which runs, in what order) must be rebuilt
    approvals: bool = False  # the approvals pane must be refreshed


class EventPump:
    def __init__(self, model: ConsoleModel, *, request_flush: Callable[[], None],
                 trace_path: Callable[[str], Path | None], timings: bool = True,
                 on_buffer: Callable[[str], None] | None = None) -> None:
        """``trace_path``: a run's trace file, whose last lines a run's buffer starts with;
        ``on_buffer``: called when a run's buffer is made, for a store with no trace file
        (the history is read elsewhere and given to :meth:`prime`)."""
        self.model = model
        self.request_flush = request_flush
        self.trace_path = trace_path
        self.on_buffer = on_buffer
        self.timings = timings
        self.events: deque[Event] = deque(maxlen=50_000)
        self.dirty: set[str] = set()
        self.structure_dirty = True
        self.approvals_dirty = True
        self.flush_pending = False
        self.urgent = False
        self.last_flush = 0.0
        self.events_seen = 0
        # per-run trace lines (bounded), and the last seq each holds per source run
        self.trace: dict[str, deque[tuple[int, str]]] = {}
        self._line_no = 0
        self._trace_seq: dict[tuple[str, str], int] = {}
        self._first_seq: dict[str, int] = {}  # per run, the seq of the first event its own buffer shows
        self._seen_seq: dict[str, int] = {}  # per run, the last seq taken in

    # ---- intake ------------------------------------------------------------------------------
    def sink(self, event: Event) -> None:
        """Called synchronously by the run's loop for every event of a run driven here: keep it cheap."""
        model = self.model
        rid = event.run_id
        live = model.driving.get(rid)
        if live is not None and model.states.get(rid) is not live:
            if rid not in model.states:
                self.structure_dirty = True
            model.states[rid] = live
            model.stubs.discard(rid)
            model.ours.add(rid)
        # The run's state is the one its loop changes: a note's place among its messages is exact.
        self._take(event, len(live.messages) if live is not None else None)

    def feed(self, events: Iterable[Event]) -> None:
        """Events of runs another process drives (read from their traces)."""
        for event in events:
            self._take(event)

    def _take(self, event: Event, index: int | None = None) -> None:
        model = self.model
        rid = event.run_id
        if event.seq:
            self._seen_seq[rid] = event.seq
        if event.kind in NOTED:  # what an ACP agent says beside its transcript (a plan, a thought...)
            model.take_note(rid, event.kind, event, index)
        match event:
            case TextDelta(text=text):  # not a trace line: the run's growing reply
                model.streaming[rid] = "" if text is None else model.streaming.get(rid, "") + text
                self.dirty.add(rid)
                self._ask()
                return
            case Turn(ttft_ms=ttft, tokens_per_s=speed):
                model.streaming.pop(rid, None)
                if ttft is not None:
                    model.speed[rid] = (ttft, speed)
            case RunStopped():
                model.streaming.pop(rid, None)
        self.events.append(event)
        self.dirty.add(rid)
        self.events_seen += 1
        if event.kind in URGENT:
            self.urgent = True
        self._ask()

    def mark(self, run_id: str | None = None, *, structure: bool = False) -> None:
        if run_id:
            self.dirty.add(run_id)
        if structure:
            self.structure_dirty = self.approvals_dirty = True
        self._ask()

    def _ask(self) -> None:
        if not self.flush_pending:
            self.flush_pending = True
            self.request_flush()

    # ---- throttle ------------------------------------------------------------------------------
    def wait_s(self, now: float | None = None) -> float:
        """How long to wait before draining (0: now)."""
        if self.urgent:
            return 0.0
        return max(0.0, self.last_flush + FLUSH_INTERVAL_S - (time.monotonic() if now is None else now))

    # ---- drain ---------------------------------------------------------------------------------
    def drain(self) -> Drained:
        """Apply the queued events to the model and the trace buffers; what changed."""
        model = self.model
        self.flush_pending = False
        self.urgent = False
        self.last_flush = time.monotonic()
        events = list(self.events)
        self.events.clear()
        out = Drained(dirty=self.dirty)
        self.dirty = set()
        # Under a flood only the newest events can still be on screen: format those, and say
        # how many were left out (the trace file has every one of them).
        traced_from = max(0, len(events) - TRACED_PER_FLUSH)
        if traced_from:
            skipped: dict[str, int] = {}
            for event in events[:traced_from]:
                skipped[event.run_id] = skipped.get(event.run_id, 0) + 1
            for run_id, n in skipped.items():
                self.note(run_id, f"… {n:,} events not shown here (all are in the trace file)", out.traced)
        for index, event in enumerate(events):
            match event:
                case RunStopped(reason=reason):
                    model.last_reason[event.run_id] = reason
                    model.stopping.discard(event.run_id)
                    out.stopped.append(event.run_id)
                    self.approvals_dirty = out.status_changed = True
                case RunStarted():
                    model.last_reason.pop(event.run_id, None)
                    self.approvals_dirty = out.status_changed = True
                case ApprovalRequired() | ApprovalDecision():
                    self.approvals_dirty = out.status_changed = True
            model.note_activity(event)
            if index >= traced_from:
                self.trace_event(event, out.traced)
        out.structure, self.structure_dirty = self.structure_dirty, False
        out.approvals, self.approvals_dirty = self.approvals_dirty, False
        return out

    # ---- trace buffers ---------------------------------------------------------------------------
    def buffer(self, rid: str, below_seq: int | None = None) -> deque[tuple[int, str]]:
        """A run's trace lines, numbered (so a view knows which it has shown), bounded."""
        buf = self.trace.get(rid)
        if buf is None:
            buf = deque(maxlen=MAX_LINES)
            last = 0
            try:
                path = self.trace_path(rid)
            except Exception:
                path = None
            if path is not None:
                history = []
                for record in tail_records(path):
                    seq = int(record.get("seq") or 0)
                    if below_seq is not None and seq >= below_seq:
                        continue
                    self._line_no += 1
                    buf.append((self._line_no, format_record(record, timings=self.timings)))
                    history.append(record)
                    last = max(last, seq)
                if self.model.take_history(rid, history):
                    self.mark(rid)
            self.trace[rid] = buf
            self._trace_seq[(rid, rid)] = last
            if self.on_buffer is not None:
                self.on_buffer(rid)
        return buf

    def seen_seq(self, rid: str) -> int:
        """The last ``seq`` of ``rid`` this pump took in (0: none)."""
        return self._seen_seq.get(rid, 0)

    def prime(self, rid: str, records: Iterable[dict]) -> bool:
        """Put a run's trace records (oldest first) before the lines its buffer holds: those
        older than its first event's line. True when lines were added."""
        buf = self.buffer(rid)
        first = self._first_seq.get(rid)
        lines: list[str] = []
        history: list[dict] = []
        last = self._trace_seq.get((rid, rid), 0)
        lowest: int | None = None
        for record in records:
            seq = int(record.get("seq") or 0)
            if first is not None and seq >= first:
                break
            if first is None and seq and seq <= last:
                continue
            lines.append(format_record(record, timings=self.timings))
            history.append(record)
            last = max(last, seq)
            if seq and lowest is None:
                lowest = seq
        if not lines:
            return False
        self.model.take_history(rid, history)
        if lowest is not None:
            self._first_seq[rid] = lowest  # what is older than this buffer's first line
        old = list(buf)
        buf.clear()
        for text in [*lines, *(text for _, text in old)]:  # numbered again: the view re-reads the buffer
            self._line_no += 1
            buf.append((self._line_no, text))
        if first is None:
            self._trace_seq[(rid, rid)] = last
        return True

    def note(self, rid: str, text: str, traced: set[str]) -> None:
        buf = self.buffer(rid)
        self._line_no += 1
        buf.append((self._line_no, text))
        traced.add(rid)

    def trace_event(self, event: Event, traced: set[str]) -> None:
        rid = event.run_id
        targets = [(rid, "")]
        root = self.model.root_of(rid)
        if root != rid:
            suffix = rid[len(root) + 1:] if rid.startswith(root + ".") else rid
            targets.append((root, f"↳ {suffix} "))
        for target, prefix in targets:
            if target not in self.trace:
                if target != rid:
                    self.buffer(target)
                else:
                    self.buffer(target, below_seq=event.seq)
            key = (target, rid)
            if event.seq and event.seq <= self._trace_seq.get(key, 0):
                continue
            self._trace_seq[key] = event.seq
            if target == rid and event.seq and rid not in self._first_seq:
                self._first_seq[rid] = event.seq
            line = format_record(event.record(), timings=self.timings, prefix=prefix)
            self._line_no += 1
            self.trace[target].append((self._line_no, line))
            traced.add(target)


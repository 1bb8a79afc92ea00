"""Following runs in a terminal (``tether watch``): the lines both stores' followers print.

``tether watch RUN_ID`` and ``tether watch --all`` print trace records as they are written,
whichever store holds them (:func:`tether.store.files.watch.follow_run`,
:func:`tether.store.postgres.watch.follow_run`, and their ``follow_all``). What a line says,
the hint that ends a run waiting for approval, and the order of lines from several runs are
written once, here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TextIO

from tether.vocab.wording import format_record, one_line
from tether.store.changes import NEW, TRACE, RunChange


class Followed(Protocol):
    """One run as a store's follower sees it: its watch, its new trace lines, its lock."""

    async def changes(self, timeout_s: float) -> list[RunChange] | None:
        """The next batch of the run's changes; None once the watch ends (it was stopped, or
        the run was removed); TimeoutError after ``timeout_s`` without one, losing nothing."""

    async def new_records(self) -> list[dict[str, Any]]:
        """The trace lines written since the last call (since the backlog, at first)."""

    async def held(self) -> bool:
        """Whether a live process still holds the run."""


async def follow_one(run_id: str, run: Followed, printer: Printer, records: list[dict[str, Any]],
                     shown: list[dict[str, Any]], on_ready: Callable[[], None] | None,
                     orphan_check_s: float) -> dict[str, Any] | None:
    """``tether watch RUN_ID`` on either store: the backlog ``shown`` (the last of the run's
    ``records`` so far), then each line as it is written, until the ``run_stopped`` line
    (returned) or the watch ends. A killed owner writes nothing: after ``orphan_check_s``
    without a change, the run's lock is asked once, and a run no process holds ends the
    watch with the line saying it is orphaned (after what it wrote before it died)."""
    for record in shown:
        printer.record(run_id, record)
    printer.flush()
    stopped = stopped_record(records)
    if stopped is not None:
        return stopped
    if on_ready is not None:
        on_ready()
    while True:
        try:
            batch = await run.changes(orphan_check_s)
        except TimeoutError:
            if await run.held():
                continue
            batch, orphaned = [RunChange(run_id, frozenset({TRACE}))], True
        else:
            orphaned = False
        if batch is None:
            return None
        if any(change.what & {TRACE, NEW} for change in batch):
            for record in await run.new_records():
                printer.record(run_id, record)
                if record.get("kind") == "run_stopped":
                    printer.flush()
                    return record
        if orphaned:
            printer.orphaned(run_id)
            return None
        printer.flush()


def stopped_record(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The ``run_stopped`` record the records end on (no ``run_started`` after it), if any."""
    for record in reversed(records):
        kind = record.get("kind")
        if kind == "run_stopped":
            return record
        if kind == "run_started":
            return None
    return None


def decision_hint(run_id: str, record: dict[str, Any]) -> str | None:
    """For a run that stopped to wait for an approval: how to decide it."""
    waiting = record.get("interruption")
    if not isinstance(waiting, dict) or waiting.get("type") != "approval":
        return None
    return one_line(f"waiting for approval of {waiting.get('toolName')} ({waiting.get('callId')}): "
                    f"decide with tether approve {run_id}, or tether reject {run_id} --reason TEXT", 400)


class Printer:
    """Trace records as lines on ``out``: prefixed with their run id when following several."""

    def __init__(self, out: TextIO, *, timings: bool, prefixed: bool) -> None:
        self.out = out
        self.timings = timings
        self.prefixed = prefixed

    def line(self, run_id: str, text: str) -> None:
        self.out.write(f"{one_line(run_id, 80)}  {text}\n" if self.prefixed else text + "\n")

    def record(self, run_id: str, record: dict[str, Any]) -> None:
        self.line(run_id, format_record(record, timings=self.timings))
        if record.get("kind") == "run_stopped":
            hint = decision_hint(run_id, record)
            if hint:
                self.line(run_id, hint)

    def flush(self) -> None:
        self.out.flush()

    def orphaned(self, run_id: str) -> None:
        """The line that ends the watch of a run no process holds any more."""
        self.line(run_id, one_line(
            f"{run_id} is orphaned: the process running it ended without stopping it; "
            f"tether resume {run_id} goes on from its last step", 400))
        self.flush()

    def in_order(self, lines: list[tuple[float, int, str, dict[str, Any]]]) -> None:
        """Records of several runs, as ``(ts, n, run_id, record)``: by time, then run, then order read."""
        for _, _, rid, record in sorted(lines, key=lambda item: (item[0], item[2], item[1])):
            self.record(rid, record)
        self.flush()


def record_ts(record: dict[str, Any]) -> float:
    ts = record.get("ts")
    return float(ts) if isinstance(ts, (int, float)) else 0.0

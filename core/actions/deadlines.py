"""The passed decision deadlines of the runs that wait on a store with no process to apply
them (:func:`tether.approvals.deadlines.lapse` says what a passed deadline does): applied by
``tether runs``, the web's approvals page and the notification sender as they look."""

from __future__ import annotations

import time

from tether.approvals.deadlines import Lapsed, lapse
from tether.store.hold import amend
from tether.store.protocol import Store
from tether.vocab.events import Event
from tether.vocab.state import RunState


def apply_due(store: Store, *, now: float | None = None) -> list[str]:
    """Apply the passed deadlines of the runs waiting on ``store`` that no live process holds;
    what was done, in words, one line a run. A run that another process takes meanwhile is
    left to it."""
    now = time.time() if now is None else now
    done: list[str] = []
    for summary in store.summaries():
        due = (summary.interruption or {}).get("deadlineAt") if summary.waiting else None
        if due is None or due > now or (summary.owner is not None and summary.owner.alive):
            continue
        lapsed = _lapse_on_store(store, summary.run_id, now)
        if lapsed is not None:
            done.append(f"{summary.run_id}: {lapsed.summary}")
    return done


def _lapse_on_store(store: Store, run_id: str, now: float) -> Lapsed | None:
    """:func:`lapse` on a run no process holds (one that another process took is left to it)."""
    applied: list[Lapsed] = []

    def change(state: RunState) -> list[Event]:
        lapsed = lapse(state, at=now)
        applied.extend(() if lapsed is None else (lapsed,))
        return [] if lapsed is None else lapsed.events

    amend(store, run_id, change)
    return applied[0] if applied else None

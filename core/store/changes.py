"""What changed in a store, as its watchers say it: a :class:`RunChange` per run and batch.

The file store's watcher (:class:`tether.store.files.watch.RunWatcher`, inotify) and
PostgreSQL's (:class:`tether.store.postgres.watch.PgWatcher`, LISTEN/NOTIFY) yield the same
batches with the same words, so the console, the web pages and the notification sender
follow either store with one loop.
"""

from __future__ import annotations

from dataclasses import dataclass

# What a change can name.
NEW = "new"  # a run that appeared (the file store's change also names every file it already has)
JOURNAL = "journal"  # the run was saved
TRACE = "trace"  # trace lines were added
OWNER = "owner"  # a process took the run or let go of it
CONTROL = "control"  # a control request was added (the file store)
LEDGER = "ledger"  # the idempotency ledger grew (the file store)
REMOVED = "removed"  # the run's directory was deleted (the file store)


@dataclass(frozen=True, slots=True)
class RunChange:
    """One run's changes in a batch: ``what`` names them (``"new"``, ``"journal"``,
    ``"trace"``, ``"owner"``, ``"control"``, ``"ledger"``, ``"removed"``)."""

    run_id: str
    what: frozenset[str]

    def __contains__(self, item: object) -> bool:
        return item in self.what

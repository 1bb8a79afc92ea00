"""How the console follows a store: one small interface, one implementation per store.

:class:`tether.tui.state.store_client.StoreClient` keeps the console's model up to date with what
other processes do to the store. What it needs from the store is a :class:`StoreFeed`:

* a listing (the runs' summaries), which also marks where each run's trace ends, so that
  only what is appended later is read back as events;
* the changes, pushed in batches of :class:`tether.store.changes.RunChange` (``new``, ``journal``,
  ``trace``, ``owner``);
* a run's state now, its new trace records, its owner, the owners of the runs held
  elsewhere (asked at most once a second: a killed owner sends nothing).

Two feeds:

* :class:`FileFeed` (the file store): inotify (:class:`tether.store.files.watch.RunWatcher`), a
  :class:`tether.store.files.tail.JournalTail` per followed run and a :class:`tether.store.files.tail.TraceTail` per
  trace, reading only what was appended; the trace view reads a run's history from its
  file. Its calls are local reads, made on the event loop as before.
* :class:`PgFeed` (PostgreSQL): the store's notifications (:class:`tether.store.postgres.watch.PgWatcher`:
  ``LISTEN tether_<schema>``, one notification per change, sent in the change's
  transaction), a journal change reads the run again (only the messages added since), a
  trace change reads the lines after the last ``seq`` read. Its calls wait on the network
  (``blocking``): the client makes them in a worker thread.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tether.store.protocol import Store
from tether.store.summary import RunSummary
from tether.vocab.state import RunState
from tether.store.files.layout import JOURNAL_FILE, TRACE_FILE
from tether.store.files.store import RunStore
from tether.store.owner import Owner
from tether.store.files.tail import JournalTail, TraceTail
from tether.tui.state.model import QueueInfo
from tether.store.changes import RunChange
from tether.store.files.watch import RunWatcher

if TYPE_CHECKING:
    from tether.store.postgres.store import PgStore
    from tether.store.postgres.watch import PgWatcher

log = logging.getLogger(__name__)

Listing = tuple[list[RunSummary], dict[str, str]]
HISTORY_LINES = 1000  # a run's trace lines the console shows (tether.tui.state.pump.MAX_LINES)


class StoreFeed(Protocol):
    """What the console's store client reads a store through (see the module)."""

    blocking: bool
    """Its calls wait on a network: the client makes them in a worker thread."""

    where: str
    """Where the store is, fit to show (a URL's password left out)."""

    def listing(self) -> Listing:
        """Every run's summary and the unreadable ones; marks where each trace ends now."""

    def changes(self) -> contextlib.AbstractAsyncContextManager[AsyncIterator[list[RunChange]]]:
        """The store's changes, in batches, pushed; entered before the listing is taken again."""

    def follow(self, rid: str) -> RunState | None:
        """The run's state now (None: unreadable yet); the run is followed from now on."""

    def following(self, rid: str) -> bool: ...

    def followed(self) -> list[str]: ...

    def unfollow(self, rid: str) -> None: ...

    def current(self, rid: str) -> RunState:
        """The run's state: a followed run's as last read, else loaded."""

    def summary(self, rid: str) -> RunSummary: ...

    def owner(self, rid: str) -> Owner | None: ...

    def owners(self, rids: Iterable[str]) -> dict[str, Owner | None]:
        """Who holds each of ``rids`` now (one question to the store)."""

    def new_trace(self, rid: str) -> list[dict[str, Any]]:
        """The run's trace records appended since the last call (or since the listing)."""

    def trace_seen(self, rid: str, seq: int) -> None:
        """The run's trace up to now (up to ``seq``) was seen another way (the console drove it)."""

    def history(self, rid: str) -> list[dict[str, Any]]:
        """The run's last trace records up to where it was marked (the trace view's first lines)."""

    def close(self) -> None: ...


class FileFeed:
    """The file store: inotify, and tails of the journals and traces (see the module)."""

    blocking = False

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.where = str(store.root)
        self.journals: dict[str, JournalTail] = {}
        self.traces: dict[str, TraceTail] = {}
        self.trace_sizes: dict[str, int] = {}  # each listed run's trace size when listed

    def listing(self) -> Listing:
        problems: dict[str, str] = {}
        summaries = self.store.summaries(problems=problems)
        root = self.store.root
        for summary in summaries:
            try:
                size = os.stat(root / summary.run_id / TRACE_FILE).st_size
            except OSError:
                size = 0
            self.trace_sizes.setdefault(summary.run_id, size)
        return summaries, problems

    def changes(self) -> RunWatcher:
        return RunWatcher(self.store.root)

    def follow(self, rid: str) -> RunState | None:
        tail = self.journals.get(rid)
        if tail is None:
            tail = self.journals[rid] = JournalTail(self.store.root / rid / JOURNAL_FILE)
        return tail.state if tail.read() else None

    def following(self, rid: str) -> bool:
        return rid in self.journals

    def followed(self) -> list[str]:
        return list(self.journals)

    def unfollow(self, rid: str) -> None:
        tail = self.journals.pop(rid, None)
        if tail is not None:
            tail.close()

    def current(self, rid: str) -> RunState:
        tail = self.journals.get(rid)
        if tail is not None and tail.state is not None:
            return tail.state
        return self.store.load(rid)

    def summary(self, rid: str) -> RunSummary:
        return self.store.summary(rid)

    def owner(self, rid: str) -> Owner | None:
        return self.store.owner(rid)

    def owners(self, rids: Iterable[str]) -> dict[str, Owner | None]:
        return {rid: self.store.owner(rid) for rid in rids}

    def new_trace(self, rid: str) -> list[dict[str, Any]]:
        trace = self.traces.get(rid)
        if trace is None:
            trace = self.traces[rid] = TraceTail(self.store.root / rid / TRACE_FILE,
                                                 offset=self.trace_sizes.get(rid, 0))
        return trace.read()

    def trace_seen(self, rid: str, seq: int) -> None:
        try:
            size = os.stat(self.store.root / rid / TRACE_FILE).st_size
        except OSError:
            size = 0
        self.traces[rid] = TraceTail(self.store.root / rid / TRACE_FILE, offset=size)
        self.trace_sizes[rid] = size

    def history(self, rid: str) -> list[dict[str, Any]]:
        return []  # the trace view reads the run's trace file itself (EventPump.trace_path)

    def trace_path(self, rid: str) -> Path:
        return self.store.run_dir(rid) / TRACE_FILE

    def close(self) -> None:
        for tail in self.journals.values():
            tail.close()
        self.journals.clear()


class PgFeed:
    """PostgreSQL: LISTEN/NOTIFY, loads and trace reads by ``seq`` (see the module)."""

    blocking = True

    def __init__(self, store: PgStore) -> None:
        self.store = store
        self.where = store.where
        self.states: dict[str, RunState] = {}  # the followed runs, as last loaded
        self.seqs: dict[str, int] = {}  # the last trace seq read (or marked) per run
        self._no_workers = False

    def listing(self) -> Listing:
        marks = self.store.trace_ends()  # before the summaries: what is appended in between is read again, not lost
        problems: dict[str, str] = {}
        summaries = self.store.summaries(problems=problems)
        for summary in summaries:
            self.seqs.setdefault(summary.run_id, marks.get(summary.run_id, 0))
        return summaries, problems

    def changes(self) -> PgWatcher:
        from tether.store.postgres.watch import PgWatcher

        return PgWatcher(self.store)

    def follow(self, rid: str) -> RunState | None:
        """The run now. A run followed already reads only its header and the messages added
        since (the transcript is append-only in the store), not the whole run again."""
        before = self.states.get(rid)
        state = self.states[rid] = self.store.load_after(rid, before) if before is not None else self.store.load(rid)
        return state

    def following(self, rid: str) -> bool:
        return rid in self.states

    def followed(self) -> list[str]:
        return list(self.states)

    def unfollow(self, rid: str) -> None:
        self.states.pop(rid, None)

    def current(self, rid: str) -> RunState:
        state = self.states.get(rid)
        return state if state is not None else self.store.load(rid)

    def summary(self, rid: str) -> RunSummary:
        return self.store.summary(rid)

    def owner(self, rid: str) -> Owner | None:
        return self.store.owner(rid)

    def owners(self, rids: Iterable[str]) -> dict[str, Owner | None]:
        return self.store.owners(rids)

    def new_trace(self, rid: str) -> list[dict[str, Any]]:
        after = self.seqs.get(rid, 0)
        out = list(self.store.read_trace(rid, after_seq=after))
        if out:
            self.seqs[rid] = max(after, max(int(r.get("seq") or 0) for r in out))
        return out

    def trace_seen(self, rid: str, seq: int) -> None:
        self.seqs[rid] = max(self.seqs.get(rid, 0), seq)

    def history(self, rid: str) -> list[dict[str, Any]]:
        return self.store.trace_before(rid, self.seqs.get(rid, 0), HISTORY_LINES)

    def refusal(self) -> str | None:
        """Why this connection's role may only watch (None: it may create, run, stop and
        decide), asked of the database up front (PgStore.read_only), not learnt from a
        failed write."""
        role = self.store.read_only()
        if role is None:
            return None
        return (f"this console connects as {role}, a role that may only read the store: "
                f"Stop, approve, reject, resume and New run need the operator role")

    def queue(self) -> QueueInfo | None:
        """The workers' queue (None: no workers here, or their module is not installed)."""
        if self._no_workers:
            return None
        try:
            from tether.workers.view import queue_view  # type: ignore[attr-defined]
        except ImportError:  # no workers' module here: asked once, not every second
            self._no_workers = True
            return None
        view = queue_view(self.store)
        queued = frozenset(getattr(view, "queued", ()) or ())
        executors = dict(getattr(view, "executors", None) or {})
        return QueueInfo(int(getattr(view, "depth", len(queued))), queued, executors)

    def close(self) -> None:
        self.states.clear()


def feed_for(store: Store) -> StoreFeed:
    """The feed that follows ``store``."""
    if isinstance(store, RunStore):
        return FileFeed(store)
    from tether.store.postgres.store import PgStore

    if isinstance(store, PgStore):
        return PgFeed(store)
    raise TypeError(f"the console cannot follow a {type(store).__name__}")

"""How a reader that shows every run follows a store (the console): one small interface,
:class:`StoreFeed`, one implementation per store (:meth:`tether.store.protocol.Store.feed`).

:class:`tether.tui.state.store_client.StoreClient` keeps the console's model up to date with
what other processes do to the store. What it needs from the store is a :class:`StoreFeed`:

* a listing (the runs' summaries), which also marks where each run's trace ends, so that
  only what is appended later is read back as events;
* the changes, pushed in batches of :class:`tether.store.changes.RunChange` (``new``, ``journal``,
  ``trace``, ``owner``);
* a run's state now, its new trace records, its owner, the owners of the runs held
  elsewhere (asked at most once a second: a killed owner sends nothing).

The file store's feed (:mod:`tether.store.files.feed`) is inotify, a journal tail per followed
run and a trace tail per trace, reading only what was appended; the trace view reads a run's
history from its file (:meth:`~tether.store.protocol.Store.trace_file`). Its calls are local
reads, made on the event loop. PostgreSQL's (:class:`tether.store.postgres.store.PgFeed`) is
the store's notifications (``LISTEN tether_<schema>``, one per change, sent in the change's
transaction): a journal change reads the run again (only the messages added since), a trace
change reads the lines after the last ``seq`` read. Its calls wait on the network
(``blocking``): the client makes them in a worker thread.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from tether.store.changes import RunChange
    from tether.store.owner import Owner
    from tether.store.summary import RunSummary
    from tether.vocab.state import RunState

Listing = tuple[list["RunSummary"], dict[str, str]]
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

"""One watch of the store per server, shared by every open page.

The store's own push (:meth:`tether.store.protocol.Store.watch`: inotify on the file store's
runs dir, ``LISTEN`` on PostgreSQL); the journals are never polled. Each open page is a
:class:`Listener` that gathers which runs changed, and how, since it last sent them: a page
that is slow to read gets one merged message, not a backlog, so a thousand changes cost a
listener one dict, and fifty pages cost one watcher. A store that goes away (a database
restart) is watched again once a second, and every page is told to read again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from tether.store.protocol import Changes, Store
from tether.store.changes import CONTROL, LEDGER, RunChange

log = logging.getLogger(__name__)
RETRY_S = 1.0
QUIET = frozenset({CONTROL, LEDGER})  # changes no page shows


class Listener:
    """What changed since this page was last told (run id → kinds), and a wake-up."""

    def __init__(self) -> None:
        self.changed: dict[str, set[str]] = {}
        self.everything = False
        self.wake = asyncio.Event()

    def take(self) -> tuple[dict[str, list[str]], bool]:
        changed, everything = {rid: sorted(kinds) for rid, kinds in self.changed.items()}, self.everything
        self.changed, self.everything = {}, False
        self.wake.clear()
        return changed, everything


class Hub:
    """The server's watch of the store, and the listeners it tells (see the module)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.listeners: set[Listener] = set()
        self.problem: str | None = None
        self.closing = False
        self.ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._watch(), name="tether serve: store watcher")

    def end_streams(self) -> None:
        """Every open event stream ends (a server shutting down waits for none)."""
        self.closing = True
        for listener in self.listeners:
            listener.wake.set()

    async def aclose(self) -> None:
        self.end_streams()
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @contextlib.contextmanager
    def listen(self) -> Any:
        listener = Listener()
        self.listeners.add(listener)
        try:
            yield listener
        finally:
            self.listeners.discard(listener)

    def _tell(self, batch: list[RunChange] | None) -> None:
        for listener in self.listeners:
            if batch is None:
                listener.everything = True
            else:
                for change in batch:
                    listener.changed.setdefault(change.run_id, set()).update(change.what)
            listener.wake.set()

    async def _watch(self) -> None:
        while True:
            try:
                async with self._watcher() as changes:
                    if self.problem is not None:
                        log.warning("following the store %s again", self.store.where)
                    self.problem = None
                    self.ready.set()
                    self._tell(None)  # whatever happened while nobody watched
                    async for batch in changes:
                        batch = [c for c in batch if c.what - QUIET]
                        if batch:
                            self._tell(batch)
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the pages go on, and say the store is not followed live
                if self.problem is None:
                    log.warning("lost the store %s: %s; trying again every %g s", self.store.where, exc, RETRY_S)
                self.problem = f"the page is not live: the store is not reachable ({type(exc).__name__})"
                self.ready.set()
                self._tell(None)
                await asyncio.sleep(RETRY_S)

    def _watcher(self) -> Changes:
        return self.store.watch()

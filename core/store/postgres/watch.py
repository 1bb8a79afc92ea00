"""Watching a PostgreSQL run store: which runs changed, and what, pushed by the server.

Every change a :class:`tether.store.postgres.store.PgStore` commits sends, in the same transaction, a
notification on the channel ``tether_<schema>`` whose payload is
``{"run": RUN_ID, "kind": KIND}``, KIND one of ``"new"`` (created), ``"journal"`` (a save),
``"trace"`` (trace lines committed), ``"owner"`` (a process took the run or let go of it).
A notification is sent at the commit or never, so a watcher is never told of a change it
cannot read yet.

:class:`PgWatcher` listens on that channel over an :class:`psycopg.AsyncConnection` of its
own and yields the same batches of :class:`tether.store.changes.RunChange` as the file store's
:class:`tether.store.files.watch.RunWatcher`: a consumer then reads what changed (``load`` on a
``journal`` change, ``read_trace(run_id, after_seq)`` on a ``trace`` change). Nothing is
read on a timer, and nothing waits on the event loop: the notifications arrive on the
loop through psycopg's async connection.

A burst (a save's ``journal`` and ``trace``, many runs at once) is coalesced into one
batch: after the first notification, the watcher takes what else arrives within
``coalesce_ms``. Leaving the ``async with`` (or :meth:`aclose`), however it happens,
stops the receiving task and closes the connection; a cancelled ``__anext__`` loses
nothing (the notifications wait in the watcher's queue) and the cancellation is
re-raised. A connection the server drops ends the iteration with
:class:`tether.store.postgres.connection.StoreUnavailable`, in words and without the password.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, Any, TextIO

import psycopg

from tether.store.changes import JOURNAL, NEW, OWNER, TRACE, RunChange
from tether.store.follow import Printer, follow_one, record_ts, stopped_record
from tether.store.owner import HEARTBEAT_S
from tether.store.postgres.connection import StoreUnavailable, clean, listen, redact
from tether.store.postgres.flushes import TRACE_FLUSH_S
from tether.store.protocol import call

if TYPE_CHECKING:  # not the PgStore, whose watch() and follow_*() are these: a Store's calls are what they use
    from tether.store.postgres.database import Database
    from tether.store.protocol import Store

log = logging.getLogger(__name__)

KINDS = frozenset({NEW, JOURNAL, TRACE, OWNER})
COALESCE_MS = 10


class PgWatcher:
    """The changes of a PostgreSQL store's runs (every run, or ``run_ids``), batch by batch.

    ``async with PgWatcher(store) as watcher:`` returns once the LISTEN is in place (what is
    committed from then on is reported), then ``async for batch in watcher``."""

    def __init__(self, store: Database, run_ids: Iterable[str] | None = None, *,
                 coalesce_ms: float = COALESCE_MS) -> None:
        self.store = store
        self.run_ids = None if run_ids is None else frozenset(run_ids)
        self.coalesce_s = coalesce_ms / 1000
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._receiver: asyncio.Task[None] | None = None
        self._queue: asyncio.Queue[tuple[str, str] | BaseException] = asyncio.Queue()
        self._pending: list[tuple[str, str] | BaseException] = []
        self._closed = False

    @property
    def channel(self) -> str:
        return self.store.channel

    async def __aenter__(self) -> PgWatcher:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        if self._conn is not None or self._closed:
            return
        self._conn = await listen(self.store.url, self.channel)
        self._receiver = asyncio.create_task(self._receive(self._conn), name=f"tether pgwatch {self.channel}")

    async def aclose(self) -> None:
        """Stop listening and close the connection (idempotent)."""
        self._closed = True
        receiver, self._receiver = self._receiver, None
        if receiver is not None:
            receiver.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await receiver
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    async def _receive(self, conn: psycopg.AsyncConnection[Any]) -> None:
        try:
            async for notice in conn.notifies():
                change = self._parse(notice.payload)
                if change is not None:
                    self._queue.put_nowait(change)
        except psycopg.Error as exc:
            url = self.store.url
            self._queue.put_nowait(StoreUnavailable(
                f"stopped watching {redact(url)}: the connection was lost ({clean(exc, url)})"))

    def _parse(self, payload: str) -> tuple[str, str] | None:
        try:
            data = json.loads(payload)
            run_id, kind = str(data["run"]), str(data["kind"])
        except (ValueError, KeyError, TypeError):
            log.warning("ignored a notification on %s that is not a run's change: %.200r", self.channel, payload)
            return None
        if kind not in KINDS or (self.run_ids is not None and run_id not in self.run_ids):
            return None
        return run_id, kind

    def __aiter__(self) -> AsyncIterator[list[RunChange]]:
        return self

    async def __anext__(self) -> list[RunChange]:
        if self._closed:
            raise StopAsyncIteration
        if self._conn is None:
            await self.start()  # iterated without ``async with``: aclose() it when done
        if not self._pending:
            self._pending.append(await self._queue.get())
        if not isinstance(self._pending[-1], BaseException) and self.coalesce_s > 0:
            # A burst comes as one batch: what arrives within the window joins it. (Cancelled
            # here, what was taken stays in ``_pending`` for the next call.)
            await asyncio.sleep(self.coalesce_s)
        while not self._queue.empty():
            self._pending.append(self._queue.get_nowait())
        items, self._pending = self._pending, []
        failure = next((i for i in items if isinstance(i, BaseException)), None)
        changes: dict[str, set[str]] = {}
        for item in items:
            if not isinstance(item, BaseException):
                changes.setdefault(item[0], set()).add(item[1])
        if failure is not None:
            if changes:  # report what came before the loss; the loss on the next call
                self._pending.append(failure)
            else:
                await self.aclose()
                raise failure
        return [RunChange(rid, frozenset(what)) for rid, what in sorted(changes.items())]




# ---- following runs in a terminal (tether watch --store postgresql://...) ------------------

async def _next(watcher: PgWatcher, stop_event: asyncio.Event | None, timeout: float | None) -> list[RunChange] | None:
    """The next batch; None once ``stop_event`` is set; TimeoutError after ``timeout``. The
    watcher loses nothing to the timeout (a cancelled wait keeps what it took)."""
    waiting: asyncio.Future[Any] = asyncio.ensure_future(anext(watcher))
    stopper = asyncio.ensure_future(stop_event.wait()) if stop_event is not None else None
    tasks = {waiting} | ({stopper} if stopper is not None else set())
    try:
        done, _ = await asyncio.wait(tasks, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    if waiting in done:
        return waiting.result()
    if stopper is not None and stopper in done:
        return None
    raise TimeoutError


async def follow_run(store: Store, run_id: str, out: TextIO, *, stop_event: asyncio.Event | None = None,
                     backlog: int = 20, timings: bool = True, on_ready: Callable[[], None] | None = None,
                     orphan_check_s: float = HEARTBEAT_S) -> dict[str, Any] | None:
    """:func:`tether.store.files.watch.follow_run` on PostgreSQL: the run's last ``backlog`` trace lines,
    then each line as it is committed (notified), until the run stops or ``stop_event`` is
    set. A killed owner sends nothing (its session's lock just goes): after
    ``orphan_check_s`` without a change, the run's liveness is asked once."""
    async with PgWatcher(store, run_ids=[run_id]) as watcher:
        records = await call(store, lambda: list(store.read_trace(run_id)))
        run = _FollowedRow(store, run_id, watcher, stop_event, int(records[-1].get("seq") or 0) if records else 0)
        return await follow_one(run_id, run, Printer(out, timings=timings, prefixed=False), records,
                                records[-backlog:] if backlog else [], on_ready, orphan_check_s)


class _FollowedRow:
    """A run of PostgreSQL as :func:`follow_one` follows it: its trace read after the last
    line shown (``after``, its ``seq``)."""

    def __init__(self, store: Store, run_id: str, watcher: PgWatcher, stop_event: asyncio.Event | None,
                 after: int) -> None:
        self.store, self.run_id, self.watcher, self.stop_event, self.after = store, run_id, watcher, stop_event, after

    async def changes(self, timeout_s: float) -> list[RunChange] | None:
        return await _next(self.watcher, self.stop_event, timeout_s)

    async def new_records(self) -> list[dict[str, Any]]:
        records = await call(self.store, lambda: list(self.store.read_trace(self.run_id, self.after)))
        for record in records:
            self.after = max(self.after, int(record.get("seq") or 0))
        return records

    async def held(self) -> bool:
        return await call(self.store, self.store.liveness, self.run_id) == "running"


async def follow_all(store: Store, out: TextIO, *, stop_event: asyncio.Event | None = None, backlog: int = 20,
                     timings: bool = True, on_ready: Callable[[], None] | None = None) -> None:
    """:func:`tether.store.files.watch.follow_all` on PostgreSQL: every run's trace lines as they are
    committed, prefixed with its run id, new runs included, until ``stop_event`` is set. The
    runs being run when it starts show their last ``backlog`` lines first."""
    printer = Printer(out, timings=timings, prefixed=True)
    async with PgWatcher(store) as watcher:
        started = time.time()
        summaries = await call(store, store.summaries)
        after: dict[str, int] = {}
        context: list[tuple[float, str, list[dict[str, Any]]]] = []
        for summary in summaries:
            if summary.liveness != "running":
                continue
            rid = summary.run_id
            records = await call(store, lambda rid=rid: list(store.read_trace(rid)))
            after[rid] = int(records[-1].get("seq") or 0) if records else 0
            records = records[-backlog:] if backlog else []
            if records and stopped_record(records) is None:
                context.append((record_ts(records[-1]), rid, records))
        for _, rid, records in sorted(context):
            for record in records:
                printer.record(rid, record)
        printer.flush()
        if on_ready is not None:
            on_ready()
        while True:
            batch = await _next(watcher, stop_event, None)
            if batch is None:
                return
            lines: list[tuple[float, int, str, dict[str, Any]]] = []
            for change in batch:
                if not change.what & {TRACE, NEW}:
                    continue
                rid = change.run_id
                known = rid in after
                records = await call(store, lambda rid=rid: list(store.read_trace(rid, after.get(rid, 0))))
                if not known and NEW not in change:
                    # A run that was not running when the watch began: from then on only
                    # (a flushed line may be stamped a moment before it was committed).
                    records = [r for r in records if record_ts(r) >= started - 2 * TRACE_FLUSH_S]
                for n, record in enumerate(records):
                    after[rid] = max(after.get(rid, 0), int(record.get("seq") or 0))
                    lines.append((record_ts(record), n, rid, record))
                after.setdefault(rid, 0)
            printer.in_order(lines)


__all__ = ["COALESCE_MS", "KINDS", "PgWatcher", "follow_all", "follow_run", "listen"]

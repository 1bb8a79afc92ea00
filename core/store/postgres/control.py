"""The control channel over PostgreSQL: Stop and decisions reach the owner on any host.

On the file store the owner of a run publishes an abstract Unix socket and a requester
pokes it (:mod:`tether.store.unix`): one host only. On PostgreSQL the owner publishes the
address ``pg:<uuid>`` (one per harness), meaning "listening on the database", and:

1. the requester LISTENs on its reply channel ``tether_reply_<request id>`` first;
2. it appends the request (:meth:`tether.store.postgres.database.Database.control_append`), whose
   transaction also notifies ``tether_<schema>_control`` with
   ``{"run": RUN_ID, "id": REQUEST_ID, "to": OWNER'S ADDRESS}`` (the owner's address read
   in that transaction);
3. the harness whose address that is (:class:`PgControlServer`, one LISTEN connection per
   harness) reads the requests it has not handled, acts on them, and notifies the reply
   channel with the :class:`tether.store.control.ControlReply` as JSON;
4. the requester takes the reply (or, after :data:`tether.store.control.DELIVERY_TIMEOUT_S`,
   says it was recorded and not answered).

The request is in the table before anyone is told of it, so a notification lost to a
dropped connection loses nothing: the listener reconnects (once a second at most) and
reads every held run's requests again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import TYPE_CHECKING

import psycopg

from tether.vocab.state import StateError
from tether.store.control import DELIVERY_TIMEOUT_S, ControlReply, ControlRequest
from tether.store.postgres.connection import StoreUnavailable, listen
from tether.store.protocol import SaveError, call

if TYPE_CHECKING:
    from tether.store.postgres.database import Database

log = logging.getLogger(__name__)

ADDRESS_PREFIX = "pg:"
RECONNECT_S = 1.0


def reply_channel(request_id: str) -> str:
    return f"tether_reply_{request_id}"


def _reply_of(payload: str) -> ControlReply | None:
    try:
        data = json.loads(payload)
        return ControlReply(bool(data["ok"]), str(data["words"]), bool(data.get("pending")), bool(data.get("gone")))
    except (ValueError, KeyError, TypeError):
        return None


class PgControlServer:
    """What a harness on a PostgreSQL store listens behind (the interface of
    :class:`tether.store.unix.ControlServer`): requests for its runs, from any host."""

    def __init__(self, store: Database) -> None:
        self.store = store
        self.address = f"{ADDRESS_PREFIX}{uuid.uuid4().hex}"
        self._runs: dict[str, Callable[[str], Awaitable[ControlReply]]] = {}
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._starting = asyncio.Lock()

    async def start(self) -> str:
        """Listen (once, however many runs start together): returns once the LISTEN is in place."""
        async with self._starting:
            if self._task is None or self._task.done():
                self._ready = asyncio.get_running_loop().create_future()
                self._task = asyncio.create_task(self._serve(), name=f"tether control {self.address}")
                try:
                    await asyncio.shield(self._ready)
                except BaseException:
                    await self.aclose()
                    raise
        return self.address

    def register(self, run_id: str, poke: Callable[[str], Awaitable[ControlReply]]) -> None:
        self._runs[run_id] = poke

    def unregister(self, run_id: str) -> None:
        self._runs.pop(run_id, None)

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _serve(self) -> None:
        """LISTEN, answer, and on a lost connection reconnect (at most once a second), then
        read every held run's requests: any sent meanwhile are handled, none is lost."""
        first = True
        while True:
            try:
                conn = await listen(self.store.url, self.store.control_channel, name="tether control")
            except StoreUnavailable as exc:
                if first and self._ready is not None and not self._ready.done():
                    self._ready.set_exception(exc)
                    return
                log.warning("control channel: %s; trying again in %.0f s", exc, RECONNECT_S)
                await asyncio.sleep(RECONNECT_S)
                continue
            try:
                if first:
                    first = False
                    if self._ready is not None and not self._ready.done():
                        self._ready.set_result(None)
                else:
                    for run_id, poke in list(self._runs.items()):
                        await self._poke(run_id, poke, "")  # requests made while the connection was down
                async for notice in conn.notifies():
                    await self._handle(notice.payload)
            except psycopg.Error as exc:
                log.warning("control channel lost (%s); listening again in %.0f s", type(exc).__name__, RECONNECT_S)
                await asyncio.sleep(RECONNECT_S)
            finally:
                with contextlib.suppress(Exception):
                    await conn.close()

    async def _poke(self, run_id: str, poke: Callable[[str], Awaitable[ControlReply]],
                    request_id: str) -> ControlReply:
        try:
            return await poke(request_id)
        except (StateError, SaveError, psycopg.Error) as exc:  # the run's own session is down: it is recorded
            log.warning("control: run %s could not read its requests: %s", run_id, exc)
            return ControlReply(False, f"the process running {run_id} could not read the request ({exc}); "
                                f"it is recorded and applies when it can", pending=True)

    async def _handle(self, payload: str) -> None:
        try:
            data = json.loads(payload)
            run_id, request_id, to = str(data["run"]), str(data["id"]), data.get("to")
        except (ValueError, KeyError, TypeError):
            return
        if to != self.address:
            return  # another owner's (or nobody's: an orphan's request waits for its adopter)
        poke = self._runs.get(run_id)
        reply = (ControlReply(False, f"this process no longer runs {run_id}", gone=True)
                 if poke is None else await self._poke(run_id, poke, request_id))
        try:
            await call(self.store, self.store.send, reply_channel(request_id), json.dumps(asdict(reply)))
        except (StoreUnavailable, psycopg.Error) as exc:
            log.warning("control: the reply to %s was not sent: %s", request_id, exc)


async def deliver(store: Database, run_id: str, request: ControlRequest,
                  timeout_s: float = DELIVERY_TIMEOUT_S) -> ControlReply | None:
    """Append ``request`` and wait for the owner's answer on the database (see the module);
    None when none came in time. The request is recorded either way."""
    conn = await listen(store.url, reply_channel(request.id), name="tether control request")
    try:
        await call(store, store.control_append, run_id, request)
        try:
            async with asyncio.timeout(timeout_s):
                async for notice in conn.notifies():
                    reply = _reply_of(notice.payload)
                    if reply is not None:
                        return reply
        except TimeoutError:
            return None
        return None
    finally:
        with contextlib.suppress(Exception):
            await conn.close()


def is_pg_address(address: str | None) -> bool:
    return bool(address) and address.startswith(ADDRESS_PREFIX)  # type: ignore[union-attr]


__all__ = ["ADDRESS_PREFIX", "PgControlServer", "deliver", "is_pg_address", "reply_channel"]

"""The control channel's fast half on one host: a Unix socket per process.

A process that runs runs listens on a socket in the abstract namespace (no file to clean
up, gone with the process), whose address it publishes as its runs' owner's ``control``. A
requester appends its request to the run's channel first (the store's), then pokes that
address with the run and the request's id (:func:`deliver`, or :func:`tether.store.poke.poke`
without an event loop); the process reads the requests it has not handled yet, acts on them
at once, and answers the poke in words. So a Stop from another terminal reaches a tool in the
middle of its work within a round trip on loopback. The file store uses it
(:meth:`tether.store.files.store.RunStore.control_server`); so does a PostgreSQL store's
requester for an owner that published a socket.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Awaitable, Callable
from dataclasses import asdict

from tether.store.control import ControlReply
from tether.store.operator import DELIVERY_TIMEOUT_S
from tether.store.poke import MAX_LINE, poke_line, reply_fields


class ControlServer:
    """The socket a process runs runs behind. A poke names a run and a request id; the
    run's handler reads what it has not handled from the file and answers."""

    def __init__(self) -> None:
        self.address = f"\0tether-{os.getpid()}-{os.urandom(4).hex()}"
        self._server: asyncio.AbstractServer | None = None
        self._starting = asyncio.Lock()
        self._runs: dict[str, Callable[[str], Awaitable[ControlReply]]] = {}

    async def start(self) -> str:
        """Listen (once, however many runs start together)."""
        if self._server is None:
            async with self._starting:
                if self._server is None:
                    self._server = await asyncio.start_unix_server(self._serve, path=self.address)
        return self.address

    def register(self, run_id: str, poke: Callable[[str], Awaitable[ControlReply]]) -> None:
        self._runs[run_id] = poke

    def unregister(self, run_id: str) -> None:
        self._runs.pop(run_id, None)

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                line = await asyncio.wait_for(reader.readline(), DELIVERY_TIMEOUT_S)
            except ValueError:  # a line longer than the reader's limit (64 KiB): answered as malformed
                line = b""
            try:
                data = json.loads(line[:MAX_LINE])
                run_id, request_id = str(data["run_id"]), str(data["request_id"])
            except (ValueError, KeyError, TypeError, RecursionError):
                reply = ControlReply(False, "a malformed control request")
            else:
                poke = self._runs.get(run_id)
                reply = (ControlReply(False, f"this process (pid {os.getpid()}) no longer runs {run_id}", gone=True)
                         if poke is None else await poke(request_id))
            writer.write((json.dumps(asdict(reply)) + "\n").encode())
            await writer.drain()
        except (OSError, TimeoutError, asyncio.IncompleteReadError):
            pass  # the requester went away; the request stays in the file either way
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


async def deliver(address: str, run_id: str, request_id: str,
                  timeout_s: float = DELIVERY_TIMEOUT_S) -> ControlReply | None:
    """Poke the process at ``address`` about ``request_id``; its answer, or None when no
    process listens there (it died) or it did not answer in time."""
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_unix_connection(path=address)
            try:
                writer.write(poke_line(run_id, request_id))
                await writer.drain()
                line = await reader.readline()
            finally:
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
    except (OSError, TimeoutError, ValueError):  # ValueError: an answer longer than the reader's limit
        return None
    fields = reply_fields(line)
    return None if fields is None else ControlReply(*fields)

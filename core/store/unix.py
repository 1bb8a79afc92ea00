"""The control channel's fast half on one host: a Unix socket per process, and the poke.

A process that runs runs listens on a socket in the abstract namespace (no file to clean
up, gone with the process), whose address it publishes as its runs' owner's ``control``. A
requester appends its request to the run's channel first (the store's), then pokes that
address with the run and the request's id; the process reads the requests it has not handled
yet, acts on them at once, and answers the poke in words. So a Stop from another terminal
reaches a tool in the middle of its work within a round trip on loopback. The file store
uses it (:meth:`tether.store.files.store.RunStore.control_server`); so does a PostgreSQL
store's requester for an owner that published a socket.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from tether.store.operator import DELIVERY_TIMEOUT_S

if TYPE_CHECKING:
    import asyncio

    from tether.store.control import ControlReply

# asyncio and the request's dataclasses are imported where the server and the async poke
# use them: ``tether stop`` pokes with :func:`poke` before any event loop exists.

_MAX_LINE = 64 * 1024
Fields = tuple[bool, str, bool, bool]
"""A reply's ``ok``, ``words``, ``pending`` and ``gone`` (:class:`tether.store.control.ControlReply`)."""


def _poke_line(run_id: str, request_id: str) -> bytes:
    return (json.dumps({"run_id": run_id, "request_id": request_id}) + "\n").encode()


def _reply_fields(line: bytes) -> Fields | None:
    """The owner's answer, or None for one that is not a reply."""
    try:
        data = json.loads(line)
        return bool(data["ok"]), str(data["words"]), bool(data.get("pending")), bool(data.get("gone"))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


class ControlServer:
    """The socket a process runs runs behind. A poke names a run and a request id; the
    run's handler reads what it has not handled from the file and answers."""

    def __init__(self) -> None:
        import asyncio

        self.address = f"\0tether-{os.getpid()}-{os.urandom(4).hex()}"
        self._server: asyncio.AbstractServer | None = None
        self._starting = asyncio.Lock()
        self._runs: dict[str, Callable[[str], Awaitable[ControlReply]]] = {}

    async def start(self) -> str:
        """Listen (once, however many runs start together)."""
        import asyncio

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
        import asyncio
        from dataclasses import asdict

        from tether.store.control import ControlReply

        try:
            try:
                line = await asyncio.wait_for(reader.readline(), DELIVERY_TIMEOUT_S)
            except ValueError:  # a line longer than the reader's limit (64 KiB): answered as malformed
                line = b""
            try:
                data = json.loads(line[:_MAX_LINE])
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
    import asyncio

    from tether.store.control import ControlReply

    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_unix_connection(path=address)
            try:
                writer.write(_poke_line(run_id, request_id))
                await writer.drain()
                line = await reader.readline()
            finally:
                writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
    except (OSError, TimeoutError, ValueError):  # ValueError: an answer longer than the reader's limit
        return None
    fields = _reply_fields(line)
    return None if fields is None else ControlReply(*fields)


def poke(address: str, run_id: str, request_id: str, timeout_s: float = DELIVERY_TIMEOUT_S) -> Fields | None:
    """:func:`deliver` without an event loop, for a command that has none yet (``tether stop``):
    the answer's fields, or None as there."""
    import socket
    import time

    deadline = time.monotonic() + timeout_s  # in all, as deliver's: not per call
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC) as sock:
            sock.settimeout(timeout_s)
            sock.connect(address)
            sock.sendall(_poke_line(run_id, request_id))
            line = b""
            while not line.endswith(b"\n") and len(line) <= _MAX_LINE:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError  # an OSError: handled below as no answer
                sock.settimeout(left)
                chunk = sock.recv(4096)
                if not chunk:
                    break
                line += chunk
    except OSError:  # nobody listens there (it died), or no answer in time (socket.timeout is an OSError)
        return None
    return _reply_fields(line)

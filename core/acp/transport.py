"""The ``acp`` package's stdio transport, told to count what it cannot use.

``acp``'s ``NdjsonTransport`` frames newline-delimited JSON (long lines included) and skips a
line that is not JSON with a logged traceback. Two gaps for a supervisor:
- a line that is JSON but not a JSON-RPC message (``[1, 2]``) reaches the connection, whose
  receive loop then fails and drops the whole connection;
- nobody is told how many lines were skipped, so an agent writing garbage forever would keep a
  run alive in silence.
This subclass keeps ``acp``'s framing (its line reader) and checks each message's shape; every
skipped line is reported to ``on_bad``, and after ``max_consecutive`` bad lines in a row it
ends the stream (the connection then fails its pending requests, and the session says why).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from acp._transport import NdjsonTransport
from acp.task import MessageSender, TaskSupervisor

_SAMPLE_CHARS = 120


class CheckedTransport(NdjsonTransport):
    """NDJSON over the agent's stdio (``acp``'s framing) that skips and counts bad frames."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *,
                 on_bad: Callable[[int, str], None], max_consecutive: int) -> None:
        self._supervisor = TaskSupervisor(source="tether.acp.transport")
        super().__init__(reader, MessageSender(writer, self._supervisor))
        self._on_bad = on_bad
        self._max_consecutive = max_consecutive
        self.bad_frames = 0
        self.consecutive_bad = 0
        self.gave_up = False

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._read_line()
            if not line:
                return None
            line = line.strip()
            if not line:
                continue
            message = _json_rpc(line)
            if message is not None:
                self.consecutive_bad = 0
                return message
            self.bad_frames += 1
            self.consecutive_bad += 1
            self._on_bad(self.bad_frames, line[:_SAMPLE_CHARS].decode("utf-8", "replace"))
            if self.consecutive_bad >= self._max_consecutive:
                self.gave_up = True
                return None

    async def close(self) -> None:
        try:
            await super().close()
        finally:
            await self._supervisor.shutdown()


def _json_rpc(line: bytes) -> dict[str, Any] | None:
    """The message, if the line is a JSON-RPC 2.0 request, notification or response: an
    object whose id (if any) is a string, a number or null, with a string method, or else a
    result or an error object. Anything else would fail ``acp``'s receive loop (an id that
    cannot be looked up, an error without ``.get``) and with it the whole connection."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):  # RecursionError: nested too deep for json
        return None
    if not isinstance(message, dict):
        return None
    if "id" in message and not (message["id"] is None or isinstance(message["id"], (str, int, float))):
        return None
    if "method" in message:
        return message if isinstance(message["method"], str) else None
    if "id" in message and ("result" in message or isinstance(message.get("error"), dict)):
        return message
    return None

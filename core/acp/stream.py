"""An async iterator over a session's events, for consumers that prefer ``async for`` to a callback."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tether.acp.events import AcpEvent

_END = object()


class EventStream:
    """The events put into it, in order, until ``end()``. Unbounded by design: the agent must
    never wait on a slow reader (the reader decides what to drop, e.g. coalescing text chunks)."""

    def __init__(self, unsubscribe: Callable[[], None]) -> None:
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._unsubscribe: Callable[[], None] | None = unsubscribe

    def put(self, event: AcpEvent) -> None:
        self._queue.put_nowait(event)

    def end(self) -> None:
        self._queue.put_nowait(_END)
        self.close()

    def close(self) -> None:
        """Stop receiving (what was already put can still be read)."""
        if self._unsubscribe is not None:
            unsubscribe, self._unsubscribe = self._unsubscribe, None
            unsubscribe()

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> AcpEvent:
        item = await self._queue.get()
        if item is _END:
            self._queue.put_nowait(_END)  # a second loop over an ended stream ends at once too
            raise StopAsyncIteration
        return item  # type: ignore[return-value]

"""One cancellation signal per run.

The same object is handed to the model call and to every tool (and to a subagent's
whole run), so a single Stop reaches everything the run is doing. It is a plain
flag plus an ``asyncio.Event``: tools that wait use :meth:`CancelSignal.sleep` and
wake the moment it fires, instead of when their sleep would have ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


class RunCancelled(Exception):
    """Raised inside a run when its signal fires; carries the operator's reason."""

    def __init__(self, reason: str, elapsed_s: float = 0.0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.elapsed_s = elapsed_s


class CancelSignal:
    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.reason: str | None = None
        self.fired_at: float | None = None

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self, reason: str = "cancelled") -> None:
        """Fire the signal. The first reason wins; later calls are no-ops."""
        if self._event.is_set():
            return
        self.reason = reason
        self.fired_at = time.perf_counter()
        self._event.set()

    def raise_if_cancelled(self) -> None:
        if self._event.is_set():
            raise RunCancelled(self.reason or "cancelled")

    async def wait(self) -> None:
        await self._event.wait()

    async def sleep(self, seconds: float) -> None:
        """Sleep, or raise :class:`RunCancelled` as soon as the signal fires."""
        self.raise_if_cancelled()
        try:
            await asyncio.wait_for(self._event.wait(), timeout=seconds)
        except TimeoutError:
            return
        self.raise_if_cancelled()

    async def guard(self, awaitable: Awaitable[T]) -> T:
        """Await ``awaitable`` unless the signal fires first, in which case it is
        cancelled (and awaited, so its cleanup runs) and RunCancelled is raised."""
        if self.cancelled:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()  # never started: close it so it is not reported as leaked
            raise RunCancelled(self.reason or "cancelled")
        work = asyncio.ensure_future(awaitable)
        stop = asyncio.ensure_future(self._event.wait())
        try:
            await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not work.done():
                work.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await work
            elif not work.cancelled():
                work.exception()  # mark retrieved: we may be leaving by another exception
        if work.cancelled():
            raise RunCancelled(self.reason or "cancelled")
        return work.result()

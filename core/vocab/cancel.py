"""One cancellation signal per run.

The same object is handed to the model call and to every tool (and to a subagent's
whole run), so a single Stop reaches everything the run is doing. It is a plain
flag plus an ``asyncio.Event``: tools that wait use :meth:`CancelSignal.sleep` and
wake the moment it fires, instead of when their sleep would have ended.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

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
        self.by: str | None = None
        self.ends_wait = False
        """Fired by a Stop (:meth:`cancel` with ``stop``): a run that waits for a decision ends,
        its call declined in words, rather than being let go of still waiting."""
        self._guarded: set[asyncio.Future[Any]] = set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self, reason: str = "cancelled", by: str | None = None, *, stop: bool = False) -> None:
        """Fire the signal. The first reason (and who gave it) wins; later calls are no-ops.
        ``stop``: an operator's Stop, which ends a run that waits for a decision as well as one
        that works; without it (a process shutting down, a console quitting) such a run is
        let go of, still waiting, for whoever decides it."""
        if self._event.is_set():
            return
        self.reason = reason
        self.by = by
        self.ends_wait = stop
        self._event.set()
        for work in tuple(self._guarded):
            work.cancel()

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
        cancelled (and awaited, so its cleanup runs) and RunCancelled is raised.

        The signal cancels the work itself (one task, no watcher beside it): this
        wraps every model call, so it should cost little more than the ``await``."""
        if self.cancelled:
            if asyncio.iscoroutine(awaitable):
                awaitable.close()  # never started: close it so it is not reported as leaked
            raise RunCancelled(self.reason or "cancelled")
        work = asyncio.ensure_future(awaitable)
        self._guarded.add(work)
        try:
            # Cancelling this task cancels ``work`` too, and resumes only once it has finished.
            return await work
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if work.cancelled() and (current is None or not current.cancelling()):
                raise RunCancelled(self.reason or "cancelled") from None
            raise
        finally:
            self._guarded.discard(work)

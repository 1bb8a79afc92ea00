"""The PostgreSQL store's trace timer: trace lines no save took, committed on their own.

A trace line waits for the run's next save, which commits it in its own transaction; one
that no save takes within :data:`TRACE_FLUSH_S` is committed by itself
(:meth:`tether.store.postgres.handle.PgHandle._flush`), so a watcher sees a tool's events while
it runs. One timer thread per store hands those flushes to a few reused threads: a timer
thread per run and window cost a thread start each time (about a twentieth of a busy
worker's CPU under py-spy).
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

TRACE_FLUSH_S = 0.15
"""How long a trace line waits for a save before it is committed on its own: a watcher sees
a tool's events while it runs, and a killed process loses at most this window of them."""


class Flushes:
    """A store's trace timer: one thread that, :data:`TRACE_FLUSH_S` after a run's first line
    no save took, hands that run's flush to a few reused threads. A timer thread per run and
    window cost a thread start each time (about a twentieth of a busy worker's CPU)."""

    def __init__(self, workers: int) -> None:
        self._workers = workers
        self._due: list[tuple[float, int, Callable[[], None]]] = []
        self._cond = threading.Condition()
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False

    def later(self, flush: Callable[[], None]) -> None:
        with self._cond:
            heapq.heappush(self._due, (time.monotonic() + TRACE_FLUSH_S, next(self._order), flush))
            if self._thread is None:
                self._closed = False
                self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="tether trace flush")
                self._thread = threading.Thread(target=self._run, args=(self._pool,), name="tether trace timer",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self, pool: ThreadPoolExecutor) -> None:
        while True:
            with self._cond:
                if self._closed:
                    return
                if not self._due:
                    self._cond.wait()
                    continue
                wait = self._due[0][0] - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                _, _, flush = heapq.heappop(self._due)
            pool.submit(flush)

    def close(self) -> None:
        """Stop the timer; lines still waiting are committed by their handle's release."""
        with self._cond:
            self._closed = True
            self._due.clear()
            thread, self._thread = self._thread, None
            pool, self._pool = self._pool, None
            self._cond.notify()
        if thread is not None:
            thread.join()
        if pool is not None:
            pool.shutdown(wait=True)

"""The HTTP connection pools of one endpoint, more of them as its concurrent requests grow.

httpcore keeps one list of connections per pool and, on every request and every response,
walks all of it (``_assign_requests_to_connections`` asks each connection ``has_expired()``:
a ``getpeername`` and a ``select`` each). With one pool behind a worker's many runs, that
walk was the largest cost in a busy worker that Tether controls (docs/performance-history.md,
"Workers on PostgreSQL"), and
the connections beyond httpx's keep-alive limit were closed and opened again at each reply.
Pools that each carry at most :data:`PER_POOL` requests at once keep the walk short and
every connection within that limit. A console or a CLI run, with a request or two at a time,
has one pool.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import httpx

PER_POOL = 8  # requests in flight a pool takes before another pool is opened
MAX_POOLS = 16  # beyond PER_POOL x MAX_POOLS requests at once, the least busy pool takes more


@dataclass(slots=True, eq=False)
class _Pool:
    http: httpx.AsyncClient
    in_flight: int = 0


class Pools:
    """httpx clients made by ``make``, opened when the ones there are all carry
    :data:`PER_POOL` requests. ``shared`` (a given transport, such as an in-process app):
    one client only, since clients that share a transport would each close it."""

    def __init__(self, make: Callable[[], httpx.AsyncClient], *, shared: bool = False) -> None:
        self._make = make
        self._most = 1 if shared else MAX_POOLS
        self._pools: list[_Pool] = []

    @contextlib.contextmanager
    def lease(self) -> Iterator[httpx.AsyncClient]:
        """A client for one exchange: the least busy, or a new one when all are full."""
        pool = min(self._pools, key=lambda p: p.in_flight, default=None)
        if pool is None or (pool.in_flight >= PER_POOL and len(self._pools) < self._most):
            pool = _Pool(self._make())
            self._pools.append(pool)
        pool.in_flight += 1
        try:
            yield pool.http
        finally:
            pool.in_flight -= 1

    def __len__(self) -> int:
        return len(self._pools)

    async def aclose(self) -> None:
        pools, self._pools = self._pools, []
        for pool in pools:
            await pool.http.aclose()

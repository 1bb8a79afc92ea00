"""A model client opens more connection pools as its requests in flight grow, so httpcore's
walk over a pool's connections at each request stays short under a busy worker."""

from __future__ import annotations

import asyncio
import contextlib

import httpx

from tether.models.pools import MAX_POOLS, PER_POOL, Pools


def test_one_pool_until_it_carries_its_share_then_another() -> None:
    made: list[httpx.AsyncClient] = []

    def make() -> httpx.AsyncClient:
        made.append(httpx.AsyncClient())
        return made[-1]

    pools = Pools(make)
    assert len(pools) == 0  # nothing is made before the first request
    with contextlib.ExitStack() as leases:
        first = {id(leases.enter_context(pools.lease())) for _ in range(PER_POOL)}
        assert len(first) == 1 and len(pools) == 1
        second = leases.enter_context(pools.lease())
        assert len(pools) == 2 and id(second) not in first
    with pools.lease() as again:  # all returned: the first (least busy, made first) is reused
        assert again is made[0]
    assert len(pools) == 2
    asyncio.run(pools.aclose())
    assert all(client.is_closed for client in made)


def test_past_the_most_pools_the_least_busy_takes_more() -> None:
    pools = Pools(httpx.AsyncClient)
    with contextlib.ExitStack() as leases:
        for _ in range(PER_POOL * MAX_POOLS + 3):
            leases.enter_context(pools.lease())
        assert len(pools) == MAX_POOLS
        assert sorted(p.in_flight for p in pools._pools)[-3:] == [PER_POOL + 1] * 3
    asyncio.run(pools.aclose())


def test_a_shared_transport_gets_one_client() -> None:
    pools = Pools(httpx.AsyncClient, shared=True)
    with contextlib.ExitStack() as leases:
        clients = {id(leases.enter_context(pools.lease())) for _ in range(3 * PER_POOL)}
    assert len(clients) == 1 and len(pools) == 1
    asyncio.run(pools.aclose())

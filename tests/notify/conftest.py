"""A receiver on loopback that records what it is sent, stores of both kinds, and a sender
started and stopped by the test."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tether.notify import NotifyChannel, run_sender
from tether.notify.channels import channel_of
from tether.notify.sender import SenderSettings
from tether.notify.pg_storage import NOTIFY_TABLES

QUICK = SenderSettings(first_retry_s=0.05, max_retry_s=0.2, give_up_after=4, liveness_every_s=0.2,
                       lease_every_s=0.1, timeout_s=5.0, cursor_every_s=0.0)


class Receiver:
    """An HTTP server on 127.0.0.1 that keeps every POST (path, headers, JSON body); it
    answers 500 to the first ``failing`` requests, then 200."""

    def __init__(self, failing: int = 0) -> None:
        self.failing = failing
        self.posts: list[dict[str, Any]] = []
        self.refused = 0
        self._changed = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def _post(self, request: web.Request) -> web.Response:
        if self.refused < self.failing:
            self.refused += 1
            self._changed.set()
            return web.Response(status=500, text="down for a while")
        self.posts.append({"path": request.path_qs, "headers": dict(request.headers),
                           "body": json.loads(await request.read())})
        self._changed.set()
        return web.Response(text="ok")

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._post)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def wait_for(self, predicate: Any, what: str, timeout: float = 30.0) -> None:
        async def scan() -> None:
            while not predicate(self):
                self._changed.clear()
                await self._changed.wait()
        try:
            await asyncio.wait_for(scan(), timeout)
        except TimeoutError:
            raise AssertionError(f"not within {timeout} s: {what}; received {self.posts}") from None

    def bodies(self, event: str | None = None) -> list[dict[str, Any]]:
        out = [p["body"] for p in self.posts]
        return out if event is None else [b for b in out if b.get("event") == event]


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    made = Receiver()
    await made.start()
    try:
        yield made
    finally:
        await made.stop()


def channel(name: str, table: dict[str, Any], path: Path = Path("tether.toml")) -> NotifyChannel:
    return channel_of(path, name, table)


@contextlib.asynccontextmanager
async def sending(store: Any, channels: list[NotifyChannel], *, public_url: str | None = "https://tether.test",
                  settings: SenderSettings = QUICK, ready: bool = True) -> AsyncIterator[asyncio.Task[None]]:
    """A sender on ``store`` for the block, following the store when the block begins
    (unless ``ready`` is False: another sender holds the lease); stopped (and awaited) after it."""
    stop = asyncio.Event()
    following = asyncio.Event()
    task = asyncio.create_task(run_sender(store, public_url=public_url, stop=stop, channels=channels,
                                          settings=settings, ready=following))
    try:
        if ready:
            waiting = asyncio.ensure_future(following.wait())
            await asyncio.wait({waiting, task}, timeout=30, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            if task.done():
                task.result()
            assert following.is_set(), "the sender did not start following the store within 30 s"
        yield task
    finally:
        stop.set()
        try:
            await asyncio.wait_for(task, 30)
        except BaseException:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            raise


@pytest.fixture(params=["file", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The file store, and PostgreSQL on the session's server, emptied of runs and notifications."""
    from tether.store.files.store import RunStore

    if request.param == "file":
        yield RunStore(tmp_path / "runs")
        return
    yield request.getfixturevalue("pg_notify")


@pytest.fixture
def pg_notify(pg: Any) -> Any:
    with pg._conn() as conn:
        for table in NOTIFY_TABLES:
            if conn.execute("SELECT to_regclass(%s)", (f"{pg.schema}.{table}",)).fetchone()[0] is not None:
                conn.execute(pg.q(f"TRUNCATE {{s}}.{table}"))
    from tether.notify import storage

    storage._STORAGES.pop(pg, None)
    return pg


@pytest.fixture
def twin() -> Iterator[Any]:
    """Another object on a store, as another process would open it (closed after the test)."""
    from tether.store.files.store import RunStore

    made: list[Any] = []

    def another(store: Any) -> Any:
        if isinstance(store, RunStore):
            return RunStore(store.root)
        from tether.store.postgres.store import PgStore

        made.append(PgStore(store.url, schema=store.schema))
        return made[-1]

    yield another
    for store in made:
        store.close()


@pytest.fixture
def notify_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="tether.notify")
    return caplog

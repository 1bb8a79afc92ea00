"""The server of ``tether serve``: its pages, its login, and what runs beside them.

:func:`make_app` builds the aiohttp application over a harness (the store and the agent
file in force, as ``tether approve`` has them). On startup it reads whether the store's
role may only watch, starts the one watch of the store every page shares and the check of
the open pages' logins against the users on the store, mounts the
console (when :mod:`tether.web.console` is there) and the notification sender (when the
agent file has ``[notify.*]`` tables); on cleanup it stops them all, and the runs this
server went on with after a decision, in words.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from aiohttp import web

from tether.store.protocol import call
from tether.web import auth, costs, links, pages, workspace_actions
from tether.web.console import ConsoleSettings, console_app
from tether.web.decide import Decider
from tether.web.live import Hub
from tether.web.sessions import Session, Sessions, Throttle
from tether.web.settings import ServeSettings
from tether.web.users import UserBook
from tether.notify import load_channels, run_sender, sender_status

log = logging.getLogger(__name__)


def make_app(settings: ServeSettings, harness: Any, *, console: bool = True, notify: bool = True) -> web.Application:
    """``console``: mount the console in a browser at ``/console/`` (when it can be);
    ``notify``: send the store's notifications when the agent file has ``[notify.*]``
    tables (checked here: a bad one is a :class:`tether.agents.config.ConfigError`, in words,
    before the server starts)."""
    app = web.Application(middlewares=[auth.guard], client_max_size=256 * 1024)
    app[auth.SETTINGS] = settings
    app[auth.SESSIONS] = Sessions(settings.session_ttl_s)
    app[auth.THROTTLE] = Throttle()
    app[auth.USERS] = UserBook(settings.store)
    app[auth.WATCH_ONLY] = ""
    app[pages.DECIDER] = Decider(harness)
    app[pages.HUB] = Hub(settings.store)
    app[pages.NOTICES] = []
    app.add_routes(auth.routes())
    app.add_routes(pages.routes())
    app.add_routes(workspace_actions.routes())
    app.add_routes(links.routes())
    app.add_routes(costs.routes())
    app.router.add_static("/static/", str(resources.files("tether.web") / "static"), append_version=False)
    if console:
        _mount_console(app, settings)
    app.cleanup_ctx.append(_store_role)
    app.cleanup_ctx.append(_following_users)
    app.cleanup_ctx.append(_watching)
    app.cleanup_ctx.append(_deciding)
    channels = _channels(settings) if notify else []
    if channels:
        app.cleanup_ctx.append(functools.partial(_sending, channels=channels))
    return app


async def _store_role(app: web.Application) -> AsyncIterator[None]:
    store = app[auth.SETTINGS].store
    app[auth.WATCH_ONLY] = await call(store, store.read_only) or ""
    yield


async def _following_users(app: web.Application) -> AsyncIterator[None]:
    """The sessions held against the users on the store while pages stay open (an open
    event stream makes no next request to check at: :meth:`Sessions.follow`)."""
    users = app[auth.USERS]
    task = asyncio.create_task(app[auth.SESSIONS].follow(lambda: asyncio.to_thread(users.stamps)),
                               name="tether serve: the sessions' users")
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _watching(app: web.Application) -> AsyncIterator[None]:
    hub = app[pages.HUB]
    hub.start()
    app.on_shutdown.append(_end_streams)
    try:
        yield
    finally:
        await hub.aclose()


async def _end_streams(app: web.Application) -> None:
    """Before the server waits for its open requests: the pages' event streams end now (a
    browser reconnects to the next server), so a shutdown does not wait on them."""
    app[pages.HUB].end_streams()


async def _deciding(app: web.Application) -> AsyncIterator[None]:
    try:
        yield
    finally:
        await app[pages.DECIDER].aclose()


async def _sending(app: web.Application, *, channels: list[Any]) -> AsyncIterator[None]:
    """The notification sender of this store, beside the pages (it takes the store's one
    sender's lease itself: a second server of the same store sends nothing twice)."""

    settings = app[auth.SETTINGS]
    stop = asyncio.Event()
    task = asyncio.create_task(run_sender(settings.store, config_path=settings.config_path,
                                          public_url=settings.public_url, stop=stop, channels=channels),
                               name="tether serve: notification sender")
    app[pages.NOTICES].append(lambda: [str(line) for line in sender_status(settings.store)])
    try:
        yield
    finally:
        stop.set()
        try:
            await asyncio.wait_for(task, 10.0)
        except (asyncio.TimeoutError, asyncio.CancelledError):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        except Exception as exc:
            log.warning("tether serve: the notification sender ended with %s: %s", type(exc).__name__, exc)


def _channels(settings: ServeSettings) -> list[Any]:
    """The ``[notify.*]`` tables of the agent file, checked."""
    return load_channels(settings.config_path)


@dataclass(frozen=True, slots=True)
class WebOperator:
    """Who the login says is asking, as the console in a browser wants it (its tabs close
    when the session ends)."""

    name: str
    read_only: bool
    session: Session

    def held(self, wake: Callable[[], None]) -> contextlib.AbstractContextManager[None]:
        return self.session.held(wake)


def operator_of(request: web.Request) -> WebOperator | None:
    session = auth.session_of(request)
    if session is None:
        return None
    return WebOperator(session.user, not auth.may_change(request), session)


def store_spec(settings: ServeSettings) -> str:
    """The store as another process opens it (``TETHER_STORE``): as it was named, else its
    folder or its URL."""
    store = settings.store
    return settings.store_spec or store.spec


def _mount_console(app: web.Application, settings: ServeSettings) -> None:
    config = settings.config_path
    app.add_subapp("/console/", console_app(ConsoleSettings(store=store_spec(settings), public_url=settings.base_url,
                                                            operator_of=operator_of, config=config)))

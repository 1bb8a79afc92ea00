"""The whole console in a desktop browser: textual-serve's aiohttp app, mounted at ``/console/``
behind ``tether serve``'s login.

Each browser tab (each websocket) is one ``tether console`` process on the same store, recorded
as the logged-in operator (``--as``), and ended when the tab closes. textual-serve itself has no
login, no bound on tabs, never kills an app that ignores its quit request, and keeps a SIGTERM
waiting on open websockets (measured with textual-serve 1.1.3; docs/serve.md, "What textual-serve
leaves to Tether"). This module adds what a server on a
network needs:

- no operator, no console: a request the login in front did not vouch for is refused before the
  websocket handshake, so no process starts (``ConsoleSettings.operator_of``);
- a websocket from another origin is refused (a page elsewhere cannot drive an operator's console
  with their cookie);
- a bound on tabs per operator and in all, refused in words;
- an app that ignores the quit request is killed after a grace;
- a tab whose login ends (its user removed, or given a new password or role) closes then, and
  its console with it;
- on shutdown the open websockets are cancelled, so SIGTERM ends the server promptly.

A watcher (a read-only operator) gets no console: the console decides and stops, and a file store
cannot make it read-only. The approvals page shows watchers everything.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import logging
import re
import shlex
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import aiohttp_jinja2
import jinja2
from aiohttp import WSCloseCode, web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

log = logging.getLogger("tether.web.console")

_TEMPLATES = Path(sys.modules[Server.__module__].__file__ or "").parent / "templates"
# The page links Google's fonts: offline they never load, and online they tell Google who opens
# the console. The browser's monospace font draws the terminal as well.
_WEB_FONTS = re.compile(r"<link[^>]*fonts\.googleapis\.com[^>]*>", re.DOTALL)


class Operator(Protocol):
    """Who the login in front says is asking: their name, whether they may only watch, and
    ``held(wake)``: while a tab is open, ``wake()`` is called if their login ends (the user
    removed, or given a new password or role), and the tab then closes."""

    @property
    def name(self) -> str: ...

    @property
    def read_only(self) -> bool: ...

    def held(self, wake: Callable[[], None]) -> contextlib.AbstractContextManager[None]: ...


@dataclass(frozen=True)
class ConsoleSettings:
    """What the console sub-app needs to know; ``tether serve`` makes one from its options.

    ``store`` reaches each console through its environment (``TETHER_STORE``), never its
    command line, since a PostgreSQL URL may carry a password that ``ps`` would show.
    ``public_url`` is the address browsers use (``https://tether.example.org``): textual-serve
    builds its page's absolute URLs from it, and a websocket's ``Origin`` must match it.
    """

    store: str
    public_url: str
    operator_of: Callable[[web.Request], Operator | None]
    config: Path | None = None
    python: str = sys.executable
    tabs_per_operator: int = 4
    tabs_in_all: int = 16
    quit_grace_s: float = 3.0
    title: str = "Tether"


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of a URL, as a browser sends it in ``Origin``."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


class _Tab(AppService):
    """One console process: the store in its environment, killed if it ignores the quit request."""

    def __init__(self, command: str, *, store: str, grace_s: float, **kwargs: Any) -> None:
        super().__init__(command, **kwargs)
        self._store = store
        self._grace_s = grace_s
        self._stopping: asyncio.Future[None] | None = None

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        environment = super()._build_environment(width, height)
        environment["TETHER_STORE"] = self._store
        return environment

    async def stop(self) -> None:
        """Ask the app to quit; kill it when it has not after the grace (textual-serve waits
        forever). A cancelled caller still waits for the end, so it leaves no process behind."""
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self._stop())
        try:
            await asyncio.shield(self._stopping)
        except asyncio.CancelledError:
            await asyncio.wait([self._stopping])
            raise

    async def _stop(self) -> None:
        task, process = self._task, self._process
        if task is None:
            return
        self._task = None
        await self._download_manager.cancel_app_downloads(app_service_id=self.app_service_id)
        await self.send_meta({"type": "quit"})
        try:
            await asyncio.wait_for(asyncio.shield(task), self._grace_s)
        except TimeoutError:
            if process is not None and process.returncode is None:
                log.warning("a console tab ignored the quit request for %.0f s: killed", self._grace_s)
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
            await task
        if process is not None:
            await process.wait()
        if self._stdin is not None:  # else its pipe outlives the process, until the loop has closed
            self._stdin.close()


class _ConsoleServer(Server):
    """textual-serve's server with Tether's guards; see the module's docstring."""

    def __init__(self, settings: ConsoleSettings) -> None:
        super().__init__("", title=settings.title, public_url=settings.public_url.rstrip("/"))
        self.settings = settings
        self.tabs: Counter[str] = Counter()
        self.handlers: set[asyncio.Task[Any]] = set()
        self.policy: dict[str, str] = {}  # the page's Content-Security-Policy, made once

    def command_for(self, operator: Operator) -> str:
        words = [self.settings.python, "-m", "tether.tui.cli", "console", "--as", operator.name]
        if self.settings.config is not None:
            words += ["--config", str(self.settings.config)]
        # exec: the shell becomes the console, so one process per tab, and the kill reaches it.
        return "exec " + shlex.join(words)

    def _refusal(self, request: web.Request) -> tuple[Operator | None, web.Response | None]:
        operator = self.settings.operator_of(request)
        if operator is None:
            return None, web.Response(status=401, text="Log in first: the console needs an operator.")
        if operator.read_only:
            return operator, web.Response(
                status=403, text=f"{operator.name} may only watch, and the console decides and stops runs: "
                                 "the approvals page shows everything without deciding.")
        if self.tabs[operator.name] >= self.settings.tabs_per_operator:
            return operator, web.Response(
                status=429, text=f"{operator.name} has {self.tabs[operator.name]} consoles open, the most "
                                 "one operator may: close one and reload.")
        if sum(self.tabs.values()) >= self.settings.tabs_in_all:
            return operator, web.Response(
                status=429, text=f"{self.settings.tabs_in_all} consoles are open on this server, the most it "
                                 "runs: close one and reload.")
        return operator, None

    def build(self) -> web.Application:
        """textual-serve's routes (as ``Server._make_app`` makes them, but without a running
        loop: ``tether serve`` builds its app before it starts one), with its page template
        minus the web fonts."""
        app = web.Application()
        aiohttp_jinja2.setup(app, loader=jinja2.FunctionLoader(_template))
        app.add_routes([
            web.get("/", self.handle_index, name="index"),
            web.get("/ws", self.handle_websocket, name="websocket"),
            web.get("/download/{key}", self.handle_download, name="download"),
            web.static("/static", self.statics_path, name="static"),
        ])
        app.on_shutdown.append(self.on_shutdown)
        return app

    async def on_shutdown(self, app: web.Application) -> None:
        """Cancel the open websockets, so a SIGTERM with tabs open ends the server promptly;
        each handler then ends its console."""
        handlers = list(self.handlers)
        for task in handlers:
            task.cancel()
        await asyncio.gather(*handlers, return_exceptions=True)

    async def handle_index(self, request: web.Request) -> Any:
        _, refused = self._refusal(request)
        if refused is not None:
            return refused
        page = await super().handle_index(request)
        websocket = "ws" + self.public_url.removeprefix("http") + str(request.app.router["websocket"].url_for())
        page.headers["Content-Security-Policy"] = self.policy.setdefault(websocket, _page_policy(websocket))
        return page

    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:
        operator, refused = self._refusal(request)
        if refused is not None:
            return refused
        assert operator is not None
        if request.headers.get("Origin", "").lower() != origin_of(self.settings.public_url):
            return web.Response(status=403, text="This console only answers pages of its own address.")
        me = asyncio.current_task()
        assert me is not None
        self.tabs[operator.name] += 1
        self.handlers.add(me)
        try:
            return await self._serve_tab(request, operator)
        finally:
            self.handlers.discard(me)
            self.tabs[operator.name] -= 1
            if self.tabs[operator.name] <= 0:
                del self.tabs[operator.name]

    async def _serve_tab(self, request: web.Request, operator: Operator) -> web.WebSocketResponse:
        # A peer that does not answer a close is not waited on for long: a shutdown waits on it.
        websocket = web.WebSocketResponse(heartbeat=15, timeout=2.0)
        width = to_int(request.query.get("width", "80"), 80)
        height = to_int(request.query.get("height", "24"), 24)
        await websocket.prepare(request)
        tab = _Tab(self.command_for(operator), store=self.settings.store, grace_s=self.settings.quit_grace_s,
                   write_bytes=websocket.send_bytes, write_str=websocket.send_str, close=websocket.close,
                   download_manager=self.download_manager)
        closing: list[asyncio.Future[bool]] = []

        def logged_out() -> None:  # the tab closes as if its browser had closed it; its console ends below
            closing.append(asyncio.ensure_future(websocket.close(code=WSCloseCode.POLICY_VIOLATION,
                                                                 message=b"logged out")))
        try:
            try:
                with operator.held(logged_out):
                    await tab.start(width, height)
                    await self._process_messages(websocket, tab)
            except asyncio.CancelledError:  # the server shutting down, or the connection gone (a close ends it)
                await tab.stop()
                if not closing:
                    with contextlib.suppress(Exception):
                        await asyncio.shield(websocket.close(code=WSCloseCode.GOING_AWAY,
                                                             message=b"server shutting down"))
                raise
            except Exception:  # a broken socket or a bad message ends this tab, not the server
                log.exception("a console tab failed")
            await tab.stop()
        finally:
            if closing:  # the close a login's end began, done by now or soon: never left behind
                await asyncio.wait(closing)
        return websocket


def _template(name: str) -> str:
    return _WEB_FONTS.sub("", (_TEMPLATES / name).read_text(encoding="utf-8"))


def _page_policy(websocket_url: str) -> str:
    """The console page's Content-Security-Policy: ``tether serve``'s own (this server only,
    never framed), except what textual-serve's page needs: its inline ``<style>`` and xterm's
    (style-src 'unsafe-inline'), and its one inline script and ``onClick="refresh()"``, allowed
    by their hashes alone."""
    page = _template("app_index.html")
    scripts = re.findall(r"<script>(.*?)</script>", page, re.DOTALL)
    handlers = set(re.findall(r'onClick="([^"]*)"', page))
    hashes = " ".join(f"'sha256-{base64.b64encode(hashlib.sha256(code.encode()).digest()).decode()}'"
                      for code in [*scripts, *sorted(handlers)])
    return ("default-src 'self'; "
            f"script-src 'self' 'unsafe-hashes' {hashes}; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
            f"font-src 'self' data:; connect-src 'self' {websocket_url}; form-action 'self'; "
            "frame-ancestors 'none'; base-uri 'none'")


def console_app(settings: ConsoleSettings) -> web.Application:
    """The console's aiohttp application, to mount at ``/console/`` behind the login
    (``app.add_subapp("/console/", console_app(settings))``); its pages' URLs follow wherever
    it is mounted."""
    return _ConsoleServer(settings).build()

"""The console sub-app's guards, through aiohttp's test client (no browser): what textual-serve
alone does not do (docs/serve.md, "What textual-serve leaves to Tether") and a server on a network must.

The console tabs here are a stand-in program (``settings.python``) that speaks textual-serve's
start line and then ignores everything, the worst a tab can do; the real console in a real
browser is tests/browser/test_console_page.py."""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import WSCloseCode, WSServerHandshakeError, web
from aiohttp.test_utils import TestClient, TestServer

from tether.web.console import ConsoleSettings, console_app

CAP_S = 30.0


LOGINS: dict[str, list[Callable[[], None]]] = {}
"""Each operator's open tabs' wakes: calling them is their login ending (as ``tether serve``'s
session does when the user is removed)."""


@dataclass(frozen=True)
class Op:
    name: str
    read_only: bool = False

    @contextlib.contextmanager
    def held(self, wake: Callable[[], None]) -> Iterator[None]:
        LOGINS.setdefault(self.name, []).append(wake)
        try:
            yield
        finally:
            LOGINS[self.name].remove(wake)


def _cookie_operator(request: web.Request) -> Op | None:
    """The test's stand-in for ``tether serve``'s login: a cookie naming the operator."""
    name = request.cookies.get("who")
    return Op(name, read_only=name.startswith("watcher")) if name else None


_BEFORE: set[int] = set()


@pytest.fixture(autouse=True)
def _not_consoles() -> None:
    """The children this test process had before the test (the session's PostgreSQL server,
    when a PostgreSQL test ran first on this worker) are not consoles."""
    _BEFORE.clear()
    _BEFORE.update(_all_children())


def _children() -> set[int]:
    """The child processes this test started (its consoles)."""
    return _all_children() - _BEFORE


def _all_children() -> set[int]:
    """This process's child processes, from /proc."""
    mine, found = os.getpid(), set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == mine:
                found.add(int(entry.name))
    return found


async def _until(condition: Callable[[], bool], what: str) -> None:
    async def scan() -> None:
        while not condition():
            await asyncio.sleep(0.02)
    try:
        await asyncio.wait_for(scan(), CAP_S)
    except TimeoutError:
        raise AssertionError(f"never saw {what}") from None


@pytest.fixture
def stubborn(tmp_path: Path) -> Path:
    """A "python" whose console starts (the line textual-serve waits for), paints "ready", and
    then ignores the quit request, stdin closing and SIGTERM."""
    script = tmp_path / "stubborn"
    script.write_text("#!/bin/sh\ntrap '' TERM HUP INT\necho __GANGLION__\nprintf 'D\\0\\0\\0\\5ready'\n"
                      "exec sleep 600 </dev/null\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


class Mounted:
    """The sub-app at /console/ of a parent app on a loopback port, as ``tether serve`` mounts it."""

    def __init__(self, client: TestClient, origin: str) -> None:
        self.client = client
        self.origin = origin

    async def tab(self, who: str, origin: str | None = None):
        ws = await self.client.ws_connect("/console/ws", headers={"Origin": origin or self.origin,
                                                                  "Cookie": f"who={who}"})
        assert (await ws.receive_bytes(timeout=CAP_S)) == b"ready"  # its console is up
        return ws


async def _mounted(settings_for: Callable[[str], ConsoleSettings]) -> tuple[TestServer, TestClient, Mounted]:
    server = TestServer(web.Application(), host="127.0.0.1")
    await server.start_server()  # the port first: the public URL names it
    origin = f"http://127.0.0.1:{server.port}"
    await server.close()
    app = web.Application()
    app.add_subapp("/console/", console_app(settings_for(origin)))
    server = TestServer(app, host="127.0.0.1", port=int(origin.rsplit(":", 1)[1]))
    client = TestClient(server)
    await client.start_server()
    return server, client, Mounted(client, origin)


@pytest.fixture
async def mounted(tmp_path: Path, stubborn: Path) -> AsyncIterator[Mounted]:
    def settings(origin: str) -> ConsoleSettings:
        return ConsoleSettings(store=str(tmp_path / "runs"), public_url=origin, operator_of=_cookie_operator,
                               python=str(stubborn), tabs_per_operator=2, tabs_in_all=3, quit_grace_s=0.3)
    _, client, place = await _mounted(settings)
    try:
        yield place
    finally:
        await client.close()
        await _until(lambda: not _children(), "every console tab ended after the server closed")


async def test_without_an_operator_nothing_is_served_and_no_console_starts(mounted: Mounted):
    page = await mounted.client.get("/console/")
    assert page.status == 401 and "Log in first" in await page.text()
    with pytest.raises(WSServerHandshakeError) as refused:
        await mounted.client.ws_connect("/console/ws", headers={"Origin": mounted.origin})
    assert refused.value.status == 401
    assert not _children()


async def test_the_page_names_its_own_prefixed_address_and_no_web_fonts(mounted: Mounted):
    page = await mounted.client.get("/console/", cookies={"who": "ana"})
    body = await page.text()
    assert page.status == 200
    host = mounted.origin.split("://", 1)[1]
    assert f'data-session-websocket-url="ws://{host}/console/ws"' in body
    assert f"{mounted.origin}/console/static/js/textual.js" in body
    assert "googleapis" not in body
    script = await mounted.client.get("/console/static/js/textual.js", cookies={"who": "ana"})
    assert script.status == 200


async def test_a_websocket_from_another_origin_is_refused_before_a_console_starts(mounted: Mounted):
    with pytest.raises(WSServerHandshakeError) as refused:
        await mounted.tab("ana", origin="http://evil.example")
    assert refused.value.status == 403
    assert not _children()


async def test_a_watcher_gets_no_console(mounted: Mounted):
    page = await mounted.client.get("/console/", cookies={"who": "watcher-wu"})
    assert page.status == 403 and "may only watch" in await page.text()
    with pytest.raises(WSServerHandshakeError) as refused:
        await mounted.tab("watcher-wu")
    assert refused.value.status == 403
    assert not _children()


async def test_tabs_are_bounded_per_operator_and_in_all_in_words(mounted: Mounted):
    first, second = await mounted.tab("ana"), await mounted.tab("ana")
    await _until(lambda: len(_children()) == 2, "two console processes, one per tab")
    with pytest.raises(WSServerHandshakeError) as refused:
        await mounted.tab("ana")
    assert refused.value.status == 429
    page = await mounted.client.get("/console/", cookies={"who": "ana"})
    assert page.status == 429 and "ana has 2 consoles open" in await page.text()
    third = await mounted.tab("bo")  # another operator still gets one, up to the bound in all
    with pytest.raises(WSServerHandshakeError) as refused:
        await mounted.tab("cy")
    assert refused.value.status == 429
    page = await mounted.client.get("/console/", cookies={"who": "cy"})
    assert "3 consoles are open on this server" in await page.text()
    await first.close()  # a closed tab frees its place, once its console has ended
    await _until(lambda: len(_children()) == 2, "the closed tab's console ended")
    for _ in range(int(CAP_S / 0.02)):
        if (await mounted.client.get("/console/", cookies={"who": "ana"})).status != 429:
            break
        await asyncio.sleep(0.02)
    again = await mounted.tab("ana")
    for ws in (second, third, again):
        await ws.close()


async def test_a_console_that_ignores_the_quit_request_is_killed_when_its_tab_closes(mounted: Mounted):
    ws = await mounted.tab("ana")
    await _until(lambda: len(_children()) == 1, "the tab's console process")
    await ws.close()
    await _until(lambda: not _children(), "the stubborn console killed after its grace")


async def test_a_tab_closes_and_its_console_ends_when_its_login_ends(mounted: Mounted):
    ana, bo = await mounted.tab("ana"), await mounted.tab("bo")
    await _until(lambda: len(_children()) == 2, "two console processes")
    first = _children()
    told = asyncio.create_task(ana.receive())  # ana's browser, listening
    for wake in list(LOGINS["ana"]):  # ana removed, or given a new password or role
        wake()
    message = await asyncio.wait_for(told, CAP_S)
    assert message.data == WSCloseCode.POLICY_VIOLATION and message.extra == "logged out"
    await _until(lambda: len(_children()) == 1, "ana's console ended (killed after its grace: it ignores quit)")
    assert _children() < first and not LOGINS["ana"]
    # bo's tab is nobody else's business: it still answers (a ping, as the page sends one).
    await bo.send_json(["ping", "still there"])
    assert await bo.receive_json(timeout=CAP_S) == ["pong", "still there"]
    await bo.close()


async def test_closing_the_server_with_tabs_open_ends_their_consoles(tmp_path: Path, stubborn: Path):
    def settings(origin: str) -> ConsoleSettings:
        return ConsoleSettings(store=str(tmp_path / "runs"), public_url=origin, operator_of=_cookie_operator,
                               python=str(stubborn), quit_grace_s=0.3)
    server, client, place = await _mounted(settings)
    try:
        tabs = [await place.tab("ana"), await place.tab("bo")]
        await _until(lambda: len(_children()) == 2, "two console processes")
        told = [asyncio.create_task(ws.receive()) for ws in tabs]  # the browsers, listening
        await server.close()  # the server's shutdown, tabs still open: they are cancelled, not waited on
        assert not _children()
        for message in await asyncio.gather(*told):
            assert message.data == WSCloseCode.GOING_AWAY and message.extra == "server shutting down"
    finally:
        await client.close()

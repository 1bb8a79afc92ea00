"""A ``tether serve`` app on a real store, with users, and runs that wait for approval.

``web`` serves the file store; ``pg_web`` the PostgreSQL store of the session's server. Both
serve through aiohttp's test server on loopback, with the harness the tests drive runs
with (the scripted provider), so a decision on the page goes on with the run in the
server's own process, as ``tether serve`` does."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import aiohttp
from aiohttp.test_utils import TestServer

from tether.harness import Harness
from tether.web.accesslog import AccessLogger
from tether.web.app import make_app
from tether.web.pages import DECIDER
from tether.web.settings import ServeSettings
from tether.web.users import UserBook
from tether.demo.agents import DEMO

PAGE = {"Accept": "text/html,application/xhtml+xml"}  # what a browser's navigation asks for
PASSWORDS = {"ana": "green tea at dawn", "bob": "seven blue kites", "walt": "quiet river stones"}


class Recording:
    """The harness's model client, recording every request's messages (what the model reads)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.requests: list[list[dict[str, Any]]] = []

    def new_transcript(self) -> Any:
        return self.inner.new_transcript()

    async def complete(self, model: str, messages: list[dict], tools: Any, **kw: Any) -> Any:
        self.requests.append(json.loads(json.dumps(messages)))
        return await self.inner.complete(model, messages, tools, **kw)

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class Served:
    """The app under test, its store and harness, and ways in."""

    server: TestServer
    harness: Harness
    model: Recording
    store: Any

    def client(self) -> aiohttp.ClientSession:
        """A browser of its own (its own cookies); closing it leaves the server serving."""
        return aiohttp.ClientSession(base_url=str(self.server.make_url("/")),
                                     cookie_jar=aiohttp.CookieJar(unsafe=True))  # unsafe: cookies of an IP address

    @property
    def app(self) -> Any:
        return self.server.app

    async def waiting_run(self, scenario: str = "destructive") -> str:
        """A run of ``scenario`` saved waiting for approval, that no process holds."""
        state = self.harness.new_run(scenario)
        out = await self.harness.run(state.run_id)
        assert out.state.interruption is not None and out.state.interruption.type == "approval", out.state.status
        return state.run_id

    async def settled(self) -> None:
        await self.app[DECIDER].settled()


async def serving(store: Any, tmp_path: Path, *, users: bool = True, notify: bool = False, port: int | None = None,
                  config: Any = None, **settings: Any) -> AsyncIterator[Served]:
    """``users``: add ana and bob (operators) and walt (a watcher) first; ``notify``: send
    the notifications of ``config_path``'s ``[notify.*]`` tables; ``config``: the agent file
    the server's harness has (its fleet budgets)."""
    if users:
        book = UserBook(store)
        book.add("ana", PASSWORDS["ana"])
        book.add("bob", PASSWORDS["bob"])
        book.add("walt", PASSWORDS["walt"], role="watcher")
    async with Harness(workspace=tmp_path / "workspace", store=store, agent_sets=(DEMO,)) as plain:
        model = Recording(plain.client)
        async with Harness(workspace=tmp_path / "workspace", store=store, client=model, agent_sets=(DEMO,),
                           config=config) as harness:
            app = make_app(ServeSettings(store, **settings), harness, console=False, notify=notify)
            server = TestServer(app, host="127.0.0.1", **({"port": port} if port else {}))
            await server.start_server(access_log_class=AccessLogger)  # tether serve's own
            try:
                yield Served(server, harness, model, store)
            finally:
                await server.close()


@pytest.fixture(autouse=True)
def quick_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    """argon2id at its lightest for the tests (a loaded machine hashes the real parameters in
    about a second each); the parameters live in each hash, so checking works the same."""
    from argon2 import PasswordHasher

    from tether.web import users

    monkeypatch.setattr(users, "_HASHER", PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1))


@pytest.fixture
async def web(tmp_path: Path) -> AsyncIterator[Served]:
    from tether.store.files.store import RunStore

    async for served in serving(RunStore(tmp_path / "runs"), tmp_path):
        yield served


@pytest.fixture
async def pg_web(pg: Any, tmp_path: Path) -> AsyncIterator[Served]:
    with pg._conn() as conn:
        conn.execute(pg.q("DROP TABLE IF EXISTS {s}.web_users"))
    async for served in serving(pg, tmp_path):
        yield served


_CSRF = re.compile(r'name="csrf" value="([^"]+)"')


async def login(client: aiohttp.ClientSession, name: str, password: str | None = None, *,
                headers: dict[str, str] | None = None) -> Any:
    """Log in through the form, as a browser does; the response to the POST (not followed).
    ``headers``: sent with the POST (what a proxy adds)."""
    page = await client.get("/login")
    token = _CSRF.search(await page.text())
    assert token is not None
    return await client.post("/login", data={"csrf": token.group(1), "name": name,
                                             "password": PASSWORDS.get(name, "") if password is None else password,
                                             "next": "/"}, headers=headers, allow_redirects=False)


async def logged_in(served: Served, name: str) -> aiohttp.ClientSession:
    client = served.client()
    response = await login(client, name)
    assert response.status == 303, await response.text()
    return client


async def csrf_of(client: aiohttp.ClientSession, path: str = "/") -> str:
    page = await client.get(path)
    found = _CSRF.search(await page.text())
    assert found is not None, "the page carries no CSRF token"
    return found.group(1)

"""The login in front of ``tether serve``: who gets in, what the cookie is, what is refused."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from tether.vocab.state import NeedsApproval
from tether.store.files.store import RunStore
from tether.web.settings import trusted_proxies
from tether.web.users import UserBook, UserError

from tests.web.conftest import PAGE, PASSWORDS, Served, csrf_of, logged_in, login, serving

CAP_S = 30.0


async def test_a_good_login_opens_a_session_whose_cookie_is_httponly_strict_and_expires(web: Served):
    client = web.client()
    try:
        response = await login(client, "ana")
        assert response.status == 303 and response.headers["Location"] == "/"
        cookie = response.cookies["tether_session"]
        assert cookie["httponly"] and cookie["samesite"] == "Strict" and cookie["path"] == "/"
        assert int(cookie["max-age"]) == 12 * 3600
        assert not cookie["secure"]  # plain http on loopback: a Secure cookie would never come back
        page = await client.get("/")
        assert page.status == 200
        assert 'data-testid="who">ana<' in await page.text()
    finally:
        await client.close()


async def test_behind_https_the_cookie_is_secure(tmp_path: Path):
    async for served in serving(RunStore(tmp_path / "runs"), tmp_path, public_url="https://tether.example.org"):
        client = served.client()
        try:
            response = await login(client, "ana")
            assert response.status == 303
            assert response.cookies["tether_session"]["secure"]
        finally:
            await client.close()


@pytest.mark.parametrize("name, password", [("ana", "green tea at dusk"), ("nobody", "green tea at dawn"),
                                            ("ana", "")])
async def test_a_bad_login_is_refused_in_words_and_opens_nothing(web: Served, name: str, password: str):
    client = web.client()
    try:
        response = await login(client, name, password)
        assert response.status in (400, 401)
        text = await response.text()
        assert "do not match" in text or "give your name and your password" in text
        assert "tether_session" not in response.cookies
        assert (await client.get("/", headers=PAGE, allow_redirects=False)).status == 303  # still sent to the login
    finally:
        await client.close()


async def test_failed_logins_are_throttled_per_name_and_per_address(web: Served):
    client = web.client()
    try:
        for _ in range(5):
            assert (await login(client, "ana", "a wrong guess, again")).status == 401
        refused = await login(client, "ana")  # the right password, too soon: refused all the same
        assert refused.status == 429
        assert "too many failed logins for this name or from this address: try again in" in await refused.text()
        assert "tether_session" not in refused.cookies
        other = await login(client, "bob")  # another name from the same address waits too
        assert other.status == 429
    finally:
        await client.close()


async def test_a_local_client_cannot_rotate_x_forwarded_for_past_the_throttle(web: Served, caplog):
    caplog.set_level(logging.INFO, logger="tether.web.auth")
    client = web.client()  # on loopback, as any process of this machine is; no --trust-proxy
    try:
        for n in range(5):  # a new name and a new made-up address each time
            guess = await login(client, f"guess{n}", "a wrong guess, again",
                                headers={"X-Forwarded-For": f"198.51.100.{n}"})
            assert guess.status == 401
        refused = await login(client, "ana", headers={"X-Forwarded-For": "198.51.100.99"})
        assert refused.status == 429, "the header from a peer nobody named as a proxy was believed"
        assert "too many failed logins for this name or from this address" in await refused.text()
    finally:
        await client.close()
    assert "failed login for 'guess0' from 127.0.0.1" in caplog.text  # the peer, not the header


async def test_behind_named_proxies_the_client_is_the_right_most_address_they_did_not_add(tmp_path: Path, caplog):
    caplog.set_level(logging.INFO, logger="tether.web.auth")
    proxies = trusted_proxies(["127.0.0.1", "10.0.0.0/8"])  # --trust-proxy 127.0.0.1 --trust-proxy 10.0.0.0/8
    async for served in serving(RunStore(tmp_path / "runs"), tmp_path, trusted_proxies=proxies):
        guesser, other = served.client(), served.client()
        try:
            for n in range(5):  # what the guesser writes, and which inner proxy it came through, change each time
                hops = f"198.51.100.{n}, 203.0.113.7, 10.0.0.{n}"
                guess = await login(guesser, f"guess{n}", "a wrong guess, again", headers={"X-Forwarded-For": hops})
                assert guess.status == 401
            refused = await login(guesser, "ana", headers={"X-Forwarded-For": "192.0.2.1, 203.0.113.7, 10.0.0.9"})
            assert refused.status == 429
            # Another client behind the same proxies is its own address, not held back by the guesser.
            fine = await login(other, "bob", headers={"X-Forwarded-For": "203.0.113.8, 10.0.0.1"})
            assert fine.status == 303
        finally:
            await guesser.close()
            await other.close()
    assert "failed login for 'guess0' from 203.0.113.7" in caplog.text
    assert "bob logged in from 203.0.113.8" in caplog.text


def test_trust_proxy_takes_addresses_and_networks_and_refuses_anything_else_in_words():
    assert [str(n) for n in trusted_proxies(["127.0.0.1", "10.0.0.0/8, ::1"])] == ["127.0.0.1/32", "10.0.0.0/8",
                                                                                  "::1/128"]
    with pytest.raises(ValueError, match="--trust-proxy takes the address or network of a reverse proxy .* not "
                                         "'localhost'"):
        trusted_proxies(["localhost"])


async def test_the_login_form_needs_its_own_token(web: Served):
    client = web.client()
    try:
        response = await client.post("/login", data={"name": "ana", "password": PASSWORDS["ana"]},
                                     allow_redirects=False)
        assert response.status == 403
        assert "the login form was out of date" in await response.text()
    finally:
        await client.close()


async def test_logout_ends_the_session(web: Served):
    client = await logged_in(web, "ana")
    try:
        token = await csrf_of(client)
        assert (await client.post("/logout", data={"csrf": token}, allow_redirects=False)).status == 303
        again = await client.get("/", headers=PAGE, allow_redirects=False)
        assert again.status == 303 and again.headers["Location"] == "/login"
    finally:
        await client.close()


@pytest.mark.parametrize("path", ["/", "/fragment/approvals", "/runs/anything", "/fragment/runs/anything"])
async def test_no_page_works_without_a_login(web: Served, path: str):
    client = web.client()
    try:
        page = await client.get(path, headers={"Accept": "text/html"}, allow_redirects=False)
        assert page.status == 303 and page.headers["Location"].startswith("/login")
        script = await client.get(path, headers={"Accept": "application/json"}, allow_redirects=False)
        assert script.status == 401 and "log in first" in await script.text()
    finally:
        await client.close()


async def test_the_live_updates_and_every_change_need_a_login_and_change_nothing(web: Served):
    run_id = await web.waiting_run()
    client = web.client()
    try:
        assert (await client.get("/events", headers={"Accept": "text/event-stream"})).status == 401
        for path, data in (("/decide", {"run": run_id, "call": "call_1_0", "verdict": "approve"}),
                           (f"/runs/{run_id}/stop", {"reason": "x"}), ("/logout", {})):
            response = await client.post(path, data=data, allow_redirects=False)
            assert response.status == 401, path
        assert isinstance(web.store.load(run_id).interruption, NeedsApproval)
    finally:
        await client.close()


async def test_a_password_is_in_no_log_and_no_store_file(web: Served, tmp_path: Path, caplog):
    caplog.set_level("DEBUG")
    client = web.client()
    try:
        await login(client, "ana")
        await login(client, "ana", "a wrong password typed here")
    finally:
        await client.close()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "ana logged in" in logged and "failed login for 'ana'" in logged  # the logs do speak of logins
    for secret in (PASSWORDS["ana"], "a wrong password typed here"):
        assert secret not in logged
        for path in tmp_path.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path
    users = (tmp_path / "runs" / "users.json").read_text()
    assert "$argon2id$" in users


@pytest.mark.parametrize("password, words", [("", "empty"), ("short pw", "at least 10"),
                                             ("aaaaaaaaaaaa", "too few characters"),
                                             ("carol is me, carol", "contains the user's name")])
def test_weak_passwords_are_refused_in_words(tmp_path: Path, password: str, words: str):
    book = UserBook(RunStore(tmp_path / "runs"))
    with pytest.raises(UserError, match=words):
        book.add("carol", password)
    assert book.users() == []


async def test_a_removed_user_or_one_made_a_watcher_cannot_change_anything_with_an_old_session(web: Served):
    run_id = await web.waiting_run()
    ana, bob = await logged_in(web, "ana"), await logged_in(web, "bob")
    try:
        forms = {name: {"csrf": await csrf_of(client), "run": run_id, "call": "call_1_0", "verdict": "approve"}
                 for name, client in (("ana", ana), ("bob", bob))}
        UserBook(web.store).remove("ana")
        UserBook(web.store).add("bob", PASSWORDS["bob"], role="watcher")
        for client, name, words in ((ana, "ana", "ana is no longer a user of this store"),
                                    (bob, "bob", "the password or role of bob changed since this login")):
            answer = await client.post("/decide", data=forms[name], headers={"Accept": "application/json"})
            assert answer.status == 401
            assert (await answer.json())["words"] == f"{words}: log in again; nothing was changed"
            assert answer.cookies["tether_session"].value == ""  # the browser forgets it
        assert isinstance(web.store.load(run_id).interruption, NeedsApproval)
        again = await ana.get("/", headers=PAGE, allow_redirects=False)
        assert again.status == 303  # the removed user's session is over
    finally:
        await ana.close()
        await bob.close()


async def ended_words(stream: Any) -> str:
    """Read an open ``/events`` stream until it says its session ended (within :data:`CAP_S`
    in all: its pings come every 15 s); the words it gives."""
    async with asyncio.timeout(CAP_S):
        while True:
            line = (await stream.content.readline()).decode()
            assert line, "the stream closed without saying why"
            if line == "event: ended\n":
                data = (await stream.content.readline()).decode()
                return json.loads(data.removeprefix("data: "))["words"]


@pytest.mark.parametrize("path", ["/", "/runs/{run}", "/fragment/approvals", "/fragment/runs/{run}", "/events"])
async def test_a_removed_user_reads_nothing_more_with_an_old_session(web: Served, path: str):
    run_id = await web.waiting_run()
    ana, bob = await logged_in(web, "ana"), await logged_in(web, "bob")
    try:
        before = await ana.get(path.format(run=run_id), headers=PAGE)
        assert before.status == 200
        before.close()  # an event stream stays open: closed here, as a page that is left
        UserBook(web.store).remove("ana")  # another book of the store, as tether serve --remove-user is
        accept = PAGE if not path.startswith(("/fragment", "/events")) else {"Accept": "text/event-stream"}
        page = await ana.get(path.format(run=run_id), headers=accept, allow_redirects=False)
        assert page.status == 401
        assert "ana is no longer a user of this store: log in again" in await page.text()
        again = await ana.get("/", headers=PAGE, allow_redirects=False)
        assert again.status == 303 and again.headers["Location"] == "/login"  # the session is over
        other = await bob.get(path.format(run=run_id), headers=PAGE)
        assert other.status == 200  # nobody else's login ends
        other.close()
    finally:
        await ana.close()
        await bob.close()


@pytest.mark.parametrize("change", ["removed", "new password", "same password again", "made a watcher"])
async def test_an_open_event_stream_ends_when_its_user_is_removed_or_changed(web: Served, change: str):
    ana, bob = await logged_in(web, "ana"), await logged_in(web, "bob")
    try:
        stream = await ana.get("/events", headers={"Accept": "text/event-stream"})
        others = await bob.get("/events", headers={"Accept": "text/event-stream"})
        try:
            assert (await stream.content.readline()).startswith(b"retry:")
            book = UserBook(web.store)
            if change == "removed":
                book.remove("ana")
            else:
                book.add("ana", "a new passphrase here" if change == "new password" else PASSWORDS["ana"],
                         role="watcher" if change == "made a watcher" else "operator")
            words = await ended_words(stream)
            if change == "removed":
                assert words == "ana is no longer a user of this store: log in again"
            else:
                assert words == "the password or role of ana changed since this login: log in again"
            assert (await asyncio.wait_for(stream.content.read(), CAP_S)).strip() == b""  # then it closes
            assert (await ana.get("/", headers=PAGE, allow_redirects=False)).status == 303
            assert not others.content.at_eof() and (await bob.get("/")).status == 200  # bob's login holds
        finally:
            stream.close()
            others.close()
        if change != "removed":  # a new login, with the password now in force, works
            fresh = web.client()
            try:
                password = "a new passphrase here" if change == "new password" else PASSWORDS["ana"]
                assert (await login(fresh, "ana", password)).status == 303
                assert (await fresh.get("/")).status == 200
            finally:
                await fresh.close()
    finally:
        await ana.close()
        await bob.close()


async def test_a_session_ends_when_it_expires_on_the_server_too(tmp_path: Path):
    import asyncio

    async for served in serving(RunStore(tmp_path / "runs"), tmp_path, session_ttl_s=1.0):
        client = served.client()
        try:
            response = await login(client, "ana")
            token = response.cookies["tether_session"].value
            assert response.cookies["tether_session"]["max-age"] == "1"
            await asyncio.sleep(1.2)
        finally:
            await client.close()
        replay = served.client()  # a browser that kept the cookie past its age: the server ended the session
        try:
            page = await replay.get("/", headers={**PAGE, "Cookie": f"tether_session={token}"},
                                    allow_redirects=False)
            assert page.status == 303 and page.headers["Location"] == "/login"
        finally:
            await replay.close()


@pytest.mark.parametrize("target, lands", [("/runs/r1", "/runs/r1"), ("//evil.example/x", "/"),
                                           ("https://evil.example/", "/"), ("/\\evil.example", "/")])
async def test_after_the_login_only_a_page_of_this_server_is_next(web: Served, target: str, lands: str):
    import re

    client = web.client()
    try:
        page = await client.get("/login", params={"next": target})
        token = re.search(r'name="csrf" value="([^"]+)"', await page.text()).group(1)
        shown_next = re.search(r'name="next" value="([^"]*)"', await page.text()).group(1)
        response = await client.post("/login", data={"csrf": token, "name": "ana", "password": PASSWORDS["ana"],
                                                     "next": target}, allow_redirects=False)
        assert response.status == 303 and response.headers["Location"] == lands
        assert shown_next == lands
    finally:
        await client.close()

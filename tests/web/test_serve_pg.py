"""``tether serve`` on a PostgreSQL store: its users in the store's schema, decisions through
the same path, live updates from LISTEN, and the watcher's role that makes everyone a watcher."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tether.approvals import DecisionQuery
from tether.vocab.state import NeedsApproval, Status
from tether.web.pages import HUB
from tether.web.users import UserBook

from tests.web.conftest import PAGE, PASSWORDS, Served, csrf_of, logged_in, login, serving
from tests.web.test_approvals_page import cards, decide, late_decision_is_refused, next_change


async def test_users_live_in_the_stores_schema_as_argon2_hashes_only(pg_web: Served):
    with pg_web.store._conn() as conn:
        rows = conn.execute(pg_web.store.q("SELECT name, hash, role FROM {s}.web_users ORDER BY name")).fetchall()
    assert [(name, role) for name, _, role in rows] == [("ana", "operator"), ("bob", "operator"), ("walt", "watcher")]
    for _, hashed, _ in rows:
        assert hashed.startswith("$argon2id$") and not any(p in hashed for p in PASSWORDS.values())
    client = pg_web.client()
    try:
        assert (await login(client, "ana", "green tea at dusk")).status == 401
        assert (await login(client, "ana")).status == 303
    finally:
        await client.close()


async def test_approve_on_postgresql_records_the_user_and_the_run_finishes(pg_web: Served):
    run_id = await pg_web.waiting_run()
    client = await logged_in(pg_web, "ana")
    try:
        assert cards(await (await client.get("/")).text()) == [(run_id, "call_1_0")]
        answer = await decide(client, run_id, "approve")
        assert (await answer.json())["ok"], await answer.text()
        await pg_web.settled()
        assert pg_web.store.load(run_id).status is Status.COMPLETED
        (record,) = pg_web.store.decisions(DecisionQuery())
        assert (record.verdict, record.by) == ("approved", "ana")
    finally:
        await client.close()


async def test_a_waiting_call_is_pushed_from_listen(pg_web: Served):
    client = await logged_in(pg_web, "ana")
    try:
        stream = await client.get("/events", headers={"Accept": "text/event-stream"})
        try:
            assert (await stream.content.readline()).decode().startswith("retry:")
            await asyncio.wait_for(pg_web.app[HUB].ready.wait(), 30)  # the LISTEN is in place
            run_id = await pg_web.waiting_run()
            await next_change(stream, run_id)
        finally:
            stream.close()
    finally:
        await client.close()


async def test_the_watchers_role_makes_everyone_a_watcher(pg_web: Served, pg_server, tmp_path: Path):
    from tether.store.postgres.store import PgStore

    run_id = await pg_web.waiting_run()  # made, and the users added, with the operator's role
    watching = PgStore(pg_server.watcher_url)
    try:
        async for served in serving(watching, tmp_path / "watcher", users=False):
            client = await logged_in(served, "ana")  # an operator, on a server whose store may only watch
            try:
                text = await (await client.get("/")).text()
                assert cards(text) == [(run_id, "call_1_0")]
                assert "may only watch" in text and 'data-testid="approve"' not in text
                answer = await client.post("/decide", data={"csrf": await csrf_of(client), "run": run_id,
                                                            "call": "call_1_0", "verdict": "approve"},
                                           headers={"Accept": "application/json"})
                assert answer.status == 403
                assert "store role tether_watch may only watch" in (await answer.json())["words"]
            finally:
                await client.close()
    finally:
        watching.close()
    assert isinstance(pg_web.store.load(run_id).interruption, NeedsApproval)
    assert pg_web.store.decisions(DecisionQuery()) == []


async def test_a_link_decides_once_on_postgresql(pg_web: Served):
    from tests.web.test_links import link_for

    run_id = await pg_web.waiting_run()
    token = link_for(pg_web, run_id, "reject", bearer=True)
    client = pg_web.client()
    try:
        first = await client.post(f"/l/{token}", data={"reason": "not tonight"})
        assert first.status == 200, await first.text()
        await pg_web.settled()
        second = await client.post(f"/l/{token}", data={"reason": "again"})
        assert second.status == 403 and "already used" in await second.text()
    finally:
        await client.close()
    (record,) = pg_web.store.decisions(DecisionQuery())
    assert (record.verdict, record.by, record.words) == ("rejected", "link", "not tonight")


async def test_a_decision_posted_after_the_deadline_is_refused_on_postgresql(pg_web: Served):
    """Issue 37, item 1, on PostgreSQL: the deadline decides, and the page says so."""
    await late_decision_is_refused(pg_web)


async def test_a_user_removed_on_postgresql_is_logged_out_and_their_open_stream_ends(pg_web: Served):
    from tests.web.test_login import ended_words

    ana = await logged_in(pg_web, "ana")
    try:
        stream = await ana.get("/events", headers={"Accept": "text/event-stream"})
        try:
            assert (await stream.content.readline()).startswith(b"retry:")
            UserBook(pg_web.store).remove("ana")  # in web_users, as tether serve --remove-user does
            assert await ended_words(stream) == "ana is no longer a user of this store: log in again"
        finally:
            stream.close()
        assert (await ana.get("/", headers=PAGE, allow_redirects=False)).status == 303
    finally:
        await ana.close()

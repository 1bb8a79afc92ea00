"""Watching a PostgreSQL store: every committed change is notified on ``tether_<schema>``
with ``{"run": ID, "kind": KIND}`` in its own transaction, :class:`PgWatcher` turns the
notifications into the same batches as the file store's watcher, and a follower reads
only the trace lines it has not read. A real server (tests/pg.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import psycopg
import pytest

from tether.harness import Harness
from tether.store.postgres.connection import StoreUnavailable
from tether.store.postgres.store import PgStore
from tether.store.postgres.watch import PgWatcher
from tether.vocab.state import RunState, Status
from tether.store.protocol import SaveError
from tether.store.changes import JOURNAL, NEW, OWNER, TRACE
from tether.demo.agents import DEMO
from tests.support import wait_until

CAP_S = 30.0


def new_state(run_id: str) -> RunState:
    return RunState(run_id=run_id, model="plan", messages=[{"role": "user", "content": "q"}])


def listeners(pg: PgStore) -> int:
    with pg._conn() as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'tether watch'"
                            ).fetchone()[0]


async def gone(pg: PgStore) -> None:
    """No watcher's session left on the server (a closed session's backend ends a moment later)."""
    await asyncio.to_thread(wait_until, lambda: listeners(pg) == 0, "the watcher's connection is closed")


async def collect(watcher: PgWatcher, until, seen: dict[str, set[str]]) -> None:
    async def loop() -> None:
        async for batch in watcher:
            for change in batch:
                seen.setdefault(change.run_id, set()).update(change.what)
            if until(seen):
                return
    await asyncio.wait_for(loop(), CAP_S)


def test_each_change_is_notified_with_the_fixed_payload_when_it_commits(pg: PgStore):
    """The contract other processes build on: channel tether_<schema>, payload
    {"run": ID, "kind": "new"|"journal"|"trace"|"owner"}; a save that is refused sends nothing."""
    with psycopg.connect(pg.url, autocommit=True) as listener:
        listener.execute('LISTEN "tether_tether"')
        pg.create(new_state("n1"))
        state, handle = pg.open("n1")
        trace = handle.trace()
        from tether.vocab.events import RunStarted

        trace.write(RunStarted(run_id="n1", model="plan", resumed=False))
        state.messages.append({"role": "assistant", "content": "a"})
        handle.save(state)
        with pg._conn() as conn:  # another owner's token: this handle's next save is fenced
            conn.execute(pg.q("UPDATE {s}.runs SET owner_token = 'other' WHERE run_id = 'n1'"))
        with pytest.raises(SaveError):
            handle.save(state)
        handle.release()
        got = [(n.channel, json.loads(n.payload)) for n in listener.notifies(timeout=1.0)]
    assert {c for c, _ in got} == {"tether_tether"}
    payloads = [p for _, p in got]
    assert payloads == [{"run": "n1", "kind": "new"}, {"run": "n1", "kind": "owner"},
                        {"run": "n1", "kind": "journal"}, {"run": "n1", "kind": "trace"},
                        {"run": "n1", "kind": "owner"}]


async def test_a_watcher_sees_a_run_made_and_run_by_another_connection(pg: PgStore, tmp_path: Path):
    seen: dict[str, set[str]] = {}
    async with PgWatcher(pg) as watcher:
        async with Harness(workspace=tmp_path / "ws", store=pg, agent_sets=(DEMO,)) as harness:
            state = await asyncio.to_thread(harness.new_run, "plan")
            outcome = await harness.run(state.run_id)
        assert outcome.status is Status.COMPLETED
        await collect(watcher, lambda s: {NEW, JOURNAL, TRACE, OWNER} <= s.get(state.run_id, set()), seen)
    await gone(pg)  # the connection closed with the watcher
    records = list(await asyncio.to_thread(pg.read_trace, state.run_id))
    assert records[0]["kind"] == "run_started" and records[-1]["kind"] == "run_stopped"
    later = list(await asyncio.to_thread(pg.read_trace, state.run_id, records[1]["seq"]))
    assert later == records[2:]  # a follower reads only what it has not read


async def test_a_watcher_of_named_runs_hears_only_them_and_a_burst_is_one_batch(pg: PgStore):
    batches = []
    async with PgWatcher(pg, run_ids=["b"], coalesce_ms=200) as watcher:
        for rid in ("a", "b", "c"):
            await asyncio.to_thread(pg.create, new_state(rid))

        async def first() -> None:
            batches.append(await anext(watcher))
        await asyncio.wait_for(first(), CAP_S)
    assert [(c.run_id, set(c.what)) for b in batches for c in b] == [("b", {NEW})]


async def test_a_cancelled_consumer_leaves_no_connection_and_loses_nothing(pg: PgStore):
    watcher = PgWatcher(pg)
    await watcher.start()
    try:
        waiting = asyncio.ensure_future(anext(watcher))
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await asyncio.to_thread(pg.create, new_state("late"))
        batch = await asyncio.wait_for(anext(watcher), CAP_S)  # the same watcher goes on
        assert [c.run_id for c in batch] == ["late"]
    finally:
        await watcher.aclose()
    await gone(pg)

    async def consume() -> None:
        async with PgWatcher(pg) as w:
            async for _ in w:
                pass
    task = asyncio.create_task(consume())
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await gone(pg)


async def test_a_lost_connection_ends_the_watch_in_words_without_the_password(pg: PgStore, pg_server):
    async with PgWatcher(pg) as watcher:
        with pg._conn() as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE application_name = 'tether watch'")
        with pytest.raises(StoreUnavailable) as caught:
            await asyncio.wait_for(anext(watcher), CAP_S)
    assert "tether:***@" in str(caught.value) and pg_server.operator_password not in str(caught.value)
    await gone(pg)


async def test_a_tools_events_reach_a_watcher_while_it_runs_before_any_save(pg: PgStore, tmp_path: Path):
    """Trace lines are committed on a short timer, not only at saves: scan_archive's progress
    is in the database (and notified) while the tool is still running."""
    from tether.vocab.cancel import CancelSignal

    signal = CancelSignal()
    async with Harness(workspace=tmp_path / "ws", store=pg, agent_sets=(DEMO,)) as harness:
        state = await asyncio.to_thread(harness.new_run, "slow")
        async with PgWatcher(pg, run_ids=[state.run_id]) as watcher:
            running = asyncio.create_task(harness.run(state.run_id, signal=signal))
            try:
                after = 0
                progress: list[dict] = []

                async def until_progress() -> None:
                    nonlocal after
                    async for batch in watcher:
                        if any(TRACE in c for c in batch):
                            for record in await asyncio.to_thread(pg.read_trace, state.run_id, after):
                                after = record["seq"]
                                if record["kind"] == "tool_progress":
                                    progress.append(record)
                            if progress:
                                return
                await asyncio.wait_for(until_progress(), CAP_S)
                assert not running.done()  # seen while the tool runs
                saved = await asyncio.to_thread(pg.load, state.run_id)
                assert not any(m.get("role") == "tool" for m in saved.messages)  # no save has them yet
            finally:
                signal.cancel("enough", "test")
                outcome = await asyncio.wait_for(running, CAP_S)
    assert outcome.status is Status.INTERRUPTED
    kinds = [r["kind"] for r in await asyncio.to_thread(lambda: list(pg.read_trace(state.run_id)))]
    assert kinds[-1] == "run_stopped" and "tool_progress" in kinds

"""What only the PostgreSQL store has to show: the watcher role reads and cannot write,
passwords stay out of errors, a SIGKILLed owner's run is orphaned at once, and no
blocking call reaches the event loop while the harness runs a run."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psycopg
import pytest

from tether.demo.agents import DEMO
from tether.harness import Harness
from tether.store.postgres.connection import StoreUnavailable, redact
from tether.store.postgres.store import PgStore
from tether.vocab.state import RunState, StateError, Status
from tests.support import wait_until


def new_state(run_id: str) -> RunState:
    return RunState(run_id=run_id, model="plan", messages=[{"role": "user", "content": "q"}])


def test_the_watcher_lists_and_reads_but_cannot_write_or_take_a_run(pg: PgStore, pg_server):
    pg.create(new_state("w1"))
    watcher = PgStore(pg_server.watcher_url)
    try:
        assert [s.run_id for s in watcher.summaries()] == ["w1"]
        assert watcher.load("w1").messages == [{"role": "user", "content": "q"}]
        assert watcher.liveness("w1") == "orphaned"
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            watcher.create(new_state("w2"))
        with pytest.raises((StateError, psycopg.Error)):
            watcher.open("w1")
    finally:
        watcher.close()
    assert pg.owner("w1") is None  # the refused open left nothing behind


def test_passwords_never_reach_an_error(pg_server):
    password = pg_server.operator_password
    wrong = pg_server.url.replace(password, password[::-1])
    with pytest.raises(StoreUnavailable) as caught:
        PgStore(wrong).load("x")
    assert password[::-1] not in str(caught.value) and "tether:***@" in str(caught.value)
    bad_option = f"{pg_server.url}?nonsense_option=1"
    with pytest.raises(StoreUnavailable) as caught:
        PgStore(bad_option).load("x")
    assert password not in str(caught.value)
    assert password not in repr(PgStore(pg_server.url))
    assert redact("postgresql://u:s3cret@h:5/db?password=other") == "postgresql://u:***@h:5/db?password=***"


_HOLDER = """
import sys, time
from tether.store.postgres.store import PgStore
store = PgStore(sys.argv[1])
state, handle = store.open(sys.argv[2])
print("held", flush=True)
time.sleep(600)
"""


def test_a_sigkilled_owner_leaves_an_orphan_at_once(pg: PgStore, pg_url: str):
    pg.create(new_state("k1"))
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, pg_url, "k1"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert pg.liveness("k1") == "running"
        with pytest.raises(StateError, match=f"pid {holder.pid}"):
            pg.open("k1")
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        wait_until(lambda: pg.liveness("k1") == "orphaned", "the killed owner's run shows as orphaned")
        owner = pg.owner("k1")
        assert owner is not None and owner.pid == holder.pid and not owner.alive
        _, handle = pg.open("k1")  # and it is adopted
        handle.release()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


_MANY = """
import sys, threading
from tether.store.postgres.store import PgStore
store = PgStore(sys.argv[1], pool_size=3)
ids = sys.argv[2:]
held = []

def drive(run_id):
    state, handle = store.open(run_id)
    state.turns = 1
    handle.save(state)
    held.append(handle)

threads = [threading.Thread(target=drive, args=(r,)) for r in ids]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(len(held), flush=True)
sys.stdin.read()
"""


def _connections(url: str) -> int:
    """The connections the operator role has open to the database now (this one aside)."""
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                            "AND usename = current_user AND pid <> pg_backend_pid()").fetchone()[0]


def test_one_process_holds_many_runs_on_a_few_connections_and_lets_go_of_all_when_killed(pg: PgStore, pg_url: str):
    """Connections per process, not per run: 24 runs taken and saved at once by one process
    with a pool of 3 cost it at most 4 connections (the pool and the holding session). When
    it is killed, every one of its runs is orphaned at once and can be adopted."""
    ids = [f"m{i}" for i in range(24)]
    for run_id in ids:
        pg.create(new_state(run_id))
    before = _connections(pg_url)
    holder = subprocess.Popen([sys.executable, "-c", _MANY, pg_url, *ids], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "24"
        assert _connections(pg_url) - before <= 4
        assert {pg.liveness(r) for r in ids} == {"running"}
        assert {pg.owner(r).pid for r in ids} == {holder.pid}
        assert [pg.load(r).turns for r in ids] == [1] * 24  # every save went through the pool
        with pytest.raises(StateError, match=f"pid {holder.pid}"):
            pg.open("m7")
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        wait_until(lambda: {pg.liveness(r) for r in ids} == {"orphaned"}, "every run of the killed process orphaned")
        state, handle = pg.open("m7")  # adopted
        try:
            state.turns = 2
            handle.save(state)
        finally:
            handle.release()
        assert pg.load("m7").turns == 2
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_a_holding_session_the_server_ended_is_replaced_and_only_untaken_runs_go_on(pg: PgStore, pg_url: str):
    """The server ends the session that holds a process's locks (a failover, an idle timeout,
    an operator): both runs show as orphaned. Another process takes one of them meanwhile.
    At the next save the first process takes the other's lock again and goes on, and its save
    of the taken one is refused in words, writing nothing."""
    from tether.store.protocol import SaveError

    pg.create(new_state("h1"))
    pg.create(new_state("h2"))
    owner = PgStore(pg_url)
    s1, h1 = owner.open("h1")
    s2, h2 = owner.open("h2")
    try:
        with pg._conn() as conn:
            conn.execute(pg.q("SELECT pg_terminate_backend(backend_pid) FROM {s}.owners WHERE run_id = 'h1'"))
        wait_until(lambda: pg.liveness("h1") == pg.liveness("h2") == "orphaned", "both runs orphaned")
        _, thief = pg.open("h2")
        try:
            s1.turns = 1
            h1.save(s1)
            assert pg.liveness("h1") == "running" and pg.load("h1").turns == 1
            s2.turns = 1
            with pytest.raises(SaveError, match="another process took the run meanwhile"):
                h2.save(s2)
            assert pg.load("h2").turns == 0 and pg.owner("h2").alive
        finally:
            thief.release()
    finally:
        h1.release()
        h2.release()
        owner.close()


def test_a_second_open_of_a_run_this_process_holds_is_refused(pg: PgStore):
    """The holding session's locks are re-entrant; the store refuses a second open of a run it
    holds all the same, and the run is free again once let go of."""
    pg.create(new_state("r1"))
    _, first = pg.open("r1")
    try:
        with pytest.raises(StateError, match="already being run"):
            pg.open("r1")
    finally:
        first.release()
    assert pg.liveness("r1") == "orphaned"
    _, again = pg.open("r1")
    again.release()


async def test_no_blocking_call_on_the_event_loop_while_the_harness_runs(pg: PgStore, tmp_path: Path, monkeypatch):
    on_loop: list[str] = []
    loop_thread = threading.get_ident()

    def watch(cls: type, name: str) -> None:
        original = getattr(cls, name)

        def wrapped(self, *args, **kwargs):
            if threading.get_ident() == loop_thread:
                on_loop.append(f"{cls.__name__}.{name}: {str(args[0])[:60] if args else ''}")
            return original(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, wrapped)

    for cls, name in ((psycopg.Connection, "execute"), (psycopg.Cursor, "execute"),
                      (psycopg.Cursor, "executemany")):
        watch(cls, name)
    import tether.store.postgres.connection as module

    connect = module.connect

    def connecting(url, session):
        if threading.get_ident() == loop_thread:
            on_loop.append("connect")
        return connect(url, session)

    monkeypatch.setattr(module, "connect", connecting)
    async with Harness(workspace=tmp_path / "ws", store=pg, agent_sets=(DEMO,)) as harness:
        state = await asyncio.to_thread(harness.new_run, "destructive")  # the caller's call, made off the loop
        waiting = (await harness.run(state.run_id)).state
        assert waiting.status is Status.INTERRUPTED
        done = (await harness.approve(state.run_id)).state
    assert done.status is Status.COMPLETED
    assert on_loop == []


def test_an_owner_whose_token_was_taken_cannot_save(pg: PgStore):
    """The fence behind the lock: were a second owner ever let in (a session replaced behind
    the first one's back), the first one's saves are refused and write nothing."""
    from tether.store.protocol import SaveError

    pg.create(new_state("f1"))
    state, handle = pg.open("f1")
    try:
        with pg._conn() as conn:
            conn.execute(pg.q("UPDATE {s}.runs SET owner_token = 'someone-else' WHERE run_id = 'f1'"))
        state.messages.append({"role": "assistant", "content": "late"})
        with pytest.raises(SaveError, match="taken it over"):
            handle.save(state)
    finally:
        handle.release()
    assert pg.load("f1").messages == [{"role": "user", "content": "q"}]


async def test_an_operation_cancelled_while_it_opens_the_run_lets_go_of_it(pg: PgStore, monkeypatch):
    from tether.store.hold import open_run

    pg.create(new_state("c1"))
    handles = []
    original = PgStore.open

    def recording_open(self, run_id, **kw):
        state, handle = original(self, run_id, **kw)
        handles.append(handle)
        return state, handle

    monkeypatch.setattr(PgStore, "open", recording_open)
    opening = asyncio.ensure_future(open_run(pg, "c1"))
    await asyncio.sleep(0)  # the open has started in its thread
    opening.cancel()
    with pytest.raises(asyncio.CancelledError):
        await opening
    await asyncio.to_thread(wait_until, lambda: handles and handles[0]._released, "the cancelled open's hold is let go of")
    assert pg.owner("c1") is None and pg.liveness("c1") == "orphaned"

"""The console on a PostgreSQL store: every run, whoever runs it, live; Stop and decisions
reaching the process that holds a run; a read-only role that watches and is refused in
words; a URL's password that never reaches the screen.

A real server (tests/pg.py); the runs of other processes are real ``python -m tether.tui.cli
run ... --store URL`` processes. Every wait is on a condition under a generous cap; nothing
asserts on timing.
"""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tether.store.postgres.store import PgStore
from tether.vocab.state import Cancelled, RunState, Status
from tether.tui.app import TetherApp
from tether.tui.run_actions import STOP_REASON
from tether.tui.screens.decision import ApproveDialog
from tests.support import (
    SIZE,
    children_of,
    ended,
    finish,
    header,
    notices,
    open_armed,
    reaped,
    shown,
    still_console,
    transcript,
    wait_for,
)

CAP_S = 60.0


def console(tmp_path: Path, url: str, **kw: Any) -> TetherApp:
    return still_console(store=PgStore(url), workspace=tmp_path / "workspace", **kw)


async def spawn(url: str, *args: str) -> asyncio.subprocess.Process:
    """``tether ARGS --store URL``, another process."""
    return await asyncio.create_subprocess_exec(sys.executable, "-m", "tether.tui.cli", *args, "--store", url,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


def new_state(run_id: str, task: str = "count the archive") -> RunState:
    return RunState(run_id=run_id, model="slow", messages=[{"role": "user", "content": task}])


@pytest.fixture
def on_loop(monkeypatch) -> list[str]:
    """The psycopg calls made on the event loop's thread (there must be none: the console
    reads a network store from worker threads)."""
    import psycopg

    calls: list[str] = []
    loop_thread = threading.get_ident()

    def watch(cls: type, name: str) -> None:
        original = getattr(cls, name)

        def wrapped(self, *args, **kwargs):
            if threading.get_ident() == loop_thread:
                calls.append(f"{cls.__name__}.{name}: {str(args[0])[:80] if args else ''}")
            return original(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, wrapped)

    for cls, name in ((psycopg.Connection, "execute"), (psycopg.Cursor, "execute"),
                      (psycopg.Cursor, "executemany")):
        watch(cls, name)
    return calls


async def test_the_console_lists_a_postgresql_store_without_showing_its_password(pg: PgStore, pg_url: str,
                                                                                pg_server, tmp_path: Path):
    pg.create(new_state("listed-1"))
    app = console(tmp_path, pg_url)
    async with app.run_test(size=SIZE) as pilot:
        await app.store_ready()
        await wait_for(pilot, lambda: app.selected == "listed-1", "the listed run to be selected")
        await wait_for(pilot, lambda: "count the archive" in transcript(app), "its task, loaded off the loop")
        await pilot.pause()
        screen = shown(app)
        assert f"tether@127.0.0.1:{pg_server.port}/tether" in screen  # where the console is, without the password
        assert pg_server.operator_password not in screen
        assert app.model.refusal is None  # the operator may operate
        await finish(pilot, app)


async def test_a_run_of_another_process_is_followed_and_stopped_over_postgresql(pg: PgStore, pg_url: str,
                                                                               pg_server, tmp_path: Path,
                                                                               on_loop: list[str]):
    app = console(tmp_path, pg_url, operator="alice")
    said = notices(app)
    async with app.run_test(size=SIZE) as pilot:
        await app.store_ready()
        run = await spawn(pg_url, "run", "slow", "--run-id", "pg-s1", "--workspace", str(tmp_path / "w"))
        async with reaped(run):
            await wait_for(pilot, lambda: "pg-s1" in app.states, "the other process's run to be listed", CAP_S)
            app.select("pg-s1")
            await wait_for(pilot, lambda: app.badge_key("pg-s1") == "running", "it to show as running", CAP_S)
            await wait_for(pilot, lambda: "run by pid" in header(app), "who runs it, in the header", CAP_S)
            assert f"pid {run.pid}@" in header(app)
            await wait_for(pilot, lambda: any("run_started" in line or "started" in line
                                              for line in app.trace_lines("pg-s1")),
                           "the run's trace, read from the store", CAP_S)
            assert app.check_action("stop", ()) is True
            assert app.check_action("resume", ()) is None  # another process holds it
            await pilot.press("s")
            code, out = await ended(run)
        assert code == 5, out
        await wait_for(pilot, lambda: app.states["pg-s1"].status is Status.INTERRUPTED, "the stopped state", CAP_S)
        assert app.states["pg-s1"].interruption == Cancelled(STOP_REASON, "alice")
        await wait_for(pilot, lambda: any("pg-s1 stops now" in s for s in said), "the reply's words", CAP_S)
        await wait_for(pilot, lambda: app.check_action("stop", ()) is None, "Stop to be greyed out", CAP_S)
        app.show_events()
        await pilot.pause()
        assert "stopped by alice" in header(app)
        assert pg_server.operator_password not in shown(app)
        await finish(pilot, app)
    assert on_loop == []  # every read of the store was made off the event loop
    assert children_of(os.getpid()) == []


async def test_a_process_waiting_for_a_decision_is_approved_from_a_console_on_postgresql(
        pg: PgStore, pg_url: str, tmp_path: Path):
    app = console(tmp_path, pg_url, operator="bob")
    said = notices(app)
    async with app.run_test(size=SIZE) as pilot:
        await app.store_ready()
        run = await spawn(pg_url, "run", "destructive", "--run-id", "pg-d1", "--wait-for-decision",
                          "--workspace", str(tmp_path / "w"))
        async with reaped(run):
            await wait_for(pilot, lambda: [p.run_id for p in app.pending_approvals()] == ["pg-d1"],
                           "the other process's approval to be pending", CAP_S)
            app.select("pg-d1")
            await wait_for(pilot, lambda: app.model.waits_in_process("pg-d1"), "it to wait in its process", CAP_S)
            assert app.check_action("approve", ()) is True
            await open_armed(pilot, app, "a", ApproveDialog)
            await pilot.press(*"fine")
            await pilot.press("enter")
            code, out = await ended(run)
        assert code == 0, out
        await wait_for(pilot, lambda: app.states["pg-d1"].status is Status.COMPLETED, "the completed state", CAP_S)
        await wait_for(pilot, lambda: any("approved delete_file" in s for s in said), "the process's answer", CAP_S)
        assert not app.active  # the process that held the run went on with it, not the console
        decision = app.states["pg-d1"].approvals["call_1_0"]
        assert (decision.verdict, decision.by) == ("approved", "bob")
        await finish(pilot, app)


async def test_a_read_only_console_watches_and_is_refused_in_words(pg: PgStore, pg_url: str, pg_server,
                                                                    tmp_path: Path):
    app = console(tmp_path, pg_server.watcher_url)
    said = notices(app)
    async with app.run_test(size=SIZE) as pilot:
        await app.store_ready()
        run = await spawn(pg_url, "run", "destructive", "--run-id", "pg-r1", "--wait-for-decision",
                          "--workspace", str(tmp_path / "w"))
        try:
            await wait_for(pilot, lambda: app.model.waits_in_process("pg-r1"), "the waiting process, watched", CAP_S)
            app.select("pg-r1")
            assert app.model.refusal is not None and "tether_watch" in app.model.refusal
            for key, what in (("a", "Approve"), ("r", "Reject"), ("s", "Stop"), ("n", "New run")):
                await pilot.press(key)
                await wait_for(pilot, lambda what=what: any(s.startswith(f"{what}: refused") for s in said),
                               f"{what} to be refused in words")
                assert not isinstance(app.screen, ApproveDialog)
            assert all("may only read the store" in s for s in said if "refused" in s)
            await pilot.pause()
            screen = shown(app)
            assert "read-only ·" in screen and "tether_watch@127.0.0.1" in screen
            assert pg_server.watcher_password not in screen
        finally:
            run.kill()
            await run.wait()
        st = pg.load("pg-r1")
        assert st.approvals == {} and not isinstance(st.interruption, Cancelled)  # nothing was changed
        assert pg.control_read("pg-r1", 0) == []
        assert not app.active
        await finish(pilot, app)


async def test_queued_runs_and_the_queue_depth_are_shown(pg: PgStore, pg_url: str, tmp_path: Path, monkeypatch):
    from tether.workers import view

    pg.create(new_state("queued-1"))
    pg.create(new_state("queued-2"))
    monkeypatch.setattr(view, "queue_view", lambda store: view.QueueView(2, frozenset({"queued-1", "queued-2"})))
    app = console(tmp_path, pg_url)
    async with app.run_test(size=SIZE) as pilot:
        await app.store_ready()
        await wait_for(pilot, lambda: app.model.queue is not None and "queued-2" in app.states, "the queue")
        app.select("queued-1")
        app.show_events()
        await pilot.pause()
        assert app.badge_key("queued-1") == "queued"
        assert app.check_action("resume", ()) is None  # a worker's to start, not the console's
        screen = shown(app)
        assert "2 queued" in screen and "waiting for a worker" in header(app)
        await finish(pilot, app)


def test_a_store_the_console_cannot_reach_is_said_before_it_opens_without_the_password(pg_server, capsys):
    from tether.tui.cli import main

    password = pg_server.operator_password
    wrong = pg_server.url.replace(password, password[::-1])
    assert main(["console", "--store", wrong]) == 2
    err = capsys.readouterr().err
    assert "tether: error:" in err and "tether:***@127.0.0.1" in err
    assert password[::-1] not in err and password not in err


async def test_a_console_opened_after_a_process_began_waiting_sees_who_holds_it(pg: PgStore, pg_url: str,
                                                                                 tmp_path: Path):
    run = await spawn(pg_url, "run", "destructive", "--run-id", "pg-late", "--wait-for-decision",
                      "--workspace", str(tmp_path / "w"))
    try:
        for _ in range(600):  # until it waits (a condition, under a cap)
            if await asyncio.to_thread(lambda: pg.exists("pg-late") and pg.load("pg-late").interruption is not None
                                       and bool(pg.owner("pg-late") and pg.owner("pg-late").alive)):
                break
            await asyncio.sleep(0.1)
        app = console(tmp_path, pg_url)
        async with app.run_test(size=SIZE) as pilot:
            await app.store_ready()
            await wait_for(pilot, lambda: app.model.waits_in_process("pg-late"), "the waiting process, seen", CAP_S)
            app.select("pg-late")
            await wait_for(pilot, lambda: f"run by pid {run.pid}@" in header(app), "who holds it", CAP_S)
            assert app.model.waits_in_process("pg-late")
            await finish(pilot, app)
    finally:
        run.kill()
        await run.wait()


async def test_a_new_run_from_a_console_on_postgresql_is_saved_and_run_off_the_loop(
        pg: PgStore, pg_url: str, tmp_path: Path, on_loop: list[str]):
    from textual.widgets import Input, Select

    from tether.tui.screens.new_run import NewRunDialog

    app = console(tmp_path, pg_url)
    async with app.run_test(size=SIZE) as pilot:
        await app.store_ready()
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, NewRunDialog), "the new-run dialog")
        app.screen.query_one("#agent", Select).value = ("demo", "plan")
        app.screen.query_one("#max-turns", Input).focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, NewRunDialog), "the dialog to start the run")
        await wait_for(pilot, lambda: len(app.states) == 1 and not app.active
                       and next(iter(app.states.values())).status is Status.COMPLETED, "the run, done", CAP_S)
        [rid] = list(app.states)
        assert app.selected == rid and app.badge_key(rid) == "completed"
        await finish(pilot, app)
    assert on_loop == []  # created, run and saved from worker threads
    assert (await asyncio.to_thread(pg.load, rid)).status is Status.COMPLETED


async def test_the_console_follows_a_run_across_a_restart_of_postgresql(tmp_path: Path):
    from tests import pg as pgserver
    from tests.support import TURNS

    with pgserver.own_server() as server:
        app = console(tmp_path, server.url)
        said = notices(app)
        async with app.run_test(size=SIZE) as pilot:
            await app.store_ready()
            run = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "tether.tui.cli", "run", "runaway", "--run-id", "pg-restart", "--latency-ms", "100",
                "--max-turns", str(TURNS), "--store", server.url, "--workspace", str(tmp_path / "w"),
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            async with reaped(run):
                await wait_for(pilot, lambda: "pg-restart" in app.states and app.states["pg-restart"].turns >= 2,
                               "the run, followed", CAP_S)
                await asyncio.to_thread(server.restart)  # a fast shutdown, then the same server again
                await wait_for(pilot, lambda: any("lost the store" in s for s in said), "the loss, in words", CAP_S)
                await wait_for(pilot, lambda: any("again" in s for s in said), "the store, back", CAP_S)
                code, out = await ended(run)
            assert code == 3, out  # the turn cap: the run went on after the restart
            await wait_for(pilot, lambda: app.states["pg-restart"].status is Status.MAX_TURNS_EXCEEDED
                           and app.states["pg-restart"].turns == TURNS, "the run's end, followed", CAP_S)
            assert server.operator_password not in shown(app)
            await finish(pilot, app)


async def test_a_run_nobody_holds_is_approved_in_a_console_on_postgresql(pg: PgStore, pg_url: str, tmp_path: Path,
                                                                         on_loop: list[str]):
    app = console(tmp_path, pg_url, operator="cy")
    async with app.run_test(size=SIZE) as pilot:
        await app.store_ready()
        run = await spawn(pg_url, "run", "destructive", "--run-id", "pg-w1", "--workspace", str(tmp_path / "w"))
        code, out = await ended(run)
        assert code == 5, out  # stopped at the approval, let go of
        await wait_for(pilot, lambda: [p.run_id for p in app.pending_approvals()] == ["pg-w1"], "pending", CAP_S)
        app.select("pg-w1")
        await wait_for(pilot, lambda: not app.model.is_live("pg-w1"), "nobody holding it", CAP_S)
        assert not app.model.held_elsewhere("pg-w1") and not app.model.workers_decision("pg-w1")
        await open_armed(pilot, app, "a", ApproveDialog)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.states["pg-w1"].status is Status.COMPLETED and not app.active,
                       "the console to go on with it to the end", CAP_S)
        assert app.states["pg-w1"].approvals["call_1_0"].by == "cy"
        await finish(pilot, app)
    assert on_loop == []
    assert (await asyncio.to_thread(pg.load, "pg-w1")).status is Status.COMPLETED


async def test_a_late_approval_is_refused_and_a_stop_ends_a_waiting_run_on_postgresql(pg: PgStore, pg_url: str,
                                                                                       tmp_path: Path):
    """Issue 37, items 1 and 8, from a console on PostgreSQL: an approval after the deadline
    of a run nobody holds is refused in words (the deadline stops the run); a Stop of a run
    whose process waits for a decision ends it, its call declined as the operator's."""
    import time

    from tether.vocab.state import NeedsApproval

    app = console(tmp_path, pg_url, operator="bob", grace_s=0)
    said = notices(app)
    async with app.run_test(size=SIZE) as pilot:
        await app.store_ready()
        run = await spawn(pg_url, "run", "destructive", "--run-id", "pg-late", "--decision-deadline", "1s",
                          "--on-deadline", "stop", "--workspace", str(tmp_path / "w"))
        code, out = await ended(run)
        assert code == 5, out
        await wait_for(pilot, lambda: [p.run_id for p in app.pending_approvals()] == ["pg-late"], "pending", CAP_S)
        waiting = app.states["pg-late"].interruption
        assert isinstance(waiting, NeedsApproval) and waiting.deadline_at is not None
        await wait_for(pilot, lambda: time.time() > waiting.deadline_at, "the deadline to pass", CAP_S)
        app.select("pg-late")
        await open_armed(pilot, app, "a", ApproveDialog)
        await pilot.press("enter")
        await wait_for(pilot, lambda: any("too late: the decision deadline of delete_file" in s for s in said),
                       "the refusal's words", CAP_S)
        await wait_for(pilot, lambda: isinstance(app.states["pg-late"].interruption, Cancelled), "the stop", CAP_S)
        assert app.states["pg-late"].approvals["call_1_0"].by == "deadline"
        assert (tmp_path / "w" / "access.log").exists()

        run = await spawn(pg_url, "run", "destructive", "--run-id", "pg-stop", "--wait-for-decision",
                          "--workspace", str(tmp_path / "w"))
        async with reaped(run):
            await wait_for(pilot, lambda: app.model.waits_in_process("pg-stop"), "the waiting process", CAP_S)
            app.select("pg-stop")
            await pilot.press("s")
            code, out = await ended(run)
        assert code == 5, out
        await wait_for(pilot, lambda: app.states["pg-stop"].interruption == Cancelled(STOP_REASON, "bob"),
                       "the stopped run", CAP_S)
        decision = app.states["pg-stop"].approvals["call_1_0"]
        assert (decision.verdict, decision.by) == ("rejected", "bob")
        assert app.pending_approvals() == []
        await finish(pilot, app)

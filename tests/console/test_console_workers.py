"""The console on a store that queue workers serve (``tether submit``, ``tether worker``):
the queue's depth and its runs as ``queued``, which worker runs what, and Stop and a
decision reaching the worker.

Real workers (tests/workerproc.py) on a real PostgreSQL; every wait is on a condition
under a generous cap.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.store.postgres.store import PgStore
from tether.demo.provider import create_app
from tether.vocab.state import Cancelled, Status
from tether.tui.run_actions import STOP_REASON
from tests.campaign.server import CountingApp, serving
from tests.workerproc import Fleet, clean_slate
from tether.tui.screens.decision import ApproveDialog
from tests.support import SIZE, finish, header, notices, open_armed, shown, still_console, wait_for

CAP_S = 90.0


@pytest.fixture(scope="module")
def provider() -> Iterator[str]:
    with serving(CountingApp(create_app())) as base:
        yield base


@pytest.fixture
def fleet(pg_url: str, tmp_path: Path) -> Iterator[Fleet]:
    clean_slate(pg_url)
    with Fleet(pg_url, tmp_path / "fleet") as f:
        yield f


async def test_the_console_shows_the_queue_and_which_worker_runs_what_and_stops_it(
        fleet: Fleet, provider: str, pg_url: str, pg_server, tmp_path: Path):
    app = still_console(store=PgStore(pg_url), workspace=tmp_path / "workspace", operator="alice")
    said = notices(app)
    async with app.run_test(size=SIZE) as pilot:
        await app.store_ready()
        first = await asyncio.to_thread(fleet.submit, "slow", "--base-url", f"{provider}/one/v1")
        second = await asyncio.to_thread(fleet.submit, "slow", "--base-url", f"{provider}/two/v1")
        await wait_for(pilot, lambda: all(r in app.states and app.badge_key(r) == "queued" for r in (first, second)),
                       "both runs listed as queued", CAP_S)
        await wait_for(pilot, lambda: "2 queued" in shown(app), "the queue's depth in the header", CAP_S)
        app.select(first)
        assert app.check_action("resume", ()) is None  # a worker's to start, not this console's
        w = await asyncio.to_thread(fleet.start)
        await wait_for(pilot, lambda: app.badge_key(first) == "running" and app.model.runner(first) == w.executor_id,
                       "the worker to run the first run, named in its row", CAP_S)
        await wait_for(pilot, lambda: f"run by worker {w.executor_id}" in header(app), "the worker, in the header",
                       CAP_S)
        assert app.badge_key(second) == "queued"  # concurrency 1: it waits its turn
        await wait_for(pilot, lambda: app.check_action("stop", ()) is True, "Stop to apply", CAP_S)
        await pilot.press("s")
        await wait_for(pilot, lambda: app.states[first].status is Status.INTERRUPTED, "the stopped state", CAP_S)
        assert app.states[first].interruption == Cancelled(STOP_REASON, "alice")
        await wait_for(pilot, lambda: any(f"{first} stops now" in s for s in said), "the worker's reply", CAP_S)
        await wait_for(pilot, lambda: app.states.get(second) is not None
                       and app.states[second].status is Status.COMPLETED, "the next queued run, run to its end",
                       CAP_S)
        await wait_for(pilot, lambda: "0 queued" in shown(app), "an empty queue", CAP_S)
        assert pg_server.operator_password not in shown(app)
        await finish(pilot, app)


async def test_a_decision_from_the_console_reaches_the_workers_waiting_workflow(
        fleet: Fleet, provider: str, pg_url: str, tmp_path: Path):
    app = still_console(store=PgStore(pg_url), workspace=tmp_path / "workspace", operator="bob")
    said = notices(app)
    async with app.run_test(size=SIZE) as pilot:
        await app.store_ready()
        w = await asyncio.to_thread(fleet.start)
        rid = await asyncio.to_thread(fleet.submit, "destructive", "--base-url", f"{provider}/decide/v1")
        await wait_for(pilot, lambda: [p.run_id for p in app.pending_approvals()] == [rid], "the approval", CAP_S)
        app.select(rid)
        await wait_for(pilot, lambda: app.model.workers_decision(rid), "the worker's workflow, waiting",
                       CAP_S)
        app.show_events()
        await wait_for(pilot, lambda: f"waits in worker {w.executor_id}'s workflow" in header(app),
                       "the header to name the worker's workflow", CAP_S)
        await open_armed(pilot, app, "a", ApproveDialog)
        await pilot.press(*"fine")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.states[rid].status is Status.COMPLETED, "the run, completed", CAP_S)
        assert any("the worker queue goes on" in s for s in said)
        decision = app.states[rid].approvals["call_1_0"]
        assert (decision.verdict, decision.by) == ("approved", "bob")
        assert not app.active  # the worker went on with the run, not the console
        await finish(pilot, app)

"""A paused openai-agents run goes on on a worker (``tether worker``), on PostgreSQL: its
program is killed while a call waits; ``tether reject`` from another process hands the run
and the decision to the worker queue; a worker rebuilds the agent from its reference, records
the decision, and runs it to the end, the model reading the operator's words.

Uses the worker fixtures (tests/workerproc.py) and the scripted provider on loopback."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tether.integrations import on_workers
from tether.approvals.decisions import declined_words
from tether.store.postgres.store import PgStore
from tether.demo.provider.scenarios import TICKET_KEPT
from tether.vocab.state import NeedsApproval, Status
from tests.integrations.programs import Recording, environment, finished, line_with
from tests.integrations.test_openai_agents import BOT, CALL
from tests.workerproc import Fleet, clean_slate, wait_for

CAP_S = 120.0

START = ("import asyncio, os, support_bot\n"
         "from tether.store.spec import open_store\n"
         "from tether.harness import Harness\n"
         "from tether.integrations import Supervision\n"
         "from tether.integrations.openai_agents import run\n"
         "from agents import RunConfig\n"
         "async def main():\n"
         "    async with Harness(store=open_store(os.environ['TETHER_STORE'])) as harness:\n"
         "        await run(harness, 'support_bot:agent', 'Close ticket 42: a duplicate of 17.',\n"
         "                  supervision=Supervision(run_id='oa-w', sinks=[support_bot.said]),\n"
         "                  run_config=RunConfig(tracing_disabled=True))\n"
         "asyncio.run(main())\n")


@pytest.fixture
def store(pg_url: str) -> Iterator[PgStore]:
    clean_slate(pg_url)
    pg = PgStore(pg_url)
    try:
        yield pg
    finally:
        pg.close()


@pytest.fixture
def fleet(pg_url: str, store: PgStore, tmp_path: Path) -> Iterator[Fleet]:
    with Fleet(pg_url, tmp_path / "fleet") as f:
        yield f


async def test_a_decision_on_a_paused_run_whose_program_is_gone_goes_on_on_a_worker(
        fleet: Fleet, store: PgStore, pg_url: str, provider: Recording, tmp_path: Path):
    bot = tmp_path / "bot"
    bot.mkdir()
    (bot / "support_bot.py").write_text(BOT)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", START, cwd=bot,
                                                env=environment(bot, BOT_BASE_URL=provider.url, TETHER_STORE=pg_url),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        assert await line_with(proc, "waiting") == f"waiting {CALL}"
        await asyncio.to_thread(wait_for, lambda: on_workers.paused(store.load("oa-w")), "the paused state saved")
        proc.kill()  # the program is gone; its run waits, its SDK state saved with it
    finally:
        await finished(proc)
    worker = await asyncio.to_thread(fleet.start, pythonpath=[str(bot)],
                                     env={"BOT_BASE_URL": provider.url, "OPENAI_AGENTS_DISABLE_TRACING": "1"})
    done = await asyncio.to_thread(fleet.tether, "reject", "oa-w", "--reason", "not a duplicate", "--as", "erin",
                                   "--store", pg_url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the worker queue goes on with run oa-w" in done.stdout, done.stdout

    def ended() -> bool:
        state = store.load("oa-w")
        owner = store.owner("oa-w")
        return state.status is not Status.INTERRUPTED and not (owner is not None and owner.alive)

    await asyncio.to_thread(wait_for, ended, "a worker to run the rest of it", CAP_S)
    words = declined_words("not a duplicate", "erin")
    state = store.load("oa-w")
    assert state.status is Status.COMPLETED, (state.status, state.error, worker.text()[-3000:])
    assert state.answer == TICKET_KEPT.format(said=words)
    assert provider.tool_messages(1) == [words]  # the next request carries the operator's words
    assert (state.approvals[CALL].verdict, state.approvals[CALL].by) == ("rejected", "erin")
    started = [r["pid"] for r in store.read_trace("oa-w") if r["kind"] == "run_started"]
    assert started[-1] == worker.pid  # the worker went on with it, not the deciding process


async def test_without_a_live_worker_the_deciding_process_goes_on(store: PgStore, pg_url: str, provider: Recording,
                                                                  tmp_path: Path):
    bot = tmp_path / "bot"
    bot.mkdir()
    (bot / "support_bot.py").write_text(BOT)
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", START, cwd=bot,
                                                env=environment(bot, BOT_BASE_URL=provider.url, TETHER_STORE=pg_url),
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        await line_with(proc, "waiting")
        await asyncio.to_thread(wait_for, lambda: isinstance(store.load("oa-w").interruption, NeedsApproval)
                                and on_workers.paused(store.load("oa-w")), "the paused state saved")
        proc.kill()
    finally:
        await finished(proc)
    command = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tether.tui.cli", "approve", "oa-w", "--as", "erin", "--store", pg_url, cwd=bot,
        env=environment(bot, BOT_BASE_URL=provider.url), stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT)
    said, _ = await asyncio.wait_for(command.communicate(), CAP_S)
    assert command.returncode == 0, said.decode()
    assert store.load("oa-w").status is Status.COMPLETED  # went on here: no worker serves the store

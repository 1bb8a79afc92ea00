"""Stop and decisions across processes (and hosts) over PostgreSQL: the owner of a run
listens on the database (its control address ``pg:<uuid>``), a request is appended and
notified in one transaction, and the answer comes back on the requester's reply channel.
A read-only role may watch and is refused Stop, approve, reject and run in words.

Every run is a real ``tether`` process on a real server (tests/pg.py); the watcher's commands
beside a real watch and a real refusal run by the CLI's main in the test's process (cli_here)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path


from tether.store.postgres.store import PgStore
from tether.vocab.state import Cancelled, NeedsApproval, Status

from tests.support import cli_here_async, exited

CAP_S = 60.0


def env(tmp_path: Path) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != "TETHER_STORE"}
    return {**out, "TETHER_HOME": str(tmp_path / "home")}


async def spawn(tmp_path: Path, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(sys.executable, "-m", "tether.tui.cli", *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                                                env=env(tmp_path), cwd=tmp_path)


async def tether(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    return await exited(await spawn(tmp_path, *args), CAP_S)


async def here(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """:func:`tether` by the CLI's main in this process (the same environment and folder)."""
    done = await cli_here_async(*args, env=env(tmp_path), cwd=tmp_path)
    return done.returncode, done.stdout, done.stderr


async def until(pg: PgStore, run_id: str, predicate, what: str) -> None:
    async def scan() -> None:
        while not (await asyncio.to_thread(pg.exists, run_id)
                   and any(predicate(r) for r in await asyncio.to_thread(lambda: list(pg.read_trace(run_id))))):
            await asyncio.sleep(0.05)
    try:
        await asyncio.wait_for(scan(), CAP_S)
    except TimeoutError:
        raise AssertionError(f"never saw {what} in {run_id}'s trace") from None


async def test_stop_from_another_process_reaches_inside_the_tool_over_the_database(pg: PgStore, pg_url: str,
                                                                                  tmp_path: Path):
    run = await spawn(tmp_path, "run", "slow", "--run-id", "s1", "--json", "--store", pg_url)
    try:
        await until(pg, "s1", lambda r: r["kind"] == "tool_progress", "scan_archive's progress")
        owner = await asyncio.to_thread(pg.owner, "s1")
        assert owner is not None and owner.alive and owner.control.startswith("pg:")
        code, out, err = await tether(tmp_path, "stop", "s1", "--reason", "enough scanning", "--as", "alice",
                                      "--store", pg_url)
        assert code == 0, err
        assert f"run s1 stops now (pid {run.pid})" in out
    finally:
        code, out, err = await exited(run, CAP_S)
    assert code == 5, err
    assert json.loads(out)["interruption"] == {"type": "cancelled", "reason": "enough scanning", "by": "alice"}
    state = await asyncio.to_thread(pg.load, "s1")
    assert state.interruption == Cancelled("enough scanning", "alice")
    cut = state.messages[-1]["content"]
    assert cut.startswith("cancelled by the operator after") and "the scan_archive call did not finish" in cut


async def test_a_waiting_run_is_decided_from_another_process_over_the_database(pg: PgStore, pg_url: str,
                                                                              tmp_path: Path):
    run = await spawn(tmp_path, "run", "destructive", "--run-id", "d1", "--wait-for-decision", "--json",
                      "--store", pg_url)
    try:
        await until(pg, "d1", lambda r: r["kind"] == "run_stopped", "the stop at the approval")
        assert isinstance((await asyncio.to_thread(pg.load, "d1")).interruption, NeedsApproval)
        code, out, err = await tether(tmp_path, "approve", "d1", "--note", "disk is full", "--as", "bob",
                                      "--store", pg_url)
        assert code == 0, err
        assert "approved delete_file" in out and f"(pid {run.pid}) goes on" in out
    finally:
        code, out, err = await exited(run, CAP_S)
    assert code == 0, err
    state = await asyncio.to_thread(pg.load, "d1")
    assert state.status is Status.COMPLETED
    assert [(d.verdict, d.by, d.used) for d in state.approvals.values()] == [("approved", "bob", True)]


async def test_two_deciders_over_the_database_make_one_decision_and_the_other_is_told(pg: PgStore, pg_url: str,
                                                                                     tmp_path: Path):
    run = await spawn(tmp_path, "run", "destructive", "--run-id", "d2", "--wait-for-decision", "--store", pg_url)
    try:
        await until(pg, "d2", lambda r: r["kind"] == "run_stopped", "the stop at the approval")
        first, second = await asyncio.gather(
            tether(tmp_path, "reject", "d2", "--reason", "keep it", "--as", "erin", "--store", pg_url),
            tether(tmp_path, "approve", "d2", "--as", "frank", "--store", pg_url))
    finally:
        code, _, err = await exited(run, CAP_S)
    assert code == 0, err
    codes = sorted([first[0], second[0]])
    assert codes == [0, 2], (first, second)
    loser = first if first[0] == 2 else second
    # Told in words: the decision was taken, or (when the winner's run already finished) the run ended.
    assert "already decided" in loser[2] or "d2 had already stopped" in loser[2], loser
    state = await asyncio.to_thread(pg.load, "d2")
    assert len(state.approvals) == 1


async def test_the_watcher_role_watches_and_is_refused_every_change_in_words(pg: PgStore, pg_server,
                                                                            tmp_path: Path):
    url, watcher = pg_server.url, pg_server.watcher_url
    assert (await tether(tmp_path, "run", "destructive", "--run-id", "w1", "--store", url))[0] == 5
    before = await asyncio.to_thread(pg.load, "w1")
    code, out, _ = await here(tmp_path, "runs", "--store", watcher)
    assert code == 0 and out.startswith("w1") and "waits for approval" in out
    assert (await here(tmp_path, "show", "w1", "--store", watcher))[0] == 0
    assert (await here(tmp_path, "trace", "w1", "--store", watcher))[0] == 0
    code, out, _ = await tether(tmp_path, "watch", "w1", "--store", watcher)
    assert code == 0 and "tether approve w1" in out
    for args in (("stop", "w1"), ("approve", "w1"), ("reject", "w1"), ("resume", "w1"), ("run", "plan")):
        code, out, err = await (tether if args[0] == "stop" else here)(tmp_path, *args, "--store", watcher)
        assert code == 2, (args, err)
        assert err.startswith("tether: error: this store's role tether_watch may only watch:") and \
            err.count("\n") == 1, err
        assert pg_server.watcher_password not in err
    after = await asyncio.to_thread(pg.load, "w1")
    assert after.to_dict() == before.to_dict() and await asyncio.to_thread(pg.run_ids) == ["w1"]
    with pg._conn() as conn:
        assert conn.execute(pg.q("SELECT count(*) FROM {s}.control")).fetchone()[0] == 0

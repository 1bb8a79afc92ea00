"""PostgreSQL restarted in the middle of a run. A short outage: the owner's save waits for
the server, takes the run's lock again (no one took it meanwhile) and the run goes on. A long
one: the run is given up in words naming the store, stays as it was last saved, and
``tether resume --store`` finishes it. Either way no committed turn is paid twice.

Each test has a server of its own (tests/pg.py), shut down and started again on the same
data dir and port, so the session's server is left alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import pg as pgserver
from tests.support import TURNS

CAP_S = 90.0


@pytest.fixture
def server() -> Iterator[pgserver.PgServer]:
    with pgserver.own_server() as s:
        yield s


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != "TETHER_STORE"}
    return {**out, "TETHER_HOME": str(tmp_path / "home"), **extra}


def turns_in(server: pgserver.PgServer, run_id: str) -> list[int]:
    """The turn numbers the run's committed trace records (read as the superuser)."""
    import psycopg

    with psycopg.connect(server.admin_conninfo, autocommit=True) as conn:
        rows = conn.execute("SELECT record FROM tether.trace WHERE run_id = %s ORDER BY seq", (run_id,)).fetchall()
    return [r[0]["turn"] for r in rows if r[0].get("kind") == "turn"]


def wait_for_turns(server: pgserver.PgServer, run_id: str, n: int) -> None:
    deadline = time.monotonic() + CAP_S
    while True:
        try:
            if len(turns_in(server, run_id)) >= n:
                return
        except Exception:  # the run's rows are not there yet
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} never reached turn {n}")
        time.sleep(0.05)


def start_run(server: pgserver.PgServer, tmp_path: Path, run_id: str, **extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tether.tui.cli", "run", "runaway", "--run-id", run_id,
                             "--latency-ms", "100", "--max-turns", str(TURNS), "--json", "--store", server.url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env=env(tmp_path, **extra))


def test_a_short_restart_and_the_run_goes_on(server: pgserver.PgServer, tmp_path: Path):
    from tether.store.postgres.store import PgStore

    watcher = PgStore(server.watcher_url)
    run = start_run(server, tmp_path, "r1")
    try:
        wait_for_turns(server, "r1", 1)
        assert watcher.liveness("r1") == "running"
        wait_for_turns(server, "r1", 3)
        pgserver._kill(server.process)  # the server goes away...
        time.sleep(2.5)  # ...for a few of the owner's tries
        server.restart()  # and comes back on the same data and port
        out, err = run.communicate(timeout=CAP_S)
        listed = [s.run_id for s in watcher.summaries()]  # its session was ended by the restart
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        watcher.close()
    assert run.returncode == 3, err  # max_turns_exceeded: it went on to its cap
    assert listed == ["r1"]  # a store made before the restart goes on, on a new session
    assert json.loads(out)["turns"] == TURNS
    assert "Traceback" not in err and server.operator_password not in err
    assert "is back; the run goes on" in err and "tether:***@" in err
    assert turns_in(server, "r1") == list(range(1, TURNS + 1))  # every turn once: none paid twice


def test_a_long_outage_gives_the_run_up_in_words_and_resume_finishes_it(server: pgserver.PgServer, tmp_path: Path):
    run = start_run(server, tmp_path, "r2", TETHER_PG_RECONNECT_S="1")
    try:
        wait_for_turns(server, "r2", 3)
        pgserver._kill(server.process)  # gone until the owner has given up
        out, err = run.communicate(timeout=CAP_S)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    assert run.returncode == 1, err
    words = err.strip().splitlines()[-1]
    assert words.startswith("tether: error: could not save run r2:") and "tether:***@127.0.0.1" in words
    assert "tether resume r2 goes on from there" in words
    assert "Traceback" not in err and server.operator_password not in err
    server.restart()
    before = turns_in(server, "r2")
    resumed = subprocess.run([sys.executable, "-m", "tether.tui.cli", "resume", "r2", "--json", "--store", server.url],
                             capture_output=True, text=True, timeout=CAP_S, cwd=tmp_path, env=env(tmp_path))
    assert resumed.returncode == 3, resumed.stderr
    assert json.loads(resumed.stdout)["turns"] == TURNS
    assert turns_in(server, "r2") == list(range(1, TURNS + 1))  # the committed turns were not paid again
    assert before == list(range(1, len(before) + 1))

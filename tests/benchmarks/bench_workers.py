"""Scale-out: queued runs per second for one worker at concurrency 8, 16, 32 and 64, and
four workers at 64, on one PostgreSQL, with what the database carried meanwhile.

``python -m tests.benchmarks.bench_workers [--configs 1x8,4x64] [--runs N] [--waiting N]``: starts its own
durable PostgreSQL (fsync on, ``max_connections = 100``, tests/pg.py) and the scripted
provider over HTTP at 200 ms a reply, as a process of its own (``tether provider``). For
each configuration it starts the workers and waits until they listen, creates the runs of
the ``plan`` task (3 replies, 2 tool calls: 0.6 s of model time a run), then enqueues them
in one burst and times from the first enqueue to the last run's end.

``--waiting N`` runs each configuration twice: as above, then with N runs of ``destructive``
queued first and left waiting for approval, each in its workflow's durable wait, before the
clock starts (``make bench``'s ``waiting``: 2 workers at concurrency 8 beside 1,000 such
runs). The plan runs should go as fast beside them as without them, on no more connections.

Beside runs/s: the share of the ideal (workers × concurrency ÷ 0.6 s a run), the most
connections the server had open at once while the runs ran (``pg_stat_activity``, every
backend of the database: the workers', the bench's own two, the provider has none), and the
commits per second (``pg_stat_database.xact_commit`` over the same span), and the workers'
CPU a run (user and system time from ``/proc``, over the same span): one Python process
runs on one core at most, so 1000 ms over this figure is what one worker can reach.
``--pythonpath DIR`` has the workers import Tether from DIR first, for an A/B against
another commit's tree laid out there (``core/`` as ``tether/``, ``tui/`` as ``tether/tui/``).
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from tests import pg
from tests.workerproc import Fleet, clean_slate, wait_for
from tether.demo.agents import DEMO

LATENCY_MS = 200
RUN_S = 3 * LATENCY_MS / 1000  # a plan run's model time
CONFIGS = [(1, 8), (1, 16), (1, 32), (1, 64), (4, 64)]  # (worker processes, --concurrency)


def runs_for(workers: int, concurrency: int) -> int:
    """Enough runs that each slot takes about five: the start and the tail are a small part."""
    return max(40, 5 * workers * concurrency)


def _provider(port: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tether.tui.cli", "provider", "--port", str(port), "--latency-ms",
                             str(LATENCY_MS), "--until-stdin-closes"], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _done(conn) -> int:  # type: ignore[no-untyped-def]
    return conn.execute("SELECT count(*) FROM dbos.workflow_status WHERE status = 'SUCCESS'").fetchone()[0]


class DbLoad:
    """The database's connections (most at once, sampled every 0.1 s) and commits while a
    configuration runs, read on a connection of its own."""

    def __init__(self, url: str) -> None:
        import psycopg

        self._conn = psycopg.connect(url, autocommit=True)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="bench db sampler", daemon=True)

    def _connections(self) -> int:
        return self._conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                                  ).fetchone()[0]

    def commits(self) -> int:
        return self._conn.execute("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
                                  ).fetchone()[0]

    def _sample(self) -> None:
        while not self._stop.wait(0.1):
            self.peak = max(self.peak, self._connections())

    def __enter__(self) -> DbLoad:
        self.peak = self._connections()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._conn.close()


def cpu_s(pids: list[int]) -> float:
    """CPU seconds (user and system) the processes ``pids`` have used so far."""
    import os

    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def measure(url: str, root: Path, base_url: str, workers: int, concurrency: int, runs: int, waiting: int = 0,
            pythonpath: list[str] | None = None) -> tuple[float, list[str], int, float, float]:
    """Seconds for ``runs`` runs, the runs that did not complete, the most connections at
    once, the commits per second and the workers' CPU a run (ms). With ``waiting``, that
    many runs of ``destructive`` are queued first and left waiting for approval (each in
    its worker's workflow) before the clock starts. ``pythonpath``: the workers import
    Tether from there first (an A/B against another commit's tree)."""
    import psycopg

    from tether.demo import agents as demo
    from tether.workers import database, queue
    from tether.harness import Harness
    from tether.store.postgres.store import PgStore

    clean_slate(url)
    with Fleet(url, root / f"{workers}x{concurrency}-{waiting}") as fleet:
        for _ in range(workers):
            fleet.start("--concurrency", str(concurrency), pythonpath=pythonpath)
        store = PgStore(url)
        harness = Harness(store=store, agent_sets=(DEMO,))
        agent = demo.agent("plan", root / "ws", base_url=base_url)
        states = [harness.create(agent) for _ in range(runs)]
        database.ensure_dbos_schema(store)
        client = database.client(url)
        try:
            if waiting:
                _leave_waiting(store, client, harness, demo.agent("destructive", root / "ws", base_url=base_url),
                               waiting)
            with psycopg.connect(url, autocommit=True) as conn, DbLoad(url) as load:
                before = load.commits()
                pids = [w.process.pid for w in fleet.workers]
                cpu_before = cpu_s(pids)
                started = time.perf_counter()
                for state in states:
                    queue.enqueue(store, state, client)
                wait_for(lambda: _done(conn) >= runs, f"{runs} runs to end", 900, 0.02)
                if waiting:
                    assert _waiting(conn) == waiting, "a waiting run's workflow ended while the others ran"
                seconds = time.perf_counter() - started
                commits = load.commits() - before
                cpu_ms = (cpu_s(pids) - cpu_before) * 1000 / runs
        finally:
            database.close_client(client)
        statuses = [store.load(s.run_id).status.value for s in states]
        store.close()
    bad = [s for s in statuses if s != "completed"]
    return seconds, bad, load.peak, commits / seconds, cpu_ms


def _waiting(conn) -> int:  # type: ignore[no-untyped-def]
    """Workflows waiting for a decision: pending, their run saved as waiting for approval."""
    return conn.execute(
        "SELECT count(*) FROM dbos.workflow_status w JOIN tether.runs r ON r.run_id = w.workflow_uuid "
        "WHERE w.status = 'PENDING' AND r.status = 'interrupted' "
        "AND r.summary -> 'interruption' ->> 'callId' IS NOT NULL").fetchone()[0]


def _leave_waiting(store, client, harness, agent, n: int) -> None:  # type: ignore[no-untyped-def]
    """Queue ``n`` runs that stop for an approval, and wait until every one's workflow waits."""
    import psycopg

    from tether.workers import queue

    for state in [harness.create(agent) for _ in range(n)]:
        queue.enqueue(store, state, client)
    with psycopg.connect(store.spec, autocommit=True) as conn:
        wait_for(lambda: _waiting(conn) >= n, f"{n} runs to wait for approval", 1800, 0.5)


def main(argv: list[str] | None = None) -> list[tuple[str, float, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", help="WORKERSxCONCURRENCY,... (default: 1x8,1x16,1x32,1x64,4x64)")
    parser.add_argument("--runs", type=int, help="runs per configuration (default: 5 per slot, at least 40)")
    parser.add_argument("--waiting", type=int, default=0, metavar="N",
                        help="also each configuration with N runs waiting for approval, queued first")
    parser.add_argument("--pythonpath", metavar="DIR", action="append",
                        help="the workers import Tether from DIR first (another commit's tree, for an A/B)")
    args = parser.parse_args(argv or [])
    configs = CONFIGS if not args.configs else [tuple(int(n) for n in c.split("x")) for c in args.configs.split(",")]
    server = pg.start(durable=True)
    port = pg._free_port()
    provider = _provider(port)
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="tether-bench-workers-") as scratch:
            base_url = f"http://127.0.0.1:{port}/v1"
            wait_for(lambda: _listening(port), "the scripted provider to listen", 30)
            single = None
            print(f"plan runs, scripted provider at {LATENCY_MS} ms a reply ({RUN_S:.1f} s of model time a run), "
                  f"one PostgreSQL (fsync on, max_connections 100); this host has {_cores()} cores")
            print(f"{'workers x concurrency':<22}{'runs':>6}{'seconds':>9}{'runs/s':>9}{'of ideal':>10}"
                  f"{'vs 1x64':>9}{'connections':>13}{'commits/s':>11}{'workers CPU ms/run':>20}")
            for workers, concurrency in configs:
                runs = args.runs or runs_for(workers, concurrency)
                for waiting in sorted({0, args.waiting}):
                    seconds, bad, peak, commits, cpu_ms = measure(server.url, Path(scratch), base_url, workers,
                                                                  concurrency, runs, waiting, args.pythonpath)
                    rate = runs / seconds
                    ideal = workers * concurrency / RUN_S
                    if (workers, concurrency, waiting) == (1, 64, 0):
                        single = rate
                    ratio = f"{rate / single:>8.2f}x" if single else f"{'':>9}"
                    label = f"{workers} x {concurrency}" + (f", {waiting} waiting" if waiting else "")
                    print(f"{label:<22}{runs:>6}{seconds:>9.2f}{rate:>9.2f}{rate / ideal:>9.0%} {ratio}{peak:>13}"
                          f"{commits:>11.0f}{cpu_ms:>20.1f}" + (f"   NOT COMPLETED: {len(bad)}" if bad else ""),
                          flush=True)
                    rows.append((label, rate, rate / ideal))
    finally:
        if provider.poll() is None:
            provider.stdin.close()
            try:
                provider.wait(10)
            except subprocess.TimeoutExpired:
                provider.send_signal(signal.SIGKILL)
                provider.wait()
        server.stop()
    return rows


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0))


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


if __name__ == "__main__":
    main(sys.argv[1:])

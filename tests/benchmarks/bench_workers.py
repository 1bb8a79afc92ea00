"""Scale-out: queued runs per second with 1, 2 and 4 worker processes, and one worker at
concurrency 8, on one PostgreSQL.

``python -m tests.benchmarks.bench_workers``: starts its own durable PostgreSQL (fsync on,
tests/pg.py) and the scripted provider over HTTP at 200 ms a reply, as a process of its own
(``tether provider``). For each configuration it starts the workers and waits until they
listen, creates RUNS runs of the ``plan`` task (3 replies, 2 tool calls), then enqueues them
in one burst and times from the first enqueue to the last run's end. runs/s is RUNS over
that; the ratio is against one worker at concurrency 1 measured in the same process.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests import pg
from tests.workerproc import Fleet, clean_slate, wait_for

RUNS = 40
LATENCY_MS = 200
CONFIGS = [(1, 1), (2, 1), (4, 1), (1, 8)]  # (worker processes, --concurrency)


def _provider(port: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tether.cli", "provider", "--port", str(port), "--latency-ms",
                             str(LATENCY_MS), "--until-stdin-closes"], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _done(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute("SELECT count(*) FROM dbos.workflow_status WHERE status = 'SUCCESS'").fetchone()[0]


def measure(url: str, root: Path, base_url: str, workers: int, concurrency: int) -> tuple[float, list[str]]:
    from tether import demo, worker
    from tether.harness import Harness
    from tether.pgstore import PgStore

    clean_slate(url)
    with Fleet(url, root / f"{workers}x{concurrency}") as fleet:
        for _ in range(workers):
            fleet.start("--concurrency", str(concurrency))
        store = PgStore(url)
        harness = Harness(store=store)
        agent = demo.agent("plan", root / "ws", base_url=base_url)
        states = [harness.create(agent) for _ in range(RUNS)]
        worker.ensure_dbos_schema(url)
        client = worker.client(url)
        try:
            started = time.perf_counter()
            for state in states:
                worker.enqueue(url, state, client)
            wait_for(lambda: _done(url) >= RUNS, f"{RUNS} runs to end", 600, 0.02)
            seconds = time.perf_counter() - started
        finally:
            worker.close_client(client)
        statuses = [store.load(s.run_id).status.value for s in states]
        store.close()
    bad = [s for s in statuses if s != "completed"]
    return seconds, bad


def main() -> list[tuple[str, float, float]]:
    server = pg.start(durable=True)
    port = pg._free_port()
    provider = _provider(port)
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="tether-bench-workers-") as scratch:
            base_url = f"http://127.0.0.1:{port}/v1"
            wait_for(lambda: _listening(port), "the scripted provider to listen", 30)
            baseline = None
            print(f"{RUNS} plan runs, scripted provider at {LATENCY_MS} ms a reply, one PostgreSQL (fsync on)")
            print(f"{'workers x concurrency':<24}{'seconds':>9}{'runs/s':>9}{'ratio':>8}")
            for workers, concurrency in CONFIGS:
                seconds, bad = measure(server.url, Path(scratch), base_url, workers, concurrency)
                rate = RUNS / seconds
                baseline = baseline or rate
                label = f"{workers} x {concurrency}"
                print(f"{label:<24}{seconds:>9.2f}{rate:>9.2f}{rate / baseline:>7.2f}x"
                      + (f"   NOT COMPLETED: {len(bad)}" if bad else ""), flush=True)
                rows.append((label, rate, rate / baseline))
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


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


if __name__ == "__main__":
    main()

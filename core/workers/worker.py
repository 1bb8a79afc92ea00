"""One worker process: DBOS launched with its executor id, the queues of the agents it can
build, its liveness lock and row in the workers table, and the supervisor that keeps them
(heartbeat, recovery of dead workers, notes on runs it cannot take) once a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tether.integrations import on_workers as programs
from tether.vocab.state import StateError
from tether.workers import workflow
from tether.workers.database import (
    _RECOVERIES_TABLE, _WORKERS_TABLE, _db_words, _engine, database, ensure_dbos_schema, pool_size,
)
from tether.workers.gate import _active_here, _install_gate
from tether.workers.names import (
    APP_NAME, APP_VERSION, DBOS_SCHEMA, DEMO_QUEUE, ISOLATED, WORKFLOW, isolated, new_executor_id, queue_for,
)
from tether.workers.recovery import MAX_RECOVERIES, note_unbuildable, recover
from tether.workers.workflow import _registered
from tether.harness import Harness, tether_home
from tether.models.tokens import encoding
from tether.store.owner import set_owner_command
from tether.store.spec import open_store
import json

if TYPE_CHECKING:
    from tether.agents.sets import AgentSet
    from tether.agents.config import Config

log = logging.getLogger("tether.workers.worker")
QUEUE_POLL_S = 0.1  # DBOS polls each queue this often; its default (1 s) would make every start wait
SUPERVISE_S = 1.0  # liveness, recovery and notes: at most once a second
SILENT_S = 3.0
"""A worker is dead when its lock is free *and* its heartbeat (the database's clock) is older
than this: after a database restart every lock is gone at once, and each worker needs a
moment to take its own again; a killed worker is recovered within this long."""
ISOLATED_POLL_S = 0.5


class Superseded(StateError):
    """This worker's lock is held by another process: it was taken for dead (its session was
    lost for longer than :data:`SILENT_S`) and its runs were handed to other workers."""


class Worker:
    """One worker process: DBOS launched with this worker's executor id on the store's
    database, the queues of the agents it can build, its liveness lock, and the harness the
    drive steps use (made on DBOS's event loop, where the workflows run)."""

    def __init__(self, url: str, *, concurrency: int = 1, config: Config | None = None,
                 executor_id: str | None = None, max_recoveries: int = MAX_RECOVERIES,
                 agent_sets: Sequence[AgentSet] = ()) -> None:
        self.url = url
        self.concurrency = concurrency
        self.max_recoveries = max_recoveries
        self.config = config
        self.agent_sets = tuple(agent_sets)
        self.executor_id = executor_id or new_executor_id()
        self.store = open_store(url, pool_size=pool_size(concurrency))
        self.tables = database(self.store)
        self.queues: list[str] = []
        self.cannot: dict[str, str] = {}
        self._harness: Harness | None = None
        self._harness_lock = threading.Lock()
        self._liveness: Any = None
        self._noted: set[str] = set()
        self._launched = False
        self.superseded = False
        self.gated = False  # --concurrency holds across this process's queues (_install_gate)
        self.claiming = threading.Lock()  # one claim at a time in this process, whatever the queue
        self.waiting: set[str] = set()  # runs whose workflow waits here for a decision

    @property
    def listened(self) -> list[str]:
        """Every queue this worker takes runs from: its agents' queues and their isolated twins."""
        return [*self.queues, *(isolated(q) for q in self.queues)]

    # ---- what this worker can run ----
    def capabilities(self) -> None:
        """The queues to listen to: the demo agents', and each agent of the agent file that
        builds here (its modules import); the others are listed with why, and left alone."""
        self.queues = [DEMO_QUEUE, programs.QUEUE]
        self.cannot = {}
        if self.config is None:
            return
        for name in self.config.names:
            try:
                self.config.agent(name)
            except ValueError as exc:
                self.cannot[name] = str(exc)
                continue
            self.queues.append(queue_for(name, "config"))

    # ---- start and stop ----
    def start(self) -> None:
        """Liveness lock, registry row, DBOS launched, queues registered (blocking: call it
        before the event loop, or in a thread)."""
        # lazy: optional dependency (the [workers] extra; tests/processes/test_cold_start.py keeps DBOS out of the quick commands)
        from dbos import DBOS, DBOSConfig


        set_owner_command(f"tether worker {self.executor_id}")
        self.capabilities()
        for name, why in self.cannot.items():
            log.warning("agent %s cannot be built in this worker, so its runs are left for workers that can: %s",
                        name, why)
        ensure_dbos_schema(self.store)
        self._register()

        encoding()  # the tokenizer's rank file, loaded now: else the first runs taken all wait for it
        workflow.attach(self)
        _registered()
        self.gated = _install_gate()
        if not self.gated:
            log.warning("this DBOS release does not let the worker count its runs across its queues: "
                        "--concurrency %d holds per queue, and recovered runs are not driven on their own",
                        self.concurrency)
        # Bounded: DBOS's executor threads wait for a connection of these, whatever the concurrency.
        engine = _engine(self.url, pool_size=pool_size(self.concurrency), overflow=0)
        config: DBOSConfig = {"name": APP_NAME, "system_database_engine": engine,
                              "system_database_url": "postgresql+psycopg://tether@localhost/tether",
                              "application_version": APP_VERSION, "executor_id": self.executor_id,
                              "dbos_system_schema": DBOS_SCHEMA, "run_migrations": False,
                              "log_level": os.environ.get("TETHER_DBOS_LOG", "ERROR")}
        DBOS(config=config)
        DBOS.listen_queues(self.listened)
        DBOS.launch()
        self._launched = True
        for queue in self.queues:
            # The row's worker_concurrency is DBOS's, shared by every worker of the queue (the
            # last one started wrote it); a gated worker reads its own --concurrency instead.
            DBOS.register_queue(queue, worker_concurrency=self.concurrency, polling_interval_sec=QUEUE_POLL_S,
                                on_conflict="always_update")
            DBOS.register_queue(isolated(queue), worker_concurrency=1, polling_interval_sec=ISOLATED_POLL_S,
                                on_conflict="always_update")
        log.info("worker %s (pid %d on %s) takes runs from %s, %d at a time in all", self.executor_id,
                 os.getpid(), socket.gethostname(), ", ".join(self.queues), self.concurrency)

    def _register(self) -> None:
        """Take this worker's liveness lock, on a session of its own for the worker's life,
        and write its row in the workers table."""

        conn = self.tables.session()
        self.tables.ensure_schema(conn)
        conn.execute(self.tables.q(_WORKERS_TABLE))
        conn.execute(self.tables.q(_RECOVERIES_TABLE))
        key = conn.execute("SELECT hashtextextended(%s, %s)", (f"tether-worker:{self.executor_id}",
                                                              self.tables.lock_seed)).fetchone()[0]
        if not conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
            conn.close()
            raise Superseded(f"executor id {self.executor_id} is held by another process (a worker that took "
                             "this one for dead and is recovering its runs)")

        now = time.time()
        conn.execute(self.tables.q(
            "INSERT INTO {s}.workers (executor_id, host, pid, started, heartbeat, concurrency, queues, cannot) "
            "VALUES (%s, %s, %s, %s, extract(epoch FROM clock_timestamp()), %s, %s, %s) ON CONFLICT (executor_id) DO UPDATE SET host = EXCLUDED.host, "
            "pid = EXCLUDED.pid, started = EXCLUDED.started, heartbeat = EXCLUDED.heartbeat, "
            "concurrency = EXCLUDED.concurrency, queues = EXCLUDED.queues, cannot = EXCLUDED.cannot"),
            (self.executor_id, socket.gethostname(), os.getpid(), now, self.concurrency,
             json.dumps(self.queues), json.dumps(self.cannot)))
        self._liveness = conn

    def stop(self) -> None:
        """Cancel what runs here (each run is saved as interrupted by the shutdown, and the
        next worker goes on with it), then let go of the liveness lock and the row."""
        if self._launched:
            # lazy: optional dependency (the [workers] extra; tests/processes/test_cold_start.py keeps DBOS out of the quick commands)
            from dbos import DBOS

            DBOS.destroy(workflow_completion_timeout_sec=0)
            self._launched = False
        if self._liveness is not None:
            with contextlib.suppress(Exception):
                self._liveness.execute(self.tables.q("DELETE FROM {s}.workers WHERE executor_id = %s"),
                                       (self.executor_id,))
            with contextlib.suppress(Exception):
                self._liveness.close()
            self._liveness = None
        self.store.close()
        workflow.attach(None)

    # ---- how many runs to claim (the gate of _install_gate) ----
    def room(self, sys_db: Any, queue: str) -> int:
        """How many runs this worker may claim from ``queue`` now: ``--concurrency`` less its
        workflows that are ``PENDING`` on this executor and not waiting for a decision
        (driven, or just claimed), read from DBOS's table, so that it is what the queue view
        shows. A workflow that waits for a decision holds no slot: its run is saved and let go
        of, and its wait (``DBOS.recv``) is an event in this process and a row in the
        database, with no connection held, so a fleet of runs waiting for people leaves the
        workers free for the runs that work.

        A run of an isolated queue only when nothing here is being driven, and nothing else
        while one is. While such a run waits for a worker, this one starts no other run, so
        that it (or another worker) is soon free to take it: a busy fleet would otherwise
        never leave a worker empty for it. Called under ``claiming``, so the count and the
        claim are one step."""
        # lazy: optional dependency (the PostgreSQL store's extra; tests/processes/test_cold_start.py keeps it out of the quick commands)
        import sqlalchemy as sa

        alone = queue.endswith(ISOLATED)
        active = _active_here()
        if active is not None and (len(active - self.waiting) >= self.concurrency or (alone and active - self.waiting)):
            return 0  # full (or not alone) without asking the database
        with sys_db.engine.connect() as c:
            rows = c.execute(sa.text(
                f"SELECT workflow_uuid, queue_name, status FROM {DBOS_SCHEMA}.workflow_status "
                f"WHERE name = :name AND (status = 'PENDING' AND executor_id = :me "
                f"OR status = 'ENQUEUED' AND queue_name = ANY(:isolated))"),
                {"me": self.executor_id, "name": WORKFLOW,
                 "isolated": [isolated(q) for q in self.queues]}).fetchall()
        mine = [(wid, q or "") for wid, q, status in rows if status == "PENDING"]
        driven = [q for wid, q in mine if wid not in self.waiting]
        if alone:
            return 0 if driven else 1
        if any(q.endswith(ISOLATED) for q in driven) or len(mine) < len(rows):
            return 0  # one driven alone here, or one waiting to be
        return max(0, self.concurrency - len(driven))

    # ---- the supervisor: liveness, recovery, notes (once a second) ----
    async def supervise(self, stopping: asyncio.Event) -> None:
        while not stopping.is_set():
            try:
                await asyncio.to_thread(self._tick)
            except Superseded as exc:
                log.error("worker %s stops: %s", self.executor_id, exc)
                self.superseded = True
                return
            except Exception as exc:  # the database restarting: say so, and try again next second
                log.warning("worker %s: %s", self.executor_id, _db_words(exc, self.store, "supervision failed"))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), SUPERVISE_S)

    def _tick(self) -> None:
        # lazy: optional dependency (the PostgreSQL store's extra; tests/processes/test_cold_start.py keeps it out of the quick commands)
        import psycopg

        conn = self._liveness
        try:
            if conn is None or conn.closed or conn.broken:
                raise psycopg.OperationalError("the session is gone")
            conn.execute(self.tables.q("UPDATE {s}.workers SET heartbeat = extract(epoch FROM clock_timestamp()) "
                                      "WHERE executor_id = %s"), (self.executor_id,))
        except psycopg.OperationalError:
            # The database restarted (or the network dropped us): take the lock again.
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()
            self._liveness = None
            self._register()
            log.warning("worker %s: the session to %s was lost; the worker's lock is taken again",
                        self.executor_id, self.store.where)
            return
        dead = [r[0] for r in conn.execute(self.tables.q(
            f"SELECT DISTINCT w.executor_id FROM {DBOS_SCHEMA}.workflow_status w "
            f"LEFT JOIN {{s}}.workers k ON k.executor_id = w.executor_id "
            f"WHERE w.status = 'PENDING' AND w.name = %s AND w.executor_id <> %s "
            f"AND hashtextextended('tether-worker:' || w.executor_id, %s) NOT IN ({self.tables.held}) "
            f"AND coalesce(k.heartbeat, 0) < extract(epoch FROM clock_timestamp()) - %s"),
            (WORKFLOW, self.executor_id, self.tables.lock_seed, SILENT_S))]
        for executor in dead:
            recover(self, conn, executor)
        if self.cannot:
            note_unbuildable(self, conn)

    # ---- the drive step ----
    def harness(self) -> Harness:
        with self._harness_lock:
            if self._harness is None:
                self._harness = Harness(workspace=tether_home() / "workspace", config=self.config,
                                        store=self.store, agent_sets=self.agent_sets)
            return self._harness

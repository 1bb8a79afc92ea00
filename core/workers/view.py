"""The queue as a console sees it: the runs waiting, which worker drives which run, and the
workers themselves, read from DBOS's table and Tether's workers table by any process.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tether.store.protocol import Store
from tether.workers.names import DBOS_SCHEMA, WORKFLOW
from tether.workers.database import database

@dataclass(frozen=True)
class WorkerInfo:
    """One worker process, from the workers table."""

    executor_id: str
    host: str | None
    pid: int | None
    alive: bool
    concurrency: int | None = None
    heartbeat: float | None = None
    queues: tuple[str, ...] = ()
    cannot: dict[str, str] = field(default_factory=dict)
    """Agents this worker cannot build, with why (its runs are left for other workers)."""

    @property
    def where(self) -> str:
        return f"{self.executor_id} (pid {self.pid} on {self.host})"


@dataclass(frozen=True)
class QueueView:
    """What the queue holds now: ``depth`` runs wait in it (``queued``), and each run a
    worker has taken maps to that worker's executor id (``executors``; a workflow waiting
    for a decision counts too). ``workers`` are the workers that ever registered and have
    not said goodbye, alive or not."""

    depth: int = 0
    queued: frozenset[str] = frozenset()
    executors: dict[str, str] = field(default_factory=dict)
    workers: dict[str, WorkerInfo] = field(default_factory=dict)


def queue_view(store: Store) -> QueueView:
    """The queue's depth, the queued runs and which worker runs which run, in two queries
    on DBOS's and Tether's tables. Empty for a file store, or a database where no worker
    or submit ever ran. Any role that can read the tables may call it (the watcher too);
    it blocks (a network round trip): from an event loop, call it in a thread."""

    if not store.workers:
        return QueueView()
    tables = database(store)
    with tables.connection() as conn:
        present = conn.execute("SELECT to_regclass(%s), to_regclass(%s)",
                               (f"{DBOS_SCHEMA}.workflow_status", f"{tables.schema}.workers")).fetchone()
        if present[0] is None:
            return QueueView()
        rows = conn.execute(
            f"SELECT workflow_uuid, status, executor_id FROM {DBOS_SCHEMA}.workflow_status "
            f"WHERE name = %s AND status IN ('ENQUEUED', 'DELAYED', 'PENDING')", (WORKFLOW,)).fetchall()
        workers = {}
        if present[1] is not None:
            for executor, host, pid, heartbeat, concurrency, queues, cannot, alive in conn.execute(tables.q(
                    f"SELECT executor_id, host, pid, heartbeat, concurrency, queues, cannot, lock_key IN ({tables.held}) "
                    f"FROM {{s}}.workers")):
                workers[executor] = WorkerInfo(executor, host, pid, bool(alive), concurrency, heartbeat,
                                               tuple(queues or ()), dict(cannot or {}))
    queued = frozenset(r[0] for r in rows if r[1] != "PENDING")
    executors = {r[0]: r[2] for r in rows if r[1] == "PENDING"}
    return QueueView(len(queued), queued, executors, workers)


def _workflow_status(store: Store, run_id: str) -> str | None:
    with database(store).connection() as conn:
        if conn.execute("SELECT to_regclass(%s)", (f"{DBOS_SCHEMA}.workflow_status",)).fetchone()[0] is None:
            return None
        row = conn.execute(f"SELECT status FROM {DBOS_SCHEMA}.workflow_status WHERE workflow_uuid = %s",
                           (run_id,)).fetchone()
    return None if row is None else str(row[0])


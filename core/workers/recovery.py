"""Recovery without Conductor: a dead worker's workflows handed back to their queues, and the
recoveries that give up.

A worker found dead (its lock free, its heartbeat :data:`~tether.workers.worker.SILENT_S`
old) has its lock claimed by one live worker, which resumes its workflows. A run the dead
worker was driving has the death counted in the ``recoveries`` table: it goes back to its
queue's isolated twin, or, after :data:`MAX_RECOVERIES` deaths with no progress between
them, is parked as ``failed`` and its workflow cancelled.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import time
from typing import TYPE_CHECKING, Any

from tether.run.driver import RunDriver
from tether.vocab.events import WorkerNote
from tether.vocab.state import StateError, Status
from tether.workers.names import DBOS_SCHEMA, DEMO_QUEUE, WORKFLOW, isolated, queue_for

if TYPE_CHECKING:
    from tether.workers.host import Host

log = logging.getLogger("tether.workers.worker")
MAX_RECOVERIES = 3
"""A run whose worker died (or was lost) while driving it is recovered at most this many times
since its transcript last grew; at the next such death it is parked as ``failed``
(``tether worker --max-recoveries N``)."""
GAVE_UP = "crashed every worker that took it"


def recover(worker: Host, conn: Any, executor: str) -> None:
    """Hand a dead executor's workflows back to their queues. Its lock, taken here for
    the duration, makes this worker the only one doing it; the list is read again under
    the lock, so workflows another worker recovered a moment ago are left alone.

    A run the dead worker was driving (its owner record, left behind, names that worker)
    has the death counted (:func:`_death`): it goes back to its queue's isolated twin, or,
    past the worker's ``max_recoveries``, is parked as failed and its workflow cancelled. The
    others (queued, waiting for a decision, handed over at a shutdown) go back as they were."""
    # lazy: optional dependency (the [workers] extra; tests/processes/test_cold_start.py keeps DBOS out of the quick commands)
    from dbos import DBOS

    key = conn.execute("SELECT hashtextextended(%s, %s)", (f"tether-worker:{executor}", worker.tables.lock_seed)).fetchone()[0]
    if not conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
        return  # alive after all, or another worker is recovering it
    try:
        rows = conn.execute(f"SELECT workflow_uuid, queue_name FROM {DBOS_SCHEMA}.workflow_status "
                            f"WHERE status = 'PENDING' AND name = %s AND executor_id = %s",
                            (WORKFLOW, executor)).fetchall()
        back, parked = [], []
        for workflow_id, queue in rows:
            queue = queue or DEMO_QUEUE
            death = _death(worker, conn, workflow_id, executor)
            if death == "park":
                parked.append(workflow_id)
                continue
            DBOS.resume_workflow(workflow_id, queue_name=isolated(queue) if death else queue)
            back.append(workflow_id)
        if back:
            log.warning("worker %s: worker %s is gone; its %d run(s) went back to their queues: %s",
                        worker.executor_id, executor, len(back), ", ".join(back))
        if parked:
            log.error("worker %s: worker %s is gone; run(s) %s %s, and were parked as failed",
                      worker.executor_id, executor, ", ".join(parked), GAVE_UP)
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

def _death(worker: Host, conn: Any, run_id: str, executor: str) -> str | None:
    """Count the death of ``executor`` against ``run_id`` if it was driving the run:
    None (it was not: the run goes back as it was), "resume" (to be driven on its own), or
    "park" (the run was parked as failed: no worker takes it again)."""
    try:
        owner = worker.store.owner(run_id)
        if owner is None or owner.alive or owner.command != f"tether worker {executor}":
            return None
        state = worker.store.load(run_id)
    except (StateError, OSError) as exc:
        log.warning("run %s: %s", run_id, exc)
        return None
    if state.status is not Status.RUNNING:
        return None  # it had stopped (and was saved so) before the worker died
    row = conn.execute(worker.tables.q("SELECT host, pid, heartbeat FROM {s}.workers WHERE executor_id = %s"),
                       (executor,)).fetchone()
    host, pid, seen = row if row is not None else (owner.host, owner.pid, owner.heartbeat)
    host, pid = host or owner.host, pid or owner.pid
    conn.execute(worker.tables.q(
        "INSERT INTO {s}.recoveries (run_id, executor_id, host, pid, last_seen, found, by_executor, run_created, "
        "messages) VALUES (%s, %s, %s, %s, %s, extract(epoch FROM clock_timestamp()), %s, %s, %s) "
        "ON CONFLICT (run_id, executor_id) DO NOTHING"),
        (run_id, executor, host, pid, seen, worker.executor_id, state.created_at, len(state.messages)))
    deaths = conn.execute(worker.tables.q(
        "SELECT executor_id, host, pid, coalesce(last_seen, found) FROM {s}.recoveries WHERE run_id = %s "
        "AND run_created = %s AND messages = %s ORDER BY found, executor_id"),
        (run_id, state.created_at, len(state.messages))).fetchall()
    said = "; ".join(f"{i}. worker {e} (pid {p} on {h}), last seen {_when(t)}"
                     for i, (e, h, p, t) in enumerate(deaths, 1))
    recovery = len(deaths)  # the recovery this death asks for
    if recovery <= worker.max_recoveries:
        text = (f"worker {executor} (pid {pid} on {host}) died or was lost while driving the run (last seen "
                f"{_when(seen)}); worker {worker.executor_id} hands it back to the queue, to be driven on its own: "
                f"recovery {recovery} of at most {worker.max_recoveries} since the run last made progress")
        log.warning("run %s: %s", run_id, text)
        with contextlib.suppress(StateError, OSError):
            worker.store.append_event(run_id, WorkerNote(run_id=run_id, worker=worker.executor_id, text=text))
        return "resume"
    reason = (f"{GAVE_UP}: {len(deaths)} workers died or were lost while driving it, with no progress in "
              f"between ({said}); after {worker.max_recoveries} recoveries (the limit set by "
              f"tether worker --max-recoveries) no worker takes it again")
    if not _park(worker, run_id, reason):
        return None
    conn.execute(worker.tables.q("UPDATE {s}.recoveries SET parked = true WHERE run_id = %s AND executor_id = %s"),
                 (run_id, executor))
    return "park"

def _park(worker: Host, run_id: str, reason: str) -> bool:
    """End the run ``failed`` for ``reason`` (saved and traced as any stop), then cancel its
    workflow, so that no worker takes it again. False if the run could not be taken."""
    # lazy: optional dependency (the [workers] extra; tests/processes/test_cold_start.py keeps DBOS out of the quick commands)
    from dbos import DBOS

    try:
        state, handle = worker.store.open(run_id)
    except (StateError, OSError) as exc:
        log.warning("run %s was not parked (it goes back to its queue): %s", run_id, exc)
        return False
    try:
        if state.status is not Status.RUNNING:
            return False
        run = RunDriver(state, handle, handle.trace())
        try:
            run.emit(WorkerNote(run_id=run_id, worker=worker.executor_id, text=reason))
            run.finish_blocking(Status.FAILED, reason, error=reason)
        finally:
            run.trace.close()
    finally:
        handle.release()
    # After the save: a cancel that did not happen leaves a failed run, which the next
    # worker to take its workflow leaves as it is (a drive step never reopens an ended run).
    DBOS.cancel_workflow(run_id)
    log.error("run %s: %s", run_id, reason)
    return True

def note_unbuildable(worker: Host, conn: Any) -> None:
    """Say once, in the trace of each queued run whose agent this worker cannot build,
    that it was left for another worker, and why."""
    queues = {q: name for name in worker.cannot for q in (queue_for(name, "config"),
                                                        isolated(queue_for(name, "config")))}
    rows = conn.execute(f"SELECT workflow_uuid, queue_name FROM {DBOS_SCHEMA}.workflow_status "
                        f"WHERE status = 'ENQUEUED' AND name = %s AND queue_name = ANY(%s)",
                        (WORKFLOW, list(queues))).fetchall()
    for run_id, queue in rows:
        if run_id in worker._noted:
            continue
        worker._noted.add(run_id)
        name = queues[queue]
        text = (f"worker {worker.executor_id} (pid {os.getpid()} on {socket.gethostname()}) cannot run agent "
                f"{name}: {worker.cannot[name]}; the run waits for a worker that can")
        log.warning("run %s: %s", run_id, text)
        with contextlib.suppress(StateError, OSError):
            worker.store.append_event(run_id, WorkerNote(run_id=run_id, worker=worker.executor_id, text=text))



def _when(epoch: float | None) -> str:
    if epoch is None:
        return "at an unknown time"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch)) + f".{int(epoch % 1 * 1000):03d} UTC"

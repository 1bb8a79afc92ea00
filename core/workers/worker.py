"""Workers: queued runs executed by any number of processes, on any number of hosts.

``tether submit`` creates a run in the PostgreSQL store and enqueues it; ``tether worker``
takes runs from the queue and drives them with the ordinary harness. DBOS (a library over
the same PostgreSQL) keeps the queue, each run's progress as a workflow, and the durable
wait for an approval; Tether's own tables keep the run itself (docs/scale-out.md says why
the line falls there).

The mapping:

* **One workflow per run**, ``tether.run(run_id)``, whose id is the run's id, registered
  under one application version (:data:`APP_VERSION`) by every worker whatever its Tether
  version: its code is the harness's resume path, which any version runs. Enqueueing the
  same run twice gives the same workflow.
* **A drive step** (:meth:`Worker.drive`) takes the run and runs it until it stops, through
  :meth:`Harness.run` (or ``approve``/``reject`` after a decision). Its result is only the
  run's status. If the worker dies inside it, the recovered workflow runs the step again,
  and the harness resumes from the last committed Tether step: a model turn whose reply
  was saved is not asked again, and a write whose result is in the ledger is not done
  again. A step never drives a run another live process holds: it waits until the run is
  free (Tether's per-run advisory lock; the owner token fences saves besides).
* **An approval** ends the drive step with the run saved as waiting; the workflow then
  waits with ``DBOS.recv_async`` for a decision (sent by :func:`decide`), which survives
  the worker's death, and the next drive step applies it and goes on.
* **Queues per agent** (:func:`queue_for`): a worker listens only to the queues of the
  agents it can build (the demo agents, and the agents of its ``--config`` whose modules
  import here), so a run is never taken by a worker that lacks its agent. Such a worker
  says so in its log, in the workers table, and in the trace of each queued run it cannot
  take.
* **Recovery without Conductor.** Each worker holds a session advisory lock on its
  executor id for its life (:class:`Worker`); the server drops it the moment the process
  dies. Once a second a worker looks for executors with ``PENDING`` workflows whose lock
  is free and whose heartbeat is :data:`SILENT_S` old, claims the dead executor's lock (so only one worker recovers it), and resumes
  its workflows on their own queues (``resume_workflow(id, queue_name=...)``), so the
  concurrency limit holds for them too.
* **Recoveries that give up.** A run the dead worker was driving goes back to its queue's
  isolated twin (:data:`ISOLATED`: driven alone on a worker, so a later death is its own),
  and the death is counted in Tether's table ``recoveries``. At the death after
  :data:`MAX_RECOVERIES` recoveries with no progress in between, the run is parked as
  ``failed`` ("crashed every worker that took it", with each dead worker and when) and its
  workflow cancelled: no worker takes it again.
* **``--concurrency N`` is this process's**: N runs at once across all its queues, counted
  from DBOS's table at each claim (:func:`_install_gate`), whatever other workers say.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tether.store.control import ControlReply, ControlRequest
from tether.run.events import WorkerNote
from tether.integrations import on_workers as programs
from tether.run.loop import SHUTDOWN_REASON
from tether.run.state import Cancelled, NeedsApproval, RunState, StateError, Status

if TYPE_CHECKING:
    from tether.agents.config import Config
    from tether.harness import Harness
    from tether.store.postgres.store import PgStore

log = logging.getLogger("tether.workers.worker")

APP_NAME = "tether"
APP_VERSION = "tether-run-1"
"""One version for every worker: the workflow is ``run(run_id)`` over the harness's resume
path, which every Tether version runs, so workers of different releases share the queue.
A change to the workflow's shape (its steps, their order) needs a new value."""
WORKFLOW = "tether.run"
DRIVE_STEP = "tether.drive"
DECISION_TOPIC = "tether.decision"
DBOS_SCHEMA = "dbos"
DEMO_QUEUE = "tether-demo"
"""Every worker can build the demo agents (built-in tools only): one queue for them all."""
QUEUE_POLL_S = 0.1  # DBOS polls each queue this often; its default (1 s) would make every start wait
SUPERVISE_S = 1.0  # liveness, recovery and notes: at most once a second
SILENT_S = 3.0
"""A worker is dead when its lock is free *and* its heartbeat (the database's clock) is older
than this: after a database restart every lock is gone at once, and each worker needs a
moment to take its own again; a killed worker is recovered within this long."""
HELD_WAIT_S = 1.0  # a drive step finding its run held by a live process looks again this often
DECISION_WAIT_S = 3600.0  # one recv's timeout; the workflow waits again after it, for as long as it takes
MAX_RECOVERIES = 3
"""A run whose worker died (or was lost) while driving it is recovered at most this many times
since its transcript last grew; at the next such death it is parked as ``failed``
(``tether worker --max-recoveries N``)."""
GAVE_UP = "crashed every worker that took it"
ISOLATED = ":isolated"
"""A run recovered from a worker that died while driving it goes back to its agent's queue
with this suffix: a worker takes such a run only when it drives nothing else, and takes
nothing else while it drives one, so each later death is that run's alone."""
ISOLATED_POLL_S = 0.5


# ---- names ------------------------------------------------------------------------------

def queue_for(agent_name: str, source: str | None) -> str:
    """The queue a run of this agent waits in: one for the demo agents, one per other agent."""
    if source == "demo":
        return DEMO_QUEUE
    return "tether-agent-" + re.sub(r"[^A-Za-z0-9_.-]", "_", agent_name)[:100]


def isolated(queue: str) -> str:
    """The queue where the recovered runs of ``queue`` wait, to be driven each on its own."""
    return queue if queue.endswith(ISOLATED) else queue + ISOLATED


def queue_of_run(state: RunState) -> str:
    ref = state.agent
    if ref is None:
        return DEMO_QUEUE
    if programs.is_program(state):  # a paused openai-agents run (tether.integrations.on_workers)
        return programs.QUEUE
    return queue_for(ref.name, ref.source)


def new_executor_id() -> str:
    """Unique per worker process: host, pid and a random tail (a pid is reused, a host renamed)."""
    host = re.sub(r"[^A-Za-z0-9.-]", "_", socket.gethostname())[:40]
    return f"w-{host}-{os.getpid()}-{secrets.token_hex(3)}"


def _sa_url(url: str) -> str:
    return re.sub(r"^postgres(ql)?://", "postgresql+psycopg://", url)


def pool_size(concurrency: int) -> int:
    """How many connections a worker at ``concurrency`` keeps for Tether's reads and saves, and
    as many again for DBOS's engine: a few more for more runs, and never more than
    :data:`MAX_POOL`, however many runs it drives (docs/scale-out.md has the arithmetic)."""
    return max(4, min(MAX_POOL, 2 + concurrency // 8))


MAX_POOL = 8
"""The most connections of each kind (Tether's, DBOS's) one worker keeps, whatever its
``--concurrency``: the database, not the connection count, is what limits a busy worker."""


def _engine(url: str, pool_size: int = 4, overflow: int | None = None) -> Any:
    """DBOS's engine, made here so that DBOS never sees (or logs) the URL itself, and never
    connects to the ``postgres`` database to look for ours."""
    import sqlalchemy as sa

    return sa.create_engine(_sa_url(url), pool_size=pool_size,
                            max_overflow=pool_size if overflow is None else overflow, pool_pre_ping=True,
                            pool_timeout=30, connect_args={"application_name": "tether-worker",
                                                           "connect_timeout": 10})


def ensure_dbos_schema(url: str) -> None:
    """DBOS's tables in the schema ``dbos`` (made by ``core/data/pg/roles.sql``): created
    or migrated by DBOS itself, once, however many submitters or workers start together."""
    from dbos._serialization import DefaultSerializer
    from dbos._sys_db import SystemDatabase

    engine = _engine(url, pool_size=1)
    try:
        sys_db = SystemDatabase.create(system_database_url=_sa_url(url), engine_kwargs={}, engine=engine,
                                       schema=DBOS_SCHEMA, serializer=DefaultSerializer(), executor_id=None)
        try:
            sys_db.run_migrations()
        finally:
            sys_db.destroy()
    except Exception as exc:
        raise StateError(_db_words(exc, url, "cannot prepare the worker queue's tables")) from None
    finally:
        engine.dispose()


def _db_words(exc: BaseException, url: str, what: str) -> str:
    from tether.store.postgres.store import _clean, redact

    text = _clean(exc, url).splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "permission denied for database" in text or "permission denied for schema" in text:
        text += (" (the operator role needs the schema dbos: run the lines for it in "
                 "core/data/pg/roles.sql as a superuser)")
    return f"{redact(url)}: {what}: {text}"


# ---- submitting --------------------------------------------------------------------------

def client(url: str) -> Any:
    """A DBOS client on the store's database (for enqueueing and sending decisions)."""
    from dbos import DBOSClient

    return DBOSClient(system_database_engine=_engine(url, pool_size=2), dbos_system_schema=DBOS_SCHEMA,
                      application_name=APP_NAME)


def enqueue(url: str, state: RunState, dbos_client: Any = None) -> str:
    """Put an existing run on its agent's queue; the workflow id is the run id, so doing it
    twice gives the same workflow. Returns the queue's name. ``dbos_client`` (from
    :func:`client`) saves a connection per call when enqueueing many."""
    from dbos import EnqueueOptions

    queue = queue_of_run(state)
    own = dbos_client is None
    if own:
        ensure_dbos_schema(url)
        dbos_client = client(url)
    try:
        options: EnqueueOptions = {"workflow_name": WORKFLOW, "queue_name": queue, "workflow_id": state.run_id,
                                   "app_version": APP_VERSION}
        dbos_client.enqueue(options, state.run_id)
    except Exception as exc:
        raise StateError(_db_words(exc, url, f"run {state.run_id} was created but could not be queued "
                                   f"(tether resume {state.run_id} runs it here)")) from None
    finally:
        if own:
            close_client(dbos_client)
    return queue


def close_client(dbos_client: Any) -> None:
    """A client from :func:`client`, and the engine made for it (DBOS leaves a given engine open)."""
    dbos_client.destroy()
    dbos_client._sys_db.engine.dispose()


# ---- the queue, as a console sees it ------------------------------------------------------

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


_WORKERS_TABLE = """
CREATE TABLE IF NOT EXISTS {s}.workers (
    executor_id text PRIMARY KEY,
    host text, pid integer, started double precision, heartbeat double precision,
    concurrency integer, queues json, cannot json,
    lock_key bigint GENERATED ALWAYS AS (hashtextextended('tether-worker:' || executor_id, {seed})) STORED
)"""
_RECOVERIES_TABLE = """
CREATE TABLE IF NOT EXISTS {s}.recoveries (
    run_id text NOT NULL,
    executor_id text NOT NULL,
    host text, pid integer,
    last_seen double precision,
    found double precision NOT NULL,
    by_executor text NOT NULL,
    run_created double precision NOT NULL,
    messages integer NOT NULL,
    parked boolean NOT NULL DEFAULT false,
    PRIMARY KEY (run_id, executor_id)
)"""
"""One row per worker that died (or was lost) while driving a run: the dead worker, where it
ran, when it was last seen alive (its heartbeat, on the database's clock), who found it dead
and when, and the run's transcript length then. The deaths of a run that count toward
:data:`MAX_RECOVERIES` are its rows with the transcript's present length (``run_created``
tells a run from an earlier one of the same id)."""


def queue_view(store: Any) -> QueueView:
    """The queue's depth, the queued runs and which worker runs which run, in two queries
    on DBOS's and Tether's tables. Empty for a file store, or a database where no worker
    or submit ever ran. Any role that can read the tables may call it (the watcher too);
    it blocks (a network round trip): from an event loop, call it in a thread."""
    from tether.store.postgres.store import PgStore, _HELD

    if not isinstance(store, PgStore):
        return QueueView()
    with store._conn() as conn:
        present = conn.execute("SELECT to_regclass(%s), to_regclass(%s)",
                               (f"{DBOS_SCHEMA}.workflow_status", f"{store.schema}.workers")).fetchone()
        if present[0] is None:
            return QueueView()
        rows = conn.execute(
            f"SELECT workflow_uuid, status, executor_id FROM {DBOS_SCHEMA}.workflow_status "
            f"WHERE name = %s AND status IN ('ENQUEUED', 'DELAYED', 'PENDING')", (WORKFLOW,)).fetchall()
        workers = {}
        if present[1] is not None:
            for executor, host, pid, heartbeat, concurrency, queues, cannot, alive in conn.execute(store.q(
                    f"SELECT executor_id, host, pid, heartbeat, concurrency, queues, cannot, lock_key IN ({_HELD}) "
                    f"FROM {{s}}.workers")):
                workers[executor] = WorkerInfo(executor, host, pid, bool(alive), concurrency, heartbeat,
                                               tuple(queues or ()), dict(cannot or {}))
    queued = frozenset(r[0] for r in rows if r[1] != "PENDING")
    executors = {r[0]: r[2] for r in rows if r[1] == "PENDING"}
    return QueueView(len(queued), queued, executors, workers)


# ---- deciding a run that waits in a worker's workflow ---------------------------------------

async def decide(store: Any, run_id: str, verdict: str, text: str = "", *, by: str = "operator",
                 call_id: str | None = None, args: str | None = None, rule: str | None = None) -> ControlReply | None:
    """Approve or reject the call a worker-run run waits on, from any process: the decision
    is recorded in the run's control channel (first come, first served: a second decider is
    told who decided) and sent to the run's workflow as a DBOS message, which waits for it
    durably (a worker that dies meanwhile does not lose it). None when no workflow waits for
    the run (a file store, a run that is not a worker's, or one a process holds): decide the
    usual way then."""
    if not _is_pg(store):
        return None
    return await asyncio.to_thread(_decide, store, run_id, verdict, text, by, call_id, args, rule)


async def stop_waiting(store: Any, run_id: str, request: ControlRequest) -> ControlReply | None:
    """A Stop for a run the worker queue holds but no process drives: one that waits in the
    queue is stopped by the worker that takes it, before anything else; for one whose
    workflow waits for a decision, the workflow stops waiting (the worker's slot is free
    again) and the run stays waiting for approval, for ``tether approve|reject`` to decide in
    the deciding process. None otherwise (a worker drives it: the control channel reaches it)."""
    if not _is_pg(store) or request.kind != "stop":
        return None
    return await asyncio.to_thread(_stop_waiting, store, run_id, request)


def _is_pg(store: Any) -> bool:
    return type(store).__module__ == "tether.store.postgres.store"


def _stop_waiting(store: PgStore, run_id: str, request: ControlRequest) -> ControlReply | None:
    status = _workflow_status(store, run_id)
    if status not in ("PENDING", "ENQUEUED", "DELAYED"):
        return None
    owner = store.owner(run_id)
    if owner is not None and owner.alive:
        return None  # a worker drives it: the control channel reaches the tool
    state = store.load(run_id)
    if state.status is Status.RUNNING:
        # Queued (or between a dead worker and the one recovering it): the worker that takes
        # it handles the request first, before any model turn.
        store.control_append(run_id, request)
        return ControlReply(True, f"run {run_id} waits in the worker queue; the stop is recorded and the worker "
                            "that takes it stops it before anything else", pending=True)
    if not isinstance(state.interruption, NeedsApproval):
        return None
    dbos_client = client(store.url)
    try:
        dbos_client.send(run_id, _message(request), DECISION_TOPIC, idempotency_key=f"{run_id}:{request.id}")
    except Exception as exc:
        raise StateError(_db_words(exc, store.url, f"the stop of run {run_id} was not sent to its worker")) from None
    finally:
        close_client(dbos_client)
    return ControlReply(True, f"run {run_id} waits for approval of {state.interruption.tool_name}; its worker stops "
                        f"waiting and leaves it so (tether approve|reject {run_id} decides it here)")


def _workflow_status(store: PgStore, run_id: str) -> str | None:
    with store._conn() as conn:
        if conn.execute("SELECT to_regclass(%s)", (f"{DBOS_SCHEMA}.workflow_status",)).fetchone()[0] is None:
            return None
        row = conn.execute(f"SELECT status FROM {DBOS_SCHEMA}.workflow_status WHERE workflow_uuid = %s",
                           (run_id,)).fetchone()
    return None if row is None else str(row[0])


def _decide(store: PgStore, run_id: str, verdict: str, text: str, by: str,
            call_id: str | None, args: str | None = None, rule: str | None = None) -> ControlReply | None:
    kind = "approve" if verdict in ("approve", "approved") else "reject"
    if _workflow_status(store, run_id) not in ("PENDING", "ENQUEUED") and not programs.enqueue_paused(store, run_id):
        return None
    owner = store.owner(run_id)
    if owner is not None and owner.alive:
        return None  # a process drives it now: the control channel reaches that process
    state = store.load(run_id)
    waiting = state.interruption if isinstance(state.interruption, NeedsApproval) else None
    last = max(state.approvals.values(), key=lambda d: d.ts, default=None)
    if waiting is None:
        if last is not None:
            return ControlReply(False, f"already decided: {last.verdict} by {last.by}; there is one decision per call")
        return ControlReply(False, f"run {run_id} is not waiting for a decision ({state.status.value})")
    if call_id and call_id != waiting.call_id:
        return ControlReply(False, f"run {run_id} waits for a decision on {waiting.call_id}, not {call_id}")
    earlier = state.approvals.get(waiting.call_id)
    if earlier is not None and earlier.complete:
        return ControlReply(False, f"already decided: {earlier.verdict} by {earlier.by}; there is one decision per call")
    if kind == "approve" and by in waiting.approvers:
        return ControlReply(False, f"{by} has approved {waiting.tool_name} ({waiting.call_id}) already: it needs "
                            f"{waiting.needed} different people ({waiting.tally} so far)")
    mine = ControlRequest(kind, text, call_id=waiting.call_id, by=by, args=args, rule=rule)
    store.control_append(run_id, mine)
    # The channel orders the requests: the first decision on this call is the one.
    first = next((r for r in store.control_read(run_id, state.control_seen)
                  if r.kind in ("approve", "reject") and r.call_id == waiting.call_id), mine)
    if first.id != mine.id:
        done = "approved" if first.kind == "approve" else "rejected"
        return ControlReply(False, f"already decided: {done} by {first.by}; there is one decision per call")
    dbos_client = client(store.url)
    try:
        dbos_client.send(run_id, _message(first), DECISION_TOPIC, idempotency_key=f"{run_id}:{first.id}")
    except Exception as exc:
        raise StateError(_db_words(exc, store.url, f"the decision on run {run_id} was recorded but not sent "
                                   "to its worker")) from None
    finally:
        close_client(dbos_client)
    done = "approved" if kind == "approve" else "rejected"
    return ControlReply(True, f"{done} {waiting.tool_name} ({waiting.call_id}) by {by}; the worker queue "
                        f"goes on with run {run_id}")


def _message(request: ControlRequest) -> dict[str, Any]:
    return {"kind": request.kind, "text": request.text, "call_id": request.call_id, "by": request.by,
            "id": request.id, "args": request.args, "rule": request.rule}


# ---- the workflow --------------------------------------------------------------------------

_WORKER: Worker | None = None


def _registered() -> tuple[Any, Any]:
    """The workflow and its step, registered with DBOS once per process (on first use, so
    importing this module costs nothing to a process that only submits or reads)."""
    global _REGISTERED
    if _REGISTERED is not None:
        return _REGISTERED
    from dbos import DBOS

    # The database going away (a restart, a failover) fails a save or an open: the step is
    # tried again, and resumes the run from its last committed step once the database is back.
    @DBOS.step(name=DRIVE_STEP, retries_allowed=True, interval_seconds=1.0, backoff_rate=2.0,
               max_attempts=DRIVE_ATTEMPTS, should_retry=_store_trouble)
    async def drive(run_id: str, decision: dict[str, Any] | None) -> dict[str, Any]:
        assert _WORKER is not None, "a drive step outside a worker"
        return await _WORKER.drive(run_id, decision)

    # No cap here: resume_workflow, the recovery path, resets DBOS's count. Tether caps the
    # recoveries itself (Worker._recover, MAX_RECOVERIES), counting in its own table.
    @DBOS.workflow(name=WORKFLOW, max_recovery_attempts=None)
    async def run(run_id: str) -> dict[str, Any]:
        outcome = await drive(run_id, None)
        while outcome.get("waiting"):
            decision = await _await_decision(run_id, outcome["waiting"])
            if decision is None:
                break  # stopped while waiting: the run stays waiting, on its own
            outcome = await drive(run_id, decision)
        return outcome

    async def _await_decision(run_id: str, call_id: str) -> dict[str, Any] | None:
        waiting = _WORKER._waiting if _WORKER is not None else set()
        waiting.add(run_id)  # drives nothing meanwhile (Worker._room)
        try:
            return await _receive(call_id)
        finally:
            waiting.discard(run_id)

    async def _receive(call_id: str) -> dict[str, Any] | None:
        while True:
            message = await DBOS.recv_async(DECISION_TOPIC, timeout_seconds=DECISION_WAIT_S)
            if message is None:
                continue  # one hour passed: wait again (each wait is one recorded operation)
            if message.get("kind") == "stop":
                return None
            if message.get("call_id") in (None, call_id):
                return message
            # A decision for another call (an earlier one, already applied): not this one's.

    _REGISTERED = (run, drive)
    return _REGISTERED


_REGISTERED: tuple[Any, Any] | None = None
DRIVE_ATTEMPTS = 8  # 1 + 2 + ... + 64 s: about two minutes of a database that is away


def _store_trouble(exc: BaseException) -> bool:
    from tether.store.postgres.store import StoreUnavailable
    from tether.store.files.store import SaveError

    trouble = isinstance(exc, (SaveError, StoreUnavailable))
    if trouble:
        log.warning("%s; the worker tries again", exc)
    return trouble


def _outcome(state: RunState, **extra: Any) -> dict[str, Any]:
    waiting = state.interruption.call_id if isinstance(state.interruption, NeedsApproval) else None
    return {"run_id": state.run_id, "status": state.status.value, "exit_code": state.exit_code,
            "waiting": waiting, **extra}


def _shut_down(state: RunState) -> bool:
    """Saved as interrupted because the worker that drove it was shut down (not a Stop):
    the recovered workflow goes on with it."""
    stop = state.interruption
    return state.status is Status.INTERRUPTED and isinstance(stop, Cancelled) and stop.by is None \
        and stop.reason == SHUTDOWN_REASON


# ---- --concurrency: N runs in this process, across its queues ---------------------------------

_GATE_INSTALLED: bool | None = None


def _install_gate() -> bool:
    """Make DBOS's dequeue ask this process's :class:`Worker` how many runs it may take.

    DBOS 3.4.0 keeps ``worker_concurrency`` in the queue's row, shared by every worker of the
    queue, and counts it per queue. Two methods of its system database are wrapped, for this
    worker's own queues only: ``get_queue`` (which the queue threads reload every poll) gives
    this worker's ``--concurrency`` instead of the row's, and ``start_queued_workflows`` (the
    claim) claims at most the room :meth:`Worker._room` leaves, under one lock for the
    process, so two queues' threads never claim the same slot. False (and nothing wrapped)
    when DBOS's methods are not the ones this was written against."""
    global _GATE_INSTALLED
    if _GATE_INSTALLED is not None:
        return _GATE_INSTALLED
    import copy
    import inspect

    from dbos._sys_db import SystemDatabase

    claim, get_queue = SystemDatabase.start_queued_workflows, SystemDatabase.get_queue
    try:
        claim_params = list(inspect.signature(claim).parameters)[:7]
        get_params = list(inspect.signature(get_queue).parameters)[:2]
    except (TypeError, ValueError):
        claim_params = get_params = []
    if claim_params != ["self", "queue", "executor_id", "app_version", "queue_partition_key",
                        "local_running_count", "partition_local_running_count"] or get_params != ["self", "name"]:
        _GATE_INSTALLED = False
        return False

    def gated_get_queue(self: Any, name: str, **kwargs: Any) -> Any:
        queue = get_queue(self, name, **kwargs)
        worker = _WORKER
        if queue is not None and worker is not None and getattr(self, "executor_id", None) == worker.executor_id \
                and name in worker.listened:
            _set_worker_concurrency(queue, 1 if name.endswith(ISOLATED) else worker.concurrency)
        return queue

    def gated_claim(self: Any, queue: Any, executor_id: str, app_version: str, partition: Any,
                    local_running_count: int = 0, partition_local_running_count: int = 0, **kwargs: Any) -> Any:
        worker = _WORKER
        if worker is None or executor_id != worker.executor_id or partition is not None \
                or queue.name not in worker.listened:
            return claim(self, queue, executor_id, app_version, partition, local_running_count,
                         partition_local_running_count, **kwargs)
        with worker._claiming:
            room = worker._room(self, queue.name)
            if room <= 0:
                return [], "worker_concurrency"
            capped = copy.copy(queue)
            _set_worker_concurrency(capped, room)
            return claim(self, capped, executor_id, app_version, None, 0, partition_local_running_count, **kwargs)

    SystemDatabase.get_queue = gated_get_queue  # type: ignore[method-assign]
    SystemDatabase.start_queued_workflows = gated_claim  # type: ignore[method-assign]
    _GATE_INSTALLED = True
    return True


def _set_worker_concurrency(queue: Any, n: int) -> None:
    """The limit DBOS's dequeue reads (``Queue._worker_concurrency``), on this process's copy."""
    setattr(queue, "_worker_concurrency", n)  # noqa: B010 (DBOS's private field, named once here)


def _active_here() -> set[str] | None:
    """The workflows executing in this process now (DBOS's own registry of them), or None."""
    try:
        from dbos._dbos import _get_dbos_instance

        return set(_get_dbos_instance()._active_workflows_set.activeList())
    except Exception:
        return None


# ---- the worker process ----------------------------------------------------------------------

class Superseded(StateError):
    """This worker's lock is held by another process: it was taken for dead (its session was
    lost for longer than :data:`SILENT_S`) and its runs were handed to other workers."""


class Worker:
    """One worker process: DBOS launched with this worker's executor id on the store's
    database, the queues of the agents it can build, its liveness lock, and the harness the
    drive steps use (made on DBOS's event loop, where the workflows run)."""

    def __init__(self, url: str, *, concurrency: int = 1, config: Config | None = None,
                 executor_id: str | None = None, max_recoveries: int = MAX_RECOVERIES) -> None:
        from tether.store.postgres.store import PgStore

        self.url = url
        self.concurrency = concurrency
        self.max_recoveries = max_recoveries
        self.config = config
        self.executor_id = executor_id or new_executor_id()
        self.store = PgStore(url, pool_size=pool_size(concurrency))
        self.queues: list[str] = []
        self.cannot: dict[str, str] = {}
        self._harness: Harness | None = None
        self._harness_lock = threading.Lock()
        self._liveness: Any = None
        self._noted: set[str] = set()
        self._launched = False
        self.superseded = False
        self.gated = False  # --concurrency holds across this process's queues (_install_gate)
        self._claiming = threading.Lock()  # one claim at a time in this process, whatever the queue
        self._waiting: set[str] = set()  # runs whose workflow waits here for a decision

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
        from dbos import DBOS, DBOSConfig

        global _WORKER
        from tether.store.files.store import set_owner_command

        set_owner_command(f"tether worker {self.executor_id}")
        self.capabilities()
        for name, why in self.cannot.items():
            log.warning("agent %s cannot be built in this worker, so its runs are left for workers that can: %s",
                        name, why)
        ensure_dbos_schema(self.url)
        self._register()
        from tether.models.tokens import encoding

        encoding()  # the tokenizer's rank file, loaded now: else the first runs taken all wait for it
        _WORKER = self
        run, _ = _registered()
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
        from tether.store.postgres.store import _SESSION_SETTINGS, _connect

        conn = _connect(self.url, _SESSION_SETTINGS)
        self.store.ensure_schema(conn)
        conn.execute(self.store.q(_WORKERS_TABLE))
        conn.execute(self.store.q(_RECOVERIES_TABLE))
        key = conn.execute("SELECT hashtextextended(%s, %s)", (f"tether-worker:{self.executor_id}",
                                                              _lock_seed())).fetchone()[0]
        if not conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
            conn.close()
            raise Superseded(f"executor id {self.executor_id} is held by another process (a worker that took "
                             "this one for dead and is recovering its runs)")
        import json

        now = time.time()
        conn.execute(self.store.q(
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
        global _WORKER
        if self._launched:
            from dbos import DBOS

            DBOS.destroy(workflow_completion_timeout_sec=0)
            self._launched = False
        if self._liveness is not None:
            with contextlib.suppress(Exception):
                self._liveness.execute(self.store.q("DELETE FROM {s}.workers WHERE executor_id = %s"),
                                       (self.executor_id,))
            with contextlib.suppress(Exception):
                self._liveness.close()
            self._liveness = None
        self.store.close()
        _WORKER = None

    # ---- how many runs to claim (the gate of _install_gate) ----
    def _room(self, sys_db: Any, queue: str) -> int:
        """How many runs this worker may claim from ``queue`` now: ``--concurrency`` less its
        workflows that are ``PENDING`` on this executor (driven, waiting for a decision, or
        just claimed), read from DBOS's table, so that it is what the queue view shows.

        A run of an isolated queue only when nothing here is being driven, and nothing else
        while one is. While such a run waits for a worker, this one starts no other run, so
        that it (or another worker) is soon free to take it: a busy fleet would otherwise
        never leave a worker empty for it. Called under ``_claiming``, so the count and the
        claim are one step."""
        import sqlalchemy as sa

        alone = queue.endswith(ISOLATED)
        active = _active_here()
        if active is not None and (len(active) >= self.concurrency or (alone and active - self._waiting)):
            return 0  # full (or not alone) without asking the database
        with sys_db.engine.connect() as c:
            rows = c.execute(sa.text(
                f"SELECT workflow_uuid, queue_name, status FROM {DBOS_SCHEMA}.workflow_status "
                f"WHERE name = :name AND (status = 'PENDING' AND executor_id = :me "
                f"OR status = 'ENQUEUED' AND queue_name = ANY(:isolated))"),
                {"me": self.executor_id, "name": WORKFLOW,
                 "isolated": [isolated(q) for q in self.queues]}).fetchall()
        mine = [(wid, q or "") for wid, q, status in rows if status == "PENDING"]
        driven = [q for wid, q in mine if wid not in self._waiting]
        if alone:
            return 1 if not driven and len(mine) < self.concurrency else 0
        if any(q.endswith(ISOLATED) for q in driven) or len(mine) < len(rows):
            return 0  # one driven alone here, or one waiting to be
        return self.concurrency - len(mine)

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
                log.warning("worker %s: %s", self.executor_id, _db_words(exc, self.url, "supervision failed"))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stopping.wait(), SUPERVISE_S)

    def _tick(self) -> None:
        from tether.store.postgres.store import _HELD

        import psycopg

        conn = self._liveness
        try:
            if conn is None or conn.closed or conn.broken:
                raise psycopg.OperationalError("the session is gone")
            conn.execute(self.store.q("UPDATE {s}.workers SET heartbeat = extract(epoch FROM clock_timestamp()) "
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
        dead = [r[0] for r in conn.execute(self.store.q(
            f"SELECT DISTINCT w.executor_id FROM {DBOS_SCHEMA}.workflow_status w "
            f"LEFT JOIN {{s}}.workers k ON k.executor_id = w.executor_id "
            f"WHERE w.status = 'PENDING' AND w.name = %s AND w.executor_id <> %s "
            f"AND hashtextextended('tether-worker:' || w.executor_id, %s) NOT IN ({_HELD}) "
            f"AND coalesce(k.heartbeat, 0) < extract(epoch FROM clock_timestamp()) - %s"),
            (WORKFLOW, self.executor_id, _lock_seed(), SILENT_S))]
        for executor in dead:
            self._recover(conn, executor)
        if self.cannot:
            self._note_unbuildable(conn)

    def _recover(self, conn: Any, executor: str) -> None:
        """Hand a dead executor's workflows back to their queues. Its lock, taken here for
        the duration, makes this worker the only one doing it; the list is read again under
        the lock, so workflows another worker recovered a moment ago are left alone.

        A run the dead worker was driving (its owner record, left behind, names that worker)
        has the death counted (:meth:`_death`): it goes back to its queue's isolated twin, or,
        past :attr:`max_recoveries`, is parked as failed and its workflow cancelled. The
        others (queued, waiting for a decision, handed over at a shutdown) go back as they were."""
        from dbos import DBOS

        key = conn.execute("SELECT hashtextextended(%s, %s)", (f"tether-worker:{executor}", _lock_seed())).fetchone()[0]
        if not conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
            return  # alive after all, or another worker is recovering it
        try:
            rows = conn.execute(f"SELECT workflow_uuid, queue_name FROM {DBOS_SCHEMA}.workflow_status "
                                f"WHERE status = 'PENDING' AND name = %s AND executor_id = %s",
                                (WORKFLOW, executor)).fetchall()
            back, parked = [], []
            for workflow_id, queue in rows:
                queue = queue or DEMO_QUEUE
                death = self._death(conn, workflow_id, executor)
                if death == "park":
                    parked.append(workflow_id)
                    continue
                DBOS.resume_workflow(workflow_id, queue_name=isolated(queue) if death else queue)
                back.append(workflow_id)
            if back:
                log.warning("worker %s: worker %s is gone; its %d run(s) went back to their queues: %s",
                            self.executor_id, executor, len(back), ", ".join(back))
            if parked:
                log.error("worker %s: worker %s is gone; run(s) %s %s, and were parked as failed",
                          self.executor_id, executor, ", ".join(parked), GAVE_UP)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (key,))

    def _death(self, conn: Any, run_id: str, executor: str) -> str | None:
        """Count the death of ``executor`` against ``run_id`` if it was driving the run:
        None (it was not: the run goes back as it was), "resume" (to be driven on its own), or
        "park" (the run was parked as failed: no worker takes it again)."""
        try:
            owner = self.store.owner(run_id)
            if owner is None or owner.alive or owner.command != f"tether worker {executor}":
                return None
            state = self.store.load(run_id)
        except (StateError, OSError) as exc:
            log.warning("run %s: %s", run_id, exc)
            return None
        if state.status is not Status.RUNNING:
            return None  # it had stopped (and was saved so) before the worker died
        row = conn.execute(self.store.q("SELECT host, pid, heartbeat FROM {s}.workers WHERE executor_id = %s"),
                           (executor,)).fetchone()
        host, pid, seen = row if row is not None else (owner.host, owner.pid, owner.heartbeat)
        host, pid = host or owner.host, pid or owner.pid
        conn.execute(self.store.q(
            "INSERT INTO {s}.recoveries (run_id, executor_id, host, pid, last_seen, found, by_executor, run_created, "
            "messages) VALUES (%s, %s, %s, %s, %s, extract(epoch FROM clock_timestamp()), %s, %s, %s) "
            "ON CONFLICT (run_id, executor_id) DO NOTHING"),
            (run_id, executor, host, pid, seen, self.executor_id, state.created_at, len(state.messages)))
        deaths = conn.execute(self.store.q(
            "SELECT executor_id, host, pid, coalesce(last_seen, found) FROM {s}.recoveries WHERE run_id = %s "
            "AND run_created = %s AND messages = %s ORDER BY found, executor_id"),
            (run_id, state.created_at, len(state.messages))).fetchall()
        said = "; ".join(f"{i}. worker {e} (pid {p} on {h}), last seen {_when(t)}"
                         for i, (e, h, p, t) in enumerate(deaths, 1))
        recovery = len(deaths)  # the recovery this death asks for
        if recovery <= self.max_recoveries:
            text = (f"worker {executor} (pid {pid} on {host}) died or was lost while driving the run (last seen "
                    f"{_when(seen)}); worker {self.executor_id} hands it back to the queue, to be driven on its own: "
                    f"recovery {recovery} of at most {self.max_recoveries} since the run last made progress")
            log.warning("run %s: %s", run_id, text)
            with contextlib.suppress(StateError, OSError):
                self.store.append_event(run_id, WorkerNote(run_id=run_id, worker=self.executor_id, text=text))
            return "resume"
        reason = (f"{GAVE_UP}: {len(deaths)} workers died or were lost while driving it, with no progress in "
                  f"between ({said}); after {self.max_recoveries} recoveries (the limit set by "
                  f"tether worker --max-recoveries) no worker takes it again")
        if not self._park(run_id, reason):
            return None
        conn.execute(self.store.q("UPDATE {s}.recoveries SET parked = true WHERE run_id = %s AND executor_id = %s"),
                     (run_id, executor))
        return "park"

    def _park(self, run_id: str, reason: str) -> bool:
        """End the run ``failed`` for ``reason`` (saved and traced as any stop), then cancel its
        workflow, so that no worker takes it again. False if the run could not be taken."""
        from dbos import DBOS

        from tether.run.events import RunStopped

        try:
            state, handle = self.store.open(run_id)
        except (StateError, OSError) as exc:
            log.warning("run %s was not parked (it goes back to its queue): %s", run_id, exc)
            return False
        try:
            if state.status is not Status.RUNNING:
                return False
            state.status, state.interruption, state.error = Status.FAILED, None, reason
            state.updated_at = time.time()
            trace = handle.trace()
            trace.write(WorkerNote(run_id=run_id, worker=self.executor_id, text=reason))
            trace.write(RunStopped(run_id=run_id, status=state.status.value, reason=reason, turns=state.turns,
                                   cost_usd=state.cost_usd, interruption=None))
            handle.save(state)
        finally:
            handle.release()
        # After the save: a cancel that did not happen leaves a failed run, which the next
        # worker to take its workflow leaves as it is (a drive step never reopens an ended run).
        DBOS.cancel_workflow(run_id)
        log.error("run %s: %s", run_id, reason)
        return True

    def _note_unbuildable(self, conn: Any) -> None:
        """Say once, in the trace of each queued run whose agent this worker cannot build,
        that it was left for another worker, and why."""
        queues = {q: name for name in self.cannot for q in (queue_for(name, "config"),
                                                            isolated(queue_for(name, "config")))}
        rows = conn.execute(f"SELECT workflow_uuid, queue_name FROM {DBOS_SCHEMA}.workflow_status "
                            f"WHERE status = 'ENQUEUED' AND name = %s AND queue_name = ANY(%s)",
                            (WORKFLOW, list(queues))).fetchall()
        for run_id, queue in rows:
            if run_id in self._noted:
                continue
            self._noted.add(run_id)
            name = queues[queue]
            text = (f"worker {self.executor_id} (pid {os.getpid()} on {socket.gethostname()}) cannot run agent "
                    f"{name}: {self.cannot[name]}; the run waits for a worker that can")
            log.warning("run %s: %s", run_id, text)
            with contextlib.suppress(StateError, OSError):
                self.store.append_event(run_id, WorkerNote(run_id=run_id, worker=self.executor_id, text=text))

    # ---- the drive step ----
    def harness(self) -> Harness:
        from tether.harness import Harness, tether_home

        with self._harness_lock:
            if self._harness is None:
                self._harness = Harness(workspace=tether_home() / "workspace", config=self.config,
                                        store=self.store)
            return self._harness

    async def drive(self, run_id: str, decision: dict[str, Any] | None) -> dict[str, Any]:
        """Run the run until it stops, once no other live process holds it; with a decision,
        apply it first (unless it was applied before a crash). A run that had stopped on its
        own before (a Stop, a cap, an answer) is left as it is."""
        try:
            return await self._drive(run_id, decision)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.error("run %s: worker %s could not drive it: %s", run_id, self.executor_id, exc)
            raise

    async def _drive(self, run_id: str, decision: dict[str, Any] | None) -> dict[str, Any]:
        from tether.store.protocol import call

        harness = self.harness()
        announced = False
        while True:
            owner = await call(self.store, self.store.owner, run_id)
            if owner is not None and owner.alive:
                if not announced:  # a zombie, or a person's resume: never two drivers at once
                    log.warning("run %s is held by pid %s on %s; worker %s waits until it lets go", run_id,
                                owner.pid, owner.host, self.executor_id)
                    announced = True
                await asyncio.sleep(HELD_WAIT_S)
                continue
            state = await call(self.store, self.store.load, run_id)
            program = programs.is_program(state)  # a paused openai-agents run (tether.integrations.on_workers)
            operate = programs.operation(harness, state, decision) if program else \
                self._operation(harness, state, decision)
            if operate is None:
                return _outcome(state)
            try:  # imports its modules: off the loop
                await asyncio.to_thread(programs.builds if program else harness.agent_of, state)
            except StateError as exc:
                return await self._unbuildable(state, str(exc))
            try:
                outcome = await operate()
            except StateError:
                now = await call(self.store, self.store.owner, run_id)
                if now is not None and now.alive:
                    continue  # taken between our look and our open: wait for it
                raise
            return _outcome(outcome.state)

    def _operation(self, harness: Harness, state: RunState, decision: dict[str, Any] | None) -> Any:
        run_id = state.run_id
        waiting = state.interruption if isinstance(state.interruption, NeedsApproval) else None
        if state.status is Status.RUNNING or _shut_down(state) \
                or (waiting is not None and waiting.call_id in state.approvals):
            # (The last: the decision was saved, and the worker died before the run went on.)
            return lambda: harness.run(run_id)
        if decision is not None and isinstance(state.interruption, NeedsApproval) \
                and state.interruption.call_id == decision.get("call_id") \
                and state.interruption.call_id not in state.approvals:
            decided = dict(call_id=decision.get("call_id"), by=decision.get("by") or "operator",
                           rule=decision.get("rule"))
            if decision.get("kind") == "approve":
                return lambda: harness.approve(run_id, decision.get("text") or "", args=decision.get("args"), **decided)
            return lambda: harness.reject(run_id, decision.get("text") or "", **decided)
        return None

    async def _unbuildable(self, state: RunState, why: str) -> dict[str, Any]:
        from tether.store.protocol import call

        text = f"worker {self.executor_id} cannot build the run's agent, so it did not start it: {why}"
        log.warning("run %s: %s", state.run_id, text)
        with contextlib.suppress(StateError, OSError):
            await call(self.store, self.store.append_event, state.run_id,
                       WorkerNote(run_id=state.run_id, worker=self.executor_id, text=text))
        return _outcome(state, unbuildable=why)


def _when(epoch: float | None) -> str:
    if epoch is None:
        return "at an unknown time"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(epoch)) + f".{int(epoch % 1 * 1000):03d} UTC"


def _lock_seed() -> int:
    from tether.store.postgres.store import LOCK_SEED

    return LOCK_SEED


# ---- the command -----------------------------------------------------------------------------

def serve(url: str, *, concurrency: int = 1, config: Config | None = None,
          max_recoveries: int = MAX_RECOVERIES) -> int:
    """``tether worker``: run queued runs until SIGINT or SIGTERM; then cancel what runs here
    (saved as interrupted by the shutdown, for the next worker to go on with) and exit 0."""
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("dbos").setLevel(os.environ.get("TETHER_DBOS_LOG", "ERROR"))
    logging.getLogger("httpx").setLevel(logging.WARNING)
    worker = Worker(url, concurrency=concurrency, config=config, max_recoveries=max_recoveries)
    try:
        worker.start()
        print(f"worker {worker.executor_id} (pid {os.getpid()}) on {worker.store.where}: queues "
              + ", ".join(worker.queues), file=sys.stderr, flush=True)
        for name, why in worker.cannot.items():
            print(f"worker {worker.executor_id}: cannot run agent {name}: {why}", file=sys.stderr, flush=True)

        async def main() -> None:
            stopping = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, stopping.set)
            await worker.supervise(stopping)

        asyncio.run(main())
    finally:
        worker.stop()
    return 1 if worker.superseded else 0


def config_path(path: Path | None) -> Path | None:
    from tether.agents.config import find_config

    return find_config(path)


def submit(url: str, agent_name: str, prompt: str | None = None, *, config: Config | None = None,
           run_id: str | None = None, base_url: str | None = None, auto_approve: list[str] | None = None,
           workspace: Path | None = None, deadline: dict[str, Any] | None = None) -> tuple[RunState, str]:
    """Create a run of ``agent_name`` (from the agent file, else a demo scenario) in the
    store at ``url`` and put it on its agent's queue; returns the run and the queue. The
    agent is built here once, so that the run saves its reference (a worker rebuilds it)."""
    from dataclasses import replace

    from tether.demo import agents as demo
    from tether.harness import Harness, tether_home
    from tether.store.postgres.store import PgStore

    if config is not None and agent_name in config.names:
        agent = config.agent(agent_name)
        if base_url:
            raise ValueError("--base-url does not apply to --agent from the agent file: the file says where its model is")
    elif demo.is_scenario(agent_name):
        agent = demo.agent(agent_name, workspace or tether_home() / "workspace", base_url=base_url)
    else:
        known = ", ".join([*(config.names if config is not None else []), *demo.scenarios()])
        raise ValueError(f"no agent {agent_name!r} (agents: {known})")
    store = PgStore(url)
    try:
        harness = Harness(store=store, config=config)
        policies = agent.policies
        if auto_approve:
            policies = replace(policies, auto_approve=list(auto_approve))
        if deadline:  # --decision-deadline / --on-deadline
            policies = replace(policies, **deadline)
        state = harness.create(agent, prompt, run_id=run_id, policies=policies)
        queue = enqueue(url, state)
    finally:
        store.close()
    return state, queue


def submit_command(args: Any) -> int:
    """``tether submit``: print the run id at once (``--json``: id, queue, agent)."""
    import json

    from tether.agents.config import load_config

    url = _store_url(args)
    path = config_path(args.config)
    config = load_config(path) if path is not None else None
    from tether.approvals.commands import deadline_policy

    deadline = deadline_policy(getattr(args, "decision_deadline", None), getattr(args, "on_deadline", None))
    state, queue = submit(url, args.agent, args.prompt, config=config, run_id=args.run_id, base_url=args.base_url,
                          auto_approve=args.auto_approve, workspace=args.workspace, deadline=deadline)
    if args.json:
        print(json.dumps({"run_id": state.run_id, "queue": queue, "agent": args.agent, "status": "queued"}))
    else:
        print(state.run_id)
    return 0


def worker_command(args: Any) -> int:
    """``tether worker``."""
    from tether.agents.config import load_config

    url = _store_url(args)
    path = config_path(args.config)
    config = load_config(path) if path is not None else None
    max_recoveries = getattr(args, "max_recoveries", None)
    return serve(url, concurrency=args.concurrency, config=config,
                 max_recoveries=MAX_RECOVERIES if max_recoveries is None else max_recoveries)


def _store_url(args: Any) -> str:
    url = getattr(args, "store", None) or os.environ.get("TETHER_STORE")
    if not url or not re.match(r"^postgres(ql)?://", url):
        raise ValueError("workers need the PostgreSQL store: give --store postgresql://USER@HOST/DB "
                         "(or set TETHER_STORE)")
    return url

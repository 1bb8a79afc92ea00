"""The DBOS workflow of a run and its drive step, registered once per process.

``tether.run(run_id)`` drives the run (one step), then, while the run waits for an
approval, waits durably for a decision (``DBOS.recv_async``) and drives it again. The
names are the ones in :mod:`tether.workers.names`: workflows queued by any earlier worker
recover through this same code. The step itself is :func:`tether.workers.drive.drive`; the
worker it runs in is the one :func:`attach`-ed here (one per process).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from tether.workers import drive as driving
from tether.workers.names import DECISION_TOPIC, DRIVE_STEP, WORKFLOW
from tether.store.protocol import SaveError, StoreUnavailable

if TYPE_CHECKING:
    from tether.workers.host import Host

log = logging.getLogger("tether.workers.worker")
DECISION_WAIT_S = 3600.0  # one recv's timeout; the workflow waits again after it, for as long as it takes


_WORKER: Host | None = None


def attach(worker: Host | None) -> None:
    """Make ``worker`` the one this process's drive steps and queue gate use (None: no more)."""
    global _WORKER
    _WORKER = worker


def current() -> Host | None:
    """The worker of this process, if one was started (read at each call: it changes)."""
    return _WORKER


def _registered() -> tuple[Any, Any]:
    """The workflow and its step, registered with DBOS once per process (on first use, so
    importing this module costs nothing to a process that only submits or reads)."""
    global _REGISTERED
    if _REGISTERED is not None:
        return _REGISTERED
    # lazy: optional dependency (the [workers] extra; tests/processes/test_cold_start.py keeps DBOS out of the quick commands)
    from dbos import DBOS

    # The database going away (a restart, a failover) fails a save or an open: the step is
    # tried again, and resumes the run from its last committed step once the database is back.
    @DBOS.step(name=DRIVE_STEP, retries_allowed=True, interval_seconds=1.0, backoff_rate=2.0,
               max_attempts=DRIVE_ATTEMPTS, should_retry=_store_trouble)
    async def drive(run_id: str, decision: dict[str, Any] | None) -> dict[str, Any]:
        assert _WORKER is not None, "a drive step outside a worker"
        return await driving.drive(_WORKER, run_id, decision)

    # No cap here: resume_workflow, the recovery path, resets DBOS's count. Tether caps the
    # recoveries itself (tether.workers.recovery, MAX_RECOVERIES), counting in its own table.
    @DBOS.workflow(name=WORKFLOW, max_recovery_attempts=None)
    async def run(run_id: str) -> dict[str, Any]:
        outcome = await drive(run_id, None)
        while outcome.get("waiting"):
            decision = await _await_decision(run_id, outcome["waiting"])
            if decision is None:
                break  # stopped while waiting: the stopper ended the run on the store
            outcome = await drive(run_id, decision)
        return outcome

    async def _await_decision(run_id: str, call_id: str) -> dict[str, Any] | None:
        waiting = _WORKER.waiting if _WORKER is not None else set()
        waiting.add(run_id)  # drives nothing meanwhile (Worker.room)
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
    trouble = isinstance(exc, (SaveError, StoreUnavailable))
    if trouble:
        log.warning("%s; the worker tries again", exc)
    return trouble


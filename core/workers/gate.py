"""``--concurrency N`` as this process's: N runs at once across all its queues.

DBOS counts a queue's concurrency per queue and shares it among the queue's workers; the
gate wraps two of DBOS's methods so that a worker claims only the room it has, counted
over all its queues, and drives a recovered run (an isolated queue's) alone.
"""

from __future__ import annotations

from typing import Any

from tether.workers.names import ISOLATED
from tether.workers.workflow import current
import copy
import inspect

_GATE_INSTALLED: bool | None = None


def _install_gate() -> bool:
    """Make DBOS's dequeue ask this process's :class:`~tether.workers.worker.Worker` how many
    runs it may take.

    DBOS 3.4.0 keeps ``worker_concurrency`` in the queue's row, shared by every worker of the
    queue, and counts it per queue. Two methods of its system database are wrapped, for this
    worker's own queues only: ``get_queue`` (which the queue threads reload every poll) gives
    this worker's ``--concurrency`` instead of the row's (plus its workflows waiting for a
    decision, which DBOS counts as running and Tether does not), and ``start_queued_workflows`` (the
    claim) claims at most the room :meth:`~tether.workers.worker.Worker.room` leaves, under one lock for the
    process, so two queues' threads never claim the same slot. False (and nothing wrapped)
    when DBOS's methods are not the ones this was written against."""
    global _GATE_INSTALLED
    if _GATE_INSTALLED is not None:
        return _GATE_INSTALLED

    # lazy: optional dependency (the [workers] extra; tests/processes/test_cold_start.py keeps DBOS out of the quick commands)
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
        worker = current()
        if queue is not None and worker is not None and getattr(self, "executor_id", None) == worker.executor_id \
                and name in worker.listened:
            # DBOS checks this against every workflow active here, those waiting for a decision
            # among them, before it claims; they hold no slot (Worker.room), so they are added
            # here, and the claim below is held to the room there is.
            limit = 1 if name.endswith(ISOLATED) else worker.concurrency
            _set_worker_concurrency(queue, limit + len(worker.waiting))
        return queue

    def gated_claim(self: Any, queue: Any, executor_id: str, app_version: str, partition: Any,
                    local_running_count: int = 0, partition_local_running_count: int = 0, **kwargs: Any) -> Any:
        worker = current()
        if worker is None or executor_id != worker.executor_id or partition is not None \
                or queue.name not in worker.listened:
            return claim(self, queue, executor_id, app_version, partition, local_running_count,
                         partition_local_running_count, **kwargs)
        with worker.claiming:
            room = worker.room(self, queue.name)
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
        # lazy: optional dependency (the [workers] extra; tests/processes/test_cold_start.py keeps DBOS out of the quick commands)
        from dbos._dbos import _get_dbos_instance

        return set(_get_dbos_instance()._active_workflows_set.activeList())
    except Exception:
        return None

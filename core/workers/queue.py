"""Putting a run on its agent's queue, for a worker to take: what ``tether submit`` does once
it made the run (:mod:`tether.workers.submit`), and what a decision on a paused program's
run does (:mod:`tether.workers.decide`). Apart from submitting, which builds runs with a
harness: a decision sent to the queue needs none, and the harness reaches the workers'
decisions through :mod:`tether.actions` (a harness here would make that a circle).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tether.vocab.state import RunState, StateError
from tether.workers.database import _db_words, client, close_client, ensure_dbos_schema
from tether.workers.names import APP_VERSION, WORKFLOW, queue_of_run

if TYPE_CHECKING:
    from tether.store.protocol import Store

__all__ = ["enqueue"]


def enqueue(store: Store, state: RunState, dbos_client: Any = None) -> str:
    """Put an existing run of ``store`` on its agent's queue; the workflow id is the run id, so doing it
    twice gives the same workflow. Returns the queue's name. ``dbos_client`` (from
    :func:`~tether.workers.database.client`) saves a connection per call when enqueueing many."""
    # lazy: optional dependency (the [workers] extra; tests/processes/test_cold_start.py keeps DBOS out of the quick commands)
    from dbos import EnqueueOptions

    queue = queue_of_run(state)
    own = dbos_client is None
    if own:
        ensure_dbos_schema(store)
        dbos_client = client(store.spec)
    try:
        options: EnqueueOptions = {"workflow_name": WORKFLOW, "queue_name": queue, "workflow_id": state.run_id,
                                   "app_version": APP_VERSION}
        dbos_client.enqueue(options, state.run_id)
    except Exception as exc:
        raise StateError(_db_words(exc, store, f"run {state.run_id} was created but could not be queued "
                                   f"(tether resume {state.run_id} runs it here)")) from None
    finally:
        if own:
            close_client(dbos_client)
    return queue

"""The worker as the modules below it see it: what a drive step, a recovery, the workflow and
the queue gate ask of the one worker of this process.

:class:`tether.workers.worker.Worker` is the only implementation. It imports those modules to
run them, so they take it through this Protocol instead of importing it back.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from tether.harness import Harness
    from tether.store.protocol import Store, Tables


class Host(Protocol):
    executor_id: str
    concurrency: int  # runs at once in this process, across its queues (--concurrency)
    max_recoveries: int  # deaths a run may cause before it is parked as failed
    store: Store
    tables: Tables  # the store's database: workers exist on PostgreSQL alone (Store.workers)
    claiming: threading.Lock  # one claim at a time in this process, whatever the queue
    waiting: set[str]  # runs whose workflow waits here for a decision: they hold no slot

    @property
    def listened(self) -> list[str]: ...

    def harness(self) -> Harness: ...

    def room(self, sys_db: Any, queue: str) -> int: ...

"""What a run changed, as it changes: :func:`live_changes` yields the run's
:class:`~tether.workspaces.changes.Changes` at once, then again after each write in its
workspace, whoever made it (the agent's file tools, a shell command, a build).

The writes are pushed by the kernel (inotify, through ``watchfiles``' notifier, as the runs
dir is watched: :mod:`tether.store.files.watch`), never polled. The watches are set up and
waited on in a worker thread of the watch's own (a workspace of 10,000 files has hundreds of
folders to watch), and the git reads are asyncio subprocesses: the event loop goes on
throughout. The notifier keeps collecting while the changes are read, so a burst of writes
costs one reading after it, not one per write, and nothing written meanwhile is missed.

Git's own files (``.git``, a worktree's link to its repository) are left out: what a run
changed is read from the files, and Tether's private index lives outside the workspace, so
its reading never wakes the watch again.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import AsyncIterator
from typing import Any

from watchfiles._rust_notify import RustNotify

from tether.vocab.state import RunWorkspace
from tether.workspaces.changes import Changes, changes

DEBOUNCE_MS = 50
"""How long a burst of writes may go on before it is reported anyway: a file saved in pieces is
read once, well inside the second a write may take to show."""
STEP_MS = 10
"""How often the watch's thread looks for the end of a burst, and for the stop."""


def _not_git(path: str) -> bool:
    return f"{os.sep}.git{os.sep}" not in path and not path.endswith(f"{os.sep}.git")


class _Watch:
    """The blocking notifier, on a thread of its own; :meth:`close` returns once it has ended."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.halt = threading.Event()
        self.notify: Any = None
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="tether-ws-watch")

    def _start(self) -> None:
        self.notify = RustNotify([self.path], False, False, 300, True, True)

    def _next(self) -> bool:
        """True after a write that is not git's own; False once halted."""
        while True:
            raw = self.notify.watch(DEBOUNCE_MS, STEP_MS, 0, self.halt)
            if raw == "stop":
                return False
            if isinstance(raw, set) and any(_not_git(path) for _, path in raw):
                return True

    async def start(self) -> None:
        await asyncio.wrap_future(self.executor.submit(self._start))

    async def next(self) -> bool:
        return await asyncio.wrap_future(self.executor.submit(self._next))

    def close(self) -> None:
        self.halt.set()  # the call in flight returns within a step
        self.executor.shutdown(wait=True)
        if self.notify is not None:
            self.notify.close()
            self.notify = None


async def live_changes(ws: RunWorkspace, *, ready: asyncio.Event | None = None) -> AsyncIterator[Changes]:
    """``ws``'s changes now, then after every write in it, until the consumer stops (or is
    cancelled: the watch's thread is ended and joined first). ``ready`` is set once the
    watch is in place: a write from then on is reported.
    :class:`~tether.workspaces.git.GitError` when a reading fails, in git's words."""
    assert ws.path is not None
    watch = _Watch(ws.path)
    try:
        await watch.start()
        if ready is not None:
            ready.set()
        yield await changes(ws)
        while await watch.next():
            yield await changes(ws)
    finally:
        await asyncio.to_thread(watch.close)

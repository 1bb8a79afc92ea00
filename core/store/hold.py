"""Holding a run from the event loop: opening it, keeping its owner record's heartbeat, and
letting it go, whatever happens to the task that holds it.

A store may block (the file store, PostgreSQL's): it opens and releases in a thread, shielded,
so a run is never left held by a cancelled task until the process ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence

from tether.vocab.events import Event
from tether.vocab.state import RunState, StateError
from tether.store.owner import HEARTBEAT_S
from tether.store.protocol import Handle, Store, call


async def heartbeat(handle: Handle) -> None:
    """Refresh the owner record's heartbeat while the run is held (shown to operators;
    whether the owner lives is the lock's to say)."""
    while True:
        await asyncio.sleep(HEARTBEAT_S)
        with contextlib.suppress(OSError):
            await call(handle, handle.heartbeat)


async def open_run(store: Store, run_id: str, *, control: str | None = None) -> tuple[RunState, Handle]:
    """:meth:`Store.open` from the event loop. A blocking store opens in a thread, which
    runs to its end even if the awaiting task is cancelled: then what it took is let go of,
    in a thread too, rather than held until the process ends."""
    if not store.blocking:
        return store.open(run_id, control=control)
    opening = asyncio.ensure_future(asyncio.to_thread(store.open, run_id, control=control))
    try:
        return await asyncio.shield(opening)
    except asyncio.CancelledError:
        def let_go(done: asyncio.Future[tuple[RunState, Handle]]) -> None:
            if not done.cancelled() and done.exception() is None:
                asyncio.get_running_loop().run_in_executor(None, done.result()[1].release)

        opening.add_done_callback(let_go)
        raise


async def release(handle: Handle) -> None:
    """Let go of a run, even from a task being cancelled: a blocking store's release runs
    to its end in its thread whatever happens to the awaiting task."""
    if not getattr(handle, "blocking", False):
        handle.release()
        return
    await asyncio.shield(asyncio.to_thread(handle.release))


def amend(store: Store, run_id: str, change: Callable[[RunState], Sequence[Event]]) -> bool:
    """Make ``change`` to a run that no process holds, on the store itself (blocking): it is
    opened, changed, its events traced, saved, and let go of. False when a process holds
    it, or it is gone: not this caller's to change."""
    try:
        state, handle = store.open(run_id)
    except (StateError, OSError):
        return False
    try:
        events = change(state)
        if events:
            trace = handle.trace()
            try:
                for event in events:
                    trace.write(event)
            finally:
                trace.close()
            state.updated_at = time.time()
            handle.save(state)
    finally:
        handle.release()
    return True

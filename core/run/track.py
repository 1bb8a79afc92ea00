"""A run of a loop that is not Tether's, opened for the program that reports into it
(:meth:`tether.Harness.track`; the run's side is :class:`tether.run.tracked.TrackedRun`).

The harness holds a program's run as it holds its own: the run's lock, its heartbeat, its
control requests (a Stop reaches the program's signal, a decision its wait). A run that had
ended is not revived by a late reporter; a Stop or a limit inside the block ends the run in a
known way and is not raised out of it; any other exception fails the run and is raised.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from tether.vocab.cancel import CancelSignal
from tether.run.controls import Controls
from tether.run.driver import RunDriver
from tether.store.hold import heartbeat, open_run, release
from tether.vocab.state import NeedsApproval, RunState, StateError, Status, create_new
from tether.run.tracked import Host, RunEnded, TrackedRun, Tracking, new_state, program_of, started
from tether.store.protocol import call


@contextlib.asynccontextmanager
async def track(host: Host, server: Any, hold: Callable[[RunState, Callable[[Any], None], CancelSignal], None],
                let_go: Callable[[str], None], asked: Tracking) -> AsyncIterator[TrackedRun]:
    """The run, held while the block runs, as ``asked``. ``server`` is the store's control
    listener, started; ``hold`` and ``let_go`` tell the harness the run is driven here, and when
    it no longer is. (No tokenizer: a reported run's tokens are the program's.)"""
    run_id, attach = asked.run_id, asked.attach
    if attach:
        if run_id is None:
            raise ValueError("attach names the run to report into: run_id=")
    else:
        fresh = new_state(asked)
        fleet = getattr(host, "fleet", None)
        if fleet is not None:  # a spent fleet budget over the new run: refused in words, nothing made
            await asyncio.to_thread(fleet.refuse_new, host.store, fresh)
        await call(host.store, create_new, host.store.create, fresh,
                   made_up=None if run_id else asked.name.replace("/", "_")[:24])
        run_id = fresh.run_id
    state, handle = await open_run(host.store, run_id, control=server.address)
    signal = CancelSignal()
    controls = Controls(state, handle, signal)
    server.register(run_id, controls.poke)
    beating = asyncio.create_task(heartbeat(handle), name=f"heartbeat {run_id}")
    trace = handle.trace(())
    try:
        if attach and program_of(state) is None:
            raise StateError(f"run {run_id} is not a program's run: it cannot be reported into")
        stopped = state.status is Status.INTERRUPTED and not isinstance(state.interruption, NeedsApproval)
        if state.status in (Status.COMPLETED, Status.FAILED) or (attach and stopped) \
                or state.status in (Status.MAX_TURNS_EXCEEDED, Status.BUDGET_EXCEEDED):
            # A program's run that stopped is not revived by a late reporter (a hook).
            raise StateError(f"run {run_id} has already ended ({state.status.value})")
        resumed = attach and bool(state.messages)
        state.status, state.interruption, state.error = Status.RUNNING, None, None
        run = TrackedRun(host, RunDriver(state, handle, trace, [*host.sinks, *asked.sinks]), controls, signal,
                         asked.cancel)
        hold(state, run.driver.emit, signal)
        await controls.adopt()
        started(run, resumed)
        await run.driver.save()
        try:
            yield run
        except RunEnded as ended:
            await run.close(ended)
        except BaseException as exc:
            await run.close(exc)
            raise
        else:
            if asked.keep_open and not run.ended:
                await run.driver.save()
            else:
                await run.close(None)
    finally:
        beating.cancel()
        server.unregister(run_id)
        let_go(run_id)
        trace.close()
        await release(handle)

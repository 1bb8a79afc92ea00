"""The drive step: what a worker does with a run its workflow hands it.

It waits until no other live process holds the run, then runs it through the ordinary
harness (``run``, or ``approve``/``reject`` with a decision) until it stops, and returns
only the run's status: after a crash the step runs again, and the harness resumes from the
run's last committed step. A run whose agent this worker cannot build is left as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from tether.actions import adopting
from tether.integrations import on_workers as programs
from tether.store.control import ControlRequest
from tether.vocab.events import WorkerNote
from tether.run.loop import SHUTDOWN_REASON
from tether.vocab.state import Cancelled, NeedsApproval, RunState, StateError, Status
from tether.store.protocol import call

if TYPE_CHECKING:
    from tether.harness import Harness
    from tether.workers.host import Host

log = logging.getLogger("tether.workers.worker")
HELD_WAIT_S = 1.0  # a drive step finding its run held by a live process looks again this often


async def drive(worker: Host, run_id: str, decision: dict[str, Any] | None) -> dict[str, Any]:
    """Run the run until it stops, once no other live process holds it; with a decision,
    apply it first (unless it was applied before a crash). A run that had stopped on its
    own before (a Stop, a cap, an answer) is left as it is."""
    try:
        return await _drive(worker, run_id, decision)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.error("run %s: worker %s could not drive it: %s", run_id, worker.executor_id, exc)
        raise

async def _drive(worker: Host, run_id: str, decision: dict[str, Any] | None) -> dict[str, Any]:
    harness = worker.harness()
    announced = False
    while True:
        owner = await call(worker.store, worker.store.owner, run_id)
        if owner is not None and owner.alive:
            if not announced:  # a zombie, or a person's resume: never two drivers at once
                log.warning("run %s is held by pid %s on %s; worker %s waits until it lets go", run_id,
                            owner.pid, owner.host, worker.executor_id)
                announced = True
            await asyncio.sleep(HELD_WAIT_S)
            continue
        state = await call(worker.store, worker.store.load, run_id)
        program = programs.is_program(state)  # a paused openai-agents run (tether.integrations.on_workers)
        operate = programs.operation(harness, state, decision) if program else \
            _operation(harness, state, decision)
        if operate is None:
            return _outcome(state)
        try:  # imports its modules: off the loop
            await asyncio.to_thread(programs.builds if program else harness.agent_of, state)
        except StateError as exc:
            return await _unbuildable(worker, state, str(exc))
        try:
            outcome = await operate()
        except StateError:
            now = await call(worker.store, worker.store.owner, run_id)
            if now is not None and now.alive:
                continue  # taken between our look and our open: wait for it
            raise
        return _outcome(outcome.state)

def _operation(harness: Harness, state: RunState, decision: dict[str, Any] | None) -> Any:
    run_id = state.run_id
    waiting = state.interruption if isinstance(state.interruption, NeedsApproval) else None
    if state.status is Status.RUNNING or _shut_down(state) \
            or (waiting is not None and waiting.call_id in state.approvals):
        # (The last: the decision was saved, and the worker died before the run went on.)
        return lambda: harness.run(run_id)
    if decision is not None and isinstance(state.interruption, NeedsApproval) \
            and state.interruption.call_id == decision.get("call_id") \
            and state.interruption.call_id not in state.approvals:
        request = ControlRequest.from_dict(decision)  # as the decider sent it (tether.workers.decide)
        return lambda: adopting.adopt(harness, run_id, request)  # decided at its ts, before now
    return None

async def _unbuildable(worker: Host, state: RunState, why: str) -> dict[str, Any]:
    text = f"worker {worker.executor_id} cannot build the run's agent, so it did not start it: {why}"
    log.warning("run %s: %s", state.run_id, text)
    with contextlib.suppress(StateError, OSError):
        await call(worker.store, worker.store.append_event, state.run_id,
                   WorkerNote(run_id=state.run_id, worker=worker.executor_id, text=text))
    return _outcome(state, unbuildable=why)



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

"""Deciding and stopping from the web: the path ``tether approve|reject|stop`` takes.

A decision is first handed to whoever holds the run waiting for it (a queue worker's
workflow, or the process that runs it: :func:`tether.actions.control.deliver`). When
nobody holds it, this server goes on with the run itself (:func:`tether.actions.adopting.adopt`),
as ``tether approve`` does in its own process, and as the console does: the run's lock
decides who wins, and the loser is told in words.

Before anything is handed on, the call the page showed must still be the one waiting, with
the same arguments (their hash, as decisions are bound to): a page that is a minute old
never approves a call it did not show.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass
from typing import Any, Literal

from tether.actions import adopting, control
from tether.vocab.cancel import CancelSignal
from tether.approvals.decisions import already_decided
from tether.store.control import ControlReply, ControlRequest
from tether.store.protocol import call
from tether.vocab.state import NeedsApproval, RunState, StateError, Status, args_hash

log = logging.getLogger(__name__)
SHUTDOWN_GRACE_S = 10.0  # a run this server goes on with is stopped in words, then given this long to save
Verdict = Literal["approve", "reject"]


@dataclass(frozen=True, slots=True)
class Answer:
    """What a decision or a Stop did, in words, and the HTTP status that says the same."""

    ok: bool
    words: str
    status: int = 200


def stale_words(state: RunState, call_id: str, bound_hash: str | None) -> str | None:
    """Why a decision on ``call_id`` (with arguments hashing to ``bound_hash``) can no longer
    be taken, in words, or None when that call still waits with those arguments."""
    waiting = state.interruption
    if isinstance(waiting, NeedsApproval) and waiting.call_id == call_id and state.status in (
            Status.INTERRUPTED, Status.RUNNING):
        if bound_hash is not None and args_hash(waiting.args) != bound_hash:
            return (f"the arguments of {waiting.tool_name} ({call_id}) are not the ones shown: the call changed "
                    "since; nothing was decided")
        return None
    decision = state.approvals.get(call_id)
    if decision is not None and decision.complete:
        return already_decided(decision)
    return f"run {state.run_id} no longer waits for call {call_id} (it is {state.status.value}); nothing was decided"


class Decider:
    """Decisions and Stops of one server, with the runs it went on with (stopped and awaited
    at shutdown: :meth:`aclose`)."""

    def __init__(self, harness: Any) -> None:
        self.harness = harness
        self.store = harness.store
        self._runs: dict[str, tuple[asyncio.Task[Any], CancelSignal]] = {}

    async def decide(self, run_id: str, call_id: str, verdict: Verdict, text: str, *, by: str,
                     bound_hash: str | None = None, args: str | None = None) -> Answer:
        try:
            state = await call(self.store, self.store.load, run_id)
        except StateError as exc:
            return Answer(False, str(exc), 404)
        stale = stale_words(state, call_id, bound_hash)
        if stale is not None:
            return Answer(False, stale, 409)
        # ``by`` is the web login's user (or a bearer link): what authenticated the decision,
        # so it is the account too; a call that needs two people needs two logins.
        request = ControlRequest(verdict, text, call_id=call_id, by=by, args=args, account=by)
        try:
            reply = await control.deliver(self.store, run_id, request)
        except (StateError, OSError) as exc:
            return Answer(False, str(exc), 409)
        if reply is not None:
            return _answer(reply)
        return await self._go_on(run_id, request)

    async def stop(self, run_id: str, reason: str, *, by: str) -> Answer:
        """``tether stop``: this server's own run, a queue worker's wait, else the run's own process."""
        try:
            return _answer(await control.stop(self.store, run_id, reason or "stopped from the web page", by=by,
                                              here=self.harness.stop_here))
        except control.NoRun as exc:
            return Answer(False, str(exc), 404)
        except (StateError, OSError) as exc:
            return Answer(False, str(exc), 409)

    def driving(self, run_id: str) -> bool:
        return run_id in self._runs

    async def _go_on(self, run_id: str, request: ControlRequest) -> Answer:
        """Nobody holds the run: decide on it here and go on with it in the background; the
        answer comes as soon as the decision is recorded (or refused)."""
        if run_id in self._runs:
            return Answer(False, f"this server is deciding or running {run_id} already; nothing more was done", 409)
        loop = asyncio.get_running_loop()
        recorded: asyncio.Future[Any] = loop.create_future()

        def sink(event: Any) -> None:  # this decision's record (not a deadline's, applied instead of it)
            if event.run_id == run_id and event.kind == "approval_decision" and event.by == request.by \
                    and not recorded.done():
                recorded.set_result(event)

        signal = CancelSignal()
        task = asyncio.create_task(adopting.adopt(self.harness, run_id, request, signal=signal, sinks=[sink]),
                                   name=f"tether serve: run {run_id}")
        self._runs[run_id] = (task, signal)
        task.add_done_callback(lambda t: self._ended(run_id, t))
        try:
            await asyncio.wait({recorded, task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not recorded.done():
                recorded.cancel()
        if recorded.done() and not recorded.cancelled():
            event = recorded.result()
            return Answer(True, _recorded_words(run_id, event))
        exc = task.exception() if not task.cancelled() else None
        if exc is None:
            return Answer(True, f"decided; run {run_id} went on and is now {task.result().state.status.value}")
        if isinstance(exc, StateError):  # refused before anything changed: another decided or holds it
            return Answer(False, await self._lost_words(run_id, request, str(exc)), 409)
        return Answer(False, f"run {run_id} could not go on: {type(exc).__name__}: {exc}", 500)

    async def _lost_words(self, run_id: str, request: ControlRequest, words: str) -> str:
        """Words for a decision that lost the race to another one (else the refusal's own)."""
        with contextlib.suppress(StateError, OSError):
            state = await call(self.store, self.store.load, run_id)
            decision = state.approvals.get(request.call_id or "")
            if decision is not None and decision.complete:
                return already_decided(decision)
        return words

    def _ended(self, run_id: str, task: asyncio.Task[Any]) -> None:
        self._runs.pop(run_id, None)
        if not task.cancelled() and task.exception() is not None and not isinstance(task.exception(), StateError):
            log.warning("run %s, which this server went on with, failed: %s", run_id, task.exception())

    async def settled(self) -> None:
        """Until every run this server went on with has stopped (each as it stops: a Stop,
        its answer, or another approval to wait for)."""
        while self._runs:
            await asyncio.wait([task for task, _ in self._runs.values()])

    async def aclose(self) -> None:
        """Stop, in words, every run this server goes on with, and wait for each to save."""
        runs = list(self._runs.values())
        for _, signal in runs:
            signal.cancel("tether serve stopped", "tether serve")
        tasks = [task for task, _ in runs]
        if not tasks:
            return
        done, late = await asyncio.wait(tasks, timeout=SHUTDOWN_GRACE_S)
        for task in late:
            task.cancel()
        for task in [*done, *late]:
            with contextlib.suppress(BaseException):
                await task


def _recorded_words(run_id: str, event: Any) -> str:
    if event.verdict == "pending":
        return f"approved by {event.by}: {event.tally} approvals; the call waits for another person"
    verb = "approved" if event.verdict == "approved" else "rejected"
    return f"{event.tool} {verb} by {event.by}; run {run_id} goes on"


def _answer(reply: ControlReply) -> Answer:
    return Answer(reply.ok, reply.words, 200 if reply.ok else 202 if reply.pending else 409)

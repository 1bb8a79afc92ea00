"""What the process holding a run does with the run's control requests, and with decisions.

Any process may ask for a run (``tether stop``, ``approve``, a console, a web page): the request
is appended to the run's control channel and the holding process is poked
(:func:`tether.store.operate.request`). :class:`Controls` is that process's side, for one run:
a Stop fires the run's signal; a decision is handed to the wait for one, when the run waits,
after :func:`vet_decision`; anything else is answered in words. The harness (Tether's own
loop, an ACP agent's) and a tracked program's run (:mod:`tether.run.tracked`) both hold one.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from tether.vocab import people
from tether.approvals import budget_ask
from tether.approvals.deadlines import lapse
from tether.approvals.holding import late_words, too_late
from tether.vocab.cancel import CancelSignal
from tether.approvals.decisions import TooLate, already_decided, approve, check_edit, end_waiting, reject
from tether.vocab.state import NeedsApproval, RunState, StateError, Status, pending_calls
from tether.store.control import ControlReply, ControlRequest
from tether.store.protocol import Handle, call

if TYPE_CHECKING:
    from tether.agents.tools.base import Tool

STOP_REASON = "operator pressed Stop"


class Controls:
    """What the process running one run does with its control requests: a Stop fires the
    run's signal; a decision is handed to the wait for one, if the run waits; anything else
    is answered in words. Requests are handled in the order they were made, once."""

    def __init__(self, state: RunState, handle: Handle, signal: CancelSignal) -> None:
        self.state = state
        self.handle = handle
        self.signal = signal
        self.replies: dict[str, ControlReply] = {}
        self._waiting: NeedsApproval | None = None
        self._decision: asyncio.Future[ControlRequest | None] | None = None
        self._decided: ControlRequest | None = None
        # Checks a decision against what the agent asks (an ACP option that it does not offer):
        # words to refuse it with, or None.
        self.vet: Callable[[ControlRequest], str | None] | None = None
        # Applies a report from a reporter that could not hold the run (a program's run: a
        # parallel hook of Claude Code's, :mod:`tether.run.tracked`); None: the run takes none.
        self.report: Callable[[ControlRequest], Awaitable[ControlReply]] | None = None

    async def poke(self, request_id: str) -> ControlReply:
        await self.process()
        return self.replies.get(request_id, ControlReply(False, f"no request {request_id} for this run"))

    async def adopt(self) -> None:
        """A run saved as running was orphaned: the requests its dead process never handled
        apply now (a Stop stops it at once). Any other run had stopped before they came, so
        they are answered and dropped."""
        if self.state.status is Status.RUNNING:
            await self.process()
        else:
            await self.close()

    async def _unseen(self) -> list[ControlRequest]:
        """The requests not handled yet. A blocking store reads in a thread, so two pokes may
        read at once: what the other counted meanwhile is skipped, never handled twice."""
        seen = self.state.control_seen
        requests = await call(self.handle, self.handle.control_read, seen)
        return requests[self.state.control_seen - seen:]

    async def process(self) -> None:
        for request in await self._unseen():
            self.state.control_seen += 1
            if request.kind == "report":
                self.replies[request.id] = (await self.report(request) if self.report is not None else ControlReply(
                    False, f"run {self.state.run_id} is not a program's run: nothing can be reported into it"))
                continue
            self.replies[request.id] = self._handle(request)

    async def close(self) -> None:
        """The run is no longer driven here: answer what is left, apply none of it."""
        for request in await self._unseen():
            self.state.control_seen += 1
            self.replies[request.id] = ControlReply(
                False, f"run {self.state.run_id} had already stopped ({self.state.status.value})")

    def _handle(self, request: ControlRequest) -> ControlReply:
        run_id = self.state.run_id
        if request.kind == "stop":
            if self.signal.cancelled:
                return ControlReply(True, f"run {run_id} is already stopping")
            self.signal.cancel(request.text or STOP_REASON, request.by, stop=True)
            waiting = self._waiting if self._decision is not None and not self._decision.done() else None
            if waiting is not None:  # the wait ends with the signal, and the run with it
                return ControlReply(True, f"run {run_id} stops now (pid {os.getpid()}); {waiting.tool_name} "
                                          f"({waiting.call_id}), which waited for a decision, is declined in words")
            return ControlReply(True, f"run {run_id} stops now (pid {os.getpid()})")
        if request.kind not in ("approve", "reject"):  # never taken for a decision
            return ControlReply(False, f"a control request of unknown kind {request.kind!r}: nothing was done")
        verdict = "approved" if request.kind == "approve" else "rejected"
        waiting = self._waiting
        if self._decided is not None:
            done = "approved" if self._decided.kind == "approve" else "rejected"
            if done == "approved" and waiting is not None and len(waiting.approvers) + 1 < waiting.needed:
                return ControlReply(False, f"{self._decided.by}'s approval of {waiting.tool_name} "
                                            f"({len(waiting.approvers) + 1} of {waiting.needed}) is being recorded: "
                                            "decide again in a moment")
            return ControlReply(False, f"already decided: {done} by {self._decided.by}; "
                                        "there is one decision per call")
        earlier = (self.state.approvals.get(request.call_id) if request.call_id
                   else max(self.state.approvals.values(), key=lambda d: d.ts, default=None))
        if earlier is not None and (waiting is None or earlier.call_id == waiting.call_id) \
                and not (waiting is not None and not earlier.complete):
            return ControlReply(False, already_decided(earlier))
        if waiting is None or self._decision is None or self._decision.done():
            return ControlReply(False, f"run {run_id} is not waiting for a decision (it is running)")
        if request.call_id and request.call_id != waiting.call_id:
            return ControlReply(False, f"run {run_id} waits for a decision on {waiting.call_id}, "
                                        f"not {request.call_id}")
        if too_late(waiting, request.ts):  # this process's own wait ends at the deadline, and applies it
            return ControlReply(False, late_words(waiting, request.ts, run_id))
        if (request.option is not None or request.silent) and self.vet is None:
            return ControlReply(False, f"run {run_id} is not an ACP agent's: --option and --silent apply "
                                        "to an ACP agent's permission requests only")
        problem = repeated(waiting, request) or (self.vet(request) if self.vet is not None else None)
        if problem:
            return ControlReply(False, problem)
        decided = replace(request, call_id=waiting.call_id)
        self._decided = decided
        self._decision.set_result(decided)
        if request.kind == "approve" and len(waiting.approvers) + 1 < waiting.needed:
            names = (*waiting.approvers, request.by)
            accounts = (*people.padded(waiting.approvers, waiting.accounts), request.account or "")
            return ControlReply(True, f"approved {waiting.tool_name} ({waiting.call_id}): "
                                        f"{people.still_needed(waiting.needed, names, accounts)}")
        return ControlReply(True, f"{verdict} {waiting.tool_name} ({waiting.call_id}); "
                                    f"the process running {run_id} (pid {os.getpid()}) goes on")

    def expect(self, waiting: NeedsApproval) -> None:
        """Be ready for a decision on ``waiting`` before anyone can know of it: a decider that
        reads the approval on the store and answers at once (while the run is still being
        saved) is then taken, not told the run is not waiting."""
        self._waiting = waiting
        self._decided = None
        self._decision = asyncio.get_running_loop().create_future()

    async def wait_for_decision(self, waiting: NeedsApproval, timeout_s: float) -> ControlRequest | None:
        """Wait for an approve or reject of ``waiting`` from any process; None after
        ``timeout_s`` (0: forever) or a Stop."""
        if self._waiting != waiting or self._decision is None or self._decision.done() and self._decided is None:
            self.expect(waiting)
        await self.process()  # a decision may have been made before this process got here
        stopped = asyncio.ensure_future(self.signal.wait())
        try:
            done, _ = await asyncio.wait({self._decision, stopped}, timeout=timeout_s or None,
                                         return_when=asyncio.FIRST_COMPLETED)
            return self._decision.result() if self._decision in done else None
        finally:
            stopped.cancel()
            self._waiting = None
            self._decision = None



def apply_decision(state: RunState, request: ControlRequest) -> Any:
    """A decision, made on the run's state: the event that records it."""
    if budget_ask.waits_on_budget(state):  # a spent fleet budget's call, not the model's
        return budget_ask.decide(state, request)
    if request.kind == "approve":
        return approve(state, request.call_id, request.text, request.by, args=request.args, rule=request.rule,
                       account=request.account)
    return reject(state, request.call_id, request.text, request.by, rule=request.rule, account=request.account)


def take_decision(state: RunState, request: ControlRequest,
                  vet: Callable[[], str | None] = lambda: None) -> tuple[list[Any], StateError | None]:
    """A decision on a run no process holds, made on its state (after ``vet``, words that
    refuse it): the events that record what was done, and the refusal to raise once they are
    saved. One made after its call's deadline is not taken, whoever made it: the deadline
    is applied instead (:func:`tether.approvals.deadlines.lapse`), and the refusal says so
    and what it did; a call escalated meanwhile is recorded so, and may still be decided."""
    lapsed = lapse(state, at=request.ts)
    events: list[Any] = [] if lapsed is None else list(lapsed.events)
    if lapsed is not None and not lapsed.waits:
        return events, TooLate(lapsed.words)
    problem = vet()
    if problem:
        return events, StateError(problem)
    events.append(apply_decision(state, request))
    return events, None


def stopped_waiting(state: RunState, signal: CancelSignal) -> list[Any]:
    """A Stop of a run that waits for a decision ends it, its call declined in words: the
    events that record it. None for any other run, or a signal fired by a process shutting
    down (the run is let go of, still waiting, for whoever decides it)."""
    if not signal.ends_wait or not isinstance(state.interruption, NeedsApproval):
        return []
    return end_waiting(state, signal.reason or STOP_REASON, signal.by)


def vet_decision(tools: dict[str, Tool] | None, state: RunState, request: ControlRequest) -> str | None:
    """Why a decision on the waiting call of a Tether run (``tools``: its agent's) or of a
    program's run (None: the schema its program reported) cannot be taken, in words, or None:
    an edit that fails the tool's schema (or that no schema can check), or a person approving
    a two-person call twice."""
    if request.option is not None or request.silent:
        return (f"run {state.run_id} is not an ACP agent's: --option and --silent apply to an ACP agent's "
                "permission requests only")
    if request.kind != "approve":
        return None
    if budget_ask.waits_on_budget(state):
        return budget_ask.check_amount(request.args)
    if request.args is not None:
        problem = check_edit(tools, state, request.call_id, request.args, unchecked=request.unchecked)
        if problem:
            return problem
    waiting = state.interruption
    return repeated(waiting, request) if isinstance(waiting, NeedsApproval) else None


def repeated(waiting: NeedsApproval, request: ControlRequest) -> str | None:
    """Why ``request`` cannot be one more of the people ``waiting`` needs, in words (its
    account, or its name, approved it already: :mod:`tether.vocab.people`), or None."""
    if request.kind != "approve":
        return None
    return people.repeat_words(waiting.tool_name, waiting.call_id, waiting.needed, waiting.approvers,
                               waiting.accounts, request.by, request.account)


def decision_wait(waiting: NeedsApproval, timeout_s: float) -> float:
    """How long to wait for a decision: ``timeout_s`` (0: forever), cut to the call's deadline."""
    if waiting.deadline_at is None:
        return timeout_s
    left = max(0.001, waiting.deadline_at - time.time())
    return left if not timeout_s else min(timeout_s, left)


def past_deadline(waiting: NeedsApproval) -> bool:
    return waiting.deadline_at is not None and time.time() >= waiting.deadline_at


def add_follow_up(state: RunState, message: str) -> None:
    """The operator's next words to the agent, at the end of its transcript. Refused in words
    where they cannot go: nothing said, or a call still waiting for its result."""
    if not message.strip():
        raise StateError("a follow-up needs words: --message TEXT")
    if state.parent_run_id is not None:
        raise StateError(f"run {state.run_id} is a subagent of {state.parent_run_id}: follow up on the parent")
    waiting = pending_calls(state)
    if waiting:
        names = ", ".join(c["function"].get("name", "?") for c in waiting)
        raise StateError(f"run {state.run_id} has a call still waiting for its result ({names}): approve, reject "
                         "or resume it first, then follow up")
    state.messages.append({"role": "user", "content": message})
    state.status, state.interruption, state.error = Status.RUNNING, None, None

"""The run API: a loop that is not Tether's reports into a run on the store.

A program written with another framework (the OpenAI Agents SDK, pydantic-ai, a CLI's
hooks, its own loop) keeps driving its turns. Through :meth:`tether.Harness.track` it opens
a run on the store and says what happens as it happens, and gets what only Tether has:

* the run shows like any other: the console's panes, ``tether watch``, ``show``, ``trace``,
  the OpenTelemetry export, the index row, its owner and heartbeat (so a program that dies
  shows as orphaned);
* ``await run.approval(tool, args)`` puts a pending approval on the store and waits for the
  decision from any console, ``tether approve|reject``, a standing rule or a deadline, bound
  to the call id and the hash of its arguments, decided once;
* Stop from anywhere fires the run's signal: what the program awaits of the run raises
  :class:`Stopped` (a :class:`~tether.vocab.cancel.RunCancelled`), or the task it handed over is
  cancelled, and the run ends ``interrupted`` with the operator's reason;
* limits: each usage report is checked against the turn cap and the budget, and crossing
  one raises :class:`LimitReached` with the run's status (the same five exits).

Tether cannot rebuild a program's loop, so such a run is never offered Resume: the
console and ``tether resume`` say why.

```python
async with harness.track("triage", "Triage ticket 42", source="pydantic-ai") as run:
    await run.usage(prompt_tokens=812, completion_tokens=64, model="gpt-4o-mini")
    decision = await run.approval("close_ticket", {"id": 42})
    ...
    await run.answer("Closed as a duplicate of 17.")
```
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tether.approvals import Call, budget_ask, run_source
from tether.approvals.holding import deadline_of, overdue, verdict_of
from tether.vocab.budget_call import BUDGET
from tether.vocab.cancel import CancelSignal, RunCancelled
from tether.vocab.events import (
    ApprovalDecision, ApprovalRequired, Event, EventSink, RunStarted, TextDelta, ToolResult, ToolStart, Turn,
)
from tether.run.controls import vet_decision
from tether.run.driver import RunDriver
from tether.approvals.decisions import (
    DEADLINE, approve, approved_words, close_on_stop, declined_words, reject, NotASchema, reported_validator,
)
from tether.vocab.prices import price_for
from tether.vocab.state import (
    AgentRef, Cancelled, Decision, Interruption, Limits, MaxBudget, MaxTurns, NeedsApproval, Policies, Pricing,
    RunState, StateError, Status, args_hash, new_run_id,
)
from tether.store.control import ControlReply, ControlRequest
from tether.store.protocol import call

if TYPE_CHECKING:
    from tether.run.controls import Controls
    from tether.store.protocol import Store


class Host(Protocol):
    """What a tracked run needs of the harness that made it (:class:`tether.Harness`): its
    sinks, its store and its standing rules. Typed here, so the run imports nothing above it."""

    sinks: list[EventSink]
    store: Store

    async def _rules(self) -> list[Any]: ...


SOURCES = ("program", "openai-agents", "pydantic-ai", "claude-code")
"""Where a reported run's turns come from, as the console and ``tether runs`` name it."""


class RunEnded(Exception):
    """The run ended while the program was still reporting into it: a Stop or a limit."""

    def __init__(self, status: Status, reason: str, interruption: Interruption | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.interruption = interruption


class Stopped(RunEnded, RunCancelled):
    """Stop from a console, ``tether stop`` or a deadline: the program's loop should end now."""

    def __init__(self, reason: str, by: str | None = None) -> None:
        RunEnded.__init__(self, Status.INTERRUPTED, reason, Cancelled(reason, by))
        self.reason = reason
        self.elapsed_s = 0.0
        self.by = by


class LimitReached(RunEnded):
    """A usage report crossed the run's turn cap or budget."""


@dataclass(frozen=True, slots=True)
class Approval:
    """What was decided on a call the program asked about."""

    approved: bool
    words: str
    """The decision in words, as a model should read it ("The operator bob declined this call: …")."""
    by: str
    """A person's name, ``rule R3``, or ``deadline``."""
    args: dict[str, Any] | None = None
    """The operator's edited arguments, when the call must run with them instead."""


class TrackedRun:
    """One run a program reports into; made by :meth:`tether.Harness.track` (see the module)."""

    def __init__(self, harness: Host, driver: RunDriver, controls: Controls, signal: CancelSignal,
                 task: asyncio.Task[Any] | None) -> None:
        self.harness = harness
        self.driver = driver
        """What emits, saves, checkpoints and finishes the run (:mod:`tether.run.driver`); its
        ``after_change`` is set with the run's own workspace (:mod:`tether.workspaces.tracked`)."""
        self.state = driver.state
        self.signal = signal
        self._controls = controls
        self._text: list[str] = []
        self._started: dict[str, tuple[str, float]] = {}  # call id -> (tool, perf counter)
        self._ended = False
        self._watch: asyncio.Task[None] | None = None
        self._past = 0  # reports of what already happened being applied (nested): no Stop raised
        self.workspace: Path | None = None
        """The folder the program's run works in (``Harness.track(workspace=, isolation=)``)."""
        controls.report = self._reported
        # An edit is checked against the schema the program reported with the call, if any.
        controls.vet = lambda request: vet_decision(None, self.state, request)
        if task is not None:  # a Stop cancels the program's own task too
            self._watch = asyncio.ensure_future(self._cancel_on_stop(task))

    @property
    def run_id(self) -> str:
        return self.state.run_id

    @property
    def ended(self) -> bool:
        return self._ended

    # ---- what the program reports -------------------------------------------------------
    async def user(self, text: str) -> None:
        """The user's (or the operator's) words to the agent."""
        self._check()
        self.state.messages.append({"role": "user", "content": text})
        await self.driver.save()

    async def say(self, text: str) -> None:
        """The agent's words, whole (what :meth:`text` streams, given at once), saved now."""
        self._check()
        self._text.append(text)
        self._flush_text()
        await self.driver.save()

    def text(self, delta: str) -> None:
        """A piece of the agent's reply as it streams (shown live; not saved until the turn)."""
        self._check()
        self._text.append(delta)
        self.driver.emit(TextDelta(run_id=self.run_id, turn=self.state.turns + 1, text=delta))

    async def tool_started(self, call_id: str, name: str, args: Mapping[str, Any] | str | None = None) -> None:
        """The agent calls ``name``; its result follows with :meth:`tool_finished`."""
        self._check()
        raw = _raw(args)
        if not self._in_transcript(call_id):
            self._flush_text()
            self.state.messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}]})
        self._started[call_id] = (name, time.perf_counter())
        self.state.tool_runs += 1
        self.driver.emit(ToolStart(run_id=self.run_id, call_id=call_id, name=name, args=raw))
        await self.driver.save()

    async def tool_finished(self, call_id: str, output: str, *, ok: bool = True, error: str | None = None,
                            ms: float | None = None) -> None:
        """The call's result, as the agent's model reads it; ``ms``, how long it took when the
        program knows better than the time since :meth:`tool_started`. A call rejected through
        :meth:`approval` already has its result (the worded rejection): this adds nothing."""
        self._check()
        if self._answered(call_id):
            return
        name, began = self._started.pop(call_id, (self._tool_of(call_id), time.perf_counter()))
        took = ms if ms is not None else (time.perf_counter() - began) * 1000
        self.state.messages.append({"role": "tool", "tool_call_id": call_id, "content": str(output)})
        if not ok:
            self.state.failed_calls.append(call_id)
        self.driver.emit(ToolResult(run_id=self.run_id, call_id=call_id, name=name,
                              ms=round(took, 3), ok=ok, error=error,
                              preview=str(output)[:200]))
        await self.driver.save()

    async def usage(self, prompt_tokens: int, completion_tokens: int, *, model: str | None = None,
                    cost_usd: float | None = None, finish_reason: str = "stop") -> None:
        """One model call's usage: a turn. ``cost_usd`` as the provider billed it; else priced
        at the run's pricing (an assumed price, and said so, when none was given). Raises
        :class:`LimitReached` when the turn cap or the budget is reached."""
        self._check()
        st = self.state
        if model and model != st.model:
            st.model = model
            if st.pricing.source in ("genai-prices", "unknown"):  # not the program's or the file's own price
                st.pricing = price_for(model)
        cost = cost_usd if cost_usd is not None else st.pricing.cost(prompt_tokens, completion_tokens)
        st.turns += 1
        st.prompt_tokens += prompt_tokens
        st.completion_tokens += completion_tokens
        st.cost_usd += cost
        st.per_turn_prompt_tokens.append(prompt_tokens)
        self._flush_text()
        self.driver.emit(Turn(run_id=st.run_id, turn=st.turns, prompt_tokens=prompt_tokens,
                        completion_tokens=completion_tokens, total_tokens=prompt_tokens + completion_tokens,
                        cost_usd=st.cost_usd, finish_reason=finish_reason, provider_ms=0.0))
        await self.driver.save()
        limits = st.limits
        if limits.budget_usd is not None and st.cost_usd >= limits.budget_usd:
            reason = f"the budget of ${limits.budget_usd:.4f} is spent (${st.cost_usd:.4f})"
            await self._end(Status.BUDGET_EXCEEDED, reason, MaxBudget())
            raise LimitReached(Status.BUDGET_EXCEEDED, reason, MaxBudget())
        fleet = getattr(self.harness, "fleet", None)
        if fleet is not None:  # the fleet budgets over the run: charged now, checked before its next call
            reason = await self._fleet(fleet)
            if reason is not None:
                await self._end(Status.BUDGET_EXCEEDED, reason, MaxBudget())
                raise LimitReached(Status.BUDGET_EXCEEDED, reason, MaxBudget())
        if limits.max_turns is not None and st.turns >= limits.max_turns:
            reason = f"the turn cap of {limits.max_turns} is reached"
            await self._end(Status.MAX_TURNS_EXCEEDED, reason, MaxTurns())
            raise LimitReached(Status.MAX_TURNS_EXCEEDED, reason, MaxTurns())

    async def _fleet(self, fleet: Any) -> str | None:
        """The fleet budgets, charged with this usage report: the words of one reached that ends
        the run as a budget exit, or None. A spent ``ask`` budget holds the report (the program
        waits in :meth:`usage`, as in :meth:`approval`) on its ``budget`` call
        (:mod:`tether.approvals.budget_ask`): approved, it returns; rejected, the words. A report
        of what already happened (:meth:`after_the_fact`: Claude Code's hooks, a report relayed
        from another process) cannot be held: the budget ends the run as ``stop`` does."""
        st, store = self.state, self.harness.store
        if self._past:
            reached, levels = await asyncio.to_thread(fleet.before_call, store, st)
            for event in levels:
                self.driver.emit(event)
            if isinstance(reached, tuple):
                return f"{reached[0].words(reached[1])}; the run stopped (a report of what already happened is not held)"
            return reached
        hit = await budget_ask.check(fleet, store, st, self.harness._rules, self.driver.emit)
        while isinstance(hit, NeedsApproval):
            waiting = hit
            st.status, st.interruption = Status.INTERRUPTED, waiting
            self._controls.expect(waiting)
            await self.driver.save()
            timeout = 0.0 if waiting.deadline_at is None else max(0.001, waiting.deadline_at - time.time())
            decision = await self._controls.wait_for_decision(waiting, timeout)
            if decision is None and self.signal.cancelled:
                st.status, st.interruption = Status.RUNNING, None
                if self.signal.ends_wait:  # a Stop ends the run, and the budget call with it
                    self.driver.emit(close_on_stop(st, waiting.call_id, self.signal.reason or "stopped", self.signal.by,
                                             asked_at=waiting.asked_at, tool=BUDGET))
                    await self.driver.save()
                raise self._stopped()
            made = None if decision is None else budget_ask.decide(st, decision)  # None: the deadline, below
            if made is not None:
                self.driver.emit(made)
            pending = st.interruption if made is not None and made.verdict == "pending" else None
            st.status, st.interruption = Status.RUNNING, None
            await self.driver.save()
            hit = pending or await budget_ask.check(fleet, store, st, self.harness._rules, self.driver.emit,
                                                         waiting)
        if isinstance(hit, Cancelled):  # its deadline's "stop": the call declined, the run stopped
            await self.driver.save()
            self.signal.cancel(hit.reason, DEADLINE)
            raise self._stopped()
        return hit

    async def approval(self, tool: str, args: Mapping[str, Any] | str | None = None, *,
                       call_id: str | None = None, deadline_at: float | None = None,
                       schema: Mapping[str, Any] | None = None) -> Approval:
        """Wait for a decision on a call, from anywhere: a standing rule at once, else people
        (one, or two for a two-person rule), before the deadline. ``deadline_at``: a time the
        program cannot wait past (a hook's own timeout), after which the call is rejected,
        whatever a rule or the run says. ``schema``: the JSON schema of the tool's arguments,
        which an operator's edited arguments are checked against (without it, an edit is
        refused unless the operator takes it unchecked). Raises :class:`Stopped` when the run
        is stopped while it waits."""
        self._check()
        st = self.state
        raw = _raw(args)
        reported = _checked_schema(tool, schema)
        call_id = call_id or f"call_{uuid.uuid4().hex[:12]}"
        if not self._in_transcript(call_id):
            self._flush_text()
            st.messages.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": tool, "arguments": raw}}]})
        earlier = st.approvals.get(call_id)
        if earlier is not None and earlier.complete:
            return _approval(earlier)
        agent = st.agent.name if st.agent is not None else st.model
        verdict = await verdict_of(self.harness._rules, Call(tool, _parsed(raw), agent, run_source(st), st.run_id))  # type: ignore[arg-type]
        asked_at = time.time()
        if verdict is not None and verdict.effect != "ask":
            rule = verdict.rule
            note = rule.note()
            kind = "approve" if rule.effect == "allow" else "reject"
            return await self._decided(call_id, tool, raw, ControlRequest(kind, note, by=f"rule {rule.id}",
                                                                          rule=rule.id), asked_at)
        ask = verdict.rule if verdict is not None else None
        deadline_s, on_deadline = deadline_of(ask, st.policies)
        why = f"{tool} needs approval: " + (f"{ask.cited()} asks for it" if ask is not None
                                            else f"the program {agent} asks")
        due = asked_at + deadline_s if deadline_s else None
        if deadline_at is not None and (due is None or deadline_at < due):
            due, on_deadline, deadline_s = deadline_at, "reject", None  # the program's own limit: it rejects
        waiting = NeedsApproval(call_id, tool, raw, why, asked_at, ask.approvals if ask is not None else 1, (),
                                due, on_deadline, False, None, ask.id if ask is not None else None, schema=reported)
        while True:
            decision = await self._wait(waiting)
            if decision is None:
                if self.signal.cancelled:
                    if self.signal.ends_wait:  # a Stop ends the run, and the call with it
                        await self._close(call_id, self.signal.reason or "stopped", self.signal.by, asked_at)
                    raise self._stopped()
                step = overdue(waiting, deadline_s)
                if step.event is not None:  # escalated: someone else is asked, and it waits once more
                    waiting = step.waiting
                    self.driver.emit(step.event)
                    continue
                if step.action == "stop":
                    await self._close(call_id, step.words, DEADLINE, asked_at)
                    self.signal.cancel(step.words, DEADLINE)
                    raise self._stopped()
                return await self._decided(call_id, tool, raw, ControlRequest("reject", step.words, by=DEADLINE),
                                           asked_at)
            st.status, st.interruption = Status.INTERRUPTED, waiting
            if decision.kind == "approve":
                event = _on_its_call(st, call_id, lambda: approve(st, call_id, decision.text, decision.by,
                                                                  args=decision.args, account=decision.account))
            else:
                event = _on_its_call(st, call_id, lambda: reject(st, call_id, decision.text, decision.by,
                                                                 account=decision.account))
            st.status, st.interruption = Status.RUNNING, None
            self.driver.emit(event)
            await self.driver.save()
            made = st.approvals[call_id]
            if made.complete:
                return _approval(made)
            waiting = replace(waiting, approvers=tuple(made.approvers), accounts=tuple(made.accounts))

    async def checkpoint(self, label: str = "") -> int | None:
        """A checkpoint of the run's own workspace as it is now (docs/checkpoints.md): its step,
        or None when nothing changed since the last. StateError in words without a workspace of its own."""
        self._check()
        if self.driver.after_change is None:
            raise StateError(f"run {self.run_id} has no workspace of its own to checkpoint: give Harness.track "
                             "workspace= and isolation=\"worktree\" (or \"copy\")")
        event = await self.driver.checkpoint("", label or "the program's checkpoint")
        return None if event is None else getattr(event, "step", None)

    async def answer(self, text: str) -> None:
        """The agent's answer: the run ends ``completed``."""
        self._flush_text()
        if text:
            self.state.messages.append({"role": "assistant", "content": text})
        await self._end(Status.COMPLETED, "the program reported its answer")

    async def fail(self, words: str) -> None:
        """The program's loop failed: the run ends ``failed`` with its words."""
        self._flush_text()
        await self._end(Status.FAILED, words, error=words)

    @contextlib.contextmanager
    def after_the_fact(self) -> Iterator[None]:
        """Within it, reports of what already happened are recorded although a Stop is
        pending: a call's result its agent has read, the words and usage before it. A Stop
        ends what comes next, never the record of what came before; it is raised by the next
        report outside the block (a run that has ended still refuses them)."""
        self._past += 1
        try:
            yield
        finally:
            self._past -= 1

    # ---- how it ends --------------------------------------------------------------------
    async def close(self, exc: BaseException | None) -> None:
        """Leaving the ``async with``: an end not reported yet is made from how it was left."""
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
        if self._ended:
            return
        self._flush_text()
        if self.signal.cancelled and (exc is None or isinstance(exc, (RunCancelled, asyncio.CancelledError))):
            stopped = self._stopped()  # stopped, however the program left the block after it
            await self._end(Status.INTERRUPTED, stopped.reason, stopped.interruption)
        elif exc is None:
            await self._end(Status.COMPLETED, "the program finished")
        elif isinstance(exc, RunCancelled):
            await self._end(Status.INTERRUPTED, exc.reason, Cancelled(exc.reason))
        elif isinstance(exc, asyncio.CancelledError):
            reason = "the program's task was cancelled"
            await self._end(Status.INTERRUPTED, reason, Cancelled(reason))
        else:
            words = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            await self._end(Status.FAILED, f"the program failed: {words}", error=words)

    async def _end(self, status: Status, reason: str, interruption: Interruption | None = None, *,
                   error: str | None = None) -> None:
        if self._ended:
            return
        self._ended = True
        self.driver.stop(status, reason, interruption, error=error)
        await self._controls.close()  # what came for the run is answered, and counted in its save
        await self.driver.save()

    # ---- helpers --------------------------------------------------------------------------
    def _check(self) -> None:
        if self._ended:
            raise RunEnded(self.state.status, f"run {self.run_id} has ended ({self.state.status.value})",
                           self.state.interruption)
        if self.signal.cancelled and not self._past:  # what happened before the Stop is still recorded
            raise self._stopped()

    async def _reported(self, request: ControlRequest) -> ControlReply:
        """Apply what another reporter sent through the run's control channel because this
        process held the run (:func:`report_into`): its calls of this API, in order."""
        try:
            ops = json.loads(request.text)
            if not isinstance(ops, list) or not all(isinstance(op, dict) for op in ops):
                raise ValueError("not a list of objects")
        except ValueError as exc:
            return ControlReply(False, f"a report into run {self.run_id} that is not JSON of its calls ({exc})")
        try:
            with self.after_the_fact():
                for op in ops:
                    await self._apply(op)
        except RunEnded as ended:
            return ControlReply(False, f"run {self.run_id} has ended ({ended.status.value}): the report was not added")
        except (KeyError, TypeError, ValueError) as exc:
            return ControlReply(False, f"a report into run {self.run_id} that could not be applied: {exc!r}")
        return ControlReply(True, f"reported into run {self.run_id} by the process that holds it (pid {os.getpid()})")

    async def _apply(self, op: dict[str, Any]) -> None:
        kind = op.get("op")
        if kind == "user":
            await self.user(str(op["text"]))
        elif kind == "tool_started":
            if not self._in_transcript(str(op["call_id"])):  # a call the run has is not started again
                await self.tool_started(str(op["call_id"]), str(op["name"]), op.get("args"))
        elif kind == "tool_finished":
            await self.tool_finished(str(op["call_id"]), str(op["output"]), ok=bool(op.get("ok", True)),
                                     error=op.get("error"))
        else:
            raise ValueError(f"no call {kind!r} in the run API")

    def _stopped(self) -> Stopped:
        return Stopped(self.signal.reason or "stopped", self.signal.by)

    async def _wait(self, waiting: NeedsApproval) -> ControlRequest | None:
        st = self.state
        st.status, st.interruption = Status.INTERRUPTED, waiting
        self._controls.expect(waiting)
        self.driver.emit(ApprovalRequired(run_id=st.run_id, call_id=waiting.call_id, tool=waiting.tool_name,
                                    args=waiting.args, why=waiting.why,
                                    needed=waiting.needed if waiting.needed > 1 else None,
                                    approvers=list(waiting.approvers) or None, deadline_at=waiting.deadline_at,
                                    on_deadline=waiting.on_deadline if waiting.deadline_at else None,
                                    rule=waiting.rule))
        await self.driver.save()
        timeout = 0.0 if waiting.deadline_at is None else max(0.001, waiting.deadline_at - time.time())
        try:
            return await self._controls.wait_for_decision(waiting, timeout)
        finally:
            if st.status is Status.INTERRUPTED and st.interruption == waiting:
                st.status, st.interruption = Status.RUNNING, None

    async def _close(self, call_id: str, reason: str, by: str | None, asked_at: float) -> None:
        """The wait for a decision ended by a Stop (a person's, or the deadline's): the call is
        declined in words, recorded as a decision by whoever stopped it."""
        st = self.state
        self.driver.emit(_on_its_call(st, call_id, lambda: close_on_stop(st, call_id, reason, by, asked_at=asked_at)))
        await self.driver.save()

    async def _decided(self, call_id: str, tool: str, raw: str, decision: ControlRequest,
                       asked_at: float | None = None) -> Approval:
        """A decision nobody had to wait for (a rule's) or nobody made (the deadline's)."""
        st = self.state
        text, by, rule = decision.text, decision.by, decision.rule
        if decision.kind == "approve":
            st.approvals[call_id] = Decision(call_id, "approved", args_hash(raw), text, by, tool=tool, rule=rule,
                                             asked_at=asked_at)
            event: Event = ApprovalDecision(run_id=st.run_id, call_id=call_id, tool=tool, verdict="approved",
                                            text=approved_words(text, by), by=by, rule=rule)
        else:
            st.status, st.interruption = Status.INTERRUPTED, NeedsApproval(call_id, tool, raw)
            event = _on_its_call(st, call_id, lambda: reject(st, call_id, text, by, rule=rule))
            st.approvals[call_id].asked_at = asked_at
            st.status, st.interruption = Status.RUNNING, None
        self.driver.emit(event)
        await self.driver.save()
        return _approval(st.approvals[call_id])

    def _flush_text(self) -> None:
        if self._text:
            self.state.messages.append({"role": "assistant", "content": "".join(self._text)})
            self._text.clear()

    def _in_transcript(self, call_id: str) -> bool:
        return any(c.get("id") == call_id for m in self.state.messages if m.get("role") == "assistant"
                   for c in m.get("tool_calls") or ())

    def _answered(self, call_id: str) -> bool:
        return any(m.get("role") == "tool" and m.get("tool_call_id") == call_id for m in self.state.messages)

    def _tool_of(self, call_id: str) -> str:
        for message in self.state.messages:
            for call in message.get("tool_calls") or ():
                if call.get("id") == call_id:
                    return str((call.get("function") or {}).get("name") or "tool")
        return "tool"

    async def _cancel_on_stop(self, task: asyncio.Task[Any]) -> None:
        await self.signal.wait()
        if not task.done():
            task.cancel()


async def report_into(store: Store, run_id: str, ops: Sequence[Mapping[str, Any]], *,
                      by: str = "program") -> ControlReply | None:
    """Report into a program's run that another process holds (a hook of Claude Code's while
    another hook of the session waits for a decision): ``ops`` are calls of this API
    (``{"op": "user", "text": …}``, ``{"op": "tool_started", "call_id", "name", "args"}``,
    ``{"op": "tool_finished", "call_id", "output", "ok", "error"}``), appended to the run's
    control channel, so nothing is lost: the process that holds the run applies them when
    told (its answer is returned), or the next one to hold it does (None: nobody answered)."""
    request = ControlRequest("report", json.dumps(list(ops), default=str), by=by)
    owner = await call(store, store.owner, run_id)
    address = owner.control if owner is not None and owner.alive and not owner.kept else None
    return await store.deliver(run_id, request, address)  # appended, and the holder told (the store's way)


@dataclass(frozen=True)
class Tracking:
    """What a program asked :meth:`tether.Harness.track` for (its options, documented there)."""

    name: str
    task: str = ""
    source: str = "program"
    model: str = ""
    run_id: str | None = None
    limits: Limits | None = None
    pricing: Pricing | None = None
    policies: Policies | None = None
    attach: bool = False
    keep_open: bool = False
    cancel: asyncio.Task[Any] | None = None
    sinks: Sequence[EventSink] = ()


def new_state(asked: Tracking) -> RunState:
    """A reported run's state: its agent remembered by name and source only (a program's loop
    cannot be rebuilt from the store, so nothing else is kept)."""
    name, task, source, model, run_id = asked.name, asked.task, asked.source, asked.model, asked.run_id
    limits, pricing, policies = asked.limits, asked.pricing, asked.policies
    if source not in SOURCES:
        raise ValueError(f"source is one of {', '.join(SOURCES)}; not {source!r}")
    messages = [{"role": "user", "content": task}] if task else []
    return RunState(run_id=run_id or new_run_id(name.replace("/", "_")[:24]), model=model or name,
                    messages=messages, limits=replace(limits) if limits else Limits(max_turns=None),
                    pricing=pricing or price_for(model or name), policies=policies or Policies(),
                    agent=AgentRef(name=name, source="library", fingerprint=f"program:{source}",
                                   spec={"program": source, "pid": os.getpid()}))


def started(run: TrackedRun, resumed: bool) -> None:
    st = run.state
    run.driver.emit(RunStarted(run_id=st.run_id, model=st.model, resumed=resumed, pid=os.getpid(),
                         price="unknown" if st.pricing.unknown else None,
                         agent=st.agent.name if st.agent else st.model))


WHAT_IT_CAN = {
    "acp": "an ACP agent: Stop cancels its turn at once; a follow-up goes on in its session",
    "claude-code": "Claude Code: Stop lands at its next hook (a call waiting is denied at once); not resumable here",
    "openai-agents": "openai-agents: Stop cancels it at once; a run paused at an approval goes on from its saved state",
    "pydantic-ai": "pydantic-ai: Stop cancels it at once; not resumable here (its program goes on with it)",
    "program": "a program: Stop is raised in it at once; not resumable here (its program goes on with it)",
}
"""What each source of runs other than Tether's loop can do, as the console says it."""


def what_it_can(source: str) -> str | None:
    """The words for a run's source and what it can do, or None for Tether's own loop."""
    return WHAT_IT_CAN.get(source)


def program_of(state: RunState) -> str | None:
    """The source of a run a program reported (``openai-agents``…), or None for any other run."""
    if state.agent is None:
        return None
    source = state.agent.spec.get("program")
    return str(source) if source else None


def _on_its_call(state: RunState, call_id: str, decide: Callable[[], ApprovalDecision]) -> ApprovalDecision:
    """Decide the waiting call as the last call of the transcript, which is what a decision
    reads (:func:`tether.vocab.state.pending_calls`), even when reports relayed while it waited
    (:meth:`TrackedRun._reported`) came after it; a rejection's result is added at the end."""
    messages = state.messages
    at = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "assistant"
               and any(c.get("id") == call_id for c in messages[i].get("tool_calls") or ())), None)
    if at is None:
        return decide()
    state.messages = messages[:at + 1]
    try:
        return decide()
    finally:
        added = state.messages[at + 1:]
        state.messages = messages
        messages.extend(added)


def _checked_schema(tool: str, schema: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The schema a program reported for ``tool``'s arguments, as a dict; a ValueError, in
    words, for one that is no JSON schema (it would check nothing)."""
    if schema is None:
        return None
    if not isinstance(schema, Mapping):
        raise ValueError(f"the schema of {tool}'s arguments must be a JSON schema (a mapping), "
                         f"not {type(schema).__name__}")
    reported = json.loads(json.dumps(dict(schema), default=str))  # kept with the run: plain JSON
    try:
        reported_validator(reported)
    except NotASchema as exc:
        raise ValueError(f"the schema of {tool}'s arguments is not a JSON schema: {exc}") from None
    return reported


def _raw(args: Mapping[str, Any] | str | None) -> str:
    if args is None:
        return "{}"
    return args if isinstance(args, str) else json.dumps(args, sort_keys=True, default=str)


def _parsed(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _approval(decision: Decision) -> Approval:
    approved = decision.verdict == "approved"
    words = approved_words(decision.text, decision.by) if approved else declined_words(decision.text, decision.by)
    return Approval(approved, words, decision.by, _parsed(decision.args) if decision.args else None)


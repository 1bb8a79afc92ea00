"""An ACP session as a Tether run: the agent drives its turns, Tether keeps the record.

The harness hands this driver what it hands its own loop (the run's state, its trace, its
Stop signal, the run's control channel) and gets back the run, stopped one of five ways.
What the agent reports is mapped onto the run's transcript and trace (docs/acp.md has the
table), so every reader of the store (``runs``, ``show``, ``watch``, every console) sees an
ACP run as it sees any other:

- the agent's words stream as ``text_delta`` and land in the transcript as its reply;
- a tool call is ``tool_start``, progress, ``tool_result``, and an assistant call plus a tool
  message in the transcript;
- a permission request is a pending approval (``NeedsApproval``) that any console or
  ``tether approve|reject`` answers, bound to the call's id and the hash of its ``rawInput``;
  a rejection's words go in as the next prompt (ACP has no field for a reason);
- usage is the turn's tokens and cost: the agent's own cost where it reports one, else its
  tokens at the agent file's price; the budget is checked on every report, and crossing it
  cancels the turn;
- the fleet budgets (:mod:`tether.approvals.budgets`) are charged and checked before the first
  turn, on every usage report and at each turn's end: one reached cancels the turn and ends the
  run as a budget exit (``stop``), or holds it on the ``budget`` call (``ask``:
  :mod:`tether.approvals.budget_ask`), after which an approved run's agent is told to go on; a
  reached ``refuse`` budget lets the run go on (it refuses new runs only);
- a Stop is ``session/cancel``; an agent that does not end its turn within its grace has its
  process group killed, and the run says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import json
import logging
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tether.acp import terminal
from tether.acp.client import AcpSession
from tether.acp.errors import AcpError, AgentDied
from tether.acp.translate import call_tokens
from tether.acp.sessions import (
    adopt, adopted_session, came_back_words, first_session, follow_up_session, rejected_turn_cancelled, started_again,
)
from tether.acp.escapes import RefusedWrite, sandboxed_words, warning_words, wrote_itself
from tether.acp.events import (
    AcpEvent, AgentExited, BadFrame, CommandsAvailable, ConfigOptions, FileRefused, FileWritten, PermissionAsked,
    PlanUpdated, ShellOutput, TextChunk, ThoughtChunk, ToolCallStarted, ToolCallUpdated, TurnEnded, UsageReported,
)
from tether.acp.permissions import PermissionRequest
from tether.agents import sandbox
from tether.agents.sandbox import Sandbox
from tether.agents.agent import Agent, AgentError
from tether.approvals import Call, Rule, RuleError, Verdict, budget_ask, check
from tether.vocab.budget_call import BUDGET
from tether.approvals.budgets import BEFORE_NEXT_CALL
from tether.approvals.holding import deadline_of, overdue, verdict_of
from tether.vocab.preview import preview_of_acp
from tether.vocab import people
from tether.vocab.cancel import CancelSignal, RunCancelled
from tether.vocab.events import (
    AgentCommands, AgentConfig, AgentSession, ApprovalDecision, ApprovalRequired, FileWrite, Plan, RuleAdded,
    RunStarted, RunWarning, ShellOutputEvent, TextDelta, Thought, ToolProgress, ToolResult, ToolStart, Turn,
)
from tether.approvals.decisions import DEADLINE, approved_words, close_on_stop, declined_words
from tether.vocab.wording import exit_words, overshoot
from tether.vocab.state import (
    Cancelled, Decision, MaxBudget, MaxTurns, NeedsApproval, RunState, StateError, Status,
)
from tether.workspaces.lifecycle import WorkspaceError
from tether.run.driver import RunDriver
from tether.store.control import ControlRequest

# An agent that reports a refused write done (OpenCode: "Wrote file successfully.") writes the file
# itself, and on a loaded host the write can land after the call's report and even after the turn's
# end: the turn's last look waits up to this long for such a file before calling it not written.
WRITE_GRACE_S = 2.0
WRITE_GRACE_LOOKS = 20

# A file's mtime is the kernel's coarse clock, which may lag time.time_ns() by a tick: a file the
# agent wrote just after its turn began must not look older than the turn.
MTIME_SLACK_NS = 1_000_000_000

log = logging.getLogger(__name__)

# What a stop reason means for the run (ACP's StopReason against the run contract).
STOP_REASONS: dict[str, Status] = {
    "end_turn": Status.COMPLETED,
    "max_tokens": Status.MAX_TURNS_EXCEEDED,
    "max_turn_requests": Status.MAX_TURNS_EXCEEDED,
    "refusal": Status.FAILED,
    "cancelled": Status.INTERRUPTED,
}
PREVIEW_CHARS = 400

FleetCheck = Callable[..., Awaitable[str | NeedsApproval | Cancelled | None]]
"""The fleet budgets' check (:func:`tether.approvals.budget_ask.check`), given the run and the
budget call it waited on (``settle=True``: charge only, as the run ends): the words of one
reached, the budget call to wait on, a deadline's Stop, or None."""
GO_ON = ("Tether cut your last turn short at a fleet budget, and going on past it was {approved}. "
         "Go on with your task where you left off.")

Decide = Callable[[NeedsApproval], Awaitable[Any]]
"""Waits for a decision on a pending approval from any process: a ControlRequest (kind
``approve``/``reject``, text, by), or None when a Stop or the deadline came first."""


@dataclass(frozen=True)
class Rules:
    """The store's standing rules, as an ACP run consults and adds to them."""

    read: Callable[[], Awaitable[Sequence[Rule]]]
    add: Callable[[Rule], Awaitable[Rule]]


@dataclass(frozen=True)
class AcpRunOptions:
    """What an ACP run is given beside its driver, its agent, its Stop and its decisions; each
    optional. ``earlier``: the run's last ``agent_session`` record (a follow-up loads that session);
    ``died``: how its agent died with the run's last turn; ``session``: one started already
    (``initialize``); ``expect`` readies a decision's wait before the approval is announced;
    ``rules``: the store's standing rules; ``ready`` makes and sets up the run's own workspace
    (the folder the agent works in); ``fleet``: the fleet budgets' check."""

    earlier: dict[str, Any] | None = None
    died: str | None = None
    session: AcpSession | None = None
    expect: Callable[[NeedsApproval], None] | None = None
    rules: Rules | None = None
    ready: Callable[[], Awaitable[str | None]] | None = None
    fleet: FleetCheck | None = None


@dataclass(frozen=True)
class Tally:
    """How a decision on an agent's permission request was reached: when it was asked, and for
    a call that needs more than one person, who approved it (names, and their accounts)."""

    asked_at: float | None = None
    approvers: Sequence[str] = ()
    needed: int = 1
    accounts: Sequence[str] = ()


@dataclass
class _Call:
    """A tool call the agent reported. ``name`` is the one it started with, for its whole
    life; it is in the transcript (and ``tool_start``) once ``announced``."""

    call_id: str
    name: str
    kind: str | None
    args: str
    started: float
    status: str | None = None
    text: str = ""
    announced: bool = False
    output: str = ""  # its shell output so far (tether.acp.terminal)
    end: str = ""  # its exit code, in words, once its shell ended


class AcpRun:
    """Drives one run of an ACP agent in this process, from its first prompt to its stop."""

    def __init__(self, driver: RunDriver, agent: Agent, signal: CancelSignal, decide: Decide,
                 options: AcpRunOptions | None = None) -> None:
        if agent.acp is None:
            raise ValueError(f"agent {agent.name} does not speak ACP")
        options = options or AcpRunOptions()
        self.driver = driver  # emits, saves, checkpoints (its after_change: the run's workspace) and finishes
        self.state = driver.state
        self.agent = agent
        self.command = agent.acp
        self.emit = driver.emit
        self.save = driver.save
        self.signal = signal
        self.decide = decide
        self.expect = options.expect  # readies the decision's wait before the approval is announced
        self.rules = options.rules
        self.ready = options.ready  # makes and sets up the run's own workspace: the folder the agent works in, or None
        self.fleet = options.fleet
        earlier, died, session = options.earlier, options.died, options.session
        self.tool_runs: list[dict[str, Any]] = []
        self._permissions: asyncio.Queue[PermissionRequest] = asyncio.Queue()
        self._calls: dict[str, _Call] = {}
        self._refused: list[RefusedWrite] = []  # writes refused as outside the workspace, not yet seen written
        self._reported: dict[str, str] = {}  # of those, the paths a call then reported written: its id
        self._turn_began_ns = 0  # wall clock, less the slack: a refused file changed since is this turn's
        self._looking: set[asyncio.Future[None]] = set()  # looks at the disk for them, under way
        self._text: list[str] = []
        self._thought: list[str] = []
        self._rejections: list[str] = []
        self._over_budget = False
        self._fleet_due = True  # usage not yet charged to the fleet budgets (and none checked yet)
        self._fleet_hit: str | NeedsApproval | Cancelled | None = None  # what their check found
        self._budget_waiting: NeedsApproval | None = None  # the budget call a decision is awaited for
        self._session_cost = 0.0  # the agent's running total for its session, as last reported
        self._reported_cost = False
        self._usage_seen = False  # in any turn of this run
        self._turn_usage_seen = False
        self._turn_tokens = [0, 0]  # input, output from per-call reports (qwen's _meta) this turn
        self._turn_final: tuple[int, int] | None = None  # the prompt response's usage this turn
        self._session: AcpSession | None = session  # started already (initialize), or None
        self._asking: PermissionRequest | None = None  # the request a decision is awaited for
        self._waiting: NeedsApproval | None = None  # and the approval it is on the store as
        self._earlier = earlier  # the run's last agent_session record: a follow-up loads that session
        self._died = died  # how its agent died with the run's last turn (a follow-up says it came back)
        self._replaying = False  # session/load replays the history as updates: already on the record
        self._priced = [0, 0]  # this turn's tokens already priced as they were reported
        self._heard = False  # whether the agent sent anything since this turn's prompt

    # ---- the run ------------------------------------------------------------------------
    async def run(self) -> RunState:
        st = self.state
        follow_up = self._earlier is not None  # a session on record: this goes on in it
        made = ""  # a fork's first session: "session/fork" or "told" (in words)
        adopted = ""  # the agent's own earlier session, gone on in: "session/resume" or "session/load"
        if follow_up:
            self.check_follow_up(st, self.agent, self._earlier)
        st.status, st.interruption, st.error = Status.RUNNING, None, None
        self.emit(RunStarted(run_id=st.run_id, model=st.model, resumed=follow_up, parent_run_id=st.parent_run_id,
                             pid=os.getpid(), agent=self.agent.name))
        session = self._session
        if session is None:
            try:
                root = await self.ready() if self.ready is not None else None  # before the agent starts
                session = self._session = await asyncio.to_thread(session_for, self.agent, root)  # sandbox's folders
            except AgentError as exc:
                return await self._finish(Status.FAILED, f"agent {self.agent.name}: {exc}", error=str(exc))
            except WorkspaceError as exc:
                return await self._finish(Status.FAILED, str(exc), error=str(exc))
            except RunCancelled as exc:  # a Stop during the workspace's setup: it runs again on resume
                by = self.signal.by
                return await self._finish(Status.INTERRUPTED, f"{exc.reason} (by {by})" if by else exc.reason,
                                          Cancelled(exc.reason, by))
        session.on_event = self._on_event
        try:
            try:
                if session.info is not None and session.gone:  # handed an agent that died before its turn
                    session = await self._again(session)
                info = session.info or await session.start()
                if follow_up:
                    assert self._earlier is not None
                    self._replaying = True
                    try:
                        session_id = await follow_up_session(session, str(self._earlier["session_id"]), self.emit,
                                                             st.run_id)
                    finally:
                        self._replaying = False
                    if self._died:
                        self.emit(RunWarning(run_id=st.run_id, text=came_back_words(
                            info.name, self._died, str(self._earlier["session_id"]), session, session_id)))
                elif (adopting := None if st.forked_from else adopted_session(st.messages)) is not None:
                    self._replaying = True  # a load replays the agent's history: it was never this run's
                    try:
                        session_id = await adopt(session, adopting)
                    finally:
                        self._replaying = False
                    adopted = "session/resume" if session.resumed else "session/load"
                else:
                    session_id, made = await first_session(session, st.forked_from, self.emit, st.run_id)
            except AgentDied as exc:
                return await self._finish(Status.INTERRUPTED, str(exc), Cancelled(str(exc)))
            except AcpError as exc:  # not started, or a session the agent refused (its mode, say)
                return await self._finish(Status.FAILED, str(exc), error=str(exc))
            self.emit(AgentSession(run_id=st.run_id, agent_name=info.name, agent_version=info.version,
                                   session_id=session_id, pid=session.pid or 0, load_session=info.load_session,
                                   sandbox=session.sandbox.describe() if session.sandbox is not None else None,
                                   fork=made, adopted=adopted))
            prompt = _last_user_text(st, told=made != "session/fork")
            while True:
                limit = st.limits.max_turns
                if limit is not None and st.turns >= limit:
                    return await self._finish(Status.MAX_TURNS_EXCEEDED, f"reached max_turns={limit}", MaxTurns())
                if await self._fleet_reached():  # spent before this turn (a follow-up in a spent budget's scope)
                    ended = await self._held_by_budget("the agent's next turn was not started")
                    if ended is not None:
                        return ended
                try:
                    if session.gone:  # it died between turns: started again, in its session
                        session = await self._again(session)
                    try:
                        self._heard = False
                        stop_reason, killed = await self._turn(session, prompt)
                    except AgentDied:
                        if self._heard or self.signal.cancelled:
                            raise
                        session = await self._again(session)  # dead as the prompt went: nothing of it done
                        stop_reason, killed = await self._turn(session, prompt)
                except AgentDied as exc:
                    self._flush_text()
                    return await self._finish(Status.INTERRUPTED, str(exc), Cancelled(str(exc)))
                except AcpError as exc:
                    self._flush_text()
                    return await self._finish(Status.FAILED, str(exc), error=str(exc))
                problem = self._unmetered()
                if problem:
                    return await self._finish(Status.FAILED, problem, error=problem)
                if self._over_budget:
                    budget = st.limits.budget_usd or 0.0
                    how = "the agent's turn was cancelled" if stop_reason == "cancelled" else \
                        "the agent reports its usage at the turn's end only"
                    return await self._finish(Status.BUDGET_EXCEEDED, f"{overshoot(st.cost_usd, budget)}; {how}",
                                              MaxBudget())
                if self._fleet_hit is not None and not self.signal.cancelled:
                    cut = stop_reason == "cancelled"
                    ended = await self._held_by_budget("the agent's turn was cancelled at the usage report that "
                                                       "reached it" if cut else "the agent's turn had ended")
                    if ended is not None:
                        return ended
                    if cut:  # approved: the agent goes on from where its turn was cut
                        prompt = GO_ON.format(approved=self._approved_words())
                        st.messages.append({"role": "user", "content": prompt, "tether": "budget"})
                        await self.save()
                        continue
                if rejected_turn_cancelled(stop_reason, self.signal.cancelled, self._rejections, self.command):
                    stop_reason = "end_turn"  # Codex ends its turn on a rejection: go on with the words
                if self.signal.cancelled or stop_reason == "cancelled":
                    reason = self.signal.reason or "the agent cancelled its turn"
                    if killed:
                        reason += (f" (the agent did not end its turn within {self.command.cancel_grace_s:g} s of "
                                   "the cancel: its process group was killed)")
                    by = self.signal.by
                    shown = f"{reason} (by {by})" if by else reason
                    return await self._finish(Status.INTERRUPTED, shown, Cancelled(reason, by))
                status = STOP_REASONS.get(stop_reason, Status.FAILED)
                if status is Status.COMPLETED and self._rejections and self.command.tell_rejections:
                    prompt = " ".join(self._rejections)
                    self._rejections.clear()
                    st.messages.append({"role": "user", "content": prompt, "tether": "rejection"})
                    await self.save()
                    continue
                if status is Status.COMPLETED:
                    return await self._finish(status, "the agent ended its turn")
                if status is Status.MAX_TURNS_EXCEEDED:
                    return await self._finish(status, f"the agent stopped: {stop_reason}", MaxTurns())
                words = f"the agent stopped: {stop_reason}" + (f": {st.messages[-1].get('content')}"
                                                               if stop_reason == "refusal" else "")
                return await self._finish(Status.FAILED, words, error=words)
        except asyncio.CancelledError:
            reason = "the process running this run was shut down"
            await asyncio.shield(self._finish(Status.INTERRUPTED, reason, Cancelled(reason)))
            raise
        finally:
            await (self._session or session).close()

    async def _again(self, dead: AcpSession) -> AcpSession:
        """A dead agent started again (:func:`tether.acp.sessions.started_again`), its session
        resumed or loaded (the replay is not taken twice), and on the record."""
        self._replaying = True
        try:
            session = self._session = await started_again(
                dead, lambda: session_for(self.agent, dead.workspace), self.emit, self.state.run_id)
        finally:
            self._replaying = False
        self._session_cost = 0.0  # a new process reports its own running total
        info = session.info
        assert info is not None and session.session_id is not None
        self.emit(AgentSession(run_id=self.state.run_id, agent_name=info.name, agent_version=info.version,
                               session_id=session.session_id, pid=session.pid or 0, load_session=info.load_session,
                               sandbox=session.sandbox.describe() if session.sandbox is not None else None))
        return session

    @staticmethod
    def check_follow_up(state: RunState, agent: Agent, earlier: dict[str, Any] | None) -> None:
        """A run that has had turns goes on only in the agent's earlier session (its
        ``agent_session`` record), which the agent must be able to load: refused in words."""
        if earlier is None or not earlier.get("session_id"):
            raise StateError(f"run {state.run_id} has no ACP session on record to go on with: start a new run")
        if not earlier.get("load_session"):
            raise StateError(f"the agent {agent.name} cannot load its earlier session (it does not advertise "
                             "loadSession), and the session ended with its process: start a new run")

    async def _turn(self, session: AcpSession, prompt: str) -> tuple[str, bool]:
        """One prompt round: answers permission requests and a Stop while the agent works."""
        st = self.state
        self._turn_tokens = [0, 0]
        self._turn_final = None
        self._turn_usage_seen = False
        self._priced = [0, 0]
        started = time.perf_counter()
        self._turn_began_ns = time.time_ns() - MTIME_SLACK_NS
        turn = asyncio.ensure_future(session.prompt(prompt))
        stopped = asyncio.ensure_future(self.signal.wait())
        cancelling: asyncio.Task[bool] | None = None
        try:
            while not turn.done():
                asking = asyncio.ensure_future(self._permissions.get())
                waits = {turn, asking} | ({stopped} if cancelling is None else set())
                try:
                    done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    if not asking.done():
                        asking.cancel()
                if asking in done and not asking.cancelled() and asking.result() is not _WAKE:
                    await self._ask(asking.result(), turn)
                if cancelling is None and not turn.done() and await self._fleet_reached():
                    cancelling = asyncio.ensure_future(session.cancel())  # a fleet budget: no more spending
                if (stopped in done or self._over_budget or self.signal.cancelled) and cancelling is None:
                    cancelling = asyncio.ensure_future(session.cancel())
            ended = turn.result()
        finally:
            stopped.cancel()
            if not turn.done():
                turn.cancel()
                with contextlib.suppress(asyncio.CancelledError, AcpError):
                    await turn
        killed = ended.killed
        if cancelling is not None:
            killed = killed or await cancelling
        self._checkpoint("", f"the end of turn {st.turns + 1}")  # what the turn wrote that no call reported
        await self._looked_at()
        for call in self._calls.values():  # a call the turn left pending without input: in the transcript now
            self._announce(call)
        self._flush_text()
        st.turns += 1
        prompt_tokens, completion_tokens = self._turn_final or tuple(self._turn_tokens)  # type: ignore[assignment]
        st.prompt_tokens += prompt_tokens
        st.completion_tokens += completion_tokens
        st.per_turn_prompt_tokens.append(prompt_tokens)
        if not self._reported_cost:  # what the per-call reports have not priced yet
            self._price(prompt_tokens - self._priced[0], completion_tokens - self._priced[1])
            self._check_budget()  # usage only at the turn's end (Gemini's _meta.quota): the turn overran it
        if not self._turn_usage_seen:
            st.estimated_turns.append(st.turns)  # the agent reported no usage this turn
        await self._fleet_reached()  # what the turn's end reported, charged
        self.emit(Turn(run_id=st.run_id, turn=st.turns, prompt_tokens=prompt_tokens,
                       completion_tokens=completion_tokens, total_tokens=prompt_tokens + completion_tokens,
                       cost_usd=st.cost_usd, finish_reason=ended.stop_reason,
                       provider_ms=(time.perf_counter() - started) * 1000, estimated=not self._turn_usage_seen,
                       tool_calls=len(self._calls)))
        await self.save()
        return ended.stop_reason, killed

    async def _ask(self, request: PermissionRequest, turn: asyncio.Future[Any]) -> None:
        """A permission request, as a pending approval on the store until someone decides, or
        until the ``turn`` it belongs to ends without it."""
        st = self.state
        if self.signal.cancelled:
            request.cancel(by_session=True)
            return
        args = json.dumps(request.raw_input, sort_keys=True, default=str) if request.raw_input is not None else "{}"
        # The call's one name, when the agent reported the call: its permission titles vary
        # (OpenCode asks for the folder of a file outside the workspace, then for the file).
        call = self._calls.get(request.tool_call_id)
        tool = call.name if call is not None else request.title or request.kind or "tool call"
        options = [{"id": o.option_id, "name": o.name, "kind": o.kind} for o in request.options]
        about = f" for {request.title}" if request.title and request.title != tool else ""
        why = f"the agent {self.agent.name} asks permission{about}: " + ", ".join(
            f"{o.name} ({o.kind.replace('_', ' ')})" for o in request.options)
        # One decision per request: an agent that asks again about a call id it used before
        # (a new turn, a retry) gets a new key, so the earlier decision is not taken as this one's.
        key, n = request.tool_call_id, 1
        while key in st.approvals:
            n += 1
            key = f"{request.tool_call_id}#{n}"
        asked_at = time.time()
        verdict = await self._verdict(request, tool)
        if verdict is not None and verdict.effect != "ask":  # a standing rule decides, at once
            rule = verdict.rule
            note = rule.note()
            kind = "approve" if rule.effect == "allow" else "reject"
            await self._answer(request, key, tool, ControlRequest(kind, note, by=f"rule {rule.id}", rule=rule.id),
                               Tally(asked_at))
            return
        ask = verdict.rule if verdict is not None else None
        needed = ask.approvals if ask is not None else 1
        deadline_s, on_deadline = deadline_of(ask, st.policies)
        diff = _diff_text(request, self._workspace()) or None
        shown = preview_of_acp(request.diffs, self._workspace())
        preview = None if shown is None else shown.to_dict()
        waiting = NeedsApproval(key, tool, args, why, asked_at, needed, (), asked_at + deadline_s if deadline_s else None,
                                on_deadline, False, preview, ask.id if ask is not None else None,
                                options=tuple(options))
        while True:
            decision = await self._wait(request, waiting, options, diff, turn)
            if decision is False:
                return  # the turn ended without it
            if decision is None and waiting.deadline_at is not None and time.time() >= waiting.deadline_at \
                    and not self.signal.cancelled:
                step = overdue(waiting, deadline_s)
                if step.event is not None:  # escalated: someone else is asked, and it waits once more
                    waiting = step.waiting
                    self.emit(step.event)
                    continue
                if step.action == "reject":
                    await self._answer(request, key, tool, ControlRequest("reject", step.words, by=DEADLINE),
                                       Tally(asked_at))
                    return
                self.signal.cancel(step.words, DEADLINE)
            if decision is None:  # a Stop (or the deadline): the turn is cancelled, and this request with it
                request.cancel(by_session=True)
                if not self.signal.cancelled:
                    self.signal.cancel("no decision came in time for the agent's permission request")
                elif self.signal.ends_wait or self.signal.by == DEADLINE:  # on the record, as the stopper's
                    self._stopped_request(key, tool, request.args_hash, asked_at)
                await self.save()
                return
            if decision.kind == "approve" and len(waiting.approvers) + 1 < waiting.needed:
                waiting = replace(waiting, approvers=(*waiting.approvers, decision.by),
                                  accounts=(*people.padded(waiting.approvers, waiting.accounts),
                                            decision.account or ""))
                self.emit(ApprovalDecision(run_id=st.run_id, call_id=key, tool=tool, verdict="pending",
                                           text=approved_words(decision.text, decision.by), by=decision.by,
                                           tally=waiting.tally))
                continue  # the same person again is refused by the run's controls
            break
        approvers = [*waiting.approvers, decision.by] if waiting.needed > 1 and decision.kind == "approve" else []
        accounts = [*people.padded(waiting.approvers, waiting.accounts), decision.account or ""] if approvers else []
        await self._answer(request, key, tool, decision, Tally(asked_at, approvers, waiting.needed, accounts))
        chosen = request.option_by_id(decision.option) if decision.option else None
        if chosen is not None and chosen.kind.endswith("_always"):
            await self._always(request, tool, chosen, decision)

    async def _wait(self, request: PermissionRequest, waiting: NeedsApproval, options: list[dict[str, str]],
                    diff: str | None, turn: asyncio.Future[Any]) -> Any:
        """Put ``waiting`` on the store and wait for a decision: the ControlRequest, None (a
        Stop, or the deadline), or False when the agent's turn ended first (nothing to decide)."""
        st = self.state
        st.status, st.interruption = Status.INTERRUPTED, waiting
        self._asking, self._waiting = request, waiting
        if self.expect is not None:
            self.expect(waiting)
        self.emit(ApprovalRequired(run_id=st.run_id, call_id=waiting.call_id, tool=waiting.tool_name,
                                   args=waiting.args, why=waiting.why, options=options, diff=diff,
                                   needed=waiting.needed if waiting.needed > 1 else None,
                                   approvers=list(waiting.approvers) or None, deadline_at=waiting.deadline_at,
                                   on_deadline=waiting.on_deadline if waiting.deadline_at else None,
                                   preview=waiting.preview, rule=waiting.rule))
        await self.save()
        deciding = asyncio.ensure_future(self.decide(waiting))
        try:
            # The agent may end the turn meanwhile (it died, or withdrew the request): then
            # there is nothing left to decide.
            await asyncio.wait({deciding, turn}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._asking = self._waiting = None
            if not deciding.done():
                deciding.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await deciding
        st.status, st.interruption = Status.RUNNING, None
        if deciding.cancelled():
            request.cancel(by_session=True)
            await self.save()
            return False
        return deciding.result()

    async def _answer(self, request: PermissionRequest, key: str, tool: str, decision: ControlRequest,
                      tally: Tally) -> None:
        """Answer the agent with the option for ``decision`` (a person's, a rule's or the
        deadline's), and record it with its ``tally``."""
        st = self.state
        text, by, rule, option = decision.text, decision.by, decision.rule, decision.option
        asked_at, approvers, needed, accounts = tally.asked_at, tally.approvers, tally.needed, tally.accounts
        approved = decision.kind == "approve"
        words = approved_words(text, by) if approved else declined_words(text, by)
        try:
            request.decide(_option_for(request, approved, option), tool_call_id=request.tool_call_id,
                           args_hash=request.args_hash)
        except (ValueError, AcpError) as exc:  # already answered (the agent withdrew it): say so, decide nothing
            words = f"{words} (not delivered: {exc})"
        st.approvals[key] = Decision(key, "approved" if approved else "rejected", request.args_hash, text, by,
                                     used=True, tool=tool, rule=rule, approvers=list(approvers), needed=needed,
                                     asked_at=asked_at, account=decision.account,
                                     accounts=list(accounts) if any(accounts) else [])
        if not approved:
            st.failed_calls.append(request.tool_call_id)
            if not decision.silent:
                self._rejections.append(words)
        self.emit(ApprovalDecision(run_id=st.run_id, call_id=key, tool=tool,
                                   verdict="approved" if approved else "rejected", text=words, by=by, rule=rule,
                                   tally=f"{needed} of {needed}" if needed > 1 and approved else None))
        await self.save()

    def _stopped_request(self, key: str, tool: str, bound: str, asked_at: float) -> None:
        """A Stop (a person's, or the deadline's) ended the wait for a decision: the request is
        recorded as declined by whoever stopped it, in the words a Stop of a waiting call has."""
        st = self.state
        text = f"the run was stopped ({self.signal.reason})"
        by = self.signal.by or "operator"
        st.approvals[key] = Decision(key, "rejected", bound, text, by, used=True, tool=tool, asked_at=asked_at)
        self.emit(ApprovalDecision(run_id=st.run_id, call_id=key, tool=tool, verdict="rejected",
                                   text=declined_words(text, by), by=by))

    async def _verdict(self, request: PermissionRequest, tool: str) -> Verdict | None:
        """What the store's standing rules say of a permission request: matched on the
        agent's tool kind (``edit``, ``execute``…; its title when it gives none) and its raw input."""
        raw = request.raw_input if isinstance(request.raw_input, dict) else {}
        return await verdict_of(None if self.rules is None else self.rules.read,
                                Call(request.kind or tool, raw, self.agent.name, "acp", self.state.run_id))

    async def _always(self, request: PermissionRequest, tool: str, chosen: Any, decision: Any) -> None:
        """The operator chose the agent's own "always" option: Tether keeps it as a rule too,
        so the record is Tether's (scope: this run, unless the operator picked another)."""
        if self.rules is None:
            return
        effect = "allow" if chosen.kind.startswith("allow") else "deny"
        scope = decision.scope or f"run:{self.state.run_id}"
        rule = Rule(effect, request.kind or tool, f"{chosen.name} chosen for {tool}", decision.by,  # type: ignore[arg-type]
                    agent=self.agent.name, source="acp", scope="agent" if scope == "agent" else scope)
        try:
            added = await self.rules.add(check(rule).rule)
        except (RuleError, OSError, StateError) as exc:
            log.warning("run %s: the agent's %s choice was not kept as a rule: %s", self.state.run_id, chosen.kind, exc)
            return
        self.emit(RuleAdded(run_id=self.state.run_id, rule=added.id, effect=added.effect, describes=added.describe(),
                            by=added.by))

    def _sandbox(self) -> Sandbox | None:
        session = self._session
        return session.sandbox if session is not None else None

    def _workspace(self) -> Path | None:
        session = self._session
        return session.workspace.resolve() if session is not None else None

    def vet(self, decision: Any) -> str | None:
        """Words to refuse a decision with before it is taken: edited arguments (ACP has no way
        to give them to the agent), an option the agent does not offer, or one that does not
        fit the verdict (allowing with a reject option). The same person approving twice is
        refused by the run's controls (:func:`tether.run.controls.repeated`), as for any run."""
        request = self._asking
        if self._budget_waiting is not None:  # a fleet budget's call: its --args are the dollars it lifts
            if decision.option is not None or decision.silent:
                return "--option and --silent apply to an ACP agent's permission requests, not to a budget call"
            return budget_ask.check_amount(decision.args) if decision.kind == "approve" else None
        if decision.kind == "approve" and decision.args is not None:
            return (f"run {self.state.run_id} is the ACP agent {self.agent.name}'s, and ACP offers no way to change "
                    "the arguments of an agent's call: approve or reject it as the agent asked")
        if request is None or decision.option is None:  # an empty id is no option: refused below
            return None
        option = next((o for o in request.options if o.option_id == decision.option), None)
        if option is None:
            offered = ", ".join(f"{o.option_id} ({o.kind})" for o in request.options)
            return f"the agent offers no option {decision.option!r} for {request.tool_call_id}; it offers {offered}"
        if option.kind.startswith("allow") != (decision.kind == "approve"):
            verb = "approve" if decision.kind == "approve" else "reject"
            return f"option {option.option_id} is {option.kind.replace('_', ' ')}: it cannot {verb} the call"
        return None

    # ---- what the agent reports ---------------------------------------------------------------
    def _on_event(self, event: AcpEvent) -> None:
        st = self.state
        if not isinstance(event, AgentExited | TurnEnded):
            self._heard = True  # the agent did something this turn
        if self._replaying:  # the loaded session's history: the transcript has it already,
            if isinstance(event, UsageReported) and event.cost_amount is not None:
                self._session_cost = event.cost_amount  # and its cost with it
            return
        match event:
            case TextChunk(text=text) if text:
                self._text.append(text)
                self.emit(TextDelta(run_id=st.run_id, turn=st.turns + 1, text=text))
            case ThoughtChunk(text=text):
                self._thought.append(text)
            case ToolCallStarted():
                call = _Call(event.tool_call_id, event.title or event.tool_name or "tool", event.kind,
                             _args(event.raw_input), time.perf_counter(), event.status, event.text)
                self._calls[call.call_id] = call
                if event.raw_input or event.status not in (None, "pending"):
                    self._announce(call)
                self._settle(call, event.status)
            case ToolCallUpdated():
                call = self._calls.get(event.tool_call_id)
                if call is None:
                    return
                # Its name stays the one it started with (OpenCode retitles a write by its
                # file's path); its arguments are the first the agent reports in full, which
                # may come after the start (OpenCode starts a call pending with ``{}``).
                if event.raw_input and not call.announced:
                    call.args = _args(event.raw_input)
                if event.text:
                    call.text = event.text
                if event.raw_input or event.status not in (None, "pending"):
                    self._announce(call)
                if event.status and event.status != call.status and event.status not in ("completed", "failed"):
                    self.emit(ToolProgress(run_id=st.run_id, call_id=call.call_id, name=call.name,
                                           label=event.status.replace("_", " ")))
                self._settle(call, event.status, event.raw_output)
            case PlanUpdated(entries=entries):
                self.emit(Plan(run_id=st.run_id, entries=[{"content": e.content, "status": e.status,
                                                           "priority": e.priority} for e in entries]))
            case UsageReported():
                self._usage(event)
            case ShellOutput():
                self._shell(event)
            case CommandsAvailable(commands=commands):
                self.emit(AgentCommands(run_id=st.run_id, commands=[
                    {"name": c.name, "description": c.description, **({"hint": c.hint} if c.hint else {})}
                    for c in commands]))
            case PermissionAsked(request=request):
                self._permissions.put_nowait(request)
            case FileWritten(path=path, size=size):
                self.emit(FileWrite(run_id=st.run_id, path=path, size=size))
            case FileRefused(operation="write", path=path, reason=reason, outside=outside):
                self.emit(FileWrite(run_id=st.run_id, path=path, size=0, refused=reason))
                if outside is not None:
                    self._refused.append(outside)
                    done = self._reported_done(path, outside.path)
                    if done is not None:  # the call said it was done before its request came (OpenCode, loaded)
                        self._look(done)
            case ConfigOptions(options=options, source=source):
                self.emit(AgentConfig(run_id=st.run_id, options=[dict(o) for o in options], source=source))
            case BadFrame(count=count, sample=sample) if count in (1, 10, 100):
                self.emit(ToolProgress(run_id=st.run_id, call_id="", name="agent",
                                       label=f"{count} line(s) from the agent were not JSON-RPC: {sample[:80]!r}"))
            case _:
                pass

    def _announce(self, call: _Call) -> None:
        """The call in the transcript and the trace (``tool_start``), once: when it runs, or
        its arguments are known, whichever comes first (a call still ``pending`` may have its
        input streaming in, or wait for permission)."""
        if call.announced:
            return
        call.announced = True
        st = self.state
        self._flush_text()
        st.messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call.call_id, "type": "function", "function": {"name": call.name, "arguments": call.args}}]})
        self.emit(ToolStart(run_id=st.run_id, call_id=call.call_id, name=call.name, args=call.args))

    def _shell(self, event: ShellOutput) -> None:
        """A shell call's output as it comes, and its exit code: in the trace at once
        (``tool_output``), and kept for the call's result."""
        call = self._calls.get(event.tool_call_id)
        if call is None:
            return
        self._announce(call)
        if event.exited:
            call.end = exit_words(event.exit_code, event.signal)
        else:
            call.output = terminal.kept(call.output, event.data)
        self.emit(ShellOutputEvent(run_id=self.state.run_id, call_id=call.call_id, name=call.name,
                                   data=event.data[-terminal.MAX_KEPT:], exited=event.exited,
                                   exit_code=event.exit_code, signal=event.signal))

    def _settle(self, call: _Call, status: str | None, raw_output: Any = None) -> None:
        """A tool call that reached its end: its result in the transcript and the trace, once."""
        if status is not None:
            call.status = status
        if status not in ("completed", "failed"):
            return
        self._announce(call)
        st = self.state
        ok = status == "completed"
        text = call.text or terminal.shell_text(call.output, call.end) or (
            json.dumps(raw_output, default=str) if raw_output is not None else "")
        text = text or ("done" if ok else "failed")
        ms = (time.perf_counter() - call.started) * 1000
        if not any(m.get("role") == "tool" and m.get("tool_call_id") == call.call_id for m in st.messages[-8:]):
            st.messages.append({"role": "tool", "tool_call_id": call.call_id, "content": text})
            st.tool_runs += 1
            if not ok and call.call_id not in st.failed_calls:
                st.failed_calls.append(call.call_id)
            self.tool_runs.append({"call_id": call.call_id, "name": call.name, "ok": ok, "ms": round(ms, 1)})
            self.emit(ToolResult(run_id=st.run_id, call_id=call.call_id, name=call.name, ms=ms, ok=ok,
                                 error=None if ok else text[:PREVIEW_CHARS], preview=text[:PREVIEW_CHARS]))
            if self._refused and (ok or self._sandbox() is not None):  # did the agent write a refused file itself?
                self._look(call.call_id)  # (tether.acp.escapes); in a sandbox, a failed call may be its refusal
            self._checkpoint(call.call_id, call.name)

    def _checkpoint(self, call_id: str, tool: str) -> None:
        """A checkpoint of the run's workspace after a call the agent reported finished (or, with
        no ``call_id``, after its turn), off this handler: awaited with the turn's looks."""
        if self.driver.after_change is None or self._replaying:
            return

        async def take() -> None:
            await self.driver.checkpoint(call_id, tool)

        task = asyncio.ensure_future(take())
        self._looking.add(task)
        task.add_done_callback(self._looking.discard)

    def _reported_done(self, *paths: str) -> str | None:
        """The last call the agent reported completed whose input names one of ``paths``."""
        for call in reversed(list(self._calls.values())):
            if call.status == "completed" and any(json.dumps(p)[1:-1] in call.args for p in paths):
                return call.call_id
        return None

    def _look(self, call_id: str) -> None:
        """Look at the disk for the writes refused so far, off the loop: each one the agent
        made itself is a warning, on the call that reported success (``call_id``). The ones
        not there yet are looked at once more when the turn ends (:meth:`_looked_at`)."""
        refused, self._refused = self._refused, []

        async def look() -> None:
            left = await self._look_at(refused, call_id)
            self._reported.update((r.path, call_id) for r in left)  # reported done, not on disk yet
            self._refused.extend(left)

        task = asyncio.ensure_future(look())
        self._looking.add(task)
        task.add_done_callback(self._looking.discard)

    async def _look_at(self, refused: list[RefusedWrite], call_id: str | None) -> list[RefusedWrite]:
        """A warning for each refused write the agent made itself; returns the others."""
        written = await asyncio.to_thread(lambda: [r for r in refused if wrote_itself(r, self._turn_began_ns)])
        for write in written:
            self.emit(RunWarning(run_id=self.state.run_id, text=warning_words(write, self._workspace()),
                                 call_id=call_id, path=write.path))
        left = [r for r in refused if r not in written]
        box = self._sandbox()
        if box is None:
            return left
        for write in left:  # not there: the sandbox kept the agent's own write out, if it tried
            self.emit(RunWarning(run_id=self.state.run_id, text=sandboxed_words(write, box.backend),
                                 call_id=call_id, path=write.path))
        return []

    async def _looked_at(self) -> None:
        """Every look of this turn done, and the writes still refused looked at a last time:
        a turn's warnings are in the trace before its ``turn`` line (or the run's end)."""
        while self._looking:
            await asyncio.gather(*self._looking)
        refused, self._refused = self._refused, []
        for _ in range(WRITE_GRACE_LOOKS):  # a call said it wrote one: its own write may land a moment later
            if not any(r.path in self._reported for r in refused):
                break
            await asyncio.sleep(WRITE_GRACE_S / WRITE_GRACE_LOOKS)
            for write in [r for r in refused if r.path in self._reported]:
                if not await self._look_at([write], self._reported[write.path]):
                    refused.remove(write)  # seen written: its warning is on the call that reported it
                    del self._reported[write.path]
        self._reported.clear()
        if refused:
            await self._look_at(refused, None)

    def _usage(self, usage: UsageReported) -> None:
        """Tokens and cost as the agent reports them; the budget is checked on every report."""
        st = self.state
        self._usage_seen = self._turn_usage_seen = True
        if (per_call := call_tokens(usage)) is not None:
            self._turn_tokens[0] += per_call[0]
            self._turn_tokens[1] += per_call[1]
        elif usage.source == "prompt_response" and (usage.input_tokens or usage.output_tokens):
            self._turn_final = (usage.input_tokens or 0, usage.output_tokens or 0)
        if usage.cost_amount is not None:  # the session's running total: what it grew by is this run's
            self._reported_cost = True
            st.pricing.assumed, st.pricing.source = False, "agent"  # the agent's own report
            st.cost_usd += max(0.0, usage.cost_amount - self._session_cost)
            self._session_cost = usage.cost_amount
        elif not self._reported_cost and per_call is not None:
            self._price(*per_call)
        self._check_budget()
        if self.fleet is not None:
            self._fleet_due = True
            self._permissions.put_nowait(_WAKE)  # wake the turn's wait: it charges the fleet budgets

    def _unmetered(self) -> str | None:
        """A budget that cannot hold: the agent ended a turn without reporting any usage. Said
        after its first turn (nothing tells before), unless ``budget_mode = "turns-only"``
        says the operator accepts that only turns are counted."""
        limits = self.state.limits
        if limits.budget_usd is None or limits.budget_mode == "turns-only" or self._usage_seen:
            return None
        return (f"the agent {self.agent.name} reports no usage, so its ${limits.budget_usd:g} budget cannot hold; "
                "remove budget_usd, or set budget_mode = \"turns-only\" to count turns alone")

    def _price(self, prompt_tokens: int, completion_tokens: int) -> None:
        prompt_tokens, completion_tokens = max(0, prompt_tokens), max(0, completion_tokens)
        self._priced[0] += prompt_tokens
        self._priced[1] += completion_tokens
        self.state.cost_usd += self.state.pricing.cost(prompt_tokens, completion_tokens)

    def _check_budget(self) -> None:
        budget = self.state.limits.budget_usd
        if budget is not None and self.state.cost_usd >= budget and not self._over_budget:
            self._over_budget = True
            self._permissions.put_nowait(_WAKE)  # wake the turn's wait: it cancels the turn

    async def _fleet_reached(self) -> bool:
        """Charge the fleet budgets with what the run spent since their last check, if it spent
        anything (or nothing was checked yet), and say whether one is reached (what the check
        found waits in ``_fleet_hit``)."""
        if self.fleet is not None and self._fleet_due and self._fleet_hit is None:
            self._fleet_due = False
            self._fleet_hit = await self.fleet(self.state, None)
        return self._fleet_hit is not None

    async def _held_by_budget(self, how: str) -> RunState | None:
        """A fleet budget reached (``_fleet_hit``): the run ends as a budget exit, in the budget's
        words and ``how`` the agent's turn ended (``stop``, a rejected ``ask``), or
        stops (a Stop, a deadline's ``stop``); or it waits on its ``budget`` call, then goes on
        (None) once approved for as much as it spent."""
        hit, self._fleet_hit = self._fleet_hit, None
        while isinstance(hit, NeedsApproval):
            hit = await self._budget_decision(hit)
        if isinstance(hit, Cancelled):
            return await self._finish(Status.INTERRUPTED, f"{hit.reason} (by {hit.by})" if hit.by and hit.by != DEADLINE
                                      else hit.reason, hit)
        if isinstance(hit, str):  # (a Tether run's words say it stopped before its next call; this says how)
            words = f"{hit.removesuffix(BEFORE_NEXT_CALL)}{how}" if hit.endswith(BEFORE_NEXT_CALL) else hit
            return await self._finish(Status.BUDGET_EXCEEDED, words, MaxBudget())
        return None

    async def _budget_decision(self, waiting: NeedsApproval) -> str | NeedsApproval | Cancelled | None:
        """Wait on the budget call ``waiting`` (the agent's turn is over: it spends nothing
        meanwhile) for a decision from any process, record it, and check the budgets again: what
        they say then (an approval lifted it: None)."""
        st = self.state
        st.status, st.interruption = Status.INTERRUPTED, waiting
        self._budget_waiting = waiting
        if self.expect is not None:
            self.expect(waiting)
        await self.save()
        try:
            decision = await self.decide(waiting)
        finally:
            self._budget_waiting = None
        if decision is None:
            if self.signal.cancelled:  # a Stop: the call is declined in words, as the stopper's
                reason, by = self.signal.reason or "the run was stopped", self.signal.by
            elif waiting.deadline_at is not None and time.time() >= waiting.deadline_at:
                st.status, st.interruption = Status.RUNNING, None
                return await self.fleet(st, waiting)  # type: ignore[misc]  # the deadline, applied by the check
            else:
                reason, by = "no decision came in time for the budget call", None
            self.emit(close_on_stop(st, waiting.call_id, reason, by, asked_at=waiting.asked_at, tool=BUDGET))
            return Cancelled(reason, by)
        self.emit(budget_ask.decide(st, decision))
        if isinstance(st.interruption, NeedsApproval) and st.interruption is not waiting:  # one of two approved
            return st.interruption
        st.status, st.interruption = Status.RUNNING, None
        await self.save()
        return await self.fleet(st, waiting)  # type: ignore[misc]

    def _approved_words(self) -> str:
        last = max((d for d in self.state.approvals.values() if d.tool == BUDGET), key=lambda d: d.ts, default=None)
        return "approved" if last is None else f"approved by {last.by}"

    def _flush_text(self) -> None:
        st = self.state
        if self._thought:
            self.emit(Thought(run_id=st.run_id, turn=st.turns + 1, text="".join(self._thought)))
            self._thought.clear()
        if self._text:
            st.messages.append({"role": "assistant", "content": "".join(self._text)})
            self._text.clear()

    async def _finish(self, status: Status, reason: str, interruption: Any = None, *,
                      error: str | None = None) -> RunState:
        st = self.state
        for call in self._calls.values():  # a call the agent never finished: say so in its slot
            if call.status not in ("completed", "failed"):
                call.text = call.text or f"not finished: {reason}"
                self._settle(call, "failed")
        await self._looked_at()  # a turn that ended in an error may have left a write to look at
        if self.fleet is not None and self._fleet_due:  # what it spent since the last check, charged
            self._fleet_due = False
            try:
                await self.fleet(st, None, settle=True)
            except Exception as exc:  # the run ends anyway; its cost is on its record
                log.warning("run %s: its last spend was not charged to the fleet budgets: %s", st.run_id, exc)
        if status is Status.COMPLETED and not any(m.get("role") == "assistant" and m.get("content")
                                                  for m in st.messages):
            st.messages.append({"role": "assistant", "content": ""})
        return await self.driver.finish(status, reason, interruption, error=error)


def session_for(agent: Agent, root: str | Path | None = None) -> AcpSession:
    """The session of an ACP agent's run, not started: its command, its environment (the
    agent file's, ``${VAR}`` filled in; an AgentError names a variable that is not set), its
    workspace (``root``, the run's own; else the agent's, else the current folder: the
    process's cwd, the session's cwd, the root its fs requests are kept in and the folder its
    sandbox may write) and its Stop's grace."""
    assert agent.acp is not None
    env, _secrets = agent.acp.resolved_env()
    workspace = Path(root if root is not None else agent.workspace or os.getcwd())
    box = None
    if agent.sandbox == "workspace":
        try:
            box = sandbox.for_agent(workspace, env)
        except sandbox.SandboxUnavailable as exc:
            raise AgentError(str(exc)) from None
    return AcpSession(agent.acp.argv, workspace=workspace, env=env, cancel_grace_s=agent.acp.cancel_grace_s,
                      sandbox=box, fs=agent.acp.fs, mode=agent.acp.mode, model=agent.acp.model)


class _Wake:
    """Put on the permission queue to wake a turn's wait without a request (the budget)."""


_WAKE: Any = _Wake()


def _option_for(request: PermissionRequest, approved: bool, chosen: str | None) -> str:
    """The agent's option for a verdict: the one named, else allow once / reject once."""
    if chosen:
        return chosen
    kinds: Sequence[str] = ("allow_once", "allow_always") if approved else ("reject_once", "reject_always")
    for kind in kinds:
        option = request.option(kind)
        if option is not None:
            return option.option_id
    raise AcpError(f"the agent offers no {'allow' if approved else 'reject'} option for {request.tool_call_id}")


def _diff_text(request: PermissionRequest, workspace: Path | None) -> str:
    """The change a permission request proposes, as a unified diff per file, its paths
    relative to the workspace where they are inside it (``b/out.txt``, as git shows them)."""
    def shown(path: str) -> str:
        with contextlib.suppress(ValueError):
            if workspace is not None:
                return str(Path(path).relative_to(workspace))
        return path.lstrip("/")

    parts = []
    for diff in request.diffs:
        old = (diff.old_text or "").splitlines(keepends=True)
        new = diff.new_text.splitlines(keepends=True)
        name = shown(diff.path)
        parts.append("".join(difflib.unified_diff(old, new, f"a/{name}" if diff.old_text is not None
                                                  else "/dev/null", f"b/{name}")))
    return "\n".join(p for p in parts if p)


def _args(raw_input: Any) -> str:
    """A call's ``rawInput`` as the transcript's arguments (JSON; ``{}`` for none yet)."""
    return json.dumps(raw_input, sort_keys=True, default=str) if raw_input else "{}"


def _last_user_text(state: RunState, *, told: bool = True) -> str:
    """The prompt: the last user message, after the note a rewind or a fork put before it, if any
    (not a fork's note when the agent forked its session: it has the conversation itself)."""
    for i in range(len(state.messages) - 1, -1, -1):
        message = state.messages[i]
        if message.get("role") == "user":
            text = str(message.get("content") or "")
            before = state.messages[i - 1] if i > 0 else {}
            if not told and message.get("tether") == "fork":  # no --message: the agent just goes on
                return "(Tether forked this session into a new workspace, at the same point: go on with the task.)"
            if before.get("tether") == "fork" and not told:
                return text
            if before.get("tether") in ("rewind", "fork") and message.get("tether") not in ("rewind", "fork"):
                text = f"{before.get('content')}\n\n{text}"
            return text
    raise StateError(f"run {state.run_id} has no prompt")

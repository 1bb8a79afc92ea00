"""The loop: a function over :class:`RunState` with five exits.

Each iteration first drains the *pending* calls (tool calls of the last assistant
message with no result yet) and asks the model only when nothing is outstanding,
so resuming a saved run and running a new one are the same code path. Limits are
checked before every model call; cost is added the moment a reply is back. Every
decision about a call (run, cached, declined, cancelled, failed) is written into the
transcript in words, and emitted as an event that the trace and the console share.

Tool names are the tools' own everywhere (the transcript, the trace, approvals): only what
goes to the model and comes back from it is mapped, to and from the names it is offered
(:func:`~tether.agents.tools.base.offered_name`: ``time.get_current_time`` goes as
``time__get_current_time``, the only form hosted endpoints accept).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tether.vocab import faultpoints, people
from tether.approvals import Call, Rule, Verdict, run_source
from tether.approvals.holding import deadline_of, overdue, too_late, verdict_of
from tether.vocab.preview import Preview
from tether.agents.tools.preview import preview_call
from tether.agents.agent import ErrorFormatter, StopCondition
from tether.vocab.cancel import CancelSignal, RunCancelled
from tether.models.base import ChatModel, ProviderError, RetryNotice
from tether.vocab.events import (
    ApprovalDecision,
    ApprovalRequired,
    Event,
    EventSink,
    ProviderRetry,
    RunStarted,
    TextDelta,
    ToolProgress,
    ToolResult,
    ToolStart,
    Turn,
)
from tether.vocab.state import (
    Cancelled,
    Decision,
    Interruption,
    MaxBudget,
    MaxTurns,
    NeedsApproval,
    ProviderOutage,
    RunState,
    StateError,
    Status,
    StopConditionMet,
    args_hash,
    pending_calls,
)
from tether.store.protocol import SaveError
from tether.run.driver import RunDriver
from tether.models.tokens import TokenCounter
from tether.agents.tools.base import OFFERED_NAME, Tool, ToolContext, offered_name
from tether.agents.tool_errors import ToolError
from tether.agents.workspace import Workspace
from tether.vocab.text import json_words
from tether.approvals.decisions import DEADLINE, _reject_call, approved_words, close_on_stop, declined_words, edited_words

MAX_TOOL_OUTPUT_CHARS = 16_000
FleetCheck = Callable[..., Awaitable[str | NeedsApproval | Cancelled | None]]  # (state, asked, *, settle=False)
UNSEEN_USAGE_RATIO = 2.0  # strict budgets: how much more an endpoint may count before it has said
USAGE_MARGIN = 1.05
SHUTDOWN_REASON = "the process running this run was shut down"
"""Why a run whose task was cancelled stopped: a queue worker goes on with such a run."""
log = logging.getLogger(__name__)


@dataclass
class Stop:
    status: Status
    reason: str
    interruption: Interruption | None = None
    error: str | None = None


@dataclass
class LoopEnv:
    """What a process supplies to run a loop; none of it is saved."""

    client: ChatModel
    tools: dict[str, Tool]
    workspace: Workspace | None
    counter: TokenCounter = field(default_factory=TokenCounter)
    sinks: list[EventSink] = field(default_factory=list)
    stop_conditions: list[StopCondition] = field(default_factory=list)
    error_formatter: ErrorFormatter | None = None
    # Runs a subagent for the research tool: (parent, call id, question, signal) -> child.
    spawn: Callable[[RunState, str, str, CancelSignal], Awaitable[RunState]] | None = None
    # The store's standing rules, read before each call (None: no rules, people decide).
    rules: Callable[[], Awaitable[Sequence[Rule]]] | None = None
    # After a call of a tool that is not read-only: a checkpoint of the run's workspace (an
    # event for the trace, or None: nothing changed). tether.workspaces.checkpoints.
    after_change: Callable[[RunState, str, str], Awaitable[Event | None]] | None = None
    # The fleet budgets over the run (tether.approvals.budgets), before each model call, given the
    # budget call it waited on before, if any: the words of one that is reached (the run stops, a
    # budget exit), the approval it waits on (an "ask" budget), a Stop by that call's deadline, or None.
    fleet_budget: FleetCheck | None = None


class RunLoop:
    """Tether's loop over one run, handed the run's ``driver`` (what emits, saves, checkpoints and
    finishes it: its sinks and checkpoints are ``env``'s) and the run's Stop ``signal``."""

    def __init__(self, driver: RunDriver, env: LoopEnv, signal: CancelSignal) -> None:
        self.driver = driver
        self.state = driver.state
        self.env = env
        self.signal = signal
        self.ledger = driver.handle.ledger()
        self.tool_runs: list[dict[str, Any]] = []  # executed in this process
        # The names the model is offered, where they are not the tools' own, both ways.
        self._offered = {name: offered_name(name) for name in env.tools if not OFFERED_NAME.fullmatch(name)}
        self._named = {wire: name for name, wire in self._offered.items()}
        self._schemas = [self._offer(t.schema()) for t in env.tools.values()]
        self._sent: list[dict[str, Any]] = []  # the transcript as the model is sent it
        self._sent_differs = False
        self._cache: dict[tuple[str, str], str] | None = None
        self._wire = env.client.new_transcript()
        self._call_ids: set[str] | None = None
        self._counted_prompt = 0  # our count of the request being asked (strict budgets only)
        self._asked: dict[str, NeedsApproval] = {}  # calls that asked for approval before this run()

    # ---- events and saving: the run's driver (tether.run.driver) -------------
    def emit(self, event: Event) -> None:
        self.driver.emit(event)

    async def save(self) -> None:
        await self.driver.save()

    async def record(self, events: Sequence[Event]) -> None:
        """Emit ``events``, made on the state outside the loop (a decision, a deadline, a
        Stop of a run that waits), and save the state they describe; nothing when none."""
        await self.driver.record(events)

    # ---- the loop --------------------------------------------------------
    async def fail(self, reason: str) -> RunState:
        """End the run ``failed`` before its loop could start (an MCP server that would not
        start, a workspace that could not be made): traced like any stop, so the run says why."""
        return await self._before_start(Stop(Status.FAILED, reason, error=reason))

    async def stop_before_start(self, cancelled: RunCancelled) -> RunState:
        """End the run ``interrupted`` by a Stop that came before its loop started (in its workspace's setup)."""
        return await self._before_start(self._cancelled(cancelled))

    async def _before_start(self, stop: Stop) -> RunState:
        st = self.state
        self.emit(RunStarted(run_id=st.run_id, model=st.model, resumed=st.turns > 0, parent_run_id=st.parent_run_id,
                             pid=os.getpid(), agent=st.agent.name if st.agent else st.model))
        return await self._finish(stop)

    def _cancelled(self, cancelled: RunCancelled) -> Stop:
        by = self.signal.by
        reason = f"{cancelled.reason} (by {by})" if by else cancelled.reason
        return Stop(Status.INTERRUPTED, reason, Cancelled(cancelled.reason, by))

    async def run(self) -> RunState:
        st = self.state
        if st.status is Status.COMPLETED or st.status is Status.FAILED:
            raise StateError(f"run {st.run_id} has already ended ({st.status.value}); it cannot be resumed")
        resumed = st.turns > 0
        if isinstance(st.interruption, NeedsApproval):  # asked before: its deadline counts from then
            self._asked[st.interruption.call_id] = st.interruption
        st.status, st.interruption, st.error = Status.RUNNING, None, None
        self.emit(RunStarted(run_id=st.run_id, model=st.model, resumed=resumed,
                             price="unknown" if st.pricing.unknown else None,
                             parent_run_id=st.parent_run_id, pid=os.getpid(),
                             agent=st.agent.name if st.agent else st.model))
        try:
            while True:
                calls = pending_calls(st)
                if calls:
                    stop = None
                    for call in calls:
                        stop = await self._execute(call)
                        if stop:
                            break
                    if stop:
                        return await self._finish(stop)
                    continue
                if _answered(st):  # the answer was saved before a crash: do not pay for it again
                    return await self._finish(Stop(Status.COMPLETED, "the model answered"))
                stop = self._check_limits()
                if stop is None and self.env.fleet_budget is not None and (words := await self.env.fleet_budget(
                        st, next((a for a in reversed(self._asked.values()) if a.tool_name == "budget"), None))):
                    stop = self._budget_stop(words)
                if stop:
                    return await self._finish(stop)
                stop = await self._ask_model()
                if stop:
                    return await self._finish(stop)
        except RunCancelled as cancelled:
            return await self._finish(self._cancelled(cancelled))
        except ProviderError as exc:
            if exc.retryable:  # the endpoint is down, not the run: resumable once it is back
                reason = f"{exc}; tether resume {st.run_id} goes on once the endpoint answers again"
                return await self._finish(Stop(Status.INTERRUPTED, reason,
                                         ProviderOutage(str(exc), exc.status, exc.attempts, round(exc.seconds, 3))))
            return await self._finish(Stop(Status.FAILED, str(exc), error=str(exc)))
        except asyncio.CancelledError:
            # The task itself was cancelled (the process is shutting down): record why, then go.
            reason = SHUTDOWN_REASON
            await self._finish(Stop(Status.INTERRUPTED, reason, Cancelled(reason)), settle=False)
            raise
        except SaveError:
            raise  # the disk refused; the last saved state stands and says so
        except Exception as exc:  # a bug must still end the run in a known way
            reason = f"harness error: {type(exc).__name__}: {exc}"
            return await self._finish(Stop(Status.FAILED, reason, error=reason))

    def _budget_stop(self, words: str | NeedsApproval | Cancelled) -> Stop:
        """Where a fleet budget leaves the run: waiting on its approval, stopped by that
        approval's deadline, or a budget exit in words."""
        if isinstance(words, NeedsApproval):
            return Stop(Status.INTERRUPTED, f"waiting for approval of {words.call_id}: {words.why}", words)
        if isinstance(words, Cancelled):
            return Stop(Status.INTERRUPTED, words.reason, words)
        return Stop(Status.BUDGET_EXCEEDED, words, MaxBudget())

    def _check_limits(self) -> Stop | None:
        st, limits = self.state, self.state.limits
        if limits.max_turns is not None and st.turns >= limits.max_turns:
            return Stop(Status.MAX_TURNS_EXCEEDED, f"turn cap reached: {st.turns} of {limits.max_turns} turns",
                        MaxTurns())
        if limits.budget_usd is not None:
            if st.cost_usd >= limits.budget_usd:
                over = st.cost_usd - limits.budget_usd
                return Stop(Status.BUDGET_EXCEEDED,
                            f"budget reached: spent ${st.cost_usd:.4f} of ${limits.budget_usd:.4f}"
                            + (f" (over by ${over:.4f}, less than the last turn's cost)" if over > 0 else ""),
                            MaxBudget())
            if limits.budget_mode == "strict":
                counted = self.env.counter.prompt_tokens(self._model_messages(), self._schemas)
                self._counted_prompt = counted
                # The endpoint's count, not ours, is what it bills: scale ours by the largest
                # ratio it has shown, plus a margin; before it has shown any, assume it may
                # count up to twice what we do.
                ratio = (st.usage_ratio if st.usage_ratio is not None else UNSEEN_USAGE_RATIO) * USAGE_MARGIN
                prompt = math.ceil(counted * max(1.0, ratio))
                reserve = st.pricing.cost(prompt, limits.max_tokens)
                if st.cost_usd + reserve > limits.budget_usd:
                    return Stop(Status.BUDGET_EXCEEDED,
                                f"strict budget: the next turn could cost up to ${reserve:.4f} "
                                f"({prompt} prompt tokens as the endpoint counts them + {limits.max_tokens} "
                                f"max_tokens), and ${st.cost_usd:.4f} of ${limits.budget_usd:.4f} is spent",
                                MaxBudget())
        for condition in self.env.stop_conditions:
            reason = condition(st)
            if reason:
                return Stop(Status.INTERRUPTED, reason, StopConditionMet(reason))
        return None

    async def _ask_model(self) -> Stop | None:
        st = self.state

        def on_retry(notice: RetryNotice) -> None:
            self.emit(ProviderRetry(run_id=st.run_id, attempt=notice.attempt, status=notice.status,
                                    reason=notice.reason, wait_s=notice.wait_s))

        turn = st.turns + 1

        def on_delta(text: str | None) -> None:
            self.emit(TextDelta(run_id=st.run_id, turn=turn, text=text))

        reply = await self.env.client.complete(
            st.model, self._model_messages(), self._schemas, max_tokens=st.limits.max_tokens,
            signal=self.signal, on_retry=on_retry, transcript=self._wire,
            on_delta=on_delta if self.env.sinks else None,
        )
        # The money is spent: account for it before anything else happens with the reply.
        st.turns += 1
        st.prompt_tokens += reply.prompt_tokens
        st.completion_tokens += reply.completion_tokens
        st.cost_usd += st.pricing.cost(reply.prompt_tokens, reply.completion_tokens)
        st.per_turn_prompt_tokens.append(reply.prompt_tokens)
        if reply.usage_estimated:
            st.estimated_turns.append(st.turns)
        elif self._counted_prompt:
            ratio = reply.prompt_tokens / self._counted_prompt
            if st.usage_ratio is None or ratio > st.usage_ratio:
                st.usage_ratio = round(ratio, 4)
        self._counted_prompt = 0
        message = reply.message()
        self._own_names(message.get("tool_calls") or ())
        self._give_unique_ids(message.get("tool_calls") or ())
        st.messages.append(message)
        # Traced before it is saved: a crash in between leaves a turn that was paid for
        # in the trace (and asked again on resume), never a saved turn the trace lacks.
        self.emit(Turn(run_id=st.run_id, turn=st.turns, prompt_tokens=reply.prompt_tokens,
                       completion_tokens=reply.completion_tokens,
                       total_tokens=reply.prompt_tokens + reply.completion_tokens,
                       cost_usd=st.cost_usd, finish_reason=reply.finish_reason,
                       provider_ms=reply.provider_ms, estimated=reply.usage_estimated,
                       tool_calls=len(message.get("tool_calls") or ()),
                       ttft_ms=None if reply.ttft_ms is None else round(reply.ttft_ms, 1),
                       tokens_per_s=_rate(reply.completion_tokens, reply.stream_ms)))
        faultpoints.boundary("before_save_reply")
        await self.save()
        faultpoints.boundary("after_save_reply")
        if not message.get("tool_calls"):
            return Stop(Status.COMPLETED, "the model answered")
        return None

    # ---- names: the tools' own, and the ones the model is offered -----------
    def _offer(self, schema: dict[str, Any]) -> dict[str, Any]:
        fn = schema.get("function") or {}
        wire = self._offered.get(fn.get("name"))
        return schema if wire is None else {**schema, "function": {**fn, "name": wire}}

    def _model_messages(self) -> list[dict[str, Any]]:
        """The transcript as the model is sent it: each tool call under the name the tool is
        offered by. Kept from turn to turn (the transcript only grows), and the transcript
        itself while no call needs another name."""
        messages = self.state.messages
        sent = self._sent
        if len(sent) > len(messages):  # not the transcript it was built from: start over
            sent.clear()
            self._sent_differs = False
        for message in messages[len(sent):]:
            shown = self._as_offered(message)
            self._sent_differs = self._sent_differs or shown is not message
            sent.append(shown)
        return sent if self._sent_differs else messages

    def _as_offered(self, message: dict[str, Any]) -> dict[str, Any]:
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if not calls or not isinstance(calls, list):
            return message
        renamed = []
        for call in calls:
            fn = call.get("function") if isinstance(call, dict) else None
            name = fn.get("name") if isinstance(fn, dict) else None
            if not isinstance(name, str) or OFFERED_NAME.fullmatch(name):
                renamed.append(call)
                continue
            # A tool's own name (an old run's calls named with a dot, too), or one no tool has.
            wire = self._offered.get(name) or offered_name(name)
            renamed.append({**call, "function": {**fn, "name": wire}})
        if all(a is b for a, b in zip(renamed, calls)):
            return message
        return {**message, "tool_calls": renamed}

    def _own_names(self, calls: Any) -> None:
        """A reply's calls under the tools' own names (the transcript, the trace and approvals
        use those). A call by a tool's own name is taken as it is."""
        for call in calls:
            fn = call.get("function") or {}
            name = fn.get("name")
            if name in self._named and name not in self.env.tools:
                fn["name"] = self._named[name]

    def _tool_named(self, name: str) -> Tool | None:
        """The tool a call names, by its own name or by the one it is offered by."""
        tool = self.env.tools.get(name)
        if tool is None and name in self._named:
            tool = self.env.tools.get(self._named[name])
        return tool

    def _give_unique_ids(self, calls: Any) -> None:
        """Call ids key approvals, results and the idempotency ledger, so each must be new
        to the run: a missing, repeated or reused id gets one of ours."""
        if self._call_ids is None:
            self._call_ids = {c.get("id") for m in self.state.messages if m.get("role") == "assistant"
                              for c in m.get("tool_calls") or ()}
        for i, call in enumerate(calls):
            if not call.get("id") or call["id"] in self._call_ids:
                call["id"] = f"call_{self.state.turns}_{i}"
                while call["id"] in self._call_ids:
                    call["id"] += "_"
            self._call_ids.add(call["id"])

    async def _finish(self, stop: Stop, *, settle: bool = True) -> RunState:
        st = self.state
        if settle and self.env.fleet_budget is not None and st.cost_usd - st.child_cost_usd > st.fleet_charged_usd:
            try:  # its last model call's cost, charged to the fleet budgets (no check comes after it)
                await self.env.fleet_budget(st, None, settle=True)
            except Exception as exc:  # the run ends anyway; its cost is on its record
                log.warning("run %s: its last spend was not charged to the fleet budgets: %s", st.run_id, exc)
        return await self.driver.finish(stop.status, stop.reason, stop.interruption, error=stop.error)

    # ---- one tool call ---------------------------------------------------
    async def _execute(self, call: dict[str, Any]) -> Stop | None:
        st = self.state
        call_id = call["id"]
        fn = call.get("function") or {}
        name, raw_args = str(fn.get("name", "")), fn.get("arguments") or "{}"
        tool = self._tool_named(name)
        if tool is None:
            await self._record(call_id, name, self._unknown_tool(name), ok=False, error="unknown tool")
            return None
        name = tool.name
        args, problem = self._parse_args(name, raw_args)
        if problem:
            await self._record(call_id, name, problem, ok=False, error="invalid arguments")
            return None

        approval_note: str | None = None
        decision = st.approvals.get(call_id)
        # A call whose deadline passed while it waited is the deadline's to answer, not a rule's.
        asked = self._asked.get(call_id)
        overdue_call = decision is None and asked is not None and too_late(asked, time.time())
        verdict = await self._verdict(tool, args) if decision is None and not overdue_call else None
        if verdict is not None and verdict.effect == "deny":
            decision = self._by_rule(call_id, tool, raw_args, verdict)
        ask = verdict.rule if verdict is not None and verdict.effect == "ask" else None
        if (tool.needs_approval and name not in st.policies.auto_approve) or ask is not None or decision is not None \
                or overdue_call:
            if decision is None and verdict is not None and verdict.effect == "allow" and tool.approvals <= 1:
                # (A rule is not a person: a call that needs two people still waits for them.)
                decision = self._by_rule(call_id, tool, raw_args, verdict)
            # A recorded intent means this very call was approved and started before a crash.
            consumed_here = call_id in st.intents and decision is not None and decision.verdict == "approved"
            if not consumed_here and (decision is None or decision.used or not decision.complete
                                      or decision.bound_hash != args_hash(raw_args)):
                return await self._await_approval(call_id, tool, raw_args, decision, ask)
            decision.used = True
            if decision.verdict == "rejected":  # reject() normally answers the call itself
                text = declined_words(decision.text, decision.by)
                await self._record(call_id, name, text, ok=False, error="declined")
                return None
            approval_note = approved_words(decision.text, decision.by)
            if decision.args is not None:  # the operator's arguments, checked when they were given
                edited, problem = self._parse_args(name, decision.args)
                if problem:
                    await self._record(call_id, name, _noted(approval_note, problem), ok=False,
                                       error="invalid arguments")
                    return None
                approval_note = edited_words(decision, raw_args)
                args, raw_args = edited, decision.args

        dedupe_key = (name, _canonical(args))
        if self._dedupes(tool) and dedupe_key in self._result_cache():
            await self._record(call_id, name, _noted(approval_note, self._result_cache()[dedupe_key]), ok=True,
                               cached=True)
            return None

        if not tool.read_only:
            st.intents[call_id] = f"{st.run_id}:{call_id}"
            await self.save()
        return await self._run_tool(call_id, tool, args, raw_args, approval_note, dedupe_key)

    async def _run_tool(self, call_id: str, tool: Tool, args: dict[str, Any], raw_args: str,
                        approval_note: str | None, dedupe_key: tuple[str, str]) -> Stop | None:
        st = self.state
        ctx = ToolContext(run_id=st.run_id, call_id=call_id, signal=self.signal,
                          progress=lambda label: self.emit(ToolProgress(run_id=st.run_id, call_id=call_id,
                                                                         name=tool.name, label=label)),
                          workspace=self.env.workspace, ledger=self.ledger)
        if self.env.spawn is not None:
            ctx.spawn = lambda question: self.env.spawn(st, call_id, question, self.signal)
        self.emit(ToolStart(run_id=st.run_id, call_id=call_id, name=tool.name, args=raw_args))
        self.tool_runs.append({"name": tool.name, "args": args})
        st.tool_runs += 1
        started = time.perf_counter()
        faultpoints.boundary("before_tool")
        try:
            text = await tool.run(args, ctx)
        except RunCancelled as cancelled:
            self._add_child_cost(ctx)
            elapsed = time.perf_counter() - started
            partial = ctx.partial
            text = (f"cancelled by the operator after {elapsed:.1f} s: {cancelled.reason}; "
                    f"the {tool.name} call did not finish" + (f" ({partial})" if partial else "") + ".")
            await self._record(call_id, tool.name, _noted(approval_note, text), ok=False, error="cancelled",
                               started=started)
            raise
        except Exception as exc:  # a tool that throws does not crash the loop
            self._add_child_cost(ctx)
            stop = await self._tool_failed(call_id, tool, exc, started, approval_note)
            await self._after_change(call_id, tool)  # a failed command may have written, too
            return stop
        finally:
            faultpoints.boundary("after_tool")
        self._add_child_cost(ctx)
        if self._dedupes(tool):
            self._result_cache()[dedupe_key] = text
        await self._record(call_id, tool.name, _noted(approval_note, text), ok=True, started=started)
        await self._after_change(call_id, tool)
        return None

    async def _after_change(self, call_id: str, tool: Tool) -> None:
        if not tool.read_only:
            await self.driver.checkpoint(call_id, tool.name)

    async def _tool_failed(self, call_id: str, tool: Tool, exc: Exception, started: float,
                           approval_note: str | None = None) -> Stop | None:
        """The tool raised: its error in words (the approval's words first, when the call was
        approved: the operator's note and changed arguments are the model's to read whatever
        the tool did), or the run's end when the policy or the error is fatal."""
        st = self.state
        own_words = str(exc) or type(exc).__name__
        permanent = isinstance(exc, ToolError) and exc.permanent
        policy = st.policies.tool_errors
        if policy == "fatal" or (permanent and st.policies.triage):
            await self._record(call_id, tool.name, _noted(approval_note, f"Error: {own_words}"), ok=False,
                               error=own_words, started=started)
            why = "no message can fix it" if permanent else "the tool-error policy is fatal"
            reason = f"tool {tool.name} failed ({why}): {own_words}"
            return Stop(Status.FAILED, reason, error=reason)
        if self.env.error_formatter is not None:
            text = self.env.error_formatter(exc, tool.name)
        elif policy == "generic":
            text = "Error"
        else:
            text = f"Error: {own_words}"
        await self._record(call_id, tool.name, _noted(approval_note, text), ok=False, error=own_words,
                           started=started)
        return None

    async def _verdict(self, tool: Tool, args: dict[str, Any]) -> Verdict | None:
        """What the store's standing rules say of this call (None: no rule fits)."""
        st = self.state
        agent = st.agent.name if st.agent is not None else st.model
        return await verdict_of(self.env.rules, Call(tool.name, args, agent, run_source(st), st.run_id))  # type: ignore[arg-type]

    def _by_rule(self, call_id: str, tool: Tool, raw_args: str, verdict: Verdict) -> Decision:
        """Record the decision a standing rule made, at once; a deny answers the call in words."""
        rule = verdict.rule
        by = f"rule {rule.id}"
        asked = self._asked.get(call_id)
        decision = Decision(call_id, "approved" if rule.effect == "allow" else "rejected", args_hash(raw_args),
                            rule.note(),
                            by, tool=tool.name, rule=rule.id, asked_at=asked.asked_at if asked else time.time())
        self.state.approvals[call_id] = decision
        self.emit(ApprovalDecision(run_id=self.state.run_id, call_id=call_id, tool=tool.name,
                                   verdict=decision.verdict, text=verdict.words(), by=by, rule=rule.id))
        faultpoints.boundary("rule_matched")  # decided, not saved yet: a crash here decides again on resume
        return decision

    async def _await_approval(self, call_id: str, tool: Tool, raw_args: str, earlier: Decision | None,
                              ask: Rule | None) -> Stop | None:
        """Hold the call for people: how many, until when, showing what it would change. A
        call whose deadline has passed (its process was gone, or nobody answered in time)
        is answered here by the deadline, never approved."""
        st = self.state
        before = self._asked.get(call_id)
        why = f"{tool.name} needs approval: {tool.approval_reason()}"
        if ask is not None:
            why = f"{tool.name} needs approval: {ask.cited()} asks for it"
        if earlier is not None and not earlier.used and earlier.complete and earlier.bound_hash != args_hash(raw_args):
            why += "; the arguments changed after the earlier decision, so that decision no longer applies"
        needed = max(ask.approvals if ask is not None else 1, tool.approvals,
                     earlier.needed if earlier is not None and not earlier.complete else 1)
        approvers = tuple(earlier.approvers) if earlier is not None and not earlier.complete else ()
        accounts = tuple(earlier.accounts) if earlier is not None and not earlier.complete else ()
        if approvers:
            why += f"; {people.progress(needed, approvers, accounts)}"
        deadline_s, on_deadline = deadline_of(ask, st.policies)
        asked_at = before.asked_at if before is not None and before.asked_at else time.time()
        deadline_at = before.deadline_at if before is not None and before.deadline_at else \
            (asked_at + deadline_s if deadline_s else None)
        escalated = before.escalated if before is not None else False
        if before is not None and before.deadline_at is not None:
            on_deadline = before.on_deadline  # asked again (one of two approved): as it was first held
        rule_id = ask.id if ask is not None else before.rule if before is not None else None
        if deadline_at is not None and time.time() >= deadline_at:
            step = overdue(NeedsApproval(call_id, tool.name, raw_args, why, asked_at, deadline_at=deadline_at,
                                         on_deadline=on_deadline, escalated=escalated), deadline_s)
            if step.event is not None:  # escalated: someone else is asked, and it waits once more
                deadline_at, escalated = step.waiting.deadline_at, True
                self.emit(step.event)
                why += f"; {step.words}, so it was escalated"
            elif step.action == "stop":  # the call is declined in words, and recorded as the deadline's
                self.emit(close_on_stop(st, call_id, step.words, DEADLINE, asked_at=asked_at))
                return Stop(Status.INTERRUPTED, step.words, Cancelled(step.words, DEADLINE))
            else:
                call = next(c for c in pending_calls(st) if c.get("id") == call_id)
                self.emit(_reject_call(st, call, step.words, DEADLINE, asked_at=asked_at))
                await self.save()
                return None  # the model reads the rejection and goes on
        preview = before.preview if before is not None and before.preview is not None else \
            await self._preview(tool, raw_args)
        interruption = NeedsApproval(call_id, tool.name, raw_args, why, asked_at, needed, approvers, deadline_at,
                                     on_deadline, escalated, preview, rule_id, accounts=accounts)
        self._asked[call_id] = interruption
        self.emit(ApprovalRequired(run_id=st.run_id, call_id=call_id, tool=tool.name, args=raw_args, why=why,
                                   needed=needed if needed > 1 else None, approvers=list(approvers) or None,
                                   deadline_at=deadline_at, on_deadline=on_deadline if deadline_at else None,
                                   preview=preview, rule=interruption.rule))
        return Stop(Status.INTERRUPTED, f"waiting for approval of {tool.name} ({call_id})", interruption)

    async def _preview(self, tool: Tool, raw_args: str) -> dict[str, Any] | None:
        """What the call would change, for the people deciding (read-only; a failure is shown)."""
        try:
            args = json.loads(raw_args)
        except ValueError:
            return None
        shown: Preview | None = await preview_call(tool, args, self.env.workspace)
        return None if shown is None else shown.to_dict()

    async def _record(self, call_id: str, name: str, text: str, *, ok: bool, cached: bool = False,
                      error: str | None = None, started: float | None = None) -> None:
        if len(text) > MAX_TOOL_OUTPUT_CHARS:
            cut = len(text) - MAX_TOOL_OUTPUT_CHARS
            text = text[:MAX_TOOL_OUTPUT_CHARS] + f"\n[output truncated: {cut} more characters not shown]"
        st = self.state
        st.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
        st.intents.pop(call_id, None)
        if not ok:
            st.failed_calls.append(call_id)
        ms = (time.perf_counter() - started) * 1000 if started is not None else 0.0
        self.emit(ToolResult(run_id=st.run_id, call_id=call_id, name=name, ms=round(ms, 3), ok=ok,
                             cached=cached, error=error, preview=text[:200]))
        await self.save()

    # ---- helpers -----------------------------------------------------------
    def _add_child_cost(self, ctx: ToolContext) -> None:
        child_cost = ctx.child_cost_usd
        if child_cost:
            self.state.cost_usd += child_cost
            self.state.child_cost_usd += child_cost
            child_id = ctx.child_run_id
            if child_id and child_id not in self.state.children:
                self.state.children.append(child_id)

    def _dedupes(self, tool: Tool) -> bool:
        mode = self.state.policies.dedupe
        return mode == "all" or (mode == "read-only" and tool.read_only)

    def _result_cache(self) -> dict[tuple[str, str], str]:
        """Answered calls of this run by (tool, arguments), rebuilt from the transcript on resume."""
        if self._cache is None:
            self._cache = {}
            calls: dict[str, tuple[str, str]] = {}
            failed = set(self.state.failed_calls)
            for message in self.state.messages:
                if message.get("role") == "assistant":
                    for call in message.get("tool_calls") or ():
                        fn = call.get("function") or {}
                        named = self._tool_named(str(fn.get("name", "")))
                        try:
                            key = (named.name if named is not None else fn.get("name", ""),
                                   _canonical(json.loads(fn.get("arguments") or "{}")))
                        except ValueError:
                            continue
                        calls[call.get("id", "")] = key
                elif message.get("role") == "tool" and message.get("tool_call_id") in calls:
                    if message["tool_call_id"] in failed:
                        continue
                    key = calls[message["tool_call_id"]]
                    tool = self.env.tools.get(key[0])
                    if tool and self._dedupes(tool):
                        self._cache.setdefault(key, message.get("content") or "")
        return self._cache

    def _unknown_tool(self, name: str) -> str:
        known = sorted(self._offered.get(n, n) for n in self.env.tools)  # as the model knows them
        hint = next((k for k in known if k.lower() == name.lower()), None)
        text = f"Error: unknown tool {name!r}."
        if hint:
            text += f" Tool names are case-sensitive: did you mean {hint!r}?"
        return text + f" Available tools: {', '.join(known)}."

    def _parse_args(self, name: str, raw: Any) -> tuple[dict[str, Any], str | None]:
        try:
            args = json.loads(raw) if isinstance(raw, str) else raw
        except (ValueError, RecursionError) as exc:
            return {}, f"Error: the arguments for {name} are not valid JSON ({json_words(exc)}). Send a JSON object."
        if not isinstance(args, dict):
            return {}, f"Error: the arguments for {name} must be a JSON object, got {type(args).__name__}."
        problem = self.env.tools[name].check_args(args)
        if problem:
            return {}, f"Error: {problem}"
        return args, None


def _rate(tokens: int, ms: float | None) -> float | None:
    """Output tokens per second over a stream's duration (None when it was not streamed)."""
    if ms is None:
        return None
    return round(tokens / (ms / 1000.0), 1) if ms > 0 else None


def _answered(state: RunState) -> bool:
    last = state.messages[-1] if state.messages else {}
    return last.get("role") == "assistant" and not last.get("tool_calls")


def _canonical(args: Any) -> str:
    return json.dumps(args, sort_keys=True, separators=(",", ":"))


def _noted(approval_note: str | None, text: str) -> str:
    """A call's result as the model reads it: after the approval's words, when it was
    approved (by a person or a rule), whether the tool succeeded, failed or was cut off."""
    return f"{approval_note} {text}" if approval_note else text

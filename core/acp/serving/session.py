"""One ACP session: the Tether run behind it, and its prompt turns.

The session id is the run id, chosen when the session opens; the run is made on the store
by the first prompt (``Harness.create`` with that id), so a session nobody prompts leaves
nothing behind. Each prompt is one operation of the harness on the run, holding it as any
Tether process does (owner, heartbeat, control channel), waiting at an approval for a
decision from anywhere (``wait_for_decision=0``):

- the first prompt starts the run with the prompt as its task;
- a later one (or the first after ``session/load``) is a follow-up (``message=``). A run left
  with a call waiting for its decision (a Stop while it waited) is resumed first, so the
  decision is asked for again, then the prompt goes on.

``max_turns`` binds each prompt, as ACP's ``max_turn_requests`` does: a follow-up raises the
run's cap by the agent's own. The budget is the run's, across prompts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from acp import schema

from tether.acp.serving.approvals import PermissionAsks
from tether.actions import control
from tether.acp.serving.updates import EventUpdates, SessionUpdate, end_words, stop_reason
from tether.agents.agent import Agent, AgentError
from tether.vocab.cancel import CancelSignal
from tether.store.control import ControlReply, ControlRequest
from tether.vocab.events import ApprovalDecision, ApprovalRequired, Event
from tether.harness import Harness, Outcome
from tether.store.protocol import call
from tether.vocab.state import RunState, StateError, pending_calls

log = logging.getLogger(__name__)

CANCEL_REASON = "the editor cancelled"
GONE_REASON = "the editor went away (its connection closed)"
CLOSE_WAIT_S = 30.0  # how long a stopping run may take to end before its task is cancelled

Item = SessionUpdate | ApprovalRequired | ApprovalDecision


class Refused(Exception):
    """A prompt Tether will not run, in words (told to the editor, the turn ending ``refusal``)."""


class ServedSession:
    """The run behind one ACP session, and the prompt turn in progress."""

    def __init__(self, harness: Harness, client: Any, session_id: str, *, by: str,
                 agent: Callable[[], Agent] | None = None) -> None:
        self.harness = harness
        self.client = client
        self.session_id = session_id
        self.by = by
        """Who the editor is, recorded with its decisions and Stops."""
        self._agent = agent  # builds the agent of a run not made yet; None once the run exists
        self._cap: int | None = None  # the agent's max_turns: how many model calls one prompt may make
        self._cap_known = False
        self._signal: CancelSignal | None = None
        self._turn: asyncio.Task[schema.StopReason] | None = None
        self.asks = PermissionAsks(client, session_id, self._decide, self.say)

    @property
    def started(self) -> bool:
        """Whether the run exists on the store (its agent is then fixed)."""
        return self._agent is None

    def choose(self, agent: Callable[[], Agent]) -> None:
        """The agent the first prompt will run (the editor picked a mode)."""
        self._agent = agent

    async def prompt(self, text: str) -> schema.StopReason:
        """Run one prompt turn to its end. Shielded: the connection going away does not cut
        the run off mid-step; :meth:`close` stops it, and it ends in a known way."""
        if self._turn is not None and not self._turn.done():
            raise RuntimeError(f"session {self.session_id} is already running a prompt")
        self._signal = CancelSignal()
        self._turn = asyncio.create_task(self._prompt(text, self._signal), name=f"acp prompt {self.session_id}")
        return await asyncio.shield(self._turn)

    def cancel(self, reason: str = CANCEL_REASON) -> None:
        """Tether's Stop for the running turn: the very signal ``Harness.stop`` fires, fired
        here so that a cancel arriving before the run is opened is not lost."""
        if self._signal is not None and self._turn is not None and not self._turn.done():
            self._signal.cancel(reason, self.by)

    async def close(self) -> None:
        """Stop the running turn, if any, and wait for the run to end; let go of the editor's
        open permission requests."""
        self.cancel(GONE_REASON)
        if self._turn is not None and not self._turn.done():
            try:
                await asyncio.wait_for(asyncio.shield(self._turn), CLOSE_WAIT_S)
            except asyncio.TimeoutError:
                log.warning("session %s: its run did not stop within %g s; cancelled", self.session_id, CLOSE_WAIT_S)
                self._turn.cancel()
            with contextlib.suppress(BaseException):
                await self._turn
        await self.asks.close()

    async def say(self, words: str) -> None:
        """Words from Tether to the editor, in the session: an agent message of their own."""
        await self.send(schema.AgentMessageChunk(session_update="agent_message_chunk",
                                                 content=schema.TextContentBlock(type="text",
                                                                                 text=f"\n[Tether] {words}\n")))

    async def send(self, update: SessionUpdate) -> None:
        try:
            await self.client.session_update(session_id=self.session_id, update=update)
        except ConnectionError:
            pass  # the editor is gone: the run is on the store for the consoles
        except Exception:
            log.exception("session %s: an update could not be sent", self.session_id)

    # -- the turn ------------------------------------------------------------------------

    async def _prompt(self, text: str, signal: CancelSignal) -> schema.StopReason:
        pump = _Pump(self._deliver)
        translate = EventUpdates(self.session_id, self.harness.live.get)

        def sink(event: Event) -> None:
            for update in translate(event):
                pump.put(update)
            if isinstance(event, (ApprovalRequired, ApprovalDecision)) and event.run_id == self.session_id:
                pump.put(event)

        try:
            try:
                outcome = await self._drive(text, signal, sink)
            finally:
                await pump.finish()  # every update of the turn reaches the editor before its answer
        except Refused as exc:
            await self.say(str(exc))
            return "refusal"
        words = end_words(outcome.state)
        if words:
            await self.say(words)
        return stop_reason(outcome.state, cancelled=signal.cancelled)

    async def _drive(self, text: str, signal: CancelSignal, sink: Callable[[Event], None]) -> Outcome:
        harness, run_id = self.harness, self.session_id
        try:
            if self._agent is not None:
                agent = self._agent()
                self._cap, self._cap_known = agent.limits.max_turns, True
                await call(harness.store, harness.create, agent, text, run_id=run_id)
                self._agent = None
                return await harness.run(run_id, signal=signal, sinks=[sink], wait_for_decision=0)
            state: RunState = await call(harness.store, harness.load, run_id)
            if pending_calls(state) and state.status.resumable:
                outcome = await harness.run(run_id, signal=signal, sinks=[sink], wait_for_decision=0)
                if signal.cancelled or pending_calls(outcome.state):
                    return outcome
                state = outcome.state
            cap = self._turn_cap(state)
            return await harness.run(run_id, signal=signal, sinks=[sink], wait_for_decision=0, message=text,
                                     max_turns=None if cap is None else state.turns + cap)
        except (StateError, AgentError, ValueError) as exc:  # ConfigError is a ValueError
            raise Refused(f"run {run_id} cannot go on: {exc}") from None

    def _turn_cap(self, state: RunState) -> int | None:
        """How many model calls one prompt may make: the agent's cap (a loaded run's agent is
        rebuilt for it; one that cannot be keeps the run's own cap)."""
        if not self._cap_known:
            try:
                self._cap = self.harness.agent_of(state).limits.max_turns
            except StateError:
                self._cap = state.limits.max_turns
            self._cap_known = True
        return self._cap

    async def _deliver(self, item: Item) -> None:
        if isinstance(item, ApprovalRequired):
            self.asks.asked(item)
        elif isinstance(item, ApprovalDecision):
            await self.asks.decided(item)
        else:
            await self.send(item)

    async def _decide(self, call_id: str, verdict: str, text: str) -> ControlReply:
        kind = "approve" if verdict in ("approve", "approved") else "reject"
        request = ControlRequest(kind, text, call_id=call_id, by=self.by, account=await self.harness.account())
        return await control.request(self.harness.store, self.session_id, request)  # to this process, which holds it


class _Pump:
    """A turn's updates, sent in the order they happened, off the run's path: the run's sinks
    are synchronous and must never wait on the editor."""

    def __init__(self, deliver: Callable[[Item], Awaitable[None]]) -> None:
        self._deliver = deliver
        self._queue: asyncio.Queue[Item | None] = asyncio.Queue()
        self._task = asyncio.create_task(self._run(), name="acp updates")

    def put(self, item: Item) -> None:
        self._queue.put_nowait(item)

    async def finish(self) -> None:
        """Send what is queued, then stop."""
        self._queue.put_nowait(None)
        await asyncio.shield(self._task)

    async def _run(self) -> None:
        while (item := await self._queue.get()) is not None:
            try:
                await self._deliver(item)
            except Exception:
                log.exception("an update could not be delivered")

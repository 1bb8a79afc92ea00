"""A run's approvals as the editor's permission requests, with one decision per call.

When a Tether run waits for a decision, the approval is on the store (every console shows it,
``tether approve|reject`` answer it) *and* the editor is sent ``session/request_permission``.
Whoever answers first decides:

- the editor answers first: its answer goes through the same decide path as a console's
  (:meth:`tether.harness.Harness.decide`, recorded ``by`` the editor's name); if a console got
  there meanwhile, the harness says "already decided", and the editor is told so;
- a console (or a standing rule) decides first: the decision shows in the run's events before
  the editor answers; the editor is told, in the session, who decided what. ACP cannot
  withdraw a request, so the editor's late answer is taken and ignored.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from acp import RequestError, schema

from tether.acp.serving.updates import raw_input, tool_kind, tool_title
from tether.store.control import ControlReply
from tether.vocab.events import ApprovalDecision, ApprovalRequired

log = logging.getLogger(__name__)

ALLOW, REJECT = "allow", "reject"
OPTIONS = [
    schema.PermissionOption(option_id=ALLOW, name="Allow once", kind="allow_once"),
    schema.PermissionOption(option_id=REJECT, name="Reject", kind="reject_once"),
]
REJECTED_IN_EDITOR = "rejected in the editor"
"""The words a rejection from the editor carries to the model (ACP has no field for a reason)."""

Decide = Callable[[str, str, str], Awaitable[ControlReply]]
"""(call id, ``approve``|``reject``, words): the harness's decide, for this run, by the editor."""
Say = Callable[[str], Awaitable[None]]


@dataclass
class _Ask:
    """One permission request the editor has not answered yet, and what happened meanwhile."""

    event: ApprovalRequired
    task: asyncio.Task[None] | None = None
    settled: bool = False
    """Decided in Tether before the editor answered: its answer, when it comes, is ignored."""
    answering: bool = False
    """The editor's answer is on its way to the run: the harness's reply says who won."""


@dataclass
class PermissionAsks:
    """The permission requests of one session's run, and the race for each decision."""

    client: Any
    """The editor's side of the connection (``acp.Client``: ``request_permission``)."""
    session_id: str
    decide: Decide
    say: Say
    _asks: dict[str, _Ask] = field(default_factory=dict)

    def asked(self, event: ApprovalRequired) -> None:
        """The run waits for a decision on a call: ask the editor too. A call asked again
        while the editor still has its request (the second person a call needs) is not
        asked twice."""
        ask = self._asks.get(event.call_id)
        if ask is not None and ask.task is not None and not ask.task.done():
            return
        ask = _Ask(event)
        self._asks[event.call_id] = ask
        ask.task = asyncio.create_task(self._ask(ask), name=f"acp permission {event.call_id}")

    async def decided(self, event: ApprovalDecision) -> None:
        """A decision reached the run. Made elsewhere while the editor's request is open, the
        editor is told who decided; one person's approval of two leaves the request open."""
        ask = self._asks.get(event.call_id)
        if ask is None or ask.answering or ask.settled or ask.task is None or ask.task.done():
            return  # not asked, or the editor's own answer (its reply says the rest)
        if event.verdict == "pending":
            await self.say(f"{event.tool}: approved in Tether by {event.by} ({event.tally or 'one of several'}); "
                           "it needs another person")
            return
        ask.settled = True
        await self.say(f"{event.tool} ({event.call_id}) was decided in Tether by {event.by}: {event.verdict}; "
                       "the editor's answer is no longer needed")

    async def close(self) -> None:
        """The session ends: requests the editor never answered are let go of (the approvals
        stay on the store, for the consoles)."""
        tasks = [ask.task for ask in self._asks.values() if ask.task is not None and not ask.task.done()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        self._asks.clear()

    async def _ask(self, ask: _Ask) -> None:
        event = ask.event
        request = schema.ToolCallUpdate(tool_call_id=event.call_id, title=tool_title(event.tool, event.args),
                                        kind=tool_kind(event.tool), status="pending", raw_input=raw_input(event.args),
                                        content=[_words(event.why)] if event.why else None)
        try:
            response = await self.client.request_permission(session_id=self.session_id, tool_call=request,
                                                            options=OPTIONS)
        except (ConnectionError, RequestError) as exc:  # the editor is gone, or cannot ask: the consoles can
            log.info("the editor did not answer the permission request for %s: %s", event.call_id, exc)
            return
        outcome = response.outcome
        if ask.settled or not isinstance(outcome, schema.AllowedOutcome):
            return  # decided in Tether first (the editor was told), or cancelled (a Stop says the rest)
        approve = outcome.option_id == ALLOW
        ask.answering = True
        reply = await self._decide(event.call_id, "approve" if approve else "reject",
                                   "" if approve else REJECTED_IN_EDITOR)
        if not reply.ok:
            await self.say(f"the editor's answer on {event.tool} ({event.call_id}) was not taken: {reply.words}")

    async def _decide(self, call_id: str, verdict: str, text: str) -> ControlReply:
        try:
            return await self.decide(call_id, verdict, text)
        except Exception as exc:  # the run went away meanwhile: said, not raised into a task nobody awaits
            return ControlReply(False, str(exc) or type(exc).__name__)


def _words(text: str) -> schema.ContentToolCallContent:
    return schema.ContentToolCallContent(type="content", content=schema.TextContentBlock(type="text", text=text))

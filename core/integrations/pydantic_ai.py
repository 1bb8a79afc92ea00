"""A pydantic-ai agent, run under Tether's supervision (pydantic-ai-slim 2.68).

```python
from tether.integrations import Supervision
from tether.integrations.pydantic_ai import run

async with Harness() as harness:
    done = await run(harness, triage_agent, "Ticket 42 duplicates 17: close it",
                     supervision=Supervision(limits=Limits(budget_usd=0.05)))
```

The agent's loop stays pydantic-ai's (``agent.run``); Tether opens a run on the store
(:meth:`tether.Harness.track`, source ``pydantic-ai``) and sees it through pydantic-ai's own
doors, all inside the run, in order:

* **the transcript, live**: streamed text and each tool's result through an
  ``event_stream_handler`` (the program's own, if it gives one, still gets every event); each
  model call's usage, with its model, from an ``after_model_request`` hook (priced at the run's
  pricing, checked against its limits: crossing one ends the run before the next call); each tool
  call as it starts, from ``before_tool_execute``;
* **approvals**: a tool with ``requires_approval=True``, or one that raises ``ApprovalRequired``,
  is decided inside the run by a ``HandleDeferredToolCalls`` handler, with no pause: each call
  becomes a pending approval on the store (``run.approval``, bound to the call id and the hash of
  its arguments), decided from any console, ``tether approve|reject``, a standing rule or a
  deadline. An approval goes back as ``ToolApproved()`` (``ToolApproved(override_args=…)`` with
  the operator's edited arguments, checked first against the tool's schema as pydantic-ai
  offered it, from a ``prepare_tools`` hook), a rejection as ``ToolDenied(message=WORDS)``, so
  that the model reads the operator's own words;
* **Stop** from anywhere cancels the run through its ``CancellationToken`` (a tool in flight
  included), and the run ends ``interrupted`` with the operator's reason.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from pydantic_ai import Agent, CancellationToken
from pydantic_ai.capabilities import HandleDeferredToolCalls, Hooks
from pydantic_ai.exceptions import RunCancelled
from pydantic_ai.messages import (
    FunctionToolCallEvent, FunctionToolResultEvent, PartDeltaEvent, PartStartEvent, TextPart, TextPartDelta,
    ToolCallPart,
)
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied

from tether.agents.agent import resolve_ref
from tether.integrations import Supervised, Supervision
from tether.integrations._common import Tracker, answer_text, stopped, tracked, with_workspace

if TYPE_CHECKING:
    from pydantic_ai.messages import ModelResponse
    from pydantic_ai.tools import RunContext, ToolDefinition

    from tether.run.tracked import TrackedRun

SOURCE = "pydantic-ai"

EventStreamHandler = Callable[[Any, AsyncIterable[Any]], Awaitable[None]]


async def run(harness: Tracker, agent: Agent[Any, Any] | str, prompt: str, *, supervision: Supervision | None = None,
              event_stream_handler: EventStreamHandler | None = None, capabilities: Sequence[Any] = (),
              **options: Any) -> Supervised:
    """Run ``agent`` (a ``pydantic_ai.Agent``, or a ``"module:attribute"`` reference to one) on
    ``prompt`` as a run on ``harness``'s store, until it answers, fails, is stopped or crosses a
    limit; see the module. ``event_stream_handler`` and ``capabilities`` are the program's own,
    kept; every other keyword (``deps``, ``message_history``, ``model_settings``,
    ``usage_limits``, ``cancellation_token``…) goes to ``agent.run`` as it is."""
    built = resolve_ref(agent) if isinstance(agent, str) else agent
    if not isinstance(built, Agent):
        raise TypeError(f"{agent!r} is not a pydantic_ai.Agent (it is a {type(built).__name__})")
    sv = supervision or Supervision()
    name = built.name or (agent if isinstance(agent, str) else "pydantic-ai agent")
    token: CancellationToken = options.pop("cancellation_token", None) or CancellationToken()
    async with tracked(harness, sv, name, prompt, source=SOURCE, model=_model_name(built, options)) as (run, ending):
        reporter = _Reporter(run, event_stream_handler)
        if run.workspace is not None:  # for the agent's tools (ctx.deps)
            options["deps"] = with_workspace(options.get("deps"), run)
        capabilities = [*capabilities, HandleDeferredToolCalls(handler=reporter.decide),
                        Hooks(after_model_request=reporter.model_called, before_tool_execute=reporter.tool_starts,
                              prepare_tools=reporter.tools_offered)]
        result: Any = None

        async def drive() -> None:
            nonlocal result
            try:
                async with _cancelled_on_stop(run, token):
                    result = await built.run(prompt, event_stream_handler=reporter.events,
                                             capabilities=capabilities, cancellation_token=token, **options)
            except RunCancelled:
                if run.signal.cancelled:
                    raise stopped(run) from None
                raise  # the program's own cancellation: a failure in its words
            await run.answer(answer_text(run, result.output))

        await ending.until(drive())
    return ending.supervised(run, result.output if result is not None else None, result)


class _Reporter:
    """The handler, the hooks and the event stream handler that report into the run."""

    def __init__(self, run: TrackedRun, theirs: EventStreamHandler | None) -> None:
        self.run = run
        self.theirs = theirs
        self.started: set[str] = set()
        self.denied: set[str] = set()
        self.asked: dict[str, str] = {}  # call id -> the model's arguments
        self.schemas: dict[str, dict[str, Any]] = {}  # tool -> the JSON schema of its arguments, as offered

    async def decide(self, ctx: RunContext[Any], requests: DeferredToolRequests) -> DeferredToolResults | None:
        """Each call waiting for approval decided on the store, inside the run. Calls to run
        outside (``CallDeferred``) are the program's: left for it."""
        if not requests.approvals:
            return None
        decided: dict[str, Any] = {}
        for call in requests.approvals:
            decision = await self.run.approval(call.tool_name, call.args_as_json_str(), call_id=call.tool_call_id,
                                               schema=self.schemas.get(call.tool_name))
            if not decision.approved:
                self.denied.add(call.tool_call_id)  # its result slot already holds the words
                decided[call.tool_call_id] = ToolDenied(message=decision.words)
            elif decision.args is not None:
                decided[call.tool_call_id] = ToolApproved(override_args=decision.args)
            else:
                decided[call.tool_call_id] = ToolApproved()
        return DeferredToolResults(approvals=decided)

    async def tools_offered(self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]) -> list[ToolDefinition]:
        """The tools as offered to the model, kept for their schemas: an operator's edited
        arguments are checked against the one pydantic-ai will validate them with."""
        self.schemas.update({d.name: d.parameters_json_schema for d in tool_defs})
        return tool_defs

    async def model_called(self, ctx: RunContext[Any], *, response: ModelResponse, **_: Any) -> ModelResponse:
        calls = any(isinstance(part, ToolCallPart) for part in response.parts)
        await self.run.usage(response.usage.input_tokens, response.usage.output_tokens, model=response.model_name,
                             finish_reason="tool_calls" if calls else "stop")
        return response

    async def tool_starts(self, ctx: RunContext[Any], *, call: ToolCallPart, args: Any, **_: Any) -> Any:
        if call.tool_call_id not in self.started:
            self.started.add(call.tool_call_id)
            await self.run.tool_started(call.tool_call_id, call.tool_name, call.args_as_json_str())
        return args

    async def events(self, ctx: RunContext[Any], stream: AsyncIterable[Any]) -> None:
        reported = self._reported(stream)
        if self.theirs is None:
            async for _ in reported:
                pass
        else:
            await self.theirs(ctx, reported)

    async def _reported(self, stream: AsyncIterable[Any]) -> AsyncIterator[Any]:
        run = self.run
        async for event in stream:
            if isinstance(event, PartStartEvent) and isinstance(event.part, TextPart) and event.part.content:
                run.text(event.part.content)
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta) \
                    and event.delta.content_delta:
                run.text(event.delta.content_delta)
            elif isinstance(event, FunctionToolCallEvent):
                self.asked[event.part.tool_call_id] = event.part.args_as_json_str()
            elif isinstance(event, FunctionToolResultEvent) and event.part.tool_call_id not in self.denied:
                part = event.part
                if part.tool_call_id not in self.started:  # refused before it could run: bad arguments
                    self.started.add(part.tool_call_id)
                    await run.tool_started(part.tool_call_id, part.tool_name, self.asked.get(part.tool_call_id))
                ok = part.outcome == "success"
                text = part.model_response_str()
                await run.tool_finished(part.tool_call_id, text, ok=ok, error=None if ok else text[:200])
            yield event


@contextlib.asynccontextmanager
async def _cancelled_on_stop(run: TrackedRun, token: CancellationToken) -> AsyncIterator[None]:
    async def watch() -> None:
        await run.signal.wait()
        token.cancel()

    watching = asyncio.ensure_future(watch())
    try:
        yield
    finally:
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching


def _model_name(agent: Agent[Any, Any], options: dict[str, Any]) -> str:
    model = options.get("model") or agent.model
    if model is None:
        return "pydantic-ai"
    if isinstance(model, str):
        return model
    return str(getattr(model, "model_name", None) or type(model).__name__)

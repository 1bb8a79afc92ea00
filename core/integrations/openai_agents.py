"""An OpenAI Agents SDK agent, run under Tether's supervision (openai-agents 0.24).

```python
from tether.integrations import Supervision
from tether.integrations.openai_agents import run

async with Harness() as harness:
    done = await run(harness, "support_bot:agent", "Close ticket 42, it duplicates 17",
                     supervision=Supervision(limits=Limits(budget_usd=0.05)))
```

The agent's loop stays the SDK's (``Runner.run_streamed``); Tether opens a run on the store
(:meth:`tether.Harness.track`, source ``openai-agents``) and sees it through the SDK's own doors:

* **the transcript, live**: streamed text as it comes, each model call's usage (``on_llm_end``:
  tokens and model, priced at the run's pricing, checked against its limits), each tool call as
  it starts and ends (``on_tool_start`` / ``on_tool_end``);
* **approvals**: a tool with ``needs_approval`` pauses the SDK's run with an interruption. Each
  becomes a pending approval on the store (``run.approval``, bound to the call id and the hash
  of its arguments), decided from any console, ``tether approve|reject``, a standing rule or a
  deadline; then ``state.approve(item)``, or ``state.reject(item, rejection_message=WORDS)`` so
  that the model reads the operator's own words, and the run goes on;
* **Stop** from anywhere cancels the streamed run at once (``RunResultStreaming.cancel()``), a
  tool in flight included, and the run ends ``interrupted`` with the operator's reason.

With the agent given by reference (``"module:attribute"``), the paused ``RunState`` is saved
with the run while it waits for a decision (in the run's record, so on any store), and
:func:`resume` goes on with it from another process when the first one is gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agents import Agent, ModelSettings, RunConfig, RunHooks, Runner, RunState
from agents.models import get_default_model

from tether.agents.agent import resolve_ref
from tether.integrations import Supervised, Supervision
from tether.integrations._common import Tracker, answer_text, shown, stopped, tracked, with_workspace
from tether.store.protocol import call
from tether.vocab.state import StateError
from tether.run.tracked import Approval

if TYPE_CHECKING:
    from agents.items import ModelResponse, ToolApprovalItem
    from agents.result import RunResultStreaming
    from agents.tool import Tool

    from tether.vocab.events import EventSink
    from tether.run.tracked import TrackedRun

SOURCE = "openai-agents"
SAVED = "openai_agents"
"""The key of the paused ``RunState`` in the run's agent record (``state.agent.spec``)."""


async def run(harness: Tracker, agent: Agent[Any] | str, input: str | list[Any], *,
              supervision: Supervision | None = None, run_config: RunConfig | None = None,
              context: Any = None, hooks: RunHooks[Any] | None = None, max_turns: int | None = None) -> Supervised:
    """Run ``agent`` (an ``agents.Agent``, or a ``"module:attribute"`` reference to one) on
    ``input`` as a run on ``harness``'s store, until it answers, fails, is stopped or crosses a
    limit; see the module. ``run_config``, ``context``, ``hooks`` (the program's own, still
    called) and ``max_turns`` are the SDK's, passed on."""
    ref = agent if isinstance(agent, str) else None
    built = _agent(agent)
    sv = supervision or Supervision()
    task = input if isinstance(input, str) else _text_of(input)
    driver = _Driver(built, ref, run_config, hooks, max_turns)
    async with tracked(harness, sv, built.name, task, source=SOURCE, model=_model_name(built, run_config)) as (run,
                                                                                                            ending):
        driver.run = run
        await ending.until(driver.drive(input, with_workspace(context, run)))
    return ending.supervised(run, driver.output, driver.result)


async def resume(harness: Tracker, run_id: str, *, run_config: RunConfig | None = None,
                 hooks: RunHooks[Any] | None = None, max_turns: int | None = None,
                 sinks: Sequence[EventSink] = ()) -> Supervised:
    """Go on with run ``run_id``, paused at an approval by a program that is gone (it was
    killed, or its machine was): rebuild its agent from the saved reference, load the saved
    ``RunState``, and wait for the pending decisions here (one already made is used at once),
    then go on to the end. A run another process holds is refused, in words."""
    state = await call(harness.store, harness.store.load, run_id)
    saved = (state.agent.spec.get(SAVED) if state.agent is not None else None) or {}
    if not saved.get("state") or not saved.get("agent"):
        raise StateError(f"run {run_id} has no paused openai-agents state to go on from (only a run of an agent "
                         "given by reference, paused at an approval, has one)")
    built = _agent(saved["agent"])
    driver = _Driver(built, saved["agent"], run_config, hooks, max_turns)
    name = state.agent.name if state.agent is not None else built.name
    sv = Supervision(name=name, run_id=run_id, sinks=sinks)
    async with tracked(harness, sv, built.name, "", source=SOURCE, model=_model_name(built, run_config),
                       attach=True) as (run, ending):
        driver.run = run
        paused = await RunState.from_string(built, saved["state"])
        await ending.until(driver.drive_from(paused))
    return ending.supervised(run, driver.output, driver.result)


# ---- how a run is driven ----------------------------------------------------------------------

class _Driver:
    """One supervised run of the SDK: streams each leg, answers its interruptions, goes on."""

    def __init__(self, agent: Agent[Any], ref: str | None, run_config: RunConfig | None,
                 hooks: RunHooks[Any] | None, max_turns: int | None) -> None:
        self.agent = agent
        self.ref = ref
        self.run_config = _with_usage(run_config)
        self.hooks = hooks
        self.max_turns = max_turns
        self.run: TrackedRun = None  # type: ignore[assignment]  # set once the run is open
        self.output: Any = None
        self.result: RunResultStreaming | None = None

    async def drive(self, input: str | list[Any], context: Any) -> None:
        await self._legs(input, context)

    async def drive_from(self, paused: RunState[Any]) -> None:
        await self._legs(await self._decide(paused, paused.get_interruptions()), None)

    async def _legs(self, first: str | list[Any] | RunState[Any], context: Any) -> None:
        leg: str | list[Any] | RunState[Any] = first
        while True:
            result = await self._leg(leg, context)
            if not result.interruptions:
                break
            leg, context = await self._decide(result.to_state(), result.interruptions), None
        self.result, self.output = result, result.final_output
        await self.run.answer(answer_text(self.run, result.final_output))

    async def _leg(self, leg: str | list[Any] | RunState[Any], context: Any) -> RunResultStreaming:
        """One ``Runner.run_streamed``, to its end or its interruptions; a Stop cancels it."""
        self._stop_if_stopped()
        reporter = _Reporter(self.run, self.hooks, self.run_config)
        kwargs: dict[str, Any] = {"hooks": reporter, "run_config": self.run_config}
        if self.max_turns is not None:
            kwargs["max_turns"] = self.max_turns
        result = Runner.run_streamed(self.agent, leg, context=context, **kwargs)
        watch = asyncio.ensure_future(self._cancel_on_stop(result))
        try:
            async for event in result.stream_events():
                if event.type != "raw_response_event":
                    continue
                kind = getattr(event.data, "type", None)
                if kind == "response.output_text.delta":
                    self.run.text(event.data.delta)
                elif kind == "response.completed":
                    reporter.completed()
        finally:
            watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watch
            if not result.is_complete:
                result.cancel()
        self._stop_if_stopped()
        return result

    async def _decide(self, paused: RunState[Any], items: list[ToolApprovalItem]) -> RunState[Any]:
        """Each pending call decided on the store, answered in the SDK's state."""
        run = self.run
        if self.ref is not None:
            _keep(run, {"agent": self.ref, "state": paused.to_string()})
        for item in items:
            tool = item.tool_name or getattr(item.raw_item, "name", None) or "tool"
            call_id = _call_id(item)
            decision = await run.approval(tool, getattr(item.raw_item, "arguments", None) or "{}", call_id=call_id,
                                          schema=_schema_of(getattr(item, "agent", None) or self.agent, tool))
            if decision.approved and decision.args is None:
                paused.approve(item)
            elif decision.approved:  # the SDK runs a call only as the model asked: say so, in words
                words = _edited_words(decision, tool)
                paused.reject(item, rejection_message=words)
                if call_id is not None:
                    await run.tool_finished(call_id, words, ok=False, error="edited arguments are not applied")
            else:
                paused.reject(item, rejection_message=decision.words)
        _keep(run, None)  # decided: saved with the next report, before any tool runs
        return paused

    async def _cancel_on_stop(self, result: RunResultStreaming) -> None:
        await self.run.signal.wait()
        result.cancel()

    def _stop_if_stopped(self) -> None:
        if self.run.signal.cancelled:
            raise stopped(self.run)


class _Reporter(RunHooks[Any]):
    """The SDK's run hooks, reporting into the run (and calling the program's own)."""

    def __init__(self, run: TrackedRun, theirs: RunHooks[Any] | None, run_config: RunConfig | None) -> None:
        self.run = run
        self.theirs = theirs
        self.run_config = run_config
        self._seen = 0  # the model responses the stream has delivered to the reader
        self._ended = 0  # the model calls on_llm_end reported
        self._read = asyncio.Event()
        self._anonymous: dict[str, list[str]] = {}  # tool -> call ids of calls without one of their own

    def completed(self) -> None:
        """The stream's reader saw a model response end: every piece of its text is reported."""
        self._seen += 1
        self._read.set()

    async def on_llm_start(self, context: Any, agent: Any, system_prompt: str | None, input_items: list[Any]) -> None:
        if self.theirs is not None:
            await self.theirs.on_llm_start(context, agent, system_prompt, input_items)

    async def on_llm_end(self, context: Any, agent: Any, response: ModelResponse) -> None:
        # The SDK queues a response's stream events before it calls this hook, in its own task;
        # the reader reports the text. Wait for it, so that the turn's text is the turn's.
        self._ended += 1
        while self._seen < self._ended:
            self._read.clear()
            await self._read.wait()
        if self.theirs is not None:
            await self.theirs.on_llm_end(context, agent, response)
        usage = response.usage
        await self.run.usage(usage.input_tokens, usage.output_tokens, model=_model_name(agent, self.run_config),
                             finish_reason="tool_calls" if _calls_tools(response) else "stop")

    async def on_agent_start(self, context: Any, agent: Any) -> None:
        if self.theirs is not None:
            await self.theirs.on_agent_start(context, agent)

    async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
        if self.theirs is not None:
            await self.theirs.on_agent_end(context, agent, output)

    async def on_handoff(self, context: Any, from_agent: Any, to_agent: Any) -> None:
        if self.theirs is not None:
            await self.theirs.on_handoff(context, from_agent, to_agent)

    async def on_tool_start(self, context: Any, agent: Any, tool: Tool) -> None:
        if self.theirs is not None:
            await self.theirs.on_tool_start(context, agent, tool)
        call_id = getattr(context, "tool_call_id", None)
        if not call_id:  # a hosted or local tool without a call id of its own
            call_id = f"{tool.name}-{sum(map(len, self._anonymous.values())) + 1}"
            self._anonymous.setdefault(tool.name, []).append(call_id)
        await self.run.tool_started(call_id, tool.name, getattr(context, "tool_arguments", None))

    async def on_tool_end(self, context: Any, agent: Any, tool: Tool, result: object) -> None:
        if self.theirs is not None:
            await self.theirs.on_tool_end(context, agent, tool, result)
        call_id = getattr(context, "tool_call_id", None)
        if not call_id:
            waiting = self._anonymous.get(tool.name) or [f"{tool.name}-0"]
            call_id = waiting.pop(0)
        await self.run.tool_finished(call_id, shown(result))


# ---- helpers -----------------------------------------------------------------------------------

def _agent(agent: Agent[Any] | str) -> Agent[Any]:
    built = resolve_ref(agent) if isinstance(agent, str) else agent
    if not isinstance(built, Agent):
        raise TypeError(f"{agent!r} is not an agents.Agent (it is a {type(built).__name__})")
    return built


def _keep(run: TrackedRun, saved: dict[str, str] | None) -> None:
    """Keep the paused state in the run's agent record (None: drop it), with the run's next save.
    A new record, not one changed in place: a store writes the agent record when it differs."""
    ref = run.state.agent
    if ref is None or ref.spec.get(SAVED) == saved:
        return
    spec = {k: v for k, v in ref.spec.items() if k != SAVED}
    if saved is not None:
        spec[SAVED] = saved
    run.state.agent = dataclasses.replace(ref, spec=spec)


def _with_usage(run_config: RunConfig | None) -> RunConfig:
    """The program's run config, asking a chat-completions endpoint for the usage of streamed
    replies (without it the SDK reports 0 tokens there, and a budget would be worth nothing)."""
    config = run_config or RunConfig()
    settings = config.model_settings or ModelSettings()
    if settings.include_usage is None:
        config = dataclasses.replace(config, model_settings=settings.resolve(ModelSettings(include_usage=True)))
    return config


def _model_name(agent: Any, run_config: RunConfig | None) -> str:
    model = (run_config.model if run_config is not None and run_config.model else None) or agent.model
    if model is None:
        return get_default_model()
    if isinstance(model, str):
        return model
    return str(getattr(model, "model", None) or type(model).__name__)


def _calls_tools(response: ModelResponse) -> bool:
    return any(getattr(item, "type", None) == "function_call" for item in response.output)


def _call_id(item: ToolApprovalItem) -> str | None:
    raw = item.raw_item
    found = raw.get("call_id") if isinstance(raw, dict) else getattr(raw, "call_id", None)
    return str(found) if found else None


def _schema_of(agent: Any, tool: str) -> dict[str, Any] | None:
    """The JSON schema of a function tool's arguments (``params_json_schema``), which an
    operator's edit is checked against; None for a tool that has none (hosted, shell…)."""
    for offered in getattr(agent, "tools", None) or ():
        if getattr(offered, "name", None) == tool:
            schema = getattr(offered, "params_json_schema", None)
            return schema if isinstance(schema, dict) else None
    return None


def _edited_words(decision: Approval, tool: str) -> str:
    edited = json.dumps(decision.args, ensure_ascii=False, sort_keys=True)
    return (f"{decision.words[:-1]}, but only with changed arguments: {edited}. This call did not run, because "
            f"it can run only as you asked it. Call {tool} again with exactly these arguments to go on.")


def _text_of(items: list[Any]) -> str:
    """The user's words in a list of input items, as the run's task."""
    parts = []
    for item in items:
        content = item.get("content") if isinstance(item, dict) else None
        if isinstance(content, str):
            parts.append(content)
    return "\n".join(parts)

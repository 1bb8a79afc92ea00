"""The harness: runs on disk, a model endpoint, a workspace, and the loop between them.

This is the one entry point the CLI, the console and the lab share. Every
operation (start, resume, approve, reject) takes the run's lock, runs the same
loop, and releases the lock, so the process that does it may be gone a moment
later without anything being lost.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from tether.cancel import CancelSignal
from tether.client import ModelClient, without_credentials
from tether.events import EventSink
from tether.loop import ErrorFormatter, LoopEnv, RunLoop, StopCondition, approve, reject
from tether.provider import SCENARIOS, FaultPlan, create_app
from tether.state import Limits, Policies, Pricing, RunState, StateError, Status, new_run_id
from tether.store import RunStore
from tether.subagent import CHILD_MAX_TURNS, ResearchTool, child_limits_budget
from tether.tokens import TokenCounter, encoding, encoding_loaded
from tether.tools.base import Tool
from tether.tools.builtin import builtin_tools, tool_catalog
from tether.trace import TraceWriter
from tether.workspace import Workspace, ensure_sample

EMBEDDED_BASE_URL = "http://tether.embedded/v1"
SYSTEM_PROMPT = (
    "You are an agent working on a folder of files through tools. Use the tools to find "
    "out what you need, then answer the user in one or two sentences."
)
CHILD_SYSTEM_PROMPT = (
    "You are a research subagent. Answer the question using the read-only tools, then reply "
    "with a short summary of what you found."
)
SCENARIO_TASKS = {
    "plan": "Which file mentions a timeout?",
    "runaway": "Keep an eye on the workspace.",
    "recover": "What does timeout.log say?",
    "destructive": "Free some space in the workspace.",
    "repeat": "What does notes.txt say?",
    "repeat_baseline": "What does notes.txt say?",
    "repeat_write": "Delete access.log.",
    "forbidden": "What is in secrets.env?",
    "slow": "How many entries are in the archive?",
    "research": "Which file mentions a timeout?",
}


def tether_home() -> Path:
    return Path(os.environ.get("TETHER_HOME") or Path.home() / ".local" / "share" / "tether")


@dataclass
class Outcome:
    """What one operation on a run did in this process."""

    state: RunState
    tool_runs: list[dict[str, Any]] = field(default_factory=list)
    ms: float = 0.0


class Harness:
    def __init__(
        self,
        runs_dir: Path | str | None = None,
        workspace: Path | str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: ModelClient | None = None,
        latency_ms: float = 0.0,
        fail: str | None = None,
        stream: bool = False,
        sinks: Sequence[EventSink] = (),
        stop_conditions: Sequence[StopCondition] = (),
        error_formatter: ErrorFormatter | None = None,
        embedded_url: str | None = None,
    ) -> None:
        """``base_url``: a chat-completions endpoint; without it, the embedded scripted provider,
        in this process, or at ``embedded_url`` when it is served by a child process (see
        :func:`tether.provider.server.provider_process`). Runs on either record no endpoint."""
        self.store = RunStore(runs_dir or tether_home() / "runs")
        self.workspace: Workspace = ensure_sample(Path(workspace or tether_home() / "workspace"))
        self.base_url = base_url
        self.counter = TokenCounter()
        self._api_key = api_key
        if client is None:
            if base_url:
                client = ModelClient(base_url, api_key, stream=stream, counter=self.counter)
            elif embedded_url:
                client = ModelClient(embedded_url, stream=stream, counter=self.counter)
            else:
                app = create_app(latency_ms=latency_ms, faults=FaultPlan.parse(fail) if fail else None,
                                 counter=self.counter)
                client = ModelClient(EMBEDDED_BASE_URL, transport=httpx.ASGITransport(app=app),
                                     counter=self.counter)
        self.client = client
        self.sinks = list(sinks)
        # The in-memory state of every run this process is driving, for views that
        # want the transcript as it grows (the console); removed when the run stops.
        self.live: dict[str, RunState] = {}
        self.stop_conditions = list(stop_conditions)
        self.error_formatter = error_formatter

    async def aclose(self) -> None:
        await self.client.aclose()

    async def __aenter__(self) -> "Harness":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # ---- creating and reading runs ---------------------------------------
    def new_run(
        self,
        model: str,
        prompt: str | None = None,
        *,
        run_id: str | None = None,
        limits: Limits | None = None,
        policies: Policies | None = None,
        pricing: Pricing | None = None,
    ) -> RunState:
        """A fresh run, saved to disk but not started."""
        if not self.base_url and model not in SCENARIOS:
            known = ", ".join(sorted(s for s in SCENARIOS if not s.endswith("_child")))
            raise ValueError(f"unknown scenario {model!r}; the scripted provider knows: {known}")
        task = prompt or SCENARIO_TASKS.get(model) or f"Run the {model} scenario."
        state = RunState(
            run_id=run_id or new_run_id(model.replace("/", "_")[:24]),
            model=model,
            messages=[{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": task}],
            limits=limits or Limits(),
            policies=policies or Policies(),
            pricing=pricing or Pricing(),
            base_url=without_credentials(self.base_url) if self.base_url else None,
            workspace=str(self.workspace.root),
        )
        self.store.create(state)
        return state

    def load(self, run_id: str) -> RunState:
        return self.store.load(run_id)

    # ---- operations --------------------------------------------------------
    async def run(self, run_id: str, *, signal: CancelSignal | None = None, sinks: Sequence[EventSink] = (),
                  max_turns: int | None = None, budget_usd: float | None = None) -> Outcome:
        """Start or resume a run; raising limits is how a capped run goes on."""

        def raise_limits(state: RunState) -> list[Any]:
            if max_turns is not None:
                state.limits.max_turns = max_turns
            if budget_usd is not None:
                state.limits.budget_usd = budget_usd
            return []

        return await self._operate(run_id, raise_limits, signal, sinks)

    async def approve(self, run_id: str, note: str = "", *, call_id: str | None = None,
                      signal: CancelSignal | None = None, sinks: Sequence[EventSink] = ()) -> Outcome:
        return await self._operate(run_id, lambda s: [approve(s, call_id, note)], signal, sinks)

    async def reject(self, run_id: str, reason: str = "", *, call_id: str | None = None,
                     signal: CancelSignal | None = None, sinks: Sequence[EventSink] = ()) -> Outcome:
        return await self._operate(run_id, lambda s: [reject(s, call_id, reason)], signal, sinks)

    async def _operate(self, run_id: str, prepare: Any, signal: CancelSignal | None,
                       sinks: Sequence[EventSink]) -> Outcome:
        if not encoding_loaded():
            await asyncio.to_thread(encoding)  # load the rank file off the event loop, once
        started = time.perf_counter()
        state, handle = self.store.open(run_id)
        trace = TraceWriter(handle.trace_path, secrets=self._secrets())
        try:
            if state.status in (Status.COMPLETED, Status.FAILED):
                raise StateError(f"run {run_id} has already ended ({state.status.value}); it cannot be resumed")
            events = prepare(state)
            loop = RunLoop(state, self._env(sinks), handle, trace, signal or CancelSignal())
            self.live[run_id] = state
            if events:
                for event in events:
                    loop.emit(event)
                loop.save()
            final = await loop.run()
            return Outcome(final, loop.tool_runs, (time.perf_counter() - started) * 1000)
        finally:
            self.live.pop(run_id, None)
            trace.close()
            handle.release()

    # ---- wiring --------------------------------------------------------------
    def _secrets(self) -> tuple[str, ...]:
        return tuple(s for s in (self._api_key, os.environ.get("LLM_API_KEY")) if s)

    def _tools(self, *, child: bool = False) -> dict[str, Tool]:
        tools: list[Tool] = [t for t in builtin_tools() if not child or t.read_only]
        if not child:
            tools.append(ResearchTool())
        return tool_catalog(tools)

    def _env(self, sinks: Sequence[EventSink], *, child: bool = False) -> LoopEnv:
        all_sinks = [*self.sinks, *sinks]
        return LoopEnv(
            client=self.client,
            tools=self._tools(child=child),
            workspace=self.workspace,
            counter=self.counter,
            sinks=all_sinks,
            stop_conditions=self.stop_conditions,
            error_formatter=self.error_formatter,
            spawn=None if child else self._spawner(all_sinks),
        )

    def _spawner(self, sinks: list[EventSink]) -> Any:
        async def spawn(parent: RunState, call_id: str, question: str, signal: CancelSignal) -> RunState:
            child_id = f"{parent.run_id}.{call_id}"
            if not self.store.exists(child_id):
                # A scripted scenario X runs its subagents on X_child; a real model on itself.
                scripted_child = f"{parent.model}_child"
                child = RunState(
                    run_id=child_id,
                    model=scripted_child if scripted_child in SCENARIOS else parent.model,
                    messages=[{"role": "system", "content": CHILD_SYSTEM_PROMPT},
                              {"role": "user", "content": question}],
                    limits=replace(parent.limits, max_turns=CHILD_MAX_TURNS,
                                   budget_usd=child_limits_budget(parent)),
                    policies=replace(parent.policies, auto_approve=[]),
                    pricing=parent.pricing,
                    parent_run_id=parent.run_id,
                    base_url=parent.base_url,
                    workspace=parent.workspace,
                )
                self.store.create(child)
            state, handle = self.store.open(child_id)
            trace = TraceWriter(handle.trace_path, secrets=self._secrets())
            try:
                if state.status is not Status.RUNNING:
                    return state  # finished before a crash: its result stands
                loop = RunLoop(state, self._env(sinks, child=True), handle, trace, signal)
                self.live[child_id] = state
                return await loop.run()
            finally:
                self.live.pop(child_id, None)
                trace.close()
                handle.release()

        return spawn


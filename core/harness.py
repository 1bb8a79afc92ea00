"""The harness: agents, runs on disk, and the loop between them.

This is the one entry point the library, the CLI, the console and the lab share. A run
is made from an :class:`~tether.agents.agent.Agent` and remembers it by reference; every
operation (start, resume, approve, reject) takes the run's lock, rebuilds the run's
agent (its endpoint, its tools, its MCP servers), runs the same loop, and releases
everything, so the process that does it may be gone a moment later without anything
being lost. MCP servers live exactly as long as the operation: started before the loop,
stopped after it however it ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import httpx

from tether.store import control
from tether.agents.agent import Agent, AgentError, changed_tools
from tether.run.cancel import CancelSignal
from tether.models.client import ModelClient, without_credentials
from tether.models.base import ChatModel
from tether.run.events import EventSink, RunStopped, TelemetryDropped
from tether.run.loop import LoopEnv, RunLoop, approve, check_edit, reject
from tether.demo.provider import SCENARIOS, FaultPlan, create_app
from tether.run.state import (
    Cancelled, Limits, NeedsApproval, Policies, Pricing, RunState, StateError, Status, new_run_id, pending_calls,
)
from tether.store.protocol import Handle, Store, TraceSink, call
from tether.store.files.store import HEARTBEAT_S, RunStore, private_dirs
from tether.agents.subagent import CHILD_MAX_TURNS, child_limits_budget
from tether.models.tokens import TokenCounter, encoding, encoding_loaded
from tether.agents.tools.base import Tool
from tether.run.tracked import TrackedRun
from tether.agents.workspace import Workspace, ensure_sample

EMBEDDED_BASE_URL = "http://tether.embedded/v1"
CHILD_SYSTEM_PROMPT = (
    "You are a research subagent. Answer the question using the read-only tools, then reply "
    "with a short summary of what you found."
)
ADHOC_AGENT = "default"
"""The name of the agent made from ``--base-url``/``--model`` alone: the file tools, no more."""
STOP_REASON = "operator pressed Stop"
log = logging.getLogger(__name__)


def tether_home() -> Path:
    return Path(os.environ.get("TETHER_HOME") or Path.home() / ".local" / "share" / "tether")


@dataclass
class Outcome:
    """What one operation on a run did in this process."""

    state: RunState
    tool_runs: list[dict[str, Any]] = field(default_factory=list)
    ms: float = 0.0

    @property
    def status(self) -> Status:
        return self.state.status


class Harness:
    """Runs agents, and goes on with their runs whichever process made them.

    ``runs_dir`` holds the runs (default ``$TETHER_HOME/runs``). ``config`` is the agent
    file whose agents runs may refer to (a run made from another file rebuilds its agent
    from that file). The remaining options serve the demo and tests: ``workspace`` is the
    demo agents' folder, ``base_url``/``embedded_url`` serve the scripted provider over
    HTTP, ``client`` answers for every agent, ``latency_ms``/``fail`` shape the embedded
    provider, ``stream`` asks every endpoint for streamed replies (``"auto"``: the agents' own
    endpoints, not the embedded scripted provider).
    """

    def __init__(
        self,
        runs_dir: Path | str | None = None,
        workspace: Path | str | None = None,
        *,
        config: Any = None,
        base_url: str | None = None,
        api_key: str | None = None,
        client: ChatModel | None = None,
        latency_ms: float = 0.0,
        fail: str | None = None,
        stream: bool | Literal["auto"] = False,
        sinks: Sequence[EventSink] = (),
        embedded_url: str | None = None,
        store: Store | None = None,
    ) -> None:
        self.store: Store = store if store is not None else RunStore(runs_dir or tether_home() / "runs")
        self.config = config
        self.base_url = base_url
        self.counter = TokenCounter()
        self.sinks = list(sinks)
        self._demo_root = Path(workspace) if workspace is not None else tether_home() / "workspace"
        self._demo_workspace: Workspace | None = None
        self._api_key = api_key
        self._client = client
        self._embedded_url = embedded_url
        self._latency_ms = latency_ms
        self._fail = fail
        self._stream = stream
        self._clients: dict[tuple[str, str | None], ChatModel] = {}
        self._agents: dict[tuple[str, str], Agent] = {}
        self._signals: dict[str, CancelSignal] = {}
        self._control: Any = None  # a control.ControlServer, or the store's own (PostgreSQL: a LISTEN)
        self._emitters: dict[str, Callable[[Any], None]] = {}
        # The in-memory state of every run this process is driving, for views that
        # want the transcript as it grows (the console); removed when the run stops.
        self.live: dict[str, RunState] = {}

    async def aclose(self) -> None:
        for sink in self.sinks:  # a sink that holds resources (OpenTelemetry's exporter) closes with us
            shutdown = getattr(sink, "shutdown", None)
            if callable(shutdown):
                await asyncio.to_thread(shutdown)
        if self._control is not None:
            await self._control.aclose()
            self._control = None
        clients = {id(c): c for c in [*self._clients.values(), *([self._client] if self._client else [])]}
        for client in clients.values():
            await client.aclose()
        self._clients.clear()

    async def __aenter__(self) -> "Harness":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def workspace(self) -> Workspace:
        """The demo agents' workspace, with the sample files laid out the first time it is used."""
        if self._demo_workspace is None:
            private_dirs(self._demo_root.parent)  # Tether's home, when it is there: 0700, as the store makes it
            self._demo_workspace = ensure_sample(self._demo_root)
        return self._demo_workspace

    @property
    def client(self) -> ChatModel:
        """The client of the embedded (or shared) endpoint."""
        return self._client_for(None, None)

    # ---- agents ----------------------------------------------------------------------
    def demo_agent(self, scenario: str) -> Agent:
        from tether.demo import agents as demo

        return demo.agent(scenario, self.workspace.root)

    def agent_for_model(self, model: str) -> Agent:
        """A demo scenario's agent, or, with a ``base_url``, an ad hoc agent for ``model``
        offered the file tools on the demo workspace (what ``new_run`` has always made)."""
        from tether.demo import agents as demo

        if demo.is_scenario(model):
            return self.demo_agent(model)
        if not self.base_url and self._client is None:
            raise ValueError(f"unknown scenario {model!r}; the scripted provider knows: "
                             + ", ".join(demo.scenarios()))
        return adhoc_agent(model, self.base_url, self.workspace.root, api_key_env=None)

    def agent_of(self, state: RunState) -> Agent:
        """Rebuild the agent a run was made with: the one this process was given, else its
        agent file, else its saved definition. Raises :class:`StateError` in words."""
        from tether.demo import agents as demo
        from tether.agents.configfile import ConfigError

        ref = state.agent
        if ref is not None and ref.spec.get("program"):
            raise StateError(f"run {state.run_id} was reported by a program ({ref.spec['program']}, agent {ref.name}): "
                             "Tether cannot rebuild that loop, so it cannot resume it or decide its calls when the "
                             "program is gone; the program goes on with it while it runs")
        if ref is None:  # made before agents: the demo, or an ad hoc endpoint
            if demo.is_scenario(state.model):
                return self.demo_agent(state.model)
            return adhoc_agent(state.model, state.base_url or self.base_url, Path(state.workspace or "."),
                               api_key_env=None)
        known = self._agents.get((ref.name, ref.fingerprint))
        if known is not None:
            return known
        try:
            if ref.source == "config" and ref.config and Path(ref.config).is_file():
                from tether.agents.config import load_config  # the file's checker (pydantic): only for an agent file's run

                config = self.config if self.config is not None and str(self.config.path) == ref.config \
                    else load_config(ref.config)
                return config.agent(ref.name)
            if ref.source == "demo" and state.workspace:
                ensure_sample(Path(state.workspace))  # the demo's folder, laid out again if it was emptied
            return Agent.from_spec(ref.name, ref.spec, source=ref.source)
        except (AgentError, ConfigError) as exc:
            raise StateError(f"run {state.run_id}: its agent {ref.name} cannot be rebuilt: {exc}") from None

    # ---- creating and reading runs --------------------------------------------------
    def create(
        self,
        agent: Agent,
        prompt: str | None = None,
        *,
        run_id: str | None = None,
        limits: Limits | None = None,
        policies: Policies | None = None,
        pricing: Pricing | None = None,
    ) -> RunState:
        """A fresh run of ``agent`` on ``prompt`` (its default task if None), saved but not started."""
        task = prompt or agent.prompt
        if not task:
            raise ValueError(f"agent {agent.name} has no default task: give a prompt")
        self._agents[(agent.name, agent.ref().fingerprint)] = agent
        endpoint = agent.base_url or (self.base_url if agent.source == "demo" else None)
        state = RunState(
            run_id=run_id or new_run_id(agent.name.replace("/", "_")[:24]),
            model=agent.model,
            messages=[{"role": "system", "content": agent.instructions}, {"role": "user", "content": task}],
            limits=replace(limits or agent.limits),
            policies=replace(policies or agent.policies, auto_approve=list((policies or agent.policies).auto_approve)),
            pricing=pricing or agent.pricing or Pricing(assumed=True),
            base_url=without_credentials(endpoint) if endpoint else None,
            workspace=str(agent.workspace) if agent.workspace is not None else None,
            agent=agent.ref(),
        )
        self.store.create(state)
        return state

    def new_run(self, model: str, prompt: str | None = None, *, run_id: str | None = None,
                limits: Limits | None = None, policies: Policies | None = None,
                pricing: Pricing | None = None) -> RunState:
        """A run of the demo scenario ``model`` (or, with a ``base_url``, of that model with
        the file tools): the short form the lab and the tests use."""
        return self.create(self.agent_for_model(model), prompt, run_id=run_id, limits=limits,
                           policies=policies, pricing=pricing)

    def load(self, run_id: str) -> RunState:
        return self.store.load(run_id)

    # ---- operations -------------------------------------------------------------------
    async def start(self, agent: Agent, prompt: str | None = None, *, run_id: str | None = None,
                    signal: CancelSignal | None = None, sinks: Sequence[EventSink] = ()) -> Outcome:
        """Make a run of ``agent`` and run it until it stops, one of five ways. An ACP agent
        is started first: one that is not there, or not an ACP agent, is an AgentError in
        words, and no run is made."""
        session = await self.start_acp(agent) if agent.acp is not None else None
        try:
            state = await call(self.store, self.create, agent, prompt, run_id=run_id)
            return await self.run(state.run_id, signal=signal, sinks=sinks, acp_session=session)
        finally:
            if session is not None:
                await session.close()

    async def start_acp(self, agent: Agent) -> Any:
        """An ACP agent's process, started and past ``initialize``, for the run about to be
        made (:meth:`run` with ``acp_session``): a command that is missing or does not speak ACP
        is an AgentError naming the agent, before any run exists. The caller closes it."""
        from tether.acp import AcpError
        from tether.acp.run import session_for

        session = session_for(agent)
        try:
            await session.start()
        except AcpError as exc:
            where = f"{agent.config}: agents.{agent.name}.acp" if agent.config else f"agent {agent.name}"
            raise AgentError(f"{where}: {exc}; fix the command, or check it runs the agent's ACP mode") from None
        return session

    async def run(self, run_id: str, *, signal: CancelSignal | None = None, sinks: Sequence[EventSink] = (),
                  max_turns: int | None = None, budget_usd: float | None = None,
                  wait_for_decision: float | None = None, message: str | None = None,
                  acp_session: Any = None) -> Outcome:
        """Start or resume a run; raising limits is how a capped run goes on.

        ``wait_for_decision``: at an approval, keep holding the run and wait this many seconds
        (0: as long as it takes) for a decision from any process (:meth:`decide`), then go on;
        None stops the run ``interrupted`` at the approval, for whoever decides to resume it.
        ``message``: a follow-up, the operator's next words to the agent, added to the
        transcript; a completed run goes on from it too (a conversation, not only a task)."""

        def raise_limits(state: RunState) -> list[Any]:
            if max_turns is not None:
                state.limits.max_turns = max_turns
            if budget_usd is not None:
                state.limits.budget_usd = budget_usd
            if message is not None:
                _follow_up(state, message)
            return []

        return await self._operate(run_id, raise_limits, signal, sinks, wait_for_decision,
                                   follow_up=message is not None, acp_session=acp_session)

    resume = run

    async def approve(self, run_id: str, note: str = "", *, call_id: str | None = None, by: str = "operator",
                      args: str | None = None, rule: str | None = None, signal: CancelSignal | None = None,
                      sinks: Sequence[EventSink] = (), wait_for_decision: float | None = None) -> Outcome:
        """Approve the waiting call (bound to its arguments, used once), then go on. ``args``:
        the operator's edited arguments (JSON), checked against the tool's schema first. A
        call that needs two people keeps waiting after the first. For a run whose process
        waits for a decision, use :meth:`decide`: it reaches that process."""
        request = control.ControlRequest("approve", note, call_id=call_id, by=by, args=args, rule=rule)
        if await self._paused_program(run_id):
            return await self._decide_paused_program(run_id, request, sinks)
        return await self._operate(run_id, _nothing, signal, sinks, wait_for_decision, decision=request)

    async def reject(self, run_id: str, reason: str = "", *, call_id: str | None = None, by: str = "operator",
                     rule: str | None = None, signal: CancelSignal | None = None, sinks: Sequence[EventSink] = (),
                     wait_for_decision: float | None = None) -> Outcome:
        """Decline the waiting call, in words in its result slot, then go on."""
        request = control.ControlRequest("reject", reason, call_id=call_id, by=by, rule=rule)
        if await self._paused_program(run_id):
            return await self._decide_paused_program(run_id, request, sinks)
        return await self._operate(run_id, _nothing, signal, sinks, wait_for_decision, decision=request)

    async def _paused_program(self, run_id: str) -> bool:
        """A run an openai-agents program paused at an approval and saved, with its agent by
        reference: a decision can go on with it in this process, though the program is gone."""
        state = await call(self.store, self.store.load, run_id)
        return state.agent is not None and bool(state.agent.spec.get("openai_agents")) \
            and isinstance(state.interruption, NeedsApproval)

    async def _decide_paused_program(self, run_id: str, request: control.ControlRequest,
                                     sinks: Sequence[EventSink]) -> Outcome:
        """Record the decision on the paused run, then go on with it from its saved state
        (:func:`tether.integrations.openai_agents.resume`), as its program would have."""
        from tether.integrations.openai_agents import resume

        started = time.perf_counter()
        state, handle = await _open(self.store, run_id)
        try:
            event = _apply(state, request)
            trace = handle.trace(())
            trace.write(event)
            trace.close()
            await handle.asave(state)
        finally:
            await _release(handle)
        await resume(self, run_id, sinks=sinks)
        final = await call(self.store, self.store.load, run_id)
        return Outcome(final, [], (time.perf_counter() - started) * 1000)

    @contextlib.asynccontextmanager
    async def track(self, name: str, task: str = "", *, source: str = "program", model: str = "",
                    run_id: str | None = None, limits: Limits | None = None, pricing: Pricing | None = None,
                    policies: Policies | None = None, attach: bool = False, keep_open: bool = False,
                    cancel: asyncio.Task[Any] | None = None,
                    sinks: Sequence[EventSink] = ()) -> AsyncIterator[TrackedRun]:
        """A run of a loop that is not Tether's, which the program reports into
        (:mod:`tether.run.tracked`): ``async with harness.track("triage", task) as run``.

        ``source`` names the framework (``openai-agents``, ``pydantic-ai``, ``claude-code``,
        ``program``); ``limits`` are checked at each usage report; ``cancel`` is a task a Stop
        cancels. ``attach`` reports into the existing run ``run_id`` (a hook process after the
        one that opened it); ``keep_open`` leaves the run running when the block ends without
        an answer, for the next reporter. A Stop or a limit that ends the run inside the block
        ends it in a known way and is not raised out of it; any other exception fails the run
        and is raised."""
        from tether.run.tracked import RunEnded, TrackedRun, new_state, program_of, started

        if attach:
            if run_id is None:
                raise ValueError("attach names the run to report into: run_id=")
        else:
            fresh = new_state(name, task, source=source, model=model, run_id=run_id, limits=limits, pricing=pricing,
                              policies=policies)
            await call(self.store, self.store.create, fresh)
            run_id = fresh.run_id
        server = await self._control_server()  # (no tokenizer: a reported run's tokens are the program's)
        state, handle = await _open(self.store, run_id, control=server.address)
        signal = CancelSignal()
        controls = _Controls(state, handle, signal)
        controls.holds_agent = True  # the program waits with its run: a Stop ends it, not just the wait
        server.register(run_id, controls.poke)
        beating = asyncio.create_task(_heartbeat(handle), name=f"heartbeat {run_id}")
        trace = handle.trace(())
        try:
            if attach and program_of(state) is None:
                raise StateError(f"run {run_id} is not a program's run: it cannot be reported into")
            stopped = state.status is Status.INTERRUPTED and not isinstance(state.interruption, NeedsApproval)
            if state.status in (Status.COMPLETED, Status.FAILED) or (attach and stopped) \
                    or state.status in (Status.MAX_TURNS_EXCEEDED, Status.BUDGET_EXCEEDED):
                # A program's run that stopped is not revived by a late reporter (a hook).
                raise StateError(f"run {run_id} has already ended ({state.status.value})")
            resumed = attach and bool(state.messages)
            state.status, state.interruption, state.error = Status.RUNNING, None, None
            self.live[run_id] = state
            self._signals[run_id] = signal
            run = TrackedRun(self, state, handle, trace, controls, signal, sinks, cancel)
            self._emitters[run_id] = run._emit
            await controls.adopt()
            started(run, resumed)
            await run._save()
            try:
                yield run
            except RunEnded as ended:
                await run.close(ended)
            except BaseException as exc:
                await run.close(exc)
                raise
            else:
                if keep_open and not run.ended:
                    await run._save()
                else:
                    await run.close(None)
        finally:
            beating.cancel()
            server.unregister(run_id)
            self._emitters.pop(run_id, None)
            self.live.pop(run_id, None)
            self._signals.pop(run_id, None)
            trace.close()
            await _release(handle)

    async def stop(self, run_id: str, reason: str = STOP_REASON, *, by: str = "operator") -> control.ControlReply:
        """Stop a run whichever process runs it: its signal fires, and the tool it is running is
        cut off in words. The reply says what happened, in words (nothing to stop, orphaned...)."""
        signal = self._signals.get(run_id)
        if signal is not None:  # this process runs it
            if signal.cancelled:
                return control.ControlReply(True, f"run {run_id} is already stopping")
            signal.cancel(reason, by)
            return control.ControlReply(True, f"run {run_id} stops now")
        return await self.request(run_id, control.ControlRequest("stop", reason, by=by))

    async def decide(self, run_id: str, verdict: str, text: str = "", *, call_id: str | None = None,
                     by: str = "operator", option: str | None = None, silent: bool = False,
                     args: str | None = None, scope: str | None = None) -> control.ControlReply:
        """Deliver an approval or a rejection to the process that holds the run waiting for
        one (``wait_for_decision``). A run nobody holds is decided with :meth:`approve` or
        :meth:`reject`, in this process. ``args``: an approval's edited arguments (JSON);
        ``scope``: for an ACP agent's "always" option, the scope of the rule Tether keeps."""
        kind = "approve" if verdict in ("approve", "approved") else "reject"
        return await self.request(run_id, control.ControlRequest(kind, text, call_id=call_id, by=by, option=option,
                                                                 silent=silent, args=args, scope=scope))

    async def request(self, run_id: str, request: control.ControlRequest) -> control.ControlReply:
        """Append ``request`` to the run's control channel and have its process act on it
        (:func:`tether.store.control.request`)."""
        return await control.request(self.store, run_id, request)

    def note_dropped(self, run_id: str, spans: int) -> None:
        """Say in a run's trace that telemetry about it was dropped (a collector down or slow):
        through the run's own loop while this process drives it, else appended to its trace."""
        event = TelemetryDropped(run_id=run_id, spans=spans)
        emit = self._emitters.get(run_id)
        if emit is not None:
            emit(event)
            return
        with contextlib.suppress(OSError, StateError):
            self.store.append_event(run_id, event)

    async def _control_server(self) -> Any:
        if self._control is None:
            own = getattr(self.store, "control_server", None)
            self._control = own() if callable(own) else control.ControlServer()
        await self._control.start()
        return self._control

    async def _operate(self, run_id: str, prepare: Callable[[RunState], list[Any]], signal: CancelSignal | None,
                       sinks: Sequence[EventSink], wait_for_decision: float | None = None, *,
                       decision: control.ControlRequest | None = None, follow_up: bool = False,
                       acp_session: Any = None) -> Outcome:
        if not encoding_loaded():
            await asyncio.to_thread(encoding)  # load the rank file off the event loop, once
        started = time.perf_counter()
        deciding = decision is not None
        signal = signal or CancelSignal()
        server = await self._control_server()
        state, handle = await _open(self.store, run_id, control=server.address)
        trace: TraceSink | None = None
        controls = _Controls(state, handle, signal)
        server.register(run_id, controls.poke)
        beating = asyncio.create_task(_heartbeat(handle), name=f"heartbeat {run_id}")
        try:
            if state.status in (Status.COMPLETED, Status.FAILED) and not follow_up:
                last = max(state.approvals.values(), key=lambda d: d.ts, default=None) if deciding else None
                if last is not None:
                    raise StateError(f"already decided: {last.verdict} by {last.by}, and run {run_id} has since "
                                     f"ended ({state.status.value})")
                raise StateError(f"run {run_id} has already ended ({state.status.value}); it cannot be resumed, but "
                                 f"a follow-up goes on from it: tether resume {run_id} --message TEXT")
            agent = self.agent_of(state)
            if agent.acp is not None:
                trace = handle.trace(self.secrets(agent))
                return await self._drive_acp(state, agent, handle, trace, signal, controls, sinks, prepare,
                                             wait_for_decision, deciding, follow_up, started, acp_session)
            client = self._client_for(agent, state)
            trace = handle.trace(self.secrets(agent))
            tools = {t.name: t for t in agent.tool_list}
            async with contextlib.AsyncExitStack() as stack:
                failure: str | None = None
                if agent.mcp_servers:
                    from tether.agents.mcp import MCPStartError, mcp_tools

                    try:
                        listed = await stack.enter_async_context(
                            mcp_tools(agent.mcp_servers, reserved=tools.keys(), stderr_dir=handle.scratch_dir))
                        tools.update({t.name: t for t in listed})
                    except MCPStartError as exc:
                        failure = str(exc)
                if failure is None:
                    self._check_tools(state, tools)
                env = self._env(agent, client, tools, sinks)
                loop = RunLoop(state, env, handle, trace, signal)
                self._emitters[run_id] = loop.emit
                self.live[run_id] = state
                self._signals[run_id] = signal
                if failure is not None:
                    return Outcome(await loop.fail(failure), [], (time.perf_counter() - started) * 1000)
                await controls.adopt()  # requests made while the run's process was dead
                controls.vet = lambda request: _vet_tether(tools, state, request)
                if decision is not None:
                    problem = _vet_tether(tools, state, decision)
                    if problem:
                        raise StateError(problem)
                    loop.emit(_apply(state, decision))
                    await loop.save()
                events = prepare(state)
                if events:
                    for event in events:
                        loop.emit(event)
                    await loop.save()
                final = await loop.run()
                while wait_for_decision is not None and isinstance(final.interruption, NeedsApproval) \
                        and not signal.cancelled:
                    decided = await controls.wait_for_decision(final.interruption, _until(final.interruption,
                                                                                          wait_for_decision))
                    if decided is None:
                        if _overdue(final.interruption):
                            final = await loop.run()  # the loop answers an overdue call by its deadline
                            continue
                        break  # no decision in time (or a Stop): the run stays waiting, on disk
                    loop.emit(_apply(state, decided))
                    await loop.save()
                    final = await loop.run()
                await controls.close()
                return Outcome(final, loop.tool_runs, (time.perf_counter() - started) * 1000)
        finally:
            beating.cancel()
            server.unregister(run_id)
            self._emitters.pop(run_id, None)
            self.live.pop(run_id, None)
            self._signals.pop(run_id, None)
            if trace is not None:
                trace.close()
            await _release(handle)

    async def _drive_acp(self, state: RunState, agent: Agent, handle: Handle, trace: TraceSink,
                         signal: CancelSignal, controls: "_Controls", sinks: Sequence[EventSink],
                         prepare: Callable[[RunState], list[Any]], wait_for_decision: float | None, deciding: bool,
                         follow_up: bool, started: float, session: Any) -> Outcome:
        """A run of an ACP agent: its process drives the turns (:mod:`tether.acp.run`). The agent
        waits on its permission requests anyway, so this process always holds the run while
        it waits for a decision (``wait_for_decision``'s deadline still applies)."""
        from tether.acp.run import AcpRun

        run_id = state.run_id
        if deciding:
            raise StateError(f"run {run_id}'s agent {agent.name} speaks ACP, and its process is gone: a permission "
                             "request is answered only while the agent waits for it. Start a new run")
        all_sinks = [*self.sinks, *sinks]

        def emit(event: Any) -> None:
            event.run_id = run_id
            if event.traced:
                trace.write(event)
            for sink in all_sinks:
                try:
                    sink(event)
                except Exception:  # a broken view must not break the run it is watching
                    log.exception("event sink %r failed on %s", sink, event.kind)

        async def save() -> None:
            state.updated_at = time.time()
            await handle.asave(state)

        async def decide(waiting: NeedsApproval) -> Any:
            return await controls.wait_for_decision(waiting, _until(waiting, wait_for_decision or 0))

        records = await call(self.store, lambda: [r for r in self.store.read_trace(run_id)
                                                  if r.get("kind") == "agent_session"])
        earlier = records[-1] if records else None
        if earlier is not None and (state.status is Status.RUNNING or isinstance(state.interruption, NeedsApproval)):
            # Saved as running, with a session: the process that drove it died, and its agent
            # with it (a worker's recovery, a resume). Its turn is not done again behind the
            # operator's back: the run ends in words, and a follow-up goes on in that session.
            await self._acp_orphaned(state, handle, trace, sinks)
            if not follow_up:
                return Outcome(state, [], (time.perf_counter() - started) * 1000)
        if earlier is not None:  # it goes on only with a follow-up, in the session it had: loaded again
            if not follow_up:
                raise StateError(f"run {run_id} is an ACP agent's: it goes on with a follow-up, "
                                 f"tether resume {run_id} --message TEXT")
            AcpRun.check_follow_up(state, agent, earlier)  # before the follow-up's words are saved
        controls.holds_agent = True
        self._emitters[run_id] = emit
        self.live[run_id] = state
        self._signals[run_id] = signal
        await controls.adopt()
        for event in prepare(state):  # raised limits, a follow-up's words
            emit(event)
        await save()
        run = AcpRun(state, agent, emit=emit, save=save, signal=signal, decide=decide, earlier=earlier,
                     session=session, expect=controls.expect, rules=self._rules_access())
        controls.vet = run.vet
        final = await run.run()
        await controls.close()
        return Outcome(final, run.tool_runs, (time.perf_counter() - started) * 1000)

    async def _acp_orphaned(self, state: RunState, handle: Handle, trace: TraceSink,
                            sinks: Sequence[EventSink]) -> None:
        reason = ("the process that drove this ACP agent ended mid-turn, and the agent with it; "
                  f"a follow-up goes on in its session: tether resume {state.run_id} --message TEXT")
        for unfinished in pending_calls(state):  # calls the agent never finished: said in their slots
            state.messages.append({"role": "tool", "tool_call_id": unfinished["id"], "content": f"not finished: {reason}"})
            state.failed_calls.append(unfinished["id"])
        state.status, state.interruption, state.error = Status.INTERRUPTED, Cancelled(reason), None
        event = RunStopped(run_id=state.run_id, status=state.status.value, reason=reason, turns=state.turns,
                           cost_usd=state.cost_usd, interruption=state.interruption.to_dict())
        trace.write(event)
        for sink in [*self.sinks, *sinks]:
            with contextlib.suppress(Exception):
                sink(event)
        state.updated_at = time.time()
        await handle.asave(state)

    def _check_tools(self, state: RunState, tools: dict[str, Tool]) -> None:
        """Refuse, before anything is used up, a run whose tools are gone or changed; note
        tools it has not seen before (MCP tools, listed on the first operation)."""
        ref = state.agent
        if ref is None:
            return
        problems = changed_tools(ref, tools)
        if problems:
            raise StateError(f"run {state.run_id} cannot go on with agent {ref.name} as it is now: "
                             + "; ".join(problems) + ". Nothing was changed: restore the tool, "
                             "or start a new run")
        from tether.agents.agent import tool_hashes

        new = {name: digest for name, digest in tool_hashes(tools.values()).items() if name not in ref.tools}
        if new:
            state.agent = replace(ref, tools={**ref.tools, **new})

    # ---- wiring -------------------------------------------------------------------------
    def secrets(self, agent: Agent | None = None) -> tuple[str, ...]:
        """The API keys this process uses (for ``agent`` too): what the trace and exports redact."""
        keys = [self._api_key, os.environ.get("LLM_API_KEY")]
        if agent is not None and agent.api_key_env:
            keys.append(os.environ.get(agent.api_key_env))
        if agent is not None and agent.acp is not None:  # what its env took from this process's
            with contextlib.suppress(AgentError):
                keys.extend(agent.acp.resolved_env()[1])
        return tuple(k for k in keys if k)

    def _client_for(self, agent: Agent | None, state: RunState | None) -> ChatModel:
        """One client per endpoint for the harness's life: reused connections are what
        keep a turn close to the raw round trip."""
        if self._client is not None:
            return self._client
        if agent is not None and agent.base_url:
            key_env = agent.api_key_env
            api_key = os.environ.get(key_env) if key_env else self._api_key
            slot = (agent.base_url, key_env)
            if slot not in self._clients:
                self._clients[slot] = ModelClient(agent.base_url, api_key, stream=bool(self._stream),
                                                  counter=self.counter)
            return self._clients[slot]
        slot = ("embedded", None)
        if slot not in self._clients:
            stream = self._stream is True  # "auto" streams from real endpoints only
            if self.base_url:
                client = ModelClient(self.base_url, self._api_key, stream=stream, counter=self.counter)
            elif self._embedded_url:
                client = ModelClient(self._embedded_url, stream=stream, counter=self.counter)
            else:
                app = create_app(latency_ms=self._latency_ms,
                                 faults=FaultPlan.parse(self._fail) if self._fail else None, counter=self.counter)
                client = ModelClient(EMBEDDED_BASE_URL, transport=httpx.ASGITransport(app=app), counter=self.counter)
            self._clients[slot] = client
        return self._clients[slot]

    def _env(self, agent: Agent, client: ChatModel, tools: dict[str, Tool], sinks: Sequence[EventSink],
             *, child: bool = False) -> LoopEnv:
        all_sinks = [*self.sinks, *sinks]
        if child:
            tools = {name: t for name, t in tools.items() if t.read_only and name != "research"}
        workspace = Workspace(agent.workspace) if agent.workspace is not None else None
        return LoopEnv(
            client=client,
            tools=tools,
            workspace=workspace,  # type: ignore[arg-type]
            counter=self.counter,
            sinks=all_sinks,
            stop_conditions=[] if child else list(agent.stop_when),  # type: ignore[arg-type]
            error_formatter=agent.error_formatter,  # type: ignore[arg-type]
            spawn=None if child else self._spawner(agent, client, tools, list(sinks)),
            rules=self._rules if callable(getattr(self.store, "rules", None)) else None,
        )

    async def _rules(self) -> list[Any]:
        """The store's standing rules (:mod:`tether.approvals`), read before each call."""
        return await call(self.store, self.store.rules)

    def _rules_access(self) -> Any:
        from tether.acp.run import Rules

        if not callable(getattr(self.store, "rules", None)):
            return None

        async def add(rule: Any) -> Any:
            return await call(self.store, self.store.rule_add, rule)

        return Rules(read=self._rules, add=add)

    def _spawner(self, agent: Agent, client: ChatModel, tools: dict[str, Tool], sinks: list[EventSink]) -> Any:
        """``sinks``: the operation's own; the harness's are added by :meth:`_env`, once."""
        async def spawn(parent: RunState, call_id: str, question: str, signal: CancelSignal) -> RunState:
            child_id = f"{parent.run_id}.{call_id}"
            if not await call(self.store, self.store.exists, child_id):
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
                    agent=parent.agent,
                )
                await call(self.store, self.store.create, child)
            state, handle = await _open(self.store, child_id)
            trace = handle.trace(self.secrets(agent))
            try:
                if state.status is not Status.RUNNING:
                    return state  # finished before a crash: its result stands
                loop = RunLoop(state, self._env(agent, client, tools, sinks, child=True), handle, trace, signal)
                self.live[child_id] = state
                return await loop.run()
            finally:
                self.live.pop(child_id, None)
                trace.close()
                await _release(handle)

        return spawn


def _follow_up(state: RunState, message: str) -> None:
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


async def _heartbeat(handle: Handle) -> None:
    """Refresh the owner record's heartbeat while the run is held (shown to operators;
    whether the owner lives is the lock's to say)."""
    while True:
        await asyncio.sleep(HEARTBEAT_S)
        with contextlib.suppress(OSError):
            await call(handle, handle.heartbeat)


async def _open(store: Store, run_id: str, *, control: str | None = None) -> tuple[RunState, Handle]:
    """:meth:`Store.open` from the event loop. A blocking store opens in a thread, which
    runs to its end even if the awaiting task is cancelled: then what it took is let go of,
    in a thread too, rather than held until the process ends."""
    if not store.blocking:
        return store.open(run_id, control=control)
    opening = asyncio.ensure_future(asyncio.to_thread(store.open, run_id, control=control))
    try:
        return await asyncio.shield(opening)
    except asyncio.CancelledError:
        def let_go(done: asyncio.Future[tuple[RunState, Handle]]) -> None:
            if not done.cancelled() and done.exception() is None:
                asyncio.get_running_loop().run_in_executor(None, done.result()[1].release)

        opening.add_done_callback(let_go)
        raise


async def _release(handle: Handle) -> None:
    """Let go of a run, even from a task being cancelled: a blocking store's release runs
    to its end in its thread whatever happens to the awaiting task."""
    if not getattr(handle, "blocking", False):
        handle.release()
        return
    await asyncio.shield(asyncio.to_thread(handle.release))


class _Controls:
    """What the process running one run does with its control requests: a Stop fires the
    run's signal; a decision is handed to the wait for one, if the run waits; anything else
    is answered in words. Requests are handled in the order they were made, once."""

    def __init__(self, state: RunState, handle: Handle, signal: CancelSignal) -> None:
        self.state = state
        self.handle = handle
        self.signal = signal
        self.replies: dict[str, control.ControlReply] = {}
        self._waiting: NeedsApproval | None = None
        self._decision: asyncio.Future[control.ControlRequest | None] | None = None
        self._decided: control.ControlRequest | None = None
        # The run's agent is a process of its own that waits with it (ACP): a Stop while the
        # run waits for a decision stops the agent too, rather than leaving the run on disk.
        self.holds_agent = False
        # Checks a decision against what the agent asks (an ACP option that it does not offer):
        # words to refuse it with, or None.
        self.vet: Callable[[control.ControlRequest], str | None] | None = None
        # Applies a report from a reporter that could not hold the run (a program's run: a
        # parallel hook of Claude Code's, :mod:`tether.run.tracked`); None: the run takes none.
        self.report: Callable[[control.ControlRequest], Awaitable[control.ControlReply]] | None = None

    async def poke(self, request_id: str) -> control.ControlReply:
        await self.process()
        return self.replies.get(request_id, control.ControlReply(False, f"no request {request_id} for this run"))

    async def adopt(self) -> None:
        """A run saved as running was orphaned: the requests its dead process never handled
        apply now (a Stop stops it at once). Any other run had stopped before they came, so
        they are answered and dropped."""
        if self.state.status is Status.RUNNING:
            await self.process()
        else:
            await self.close()

    async def _unseen(self) -> list[control.ControlRequest]:
        """The requests not handled yet. A blocking store reads in a thread, so two pokes may
        read at once: what the other counted meanwhile is skipped, never handled twice."""
        seen = self.state.control_seen
        requests = await call(self.handle, self.handle.control_read, seen)
        return requests[self.state.control_seen - seen:]

    async def process(self) -> None:
        for request in await self._unseen():
            self.state.control_seen += 1
            if request.kind == "report":
                self.replies[request.id] = (await self.report(request) if self.report is not None else control.ControlReply(
                    False, f"run {self.state.run_id} is not a program's run: nothing can be reported into it"))
                continue
            self.replies[request.id] = self._handle(request)

    async def close(self) -> None:
        """The run is no longer driven here: answer what is left, apply none of it."""
        for request in await self._unseen():
            self.state.control_seen += 1
            self.replies[request.id] = control.ControlReply(
                False, f"run {self.state.run_id} had already stopped ({self.state.status.value})")

    def _handle(self, request: control.ControlRequest) -> control.ControlReply:
        run_id = self.state.run_id
        if request.kind == "stop":
            if self._decision is not None and not self._decision.done() and not self.holds_agent:
                self._decision.set_result(None)  # stop waiting; the run stays waiting for approval
                return control.ControlReply(True, f"run {run_id} waits for approval; its process (pid "
                                            f"{os.getpid()}) stops waiting and leaves it on disk")
            if self.signal.cancelled:
                return control.ControlReply(True, f"run {run_id} is already stopping")
            self.signal.cancel(request.text or STOP_REASON, request.by)
            return control.ControlReply(True, f"run {run_id} stops now (pid {os.getpid()})")
        verdict = "approved" if request.kind == "approve" else "rejected"
        waiting = self._waiting
        if self._decided is not None:
            done = "approved" if self._decided.kind == "approve" else "rejected"
            if done == "approved" and waiting is not None and len(waiting.approvers) + 1 < waiting.needed:
                return control.ControlReply(False, f"{self._decided.by}'s approval of {waiting.tool_name} "
                                            f"({len(waiting.approvers) + 1} of {waiting.needed}) is being recorded: "
                                            "decide again in a moment")
            return control.ControlReply(False, f"already decided: {done} by {self._decided.by}; "
                                        "there is one decision per call")
        earlier = (self.state.approvals.get(request.call_id) if request.call_id
                   else max(self.state.approvals.values(), key=lambda d: d.ts, default=None))
        if earlier is not None and (waiting is None or earlier.call_id == waiting.call_id) \
                and not (waiting is not None and not earlier.complete):
            return control.ControlReply(False, f"already decided: {earlier.verdict} by {earlier.by}; "
                                        "there is one decision per call")
        if waiting is None or self._decision is None or self._decision.done():
            return control.ControlReply(False, f"run {run_id} is not waiting for a decision (it is running)")
        if request.call_id and request.call_id != waiting.call_id:
            return control.ControlReply(False, f"run {run_id} waits for a decision on {waiting.call_id}, "
                                        f"not {request.call_id}")
        if (request.option or request.silent) and self.vet is None:
            return control.ControlReply(False, f"run {run_id} is not an ACP agent's: --option and --silent apply "
                                        "to an ACP agent's permission requests only")
        problem = self.vet(request) if self.vet is not None else None
        if problem:
            return control.ControlReply(False, problem)
        decided = replace(request, call_id=waiting.call_id)
        self._decided = decided
        self._decision.set_result(decided)
        if request.kind == "approve" and len(waiting.approvers) + 1 < waiting.needed:
            return control.ControlReply(True, f"approved {waiting.tool_name} ({waiting.call_id}): "
                                        f"{len(waiting.approvers) + 1} of {waiting.needed}; it waits for "
                                        f"{waiting.needed - len(waiting.approvers) - 1} more different people")
        return control.ControlReply(True, f"{verdict} {waiting.tool_name} ({waiting.call_id}); "
                                    f"the process running {run_id} (pid {os.getpid()}) goes on")

    def expect(self, waiting: NeedsApproval) -> None:
        """Be ready for a decision on ``waiting`` before anyone can know of it: a decider that
        reads the approval on the store and answers at once (while the run is still being
        saved) is then taken, not told the run is not waiting."""
        self._waiting = waiting
        self._decided = None
        self._decision = asyncio.get_running_loop().create_future()

    async def wait_for_decision(self, waiting: NeedsApproval, timeout_s: float) -> control.ControlRequest | None:
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


def _nothing(state: RunState) -> list[Any]:
    return []


def _apply(state: RunState, request: control.ControlRequest) -> Any:
    """A decision, made on the run's state: the event that records it."""
    if request.kind == "approve":
        return approve(state, request.call_id, request.text, request.by, args=request.args, rule=request.rule)
    return reject(state, request.call_id, request.text, request.by, rule=request.rule)


def _vet_tether(tools: dict[str, Tool], state: RunState, request: control.ControlRequest) -> str | None:
    """Why a decision on a Tether run's waiting call cannot be taken, in words, or None: an
    edit that fails the tool's schema, or a person approving a two-person call twice."""
    if request.option or request.silent:
        return (f"run {state.run_id} is not an ACP agent's: --option and --silent apply to an ACP agent's "
                "permission requests only")
    if request.kind != "approve":
        return None
    if request.args is not None:
        problem = check_edit(tools, state, request.call_id, request.args)
        if problem:
            return problem
    waiting = state.interruption
    if isinstance(waiting, NeedsApproval) and request.by in waiting.approvers:
        return (f"{request.by} has approved {waiting.tool_name} ({waiting.call_id}) already: it needs {waiting.needed} "
                f"different people ({waiting.tally} so far)")
    return None


def _until(waiting: NeedsApproval, timeout_s: float) -> float:
    """How long to wait for a decision: ``timeout_s`` (0: forever), cut to the call's deadline."""
    if waiting.deadline_at is None:
        return timeout_s
    left = max(0.001, waiting.deadline_at - time.time())
    return left if not timeout_s else min(timeout_s, left)


def _overdue(waiting: NeedsApproval) -> bool:
    return waiting.deadline_at is not None and time.time() >= waiting.deadline_at


def adhoc_agent(model: str, base_url: str | None, workspace: Path, *, api_key_env: str | None = "LLM_API_KEY",
                prompt: str | None = None) -> Agent:
    """The agent ``tether run --base-url URL --model M`` makes when no agent is named: the
    model at that endpoint, offered the file tools on ``workspace``, and nothing else."""
    return Agent(name=ADHOC_AGENT, model=model, base_url=base_url, api_key_env=api_key_env,
                 tools=["tether:list_files", "tether:read_file", "tether:delete_file"], workspace=workspace,
                 prompt=prompt)

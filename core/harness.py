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
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from tether.actions import adopting
from tether.actions import control as actions
from tether.store import control
from tether.agents.agent import Agent, AgentError, changed_tools, tool_hashes
from tether.agents.configfile import ConfigError
from tether.vocab.cancel import CancelSignal
from tether.models.client import without_credentials
from tether.agents.endpoints import Endpoints
from tether.models.base import ChatModel
from tether.vocab.events import EventSink, TelemetryDropped
from tether.approvals.decisions import already_decided
from tether.run.driver import Operation, Outcome, RunDriver
from tether.run.loop import LoopEnv, RunLoop
from tether.vocab.state import (
    Limits, NeedsApproval, Policies, Pricing, RunState, StateError, Status, create_new, new_run_id,
)
from tether.store.protocol import Store, TraceSink, call
from tether.store.private import private_dirs
from tether.store.spec import open_store
from tether.models.tokens import TokenCounter, encoding, encoding_loaded
from tether.agents.tools.base import Tool
from tether.run.controls import (
    STOP_REASON, Controls, add_follow_up, apply_decision, decision_wait, past_deadline, stopped_waiting,
    take_decision, vet_decision,
)
from tether.store.hold import heartbeat, open_run, release
from tether.vocab.prices import price_for
from tether.approvals import budget_ask, budgets
from tether.run.spawn import spawner
from tether.run.track import track
from tether.run.tracked import TrackedRun, Tracking
from tether.agents.sample import ensure_sample
from tether.agents.sets import AgentSet, known_agents, set_of
from tether.agents.workspace import Workspace
from tether.agents.sandbox import SandboxUnavailable, for_agent
from tether.workspaces import checkpoints, lifecycle, merging, tracked

ADHOC_AGENT = "default"
"""The name of the agent made from ``--base-url``/``--model`` alone: the file tools, no more."""
log = logging.getLogger(__name__)


def tether_home() -> Path:
    return Path(os.environ.get("TETHER_HOME") or Path.home() / ".local" / "share" / "tether")


class Harness:
    """Runs agents, and goes on with their runs whichever process made them.

    ``runs_dir`` holds the runs (default ``$TETHER_HOME/runs``). ``config`` is the agent
    file whose agents runs may refer to (a run made from another file rebuilds its agent
    from that file). ``agent_sets`` are named agents made on demand
    (:class:`tether.agents.sets.AgentSet`: the CLI gives the demo's, :data:`tether.demo.agents.DEMO`);
    ``workspace`` is their folder, ``workspaces_dir`` where runs get their own (:mod:`tether.workspaces`),
    ``base_url``/``embedded_url`` serve their endpoint over HTTP, ``latency_ms``/``fail`` shape the
    in-process endpoint a set offers. ``client`` answers for every agent; ``stream`` asks every
    endpoint for streamed replies (``"auto"``: the agents' own endpoints, not a set's in-process one).
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
        agent_sets: Sequence[AgentSet] = (),
        workspaces_dir: Path | str | None = None,
        operator_name: str | None = None,
    ) -> None:
        self.store: Store = store if store is not None else open_store(runs_dir or tether_home() / "runs")
        self.config = config
        self.fleet = budgets.from_config(config.data.budgets) if config is not None else None
        self.operator_name = operator_name  # --as: the name its new runs record beside the account
        self.base_url = base_url
        self.counter = TokenCounter()
        self.sinks = list(sinks)
        self.agent_sets = tuple(agent_sets)
        self._sets_root = Path(workspace) if workspace is not None else tether_home() / "workspace"
        self._sets_workspace: Workspace | None = None
        self.workspaces_dir = Path(workspaces_dir) if workspaces_dir is not None else tether_home() / "workspaces"
        self._client = client
        self._latency_ms = latency_ms
        self._fail = fail
        self._endpoints = Endpoints(self.counter, base_url=base_url, api_key=api_key, client=client,
                                    embedded_url=embedded_url, stream=stream, offered=self._offered)
        self._agents: dict[tuple[str, str], Agent] = {}
        self._signals: dict[str, CancelSignal] = {}
        self._control: Any = None  # the store's control listener (a Unix socket; PostgreSQL: a LISTEN)
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
        await self._endpoints.aclose()

    async def __aenter__(self) -> "Harness":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    @property
    def workspace(self) -> Workspace:
        """The agent sets' workspace, with the sample files laid out the first time it is used."""
        if self._sets_workspace is None:
            private_dirs(self._sets_root.parent)  # Tether's home, when it is there: 0700, as the store makes it
            self._sets_workspace = ensure_sample(self._sets_root)
        return self._sets_workspace

    @property
    def client(self) -> ChatModel:
        """The client of the embedded (or shared) endpoint."""
        return self._client_for(None, None)

    # ---- agents ----------------------------------------------------------------------
    def agent_named(self, name: str) -> Agent:
        """The agent ``name`` of the harness's agent sets, on its workspace (a demo scenario)."""
        agent_set = set_of(self.agent_sets, name)
        if agent_set is None:
            raise ValueError(self._unknown(name))
        return agent_set.agent(name, self.workspace.root)

    def agent_for_model(self, model: str) -> Agent:
        """An agent of the harness's sets, or, with a ``base_url``, an ad hoc agent for ``model``
        offered the file tools on the workspace (what ``new_run`` has always made)."""
        if set_of(self.agent_sets, model) is not None:
            return self.agent_named(model)
        if not self.base_url and self._client is None:
            raise ValueError(self._unknown(model))
        return adhoc_agent(model, self.base_url, self.workspace.root, api_key_env=None)

    def _unknown(self, name: str) -> str:
        known = known_agents(self.agent_sets)
        if not known:
            return f"unknown agent {name!r}: this harness was given no agent set"
        return f"unknown scenario {name!r}; the scripted provider knows: " + ", ".join(known)

    def agent_of(self, state: RunState) -> Agent:
        """Rebuild the agent a run was made with: the one this process was given, else its
        agent file, else its agent set, else its saved definition. Raises :class:`StateError`
        in words."""
        ref = state.agent
        if ref is not None and ref.spec.get("program"):
            raise StateError(f"run {state.run_id} was reported by a program ({ref.spec['program']}, agent {ref.name}): "
                             "Tether cannot rebuild that loop, so it cannot resume it or decide its calls when the "
                             "program is gone; the program goes on with it while it runs")
        if ref is None:  # made before agents: an agent set's (the demo), or an ad hoc endpoint
            if set_of(self.agent_sets, state.model) is not None:
                return self.agent_named(state.model)
            return adhoc_agent(state.model, state.base_url or self.base_url, Path(state.workspace or "."),
                               api_key_env=None)
        known = self._agents.get((ref.name, ref.fingerprint))
        if known is not None:
            return known
        try:
            if ref.source == "config" and ref.config and Path(ref.config).is_file():
                # lazy: the agent file's checker loads pydantic, only for an agent file's run
                from tether.agents.config import load_config

                config = self.config if self.config is not None and str(self.config.path) == ref.config \
                    else load_config(ref.config)
                return config.agent(ref.name)
            for agent_set in self.agent_sets:
                rebuilt = agent_set.rebuild(state)
                if rebuilt is not None:
                    return rebuilt
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
        isolation: str | None = None,
        adopt: str | None = None,
    ) -> RunState:
        """A fresh run of ``agent`` on ``prompt`` (its default task if None), saved but not started;
        ``isolation`` (``worktree``, ``copy``, ``none``) instead of the agent's (:mod:`tether.workspaces`).
        ``adopt``: an ACP agent's own earlier session (one its ``session/list`` gave,
        :mod:`tether.acp.offer`) that the run goes on in, the prompt its next turn, instead of
        a new session; the run works in the agent's own folder, the session's (the agent's
        own isolation does not apply; another is an AgentError)."""
        task = prompt or agent.prompt
        if not task:
            raise ValueError(f"agent {agent.name} has no default task: give a prompt")
        if adopt is not None:
            if agent.acp is None:
                raise AgentError(f"agent {agent.name} is not an ACP agent: it has no session of its own to go on in")
            if isolation not in (None, "none"):
                raise AgentError(f"a run that goes on in agent {agent.name}'s session {adopt} works in the agent's "
                                 "own folder, where the session is: it cannot have a workspace of its own")
            isolation = "none"  # whatever the agent's own isolation: the session is in the agent's folder
            # lazy: the acp package is slow to import, and only an ACP agent's run needs it
            from tether.acp.sessions import ADOPTED
        self._agents[(agent.name, agent.ref().fingerprint)] = agent
        endpoint = agent.base_url or (self.base_url if self._of_a_set(agent) else None)
        prefix = agent.name.replace("/", "_")[:24]
        state = RunState(
            run_id=run_id or new_run_id(prefix),
            model=agent.model,
            messages=[{"role": "system", "content": agent.instructions},
                      {"role": "user", "content": task, **({ADOPTED: adopt} if adopt is not None else {})}],
            limits=replace(limits or agent.limits),
            policies=replace(policies or agent.policies, auto_approve=list((policies or agent.policies).auto_approve)),
            pricing=pricing or agent.pricing or price_for(agent.model, base_url=endpoint),
            base_url=without_credentials(endpoint) if endpoint else None,
            workspace=str(agent.workspace) if agent.workspace is not None else None,
            run_workspace=lifecycle.plan_for(agent, isolation),
            agent=agent.ref(),
            operator_name=self.operator_name,
        )
        if self.fleet is not None:
            self.fleet.refuse_new(self.store, state)  # a spent fleet budget: refused in words, nothing made
        create_new(self.store.create, state, made_up=None if run_id else prefix)
        return state

    def _of_a_set(self, agent: Agent) -> bool:
        return any(agent.source == agent_set.source for agent_set in self.agent_sets)

    def new_run(self, model: str, prompt: str | None = None, *, run_id: str | None = None,
                limits: Limits | None = None, policies: Policies | None = None,
                pricing: Pricing | None = None) -> RunState:
        """A run of the agent sets' agent ``model`` (a demo scenario), or, with a ``base_url``, of
        that model with the file tools: the short form the lab and the tests use."""
        return self.create(self.agent_for_model(model), prompt, run_id=run_id, limits=limits,
                           policies=policies, pricing=pricing)

    def load(self, run_id: str) -> RunState:
        return self.store.load(run_id)

    # ---- operations -------------------------------------------------------------------
    async def start(self, agent: Agent, prompt: str | None = None, *, run_id: str | None = None,
                    signal: CancelSignal | None = None, sinks: Sequence[EventSink] = (),
                    isolation: str | None = None, adopt: str | None = None) -> Outcome:
        """Make a run of ``agent`` and run it until it stops, one of five ways. An ACP agent
        is started first: one that is not there, or not an ACP agent, is an AgentError in
        words, and no run is made. ``adopt``: the agent's own session it goes on in (:meth:`create`)."""
        session = await self.start_acp(agent, isolation) if agent.acp is not None else None
        try:
            state = await call(self.store, self.create, agent, prompt, run_id=run_id, isolation=isolation,
                               adopt=adopt)
            return await self.run(state.run_id, signal=signal, sinks=sinks, acp_session=session)
        finally:
            if session is not None:
                await session.close()

    async def start_acp(self, agent: Agent, isolation: str | None = None) -> Any:
        """An ACP agent's process, started and past ``initialize``, for the run about to be
        made (:meth:`run` with ``acp_session``): a command that is missing or does not speak ACP
        is an AgentError naming the agent, before any run exists. The caller closes it. A run
        with a workspace of its own (``isolation``, else the agent's) starts its agent there,
        once it is made: only the command is looked for now, and None is returned."""
        # lazy: the acp package is slow to import, and only an ACP agent's run needs it
        from tether.acp import AcpError
        from tether.acp.run import session_for

        where = f"{agent.config}: agents.{agent.name}.acp" if agent.config else f"agent {agent.name}"
        try:
            if (agent.isolation.kind if isolation is None else isolation) != "none":
                # lazy: the acp package, as above
                from tether.acp.process import agent_environment, resolve_command

                assert agent.acp is not None
                resolve_command(agent.acp.argv, agent_environment(agent.acp.resolved_env()[0]))
                return None
            session = await asyncio.to_thread(session_for, agent)  # off the loop: its sandbox's folders are made
            await session.start()
        except AcpError as exc:
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
                add_follow_up(state, message)
            return []

        return await self.operate(run_id, Operation(raise_limits, signal, sinks, wait_for_decision,
                                                     follow_up=message is not None, acp_session=acp_session))

    resume = run

    async def approve(self, run_id: str, note: str = "", *, call_id: str | None = None, by: str = "operator",
                      args: str | None = None, rule: str | None = None, signal: CancelSignal | None = None,
                      sinks: Sequence[EventSink] = (), wait_for_decision: float | None = None,
                      account: str | None = None, decided_at: float | None = None,
                      unchecked: bool = False) -> Outcome:
        """Approve the waiting call (bound to its arguments, used once), then go on. ``args``:
        the operator's edited arguments (JSON), checked against the tool's schema first
        (``unchecked``: taken as they are where the run knows no schema, a program's run whose
        program reported none). A call that needs two people keeps waiting after the first, for
        another account (``by`` is a name: :meth:`account`). For a run whose process waits for a
        decision, use :meth:`decide`: it reaches that process. After the call's deadline it is
        refused (:class:`~tether.approvals.decisions.TooLate`), the deadline applied instead;
        ``decided_at``: when it was made, if before now (a queue worker's)."""
        request = control.ControlRequest("approve", note, call_id=call_id, by=by, args=args, rule=rule,
                                         account=account, unchecked=unchecked, **_at(decided_at))
        return await adopting.adopt(self, run_id, request, signal=signal, sinks=sinks,
                                    wait_for_decision=wait_for_decision)

    async def reject(self, run_id: str, reason: str = "", *, call_id: str | None = None, by: str = "operator",
                     rule: str | None = None, signal: CancelSignal | None = None, sinks: Sequence[EventSink] = (),
                     wait_for_decision: float | None = None, account: str | None = None,
                     decided_at: float | None = None) -> Outcome:
        """Decline the waiting call, in words in its result slot, then go on (refused after its
        deadline, as :meth:`approve` is)."""
        request = control.ControlRequest("reject", reason, call_id=call_id, by=by, rule=rule, account=account,
                                         **_at(decided_at))
        return await adopting.adopt(self, run_id, request, signal=signal, sinks=sinks,
                                    wait_for_decision=wait_for_decision)

    async def account(self, given: str | None = None, *, rule: str | None = None) -> str | None:
        """The account a decision counts as (:func:`tether.actions.adopting.account_of`)."""
        return await adopting.account_of(self.store, given, rule=rule)

    @contextlib.asynccontextmanager
    async def track(self, name: str, task: str = "", *, source: str = "program", model: str = "",
                    run_id: str | None = None, limits: Limits | None = None, pricing: Pricing | None = None,
                    policies: Policies | None = None, attach: bool = False, keep_open: bool = False,
                    cancel: asyncio.Task[Any] | None = None, sinks: Sequence[EventSink] = (),
                    workspace: Path | str | None = None, isolation: str | None = None) -> AsyncIterator[TrackedRun]:
        """A run of a loop that is not Tether's, which the program reports into
        (:mod:`tether.run.tracked`): ``async with harness.track("triage", task) as run``.

        ``source`` names the framework (``openai-agents``, ``pydantic-ai``, ``claude-code``,
        ``program``); ``limits`` are checked at each usage report; ``cancel`` is a task a Stop
        cancels. ``attach`` reports into the existing run ``run_id`` (a hook process after the
        one that opened it); ``keep_open`` leaves the run running when the block ends without
        an answer, for the next reporter. A Stop or a limit that ends the run inside the block
        ends it in a known way and is not raised out of it; any other exception fails the run
        and is raised. ``run.workspace`` is ``workspace``, or with ``isolation`` (``worktree``,
        ``copy``) a workspace of the run's own made from it (:mod:`tether.workspaces.tracked`)."""
        planned = tracked.plan(workspace, isolation)  # before any run is made: ValueError in words
        server = await self._control_server()
        if pricing is None and not attach:  # an attached run has its price: no genai-prices to load
            pricing = await asyncio.to_thread(price_for, model or name, self.config)
        async with track(self, server, self._hold, self._let_go, Tracking(
                name, task, source=source, model=model, run_id=run_id, limits=limits, pricing=pricing,
                policies=policies, attach=attach, keep_open=keep_open, cancel=cancel, sinks=sinks)) as run:
            async with tracked.given(run, planned, workspace, self.workspaces_dir):
                yield run

    def _let_go(self, run_id: str) -> None:
        self._emitters.pop(run_id, None)
        self.live.pop(run_id, None)
        self._signals.pop(run_id, None)

    async def stop(self, run_id: str, reason: str = STOP_REASON, *, by: str = "operator") -> control.ControlReply:
        """Stop a run whichever process runs it (:func:`tether.actions.control.stop`, as every
        front does): this one, a queue worker's workflow that waits for a decision on it, or the
        process that holds it, whose tool is cut off in words, or whose waiting call is declined
        in words. The reply says what happened, in words (nothing to stop, orphaned...)."""
        return await actions.stop(self.store, run_id, reason, by=by, here=self.stop_here)

    def stop_here(self, run_id: str, reason: str, by: str) -> control.ControlReply | None:
        """Stop the run at once if this process drives it (its signal fires); None if it does not."""
        signal = self._signals.get(run_id)
        if signal is None:
            return None
        if signal.cancelled:
            return control.ControlReply(True, f"run {run_id} is already stopping")
        signal.cancel(reason, by, stop=True)
        return control.ControlReply(True, f"run {run_id} stops now")

    async def decide(self, run_id: str, verdict: str, text: str = "", *, call_id: str | None = None,
                     by: str = "operator", option: str | None = None, silent: bool = False, args: str | None = None,
                     scope: str | None = None, account: str | None = None,
                     unchecked: bool = False) -> control.ControlReply:
        """Deliver an approval or a rejection to whoever holds the run waiting for one
        (:func:`tether.actions.control.deliver`): a queue worker's workflow, or the process that
        holds it (``wait_for_decision``). A run nobody holds is refused in words: it is decided
        with :meth:`approve` or :meth:`reject`, in this process. ``args``: an approval's edited
        arguments (JSON; ``unchecked`` as for :meth:`approve`); ``scope``: for an ACP agent's
        "always" option, the scope of the rule Tether keeps."""
        kind = "approve" if verdict in ("approve", "approved") else "reject"
        request = control.ControlRequest(kind, text, call_id=call_id, by=by, option=option, silent=silent, args=args,
                                         scope=scope, account=await self.account(account), unchecked=unchecked)
        delivered = await actions.deliver(self.store, run_id, request)
        return delivered if delivered is not None else await self.request(run_id, request)

    async def request(self, run_id: str, request: control.ControlRequest) -> control.ControlReply:
        """Append ``request`` to the run's control channel and have its process act on it
        (:func:`tether.actions.control.request`)."""
        return await actions.request(self.store, run_id, request)

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
            self._control = self.store.control_server()
        await self._control.start()
        return self._control

    async def operate(self, run_id: str, operation: Operation) -> Outcome:
        """Hold the run ``run_id`` and do ``operation`` on it: its driver (Tether's loop, or an ACP
        agent's process) takes the turns until it stops; the run is let go however it ends."""
        started = time.perf_counter()
        signal = operation.signal or CancelSignal()
        server = await self._control_server()
        state, handle = await open_run(self.store, run_id, control=server.address)
        trace: TraceSink | None = None
        controls = Controls(state, handle, signal)
        server.register(run_id, controls.poke)
        beating = asyncio.create_task(heartbeat(handle), name=f"heartbeat {run_id}")
        try:
            _goes_on(state, operation)
            agent = self.agent_of(state)
            trace = handle.trace(self.secrets(agent))
            run = RunDriver(state, handle, trace, [*self.sinks, *operation.sinks])
            if agent.acp is not None:
                # lazy: the acp package is slow to import, and only an ACP agent's run needs it
                from tether.acp.drive import AcpHost, drive_acp

                final, tool_runs = await drive_acp(run, agent, signal, controls, operation, AcpHost(
                    self.store, self._rules_access(), lambda emit: self._hold(state, emit, signal),
                    self.workspaces_dir, None if self.fleet is None else self._fleet_check))
            else:
                final, tool_runs = await self._drive_loop(run, agent, signal, controls, operation)
            return Outcome(final, tool_runs, (time.perf_counter() - started) * 1000)
        finally:
            beating.cancel()
            server.unregister(run_id)
            self._let_go(run_id)
            if trace is not None:
                trace.close()
            await release(handle)

    async def _drive_loop(self, run: RunDriver, agent: Agent, signal: CancelSignal, controls: Controls,
                          operation: Operation) -> tuple[RunState, list[dict[str, Any]]]:
        """Tether's own loop takes the run's turns (its MCP servers live as long as this), through
        decisions it waits for (``operation.wait_for_decision``); the run as it stopped, and the
        tool calls it ran."""
        state, decision = run.state, operation.decision
        if not encoding_loaded():
            # The rank file, loaded off the event loop once: the loop may count a prompt (a
            # strict budget, an endpoint that omits usage), and so does the embedded provider.
            # An ACP agent's run counts nothing, and does not pay for it.
            await asyncio.to_thread(encoding)
        client = self._client_for(agent, state)
        tools = {t.name: t for t in agent.tool_list}
        async with contextlib.AsyncExitStack() as stack:
            failure: str | None = None
            if agent.mcp_servers:
                # lazy: the MCP SDK, only for an agent with MCP servers (test_cold_start keeps mcp out of the others)
                from tether.agents.mcp.catalog import mcp_tools
                from tether.agents.mcp.server import MCPStartError

                try:
                    listed = await stack.enter_async_context(
                        mcp_tools(agent.mcp_servers, reserved=tools.keys(), stderr_dir=run.handle.scratch_dir,
                                  sandbox=None if agent.sandbox is None else await asyncio.to_thread(
                                      for_agent, Path(agent.workspace or os.getcwd()),
                                      *(s.env for s in agent.mcp_servers))))
                    tools.update({t.name: t for t in listed})
                except (MCPStartError, SandboxUnavailable) as exc:
                    failure = str(exc)
            if failure is None:
                self._check_tools(state, tools)
            env = self._env(agent, client, tools, operation.sinks, root=lifecycle.locate(state, self.workspaces_dir))
            run.after_change = env.after_change
            loop = RunLoop(run, env, signal)
            self._hold(state, run.emit, signal)
            if failure is not None:
                return await loop.fail(failure), []
            await controls.adopt()  # requests made while the run's process was dead
            ended = await lifecycle.begin(state, loop, signal)  # its own workspace, made and set up
            if ended is not None:
                return ended, []
            controls.vet = lambda request: vet_decision(tools, state, request)
            if decision is not None:
                taken, refused = take_decision(state, decision, lambda: vet_decision(tools, state, decision))
                await run.record(taken)
                if refused is not None:
                    raise refused
            events = operation.prepare(state)
            if events:
                await run.record(events)
            final = await loop.run()
            waiting = operation.wait_for_decision
            while waiting is not None and isinstance(final.interruption, NeedsApproval) and not signal.cancelled:
                decided = await controls.wait_for_decision(final.interruption,
                                                           decision_wait(final.interruption, waiting))
                if decided is None:
                    if past_deadline(final.interruption) and not signal.cancelled:
                        final = await loop.run()  # the loop answers an overdue call by its deadline
                        continue
                    break  # no decision in time: the run stays waiting, on disk (a Stop: below)
                await run.record([apply_decision(state, decided)])
                final = await loop.run()
            await run.record(stopped_waiting(state, signal))  # a Stop ends a run that waits, too
            await lifecycle.note_changes(state, run.save)
            await controls.close()
            return final, loop.tool_runs

    def _hold(self, state: RunState, emit: Callable[[Any], None], signal: CancelSignal) -> None:
        """The run is driven here now: its events go through ``emit``, views see it live, a
        Stop in this process reaches ``signal``. :meth:`operate` lets go of all three."""
        self._emitters[state.run_id] = emit
        self.live[state.run_id] = state
        self._signals[state.run_id] = signal

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
        new = {name: digest for name, digest in tool_hashes(tools.values()).items() if name not in ref.tools}
        if new:
            state.agent = replace(ref, tools={**ref.tools, **new})

    # ---- wiring -------------------------------------------------------------------------
    def secrets(self, agent: Agent | None = None) -> tuple[str, ...]:
        """The API keys this process uses (for ``agent`` too): what the trace and exports redact."""
        return self._endpoints.secrets(agent)

    def _client_for(self, agent: Agent | None, state: RunState | None) -> ChatModel:
        return self._endpoints.client_for(agent)

    def _offered(self) -> ChatModel | None:
        """The in-process endpoint the first of the agent sets that offers one offers."""
        offered = (s.model(self.counter, latency_ms=self._latency_ms, fail=self._fail) for s in self.agent_sets)
        return next((model for model in offered if model is not None), None)

    def _env(self, agent: Agent, client: ChatModel, tools: dict[str, Tool], sinks: Sequence[EventSink],
             *, child: bool = False, root: str | None = None) -> LoopEnv:  # root: the run's own workspace
        all_sinks = [*self.sinks, *sinks]
        if child:
            tools = {name: t for name, t in tools.items() if t.read_only and name != "research"}
        folder = root if root is not None else agent.workspace
        workspace = Workspace(folder) if folder is not None else None
        return LoopEnv(
            client=client,
            tools=tools,
            workspace=workspace,  # type: ignore[arg-type]
            counter=self.counter,
            sinks=all_sinks,
            stop_conditions=[] if child else list(agent.stop_when),  # type: ignore[arg-type]
            error_formatter=agent.error_formatter,  # type: ignore[arg-type]
            spawn=None if child else self._spawner(agent, client, tools, list(sinks), root),
            rules=self._rules,
            after_change=None if child else checkpoints.after_change_hook(),
            fleet_budget=None if self.fleet is None else self._fleet_check,
        )

    async def _fleet_check(self, state: RunState, asked: NeedsApproval | None = None, *, settle: bool = False) -> Any:
        """The fleet budgets before a model call (tether.approvals.budgets): their levels reached
        go into the run's trace (the notifications send them), a reached one stops the run or
        asks (``asked``: the budget call it waited on before; ``settle``: charge only)."""
        return await budget_ask.check(self.fleet, self.store, state, self._rules, self._emitters.get(state.run_id),
                                      asked, settle=settle)

    async def _rules(self) -> list[Any]:
        """The store's standing rules (:mod:`tether.approvals`), read before each call."""
        return await call(self.store, self.store.rules)

    def _rules_access(self) -> Any:
        # lazy: the acp package is slow to import, and only an ACP agent's run needs it
        from tether.acp.run import Rules

        async def add(rule: Any) -> Any:
            return await call(self.store, self.store.rule_add, rule)

        return Rules(read=self._rules, add=add)

    def _spawner(self, agent: Agent, client: ChatModel, tools: dict[str, Tool], sinks: list[EventSink],
                 root: str | None) -> Any:
        """``sinks``: the operation's own; the harness's are added by :meth:`_env`, once. ``root``: the parent's."""
        def child_model(model: str) -> str | None:
            return next((m for s in self.agent_sets if (m := s.child_model(model))), None)

        return spawner(self.store, lambda: self._env(agent, client, tools, sinks, child=True, root=root),
                       secrets=self.secrets(agent), child_model=child_model, live=self.live)


def _at(decided_at: float | None) -> dict[str, float]:
    """A decision's time, when it was made before now (a queue worker's)."""
    return {} if decided_at is None else {"ts": decided_at}


def _goes_on(state: RunState, operation: Operation) -> None:
    """Refuse, in words, an operation on a run that cannot go on: one that has ended (a
    follow-up goes on from it), whose rewind was cut short, or that waits on a merge."""
    run_id, deciding = state.run_id, operation.decision is not None
    if state.status in (Status.COMPLETED, Status.FAILED) and not operation.follow_up:
        last = max(state.approvals.values(), key=lambda d: d.ts, default=None) if deciding else None
        if last is not None:
            raise StateError(f"{already_decided(last)}; run {run_id} has since ended ({state.status.value})")
        raise StateError(f"run {run_id} has already ended ({state.status.value}); it cannot be resumed, but "
                         f"a follow-up goes on from it: tether resume {run_id} --message TEXT")
    lifecycle.usable(state)
    if state.rewinds and state.rewinds[-1].get("stage") == "recorded":  # tether.workspaces.rewinding
        raise StateError(f"run {run_id}: a rewind of it was cut short; tether rewind {run_id} --undo "
                         "finishes it (then takes it back), tether rewind --to N finishes it and rewinds again")
    if not deciding and (merging.waits_on_merge(state) or merging.merging(state)):
        raise StateError(f"run {run_id} waits for a decision on the merge of its work: tether approve "
                         f"{run_id} merges it, tether reject {run_id} declines it; then it can go on")


def adhoc_agent(model: str, base_url: str | None, workspace: Path, *, api_key_env: str | None = "LLM_API_KEY",
                prompt: str | None = None) -> Agent:
    """The agent ``tether run --base-url URL --model M`` makes when no agent is named: the
    model at that endpoint, offered the file tools on ``workspace``, and nothing else."""
    return Agent(name=ADHOC_AGENT, model=model, base_url=base_url, api_key_env=api_key_env,
                 tools=["tether:list_files", "tether:read_file", "tether:delete_file"], workspace=workspace,
                 prompt=prompt)


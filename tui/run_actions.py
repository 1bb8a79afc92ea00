"""What the operator does to runs: start one, stop one, resume it, follow it up, quit.

A collaborator of :class:`~tether.tui.app.TetherApp`, made by it with the harness, the
model, the pump, the store client, the options and the event sink, and the app as the
:class:`RunsHost` it asks for dialogs, workers, notifications and the selection; the app's
keys and the command palette call it. A run this console drives runs in a Textual worker
(:meth:`RunActions.launch`), with a :class:`~tether.vocab.cancel.CancelSignal` that Stop
fires at once; a run another process holds is stopped the way every front stops one
(:func:`tether.actions.control.stop`, from :meth:`RunActions.request_stop`), and the reply's
words are shown. A worker's error never
crashes the app: it becomes the run's failure reason.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from textual.screen import Screen
from textual.worker import Worker
from textual.worker_manager import WorkerManager

from tether.actions import control
from tether.agents.agent import Agent
from tether.agents.config import Config
from tether.agents.sets import known_agents, set_of
from tether.harness import ADHOC_AGENT, Harness, Outcome, adhoc_agent
from tether.vocab.cancel import CancelSignal
from tether.vocab.events import Event
from tether.approvals.decisions import TooLate, already_decided
from tether.vocab.state import StateError, new_run_id
from tether.store.control import ControlReply
from tether.store.protocol import call
from tether.tui.state.choices import agent_choices
from tether.tui.screens.follow_up import FollowUpDialog
from tether.tui.screens.new_run import NewRunDialog, NewRunRequest
from tether.tui.screens.resume import ResumeDialog, ResumeRequest
from tether.tui.state.model import ConsoleModel
from tether.tui.state.options import ConsoleOptions
from tether.tui.state.pump import EventPump
from tether.tui.state.store_client import StoreClient
from tether.tui.state.text import one_line

STOP_REASON = "operator pressed Stop"
QUIT_REASON = "operator quit the console"
QUIT_TIMEOUT_S = 15.0


class RunsHost(Protocol):
    """What starting and stopping runs asks of the console (the app is one)."""

    @property
    def workers(self) -> WorkerManager: ...

    def notify(self, message: str, **how: Any) -> None: ...  # App.notify: title, severity, markup, timeout

    def run_worker(self, work: Any, **how: Any) -> Worker[Any]: ...  # App.run_worker: name, group, exit_on_error

    def push_screen(self, screen: Screen[Any], callback: Callable[[Any], None] | None = None) -> Any: ...

    def select(self, rid: str | None) -> None: ...

    def show_events(self) -> None: ...

    def keys_changed(self) -> None: ...  # what applies to the selected run may have: the keys are looked at again


class RunActions:
    """Start, stop, resume and follow up, for one console."""

    def __init__(self, host: RunsHost, harness: Harness, model: ConsoleModel, pump: EventPump, client: StoreClient,
                 options: ConsoleOptions, *, config: Config | None, adhoc_workspace: Path,
                 sink: Callable[[Event], None]) -> None:
        """``config``: the agent file; ``adhoc_workspace``: where a run of a model at
        ``--base-url`` works; ``sink``: the event sink every run this console drives is given."""
        self.host = host
        self.harness = harness
        self.model = model
        self.pump = pump
        self.client = client
        self.options = options
        self.config = config
        self.adhoc_workspace = adhoc_workspace
        self.sink = sink

    def agent_for(self, request: NewRunRequest) -> Agent:
        """The agent a request names: the agent file's ``request.agent``, an agent of the
        harness's sets (a demo scenario), or (with ``--base-url``) the model at that endpoint.
        Raises ValueError in words."""
        if request.agent is not None:
            if self.config is None:
                raise ValueError(f"no agent file: agent {request.agent} needs ./tether.toml, --config FILE "
                                 "or $TETHER_CONFIG")
            return self.config.agent_for_run(request.agent, mode=request.mode, model=request.acp_model)
        if set_of(self.harness.agent_sets, request.model) is not None:
            return self.harness.agent_named(request.model)  # at --base-url when the scripted provider is served there
        base_url = self.harness.base_url
        if base_url:
            if not request.model:
                raise ValueError("give a model name (--model, or in the New run dialog)")
            # The key is the console's (LLM_API_KEY), as for every run it makes at --base-url.
            return adhoc_agent(request.model, base_url, self.adhoc_workspace, api_key_env=None)
        raise ValueError(f"unknown scenario {request.model!r}; the demo scenarios are: "
                         + ", ".join(known_agents(self.harness.agent_sets)))

    def create_run(self, request: NewRunRequest, *, run_id: str | None = None, start: bool = True) -> str:
        """Make a run of the agent ``request`` names (and start it)."""
        agent = self.agent_for(request)
        if run_id is None and agent.name == ADHOC_AGENT and agent.source == "library":
            run_id = new_run_id(agent.model.replace("/", "_")[:24])  # listed by its model, as before
        state = self.harness.create(agent, request.prompt, run_id=run_id, limits=request.limits,
                                    policies=request.policies, isolation=request.isolation, adopt=request.session)
        self.model.put_state(state)
        self.model.ours.add(state.run_id)
        self.pump.structure_dirty = True
        if start:
            self.start_run(state.run_id)
        else:
            self.pump.mark(state.run_id, structure=True)
        return state.run_id

    async def _create_and_start(self, request: NewRunRequest) -> None:
        """:meth:`create_run` for a store that waits on a network: the run is saved from a
        worker thread, then started here."""
        try:
            agent = self.agent_for(request)
            run_id = None
            if agent.name == ADHOC_AGENT and agent.source == "library":
                run_id = new_run_id(agent.model.replace("/", "_")[:24])
            state = await asyncio.to_thread(self.harness.create, agent, request.prompt, run_id=run_id,
                                            limits=request.limits, policies=request.policies,
                                            isolation=request.isolation, adopt=request.session)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.host.notify(f"could not start the run: {one_line(exc, 400)}", severity="error", markup=False)
            return
        self.model.put_state(state)
        self.model.ours.add(state.run_id)
        self.pump.structure_dirty = True
        self.start_run(state.run_id)
        self.host.show_events()
        self.host.select(state.run_id)

    def start_run(self, rid: str, *, max_turns: int | None = None, budget_usd: float | None = None,
                  message: str | None = None) -> Worker[Any]:
        if message is not None:  # a follow-up: this console adopts the run and goes on from the words
            return self.launch(rid, lambda sig: control.follow_up(self.harness, rid, message, signal=sig,
                                                                  sinks=[self.sink], max_turns=max_turns,
                                                                  budget_usd=budget_usd))
        return self.launch(rid, lambda sig: self.harness.run(rid, signal=sig, sinks=[self.sink],
                                                             max_turns=max_turns, budget_usd=budget_usd))

    def stop_run(self, rid: str, reason: str = STOP_REASON) -> bool:
        """Stop a run this console drives (its signal, at once); False when it drives none."""
        root = self.model.root_of(rid)
        signal = self.model.signals.get(root)
        if signal is None or root not in self.model.active:
            return False
        signal.cancel(reason, self.model.operator, stop=True)
        self.host.keys_changed()
        return True

    def request_stop(self, rid: str, reason: str = STOP_REASON) -> Worker[Any]:
        """Stop a run another process runs (or a queue worker's workflow holds waiting); the
        reply's words are shown."""
        root = self.model.root_of(rid)
        self.model.stopping.add(root)
        self.host.keys_changed()
        self.pump.mark(root)
        harness = self.harness
        stop = lambda: control.stop(harness.store, root, reason, by=self.model.operator,  # noqa: E731
                                    here=harness.stop_here)
        return self.host.run_worker(self.control(root, stop, "Stop"), name=f"stop {root}", group="control",
                                    exit_on_error=False)

    async def control(self, rid: str, op: Callable[[], Awaitable[ControlReply | None]],
                      what: str) -> ControlReply | None:
        """Run ``op`` and show its reply's words; ``op`` returns None when it handed the run to
        this console instead (nothing to say yet: the run shows what it does)."""
        try:
            reply = await op()
        except (StateError, OSError) as exc:
            reply = ControlReply(False, str(exc))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            reply = ControlReply(False, f"{type(exc).__name__}: {exc}")
        finally:
            self.model.stopping.discard(rid)
            self.host.keys_changed()
            self.pump.mark(rid, structure=True)
        if reply is None:
            return None
        self.host.notify(reply.words, title=f"{what}: {one_line(rid, 60)}",
                         severity="information" if reply.ok else "warning", markup=False, timeout=10)
        return reply

    def launch(self, rid: str, op: Callable[[CancelSignal], Awaitable[Outcome]], *,
               deciding: str | None = None) -> Worker[Any]:
        signal = CancelSignal()
        self.model.signals[rid] = signal
        self.client.driven_here(rid)
        shown = (self.model.worker_errors.pop(rid, None), self.model.last_reason.pop(rid, None))
        worker = self.host.run_worker(self._drive(rid, op, signal, shown, deciding), name=f"run {rid}", group="runs",
                                      exit_on_error=False, description=f"runs {rid}")
        self.model.active[rid] = worker
        self.host.keys_changed()
        self.pump.mark(rid, structure=True)
        return worker

    async def _drive(self, rid: str, op: Callable[[CancelSignal], Awaitable[Outcome]], signal: CancelSignal,
                     shown: tuple[str | None, str | None] = (None, None), deciding: str | None = None) -> None:
        try:
            outcome = await op(signal)
            self.model.put_state(outcome.state)
        except asyncio.CancelledError:
            raise
        except StateError as exc:
            # The harness refused before anything was used up (the run's agent cannot be
            # rebuilt, its tools changed, another process holds it, another console decided
            # first): the run is as it was.
            error, reason = shown
            if error is not None:
                self.model.worker_errors[rid] = error
            if reason is not None:
                self.model.last_reason[rid] = reason
            await self._reload(rid)
            words = str(exc)
            if deciding is not None and not isinstance(exc, TooLate):  # another decided first, or is deciding
                words = await self._decided_elsewhere(rid, deciding) or words
            # Too late: the deadline decided instead, and the run shows what it did.
            changed = "was decided by its deadline" if isinstance(exc, TooLate) else "was not changed"
            self.host.notify(words, title=f"{one_line(rid, 60)} {changed}", severity="error",
                             markup=False, timeout=15)
        except Exception as exc:  # a worker error never crashes the app: it is the run's failure reason
            self.model.worker_errors[rid] = f"{type(exc).__name__}: {exc}"
            self.host.notify(f"{type(exc).__name__}: {exc}", title=f"{one_line(rid, 60)} failed", severity="error",
                             markup=False, timeout=15)
            await self._reload(rid)
        finally:
            if self.model.active.get(rid) is not None:
                self.model.active.pop(rid, None)
            self.client.released(rid)
            with contextlib.suppress(Exception):
                self.model.set_owner(rid, await call(self.harness.store, self.harness.store.owner, rid))
            self.host.keys_changed()
            self.pump.mark(rid, structure=True)

    async def _decided_elsewhere(self, rid: str, call_id: str) -> str | None:
        """Words for a decision that lost the race to another one (None: that is not why)."""
        st = self.model.states.get(rid)
        if st is None:
            return None
        decision = st.approvals.get(call_id) if call_id else max(st.approvals.values(), key=lambda d: d.ts,
                                                                 default=None)
        if decision is not None and not decision.complete:  # a two-person call: the harness's words say why
            return None
        if decision is not None:
            return already_decided(decision)
        if self.model.held_elsewhere(rid) or await call(self.harness.store, self.harness.store.owner, rid) is not None:
            return (f"another console or process took run {rid} first (it is deciding or running it); "
                    "nothing was done here")
        return None

    async def _reload(self, rid: str) -> None:
        """The run as saved (after an operation that raised instead of returning it)."""
        try:
            self.model.put_state(await asyncio.to_thread(self.harness.store.load, rid))
        except Exception:
            pass

    # ---- actions (keys, palette) -------------------------------------------------------------------
    def refused(self, what: str) -> bool:
        """Say so on screen, and True, when this console may only watch the store (its role
        is read-only): nothing is sent, nothing changes."""
        why = self.model.refusal
        if why is None:
            return False
        self.host.notify(why, title=f"{what}: refused", severity="warning", markup=False, timeout=10)
        return True

    def stop(self) -> None:
        """``s``: stop the selected run: its signal if this console drives it, else through the store."""
        rid = self.model.selected
        if not rid or not self.model.can_stop(rid) or self.refused("Stop"):
            return
        if not self.stop_run(rid):
            self.request_stop(rid)

    def new_run(self) -> None:
        """``n``: the New run dialog, then the run made and started."""
        if self.refused("New run"):
            return

        def done(request: NewRunRequest | None) -> None:
            if request is None:
                return
            if self.client.blocking:  # the store waits on a network: make the run off the loop
                self.host.run_worker(self._create_and_start(request), name="new run", group="control",
                                     exit_on_error=False)
                return
            try:
                rid = self.create_run(request)
            except Exception as exc:
                self.host.notify(f"could not start the run: {one_line(exc, 400)}", severity="error", markup=False)
                return
            self.host.show_events()
            self.host.select(rid)

        choices = agent_choices(self.config, self.harness.agent_sets, base_url=self.harness.base_url,
                                workspace=self.adhoc_workspace)
        self.host.push_screen(NewRunDialog(choices, base_url=self.harness.base_url, default_model=self.options.model,
                                           initial=self.options.agent,
                                           offer=None if self.config is None else self._offer_of), done)

    async def _offer_of(self, name: str) -> Any:
        """What the ACP agent ``name`` of the agent file offers a new run: its own sessions in
        its workspace, its modes and models (:func:`tether.acp.offer.agent_offer`; the agent is
        started and ended again)."""
        from tether.acp.offer import agent_offer  # lazy: the acp package, only when an ACP agent is asked

        assert self.config is not None
        return await agent_offer(self.config.agent(name))

    def resume(self) -> None:
        """``R``: resume the selected run with raised limits."""
        rid = self.model.selected
        if not rid or not self.model.can_resume(rid) or self.refused("Resume"):
            return
        if self.model.needs_load(rid):
            self.client.load(rid)

        def done(request: ResumeRequest | None) -> None:
            if request is not None and self.model.can_resume(rid):
                self.start_run(rid, max_turns=request.max_turns, budget_usd=request.budget_usd)

        self.host.push_screen(ResumeDialog(self.model.states[rid], self.model.last_reason.get(rid)), done)

    def follow_up(self) -> None:
        """``m``: tell the agent of the selected run what to do next."""
        rid = self.model.selected
        if not rid or not self.model.can_follow_up(rid) or self.refused("Follow up"):
            return
        if self.model.needs_load(rid):
            self.client.load(rid)

        def done(message: str | None) -> None:
            if message is not None and self.model.can_follow_up(rid):
                self.start_run(rid, message=message)

        notes = self.model.agent_notes.get(rid)
        self.host.push_screen(FollowUpDialog(self.model.states[rid], notes.commands if notes is not None else ()), done)

    async def stop_for_quit(self) -> None:
        """Stop the runs this console drives and wait for their workers (at most
        ``QUIT_TIMEOUT_S``), so that their state is saved."""
        workers = self.stop_active()
        if workers:
            self.host.notify(f"stopping {len(workers)} running run(s) before quitting…", markup=False)
            try:
                await asyncio.wait_for(self.host.workers.wait_for_complete(workers), QUIT_TIMEOUT_S)
            except TimeoutError:
                pass

    async def stop_all(self) -> None:
        """Stop every run this console drives and wait for their workers."""
        workers = self.stop_active()
        if workers:
            await self.host.workers.wait_for_complete(workers)

    def stop_active(self) -> list[Worker[Any]]:
        """Fire the signal of every run this console drives; return their unfinished workers."""
        workers = [w for w in self.model.active.values() if not w.is_finished]
        for rid in list(self.model.active):
            signal = self.model.signals.get(rid)
            if signal is not None:
                signal.cancel(QUIT_REASON, self.model.operator)
        return workers

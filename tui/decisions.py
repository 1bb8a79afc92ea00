"""The operator's decisions: approve, reject, approve with edited arguments, and the
standing rules and the record of decisions (:mod:`tether.approvals`).

A collaborator of :class:`~tether.tui.app.TetherApp`, made by it with the harness, the
model, the options, the agent file and the run actions (a :class:`RunLauncher`: a run this
console goes on with is launched there), and the app as the :class:`DecisionsHost` it asks
for dialogs, workers, notifications and the selection; the app's keys, the command palette
and the handlers of the rules and decisions screens' messages call it. A decision goes the way every front's goes
(:mod:`tether.actions.control`): to the queue worker's workflow that waits for it; to the
process that holds the run, through the store's control channel; or here, when nobody holds
the run, and this console goes on with it. A rule made from a call decides that call by the
same path, recorded as ``rule R4``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from textual.screen import Screen
from textual.worker import Worker

from tether.actions import adopting, control
from tether.actions.rules import decides_now
from tether.agents.config import Config
from tether.agents.sets import known_agents
from tether.approvals import Checked, DecisionQuery, Rule
from tether.harness import Harness, Outcome
from tether.vocab.cancel import CancelSignal
from tether.vocab.events import Event
from tether.vocab.state import NeedsApproval
from tether.store.control import ControlReply, ControlRequest
from tether.store.trace import tail_records
from tether.store.protocol import call
from tether.tui.screens.args_editor import ArgsEditor
from tether.tui.screens.decision import ACP_NO_EDIT, ApproveDialog, DecisionAnswer, RejectDialog
from tether.tui.screens.decisions import DecisionsScreen
from tether.tui.screens.rule_editor import RuleContext, RuleEditor
from tether.tui.screens.rules import ConfirmDialog, RulesScreen
from tether.tui.state.model import ConsoleModel, agents_own_call, is_acp
from tether.tui.state.options import ConsoleOptions
from tether.tui.state.text import one_line


class DecisionsHost(Protocol):
    """What deciding asks of the console (the app is one)."""

    @property
    def screen(self) -> Screen[Any]: ...  # the screen on top

    def notify(self, message: str, **how: Any) -> None: ...  # App.notify: title, severity, markup, timeout

    def run_worker(self, work: Any, **how: Any) -> Worker[Any]: ...  # App.run_worker: name, group, exclusive

    def push_screen(self, screen: Screen[Any], callback: Callable[[Any], None] | None = None) -> Any: ...

    def select(self, rid: str | None) -> None: ...


class RunLauncher(Protocol):
    """What deciding asks of the run actions (:class:`~tether.tui.run_actions.RunActions` is one)."""

    @property
    def sink(self) -> Callable[[Event], None]: ...  # the event sink of the runs this console drives

    def launch(self, rid: str, op: Callable[[CancelSignal], Awaitable[Outcome]], *,
               deciding: str | None = None) -> Worker[Any]: ...

    async def control(self, rid: str, op: Callable[[], Awaitable[ControlReply | None]],
                      what: str) -> ControlReply | None: ...

    def refused(self, what: str) -> bool: ...  # this console may only watch the store: said, and True


class DecisionActions:
    """Approve, reject, edit, the rules and the record, for one console."""

    def __init__(self, host: DecisionsHost, harness: Harness, model: ConsoleModel, options: ConsoleOptions,
                 runs: RunLauncher, *, config: Config | None, trace_path: Callable[[str], Path | None]) -> None:
        """``config``: the agent file; ``trace_path``: where a run's trace is read (an ACP
        call's ask not seen yet is in it)."""
        self.host = host
        self.harness = harness
        self.model = model
        self.options = options
        self.runs = runs
        self.config = config
        self.trace_path = trace_path

    def approve_run(self, rid: str, note: str = "", call_id: str | None = None, args: str | None = None) -> Worker[Any]:
        """Approve the call of a run nobody holds: this console takes the run and goes on with it.
        ``args``: the operator's edited arguments (JSON)."""
        return self._adopt(rid, ControlRequest("approve", note, call_id=call_id, by=self.model.operator, args=args))

    def reject_run(self, rid: str, reason: str = "", call_id: str | None = None) -> Worker[Any]:
        return self._adopt(rid, ControlRequest("reject", reason, call_id=call_id, by=self.model.operator))

    def _adopt(self, rid: str, request: ControlRequest) -> Worker[Any]:
        """This console takes the run nobody holds, decides, and goes on with it
        (:func:`tether.actions.adopting.adopt`)."""
        return self.runs.launch(rid, lambda sig: adopting.adopt(self.harness, rid, request, signal=sig,
                                                                sinks=[self.runs.sink]),
                                deciding=request.call_id or "")

    def _here(self, rid: str, request: ControlRequest) -> Worker[Any]:
        if request.kind == "approve":
            return self.approve_run(rid, request.text, call_id=request.call_id, args=request.args)
        return self.reject_run(rid, request.text, call_id=request.call_id)

    def deliver_decision(self, rid: str, verdict: str, text: str = "", call_id: str | None = None,
                         option: str | None = None, args: str | None = None, scope: str | None = None) -> Worker[Any]:
        """Decide ``call_id`` the way every front does (:func:`tether.actions.control.deliver`):
        handed to whoever holds ``rid`` waiting for it (another process, this one for an ACP run
        it drives, a queue worker's workflow), or, when nobody does, made here: this console
        goes on with the run. ``option``: the ACP agent's option to answer with (None: allow
        once, or reject once); ``args``: edited arguments; ``scope``: for an "always" option,
        the scope of the rule Tether keeps of it."""
        kind = "approve" if verdict in ("approve", "approved") else "reject"
        request = ControlRequest(kind, text, call_id=call_id, by=self.model.operator, option=option, args=args,
                                 scope=scope)
        return self._deliver(rid, request, self._here)

    def _deliver(self, rid: str, request: ControlRequest, here: Callable[[str, ControlRequest], object]) -> Worker[Any]:
        return self.host.run_worker(self.runs.control(rid, self._delivery(rid, request, here), _verb(request)),
                                    name=f"decide {rid}", group="control", exit_on_error=False)

    def _delivery(self, rid: str, request: ControlRequest,
                  here: Callable[[str, ControlRequest], object]) -> Callable[[], Awaitable[ControlReply | None]]:
        """Hand ``request`` to whoever holds ``rid`` waiting for it (its reply is shown); ``here``
        takes the run in this console when nobody does."""
        async def deliver() -> ControlReply | None:
            request_as = replace(request, account=await self.harness.account(rule=request.rule))
            reply = await control.deliver(self.harness.store, rid, request_as)
            if reply is None:
                here(rid, request_as)
            return reply

        return deliver

    def approve(self) -> None:
        """``a``: the approve dialog on the selected run's waiting call."""
        self._decide(ApproveDialog, "approve")

    def reject(self) -> None:
        """``r``: the reject dialog on the selected run's waiting call."""
        self._decide(RejectDialog, "reject")

    def _decide(self, dialog: Callable[..., Screen[Any]], verdict: str) -> None:
        """Open ``dialog`` on the selected run's waiting call; apply the note or reason it
        returns (with edited arguments, or a rule to save that decides it): delivered to
        the process waiting for it, or here."""
        rid = self.model.selected
        what = "Approve" if verdict == "approve" else "Reject"
        if not rid or not self.model.can_decide(rid) or self.runs.refused(what):
            return
        waiting = self.model.states[rid].interruption
        if not isinstance(waiting, NeedsApproval):
            return
        ask = self.model.ask_of(rid, waiting.call_id)
        if ask is None and is_acp(self.model.states[rid]):  # not seen yet: its trace has it
            path = self.trace_path(rid)
            if path is not None:
                self.model.take_history(rid, tail_records(path))
                ask = self.model.ask_of(rid, waiting.call_id)

        def done(answer: DecisionAnswer | str | None) -> None:
            if answer is None or not self.model.can_decide(rid):
                return
            if isinstance(answer, DecisionAnswer) and answer.rule is not None:
                self.host.run_worker(self._rule_decides(rid, waiting, answer.rule, answer.option), name=f"rule {rid}",
                                     group="control", exit_on_error=False)
                return
            if isinstance(answer, DecisionAnswer):
                self.deliver_decision(rid, "approve" if answer.args is not None else verdict, answer.text,
                                      waiting.call_id, option=answer.option, args=answer.args, scope=answer.scope)
            else:
                self.deliver_decision(rid, verdict, answer, waiting.call_id)

        self.host.push_screen(dialog(rid, waiting, grace_s=self.options.grace_s, ask=ask,
                                     acp=agents_own_call(self.model.states[rid]), rules=self.rule_context(rid)), done)

    def edit(self) -> None:
        """Approve the selected run's waiting call with edited arguments (``e``)."""
        rid = self.model.selected
        if not rid or not self.model.can_decide(rid) or self.runs.refused("Edit and approve"):
            return
        waiting = self.model.states[rid].interruption
        if not isinstance(waiting, NeedsApproval):
            return
        if agents_own_call(self.model.states[rid]):
            self.host.notify(ACP_NO_EDIT, title="Edit and approve: refused", severity="warning", markup=False,
                             timeout=10)
            return

        def done(answer: tuple[str, str | None] | None) -> None:
            if answer is not None and self.model.can_decide(rid):
                note, args = answer
                self.deliver_decision(rid, "approve", note, waiting.call_id, args=args)

        self.host.push_screen(ArgsEditor(rid, waiting), done)

    # ---- standing rules and the record of decisions (tether.approvals) ------------------------------
    def rule_context(self, rid: str | None = None) -> RuleContext:
        """What the rule editor checks a rule against: the tools of ``rid``'s agent (none
        known for an ACP agent, whose tools are its own), and the agents known here."""
        st = self.model.states.get(rid) if rid else None
        agents = set(self.config.names if self.config is not None else ())
        agents |= set(known_agents(self.harness.agent_sets))
        agents |= {s.agent.name for s in self.model.states.values() if s.agent is not None}
        tools = None
        if st is not None and not is_acp(st):
            with contextlib.suppress(Exception):  # an agent that cannot be rebuilt: no warning about tools
                tools = {t.name: t.parameters for t in self.harness.agent_of(st).tool_list}
        agent = (st.agent.name if st.agent is not None else st.model) if st is not None else None
        return RuleContext(self.model.operator, tools, tuple(sorted(agents)), run_id=rid if st is not None else None,
                           agent=agent)

    async def _save_rule(self, checked: Checked) -> Rule | None:
        """Keep ``checked``'s rule on the store, and say so (with its warnings); None when the
        store refused it (said in words)."""
        store = self.harness.store
        try:
            rule = await call(store, store.rule_add, checked.rule)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.host.notify(one_line(exc, 400), title="the rule was not saved", severity="error", markup=False,
                             timeout=15)
            return None
        words = f"rule {rule.id}: {rule.describe()} ({rule.reason})"
        if checked.warnings:
            words += "\n" + "\n".join(f"warning: {w}" for w in checked.warnings)
        self.host.notify(words, title=f"rule {rule.id} saved",
                         severity="warning" if checked.warnings else "information",
                         markup=False, timeout=15)
        await self.reload_rules()
        return rule

    async def _rule_decides(self, rid: str, waiting: NeedsApproval, checked: Checked, option: str | None) -> None:
        """Save the rule made from ``waiting``'s call, then let it decide that call, by the
        same path as a person's decision, recorded as ``rule R4``."""
        rule = await self._save_rule(checked)
        if rule is None:
            return
        st = self.model.states.get(rid)
        refused = None if st is None else decides_now(rule, st, waiting)
        if refused is not None:
            self.host.notify(refused, title=f"{one_line(rid, 60)}", severity="warning", markup=False, timeout=15)
            return
        if not self.model.can_decide(rid):
            return
        verdict, by = ("approve" if rule.effect == "allow" else "reject"), f"rule {rule.id}"
        request = ControlRequest(verdict, rule.reason, call_id=waiting.call_id, by=by, rule=rule.id, option=option)

        def here(rid: str, _: ControlRequest) -> None:  # nobody holds it: this console's loop reads the store's rules
            self.runs.launch(rid, lambda sig: self.harness.run(rid, signal=sig, sinks=[self.runs.sink]),
                             deciding=waiting.call_id)

        await self.runs.control(rid, self._delivery(rid, request, here), _verb(request))

    def show_rules(self) -> None:
        """``L``: the rules screen, with the store's rules."""
        if not isinstance(self.host.screen, RulesScreen):
            self.host.push_screen(RulesScreen())
            self.host.run_worker(self.reload_rules(), name="rules", group="rules", exclusive=True, exit_on_error=False)

    async def reload_rules(self) -> None:
        """The store's rules onto the rules screen, when it is up."""
        screen = self.host.screen
        if not isinstance(screen, RulesScreen):
            return
        store = self.harness.store
        try:
            rules = await call(store, store.rules)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.host.notify(one_line(exc, 400), title="the rules could not be read", severity="error", markup=False)
            return
        if screen.is_attached:
            screen.show(rules)

    def add_rule(self) -> None:
        """The rules screen's Add: the rule editor, then the rule saved."""
        if self.runs.refused("Add a rule"):
            return

        def done(checked: Checked | None) -> None:
            if checked is not None:
                self.host.run_worker(self._save_rule(checked), name="add rule", group="control", exit_on_error=False)

        self.host.push_screen(RuleEditor(self.rule_context()), done)

    def remove_rule(self, rule: Rule) -> None:
        """The rules screen's Remove: asks first, then the rule removed."""
        if self.runs.refused("Remove a rule"):
            return

        def done(yes: bool | None) -> None:
            if yes:
                self.host.run_worker(self._rule_removed(rule.id), name="remove rule", group="control",
                                     exit_on_error=False)

        self.host.push_screen(ConfirmDialog(f"Remove rule {rule.id}?", f"{rule.describe()} ({rule.reason}; {rule.by})"),
                              done)

    async def _rule_removed(self, rule_id: str) -> None:
        store = self.harness.store
        try:
            rule = await call(store, store.rule_remove, rule_id)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.host.notify(one_line(exc, 400), title=f"rule {rule_id} was not removed", severity="error",
                             markup=False)
            return
        self.host.notify(f"{rule.describe()} ({rule.reason})", title=f"rule {rule.id} removed", markup=False)
        await self.reload_rules()

    def show_decisions(self) -> None:
        """``D``: the record of decisions (it asks for its decisions when it mounts)."""
        if not isinstance(self.host.screen, DecisionsScreen):
            self.host.push_screen(DecisionsScreen())  # it asks for its decisions when it mounts

    def decisions_asked(self, query: DecisionQuery) -> None:
        """The record's screen asked for the decisions ``query`` finds."""
        self.host.run_worker(self._load_decisions(query), name="decisions", group="decisions", exclusive=True,
                             exit_on_error=False)

    async def _load_decisions(self, query: DecisionQuery) -> None:
        store = self.harness.store
        try:
            records = await call(store, store.decisions, query)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.host.notify(one_line(exc, 400), title="the decisions could not be read", severity="error",
                             markup=False)
            return
        screen = self.host.screen
        if isinstance(screen, DecisionsScreen):
            screen.show(records, query)

    def decision_chosen(self, run_id: str) -> None:
        """A decision chosen in the record: its run is selected, on the main screen."""
        if run_id not in self.model.states:
            self.host.notify(f"run {run_id} is not on this console's list (it may have been removed)",
                             severity="warning", markup=False)
            return
        if isinstance(self.host.screen, DecisionsScreen):
            self.host.screen.dismiss(None)
        self.host.select(run_id)


def _verb(request: ControlRequest) -> str:
    return "Approve" if request.kind == "approve" else "Reject"

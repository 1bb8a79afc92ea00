"""The console's model: what it knows about the runs on the store, and what each key can do.

Textual-free (no widget, no app, no event loop): the views read it (attributes down) and the
app changes it in answer to keys and to the event pump (messages up). What it holds:

* ``states``: every run listed. A run the console drives, one that is selected, and one that
  another process runs are full :class:`RunState` objects (kept current by the harness's live
  state, a :class:`tether.store.files.tail.JournalTail`, or a load); every other run is a *stub* made from
  its index summary (:func:`stub_state`): its header fields and its task, no transcript. The
  ids of stubs are in ``stubs``; :meth:`ConsoleModel.needs_load` says which run to load.
* ``owners``: who runs a run that another process holds or held (``Owner.alive`` from the
  run's lock), so that a run is ``running`` elsewhere, ``orphaned``, or neither.
* who drives what here (``active``: the console's workers, ``signals``), and what the views
  show besides the state (the activity of a live run, its streaming reply, the last reason).

And the rules: :meth:`can_stop`, :meth:`can_decide`, :meth:`can_resume`,
:meth:`pending_approvals`, :meth:`badge_key`, :meth:`reason`; and the operator's alerts
(:meth:`new_approvals`, :meth:`budget_crossings`), each said once.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tether.approvals.budget_ask import waits_on_budget
from tether.harness import ADHOC_AGENT
from tether.vocab.cancel import CancelSignal
from tether.vocab.events import Event
from tether.store.summary import RunSummary
from tether.vocab.state import (Cancelled, Limits, NeedsApproval, RunState, RunWorkspace, Status, interruption_from_dict)
from tether.store.owner import Owner
from tether.run.tracked import program_of
from tether.tui.state.agent_notes import NOTE_KINDS, TRACKED_KINDS, AgentNotes, Ask
from tether.tui.state.rows import Pending, RunRow
from tether.tui.state.text import badge_key, one_line, stop_reason
from tether.workspaces.changes import stat_words

BUDGET_ALERTS = (0.8, 1.0)  # fractions of a run's budget at which the operator is told, once each


def stub_state(summary: RunSummary) -> RunState:
    """A run as its index summary describes it: enough for its row, its header, its badge and
    the approvals pane; no transcript but its task (and its answer, when it completed)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": summary.task}]
    if summary.answer is not None:
        messages.append({"role": "assistant", "content": summary.answer})
    try:
        interruption = interruption_from_dict(summary.interruption)
    except Exception:
        interruption = None
    try:
        status = Status(summary.status)
    except ValueError:
        status = Status.FAILED
    return RunState(run_id=summary.run_id, model=summary.model, messages=messages, turns=summary.turns,
                    prompt_tokens=summary.prompt_tokens, completion_tokens=summary.completion_tokens,
                    cost_usd=summary.cost_usd, child_cost_usd=summary.child_cost_usd,
                    per_turn_prompt_tokens=list(summary.per_turn_prompt_tokens),
                    estimated_turns=list(summary.estimated_turns), status=status, interruption=interruption,
                    error=summary.error, parent_run_id=summary.parent_run_id,
                    limits=Limits(max_turns=summary.max_turns, budget_usd=summary.budget_usd),
                    tool_runs=summary.tool_runs, created_at=summary.created_at, updated_at=summary.updated_at,
                    run_workspace=_listed_workspace(summary.workspace),
                    forked_from=dict(summary.forked_from) if summary.forked_from else None)


def _listed_workspace(listed: dict[str, Any] | None) -> RunWorkspace | None:
    """The part of a run's workspace its summary keeps (where it is, its change counts): enough
    for its row; the Changes pane waits for the run in full (its base commit, its side folder)."""
    if not listed:
        return None
    try:
        return RunWorkspace(**{k: v for k, v in listed.items() if k in RunWorkspace.__dataclass_fields__})
    except TypeError:
        return None


def changed_words(state: RunState) -> str:
    """``+12 −3 in 4 files`` for a run with a workspace of its own whose changes were read
    ("" for one without, or not read yet)."""
    ws = state.run_workspace
    if ws is None or not ws.changes or ws.stage == "discarded":
        return ""
    return stat_words(ws.changes.get("files", 0), ws.changes.get("added", 0), ws.changes.get("deleted", 0))


def lineage_words(state: RunState) -> str:
    """``fork of RUN@3`` for a run ``tether fork`` made from RUN's checkpoint 3 ("" otherwise)."""
    origin = state.forked_from
    return f"fork of {origin.get('run_id')}@{origin.get('step')}" if origin else ""


def agent_label(state: RunState) -> str:
    """What a run is listed as: its agent's name, or its model for a demo scenario (the
    scenario; a subagent's script) and for a run made from a model alone (``--base-url``)."""
    ref = state.agent
    if ref is None or ref.source == "demo" or (ref.name == ADHOC_AGENT and ref.source == "library"):
        return state.model
    return ref.name


def is_acp(state: RunState | None) -> bool:
    """A run of an agent that speaks ACP: its own process drives its turns, and holds the
    run while it waits for a decision (its agent's spec has ``acp``)."""
    return state is not None and state.of_acp_agent


def agents_own_call(state: RunState | None) -> bool:
    """An ACP agent's run waiting on its agent's own call, whose arguments cannot be edited
    (not on a fleet budget's call, whose amount can be: tether.approvals.budget_ask)."""
    return is_acp(state) and not (state is not None and waits_on_budget(state))


def count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def age(seconds: float) -> str:
    """``4 s``, ``3 min``, ``2 h``: how long ago, in the largest whole unit."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.0f} h"


def _has_ask(record: Any) -> bool:
    get = record.get if isinstance(record, dict) else lambda name: getattr(record, name, None)
    return bool(get("options") or get("diff"))


@dataclass(frozen=True)
class QueueInfo:
    """The run queue of the store's workers, as the console shows it."""

    depth: int  # runs waiting for a worker
    queued: frozenset[str] = frozenset()  # their ids
    executors: Mapping[str, str] = field(default_factory=dict)  # run id -> the worker (executor id) running it


class ConsoleModel:
    """The runs a console knows, what it does with them, and what each key can do."""

    def __init__(self, *, driving: Mapping[str, RunState] | None = None, operator: str = "operator") -> None:
        self.driving: Mapping[str, RunState] = driving if driving is not None else {}
        """The runs this process's harness drives now (its ``live``), the console's own or not."""
        self.operator = operator
        self.states: dict[str, RunState] = {}
        self.stubs: set[str] = set()
        self.owners: dict[str, Owner] = {}
        self.signals: dict[str, CancelSignal] = {}
        self.active: dict[str, Any] = {}  # run id -> the console's worker driving it
        self.ours: set[str] = set()  # runs this process has driven (their events came from the sink)
        self.worker_errors: dict[str, str] = {}
        self.last_reason: dict[str, str] = {}
        self.activity: dict[str, str] = {}
        self.streaming: dict[str, str] = {}  # the reply streaming in, per run
        self.speed: dict[str, tuple[float | None, float | None]] = {}  # last streamed turn: ttft ms, tok/s
        self.load_problems: dict[str, str] = {}
        self.selected: str | None = None
        self.stopping: set[str] = set()  # runs of other processes a Stop was sent to, not yet answered
        self.refusal: str | None = None  # why this console may only watch (a read-only role), in words
        self.queue: QueueInfo | None = None  # the workers' queue, on a store that has one
        self.agent_notes: dict[str, AgentNotes] = {}  # what ACP agents said beside their transcripts
        self._order: list[str] | None = None
        self._summary_keys: dict[str, tuple[int, int, int]] = {}
        # alerts said once
        self._alerted_approvals: set[tuple[str, str]] = set()
        self._budget_level: dict[str, float] = {}

    # ---- what the store says --------------------------------------------------------------
    def list_summaries(self, summaries: Iterable[RunSummary]) -> None:
        """Take the store's listing: a stub per run not already known in full; owners of the
        runs saved as running. What is there now is not alerted on later."""
        keys = self._summary_keys
        for summary in summaries:
            rid = summary.run_id
            if summary.owner is not None:
                self.owners[rid] = summary.owner
            if rid in self.states and (rid not in self.stubs or keys.get(rid) == summary.key):
                continue  # known in full, or listed from the same journal
            self.states[rid] = stub_state(summary)
            self.stubs.add(rid)
            keys[rid] = summary.key
        self.seed_alerts()

    def put_state(self, state: RunState) -> bool:
        """A run's full state (a load, a tail); True when the run is new to the list."""
        rid = state.run_id
        new = rid not in self.states
        self.states[rid] = state
        self.stubs.discard(rid)
        return new

    def put_summary(self, summary: RunSummary) -> bool:
        """A run's summary, for a run not known in full; True when it is new to the list."""
        rid = summary.run_id
        if summary.owner is not None:
            self.owners[rid] = summary.owner
        if rid in self.states and rid not in self.stubs:
            return False
        new = rid not in self.states
        self.states[rid] = stub_state(summary)
        self.stubs.add(rid)
        self._summary_keys[rid] = summary.key
        return new

    def set_owner(self, rid: str, owner: Owner | None) -> bool:
        """Who holds ``rid`` now; True when its liveness changed."""
        before = self.held_elsewhere(rid)
        if owner is None:
            self.owners.pop(rid, None)
        else:
            self.owners[rid] = owner
        if self.held_elsewhere(rid):
            self.ours.discard(rid)  # another process drives it now: its events come from the store
        else:
            self.stopping.discard(rid)
        return before != self.held_elsewhere(rid)

    def needs_load(self, rid: str) -> bool:
        return rid in self.stubs

    # ---- who runs what ----------------------------------------------------------------------
    def is_driven(self, rid: str) -> bool:
        """Driven by this console's process (its workers, its harness)."""
        return rid in self.active or rid in self.driving

    def held_elsewhere(self, rid: str) -> bool:
        """Held by another process, alive (its run's lock is taken)."""
        if self.is_driven(rid):
            return False
        owner = self.owners.get(rid)
        return owner is not None and owner.alive

    def is_live(self, rid: str) -> bool:
        """Some live process drives the run: this one or another."""
        return self.is_driven(rid) or self.held_elsewhere(rid)

    def is_orphaned(self, rid: str) -> bool:
        st = self.states.get(rid)
        return st is not None and st.status is Status.RUNNING and not self.is_live(rid) and not self.is_queued(rid)

    def is_queued(self, rid: str) -> bool:
        """Waiting in the workers' queue, or a worker's between two of its steps: saved as
        running, nobody holds it this instant, a worker will (the console must not adopt it)."""
        queue = self.queue
        return queue is not None and (rid in queue.queued or rid in queue.executors) and not self.is_live(rid)

    def workers_decision(self, rid: str) -> bool:
        """A worker's run waits for a decision in its workflow (no process holds it meanwhile)."""
        st = self.states.get(rid)
        return (self.queue is not None and rid in self.queue.executors and not self.is_live(rid)
                and st is not None and st.status is Status.INTERRUPTED and isinstance(st.interruption, NeedsApproval))

    def runner(self, rid: str) -> str:
        """Who runs a run another process holds, in a few words: the worker, else pid@host."""
        if not self.held_elsewhere(rid):
            return ""
        executor = self.queue.executors.get(rid) if self.queue is not None else None
        if executor:
            return executor
        owner = self.owners.get(rid)
        return owner.where if owner is not None and owner.pid is not None else ""

    def waits_in_process(self, rid: str) -> bool:
        """Another process holds the run waiting for a decision (``--wait-for-decision``)."""
        st = self.states.get(rid)
        return (st is not None and self.held_elsewhere(rid) and st.status is Status.INTERRUPTED
                and isinstance(st.interruption, NeedsApproval))

    def waits_here(self, rid: str) -> bool:
        """A run this console drives waits for a decision while it holds it: an ACP run,
        whose agent process waits on its permission request (the decision goes to it
        through the run's control channel, as to any process that waits)."""
        st = self.states.get(rid)
        return (st is not None and self.is_driven(rid) and st.status is Status.INTERRUPTED
                and isinstance(st.interruption, NeedsApproval) and is_acp(st))

    def root_of(self, rid: str) -> str:
        seen = set()
        while rid not in seen:
            seen.add(rid)
            st = self.states.get(rid)
            parent = st.parent_run_id if st else None
            if not parent:
                return rid
            rid = parent
        return rid

    # ---- what each key can do --------------------------------------------------------------
    def can_stop(self, rid: str) -> bool:
        """This console drives the run and has not stopped it yet, or another live process
        runs it (or holds it waiting for a decision), and no Stop is on its way to it."""
        root = self.root_of(rid)
        if root in self.active:
            signal = self.signals.get(root)
            return signal is not None and not signal.cancelled
        st = self.states.get(root)
        return (st is not None and self.held_elsewhere(root) and root not in self.stopping
                and (st.status is Status.RUNNING or self.waits_in_process(root)))

    def can_decide(self, rid: str) -> bool:
        """The run waits for approval and no live process holds it, unless that process waits
        for a decision."""
        st = self.states.get(rid)
        if self.waits_here(rid):
            return True
        if st is None or self.is_driven(rid) or st.status is not Status.INTERRUPTED \
                or not isinstance(st.interruption, NeedsApproval):
            return False
        return not self.held_elsewhere(rid) or self.waits_in_process(rid)

    def can_resume(self, rid: str) -> bool:
        st = self.states.get(rid)
        if st is None or self.is_live(rid) or st.parent_run_id:
            return False
        if is_acp(st) and st.turns > 0:  # an ACP session goes on only with a follow-up (resume --message)
            return False
        if program_of(st) is not None:  # a program's loop, which Tether cannot rebuild
            return False
        if st.status in (Status.MAX_TURNS_EXCEEDED, Status.BUDGET_EXCEEDED):
            return True
        if st.status is Status.INTERRUPTED:
            return not isinstance(st.interruption, NeedsApproval)
        # orphaned: saved as running, and nobody runs it (a queued run is a worker's to start)
        return st.status is Status.RUNNING and not self.is_queued(rid)

    def can_follow_up(self, rid: str) -> bool:
        """A follow-up (``m``) goes to a run that is not running and waits for nothing: the
        harness says in words what else stands in its way (an ACP agent that cannot load its
        session, a call still waiting for its result)."""
        st = self.states.get(rid)
        if st is None or self.is_live(rid) or st.parent_run_id or self.is_queued(rid):
            return False
        return st.status is not Status.RUNNING and not isinstance(st.interruption, NeedsApproval)

    def applies(self, rid: str | None) -> tuple[bool, bool, bool]:
        """(Stop, Approve/Reject, Resume) for ``rid``."""
        if rid is None:
            return (False, False, False)
        return (self.can_stop(rid), self.can_decide(rid), self.can_resume(rid))

    # ---- derived views ------------------------------------------------------------------------
    def ordered_ids(self) -> list[str]:
        """Every run, parents before their children, oldest first. Cached: a run's place
        (its creation time, its parent) never changes, and runs are only ever added."""
        cached = self._order
        if cached is not None and len(cached) == len(self.states):
            return list(cached)
        self._order = self._ordered()
        return list(self._order)

    def _ordered(self) -> list[str]:
        states = self.states
        children: dict[str, list[str]] = {}
        roots: list[str] = []
        for rid, st in states.items():
            parent = st.parent_run_id
            if parent and parent in states:
                children.setdefault(parent, []).append(rid)
            else:
                roots.append(rid)
        key = lambda r: (states[r].created_at, r)  # noqa: E731
        out: list[str] = []

        def walk(rid: str, depth: int) -> None:
            out.append(rid)
            if depth < 8:
                for child in sorted(children.get(rid, ()), key=key):
                    walk(child, depth + 1)

        for rid in sorted(roots, key=key):
            walk(rid, 0)
        return out

    def depth(self, rid: str) -> int:
        depth, st = 0, self.states.get(rid)
        while st is not None and st.parent_run_id and st.parent_run_id in self.states and depth < 8:
            depth += 1
            st = self.states.get(st.parent_run_id)
        return depth

    def badge_key(self, rid: str) -> str:
        st = self.states[rid]
        live = self.is_live(rid)
        if st.status is Status.RUNNING and not live and not self.worker_errors.get(rid):
            return "queued" if self.is_queued(rid) else "orphaned"
        return badge_key(st, live=live, worker_error=self.worker_errors.get(rid))

    def row(self, rid: str) -> RunRow:
        st = self.states[rid]
        unknown = is_acp(st) and 0 < st.turns <= len(st.estimated_turns) and not st.cost_usd
        return RunRow(rid, self.badge_key(rid), agent_label(st), st.turns, st.limits.max_turns,
                      None if unknown else st.cost_usd, self.depth(rid), self.runner(rid), changed_words(st),
                      lineage_words(st))

    def pending_approvals(self) -> list[Pending]:
        out = []
        for rid in self.ordered_ids():
            st = self.states[rid]
            it = st.interruption
            if st.status is Status.INTERRUPTED and isinstance(it, NeedsApproval) and (
                    not self.is_driven(rid) or self.waits_here(rid)):
                tally = it.progress if it.approvers else it.tally
                out.append(Pending(rid, it.call_id, it.tool_name, it.args, it.why, tally))
        return out

    def reason(self, rid: str) -> str:
        st = self.states[rid]
        if self.is_orphaned(rid) and not self.worker_errors.get(rid):
            owner = self.owners.get(rid)
            who = f" (pid {owner.pid} on {owner.host})" if owner is not None and owner.pid is not None else ""
            return f"orphaned: the process that ran it{who} ended without stopping it (R adopts it)"
        words = stop_reason(st, live=self.is_live(rid), last_reason=self.last_reason.get(rid),
                            worker_error=self.worker_errors.get(rid))
        if isinstance(st.interruption, Cancelled) and st.interruption.by and "(by " not in words:
            words += f" (by {st.interruption.by})"
        return words

    def who_decided(self, rid: str) -> str | None:
        """Who stopped the run, or made its last decision, in words (None: nobody said)."""
        st = self.states.get(rid)
        if st is None:
            return None
        parts = []
        last = max(st.approvals.values(), key=lambda d: d.ts, default=None)
        if last is not None and last.by:
            parts.append(f"{last.verdict} by {last.by}")
        if st.status is Status.INTERRUPTED and isinstance(st.interruption, Cancelled) and st.interruption.by:
            parts.append(f"stopped by {st.interruption.by}")
        return " · ".join(parts) or None

    def owner_words(self, rid: str, now: float | None = None) -> str | None:
        """Who runs a run another process holds (pid, host, since when, heartbeat age), or
        who ran an orphan; None for the console's own runs and stopped runs."""
        if self.workers_decision(rid):
            executor = self.queue.executors.get(rid, "") if self.queue is not None else ""
            return f"waits in worker {one_line(executor, 60)}'s workflow for a decision"
        owner = self.owners.get(rid)
        if owner is None or self.is_driven(rid):
            return None
        now = time.time() if now is None else now
        if not owner.alive:
            if not self.is_orphaned(rid):
                return None
            beat = f", last heartbeat {age(now - owner.heartbeat)} ago" if owner.heartbeat else ""
            return f"ran by pid {owner.where}{beat}; nobody runs it now"
        since = f" since {time.strftime('%H:%M:%S', time.localtime(owner.since))}" if owner.since else ""
        user = f" ({owner.user})" if owner.user else ""
        beat = f" · heartbeat {age(now - owner.heartbeat)} ago" if owner.heartbeat else ""
        executor = self.queue.executors.get(rid) if self.queue is not None else None
        if executor:
            return f"run by worker {one_line(executor, 60)} (pid {owner.where}){since}{beat}"
        return f"run by pid {owner.where}{user}{since}{beat}"

    def counts(self) -> tuple[int, int]:
        """(runs, live top-level runs)."""
        running = sum(1 for r, st in self.states.items() if st.parent_run_id is None and self.is_live(r)
                      and st.status in (Status.RUNNING, Status.INTERRUPTED))
        return len(self.states), running

    def spend_today(self, now: float | None = None) -> float:
        """What today's runs (created since local midnight) spent, across the store (top-level
        runs: a parent's cost includes its children's)."""
        t = time.localtime(time.time() if now is None else now)
        midnight = time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0, 0, 0, -1))
        return sum(st.cost_usd for st in self.states.values() if st.created_at >= midnight and not st.parent_run_id)

    # ---- what a live run is doing ------------------------------------------------------------
    def note_activity(self, event: Event) -> None:
        """What a live run is doing right now, for its header (tool progress included)."""
        rid, kind = event.run_id, event.kind
        root = self.root_of(rid)
        where = "" if root == rid else f"subagent {rid[len(root) + 1:]}: "
        if kind == "tool_start":
            text = f"{where}{getattr(event, 'name', '')} running"
        elif kind == "tool_progress":
            text = f"{where}{getattr(event, 'name', '')}: {getattr(event, 'label', '')}"
        elif kind in ("turn", "tool_result", "run_started"):
            text = f"{where}asking the model" if kind != "tool_result" or where else ""
        else:
            text = ""
        for target in {rid, root}:
            if text:
                self.activity[target] = text
            else:
                self.activity.pop(target, None)
        if kind == "run_stopped":
            self.activity.pop(rid, None)
            if root != rid:
                self.activity[root] = "asking the model"

    # ---- what an ACP agent said beside its transcript ------------------------------------------
    def take_note(self, rid: str, kind: str, record: Any, index: int | None = None) -> bool:
        """A record (or an event, turned into one only when it matters) of ``rid`` that may
        make a note (:mod:`tether.tui.state.agent_notes`); True when its notes changed."""
        notes = self.agent_notes.get(rid)
        if notes is None:
            if kind not in NOTE_KINDS:
                return False
            if kind == "approval_required" and not _has_ask(record):
                return False  # Tether's own call: nothing beyond what its state says
            notes = self.agent_notes[rid] = AgentNotes()
        elif kind not in NOTE_KINDS and kind not in TRACKED_KINDS:
            return False
        return notes.take(record if isinstance(record, dict) else record.record(), index)

    def take_history(self, rid: str, records: Iterable[dict[str, Any]]) -> bool:
        """A run's trace records read back, oldest first (see :meth:`take_note`)."""
        wanted = [r for r in records if r.get("kind") in NOTE_KINDS or r.get("kind") in TRACKED_KINDS]
        if not wanted:
            return False
        if rid not in self.agent_notes:
            if not any(r.get("kind") in NOTE_KINDS and (r.get("kind") != "approval_required" or _has_ask(r))
                       for r in wanted):
                return False
            self.agent_notes[rid] = AgentNotes()
        return self.agent_notes[rid].take_history(wanted)

    def ask_of(self, rid: str, call_id: str) -> Ask | None:
        """The agent's options and diff for its pending permission request (None: unknown,
        or Tether's own call)."""
        notes = self.agent_notes.get(rid)
        return notes.asks.get(call_id) if notes is not None else None

    # ---- alerts, each said once ----------------------------------------------------------------
    def seed_alerts(self) -> None:
        """What is pending or spent now is known: only what comes later is alerted."""
        for p in self.pending_approvals():
            self._alerted_approvals.add((p.run_id, p.call_id))
        for rid, st in self.states.items():
            if rid not in self._budget_level:
                self._budget_level[rid] = self._level(st)

    def new_approvals(self) -> list[Pending]:
        """Calls waiting for approval not alerted on before (each said once)."""
        out = []
        for p in self.pending_approvals():
            key = (p.run_id, p.call_id)
            if key not in self._alerted_approvals:
                self._alerted_approvals.add(key)
                out.append(p)
        return out

    def budget_crossings(self, rids: Iterable[str]) -> list[tuple[str, float, RunState]]:
        """(run, fraction, state) for each of ``rids`` that crossed 80 % or 100 % of its budget
        since last asked; each level is said once per run (both, when one update crossed both)."""
        out = []
        for rid in rids:
            st = self.states.get(rid)
            if st is None:
                continue
            level = self._level(st)
            before = self._budget_level.get(rid, 0.0)
            if level > before:
                self._budget_level[rid] = level
                out.extend((rid, f, st) for f in BUDGET_ALERTS if before < f <= level)
        return out

    @staticmethod
    def _level(st: RunState) -> float:
        budget = st.limits.budget_usd
        if not budget:
            return 0.0
        crossed = [f for f in BUDGET_ALERTS if st.cost_usd >= budget * f]
        return max(crossed, default=0.0)

"""What is worth a notification, read from what runs write to the store.

The runs' traces say it as it happens, whatever a run's source (Tether's loop, an ACP
agent, a program through the run API): ``approval_required`` (a call waits for people),
``approval_escalated`` (its deadline passed with ``escalate``: someone else is asked),
``turn`` (the run's cost, against its budget: 80 % and 100 %), ``run_stopped``
(``failed``, ``completed``). An *orphaned* run writes nothing (its process died): the
runs seen running are asked whether a process still holds them, every few seconds.

Each :class:`Notice` has a key that names the happening once (run, call and what
happened; a stop by its trace ``seq``; a budget level with the budget it is of), which
the sender's ledger is keyed by: a notice found twice (a restart's catch-up, a run asked
again) is sent once.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from tether.store.protocol import Store
from tether.vocab.state import StateError, args_hash
from tether.vocab.wording import one_line

log = logging.getLogger(__name__)

BUDGET_LEVELS = (80, 100)
"""Percentages of a run's budget that are worth a notice, once each (as the console's)."""
ARGS_SHOWN = 200


@dataclass(frozen=True, slots=True)
class Notice:
    """One happening worth a notification (see the module)."""

    event: str
    """``approval``, ``budget``, ``failed``, ``orphaned`` or ``completed``."""
    key: str
    run_id: str
    ts: float
    title: str
    words: str
    agent: str | None = None
    task: str = ""
    tool: str | None = None
    call_id: str | None = None
    args: str | None = None
    """The call's arguments, cut to :data:`ARGS_SHOWN` characters."""
    args_hash: str | None = None
    escalated: bool = False
    level: int | None = None
    cost_usd: float | None = None
    budget_usd: float | None = None
    status: str | None = None
    reason: str | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Notice:
        data = json.loads(text)
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass(slots=True)
class _Run:
    agent: str | None = None
    task: str = ""
    budget_usd: float | None = None
    levels: set[int] = field(default_factory=set)
    asked: dict[str, str] = field(default_factory=dict)  # call id -> its raw arguments


def _waits(summary: Any) -> bool:
    """A call of the run waits for a person: a stopped run's, or one its live process holds
    (an ACP agent's request, a program's call on the run API)."""
    return (summary.interruption or {}).get("type") == "approval" and summary.status in ("interrupted", "running")


def _who(run: _Run, run_id: str) -> str:
    return f"{run.agent} ({run_id})" if run.agent else run_id


class Detector:
    """Notices from trace records, run by run; keeps what it learnt of each run (its agent,
    budget, the calls it asked) and which runs it saw running. Its calls read the store:
    call them off the event loop."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.runs: dict[str, _Run] = {}
        self.running: set[str] = set()
        self.deadlines: dict[tuple[str, str], float] = {}
        """When each waiting call's decision deadline passes, (run, call) -> time."""

    def run(self, run_id: str, *, fresh: bool = False) -> _Run:
        known = self.runs.get(run_id)
        if known is not None and not fresh:
            return known
        run = known or _Run()
        try:
            summary = self.store.summary(run_id)
        except StateError:
            self.runs[run_id] = run
            return run
        run.agent, run.task, run.budget_usd = summary.agent, summary.task or "", summary.budget_usd
        self.runs[run_id] = run
        return run

    def records(self, run_id: str, records: list[dict[str, Any]]) -> list[Notice]:
        out: list[Notice] = []
        for record in records:
            notice = self._one(run_id, record)
            if notice is not None:
                out.append(notice)
        return out

    def _one(self, run_id: str, record: dict[str, Any]) -> Notice | None:
        kind = record.get("kind")
        ts = float(record.get("ts") or time.time())
        if kind == "run_started":
            self._forget_deadlines(run_id)  # going on: its calls were decided
            self.running.add(run_id)
            run = self.run(run_id, fresh=True)  # a resume may raise the budget
            if record.get("agent") and not run.agent:
                run.agent = str(record["agent"])
            return None
        if kind == "approval_required":
            run = self.run(run_id)
            call_id, args = str(record.get("call_id") or ""), str(record.get("args") or "")
            run.asked[call_id] = args
            self._deadline(run_id, call_id, record.get("deadline_at"))
            return self.approval(run_id, call_id, str(record.get("tool") or ""), args, str(record.get("why") or ""),
                                 ts, approved=len(record.get("approvers") or ()))
        if kind == "approval_escalated":
            run = self.run(run_id)
            call_id = str(record.get("call_id") or "")
            self._deadline(run_id, call_id, record.get("deadline_at"))
            args = run.asked.get(call_id)
            if args is None:
                args = self._waiting_args(run_id, call_id) or ""
            return self.approval(run_id, call_id, str(record.get("tool") or ""), args,
                                 "no decision in time: escalated", ts, escalated=True)
        if kind == "turn":
            return self._budget(run_id, record, ts)
        if kind == "fleet_budget":  # keyed by the budget's period: once for all its runs and processes
            run = self.run(run_id)
            level = int(record.get("level") or 0)
            return Notice("budget", f"fleet:{record.get('period')}:{level}", run_id, ts,
                          f"Fleet budget {level} %: {record.get('budget')}", str(record.get("words") or ""),
                          agent=run.agent, task=run.task, level=level, cost_usd=record.get("spent_usd"),
                          budget_usd=record.get("usd"))
        if kind == "run_stopped":
            self.running.discard(run_id)
            if record.get("status") != "interrupted":
                self._forget_deadlines(run_id)
            status = str(record.get("status") or "")
            if status not in ("failed", "completed"):
                return None
            run = self.run(run_id, fresh=True)
            reason = one_line(record.get("reason") or "", 300)
            if status == "failed":
                title, words = f"Run failed: {_who(run, run_id)}", f"{_who(run, run_id)} failed: {reason}"
            else:
                title, words = f"Run completed: {_who(run, run_id)}", f"{_who(run, run_id)} completed"
            return Notice(status, f"{run_id}:{status}:{record.get('seq')}", run_id, ts, title, words,
                          agent=run.agent, task=run.task, status=status, reason=reason,
                          cost_usd=record.get("cost_usd"))
        return None

    def approval(self, run_id: str, call_id: str, tool: str, args: str, why: str, ts: float, *,
                 escalated: bool = False, approved: int = 0) -> Notice:
        """``approved``: how many of the people a two-person call needs have approved it; a
        call asked again after one of them is a new notice (the first one's link is spent)."""
        run = self.run(run_id)
        shown = one_line(args, ARGS_SHOWN)
        step = "escalated" if escalated else f"approval+{approved}" if approved else "approval"
        title = f"{'Escalated: ' if escalated else ''}Approval needed: {tool}"
        words = f"{_who(run, run_id)} wants {tool}({shown})" + (f": {one_line(why, 200)}" if why else "")
        return Notice("approval", f"{run_id}:{call_id}:{step}", run_id, ts, title, words, agent=run.agent,
                      task=run.task, tool=tool, call_id=call_id, args=shown, args_hash=args_hash(args),
                      escalated=escalated, reason=why or None)

    def pending(self, summary: Any) -> Notice | None:
        """The approval a run waits for now (from its summary), as a notice."""
        waiting = summary.interruption or {}
        if not _waits(summary) or not waiting.get("callId"):
            return None
        run = self.run(summary.run_id)
        run.asked[str(waiting["callId"])] = str(waiting.get("args") or "")
        self._deadline(summary.run_id, str(waiting["callId"]), waiting.get("deadlineAt"))
        return self.approval(summary.run_id, str(waiting["callId"]), str(waiting.get("toolName") or ""),
                             str(waiting.get("args") or ""), str(waiting.get("why") or ""),
                             float(waiting.get("askedAt") or summary.updated_at or time.time()),
                             escalated=bool(waiting.get("escalated")), approved=len(waiting.get("approvers") or ()))

    def _deadline(self, run_id: str, call_id: str, at: Any) -> None:
        if isinstance(at, (int, float)) and not isinstance(at, bool):
            self.deadlines[(run_id, call_id)] = float(at)

    def _forget_deadlines(self, run_id: str) -> None:
        for key in [k for k in self.deadlines if k[0] == run_id]:
            del self.deadlines[key]

    def due(self, now: float) -> bool:
        """Whether a waiting call's deadline has passed (each is answered once: forgotten
        here, and an escalation's record brings its next deadline back)."""
        passed = [key for key, at in self.deadlines.items() if at <= now]
        for key in passed:
            del self.deadlines[key]
        return bool(passed)

    def still_waits(self, notice: Notice) -> bool:
        """Whether the call of an approval notice still waits (a notice left unsent by a
        sender that ended may be about a call decided since)."""
        if notice.event != "approval":
            return True
        try:
            summary = self.store.summary(notice.run_id)
        except StateError:
            return False
        return _waits(summary) and (summary.interruption or {}).get("callId") == notice.call_id

    def _waiting_args(self, run_id: str, call_id: str) -> str | None:
        try:
            waiting = self.store.summary(run_id).interruption or {}
        except StateError:
            return None
        return str(waiting.get("args") or "") if waiting.get("callId") == call_id else None

    def _budget(self, run_id: str, record: dict[str, Any], ts: float) -> Notice | None:
        run = self.run(run_id)
        cost = record.get("cost_usd")
        if not run.budget_usd or not isinstance(cost, (int, float)):
            return None
        crossed = [level for level in BUDGET_LEVELS if cost >= run.budget_usd * level / 100]
        if not crossed or max(crossed) in run.levels:
            return None
        level = max(crossed)
        run.levels.update(crossed)
        title = f"Budget {level} %: {_who(run, run_id)}"
        words = f"{_who(run, run_id)} has spent ${cost:.4f} of its ${run.budget_usd:g} budget ({level} %)"
        return Notice("budget", f"{run_id}:budget:{level}:{run.budget_usd:g}", run_id, ts, title, words,
                      agent=run.agent, task=run.task, level=level, cost_usd=float(cost), budget_usd=run.budget_usd)

    def orphaned(self, summary: Any) -> Notice:
        run = self.run(summary.run_id)
        self.running.discard(summary.run_id)
        who = _who(run, summary.run_id)
        return Notice("orphaned", f"{summary.run_id}:orphaned:{summary.updated_at:.3f}", summary.run_id, time.time(),
                      f"Run orphaned: {who}", f"{who} is orphaned: its process ended without stopping it; "
                      f"tether resume {summary.run_id} goes on from its last step", agent=run.agent, task=run.task)

    def orphans(self) -> list[Notice]:
        """The runs seen running that no process holds any more."""
        out: list[Notice] = []
        for run_id in sorted(self.running):
            try:
                summary = self.store.summary(run_id)
            except StateError:
                self.running.discard(run_id)
                continue
            if summary.liveness == "orphaned":
                out.append(self.orphaned(summary))
            elif summary.status != "running":
                self.running.discard(run_id)
        return out

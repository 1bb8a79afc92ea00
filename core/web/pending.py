"""Every call on the store that waits for a person, as the approvals page shows it.

Read from the store's summaries alone (one listing, not a replay of each run): a run's
summary carries its waiting call whole (tool, arguments, preview, approvers, deadline),
whatever its source (Tether's loop, an ACP agent, a program on the run API). Deadlines
that passed on calls nobody is there to answer are applied first, as ``tether runs`` does.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

from tether.store.protocol import Store
from tether.vocab.preview import Preview
from tether.store.summary import RunSummary
from tether.vocab.state import NeedsApproval, StateError, args_hash, interruption_from_dict
from tether.actions.deadlines import apply_due

log = logging.getLogger(__name__)
SOURCES = {"tether": "Tether", "acp": "ACP agent", "openai-agents": "openai-agents", "pydantic-ai": "pydantic-ai",
           "claude-code": "Claude Code", "program": "a program"}


@dataclass(frozen=True, slots=True)
class Card:
    """One waiting call, with what a person needs to decide it."""

    run_id: str
    agent: str
    source: str
    task: str
    waiting: NeedsApproval
    since: float
    cost_usd: float

    @property
    def call_id(self) -> str:
        return self.waiting.call_id

    @property
    def tool(self) -> str:
        return self.waiting.tool_name

    @property
    def bound_hash(self) -> str:
        """The hash decisions are bound to (:func:`tether.vocab.state.args_hash`): a form carries it
        back, so a call whose arguments changed since the page was drawn is not decided."""
        return args_hash(self.waiting.args)

    @property
    def args_shown(self) -> str:
        """The arguments, indented when they are JSON (wrapped by the page, never scrolled)."""
        try:
            return json.dumps(json.loads(self.waiting.args or "{}"), indent=2, ensure_ascii=False)
        except ValueError:
            return self.waiting.args

    @property
    def source_shown(self) -> str:
        return SOURCES.get(self.source, self.source)

    @property
    def preview(self) -> Preview | None:
        return Preview.from_dict(self.waiting.preview) if self.waiting.preview else None

    @property
    def tally(self) -> str:
        """``1 of 2 approved (ana)`` for a call that needs two people; else empty."""
        return self.waiting.progress

    def waited(self, now: float | None = None) -> str:
        return duration((time.time() if now is None else now) - self.since)

    def deadline(self, now: float | None = None) -> str:
        """``rejects in 4m`` (what the deadline does, and when), or empty."""
        w = self.waiting
        if w.deadline_at is None:
            return ""
        left = w.deadline_at - (time.time() if now is None else now)
        what = {"reject": "rejects", "stop": "stops the run", "escalate": "escalates"}.get(w.on_deadline, w.on_deadline)
        return f"{what} in {duration(left)}" if left > 0 else f"deadline passed ({what})"


def waits(summary: RunSummary) -> bool:
    return (summary.interruption or {}).get("type") == NeedsApproval.type and summary.status in ("interrupted",
                                                                                                "running")


def card_of(summary: RunSummary) -> Card | None:
    try:
        waiting = interruption_from_dict(summary.interruption)
    except StateError:
        return None
    if not isinstance(waiting, NeedsApproval):
        return None
    return Card(summary.run_id, summary.agent or summary.model, summary.source, summary.task, waiting,
                waiting.asked_at or summary.updated_at, summary.cost_usd)


def pending_cards(store: Store, *, now: float | None = None, apply_deadlines: bool = True) -> list[Card]:
    """Every waiting call on ``store``, newest first (blocking: call it in a worker thread).
    ``apply_deadlines``: apply the passed deadlines of calls nobody holds first (not with a
    role that may only watch)."""
    now = time.time() if now is None else now
    summaries = [s for s in store.summaries(live_only=True) if waits(s)]
    if apply_deadlines and any((s.interruption or {}).get("deadlineAt", now + 1) <= now
                               and not (s.owner is not None and s.owner.alive) for s in summaries):
        try:
            apply_due(store, now=now)
        except Exception as exc:  # the page still shows the calls; the deadline is applied by the next reader
            log.warning("could not apply the passed deadlines on %s: %s", store.where, exc)
        summaries = [s for s in store.summaries(live_only=True) if waits(s)]
    cards = [c for c in map(card_of, summaries) if c is not None]
    cards.sort(key=lambda c: c.since, reverse=True)
    return cards


def duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m {seconds % 60:02d}s" if seconds < 600 else f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h {seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d {seconds % 86400 // 3600}h"

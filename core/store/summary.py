"""A run's summary: what a listing shows of a run without reading its transcript.

Both stores keep one per run, written with the run's saves (the file store in its SQLite
index, :mod:`tether.store.files.index`; PostgreSQL in the ``summary`` column of ``runs``), and
answer :meth:`tether.store.protocol.Store.summaries` with :class:`RunSummary` objects, so
the console, ``tether runs`` and the web pages read either store alike.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal

from tether.vocab.audit import run_source

if TYPE_CHECKING:
    from tether.vocab.state import RunState
    from tether.store.owner import Owner

TASK_CHARS = 200

Liveness = Literal["running", "orphaned", "queued"]
"""``queued``: saved as running, held by no process, and waiting in the worker queue
(PostgreSQL with ``tether worker``): a worker takes it, nobody needs to adopt it."""
JournalKey = tuple[int, int, int]  # (size, mtime_ns, inode)

SUMMARY_COLUMNS = (
    "run_id", "status", "model", "agent", "parent_run_id", "task", "turns", "cost_usd", "budget_usd", "max_turns",
    "created_at", "updated_at", "interruption", "error", "prompt_tokens", "completion_tokens", "child_cost_usd",
    "per_turn_prompt_tokens", "estimated_turns", "assumed_price", "answer", "tool_runs", "source", "workspace",
    "price", "forked_from", "operator", "journal_size", "journal_mtime_ns", "journal_ino",
)
"""The stored fields of a summary, in :class:`RunSummary`'s order (the file index's columns;
PostgreSQL keeps them as one JSON document)."""
_JSON_COLUMNS = frozenset(("interruption", "per_turn_prompt_tokens", "estimated_turns", "workspace", "forked_from"))


@dataclass(slots=True)
class RunSummary:
    """What a listing needs of a run, without its transcript.

    ``liveness`` and ``owner`` are not stored: :meth:`~tether.store.protocol.Store.summaries`
    fills them from the run's lock when the saved status is ``running``: ``"running"``
    while a process holds the run, ``"orphaned"`` when none does (its process died
    without stopping it; ``tether resume`` adopts it), None for any other status."""

    run_id: str
    status: str
    model: str
    agent: str | None = None
    parent_run_id: str | None = None
    task: str = ""
    turns: int = 0
    cost_usd: float = 0.0
    budget_usd: float | None = None
    max_turns: int | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    interruption: dict[str, Any] | None = None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    child_cost_usd: float = 0.0
    per_turn_prompt_tokens: list[int] = field(default_factory=list)
    estimated_turns: list[int] = field(default_factory=list)
    assumed_price: bool = False
    answer: str | None = None
    tool_runs: int = 0
    source: str = "tether"
    """Where the run's turns come from: ``tether``, ``acp``, or the framework of a program
    reporting through the run API (``openai-agents``, ``pydantic-ai``, ``claude-code``, ``program``)."""
    workspace: dict[str, Any] | None = None
    """The run's own workspace (:meth:`tether.vocab.state.RunWorkspace.listed`): where it is, how far it
    was made, and what the run had changed in it when its last operation ended; None without one."""
    price: str = ""
    """Where the run's price comes from (:attr:`tether.vocab.state.Pricing.source`): ``unknown`` when nobody
    prices its model, so its tokens are counted and its dollars are not (``tether costs`` says so)."""
    forked_from: dict[str, Any] | None = None
    """Its lineage when ``tether fork`` made it: ``{"run_id", "step"}`` of the run and checkpoint it
    was forked from; None otherwise."""
    operator: str | None = None
    """Who started the run: the account of the process that made it (:attr:`tether.vocab.state.RunState.operator`);
    None for a run made before that was recorded (``tether costs --by operator`` says "(unknown)")."""
    # The journal this row was read from: a row whose key differs from the journal's is stale.
    journal_size: int = -1
    journal_mtime_ns: int = -1
    journal_ino: int = -1
    liveness: Liveness | None = None
    owner: Owner | None = None

    @property
    def key(self) -> JournalKey:
        return (self.journal_size, self.journal_mtime_ns, self.journal_ino)

    @property
    def waiting(self) -> bool:
        """Interrupted by a call that needs the operator's approval."""
        return self.status == "interrupted" and (self.interruption or {}).get("type") == "approval"

    @property
    def shown_status(self) -> str:
        """The status as a listing shows it: ``orphaned`` for a running run nobody runs,
        ``queued`` for one that waits in the worker queue."""
        return self.liveness if self.liveness in ("orphaned", "queued") else self.status

    @classmethod
    def of(cls, state: RunState, key: JournalKey) -> RunSummary:
        answer = None
        if state.status == "completed":
            for message in reversed(state.messages):
                if message.get("role") == "assistant":
                    answer = message.get("content")
                    break
        task = ""
        for message in state.messages:
            if message.get("role") == "user":
                task = str(message.get("content") or "")[:TASK_CHARS]
                break
        return cls(
            run_id=state.run_id, status=state.status.value, model=state.model,
            agent=state.agent.name if state.agent is not None else None, parent_run_id=state.parent_run_id,
            task=task, turns=state.turns, cost_usd=state.cost_usd, budget_usd=state.limits.budget_usd,
            max_turns=state.limits.max_turns, created_at=state.created_at, updated_at=state.updated_at,
            interruption=None if state.interruption is None else state.interruption.to_dict(), error=state.error,
            prompt_tokens=state.prompt_tokens, completion_tokens=state.completion_tokens,
            child_cost_usd=state.child_cost_usd, per_turn_prompt_tokens=list(state.per_turn_prompt_tokens),
            estimated_turns=list(state.estimated_turns), assumed_price=state.pricing.assumed, answer=answer,
            tool_runs=state.tool_runs, source=run_source(state),
            workspace=None if state.run_workspace is None else state.run_workspace.listed(),
            price=state.pricing.source,
            forked_from=None if not state.forked_from else {"run_id": state.forked_from.get("run_id"),
                                                            "step": state.forked_from.get("step")},
            operator=state.operator,
            journal_size=key[0], journal_mtime_ns=key[1], journal_ino=key[2],
        )

    def row(self) -> tuple[Any, ...]:
        out = []
        for name in SUMMARY_COLUMNS:
            value = getattr(self, name)
            if name in _JSON_COLUMNS and value is not None:
                value = json.dumps(value, separators=(",", ":"))
            out.append(value)
        return tuple(out)

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> RunSummary:
        summary = cls(*row)
        loads = json.loads
        if summary.interruption is not None:
            summary.interruption = loads(summary.interruption)  # type: ignore[arg-type]
        summary.per_turn_prompt_tokens = loads(summary.per_turn_prompt_tokens or "[]")  # type: ignore[arg-type]
        summary.estimated_turns = loads(summary.estimated_turns or "[]")  # type: ignore[arg-type]
        if summary.workspace is not None:
            summary.workspace = loads(summary.workspace)  # type: ignore[arg-type]
        if summary.forked_from is not None:
            summary.forked_from = loads(summary.forked_from)  # type: ignore[arg-type]
        summary.assumed_price = bool(summary.assumed_price)
        return summary

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in SUMMARY_COLUMNS}
        out["liveness"] = self.liveness
        out["owner"] = None if self.owner is None else self.owner.to_dict()
        return out


assert SUMMARY_COLUMNS == tuple(f.name for f in fields(RunSummary))[:len(SUMMARY_COLUMNS)]

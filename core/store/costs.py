"""What the fleet cost, grouped (``tether costs``, the console's Costs screen, /costs): the shared
words of :meth:`tether.store.protocol.Store.costs`, which each store answers with one aggregate
query (the file store's SQLite index, PostgreSQL's runs table), never by loading every run.

``operator`` is who started the run: the account of the process that made it (the OS account on
the file store, the database role on PostgreSQL); a run made before that was recorded is in
:data:`UNKNOWN_OPERATOR`.

A run's spend here is its own (``cost_usd - child_cost_usd``): a subagent's run is a run of its
own, counted once, in its own group. A run whose model has no price (``price = "unknown"``)
adds its tokens, not dollars, and is counted in ``unknown_runs`` so that a total is never read
as complete when it is not.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from tether.store.summary import RunSummary

GroupBy = Literal["agent", "model", "source", "day", "operator"]
GROUPS: tuple[GroupBy, ...] = ("agent", "model", "source", "day", "operator")
NONE = "(none)"
UNKNOWN_OPERATOR = "(unknown)"
"""The operator of a run made before who started it was recorded."""


def missing(by: GroupBy) -> str:
    """The group of a run that has no value for ``by``."""
    return UNKNOWN_OPERATOR if by == "operator" else NONE


@dataclass(frozen=True, slots=True)
class CostQuery:
    """Which runs (made in ``[since, until)``, seconds since the epoch) and how to group them."""

    by: GroupBy = "agent"
    since: float | None = None
    until: float | None = None

    def __post_init__(self) -> None:
        if self.by not in GROUPS:
            raise ValueError(f"costs are grouped by {', '.join(GROUPS)}; not {self.by!r}")


@dataclass(slots=True)
class CostRow:
    """One group's spend: its runs, dollars, tokens, the runs nobody could price, the dearest run."""

    group: str
    runs: int
    cost_usd: float
    prompt_tokens: int
    completion_tokens: int
    unknown_runs: int
    dearest_run: str | None
    dearest_usd: float

    @property
    def per_run_usd(self) -> float:
        return self.cost_usd / self.runs if self.runs else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "cost_usd": round(self.cost_usd, 8), "dearest_usd": round(self.dearest_usd, 8),
                "per_run_usd": round(self.per_run_usd, 8)}


def day_of(created_at: float) -> str:
    return _dt.datetime.fromtimestamp(created_at, _dt.timezone.utc).strftime("%Y-%m-%d")


def ordered(rows: Iterable[CostRow], by: GroupBy) -> list[CostRow]:
    """Days in order; any other group dearest first (then by name)."""
    if by == "day":
        return sorted(rows, key=lambda r: r.group)
    return sorted(rows, key=lambda r: (-r.cost_usd, r.group))


def aggregate(summaries: Iterable[RunSummary], query: CostQuery) -> list[CostRow]:
    """The same answer from summaries in memory: a store whose index cannot be used, and the
    tests' reference for the SQL."""
    groups: dict[str, CostRow] = {}
    for s in summaries:
        if query.since is not None and s.created_at < query.since:
            continue
        if query.until is not None and s.created_at >= query.until:
            continue
        key = day_of(s.created_at) if query.by == "day" else (getattr(s, query.by) or missing(query.by))
        own = (s.cost_usd or 0.0) - (s.child_cost_usd or 0.0)
        row = groups.get(key)
        if row is None:
            row = groups[key] = CostRow(key, 0, 0.0, 0, 0, 0, None, float("-inf"))
        row.runs += 1
        row.cost_usd += own
        row.prompt_tokens += s.prompt_tokens or 0
        row.completion_tokens += s.completion_tokens or 0
        row.unknown_runs += s.price == "unknown"
        if own > row.dearest_usd:
            row.dearest_run, row.dearest_usd = s.run_id, own
    return ordered(groups.values(), query.by)


DEAREST = 10
"""How many runs the Costs screen and /costs list as the dearest."""


def dearest_of(summaries: Iterable[RunSummary], query: CostQuery, limit: int = DEAREST) -> list[RunSummary]:
    """The ``limit`` runs made in ``query``'s period that cost the most of their own, dearest
    first (then by run id): the reference for both stores' ``ORDER BY … LIMIT``."""
    chosen = [s for s in summaries if (query.since is None or s.created_at >= query.since)
              and (query.until is None or s.created_at < query.until)]
    chosen.sort(key=lambda s: (-((s.cost_usd or 0.0) - (s.child_cost_usd or 0.0)), s.run_id))
    return chosen[:limit]


def ago(seconds: float) -> str:
    """``40 s``, ``12 min``, ``5 h``, ``3 d``: a dearest run's age, in its largest whole unit."""
    seconds = max(0.0, seconds)
    for unit, size in (("d", 86_400), ("h", 3600), ("min", 60)):
        if seconds >= 1.5 * size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} s"


def where(query: CostQuery) -> tuple[str, list[float]]:
    """The ``WHERE`` of both stores' queries (``%s`` placeholders)."""
    parts, params = [], []
    if query.since is not None:
        parts.append("created_at >= %s")
        params.append(query.since)
    if query.until is not None:
        parts.append("created_at < %s")
        params.append(query.until)
    return (" WHERE " + " AND ".join(parts)) if parts else "", params


def row_of(values: tuple[Any, ...]) -> CostRow:
    """A query's row: group, runs, cost, prompt tokens, completion tokens, unknown runs, dearest run, its cost."""
    group, runs, cost, prompt, completion, unknown, dearest, dearest_usd = values
    return CostRow(str(group if group is not None else NONE), int(runs), float(cost or 0.0), int(prompt or 0),
                   int(completion or 0), int(unknown or 0), dearest, float(dearest_usd or 0.0))

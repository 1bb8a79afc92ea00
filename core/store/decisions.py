"""A run's decisions as table rows: one shape for both stores' ``decisions`` tables.

Every save of a run records its decisions (:func:`tether.approvals.records_of`) beside its
summary, so ``tether decisions`` lists a whole store's without replaying a transcript. The
file store keeps them in SQLite (:mod:`tether.store.files.index`), PostgreSQL in a table of
the same columns (:mod:`tether.store.postgres.schema`); the conversions and the filter are
written once, here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tether.approvals import DecisionQuery, DecisionRecord
    from tether.run.state import RunState

DECISION_COLUMNS = ("run_id", "call_id", "tool", "agent", "source", "args", "edited_args", "verdict", "words",
                    "decider", "rule", "approvers", "ts", "waited_s")
"""A decision's columns, in :class:`~tether.approvals.DecisionRecord`'s order (its ``by`` is
``decider``, a word SQL keeps for itself; ``approvers`` is a JSON array). PostgreSQL's
table has the same."""


def decision_row(record: DecisionRecord) -> tuple[Any, ...]:
    """``record`` as the values of :data:`DECISION_COLUMNS`."""
    return (record.run_id, record.call_id, record.tool, record.agent, record.source, record.args,
            record.edited_args, record.verdict, record.words, record.by, record.rule,
            json.dumps(list(record.approvers), separators=(",", ":")), record.ts, record.waited_s)


def decisions_of(rows: Iterable[Sequence[Any]]) -> list[DecisionRecord]:
    """Rows of :data:`DECISION_COLUMNS` as the records they were written from (10,000 of
    them for one listing: most have no approvers, whose JSON is not parsed)."""
    from tether.approvals import DecisionRecord

    out = []
    for row in rows:
        values = list(row)
        values[11] = () if values[11] in (None, "[]") else tuple(json.loads(values[11]))
        out.append(DecisionRecord(*values))
    return out


def decisions_key(state: RunState) -> tuple[Any, ...]:
    """What a run's decisions are, in a value cheap to compare on every save: a store
    writes the run's decision rows again only when it differs (a decision is never taken
    back, so a new one, or one more approver, shows in its time or its approvers)."""
    return tuple((call_id, d.verdict, d.ts, d.by, len(d.approvers)) for call_id, d in state.approvals.items())


def decision_filter(query: DecisionQuery, *, approver: str) -> tuple[str, list[Any]]:
    """The ``WHERE`` clause (``%s`` placeholders) and parameters that select ``query``'s
    decisions; ``approver`` is the SQL that says whether the parameter is among the row's
    approvers (each database spells a JSON array's membership its own way)."""
    where, params = [], []
    if query.since is not None:
        where.append("ts >= %s")
        params.append(query.since)
    if query.agent is not None:
        where.append("agent = %s")
        params.append(query.agent)
    if query.by is not None:
        where.append(f"(decider = %s OR rule = %s OR {approver})")
        params += [query.by, query.by, query.by]
    return (" WHERE " + " AND ".join(where)) if where else "", params

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

from tether.vocab.audit import DecisionRecord

if TYPE_CHECKING:
    from tether.vocab.audit import DecisionQuery
    from tether.vocab.state import RunState

DECISION_COLUMNS = ("run_id", "call_id", "tool", "agent", "source", "args", "edited_args", "verdict", "words",
                    "decider", "rule", "approvers", "ts", "waited_s", "account", "accounts", "needed")
"""A decision's columns, in :class:`~tether.approvals.DecisionRecord`'s order (its ``by`` is
``decider``, a word SQL keeps for itself; ``approvers`` and ``accounts`` are JSON arrays).
PostgreSQL's table has the same."""
ADDED_COLUMNS = {"account": "text", "accounts": "text", "needed": "integer"}
"""The columns added after the first tables were made (with their SQL types): a store of an
earlier Tether gets them when the operator's role next connects."""
_APPROVERS, _ACCOUNTS, _NEEDED = (DECISION_COLUMNS.index(name) for name in ("approvers", "accounts", "needed"))


def decision_row(record: DecisionRecord) -> tuple[Any, ...]:
    """``record`` as the values of :data:`DECISION_COLUMNS`."""
    return (record.run_id, record.call_id, record.tool, record.agent, record.source, record.args,
            record.edited_args, record.verdict, record.words, record.by, record.rule,
            _json_list(record.approvers), record.ts, record.waited_s, record.account, _json_list(record.accounts),
            record.needed)


def _json_list(names: Sequence[str]) -> str:
    return json.dumps(list(names), separators=(",", ":"))


def decisions_of(rows: Iterable[Sequence[Any]]) -> list[DecisionRecord]:
    """Rows of :data:`DECISION_COLUMNS` as the records they were written from (10,000 of
    them for one listing: most have no approvers, whose JSON is not parsed)."""
    out = []
    for row in rows:
        values = list(row)
        for at in (_APPROVERS, _ACCOUNTS):
            values[at] = () if values[at] in (None, "[]") else tuple(json.loads(values[at]))
        values[_NEEDED] = values[_NEEDED] or 1  # a row of an earlier Tether's: one person's decision
        out.append(DecisionRecord(*values))
    return out


def decisions_key(state: RunState) -> tuple[Any, ...]:
    """What a run's decisions are, in a value cheap to compare on every save: a store
    writes the run's decision rows again only when it differs (a decision is never taken
    back, so a new one, or one more approver, shows in its time or its approvers)."""
    return tuple((call_id, d.verdict, d.ts, d.by, len(d.approvers)) for call_id, d in state.approvals.items())


def decision_filter(query: DecisionQuery, *, among: str, fold: str) -> tuple[str, list[Any]]:
    """The ``WHERE`` clause (``%s`` placeholders) and parameters that select ``query``'s
    decisions. ``among`` is the SQL that says whether the parameter is, folded, among the
    names of the JSON array in column ``{column}`` (each database spells a JSON array's
    membership its own way); ``fold`` is the SQL function that folds a name's case: ``--by``
    matches a name or an account without regard to case (:mod:`tether.vocab.people`)."""
    where, params = [], []
    if query.since is not None:
        where.append("ts >= %s")
        params.append(query.since)
    if query.agent is not None:
        where.append("agent = %s")
        params.append(query.agent)
    if query.by is not None:
        by = query.by.casefold()
        where.append(f"({fold}(decider) = %s OR {fold}(rule) = %s OR {fold}(account) = %s OR "
                     f"{among.format(column='approvers')} OR {among.format(column='accounts')})")
        params += [by] * 5
    return (" WHERE " + " AND ".join(where)) if where else "", params

"""Runs' rows and Python's objects, both ways: what the PostgreSQL store writes and reads back.

A run's summary is kept as one JSON document (:mod:`tether.store.summary`), its decisions
as rows of the shared columns (:mod:`tether.store.decisions`), its owner as a row of
``owners`` (:class:`tether.store.owner.Owner`). A text column holds no NUL, so NULs are kept
as their JSON escape; an abstract socket's address (a leading NUL) is kept with ``@``.
"""

from __future__ import annotations

from typing import Any

import psycopg

from tether.vocab.audit import records_of
from tether.vocab.state import RunState, StateError
from tether.store.control import ControlRequest
from tether.store.decisions import DECISION_COLUMNS, decision_row
from tether.store.owner import Owner, kept_owner
from tether.store.postgres.schema import composed, dumps
from tether.store.summary import SUMMARY_COLUMNS, RunSummary

_NO_KEY = (-1, -1, -1)
OWNER_COLUMNS = ("pid", "host", "user", "since", "heartbeat", "command", "control")


def address_in(address: str | None) -> str | None:
    """A control address as a text column holds it: an abstract socket's leading NUL as ``@``."""
    return "@" + address[1:] if address and address.startswith("\0") else address


def address_out(address: str | None) -> str | None:
    return "\0" + address[1:] if address and address.startswith("@") else address


def check_id(run_id: str) -> str:
    if not run_id or "\0" in run_id or "/" in run_id or run_id in (".", ".."):
        raise StateError(f"invalid run id {run_id!r}")
    return run_id


def summary_row(state: RunState) -> dict[str, Any]:
    """The run's summary as the runs table keeps it, as a statement's parameters: the JSON
    document (``summary``) and the columns that are parts of it, each as
    :data:`tether.store.postgres.schema.RUN_COLUMNS`'s expression reads it from the document."""
    summary = RunSummary.of(state, _NO_KEY)
    return {"summary": dumps({name: getattr(summary, name) for name in SUMMARY_COLUMNS}),
            "operator": summary.operator, "agent": summary.agent, "model": summary.model, "source": summary.source,
            "own_usd": float(summary.cost_usd or 0) - float(summary.child_cost_usd or 0),
            "tokens_in": _float(summary.prompt_tokens), "tokens_out": _float(summary.completion_tokens),
            "unpriced": None if summary.price is None else summary.price == "unknown"}


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def decisions_json(state: RunState) -> str:
    """The run's decisions as the JSON array :data:`tether.store.postgres.schema.PUT_DECISIONS` takes. A text column
    holds no NUL (a hostile model's arguments may): it is kept as its JSON escape, as text."""
    def text(value: Any) -> Any:
        return value.replace("\0", "\\u0000") if isinstance(value, str) else value

    return dumps([{c: text(v) for c, v in zip(DECISION_COLUMNS, decision_row(r))} for r in records_of(state)])


def summary_of(data: dict[str, Any]) -> RunSummary:
    return RunSummary(**{name: data.get(name) for name in SUMMARY_COLUMNS if name in data})


def owner_of(row: tuple[Any, ...] | None, alive: bool, kept: Any = None) -> Owner | None:
    if not alive and kept is not None:
        keeper = kept_owner(kept)
        if keeper is not None:  # nobody holds it, but its keeper lives
            return keeper
    if row is None:
        return Owner(alive=True) if alive else None
    record = dict(zip(OWNER_COLUMNS, row))
    record["control"] = address_out(record["control"])
    return Owner(**record, alive=alive)


def read_control(conn: psycopg.Connection, schema: str, run_id: str, seen: int) -> list[ControlRequest]:
    """The run's control requests after the first ``seen``, in order; an unreadable one as
    a placeholder, so the count of handled requests stays right."""
    out = []
    for (data,) in conn.execute(composed(schema, "SELECT request FROM {s}.control WHERE run_id = %s AND idx > %s "
                                                 "ORDER BY idx"), (run_id, seen)):
        try:
            out.append(ControlRequest.from_dict(data))
        except (ValueError, KeyError, TypeError):
            out.append(ControlRequest(kind="stop", text="", id="unreadable", by="?"))  # keeps the count right
    return out

"""Runs in PostgreSQL: the run store (:mod:`tether.store.protocol`) for more than one machine.

``PgStore("postgresql://tether:…@host/tether")`` keeps every run in six tables of the
schema ``tether``, and the approvals in two more (made on first use;
``core/data/pg/roles.sql`` makes the roles):

* ``runs``: one row per run. ``header`` is the run without its transcript
  (:meth:`RunState.header`), ``summary`` what a listing shows (:class:`tether.store.summary.RunSummary`), and
  beside them the columns a listing sorts and filters on (``status``, ``created_at``...),
  ``message_count``, ``owner_token`` (the current owner's fencing token) and ``lock_key``,
  the run's advisory lock key (generated from its id).
* ``messages``: the transcript, append-only, one row per message, by run and index.
* ``trace``: the event trace, by run and ``seq``.
* ``ledger``: the idempotency ledger, by run and key.
* ``owners``: who holds a run (pid, host, user, since, heartbeat, command, control address,
  the server's backend pid), or last held it without letting go.
* ``control``: the control channel's requests, by run and index.
* ``rules``: the standing rules (:mod:`tether.vocab.rules`), ids ``R1``, ``R2``… from
  the sequence ``rule_numbers``, so an id is never given twice.
* ``decisions``: every decision a run holds (:func:`tether.approvals.records_of`), by run
  and call, written by the save that records it, in the same statement; ``tether
  decisions`` reads them by time. Not tied to ``runs`` by a foreign key: the record of who
  decided what stays when runs are cleared away.

**A save is one transaction**: the step's new messages, the header and summary, the
ledger results recorded since the last save, and the trace lines emitted since then, sent
in one pipeline. It either happens whole or not at all; so a write's result is in the
ledger exactly when the transcript holds the result it gave the model. The ledger's
*intent* (``begin``) is committed at once, on its own: it must be durable before the side
effect it announces.

**Connections per process, not per run.** A store holds at most :data:`POOL_SIZE`
connections for its reads and saves (``TETHER_PG_POOL``, :class:`tether.store.postgres.connection.Pool`), and one more,
its *holding session*, once it owns a run, however many runs it drives: a worker at
concurrency 64 needs no more connections than one at 8.

**Ownership is a session advisory lock**, ``pg_try_advisory_lock(lock_key)``, taken on the
store's holding session, which holds the locks of every run the store owns. The server drops
them when that session ends however it ends (a killed process closes its socket at once; a
vanished host after the TCP keepalives this session sets, about 25 s), so a dead worker's
runs are orphaned at once. Liveness is read from ``pg_locks``, which anyone may read (the
read-only watcher too), without touching the lock. Saves go through the pool, fenced by the
run's ``owner_token``: every save checks it in its own statement, so an owner whose lock was
lost and taken by another process cannot write over its successor; and before each save the
holding session is looked at (a socket poll, no round trip): one the server has ended is
replaced, and each run's lock taken again on the new one, only if its token is still the
run's. Session locks and the holding session need a session: connect directly, or through
a pooler in session mode (docs/scale-out.md says why transaction pooling cannot hold them).

**Blocking.** psycopg's calls wait on the network, so ``blocking = True``: code on an event
loop calls the store through :func:`tether.store.protocol.call` and saves with
:meth:`tether.store.postgres.handle.PgHandle.asave`, which reads the state on the loop and commits from a worker thread.

Documents are stored as ``json``, not ``jsonb``: ``json`` keeps the text as written (a
transcript re-sent to a model is byte for byte what it was) and holds any string Python
can write, where ``jsonb`` refuses ``\\u0000`` (a hostile tool output or argument would
make a save fail) and reorders keys. Nothing queries inside these documents; what a
listing filters on is in columns.

Passwords never reach an error message: every error names the URL without its password.

The parts: connections and the pool (:mod:`tether.store.postgres.connection`), the tables
and statements (:mod:`tether.store.postgres.schema`), rows to objects
(:mod:`tether.store.postgres.rows`), ownership by advisory locks
(:mod:`tether.store.postgres.locks`), one run's hold and its saves
(:mod:`tether.store.postgres.handle`), the trace timer (:mod:`tether.store.postgres.flushes`),
the control channel (:mod:`tether.store.postgres.control`) and watching
(:mod:`tether.store.postgres.watch`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TextIO

import psycopg

from tether.vocab.rules import Rule, RuleError
from tether.vocab.state import RunExists, RunState, StateError
from tether.store.changes import NEW, TRACE
from tether.store.costs import day_of, missing, ordered, row_of, where as cost_filter
from tether.store.feed import HISTORY_LINES, Listing
from tether.store.decisions import DECISION_COLUMNS, decision_filter, decisions_of
from tether.store.operator import mark_starter
from tether.store.owner import Owner, kept_owner
from tether.store.postgres.connection import StoreUnavailable, redact
from tether.store.postgres.control import PgControlServer, deliver as deliver_here, is_pg_address
from tether.store.postgres.database import Database
from tether.store.postgres.handle import PgHandle
from tether.store.postgres.locks import HELD
from tether.store.postgres.rows import check_id, decisions_json, owner_of, read_control, summary_of, summary_row
from tether.store.postgres.schema import INSERT_RUN, KEEPER, PUT_DECISIONS, dumps
from tether.store.postgres.watch import PgWatcher, follow_all, follow_run
from tether.store.protocol import call
from tether.store.summary import Liveness, RunSummary
from tether.store.unix import deliver as poke

if TYPE_CHECKING:
    import asyncio

    from tether.store.costs import CostQuery, CostRow
    from tether.vocab.audit import DecisionQuery, DecisionRecord
    from tether.vocab.events import Event
    from tether.store.control import ControlReply, ControlRequest

log = logging.getLogger(__name__)


class PgStore(Database):
    """All runs in one PostgreSQL database (see the module); its connections, its schema and
    who holds a run are :class:`tether.store.postgres.database.Database`'s."""

    def __repr__(self) -> str:
        return f"PgStore({redact(self.url)!r}, schema={self.schema!r})"

    def control_server(self) -> PgControlServer:
        """What a harness on this store takes control requests behind: a LISTEN on the
        database (:class:`tether.store.postgres.control.PgControlServer`), reachable from any host."""
        return PgControlServer(self)

    async def deliver(self, run_id: str, request: ControlRequest, address: str | None) -> ControlReply | None:
        """An owner listening on the database (``pg:``, any host): the request is appended and
        its answer awaited there (:func:`tether.store.postgres.control.deliver`). An owner
        that published a Unix socket is poked there, after the append (:mod:`tether.store.unix`)."""
        if is_pg_address(address):
            return await deliver_here(self, run_id, request)
        await call(self, self.control_append, run_id, request)
        return await poke(address, run_id, request.id) if address else None

    # ---- creating and reading ------------------------------------------------------------
    def exists(self, run_id: str) -> bool:
        with self._conn() as conn:
            return conn.execute(self.q("SELECT 1 FROM {s}.runs WHERE run_id = %s"),
                                (check_id(run_id),)).fetchone() is not None

    def run_ids(self) -> list[str]:
        with self._conn() as conn:
            return [r[0] for r in conn.execute(self.q("SELECT run_id FROM {s}.runs ORDER BY run_id"))]

    def create(self, state: RunState) -> None:
        """The run row and its first messages, in one transaction; an id that exists is refused."""
        check_id(state.run_id)
        mark_starter(state, self.account())
        header = state.header()
        with self._conn() as conn:
            try:
                with conn.transaction():
                    conn.execute(self.q(INSERT_RUN), {
                        "run": state.run_id, "status": state.status.value, "parent": state.parent_run_id,
                        "created_at": state.created_at, "updated_at": state.updated_at, "count": len(state.messages),
                        "header": dumps(header), **summary_row(state)})
                    if state.messages:
                        with conn.cursor() as cur:
                            cur.executemany(self.q("INSERT INTO {s}.messages (run_id, idx, message) VALUES (%s, %s, %s)"),
                                            [(state.run_id, i, dumps(m)) for i, m in enumerate(state.messages)])
                    if state.approvals:
                        conn.execute(self.q(PUT_DECISIONS), {"decisions": decisions_json(state)})
                    self.notify(conn, state.run_id, NEW)
            except psycopg.errors.UniqueViolation:
                raise RunExists(f"run {state.run_id} already exists") from None

    def load(self, run_id: str) -> RunState:
        with self._conn() as conn:
            return load_run(conn, self, run_id)

    # ---- summaries ---------------------------------------------------------------------
    def summaries(self, *, live_only: bool = False, problems: dict[str, str] | None = None) -> list[RunSummary]:
        """Every run's summary from the runs table, oldest first; a running run's liveness
        from ``pg_locks`` and its owner from ``owners``, in the same query."""
        where = "WHERE r.status = 'running' OR r.summary->'interruption'->>'type' = 'approval'" if live_only else ""
        with self._conn() as conn:
            rows = conn.execute(self.q(
                f"SELECT r.run_id, r.summary, r.status = 'running' AND r.lock_key IN ({HELD}), "
                f"o.pid, o.host, o.\"user\", o.since, o.heartbeat, o.command, o.control, o.run_id IS NOT NULL, "
                f"{KEEPER} FROM {{s}}.runs r LEFT JOIN {{s}}.owners o USING (run_id) {where} "
                f"ORDER BY r.created_at")).fetchall()
            queued = self._queued(conn)
        out = []
        for run_id, data, alive, *owner, has_owner, kept in rows:
            try:
                summary = summary_of(data)
            except TypeError as exc:
                if problems is not None:
                    problems[run_id] = f"unreadable summary: {exc}"
                continue
            if summary.status == "running":
                summary.liveness = "running" if alive else "queued" if run_id in queued else "orphaned"
                summary.owner = owner_of(tuple(owner) if has_owner else None, bool(alive))
                keeper = None if alive or kept is None else kept_owner(kept)
                if keeper is not None:  # nobody holds it, but its keeper lives (Claude Code between hooks)
                    summary.liveness, summary.owner = "running", keeper
            out.append(summary)
        return out

    def _queued(self, conn: psycopg.Connection, run_id: str | None = None) -> set[str]:
        """The runs the worker queue holds (:mod:`tether.workers`): enqueued, or taken by a
        worker that is between steps or gone (another worker goes on with it within a
        second). Empty where no worker or submit ever ran."""
        if conn.execute("SELECT to_regclass('dbos.workflow_status')").fetchone()[0] is None:
            return set()
        query = ("SELECT workflow_uuid FROM dbos.workflow_status WHERE name = 'tether.run' "
                 "AND status IN ('ENQUEUED', 'DELAYED', 'PENDING')")
        if run_id is not None:
            return {r[0] for r in conn.execute(query + " AND workflow_uuid = %s", (run_id,))}
        return {r[0] for r in conn.execute(query)}

    def summary(self, run_id: str) -> RunSummary:
        with self._conn() as conn:
            row = conn.execute(self.q(
                f"SELECT r.summary, r.lock_key IN ({HELD}) FROM {{s}}.runs r WHERE r.run_id = %s"),
                (check_id(run_id),)).fetchone()
            queued = self._queued(conn, run_id) if row is not None and not row[1] else set()
        if row is None:
            raise StateError(f"no run {run_id} in {self.where}")
        summary = summary_of(row[0])
        if summary.status == "running":
            summary.liveness = "running" if row[1] else "queued" if run_id in queued else "orphaned"
            summary.owner = self.owner(run_id)
            if summary.owner is not None and summary.owner.kept:
                summary.liveness = "running"
        return summary

    def liveness(self, run_id: str) -> Liveness | None:
        return self.summary(run_id).liveness

    # ---- the control channel and the trace --------------------------------------------------
    def control_read(self, run_id: str, seen: int) -> list[ControlRequest]:
        with self._conn() as conn:
            return read_control(conn, self.schema, run_id, seen)

    def read_trace(self, run_id: str, after_seq: int = 0) -> Iterator[dict[str, Any]]:
        """The run's trace records with ``seq`` above ``after_seq`` (all of them by default),
        in order: a follower passes the last ``seq`` it read and gets only the new lines."""
        with self._conn() as conn:
            rows = conn.execute(self.q("SELECT record FROM {s}.trace WHERE run_id = %s AND seq > %s ORDER BY seq"),
                                (check_id(run_id), after_seq)).fetchall()
        return iter([r[0] for r in rows if isinstance(r[0], dict)])

    # ---- for followers (the console): what changed, read without reading everything ----
    def trace_ends(self) -> dict[str, int]:
        """Every run's last trace ``seq`` (0: none yet), in one query."""
        with self._conn() as conn:
            rows = conn.execute(self.q(
                "SELECT r.run_id, (SELECT max(t.seq) FROM {s}.trace t WHERE t.run_id = r.run_id) "
                "FROM {s}.runs r")).fetchall()
        return {rid: int(seq or 0) for rid, seq in rows}

    def trace_before(self, run_id: str, upto_seq: int, limit: int) -> list[dict[str, Any]]:
        """The last ``limit`` trace records with ``seq`` up to ``upto_seq``, in order."""
        with self._conn() as conn:
            rows = conn.execute(self.q("SELECT record FROM {s}.trace WHERE run_id = %s AND seq <= %s "
                                       "ORDER BY seq DESC LIMIT %s"), (check_id(run_id), upto_seq, limit)).fetchall()
        return [record for (record,) in reversed(rows) if isinstance(record, dict)]

    def load_after(self, run_id: str, before: RunState) -> RunState:
        """The run now, given ``before``, an earlier state of it: only the header and the
        messages added since are read (the transcript is append-only), in one snapshot."""
        with self._conn() as conn:
            with conn.transaction():
                header, count = read_head(conn, self, run_id)
                have = len(before.messages)
                if count < have:  # fewer than we hold: not the run we knew, read it all
                    return self.load(run_id)
                added = [m for (m,) in conn.execute(self.q(
                    "SELECT message FROM {s}.messages WHERE run_id = %s AND idx >= %s AND idx < %s ORDER BY idx"),
                    (run_id, have, count))]
        if have + len(added) != count:
            return self.load(run_id)
        return RunState.from_dict({**header, "messages": [*before.messages, *added]})

    def owners(self, run_ids: Iterable[str]) -> dict[str, Owner | None]:
        """:meth:`owner` of many runs, in one query."""
        wanted = [check_id(r) for r in run_ids]
        if not wanted:
            return {}
        with self._conn() as conn:
            rows = conn.execute(self.q(
                f"SELECT r.run_id, r.lock_key IN ({HELD}), o.pid, o.host, o.\"user\", o.since, o.heartbeat, "
                f"o.command, o.control, o.run_id IS NOT NULL, {KEEPER} FROM {{s}}.runs r "
                f"LEFT JOIN {{s}}.owners o USING (run_id) WHERE r.run_id = ANY(%s)"), (wanted,)).fetchall()
        out: dict[str, Owner | None] = dict.fromkeys(wanted)
        for rid, alive, *owner, has_owner, kept in rows:
            out[rid] = owner_of(tuple(owner) if has_owner else None, bool(alive), kept)
        return out

    def traced_ids(self, prefix: str = "") -> list[str]:
        """The runs' ids: a trace's lines are a run's rows (none without its run)."""
        return [rid for rid in self.run_ids() if rid.startswith(prefix)]

    def side_dir(self) -> None:
        return None

    def tables(self) -> PgStore:
        return self

    def feed(self) -> PgFeed:
        return PgFeed(self)

    def trace_source(self) -> PgTraceSource:
        return PgTraceSource(self)

    def trace_digests(self, run_ids: list[str], digest: Callable[[Iterator[dict[str, Any]]], tuple[list[Any], float]],
                      ) -> dict[str, tuple[list[Any], float]]:
        return {run_id: digest(self.read_trace(run_id)) for run_id in run_ids}

    def trace_file(self, run_id: str) -> None:
        """None: the traces are rows (:meth:`read_trace`)."""
        return None

    def watch(self) -> PgWatcher:
        return PgWatcher(self)

    async def follow_run(self, run_id: str, out: TextIO, *, stop_event: asyncio.Event | None = None,
                         backlog: int = 20, timings: bool = True, on_ready: Callable[[], None] | None = None,
                         ) -> dict[str, Any] | None:
        return await follow_run(self, run_id, out, stop_event=stop_event, backlog=backlog, timings=timings,
                                on_ready=on_ready)

    async def follow_all(self, out: TextIO, *, stop_event: asyncio.Event | None = None, backlog: int = 20,
                         timings: bool = True, on_ready: Callable[[], None] | None = None) -> None:
        await follow_all(self, out, stop_event=stop_event, backlog=backlog, timings=timings, on_ready=on_ready)

    def append_event(self, run_id: str, event: Event) -> None:
        """Append to the trace of a run nobody holds; a held run's trace is its owner's to
        number, so then the event is dropped (and logged)."""
        with self._conn() as conn, conn.transaction():
            got = conn.execute(self.q("SELECT pg_try_advisory_xact_lock(lock_key) FROM {s}.runs WHERE run_id = %s"),
                               (check_id(run_id),)).fetchone()
            if got is None:
                raise StateError(f"no run {run_id} in {self.where}")
            if not got[0]:
                log.warning("run %s is held by another process: its %s event was not traced", run_id, event.kind)
                return
            seq = conn.execute(self.q("SELECT coalesce(max(seq), 0) FROM {s}.trace WHERE run_id = %s"),
                               (run_id,)).fetchone()[0] + 1
            event.seq, event.ts, event.run_id = seq, time.time(), run_id
            conn.execute(self.q("INSERT INTO {s}.trace (run_id, seq, record) VALUES (%s, %s, %s)"),
                         (run_id, seq, dumps(event.record())))
            self.notify(conn, run_id, TRACE)

    # ---- approvals: the standing rules and the record of decisions ---------------------------
    def rules(self) -> list[Rule]:
        """Every rule, oldest first: one small query (the rules are few)."""
        with self._conn() as conn:
            rows = conn.execute(self.q("SELECT id, rule FROM {s}.rules ORDER BY number")).fetchall()
        return [Rule.from_dict({**data, "id": rule_id}) for rule_id, data in rows]

    def rule_add(self, rule: Rule) -> Rule:
        """Kept under ``R`` and the sequence's next number."""
        data = {k: v for k, v in rule.to_dict().items() if k != "id"}
        with self._conn() as conn:
            (rule_id,) = conn.execute(self.q(
                "INSERT INTO {s}.rules (id, number, rule) SELECT 'R' || n, n, %s "
                "FROM (SELECT nextval(%s) AS n) AS next RETURNING id"),
                (dumps(data), f"{self.schema}.rule_numbers")).fetchone()
        return replace(rule, id=rule_id)

    def rule_remove(self, rule_id: str) -> Rule:
        with self._conn() as conn:
            row = conn.execute(self.q("DELETE FROM {s}.rules WHERE id = %s RETURNING rule"), (rule_id,)).fetchone()
        if row is None:
            raise RuleError(f"no rule {rule_id} on this store; tether rules lists them")
        return Rule.from_dict({**row[0], "id": rule_id})

    def decisions(self, query: DecisionQuery) -> list[DecisionRecord]:
        """From the ``decisions`` table, newest first."""
        where, params = decision_filter(
            query, among="EXISTS (SELECT 1 FROM json_array_elements_text({column}::json) AS a WHERE lower(a) = %s)",
            fold="lower")
        text = f"SELECT {', '.join(DECISION_COLUMNS)} FROM {{s}}.decisions{where} ORDER BY ts DESC, run_id DESC, call_id DESC"
        if query.limit is not None:
            text += " LIMIT %s"
            params.append(query.limit)
        with self._conn() as conn:
            try:
                return decisions_of(conn.execute(self.q(text), params).fetchall())
            except psycopg.errors.UndefinedColumn:
                raise StoreUnavailable(f"{self.where}: the decisions table is an earlier Tether's, and this role "
                                       "cannot add its new columns: connect once with the operator's role, which "
                                       "adds them") from None

    def costs(self, query: CostQuery) -> list[CostRow]:
        """Spend grouped (:mod:`tether.store.costs`) in one aggregate query over the runs table's
        columns that each save writes beside the summary
        (:data:`tether.store.postgres.schema.RUN_COLUMNS`): no JSON parsed, no run loaded here."""
        # A day is grouped as its number since the epoch (UTC), named here: no date formatted per run.
        key = "floor(created_at / 86400)" if query.by == "day" else f"coalesce({query.by}, '{missing(query.by)}')"
        filtered, params = cost_filter(query)
        text = (f"SELECT {key}, count(*), sum(own_usd), sum(tokens_in), sum(tokens_out), "
                "count(*) FILTER (WHERE unpriced), (array_agg(run_id ORDER BY own_usd DESC))[1], max(own_usd) "
                f"FROM {{s}}.runs{filtered} GROUP BY 1")
        with self._conn() as conn:
            rows = self._columns(conn, text, params)
        if query.by == "day":
            rows = [(day_of(86400 * r[0]), *r[1:]) for r in rows]
        return ordered((row_of(r) for r in rows), query.by)

    def dearest(self, query: CostQuery, limit: int = 10) -> list[RunSummary]:
        """The dearest runs' summaries in one ``ORDER BY own_usd DESC … LIMIT`` over the runs table."""
        filtered, params = cost_filter(query)
        text = f"SELECT summary FROM {{s}}.runs{filtered} ORDER BY own_usd DESC, run_id LIMIT %s"
        with self._conn() as conn:
            return [summary_of(r[0]) for r in self._columns(conn, text, [*params, limit])]

    def _columns(self, conn: psycopg.Connection, text: str, params: list[Any]) -> list[tuple[Any, ...]]:
        """The rows of a query of the runs' added columns, which a store of an earlier Tether
        lacks until the operator's role connects (a watcher's cannot add them)."""
        try:
            return conn.execute(self.q(text), params).fetchall()
        except psycopg.errors.UndefinedColumn:
            raise StoreUnavailable(f"{self.where}: the runs table is an earlier Tether's, and this role cannot "
                                   "add its new columns: connect once with the operator's role, which adds "
                                   "them") from None

    def budget_charge(self, key: str, usd: float, seed: Callable[[], float]) -> float:
        """Add ``usd`` to fleet budget ``key``'s spend this period and return the new total: one
        transaction holding the key's advisory lock, so two processes charging at once are
        counted one after the other. A new period's spend starts at ``seed()``."""
        with self._conn() as conn:
            if not getattr(self, "_budgets_made", False):
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(hashtext('tether budgets'))")
                    conn.execute(self.q("CREATE TABLE IF NOT EXISTS {s}.budgets "
                                        "(key text PRIMARY KEY, spent double precision NOT NULL)"))
                self._budgets_made = True
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"tether budget {key}",))
                row = conn.execute(self.q("SELECT spent FROM {s}.budgets WHERE key = %s"), (key,)).fetchone()
                if row is None:
                    spent = seed() + usd
                    conn.execute(self.q("INSERT INTO {s}.budgets (key, spent) VALUES (%s, %s)"), (key, spent))
                    return spent
                return float(conn.execute(self.q("UPDATE {s}.budgets SET spent = spent + %s WHERE key = %s "
                                                 "RETURNING spent"), (usd, key)).fetchone()[0])

    # ---- owning a run -----------------------------------------------------------------
    def open(self, run_id: str, *, control: str | None = None) -> tuple[RunState, PgHandle]:
        """Take the run's advisory lock on the store's holding session and load the run; a run
        another session holds is refused in words."""
        check_id(run_id)
        with self._conn():  # the tables exist before the handle's session looks for them
            pass
        handle = PgHandle(self, run_id)
        try:
            state = handle.acquire(control=control)
        except BaseException:
            handle.release()
            raise
        return state, handle


def read_head(conn: psycopg.Connection, store: PgStore, run_id: str) -> tuple[Any, int]:
    """In a transaction just begun: make it one snapshot, and read the run's header and how
    many messages it counts."""
    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    row = conn.execute(store.q("SELECT header, message_count FROM {s}.runs WHERE run_id = %s"),
                       (check_id(run_id),)).fetchone()
    if row is None:
        raise StateError(f"no run {run_id} in {store.where}")
    return row[0], row[1]


def load_run(conn: psycopg.Connection, store: PgStore, run_id: str) -> RunState:
    with conn.transaction():  # one snapshot: the header and the messages it counts
        header, count = read_head(conn, store, run_id)
        messages = [m for (m,) in conn.execute(
            store.q("SELECT message FROM {s}.messages WHERE run_id = %s AND idx < %s ORDER BY idx"), (run_id, count))]
    if len(messages) != count:
        raise StateError(f"run {run_id}: {len(messages)} messages stored, its header says {count}")
    return RunState.from_dict({**header, "messages": messages})


class PgTraceSource:
    """PostgreSQL's :class:`~tether.store.protocol.TraceSource`: each run's trace read after the last
    ``seq`` read."""

    def __init__(self, store: PgStore) -> None:
        self.store = store
        self.seqs: dict[str, int] = {}

    def catch_up(self, cutoff: float) -> dict[str, list[dict[str, Any]]]:
        marks = self.store.trace_ends()  # first: what is committed after them is read as new
        out: dict[str, list[dict[str, Any]]] = {}
        with self.store._conn() as conn:
            rows = conn.execute(self.store.q(
                "SELECT run_id, seq, record::text FROM {s}.trace WHERE (record->>'ts')::float8 >= %s "
                "ORDER BY run_id, seq"), (cutoff,)).fetchall()
        for run_id, seq, text in rows:
            if seq <= marks.get(run_id, 0):
                out.setdefault(run_id, []).append(json.loads(text))
        self.seqs = dict(marks)
        return out

    def new_records(self, run_id: str) -> list[dict[str, Any]]:
        after = self.seqs.get(run_id, 0)
        out = list(self.store.read_trace(run_id, after_seq=after))
        if out:
            self.seqs[run_id] = max(after, max(int(r.get("seq") or 0) for r in out))
        return out

    def forget(self, run_id: str) -> None:
        self.seqs.pop(run_id, None)


class PgFeed:
    """PostgreSQL's :class:`~tether.store.feed.StoreFeed`: LISTEN/NOTIFY, loads and trace reads by
    ``seq`` (:mod:`tether.store.feed`)."""

    blocking = True

    def __init__(self, store: PgStore) -> None:
        self.store = store
        self.where = store.where
        self.states: dict[str, RunState] = {}  # the followed runs, as last loaded
        self.seqs: dict[str, int] = {}  # the last trace seq read (or marked) per run

    def listing(self) -> Listing:
        marks = self.store.trace_ends()  # before the summaries: what is appended in between is read again, not lost
        problems: dict[str, str] = {}
        summaries = self.store.summaries(problems=problems)
        for summary in summaries:
            self.seqs.setdefault(summary.run_id, marks.get(summary.run_id, 0))
        return summaries, problems

    def changes(self) -> PgWatcher:
        return self.store.watch()

    def follow(self, rid: str) -> RunState | None:
        """The run now. A run followed already reads only its header and the messages added
        since (the transcript is append-only in the store), not the whole run again."""
        before = self.states.get(rid)
        state = self.states[rid] = self.store.load_after(rid, before) if before is not None else self.store.load(rid)
        return state

    def following(self, rid: str) -> bool:
        return rid in self.states

    def followed(self) -> list[str]:
        return list(self.states)

    def unfollow(self, rid: str) -> None:
        self.states.pop(rid, None)

    def current(self, rid: str) -> RunState:
        state = self.states.get(rid)
        return state if state is not None else self.store.load(rid)

    def summary(self, rid: str) -> RunSummary:
        return self.store.summary(rid)

    def owner(self, rid: str) -> Owner | None:
        return self.store.owner(rid)

    def owners(self, rids: Iterable[str]) -> dict[str, Owner | None]:
        return self.store.owners(rids)

    def new_trace(self, rid: str) -> list[dict[str, Any]]:
        after = self.seqs.get(rid, 0)
        out = list(self.store.read_trace(rid, after_seq=after))
        if out:
            self.seqs[rid] = max(after, max(int(r.get("seq") or 0) for r in out))
        return out

    def trace_seen(self, rid: str, seq: int) -> None:
        self.seqs[rid] = max(self.seqs.get(rid, 0), seq)

    def history(self, rid: str) -> list[dict[str, Any]]:
        return self.store.trace_before(rid, self.seqs.get(rid, 0), HISTORY_LINES)

    def close(self) -> None:
        self.states.clear()

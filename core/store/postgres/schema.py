"""The PostgreSQL store's tables, and the SQL every part of it shares.

``PgStore`` keeps every run in six tables of its schema (``tether`` by default), and the
approvals in two more, made on first use by :func:`ensure_schema` (one maker at a time, by a
transaction lock); ``roles.sql`` (:data:`ROLES_SQL`) makes the roles. See
:mod:`tether.store.postgres.store` for what each table holds and why documents are ``json``.

Every change a store commits notifies the channel ``tether_<schema>`` in the same
transaction, with ``{"run": ID, "kind": KIND}`` (:func:`notice`, the words of
:mod:`tether.store.changes`), so a watcher is never told of a change it cannot read yet.
"""

from __future__ import annotations

import functools
import json
import logging
import re
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from tether.store.decisions import ADDED_COLUMNS, DECISION_COLUMNS
from tether.store.postgres.connection import StoreUnavailable, clean

# Where the roles' script is, said in full in errors: in a checkout core/data/pg/, in an
# installed package tether/data/pg/ under site-packages.
ROLES_SQL = str(Path(__file__).resolve().parents[2] / "data" / "pg" / "roles.sql")

log = logging.getLogger(__name__)

LOCK_SEED = 0x7E7E  # hashtextextended's seed: Tether's lock keys apart from other programs' hashes
IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

RUN_COLUMNS = {
    "operator": ("text", "summary->>'operator'"),
    "agent": ("text", "summary->>'agent'"),
    "model": ("text", "summary->>'model'"),
    "source": ("text", "summary->>'source'"),
    "own_usd": ("double precision",
                "coalesce((summary->>'cost_usd')::float8, 0) - coalesce((summary->>'child_cost_usd')::float8, 0)"),
    "tokens_in": ("double precision", "(summary->>'prompt_tokens')::float8"),
    "tokens_out": ("double precision", "(summary->>'completion_tokens')::float8"),
    "unpriced": ("boolean", "summary->>'price' = 'unknown'"),
}
"""The runs' columns added after the first tables were made, each its type and what it is of the
run's summary: who started it (NULL for a run made before that was recorded), and what ``tether
costs`` groups and adds (:meth:`PgStore.costs`), so that it reads columns instead of parsing
100,000 JSON documents. A save writes them beside the summary
(:func:`tether.store.postgres.rows.summary_row`, which must say what these expressions say: a
test holds them together); the expressions fill them once for the rows of a store that lacked
them. They were generated columns first, which made every save parse its summary once a column
(a long run's summary holds a number per turn): a store that has them so gets them plain, values
kept. Tokens are float8, whose cast from any number cannot fail (and which sums exactly up to 2**53)."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS {s}.runs (
    run_id text PRIMARY KEY,
    status text NOT NULL,
    parent_run_id text,
    created_at double precision NOT NULL,
    updated_at double precision NOT NULL,
    message_count integer NOT NULL,
    header json NOT NULL,
    summary json NOT NULL,
    owner_token text,
    control_count integer NOT NULL DEFAULT 0,
    lock_key bigint GENERATED ALWAYS AS (hashtextextended(run_id, {seed})) STORED,
""" + ",\n".join(f"    {name} {kind}" for name, (kind, _) in RUN_COLUMNS.items()) + """
);
CREATE INDEX IF NOT EXISTS runs_created ON {s}.runs (created_at);
CREATE INDEX IF NOT EXISTS runs_status ON {s}.runs (status);
CREATE TABLE IF NOT EXISTS {s}.messages (
    run_id text NOT NULL REFERENCES {s}.runs ON DELETE CASCADE,
    idx integer NOT NULL,
    message json NOT NULL,
    PRIMARY KEY (run_id, idx)
);
CREATE TABLE IF NOT EXISTS {s}.trace (
    run_id text NOT NULL REFERENCES {s}.runs ON DELETE CASCADE,
    seq bigint NOT NULL,
    record json NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE IF NOT EXISTS {s}.ledger (
    run_id text NOT NULL REFERENCES {s}.runs ON DELETE CASCADE,
    key text NOT NULL,
    status text NOT NULL,
    intent json,
    result text,
    PRIMARY KEY (run_id, key)
);
CREATE TABLE IF NOT EXISTS {s}.owners (
    run_id text PRIMARY KEY REFERENCES {s}.runs ON DELETE CASCADE,
    token text NOT NULL,
    pid integer, host text, "user" text, since double precision, heartbeat double precision,
    command text, control text, backend_pid integer
);
CREATE TABLE IF NOT EXISTS {s}.control (
    run_id text NOT NULL REFERENCES {s}.runs ON DELETE CASCADE,
    idx integer NOT NULL,
    request json NOT NULL,
    PRIMARY KEY (run_id, idx)
);
CREATE SEQUENCE IF NOT EXISTS {s}.rule_numbers;
CREATE TABLE IF NOT EXISTS {s}.rules (
    id text PRIMARY KEY,
    number bigint NOT NULL,
    rule json NOT NULL
);
CREATE TABLE IF NOT EXISTS {s}.decisions (
    run_id text NOT NULL, call_id text NOT NULL, tool text, agent text, source text, args text, edited_args text,
    verdict text, words text, decider text, rule text, approvers text, ts double precision NOT NULL,
    waited_s double precision, account text, accounts text, needed integer,
    PRIMARY KEY (run_id, call_id)
);
CREATE INDEX IF NOT EXISTS decisions_ts ON {s}.decisions (ts);
"""
NEWEST_TABLE = "decisions"  # made last: when it is there, so is every other
ADDED = {NEWEST_TABLE: ADDED_COLUMNS, "runs": {name: kind for name, (kind, _) in RUN_COLUMNS.items()}}
"""Every column added since, by table: a store of an earlier Tether gets them when the
operator's role next connects."""
# A run's decisions, as a JSON array of rows, written over the rows of the same calls.
PUT_DECISIONS = ("INSERT INTO {s}.decisions SELECT * FROM json_populate_recordset(NULL::{s}.decisions, "
                  "%(decisions)s::json) ON CONFLICT (run_id, call_id) DO UPDATE SET "
                  + ", ".join(f"{c} = EXCLUDED.{c}" for c in DECISION_COLUMNS[2:]))
# The keeper of a run saved running (tether.store.keeper: Claude Code's process, between its hooks).
KEEPER = "CASE WHEN r.status = 'running' THEN r.header->'agent'->'spec'->'keeper' END"
NOTIFY = "SELECT pg_notify(%s, %s)"

# A new run's row (PgStore.create), its summary's columns written beside it as a save writes them.
INSERT_RUN = ("INSERT INTO {s}.runs (run_id, status, parent_run_id, created_at, updated_at, message_count, header, "
              "summary, " + ", ".join(RUN_COLUMNS) + ") VALUES (%(run)s, %(status)s, %(parent)s, %(created_at)s, "
              "%(updated_at)s, %(count)s, %(header)s, %(summary)s, " + ", ".join(f"%({n})s" for n in RUN_COLUMNS) + ")")
# A save: one statement, so one round trip and its own transaction. The run row's update is
# gated by a subquery that divides by zero unless the handle's token is still the run's, so a
# fenced owner's statement fails whole; the other inserts are data-modifying CTEs, which run
# whether or not the main query reads them. Messages and trace records go as arrays of their
# JSON text (``json`` keeps the text as written).
_SAVE_TEMPLATE = """
WITH run AS (
    UPDATE {{s}}.runs SET status = %(status)s, updated_at = %(updated_at)s, message_count = %(count)s,
        header = %(header)s, summary = %(summary)s, """ + ", ".join(f"{name} = %({name})s" for name in RUN_COLUMNS) + """
    WHERE run_id = %(run)s AND (SELECT 1 / count(*)::int FROM {{s}}.runs
                                WHERE run_id = %(run)s AND owner_token = %(token)s) = 1
    RETURNING 1
), messages AS (
    INSERT INTO {{s}}.messages (run_id, idx, message)
    SELECT %(run)s, m.idx, m.message FROM unnest(%(idxs)s::int[], %(messages)s::json[]) AS m(idx, message){keep}
), trace AS (
    INSERT INTO {{s}}.trace (run_id, seq, record)
    SELECT %(run)s, t.seq, t.record FROM unnest(%(seqs)s::bigint[], %(records)s::json[]) AS t(seq, record){keep}
), ledger AS (
    INSERT INTO {{s}}.ledger (run_id, key, status, result)
    SELECT %(run)s, l.key, 'done', l.result FROM unnest(%(keys)s::text[], %(results)s::text[]) AS l(key, result)
    ON CONFLICT (run_id, key) DO UPDATE SET status = 'done', result = EXCLUDED.result
), decided AS (
    {put_decisions}
)
SELECT (SELECT count(*) FROM run), pg_notify(%(channel)s, %(journal)s),
       CASE WHEN %(traced)s THEN pg_notify(%(channel)s, %(trace)s) END
"""
SAVE = _SAVE_TEMPLATE.format(keep="", put_decisions=PUT_DECISIONS)
# A retry after a lost connection may find the first try committed: the rows already there
# are the same rows, and are kept (decisions are written over, with the same values).
SAVE_AGAIN = _SAVE_TEMPLATE.format(keep=" ON CONFLICT DO NOTHING", put_decisions=PUT_DECISIONS)
# Taking a run: the lock tried once (a materialized CTE), and the token, the owner record and
# its notification only if it was free. A run that does not exist gives a row of NULLs.
TAKE = """
WITH lock AS MATERIALIZED (
    SELECT pg_try_advisory_lock(lock_key) AS got FROM {s}.runs WHERE run_id = %(run)s
), run AS (
    UPDATE {s}.runs SET owner_token = %(token)s WHERE run_id = %(run)s AND (SELECT got FROM lock)
    RETURNING header, message_count
), owner AS (
    INSERT INTO {s}.owners (run_id, token, pid, host, "user", since, heartbeat, command, control, backend_pid)
    SELECT %(run)s, %(token)s, %(pid)s, %(host)s, %(user)s, %(since)s, %(heartbeat)s, %(command)s, %(control)s,
           pg_backend_pid()
    WHERE (SELECT got FROM lock)
    ON CONFLICT (run_id) DO UPDATE SET token = EXCLUDED.token, pid = EXCLUDED.pid, host = EXCLUDED.host,
        "user" = EXCLUDED."user", since = EXCLUDED.since, heartbeat = EXCLUDED.heartbeat,
        command = EXCLUDED.command, control = EXCLUDED.control, backend_pid = EXCLUDED.backend_pid
)
SELECT (SELECT got FROM lock), (SELECT header FROM run), (SELECT message_count FROM run),
       CASE WHEN (SELECT got FROM lock) THEN pg_notify(%(channel)s, %(notice)s) END,
       (SELECT lock_key FROM {s}.runs WHERE run_id = %(run)s)
"""
# The trace lines no save took (PgHandle._flush), fenced like a save. A line already there
# is the same line, sent again after a lost connection: kept.
FLUSH = """
WITH trace AS (
    INSERT INTO {s}.trace (run_id, seq, record)
    SELECT %(run)s, t.seq, t.record FROM unnest(%(seqs)s::bigint[], %(records)s::json[]) AS t(seq, record)
    WHERE (SELECT 1 / count(*)::int FROM {s}.runs WHERE run_id = %(run)s AND owner_token = %(token)s) = 1
    ON CONFLICT DO NOTHING
)
SELECT pg_notify(%(channel)s, %(trace)s)
"""


def dumps(obj: Any) -> str:
    """JSON text PostgreSQL takes: a NUL (which no text column holds) escaped, as JSON allows."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str).replace("\0", "\\u0000")


def notice(run_id: str, kind: str) -> str:
    """A notification's payload: ``{"run": ID, "kind": KIND}`` (a fixed contract: watchers
    in other processes, the console's among them, parse it)."""
    return json.dumps({"run": run_id, "kind": kind}, separators=(",", ":"))


@functools.lru_cache(maxsize=512)
def composed(schema: str, text: str) -> sql.SQL:
    composed = sql.SQL(text).format(s=sql.Identifier(schema), seed=sql.Literal(LOCK_SEED))
    return sql.SQL(composed.as_string())




def ensure_schema(conn: psycopg.Connection, schema: str, *, where: str, url: str) -> None:
    """Make the tables if they are missing (one maker at a time, by a transaction lock), and
    add the columns an earlier Tether's tables lack."""
    newest = f"{schema}.{NEWEST_TABLE}"
    tables = [f"{schema}.{table}" for table, columns in ADDED.items() for _ in columns]
    names = [name for columns in ADDED.values() for name in columns]
    exists, added = conn.execute(
        "SELECT to_regclass(%s), (SELECT count(*) FROM pg_attribute a JOIN unnest(%s::text[], %s::text[]) AS w(t, c) "
        "ON a.attrelid = to_regclass(w.t) AND a.attname = w.c WHERE NOT a.attisdropped AND a.attgenerated = '')",
        (newest, tables, names)).fetchone()
    if exists is not None:
        if added < len(names):
            _add_columns(conn, schema, where)
        return
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_SEED,))
            if conn.execute("SELECT to_regnamespace(%s)", (schema,)).fetchone()[0] is None:
                conn.execute(composed(schema, "CREATE SCHEMA {s}"))
            for statement in composed(schema, SCHEMA).as_string(conn).split(";"):
                if statement.strip():
                    conn.execute(statement)
    except psycopg.errors.InsufficientPrivilege as exc:
        if conn.execute("SELECT to_regclass(%s)", (f"{schema}.control",)).fetchone()[0] is not None:
            # The runs' tables of an earlier Tether, and a role that may not add the new
            # ones (the watcher's): the runs are readable; the operator's role adds them.
            log.warning("%s: the approvals' tables are missing and this role cannot make them; "
                        "they are made when the operator's role connects", where)
            return
        raise StoreUnavailable(f"{where}: the tables of schema {schema} are missing and this role "
                               f"cannot make them ({clean(exc, url)}); run {ROLES_SQL} "
                               f"as a superuser, then connect as the operator role") from None


def _add_columns(conn: psycopg.Connection, schema: str, where: str) -> None:
    """The columns added since the tables were made (:data:`ADDED`: who decided as which
    account, how many people a call needs, who started a run, what it cost): added by the role
    that owns the tables, and the runs' filled from their summaries; a role that may not (the
    watcher's) is told so, and reads what it can meanwhile. The runs' columns that were
    generated (:data:`RUN_COLUMNS`) are made plain, keeping their values. Under the table's
    lock: saves wait for it."""
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_SEED,))
            had = dict(conn.execute(
                "SELECT attname, attgenerated FROM pg_attribute WHERE attrelid = to_regclass(%s) "
                "AND attname = ANY(%s) AND NOT attisdropped", (f"{schema}.runs", list(RUN_COLUMNS))).fetchall())
            for table, columns in ADDED.items():
                added = ", ".join(f"ADD COLUMN IF NOT EXISTS {name} {kind}" for name, kind in columns.items())
                conn.execute(composed(schema, f"ALTER TABLE {{s}}.{table} {added}"))
            made_plain = [f"ALTER COLUMN {name} DROP EXPRESSION" for name, generated in had.items() if generated]
            if made_plain:
                conn.execute(composed(schema, f"ALTER TABLE {{s}}.runs {', '.join(made_plain)}"))
            filled = [f"{name} = {expression}" for name, (_, expression) in RUN_COLUMNS.items() if name not in had]
            if filled:
                conn.execute(composed(schema, f"UPDATE {{s}}.runs SET {', '.join(filled)}"))
    except psycopg.errors.InsufficientPrivilege:
        log.warning("%s: the tables lack this Tether's columns (%s) and this role cannot add them; they are added "
                    "when the operator's role connects", where, ", ".join(name for c in ADDED.values() for name in c))

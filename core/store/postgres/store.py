"""Runs in PostgreSQL: the run store (:mod:`tether.store.protocol`) for more than one machine.

``PgStore("postgresql://tether:…@host/tether")`` keeps every run in six tables of the
schema ``tether``, and the approvals in two more (made on first use;
``core/data/pg/roles.sql`` makes the roles):

* ``runs``: one row per run. ``header`` is the run without its transcript
  (:meth:`RunState.header`), ``summary`` what a listing shows (:class:`RunSummary`), and
  beside them the columns a listing sorts and filters on (``status``, ``created_at``...),
  ``message_count``, ``owner_token`` (the current owner's fencing token) and ``lock_key``,
  the run's advisory lock key (generated from its id).
* ``messages``: the transcript, append-only, one row per message, by run and index.
* ``trace``: the event trace, by run and ``seq``.
* ``ledger``: the idempotency ledger, by run and key.
* ``owners``: who holds a run (pid, host, user, since, heartbeat, command, control address,
  the server's backend pid), or last held it without letting go.
* ``control``: the control channel's requests, by run and index.
* ``rules``: the standing rules (:mod:`tether.approvals.rules`), ids ``R1``, ``R2``… from
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
connections for its reads and saves (``TETHER_PG_POOL``, :class:`_Pool`), and one more,
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
:meth:`PgHandle.asave`, which reads the state on the loop and commits from a worker thread.

Documents are stored as ``json``, not ``jsonb``: ``json`` keeps the text as written (a
transcript re-sent to a model is byte for byte what it was) and holds any string Python
can write, where ``jsonb`` refuses ``\\u0000`` (a hostile tool output or argument would
make a save fail) and reorders keys. Nothing queries inside these documents; what a
listing filters on is in columns.

Passwords never reach an error message: every error names the URL without its password.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import heapq
import itertools
import json
import logging
import os
import re
import select
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from tether.store.control import ControlRequest
from tether.store.index import (
    DECISION_COLUMNS, Liveness, RunSummary, _COLUMNS, decision_filter, decision_row, decisions_key, decisions_of,
)
from tether.run.ledger import LedgerEntry
from tether.run.state import RunState, StateError
from tether.store.files.store import Owner, SaveError, _whoami, kept_owner
from tether.observe.trace import stamped_line

if TYPE_CHECKING:
    from tether.approvals import DecisionQuery, DecisionRecord, Rule
    from tether.run.events import Event

log = logging.getLogger(__name__)

LOCK_SEED = 0x7E7E  # hashtextextended's seed: Tether's lock keys apart from other programs' hashes
CONNECT_TIMEOUT_S = 10
TRACE_FLUSH_S = 0.15
"""How long a trace line waits for a save before it is committed on its own: a watcher sees
a tool's events while it runs, and a killed process loses at most this window of them."""
def _seconds(name: str, default: float) -> float:
    try:
        value = float(os.environ[name])
    except (KeyError, ValueError):
        return default
    return value if value >= 0 else default


def _count(name: str, default: int) -> int:
    try:
        value = int(os.environ[name])
    except (KeyError, ValueError):
        return default
    return value if value >= 1 else default


POOL_SIZE = _count("TETHER_PG_POOL", 4)
"""The most connections a store opens for its reads and saves, whatever it does and however
many runs it holds (``TETHER_PG_POOL`` sets it; a worker takes more for a high
``--concurrency``, :func:`tether.workers.database.pool_size`). A caller finding them all in use waits
for one (at most :data:`POOL_WAIT_S`)."""
POOL_WAIT_S = 30.0
RECONNECT_S = _seconds("TETHER_PG_RECONNECT_S", 30.0)
"""How long an owner's save waits for a database that went away (a restart, a failover) to
come back, trying once a second, before it gives the run up (orphaned, so resumable).
``TETHER_PG_RECONNECT_S`` sets it."""
_RETRY_S = 1.0
# The owner's session: keepalives so that a vanished host's lock is dropped within ~25 s.
_SESSION_SETTINGS = {"tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "3"}
_NO_KEY = (-1, -1, -1)
_IDENT = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

_SCHEMA = """
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
    lock_key bigint GENERATED ALWAYS AS (hashtextextended(run_id, {seed})) STORED
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
    waited_s double precision,
    PRIMARY KEY (run_id, call_id)
);
CREATE INDEX IF NOT EXISTS decisions_ts ON {s}.decisions (ts);
"""
_NEWEST_TABLE = "decisions"  # made last: when it is there, so is every other
# A run's decisions, as a JSON array of rows, written over the rows of the same calls.
_PUT_DECISIONS = ("INSERT INTO {s}.decisions SELECT * FROM json_populate_recordset(NULL::{s}.decisions, "
                  "%(decisions)s::json) ON CONFLICT (run_id, call_id) DO UPDATE SET "
                  + ", ".join(f"{c} = EXCLUDED.{c}" for c in DECISION_COLUMNS[2:]))
# The advisory locks held in this database, as the bigint keys they were taken with.
_HELD = ("SELECT (l.classid::bigint << 32) | l.objid::bigint FROM pg_locks l "
         "WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted "
         "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())")
# A save: one statement, so one round trip and its own transaction. The run row's update is
# gated by a subquery that divides by zero unless the handle's token is still the run's, so a
# fenced owner's statement fails whole; the other inserts are data-modifying CTEs, which run
# whether or not the main query reads them. Messages and trace records go as arrays of their
# JSON text (``json`` keeps the text as written).
_SAVE_TEMPLATE = """
WITH run AS (
    UPDATE {{s}}.runs SET status = %(status)s, updated_at = %(updated_at)s, message_count = %(count)s,
        header = %(header)s, summary = %(summary)s
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
_SAVE = _SAVE_TEMPLATE.format(keep="", put_decisions=_PUT_DECISIONS)
# A retry after a lost connection may find the first try committed: the rows already there
# are the same rows, and are kept (decisions are written over, with the same values).
_SAVE_AGAIN = _SAVE_TEMPLATE.format(keep=" ON CONFLICT DO NOTHING", put_decisions=_PUT_DECISIONS)
# Taking a run: the lock tried once (a materialized CTE), and the token, the owner record and
# its notification only if it was free. A run that does not exist gives a row of NULLs.
_TAKE = """
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
_FLUSH = """
WITH trace AS (
    INSERT INTO {s}.trace (run_id, seq, record)
    SELECT %(run)s, t.seq, t.record FROM unnest(%(seqs)s::bigint[], %(records)s::json[]) AS t(seq, record)
    WHERE (SELECT 1 / count(*)::int FROM {s}.runs WHERE run_id = %(run)s AND owner_token = %(token)s) = 1
    ON CONFLICT DO NOTHING
)
SELECT pg_notify(%(channel)s, %(trace)s)
"""
_OWNER_COLUMNS = ("pid", "host", "user", "since", "heartbeat", "command", "control")


class StoreUnavailable(StateError):
    """The database could not be reached or used (the message never holds a password)."""


class _Lost(SaveError):
    """An owner's session went away with the server (the run may still be the owner's)."""


def redact(url: str) -> str:
    """``url`` without its password (``postgresql://tether:***@host/db``)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "postgresql://***"
    if parts.password is None:
        out = url
    else:
        netloc = parts.netloc.rsplit("@", 1)
        userinfo = netloc[0].split(":", 1)[0] + ":***"
        out = urlunsplit(parts._replace(netloc=f"{userinfo}@{netloc[1]}"))
    # A password may also ride in the query (?password=...).
    return re.sub(r"(?i)(password=)[^&]*", r"\1***", out)


def _password(url: str) -> str | None:
    with contextlib.suppress(ValueError):
        return urlsplit(url).password
    return None


def _dumps(obj: Any) -> str:
    """JSON text PostgreSQL takes: a NUL (which no text column holds) escaped, as JSON allows."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), default=str).replace("\0", "\\u0000")


# The kinds of change a notification on the store's channel names (tether.store.files.watch's words).
NEW, JOURNAL, TRACE, OWNER = "new", "journal", "trace", "owner"


def _notice(run_id: str, kind: str) -> str:
    """A notification's payload: ``{"run": ID, "kind": KIND}`` (a fixed contract: watchers
    in other processes, the console's among them, parse it)."""
    return json.dumps({"run": run_id, "kind": kind}, separators=(",", ":"))


_NOTIFY = "SELECT pg_notify(%s, %s)"


def _address_in(address: str | None) -> str | None:
    """A control address as a text column holds it: an abstract socket's leading NUL as ``@``."""
    return "@" + address[1:] if address and address.startswith("\0") else address


def _address_out(address: str | None) -> str | None:
    return "\0" + address[1:] if address and address.startswith("@") else address


def _check_id(run_id: str) -> str:
    if not run_id or "\0" in run_id or "/" in run_id or run_id in (".", ".."):
        raise StateError(f"invalid run id {run_id!r}")
    return run_id


def _summary_json(state: RunState) -> str:
    summary = RunSummary.of(state, _NO_KEY)
    return _dumps({name: getattr(summary, name) for name in _COLUMNS})


def _decisions_json(state: RunState) -> str:
    """The run's decisions as the JSON array :data:`_PUT_DECISIONS` takes. A text column
    holds no NUL (a hostile model's arguments may): it is kept as its JSON escape, as text."""
    from tether.approvals import records_of

    def text(value: Any) -> Any:
        return value.replace("\0", "\\u0000") if isinstance(value, str) else value

    return _dumps([{c: text(v) for c, v in zip(DECISION_COLUMNS, decision_row(r))} for r in records_of(state)])


def _summary(data: dict[str, Any]) -> RunSummary:
    return RunSummary(**{name: data.get(name) for name in _COLUMNS if name in data})


# The keeper of a run saved running (tether.integrations.keeper: Claude Code's process, between its hooks).
_KEEPER = "CASE WHEN r.status = 'running' THEN r.header->'agent'->'spec'->'keeper' END"


def _owner(row: tuple[Any, ...] | None, alive: bool, kept: Any = None) -> Owner | None:
    if not alive and kept is not None:
        keeper = kept_owner(kept)
        if keeper is not None:  # nobody holds it, but its keeper lives
            return keeper
    if row is None:
        return Owner(alive=True) if alive else None
    record = dict(zip(_OWNER_COLUMNS, row))
    record["control"] = _address_out(record["control"])
    return Owner(**record, alive=alive)


class _Db:
    """One connection, opened on first use, one thread at a time; errors in words."""

    def __init__(self, url: str, *, session: dict[str, str] | None = None) -> None:
        self.url = url
        self._session = session or {}
        self._conn: psycopg.Connection | None = None
        self.lock = threading.RLock()

    def connect(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = _connect(self.url, self._session)
        return self._conn

    @property
    def held(self) -> psycopg.Connection | None:
        return self._conn

    def close(self) -> None:
        with self.lock:
            if self._conn is not None:
                with contextlib.suppress(psycopg.Error):
                    self._conn.close()
                self._conn = None

    def abandon(self) -> None:
        """Drop the connection at once, with no goodbye: one in an unknown state is never
        used again (and the tests act out a killed process with it)."""
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.pgconn.finish()
            self._conn = None


def _stale(conn: psycopg.Connection) -> bool:
    """An idle connection the server has ended (a restart, an idle timeout): its socket is
    readable (the server's last words, or end of file) though nothing was asked. A
    connection that LISTENs is not idle in this sense: do not ask this of one."""
    if conn.closed or conn.broken:
        return True
    try:
        readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return True
    return bool(readable)


def _connect(url: str, session: dict[str, str]) -> psycopg.Connection:
    options = " ".join(f"-c {k}={v}" for k, v in session.items())
    try:
        kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S,
                                  "application_name": "tether"}
        if options:
            kwargs["options"] = options
        return psycopg.connect(url, **kwargs)
    except Exception as exc:  # psycopg may quote the connection string: say it again without the password
        raise StoreUnavailable(f"cannot connect to {redact(url)}: {_clean(exc, url)}") from None


def _clean(exc: BaseException, url: str) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__  # one line: libpq adds hints on lines of their own
    secret = _password(url)
    if secret:
        text = text.replace(secret, "***")
    return text.replace(url, redact(url))


class _Pool:
    """A store's connections for reads and saves: at most ``size`` open at once, kept open
    between uses; a caller finding them all lent waits for one (at most :data:`POOL_WAIT_S`).
    A call made inside another on the same thread gets the same connection, so nesting never
    waits for a second one.

    Not psycopg_pool: its pool connects in background threads and, after the server was away,
    tries again on a backoff of its own, so a save after a database restart waited past the
    owner's retry window (tests/processes/test_pg_restart.py); here a connection is made by
    the caller that needs it, so a server that is away says why at once, in words, and one
    that is back is used at the next try. One the server ended meanwhile is found by a socket
    poll before it is lent (no round trip), and replaced."""

    def __init__(self, url: str, size: int) -> None:
        self.url = url
        self.size = size
        self._idle: list[psycopg.Connection] = []
        self._guard = threading.Lock()
        self._slots = threading.BoundedSemaphore(size)
        self._local = threading.local()

    def _take(self) -> psycopg.Connection:
        while True:
            with self._guard:
                conn = self._idle.pop() if self._idle else None
            if conn is None:
                return _connect(self.url, {})
            if not _stale(conn):
                return conn
            with contextlib.suppress(psycopg.Error):
                conn.close()

    def _give(self, conn: psycopg.Connection) -> None:
        usable = not conn.closed and not conn.broken \
            and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        if usable:
            with self._guard:
                self._idle.append(conn)
            return
        with contextlib.suppress(psycopg.Error):
            conn.close()

    @contextlib.contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        held = getattr(self._local, "conn", None)
        if held is not None:
            yield held
            return
        if not self._slots.acquire(timeout=POOL_WAIT_S):
            raise StoreUnavailable(f"{redact(self.url)}: none of this process's {self.size} connections to the "
                                   f"database was free within {POOL_WAIT_S:.0f} s")
        try:
            conn = self._take()
            self._local.conn = conn
            try:
                yield conn
            finally:
                self._local.conn = None
                self._give(conn)
        finally:
            self._slots.release()

    def close(self) -> None:
        with self._guard:
            idle, self._idle = self._idle, []
        for conn in idle:
            with contextlib.suppress(psycopg.Error):
                conn.close()


class _Flushes:
    """A store's trace timer: one thread that, :data:`TRACE_FLUSH_S` after a run's first line
    no save took, hands that run's flush to a few reused threads. A timer thread per run and
    window cost a thread start each time (about a twentieth of a busy worker's CPU)."""

    def __init__(self, workers: int) -> None:
        self._workers = workers
        self._due: list[tuple[float, int, Callable[[], None]]] = []
        self._cond = threading.Condition()
        self._order = itertools.count()
        self._thread: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._closed = False

    def later(self, flush: Callable[[], None]) -> None:
        with self._cond:
            heapq.heappush(self._due, (time.monotonic() + TRACE_FLUSH_S, next(self._order), flush))
            if self._thread is None:
                self._closed = False
                self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix="tether trace flush")
                self._thread = threading.Thread(target=self._run, args=(self._pool,), name="tether trace timer",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self, pool: ThreadPoolExecutor) -> None:
        while True:
            with self._cond:
                if self._closed:
                    return
                if not self._due:
                    self._cond.wait()
                    continue
                wait = self._due[0][0] - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                _, _, flush = heapq.heappop(self._due)
            pool.submit(flush)

    def close(self) -> None:
        """Stop the timer; lines still waiting are committed by their handle's release."""
        with self._cond:
            self._closed = True
            self._due.clear()
            thread, self._thread = self._thread, None
            pool, self._pool = self._pool, None
            self._cond.notify()
        if thread is not None:
            thread.join()
        if pool is not None:
            pool.shutdown(wait=True)


class _Holds:
    """A store's holding session: the advisory lock of every run the store owns, taken and let
    go of on this one connection, and those runs by id. A session's advisory locks are
    re-entrant, so a second open of a run this store holds is refused here, as another
    process's would be by the lock. ``generation`` counts the sessions: a handle whose lock
    was taken in an earlier one has lost it (the server ended that session) and takes it
    again, fenced by its token (:meth:`PgHandle._reattach`)."""

    def __init__(self, url: str) -> None:
        self._db = _Db(url, session=_SESSION_SETTINGS)
        self.lock = self._db.lock
        self.generation = 0
        self.held: dict[str, PgHandle] = {}

    def session(self) -> tuple[psycopg.Connection, int]:
        """The session and its generation (called holding :attr:`lock`): a new one when the
        server ended the last (every lock of the old one is gone with it)."""
        conn = self._db.held
        if conn is not None and _stale(conn):
            self._db.abandon()
            conn = None
        if conn is None:
            conn = self._db.connect()
            self.generation += 1
        return conn, self.generation

    def broken(self) -> None:
        """A statement on the session failed with the connection: drop it (its locks are gone)."""
        self._db.abandon()

    def unlock(self, key: int | None, generation: int | None) -> None:
        """Let go of one run's lock, if it is still this session's (best effort: a session that
        is gone has let go of it already)."""
        with self.lock:
            conn = self._db.held
            if key is None or conn is None or generation != self.generation:
                return
            try:
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
            except psycopg.Error:
                self._db.abandon()

    def close(self) -> None:
        self._db.close()


class PgStore:
    """All runs in one PostgreSQL database (see the module)."""

    blocking = True

    def __init__(self, url: str, *, schema: str = "tether", pool_size: int | None = None) -> None:
        if not _IDENT.match(schema):
            raise ValueError(f"invalid schema name {schema!r}")
        self.url = url
        self.schema = schema
        self._pool = _Pool(url, POOL_SIZE if pool_size is None else max(1, pool_size))
        self._holds = _Holds(url)
        self._flushes = _Flushes(self._pool.size)
        self._ready = False

    def __repr__(self) -> str:
        return f"PgStore({redact(self.url)!r}, schema={self.schema!r})"

    @property
    def where(self) -> str:
        return redact(self.url)

    @property
    def channel(self) -> str:
        """The channel every change to a run is notified on, in the change's own transaction:
        ``tether_<schema>``, payload ``{"run": ID, "kind": "new"|"journal"|"trace"|"owner"}``."""
        return f"tether_{self.schema}"

    @property
    def control_channel(self) -> str:
        """The channel control requests are notified on (:mod:`tether.store.postgres.control`):
        ``tether_<schema>_control``, payload ``{"run": ID, "id": REQUEST_ID, "to": OWNER_ADDRESS}``."""
        return f"tether_{self.schema}_control"

    def control_server(self) -> Any:
        """What a harness on this store takes control requests behind: a LISTEN on the
        database (:class:`tether.store.postgres.control.PgControlServer`), reachable from any host."""
        from tether.store.postgres.control import PgControlServer

        return PgControlServer(self)

    def read_only(self) -> str | None:
        """The role's name when it may read the runs but not change them (the watcher's),
        else None: asked of the database, which is what decides."""
        with self._conn() as conn:
            user, may = conn.execute(
                "SELECT current_user, has_table_privilege(%s, 'UPDATE') AND has_table_privilege(%s, 'INSERT')",
                (f"{self.schema}.runs", f"{self.schema}.control")).fetchone()
        return None if may else str(user)

    def send(self, channel: str, payload: str) -> None:
        """One notification, on its own (a control request's reply)."""
        with self._conn() as conn:
            conn.execute(_NOTIFY, (channel, payload))

    def notify(self, conn: psycopg.Connection, run_id: str, kind: str) -> None:
        """Queue a notification in ``conn``'s transaction: sent at its commit, or never."""
        conn.execute(_NOTIFY, (self.channel, _notice(run_id, kind)))

    def close(self) -> None:
        """Close the pool, and the holding session (with the locks of any run still held)."""
        self._flushes.close()
        self._pool.close()
        self._holds.close()

    # ---- plumbing ------------------------------------------------------------------------
    def q(self, text: str) -> sql.SQL:
        """``text`` with ``{s}`` as this store's schema (composed once per text: a busy worker
        sends the same few statements thousands of times)."""
        return _composed(self.schema, text)

    @contextlib.contextmanager
    def _conn(self) -> Iterator[psycopg.Connection]:
        """A connection from the store's pool, for one thread at a time (the same one again to
        a call nested in another on the same thread)."""
        with self._pool.connection() as conn:
            if not self._ready:
                self.ensure_schema(conn)
            try:
                yield conn
            except psycopg.OperationalError as exc:
                raise StoreUnavailable(f"{redact(self.url)}: {_clean(exc, self.url)}") from None

    def ensure_schema(self, conn: psycopg.Connection) -> None:
        """Make the tables if they are missing (one maker at a time, by a transaction lock)."""
        exists = conn.execute("SELECT to_regclass(%s)", (f"{self.schema}.{_NEWEST_TABLE}",)).fetchone()[0]
        if exists is None:
            try:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_SEED,))
                    if conn.execute("SELECT to_regnamespace(%s)", (self.schema,)).fetchone()[0] is None:
                        conn.execute(self.q("CREATE SCHEMA {s}"))
                    for statement in self.q(_SCHEMA).as_string(conn).split(";"):
                        if statement.strip():
                            conn.execute(statement)
            except psycopg.errors.InsufficientPrivilege as exc:
                if conn.execute("SELECT to_regclass(%s)", (f"{self.schema}.control",)).fetchone()[0] is not None:
                    # The runs' tables of an earlier Tether, and a role that may not add the new
                    # ones (the watcher's): the runs are readable; the operator's role adds them.
                    log.warning("%s: the approvals' tables are missing and this role cannot make them; "
                                "they are made when the operator's role connects", self.where)
                    self._ready = True
                    return
                raise StoreUnavailable(f"{self.where}: the tables of schema {self.schema} are missing and this role "
                                       f"cannot make them ({_clean(exc, self.url)}); run core/data/pg/roles.sql "
                                       f"as a superuser, then connect as the operator role") from None
        self._ready = True

    # ---- creating and reading ------------------------------------------------------------
    def exists(self, run_id: str) -> bool:
        with self._conn() as conn:
            return conn.execute(self.q("SELECT 1 FROM {s}.runs WHERE run_id = %s"),
                                (_check_id(run_id),)).fetchone() is not None

    def run_ids(self) -> list[str]:
        with self._conn() as conn:
            return [r[0] for r in conn.execute(self.q("SELECT run_id FROM {s}.runs ORDER BY run_id"))]

    def create(self, state: RunState) -> None:
        """The run row and its first messages, in one transaction; an id that exists is refused."""
        _check_id(state.run_id)
        header = state.header()
        with self._conn() as conn:
            try:
                with conn.transaction():
                    conn.execute(self.q(
                        "INSERT INTO {s}.runs (run_id, status, parent_run_id, created_at, updated_at, "
                        "message_count, header, summary) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"),
                        (state.run_id, state.status.value, state.parent_run_id, state.created_at, state.updated_at,
                         len(state.messages), _dumps(header), _summary_json(state)))
                    if state.messages:
                        with conn.cursor() as cur:
                            cur.executemany(self.q("INSERT INTO {s}.messages (run_id, idx, message) VALUES (%s, %s, %s)"),
                                            [(state.run_id, i, _dumps(m)) for i, m in enumerate(state.messages)])
                    if state.approvals:
                        conn.execute(self.q(_PUT_DECISIONS), {"decisions": _decisions_json(state)})
                    self.notify(conn, state.run_id, NEW)
            except psycopg.errors.UniqueViolation:
                raise StateError(f"run {state.run_id} already exists") from None

    def load(self, run_id: str) -> RunState:
        with self._conn() as conn:
            return _load(conn, self, run_id)

    # ---- summaries ---------------------------------------------------------------------
    def summaries(self, *, live_only: bool = False, problems: dict[str, str] | None = None) -> list[RunSummary]:
        """Every run's summary from the runs table, oldest first; a running run's liveness
        from ``pg_locks`` and its owner from ``owners``, in the same query."""
        where = "WHERE r.status = 'running' OR r.summary->'interruption'->>'type' = 'approval'" if live_only else ""
        with self._conn() as conn:
            rows = conn.execute(self.q(
                f"SELECT r.run_id, r.summary, r.status = 'running' AND r.lock_key IN ({_HELD}), "
                f"o.pid, o.host, o.\"user\", o.since, o.heartbeat, o.command, o.control, o.run_id IS NOT NULL, "
                f"{_KEEPER} FROM {{s}}.runs r LEFT JOIN {{s}}.owners o USING (run_id) {where} "
                f"ORDER BY r.created_at")).fetchall()
            queued = self._queued(conn)
        out = []
        for run_id, data, alive, *owner, has_owner, kept in rows:
            try:
                summary = _summary(data)
            except TypeError as exc:
                if problems is not None:
                    problems[run_id] = f"unreadable summary: {exc}"
                continue
            if summary.status == "running":
                summary.liveness = "running" if alive else "queued" if run_id in queued else "orphaned"
                summary.owner = _owner(tuple(owner) if has_owner else None, bool(alive))
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
                f"SELECT r.summary, r.lock_key IN ({_HELD}) FROM {{s}}.runs r WHERE r.run_id = %s"),
                (_check_id(run_id),)).fetchone()
            queued = self._queued(conn, run_id) if row is not None and not row[1] else set()
        if row is None:
            raise StateError(f"no run {run_id} in {self.where}")
        summary = _summary(row[0])
        if summary.status == "running":
            summary.liveness = "running" if row[1] else "queued" if run_id in queued else "orphaned"
            summary.owner = self.owner(run_id)
            if summary.owner is not None and summary.owner.kept:
                summary.liveness = "running"
        return summary

    def liveness(self, run_id: str) -> Liveness | None:
        return self.summary(run_id).liveness

    def owner(self, run_id: str) -> Owner | None:
        with self._conn() as conn:
            row = conn.execute(self.q(
                f"SELECT r.lock_key IN ({_HELD}), o.pid, o.host, o.\"user\", o.since, o.heartbeat, o.command, "
                f"o.control, o.run_id IS NOT NULL, {_KEEPER} FROM {{s}}.runs r "
                f"LEFT JOIN {{s}}.owners o USING (run_id) WHERE r.run_id = %s"), (_check_id(run_id),)).fetchone()
        if row is None:
            return None
        alive, *owner, has_owner, kept = row
        return _owner(tuple(owner) if has_owner else None, bool(alive), kept)

    # ---- the control channel and the trace --------------------------------------------------
    def control_append(self, run_id: str, request: ControlRequest) -> None:
        """One transaction: the run row's counter gives the index, and its row lock makes
        requests visible in index order."""
        from dataclasses import asdict

        with self._conn() as conn, conn.transaction():
            row = conn.execute(self.q("UPDATE {s}.runs SET control_count = control_count + 1 WHERE run_id = %s "
                                      "RETURNING control_count"), (_check_id(run_id),)).fetchone()
            if row is None:
                raise StateError(f"no run {run_id} in {self.where}")
            conn.execute(self.q("INSERT INTO {s}.control (run_id, idx, request) VALUES (%s, %s, %s)"),
                         (run_id, row[0], _dumps(asdict(request))))
            # Told to the owner whose address is on record now, at the commit (tether.store.postgres.control).
            conn.execute(self.q(
                "SELECT pg_notify(%s, json_build_object('run', %s::text, 'id', %s::text, "
                "'to', (SELECT control FROM {s}.owners WHERE run_id = %s))::text)"),
                (self.control_channel, run_id, request.id, run_id))

    def control_read(self, run_id: str, seen: int) -> list[ControlRequest]:
        with self._conn() as conn:
            return _control_read(conn, self, run_id, seen)

    def read_trace(self, run_id: str, after_seq: int = 0) -> Iterator[dict[str, Any]]:
        """The run's trace records with ``seq`` above ``after_seq`` (all of them by default),
        in order: a follower passes the last ``seq`` it read and gets only the new lines."""
        with self._conn() as conn:
            rows = conn.execute(self.q("SELECT record FROM {s}.trace WHERE run_id = %s AND seq > %s ORDER BY seq"),
                                (_check_id(run_id), after_seq)).fetchall()
        return iter([r[0] for r in rows if isinstance(r[0], dict)])

    # ---- for followers (the console): what changed, read without reading everything ----
    def check(self) -> None:
        """Connect now (the operator's first connection makes the tables): a store that
        cannot be reached is a :class:`StoreUnavailable` here, in words, not later."""
        with self._conn():
            pass

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
                                       "ORDER BY seq DESC LIMIT %s"), (_check_id(run_id), upto_seq, limit)).fetchall()
        return [record for (record,) in reversed(rows) if isinstance(record, dict)]

    def load_after(self, run_id: str, before: RunState) -> RunState:
        """The run now, given ``before``, an earlier state of it: only the header and the
        messages added since are read (the transcript is append-only), in one snapshot."""
        with self._conn() as conn:
            with conn.transaction():
                header, count = _head(conn, self, run_id)
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
        wanted = [_check_id(r) for r in run_ids]
        if not wanted:
            return {}
        with self._conn() as conn:
            rows = conn.execute(self.q(
                f"SELECT r.run_id, r.lock_key IN ({_HELD}), o.pid, o.host, o.\"user\", o.since, o.heartbeat, "
                f"o.command, o.control, o.run_id IS NOT NULL, {_KEEPER} FROM {{s}}.runs r "
                f"LEFT JOIN {{s}}.owners o USING (run_id) WHERE r.run_id = ANY(%s)"), (wanted,)).fetchall()
        out: dict[str, Owner | None] = dict.fromkeys(wanted)
        for rid, alive, *owner, has_owner, kept in rows:
            out[rid] = _owner(tuple(owner) if has_owner else None, bool(alive), kept)
        return out

    def append_event(self, run_id: str, event: Event) -> None:
        """Append to the trace of a run nobody holds; a held run's trace is its owner's to
        number, so then the event is dropped (and logged)."""
        with self._conn() as conn, conn.transaction():
            got = conn.execute(self.q("SELECT pg_try_advisory_xact_lock(lock_key) FROM {s}.runs WHERE run_id = %s"),
                               (_check_id(run_id),)).fetchone()
            if got is None:
                raise StateError(f"no run {run_id} in {self.where}")
            if not got[0]:
                log.warning("run %s is held by another process: its %s event was not traced", run_id, event.kind)
                return
            seq = conn.execute(self.q("SELECT coalesce(max(seq), 0) FROM {s}.trace WHERE run_id = %s"),
                               (run_id,)).fetchone()[0] + 1
            event.seq, event.ts, event.run_id = seq, time.time(), run_id
            conn.execute(self.q("INSERT INTO {s}.trace (run_id, seq, record) VALUES (%s, %s, %s)"),
                         (run_id, seq, _dumps(event.record())))
            self.notify(conn, run_id, TRACE)

    # ---- approvals: the standing rules and the record of decisions ---------------------------
    def rules(self) -> list[Rule]:
        """Every rule, oldest first: one small query (the rules are few)."""
        from tether.approvals import Rule

        with self._conn() as conn:
            rows = conn.execute(self.q("SELECT id, rule FROM {s}.rules ORDER BY number")).fetchall()
        return [Rule.from_dict({**data, "id": rule_id}) for rule_id, data in rows]

    def rule_add(self, rule: Rule) -> Rule:
        """Kept under ``R`` and the sequence's next number."""
        from dataclasses import replace

        data = {k: v for k, v in rule.to_dict().items() if k != "id"}
        with self._conn() as conn:
            (rule_id,) = conn.execute(self.q(
                "INSERT INTO {s}.rules (id, number, rule) SELECT 'R' || n, n, %s "
                "FROM (SELECT nextval(%s) AS n) AS next RETURNING id"),
                (_dumps(data), f"{self.schema}.rule_numbers")).fetchone()
        return replace(rule, id=rule_id)

    def rule_remove(self, rule_id: str) -> Rule:
        from tether.approvals import Rule, RuleError

        with self._conn() as conn:
            row = conn.execute(self.q("DELETE FROM {s}.rules WHERE id = %s RETURNING rule"), (rule_id,)).fetchone()
        if row is None:
            raise RuleError(f"no rule {rule_id} on this store; tether rules lists them")
        return Rule.from_dict({**row[0], "id": rule_id})

    def decisions(self, query: DecisionQuery) -> list[DecisionRecord]:
        """From the ``decisions`` table, newest first."""
        where, params = decision_filter(
            query, approver="EXISTS (SELECT 1 FROM json_array_elements_text(approvers::json) AS a WHERE a = %s)")
        text = f"SELECT {', '.join(DECISION_COLUMNS)} FROM {{s}}.decisions{where} ORDER BY ts DESC, run_id DESC, call_id DESC"
        if query.limit is not None:
            text += " LIMIT %s"
            params.append(query.limit)
        with self._conn() as conn:
            return decisions_of(conn.execute(self.q(text), params).fetchall())

    # ---- owning a run -----------------------------------------------------------------
    def open(self, run_id: str, *, control: str | None = None) -> tuple[RunState, PgHandle]:
        """Take the run's advisory lock on the store's holding session and load the run; a run
        another session holds is refused in words."""
        _check_id(run_id)
        with self._conn():  # the tables exist before the handle's session looks for them
            pass
        handle = PgHandle(self, run_id)
        try:
            state = handle.acquire(control=control)
        except BaseException:
            handle.release()
            raise
        return state, handle


@functools.lru_cache(maxsize=512)
def _composed(schema: str, text: str) -> sql.SQL:
    composed = sql.SQL(text).format(s=sql.Identifier(schema), seed=sql.Literal(LOCK_SEED))
    return sql.SQL(composed.as_string())


def _head(conn: psycopg.Connection, store: PgStore, run_id: str) -> tuple[Any, int]:
    """In a transaction just begun: make it one snapshot, and read the run's header and how
    many messages it counts."""
    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    row = conn.execute(store.q("SELECT header, message_count FROM {s}.runs WHERE run_id = %s"),
                       (_check_id(run_id),)).fetchone()
    if row is None:
        raise StateError(f"no run {run_id} in {store.where}")
    return row[0], row[1]


def _load(conn: psycopg.Connection, store: PgStore, run_id: str) -> RunState:
    with conn.transaction():  # one snapshot: the header and the messages it counts
        header, count = _head(conn, store, run_id)
        messages = [m for (m,) in conn.execute(
            store.q("SELECT message FROM {s}.messages WHERE run_id = %s AND idx < %s ORDER BY idx"), (run_id, count))]
    if len(messages) != count:
        raise StateError(f"run {run_id}: {len(messages)} messages stored, its header says {count}")
    return RunState.from_dict({**header, "messages": messages})


def _control_read(conn: psycopg.Connection, store: PgStore, run_id: str, seen: int) -> list[ControlRequest]:
    out = []
    for (data,) in conn.execute(store.q("SELECT request FROM {s}.control WHERE run_id = %s AND idx > %s "
                                        "ORDER BY idx"), (run_id, seen)):
        try:
            out.append(ControlRequest.from_dict(data))
        except (ValueError, KeyError, TypeError):
            out.append(ControlRequest(kind="stop", text="", id="unreadable", by="?"))  # keeps the count right
    return out


class PgHandle:
    """One process's hold on one run: the run's advisory lock, on the store's holding session,
    and the owner token every save of the run (through the store's pool) is fenced by."""

    blocking = True

    def __init__(self, store: PgStore, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self._holds = store._holds
        self._lock = threading.RLock()  # one save, flush or release of this run at a time
        self._key: int | None = None  # the run's lock key
        self._generation: int | None = None  # the holding session the lock was taken on
        self._token: str | None = None
        self._owner: dict[str, Any] | None = None
        self._messages = 0
        self._seq = 0
        self._trace_lines: list[tuple[int, str]] = []  # emitted since the last save
        self._done: dict[str, str] = {}  # ledger results recorded since the last save
        self._buffers = threading.Lock()
        self._ledger: PgLedger | None = None
        self._released = False
        self._flusher: object | None = None  # armed by the first line no save has taken (_arm)
        self._lost = False  # a statement's connection went away; the run may still be ours
        self._saving = 0  # saves whose lines are taken but not committed yet
        self._decided: tuple[Any, ...] | None = None  # the decisions the table holds (index.decisions_key)

    @property
    def scratch_dir(self) -> None:
        return None

    @property
    def owner(self) -> dict[str, Any] | None:
        return dict(self._owner) if self._owner is not None else None

    def _q(self, text: str) -> sql.SQL:
        return self.store.q(text)

    @contextlib.contextmanager
    def _conn(self) -> Iterator[psycopg.Connection]:
        """A connection of the store's pool, once this handle's lock is known to be held: a
        holding session the server ended is replaced first, and the lock taken again
        (:meth:`_reattach`)."""
        with self._lock:
            if self._released:
                raise SaveError(f"run {self.run_id}: this process no longer holds it")
            holds = self._holds
            # The holding session is looked at unless another run of this store is using it
            # this instant (that one finds it ended, if it is, and each run then takes its
            # lock again): a save never waits for another run's open.
            if self._token is not None and holds.lock.acquire(
                    blocking=self._lost or self._generation != holds.generation):
                try:
                    try:
                        session, generation = holds.session()
                    except StoreUnavailable as exc:
                        self._lost = True
                        raise _Lost(f"run {self.run_id}: the database {self.store.where} is not back: {exc}") from None
                    if self._lost or generation != self._generation:
                        self._reattach(session, generation)
                finally:
                    holds.lock.release()
            try:
                with self.store._pool.connection() as conn:
                    yield conn
            except (psycopg.OperationalError, psycopg.InterfaceError, StoreUnavailable) as exc:
                # The statement's connection is gone (the pool drops it). The run is still
                # ours if nobody took it meanwhile: the next use checks the lock and the token.
                self._lost = self._token is not None
                words = _clean(exc, self.store.url) if isinstance(exc, psycopg.Error) else str(exc)
                raise _Lost(f"run {self.run_id}: lost the connection to {self.store.where}: {words}") from None

    def _reattach(self, session: psycopg.Connection, generation: int) -> None:
        """After a lost connection (called holding the holding session's lock): on a holding
        session that is new, the run's lock taken again and the token checked, so the run goes
        on only if no other process took it while the database was away."""
        if generation == self._generation:
            self._lost = False  # only a pooled connection was lost: the lock is held still
            return
        try:
            got = session.execute(self._q("SELECT pg_try_advisory_lock(lock_key), owner_token FROM {s}.runs "
                                          "WHERE run_id = %s"), (self.run_id,)).fetchone()
            if got is None or not got[0] or got[1] != self._token:
                if got is not None and got[0]:
                    session.execute("SELECT pg_advisory_unlock(%s)", (self._key,))
                self._token = None
                self._lost = False
                self._let_go()
                raise SaveError(f"run {self.run_id}: lost the connection to {self.store.where}, and another "
                                f"process took the run meanwhile; this process lets go of it")
            session.execute(self._q("UPDATE {s}.owners SET backend_pid = pg_backend_pid() WHERE run_id = %s "
                                    "AND token = %s"), (self.run_id, self._token))
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            self._holds.broken()
            self._lost = True
            raise _Lost(f"run {self.run_id}: the database {self.store.where} is not back: "
                        f"{_clean(exc, self.store.url)}") from None
        self._generation = generation
        self._lost = False
        log.warning("run %s: the connection to %s was lost and is back; the run goes on", self.run_id, self.store.where)

    def _let_go(self) -> None:
        """No longer this store's run: a later open of it here is not refused."""
        with self._holds.lock:
            if self._holds.held.get(self.run_id) is self:
                del self._holds.held[self.run_id]

    def acquire(self, *, control: str | None = None) -> RunState:
        """Take the run, then load it: the lock, the token, the owner record and its
        notification in one statement on the holding session (which writes nothing unless the
        lock was free), then the messages and the last ``seq`` through the pool."""
        token = uuid.uuid4().hex
        now = time.time()
        owner = {"pid": os.getpid(), **_whoami(), "since": now, "heartbeat": now}
        if control is not None:
            owner["control"] = control
        with self._lock:
            pauses = iter((0.0005, 0.001, 0.002, 0.004))  # a note being traced holds the lock for an instant
            while True:
                taken = self._take(token, owner)
                if taken is not None:
                    header, count = taken
                    break
                pause = next(pauses, None)
                if pause is None:
                    other = self.store.owner(self.run_id)
                    who = (f" (pid {other.pid} on {other.host})"
                           if other is not None and other.pid is not None else "")
                    raise StateError(f"run {self.run_id} is already being run by another process{who}: it "
                                     f"holds the run's lock in the database {self.store.where}; wait for it, "
                                     f"or stop it")
                time.sleep(pause)
            self._token, self._owner = token, owner
            try:
                with self.store._pool.connection() as conn, conn.pipeline():
                    # Nobody else writes a run whose lock this process holds: one snapshot is not needed.
                    messages = conn.execute(self._q("SELECT message FROM {s}.messages WHERE run_id = %s "
                                                    "ORDER BY idx"), (self.run_id,))
                    last = conn.execute(self._q("SELECT coalesce(max(seq), 0) FROM {s}.trace WHERE run_id = %s"),
                                        (self.run_id,))
                loaded = [m for (m,) in messages.fetchall()][:count]
                seq = last.fetchone()[0]
            except psycopg.OperationalError as exc:
                raise StoreUnavailable(f"{self.store.where}: {_clean(exc, self.store.url)}") from None
            if len(loaded) != count:
                raise StateError(f"run {self.run_id}: {len(loaded)} messages stored, its header says {count}")
            state = RunState.from_dict({**header, "messages": loaded})
            self._seq = seq
            self._messages = len(state.messages)
            self._decided = () if not state.approvals else None  # written again by the first save
            return state

    def _take(self, token: str, owner: dict[str, Any]) -> tuple[dict[str, Any], int] | None:
        """The taking statement (:data:`_TAKE`) on the holding session: the run's header and
        message count, or None when another session holds the lock (nothing was written);
        StateError when there is no such run, or when this store holds it already."""
        run_id = self.run_id
        holds = self._holds
        with holds.lock:
            if run_id in holds.held:
                raise StateError(f"run {run_id} is already being run by another process (this one, pid "
                                 f"{os.getpid()}, holds it); wait for it, or stop it")
            params = {"run": run_id, "token": token, "pid": owner["pid"], "host": owner.get("host"),
                      "user": owner.get("user"), "since": owner["since"], "heartbeat": owner["heartbeat"],
                      "command": owner.get("command"), "control": _address_in(owner.get("control")),
                      "channel": self.store.channel, "notice": _notice(run_id, OWNER)}
            for fresh in (False, True):
                try:
                    session, generation = holds.session()
                    got, header, count, _, key = session.execute(self._q(_TAKE), params).fetchone()
                    break
                except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                    # A session the server has since ended: once more, on a new one.
                    holds.broken()
                    if fresh:
                        raise StoreUnavailable(f"{self.store.where}: {_clean(exc, self.store.url)}") from None
            if got is None:
                raise StateError(f"no run {run_id} in {self.store.where}")
            if not got:
                return None
            holds.held[run_id] = self
            self._key, self._generation = key, generation
        return header, count

    # ---- saving -------------------------------------------------------------------------
    def _snapshot(self, state: RunState) -> tuple[Any, ...]:
        """What a save writes, read from the state now (on the caller's thread), and the
        trace lines and ledger results waiting for it, taken out of their buffers."""
        with self._buffers:
            lines, self._trace_lines = self._trace_lines, []
            done, self._done = self._done, {}
            self._saving += 1
        new = [(self.run_id, i, _dumps(m)) for i, m in enumerate(state.messages[self._messages:], self._messages)]
        decided = decisions_key(state)
        decisions = _decisions_json(state) if decided != self._decided else "[]"
        return (state.status.value, state.updated_at, len(state.messages), _dumps(state.header()),
                _summary_json(state), new, lines, done, decisions, decided)

    def _commit(self, snap: tuple[Any, ...]) -> None:
        """The save's statements in one pipeline: one round trip to the server. The first
        divides by zero unless this handle's token is still the run's, so a fenced owner's
        transaction aborts before it writes anything. The run's decisions go with it when
        they changed since the last save that committed."""
        status, updated_at, count, header, summary, new, lines, done, decisions, decided = snap
        deadline = time.monotonic() + RECONNECT_S
        try:
            while True:
                try:
                    self._commit_locked(status, updated_at, count, header, summary, new, lines, done,
                                        decisions, again=self._lost)
                    break
                except _Lost as exc:
                    # The database went away. Its transaction either committed or not: the
                    # retry writes what is missing and nothing twice (the turn is not paid again).
                    if time.monotonic() + _RETRY_S > deadline:
                        self._restore(lines, done)
                        self._token = None
                        raise SaveError(f"could not save run {self.run_id}: {exc}; gave up after "
                                        f"{RECONNECT_S:.0f} s. The run is left as it was last saved, "
                                        f"and tether resume {self.run_id} goes on from there") from None
                    time.sleep(_RETRY_S)
                except SaveError:
                    self._restore(lines, done)
                    raise
        finally:
            with self._buffers:
                self._saving -= 1
        self._messages = count
        self._decided = decided

    def _commit_locked(self, status: str, updated_at: float, count: int, header: str, summary: str,
                       new: list[tuple[str, int, str]], lines: list[tuple[int, str]], done: dict[str, str],
                       decisions: str, *, again: bool = False) -> None:
        try:
            with self._conn() as conn:
                conn.execute(self._q(_SAVE_AGAIN if again else _SAVE), {
                    "run": self.run_id, "token": self._token, "status": status, "updated_at": updated_at,
                    "count": count, "header": header, "summary": summary,
                    "idxs": [i for _, i, _ in new], "messages": [m for _, _, m in new],
                    "seqs": [seq for seq, _ in lines], "records": [line for _, line in lines],
                    "keys": list(done), "results": list(done.values()), "decisions": decisions,
                    "channel": self.store.channel, "journal": _notice(self.run_id, JOURNAL),
                    "traced": bool(lines), "trace": _notice(self.run_id, TRACE)})
        except psycopg.errors.DivisionByZero:
            raise SaveError(f"could not save run {self.run_id}: another process has taken it over") from None
        except psycopg.Error as exc:
            raise SaveError(f"could not save run {self.run_id}: {_clean(exc, self.store.url)}") from None

    def _restore(self, lines: list[tuple[int, str]], done: dict[str, str]) -> None:
        with self._buffers:
            self._trace_lines[:0] = lines
            self._done = {**done, **self._done}

    def save(self, state: RunState) -> None:
        """One transaction: the new messages, the header and summary, the ledger results and
        the trace lines since the last save (see the module)."""
        self._commit(self._snapshot(state))

    async def asave(self, state: RunState) -> None:
        snap = self._snapshot(state)
        await asyncio.to_thread(self._commit, snap)

    # ---- the trace and the ledger -------------------------------------------------------
    def trace(self, secrets: tuple[str, ...] = ()) -> PgTrace:
        return PgTrace(self, secrets)

    def _trace_line(self, record_line: str, seq: int) -> None:
        with self._buffers:
            self._trace_lines.append((seq, record_line))
            if self._flusher is None and not self._released:
                self._arm()

    def _arm(self) -> None:
        """Commit the pending lines in :data:`TRACE_FLUSH_S` unless a save takes them first
        (called holding ``_buffers``; the store's timer calls :meth:`_flush` with this mark,
        which a disarm or a later arm makes stale)."""
        mark = self._flusher = object()
        self.store._flushes.later(lambda: self._flush(mark))

    def _flush(self, mark: object) -> None:
        """The trace lines no save took, in a statement of their own (:data:`_FLUSH`), fenced
        by the owner's token like a save, with a ``trace`` notification. Lines are committed in ``seq``
        order: while a save that took earlier lines is still committing them, this waits
        for the next round (a follower reads after the last ``seq`` it saw)."""
        with self._lock:
            with self._buffers:
                if self._flusher is not mark:
                    return  # disarmed, or armed again since
                self._flusher = None
                if self._released or self._token is None or not self._trace_lines:
                    return
                if self._saving:
                    self._arm()
                    return
                lines, self._trace_lines = self._trace_lines, []
            try:
                with self._conn() as conn:
                    conn.execute(self._q(_FLUSH), {
                        "run": self.run_id, "token": self._token, "seqs": [seq for seq, _ in lines],
                        "records": [line for _, line in lines], "channel": self.store.channel,
                        "trace": _notice(self.run_id, TRACE)})
            except psycopg.errors.DivisionByZero:
                self._restore(lines, {})
                log.warning("run %s: trace lines not committed: another process has taken the run over", self.run_id)
            except (SaveError, psycopg.Error) as exc:
                # The next save (or the release) takes them again, or says why it cannot.
                self._restore(lines, {})
                (log.info if isinstance(exc, _Lost) else log.warning)("run %s: trace lines not committed yet: %s", self.run_id,
                            _clean(exc, self.store.url) if isinstance(exc, psycopg.Error) else exc)

    def ledger(self) -> PgLedger:
        if self._ledger is None:
            self._ledger = PgLedger(self)
        return self._ledger

    def control_read(self, seen: int) -> list[ControlRequest]:
        with self._conn() as conn:
            return _control_read(conn, self.store, self.run_id, seen)

    # ---- the owner's record -------------------------------------------------------------
    def heartbeat(self) -> None:
        """Best effort (the lock, not the heartbeat, says whether the owner lives)."""
        if self._owner is None or self._token is None:
            return
        now = time.time()
        try:
            with self._conn() as conn:
                conn.execute(self._q("UPDATE {s}.owners SET heartbeat = %s WHERE run_id = %s AND token = %s"),
                             (now, self.run_id, self._token))
        except (SaveError, psycopg.Error) as exc:
            log.warning("run %s: heartbeat not recorded: %s", self.run_id, exc)
            return
        self._owner["heartbeat"] = now

    def _disarm(self) -> None:
        with self._buffers:
            self._flusher = None

    def release(self) -> None:
        """Commit the trace lines no save took, remove the owner record, then let go of the
        lock (best effort: a holding session that is gone has let go of it already)."""
        self._disarm()
        with self._lock:
            if self._token is not None:
                with self._buffers:
                    lines, self._trace_lines = self._trace_lines, []
                try:
                    with self._conn() as conn, conn.pipeline():  # one round trip
                        with conn.transaction():
                            if lines:
                                with conn.cursor() as c:
                                    c.executemany(self._q("INSERT INTO {s}.trace (run_id, seq, record) "
                                                          "VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"),
                                                  [(self.run_id, seq, line) for seq, line in lines])
                                self.store.notify(conn, self.run_id, TRACE)
                            conn.execute(self._q("DELETE FROM {s}.owners WHERE run_id = %s AND token = %s"),
                                         (self.run_id, self._token))
                            self.store.notify(conn, self.run_id, OWNER)
                except (SaveError, psycopg.Error) as exc:
                    log.warning("run %s: letting go was not clean (%s); the lock is let go of all the same",
                                self.run_id, exc)
            # After the commit: the next owner never finds this one's record.
            self._holds.unlock(self._key, self._generation)
            self._let_go()
            self._token = None
            self._owner = None
            self._generation = None
            self._released = True
        self._disarm()  # armed by a line traced while letting go: nothing is left to flush

    def abandon(self) -> None:
        """Let go of the lock as a killed process would: no release, the record left behind
        (for the crash tests; a killed process's holding session ends with it)."""
        self._disarm()
        with self._lock:
            self._holds.unlock(self._key, self._generation)
            self._let_go()
            self._token = None
            self._owner = None
            self._generation = None
            self._released = True


class PgTrace:
    """The run's trace, as its owner writes it: each event gets the next ``seq`` at once,
    and its line is committed by the next save (or by the release)."""

    def __init__(self, handle: PgHandle, secrets: tuple[str, ...] = ()) -> None:
        self._handle = handle
        self._secrets = tuple(s for s in secrets if s)

    @property
    def last_seq(self) -> int:
        return self._handle._seq

    def write(self, event: Event) -> None:
        handle = self._handle
        handle._seq += 1
        handle._trace_line(stamped_line(event, handle._seq, self._secrets), handle._seq)

    def close(self) -> None:
        """Nothing to do here: the lines left are committed by the handle's release."""


class PgLedger:
    """The run's idempotency ledger in the ``ledger`` table. An intent is committed at once
    (before the side effect); a result waits for the save that records it in the transcript,
    and is committed with it."""

    blocking = True

    def __init__(self, handle: PgHandle) -> None:
        self._handle = handle

    def begin(self, key: str, intent: dict[str, Any]) -> None:
        h = self._handle
        # Fenced like a save: a process that lost the run (its session replaced, another
        # owner in) records no intent, so it never goes on to the side effect.
        with h._conn() as conn:
            written = conn.execute(h._q(
                "INSERT INTO {s}.ledger (run_id, key, status, intent) SELECT %s, %s, 'begun', %s "
                "WHERE EXISTS (SELECT 1 FROM {s}.runs WHERE run_id = %s AND owner_token = %s) "
                "ON CONFLICT (run_id, key) DO UPDATE SET status = 'begun', intent = EXCLUDED.intent, "
                "result = NULL"), (h.run_id, key, _dumps(intent), h.run_id, h._token)).rowcount
        if written != 1:
            raise SaveError(f"run {h.run_id}: another process has taken it over; the write {key} was not begun")
        with h._buffers:
            h._done.pop(key, None)

    def complete(self, key: str, result: str) -> None:
        with self._handle._buffers:
            self._handle._done[key] = result

    def lookup(self, key: str) -> LedgerEntry | None:
        h = self._handle
        with h._conn() as conn:
            row = conn.execute(h._q("SELECT status, intent, result FROM {s}.ledger WHERE run_id = %s AND key = %s"),
                               (h.run_id, key)).fetchone()
        with h._buffers:
            pending = h._done.get(key)
        if pending is not None:
            return LedgerEntry(key, "done", dict((row[1] if row else None) or {}), pending)
        if row is None:
            return None
        status, intent, result = row
        return LedgerEntry(key, status, dict(intent or {}), None if status != "done" else str(result or ""))

    async def abegin(self, key: str, intent: dict[str, Any]) -> None:
        await asyncio.to_thread(self.begin, key, intent)

    async def acomplete(self, key: str, result: str) -> None:
        self.complete(key, result)  # a buffer: no I/O

    async def alookup(self, key: str) -> LedgerEntry | None:
        return await asyncio.to_thread(self.lookup, key)

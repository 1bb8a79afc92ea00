"""A PostgreSQL store's database: its connections, its schema, its channels, and who holds a run.

:class:`Database` is what the store (:class:`tether.store.postgres.store.PgStore`, which is
one), its handles (:mod:`tether.store.postgres.handle`) and its control channel
(:mod:`tether.store.postgres.control`) share: the pool of connections for reads and saves,
the holding session with the runs' locks (:mod:`tether.store.postgres.locks`), the trace
timer (:mod:`tether.store.postgres.flushes`), the tables made on first use, the channels
changes and control requests are notified on, the owner of a run, and a control request
appended. Those below the store take a Database, so none of them imports the store.
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict
from collections.abc import Iterator
from typing import TYPE_CHECKING

import psycopg
from psycopg import sql

from tether.vocab.state import StateError
from tether.store.postgres.connection import (
    POOL_SIZE, SESSION_SETTINGS, Pool, StoreUnavailable, clean, connect, redact,
)
from tether.store.postgres.flushes import Flushes
from tether.store.postgres.locks import HELD, Holds
from tether.store.postgres.rows import check_id, owner_of
from tether.store.postgres.schema import (
    IDENT, KEEPER, LOCK_SEED, NOTIFY, ROLES_SQL, composed, dumps, ensure_schema, notice,
)

if TYPE_CHECKING:
    from tether.store.control import ControlRequest
    from tether.store.owner import Owner


class Database:
    """One PostgreSQL database and schema, as a store's parts use it (see the module)."""

    blocking = True
    workers = True  # tether worker --store URL: DBOS's queue, in the same database
    held = HELD  # the workers' own locks are told alive by it too (tether.workers)
    lock_seed = LOCK_SEED
    roles_sql = ROLES_SQL

    def __init__(self, url: str, *, schema: str = "tether", pool_size: int | None = None) -> None:
        if not IDENT.match(schema):
            raise ValueError(f"invalid schema name {schema!r}")
        self.url = url
        self.schema = schema
        self._pool = Pool(url, POOL_SIZE if pool_size is None else max(1, pool_size))
        self._holds = Holds(url)
        self._flushes = Flushes(self._pool.size)
        self._ready = False
        self._account: str | None = None

    @property
    def where(self) -> str:
        return redact(self.url)

    @property
    def spec(self) -> str:
        return self.url

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

    def read_only(self) -> str | None:
        """The role's name when it may read the runs but not change them (the watcher's),
        else None: asked of the database, which is what decides."""
        with self._conn() as conn:
            user, may = conn.execute(
                "SELECT current_user, has_table_privilege(%s, 'UPDATE') AND has_table_privilege(%s, 'INSERT')",
                (f"{self.schema}.runs", f"{self.schema}.control")).fetchone()
        return None if may else str(user)

    def account(self) -> str:
        """The database role this store connected as: its ``session_user``, which a ``SET
        ROLE`` does not change (asked once: a store keeps its connections' role)."""
        if self._account is None:
            with self._conn() as conn:
                self._account = str(conn.execute("SELECT session_user").fetchone()[0])
        return self._account

    def send(self, channel: str, payload: str) -> None:
        """One notification, on its own (a control request's reply)."""
        with self._conn() as conn:
            conn.execute(NOTIFY, (channel, payload))

    def notify(self, conn: psycopg.Connection, run_id: str, kind: str) -> None:
        """Queue a notification in ``conn``'s transaction: sent at its commit, or never."""
        conn.execute(NOTIFY, (self.channel, notice(run_id, kind)))

    def close(self) -> None:
        """Close the pool, and the holding session (with the locks of any run still held)."""
        self._flushes.close()
        self._pool.close()
        self._holds.close()

    # ---- plumbing ------------------------------------------------------------------------
    def q(self, text: str) -> sql.SQL:
        """``text`` with ``{s}`` as this store's schema (composed once per text: a busy worker
        sends the same few statements thousands of times)."""
        return composed(self.schema, text)

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
                raise StoreUnavailable(f"{redact(self.url)}: {clean(exc, self.url)}") from None

    def connection(self) -> contextlib.AbstractContextManager[psycopg.Connection]:
        """:meth:`_conn`, for another room's rows (:class:`tether.store.protocol.Tables`)."""
        return self._conn()

    def session(self) -> psycopg.Connection:
        """A connection outside the pool, with the session settings (:class:`tether.store.protocol.Tables`)."""
        return connect(self.url, SESSION_SETTINGS)

    def unavailable(self, words: str, exc: BaseException | None = None) -> StoreUnavailable:
        return StoreUnavailable(words if exc is None else f"{words} ({self.words(exc)})")

    def words(self, exc: BaseException) -> str:
        """``exc`` in one line without the password (:class:`tether.store.protocol.Tables`)."""
        return clean(exc, self.url)

    def ensure_schema(self, conn: psycopg.Connection) -> None:
        """Make the tables if they are missing (:func:`tether.store.postgres.schema.ensure_schema`)."""
        ensure_schema(conn, self.schema, where=self.where, url=self.url)
        self._ready = True

    def check(self) -> None:
        """Connect now (the operator's first connection makes the tables): a store that
        cannot be reached is a :class:`StoreUnavailable` here, in words, not later."""
        with self._conn():
            pass

    def owner(self, run_id: str) -> Owner | None:
        with self._conn() as conn:
            row = conn.execute(self.q(
                f"SELECT r.lock_key IN ({HELD}), o.pid, o.host, o.\"user\", o.since, o.heartbeat, o.command, "
                f"o.control, o.run_id IS NOT NULL, {KEEPER} FROM {{s}}.runs r "
                f"LEFT JOIN {{s}}.owners o USING (run_id) WHERE r.run_id = %s"), (check_id(run_id),)).fetchone()
        if row is None:
            return None
        alive, *owner, has_owner, kept = row
        return owner_of(tuple(owner) if has_owner else None, bool(alive), kept)

    def control_append(self, run_id: str, request: ControlRequest) -> None:
        """One transaction: the run row's counter gives the index, and its row lock makes
        requests visible in index order."""
        with self._conn() as conn, conn.transaction():
            row = conn.execute(self.q("UPDATE {s}.runs SET control_count = control_count + 1 WHERE run_id = %s "
                                      "RETURNING control_count"), (check_id(run_id),)).fetchone()
            if row is None:
                raise StateError(f"no run {run_id} in {self.where}")
            conn.execute(self.q("INSERT INTO {s}.control (run_id, idx, request) VALUES (%s, %s, %s)"),
                         (run_id, row[0], dumps(asdict(request))))
            # Told to the owner whose address is on record now, at the commit (tether.store.postgres.control).
            conn.execute(self.q(
                "SELECT pg_notify(%s, json_build_object('run', %s::text, 'id', %s::text, "
                "'to', (SELECT control FROM {s}.owners WHERE run_id = %s))::text)"),
                (self.control_channel, run_id, request.id, run_id))

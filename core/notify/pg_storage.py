"""A PostgreSQL store's notification tables (:mod:`tether.notify.storage` says what they keep):
``notify_key``, ``notify_links``, ``notify_ledger``, ``notify_status`` and ``notify_meta`` in the
store's schema, made when first needed; the lease is a session advisory lock on a connection
of the sender's own, and the ledger is written through that same connection.

:func:`tether.notify.storage.storage_for` imports this module for a PostgreSQL store only:
psycopg comes with the ``[postgres]`` extra, and the base install's console imports the
storage (tests/processes/test_wheel.py).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
import time
import zlib
from typing import Any

import psycopg
from psycopg import sql

from tether.notify.kept import Sent, Spent, whoami
from tether.store.protocol import Store, Tables

_PG_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS {s}.notify_key (id integer PRIMARY KEY CHECK (id = 1), key text NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {s}.notify_links (nonce text PRIMARY KEY, run_id text, call_id text, "
    "used_at double precision NOT NULL, by text)",
    "CREATE TABLE IF NOT EXISTS {s}.notify_ledger (channel text, key text, state text NOT NULL, "
    "at double precision NOT NULL, notice text, PRIMARY KEY (channel, key))",
    "CREATE TABLE IF NOT EXISTS {s}.notify_status (channel text PRIMARY KEY, record json NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {s}.notify_meta (name text PRIMARY KEY, value text NOT NULL)",
)
NOTIFY_TABLES = ("notify_key", "notify_links", "notify_ledger", "notify_status", "notify_meta")
# The sender's lease: the two-key form of the advisory lock (objsubid 2), which runs' one-key
# locks (and their liveness query) never meet.
_LEASE_CLASS = 0x7E7F


class PgStorage:
    """A PostgreSQL store's notification tables (see the module)."""

    def __init__(self, store: Store) -> None:
        tables = store.tables()
        assert tables is not None  # storage_for: a store without a folder has tables
        self.store: Tables = tables
        self._key: bytes | None = None
        self._ready = False

    @contextlib.contextmanager
    def _conn(self) -> Any:
        with self.store.connection() as conn:
            if not self._ready:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LEASE_CLASS,))
                    for statement in _PG_SCHEMA:
                        conn.execute(self.store.q(statement))
                    # The key signs links that decide: no other role reads it, not even the
                    # watcher's, which the store's default privileges let read every new table.
                    others = conn.execute(
                        "SELECT DISTINCT grantee FROM information_schema.role_table_grants WHERE table_schema = %s "
                        "AND table_name = 'notify_key' AND grantee <> current_user", (self.store.schema,)).fetchall()
                    for (grantee,) in others:
                        who = sql.SQL("PUBLIC") if grantee == "PUBLIC" else sql.Identifier(grantee)
                        conn.execute(sql.SQL("REVOKE ALL ON {s}.notify_key FROM {who}").format(
                            s=sql.Identifier(self.store.schema), who=who))
                self._ready = True
            yield conn

    def key(self) -> bytes:
        if self._key is None:
            with self._conn() as conn:
                conn.execute(self.store.q("INSERT INTO {s}.notify_key VALUES (1, %s) ON CONFLICT DO NOTHING"),
                             (secrets.token_hex(32),))
                text = conn.execute(self.store.q("SELECT key FROM {s}.notify_key WHERE id = 1")).fetchone()[0]
            self._key = bytes.fromhex(text)
        return self._key

    def spent(self, nonce: str) -> Spent | None:
        with self._conn() as conn:
            row = conn.execute(self.store.q("SELECT used_at, by FROM {s}.notify_links WHERE nonce = %s"),
                               (nonce,)).fetchone()
        return None if row is None else Spent(float(row[0]), row[1])

    def spend(self, nonce: str, run_id: str, call_id: str, by: str | None) -> Spent | None:
        with self._conn() as conn:
            row = conn.execute(self.store.q(
                "INSERT INTO {s}.notify_links VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1"),
                (nonce, run_id, call_id, time.time(), by)).fetchone()
        return None if row is not None else self.spent(nonce)

    def lease(self) -> PgLease:
        return PgLease(self)

    def status_put(self, channel: str, record: dict[str, Any] | None) -> None:
        with self._conn() as conn:
            if record is None:
                conn.execute(self.store.q("DELETE FROM {s}.notify_status WHERE channel = %s"), (channel,))
            else:
                conn.execute(self.store.q("INSERT INTO {s}.notify_status VALUES (%s, %s) ON CONFLICT (channel) "
                                          "DO UPDATE SET record = EXCLUDED.record"), (channel, json.dumps(record)))

    def status_all(self) -> list[dict[str, Any]]:
        with self.store.connection() as conn:  # no tables made by asking: a watcher's role may not make them
            if conn.execute("SELECT to_regclass(%s)", (f"{self.store.schema}.notify_status",)).fetchone()[0] is None:
                return []
            rows = conn.execute(self.store.q("SELECT record::text FROM {s}.notify_status ORDER BY channel")).fetchall()
        return [json.loads(row[0]) for row in rows]

    def meta_get(self, name: str) -> str | None:
        with self._conn() as conn:
            row = conn.execute(self.store.q("SELECT value FROM {s}.notify_meta WHERE name = %s"), (name,)).fetchone()
        return None if row is None else str(row[0])

    def meta_put(self, name: str, value: str) -> None:
        with self._conn() as conn:
            conn.execute(self.store.q("INSERT INTO {s}.notify_meta VALUES (%s, %s) ON CONFLICT (name) "
                                      "DO UPDATE SET value = EXCLUDED.value"), (name, value))


class PgLease:
    """A session advisory lock on a connection of the sender's own; the ledger goes through
    that connection, so a lost session can neither hold the lease nor write (see the module)."""

    def __init__(self, storage: PgStorage) -> None:
        self.storage = storage
        self.store = storage.store
        self._conn: Any = None
        self._lock = threading.Lock()

    def _key(self) -> tuple[int, int]:
        crc = zlib.crc32(self.store.schema.encode())
        return _LEASE_CLASS, crc - (1 << 32) if crc >= 1 << 31 else crc

    def take(self) -> bool:
        with self._lock:
            if self._conn is not None:
                return True
            with self.storage._conn():
                pass  # the tables, made on the store's own connection
            conn = self.store.session()
            got = conn.execute("SELECT pg_try_advisory_lock(%s, %s)", self._key()).fetchone()[0]
            if not got:
                conn.close()
                return False
            conn.execute(self.store.q("INSERT INTO {s}.notify_meta VALUES ('holder', %s) ON CONFLICT (name) "
                                      "DO UPDATE SET value = EXCLUDED.value"), (whoami(),))
            self._conn = conn
            return True

    def holder(self) -> str | None:
        return self.storage.meta_get("holder")

    def _held(self) -> Any:
        if self._conn is None or self._conn.closed or self._conn.broken:
            raise self.store.unavailable(f"{self.store.where}: the sender's lease was lost with its connection")
        return self._conn

    def ledger_get(self, channel: str, key: str) -> Sent | None:
        with self._lock:
            row = self._run("SELECT state FROM {s}.notify_ledger WHERE channel = %s AND key = %s", (channel, key))
        return None if row is None else str(row[0])

    def ledger_put(self, channel: str, key: str, state: Sent, notice: str | None = None) -> None:
        with self._lock:
            self._run("INSERT INTO {s}.notify_ledger VALUES (%s, %s, %s, %s, %s) ON CONFLICT (channel, key) "
                      "DO UPDATE SET state = EXCLUDED.state, at = EXCLUDED.at, "
                      "notice = coalesce(EXCLUDED.notice, {s}.notify_ledger.notice)",
                      (channel, key, state, time.time(), notice))

    def ledger_unsent(self) -> list[tuple[str, str]]:
        with self._lock:
            conn = self._held()
            rows = conn.execute(self.store.q("SELECT channel, notice FROM {s}.notify_ledger WHERE state = 'sending' "
                                             "AND notice IS NOT NULL ORDER BY at")).fetchall()
        return [(str(c), str(n)) for c, n in rows]

    def _run(self, text: str, params: tuple[Any, ...]) -> Any:
        conn = self._held()
        try:
            cursor = conn.execute(self.store.q(text), params)
            return cursor.fetchone() if cursor.description else None
        except psycopg.OperationalError as exc:
            with contextlib.suppress(Exception):
                conn.close()
            self._conn = None
            raise self.store.unavailable(f"{self.store.where}: the sender's lease was lost", exc) from None

    def release(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()  # the session ends, and its lock with it

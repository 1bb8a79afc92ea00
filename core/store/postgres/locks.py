"""Who owns a run of the PostgreSQL store: session advisory locks, on one session per store.

**Ownership is a session advisory lock**, ``pg_try_advisory_lock(lock_key)``, taken on the
store's holding session (:class:`Holds`), which holds the locks of every run the store owns.
The server drops them when that session ends however it ends (a killed process closes its
socket at once; a vanished host after the TCP keepalives this session sets, about 25 s), so
a dead worker's runs are orphaned at once. Liveness is read from ``pg_locks`` (:data:`HELD`),
which anyone may read (the read-only watcher too), without touching the lock. Session locks
need a session: connect directly, or through a pooler in session mode (docs/scale-out.md
says why transaction pooling cannot hold them).
"""

from __future__ import annotations

from typing import Any

import psycopg

from tether.store.postgres.connection import SESSION_SETTINGS, Db, stale

# The advisory locks held in this database, as the bigint keys they were taken with.
HELD = ("SELECT (l.classid::bigint << 32) | l.objid::bigint FROM pg_locks l "
         "WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted "
         "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())")


class Holds:
    """A store's holding session: the advisory lock of every run the store owns, taken and let
    go of on this one connection, and those runs by id. A session's advisory locks are
    re-entrant, so a second open of a run this store holds is refused here, as another
    process's would be by the lock. ``generation`` counts the sessions: a handle whose lock
    was taken in an earlier one has lost it (the server ended that session) and takes it
    again, fenced by its token (:meth:`tether.store.postgres.handle.PgHandle._reattach`)."""

    def __init__(self, url: str) -> None:
        self._db = Db(url, session=SESSION_SETTINGS)
        self.lock = self._db.lock
        self.generation = 0
        self.held: dict[str, Any] = {}  # run id -> its handle (tether.store.postgres.handle.PgHandle)

    def session(self) -> tuple[psycopg.Connection, int]:
        """The session and its generation (called holding :attr:`lock`): a new one when the
        server ended the last (every lock of the old one is gone with it)."""
        conn = self._db.held
        if conn is not None and stale(conn):
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

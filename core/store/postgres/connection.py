"""Connections to PostgreSQL: how a store gets one, keeps a few, and words what fails.

A store holds at most :data:`POOL_SIZE` connections for its reads and saves
(``TETHER_PG_POOL``, :class:`Pool`), made by the caller that needs one, and one more, its
*holding session* (:mod:`tether.store.postgres.locks`), once it owns a run; a watcher or a
control channel LISTENs on a connection of its own (:func:`listen`). Passwords never
reach an error message: every error names the URL without its password (:func:`redact`,
:func:`clean`), as a :class:`StoreUnavailable`, a StateError the CLI prints in one line.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

from tether.store.protocol import StoreUnavailable

CONNECT_TIMEOUT_S = 10


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
# The owner's session: keepalives so that a vanished host's lock is dropped within ~25 s.
SESSION_SETTINGS = {"tcp_keepalives_idle": "10", "tcp_keepalives_interval": "5", "tcp_keepalives_count": "3"}


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



class Db:
    """One connection, opened on first use, one thread at a time; errors in words."""

    def __init__(self, url: str, *, session: dict[str, str] | None = None) -> None:
        self.url = url
        self._session = session or {}
        self._conn: psycopg.Connection | None = None
        self.lock = threading.RLock()

    def connect(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed:
            self._conn = connect(self.url, self._session)
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


def stale(conn: psycopg.Connection) -> bool:
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


def connect(url: str, session: dict[str, str]) -> psycopg.Connection:
    options = " ".join(f"-c {k}={v}" for k, v in session.items())
    try:
        kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S,
                                  "application_name": "tether"}
        if options:
            kwargs["options"] = options
        return psycopg.connect(url, **kwargs)
    except Exception as exc:  # psycopg may quote the connection string: say it again without the password
        raise StoreUnavailable(f"cannot connect to {redact(url)}: {clean(exc, url)}") from None


def clean(exc: BaseException, url: str) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__  # one line: libpq adds hints on lines of their own
    secret = _password(url)
    if secret:
        text = text.replace(secret, "***")
    return text.replace(url, redact(url))


class Pool:
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
                return connect(self.url, {})
            if not stale(conn):
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


async def listen(url: str, *channels: str, name: str = "tether watch") -> psycopg.AsyncConnection[Any]:
    """An autocommit connection that LISTENs on ``channels``; errors in words, without the password."""
    conn: psycopg.AsyncConnection[Any] | None = None
    try:
        conn = await psycopg.AsyncConnection.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S,
                                                     application_name=name)
        for channel in channels:
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
        return conn
    except BaseException as exc:
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()
        if isinstance(exc, psycopg.Error | OSError):
            raise StoreUnavailable(f"cannot listen on {redact(url)}: {clean(exc, url)}") from None
        raise

"""What notifications keep on the store: the links' key, the spent links, the sender's
lease, its ledger, its status lines and its cursor.

Kept on the store (not in one process) because every process of the store must agree:
a link issued by ``tether serve`` is checked by another ``tether serve``; a link spent in
one is spent in all; one sender at a time holds the lease; a notification recorded as sent
by one sender is not sent again by its successor; any console shows the sender's failures.

* **File store** (``<runs_dir>``, names starting with a dot so the watcher and the listing
  skip them): ``.notify.key`` (the HMAC key, 32 random bytes as hex, created once by a
  hard link that fails if another process made it first), ``.notify.sqlite`` (spent links,
  ledger, status, cursor: SQLite's own locking makes "spend once" atomic across processes)
  and ``.notify.lock`` (the lease: an ``flock`` held for the sender's life, dropped by the
  kernel however the process ends).
* **PostgreSQL**: the tables ``notify_key``, ``notify_links``, ``notify_ledger``,
  ``notify_status`` and ``notify_meta`` in the store's schema, made when first needed; the
  lease is a session advisory lock on a connection of the sender's own, and the ledger is
  written through that same connection, so a sender whose session was lost (and with it
  the lock) cannot record anything: its successor's word stands (:mod:`tether.notify.pg_storage`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import sqlite3
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Protocol

from tether.notify.kept import Sent, Spent, whoami
from tether.store.protocol import Store
from tether.store.private import PRIVATE_FILE, private_dirs, private_file

KEY_FILE = ".notify.key"
DB_FILE = ".notify.sqlite"
LOCK_FILE = ".notify.lock"

class Lease(Protocol):
    """One sender's hold on a store; the ledger is read and written through it."""

    def take(self) -> bool:
        """Take the lease if it is free (never waits); True when this process holds it."""

    def holder(self) -> str | None:
        """Who holds it, as far as the store says (``pid 123 on host``), for the waiting words."""

    def ledger_get(self, channel: str, key: str) -> Sent | None: ...

    def ledger_put(self, channel: str, key: str, state: Sent, notice: str | None = None) -> None:
        """Record ``state``; ``notice`` (its JSON) is kept with the intent, so a sender that
        ends between the intent and the send leaves its successor what to send."""

    def ledger_unsent(self) -> list[tuple[str, str]]:
        """(channel, notice JSON) of every intent recorded and not yet sent or given up."""

    def release(self) -> None: ...


class Storage(Protocol):
    def key(self) -> bytes: ...

    def spent(self, nonce: str) -> Spent | None: ...

    def spend(self, nonce: str, run_id: str, call_id: str, by: str | None) -> Spent | None:
        """Mark the link used, atomically: None when this call spent it, else who did first."""

    def lease(self) -> Lease: ...

    def status_put(self, channel: str, record: dict[str, Any] | None) -> None: ...

    def status_all(self) -> list[dict[str, Any]]: ...

    def meta_get(self, name: str) -> str | None: ...

    def meta_put(self, name: str, value: str) -> None: ...


_STORAGES: weakref.WeakKeyDictionary[Any, Storage] = weakref.WeakKeyDictionary()
_MADE = threading.Lock()


def storage_for(store: Store) -> Storage:
    """The notifications' storage of ``store`` (one per store object, so the key is read once)."""
    with _MADE:
        found = _STORAGES.get(store)
        if found is None:
            root = store.side_dir()
            if root is not None:
                found = FileStorage(root)
            else:
                if store.tables() is None:
                    raise TypeError(f"notifications cannot use {store.where}: it has neither a folder nor tables")
                # lazy: psycopg comes with the [postgres] extra only, and the base install's console imports this module (test_wheel)
                from tether.notify.pg_storage import PgStorage

                found = PgStorage(store)
            _STORAGES[store] = found
        return found


# ---- the file store ------------------------------------------------------------------------

_SQLITE_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS links (nonce TEXT PRIMARY KEY, run_id TEXT, call_id TEXT, used_at REAL, by TEXT)",
    "CREATE TABLE IF NOT EXISTS ledger (channel TEXT, key TEXT, state TEXT, at REAL, notice TEXT, "
    "PRIMARY KEY (channel, key))",
    "CREATE TABLE IF NOT EXISTS status (channel TEXT PRIMARY KEY, record TEXT)",
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)",
)


class FileStorage:
    """A runs dir's notification files (see the module)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._key: bytes | None = None
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def key(self) -> bytes:
        if self._key is None:
            self._key = _file_key(self.root)
        return self._key

    @contextlib.contextmanager
    def _conn(self) -> Any:
        with self._lock:
            if self._db is None:
                private_dirs(self.root)
                path = self.root / DB_FILE
                private_file(path)
                db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
                for statement in _SQLITE_SCHEMA:
                    db.execute(statement)
                self._db = db
            yield self._db

    def spent(self, nonce: str) -> Spent | None:
        with self._conn() as db:
            row = db.execute("SELECT used_at, by FROM links WHERE nonce = ?", (nonce,)).fetchone()
        return None if row is None else Spent(float(row[0]), row[1])

    def spend(self, nonce: str, run_id: str, call_id: str, by: str | None) -> Spent | None:
        with self._conn() as db:
            done = db.execute("INSERT OR IGNORE INTO links VALUES (?, ?, ?, ?, ?)",
                              (nonce, run_id, call_id, time.time(), by)).rowcount
        return None if done == 1 else self.spent(nonce)

    def lease(self) -> FileLease:
        return FileLease(self)

    def status_put(self, channel: str, record: dict[str, Any] | None) -> None:
        with self._conn() as db:
            if record is None:
                db.execute("DELETE FROM status WHERE channel = ?", (channel,))
            else:
                db.execute("INSERT OR REPLACE INTO status VALUES (?, ?)", (channel, json.dumps(record)))

    def status_all(self) -> list[dict[str, Any]]:
        if not (self.root / DB_FILE).exists():
            return []  # no sender ever ran here: nothing to say, and nothing created by asking
        with self._conn() as db:
            rows = db.execute("SELECT record FROM status ORDER BY channel").fetchall()
        return [json.loads(row[0]) for row in rows]

    def meta_get(self, name: str) -> str | None:
        with self._conn() as db:
            row = db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return None if row is None else str(row[0])

    def meta_put(self, name: str, value: str) -> None:
        with self._conn() as db:
            db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (name, value))

    def ledger_get(self, channel: str, key: str) -> Sent | None:
        with self._conn() as db:
            row = db.execute("SELECT state FROM ledger WHERE channel = ? AND key = ?", (channel, key)).fetchone()
        return None if row is None else str(row[0])

    def ledger_put(self, channel: str, key: str, state: Sent, notice: str | None = None) -> None:
        with self._conn() as db:
            db.execute("INSERT INTO ledger VALUES (?, ?, ?, ?, ?) ON CONFLICT (channel, key) DO UPDATE SET "
                       "state = excluded.state, at = excluded.at, notice = coalesce(excluded.notice, notice)",
                       (channel, key, state, time.time(), notice))

    def ledger_unsent(self) -> list[tuple[str, str]]:
        with self._conn() as db:
            rows = db.execute("SELECT channel, notice FROM ledger WHERE state = 'sending' AND notice IS NOT NULL "
                              "ORDER BY at").fetchall()
        return [(str(c), str(n)) for c, n in rows]


def _file_key(root: Path) -> bytes:
    """The store's link key: read, or made once. A new key is written whole to a file of
    this process's, then hard-linked to its name, which fails if another process linked
    one first: every process ends up with the same key."""
    path = root / KEY_FILE
    for _ in range(3):
        try:
            text = path.read_text().strip()
        except FileNotFoundError:
            private_dirs(root)
            tmp = root / f".notify.key.{os.getpid()}.{secrets.token_hex(4)}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_FILE)
            try:
                os.write(fd, (secrets.token_hex(32) + "\n").encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            with contextlib.suppress(FileExistsError):
                os.link(tmp, path)
            os.unlink(tmp)
            continue
        try:
            key = bytes.fromhex(text)
        except ValueError:
            key = b""
        if len(key) < 16:
            raise ValueError(f"{path} does not hold a link key; move it away and a new one is made "
                             "(links already sent stop working)")
        return key
    raise OSError(f"{path} could not be made")


class FileLease:
    """``.notify.lock`` held with ``flock`` for the sender's life (see the module)."""

    def __init__(self, storage: FileStorage) -> None:
        self.storage = storage
        self._fd: int | None = None

    def take(self) -> bool:
        if self._fd is not None:
            return True
        private_dirs(self.storage.root)
        fd = os.open(self.storage.root / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.pwrite(fd, (whoami() + "\n").encode(), 0)
        self._fd = fd
        return True

    def holder(self) -> str | None:
        try:
            return (self.storage.root / LOCK_FILE).read_text().strip() or None
        except OSError:
            return None

    def ledger_get(self, channel: str, key: str) -> Sent | None:
        return self.storage.ledger_get(channel, key)

    def ledger_put(self, channel: str, key: str, state: Sent, notice: str | None = None) -> None:
        self.storage.ledger_put(channel, key, state, notice)

    def ledger_unsent(self) -> list[tuple[str, str]]:
        return self.storage.ledger_unsent()

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # drops the lock

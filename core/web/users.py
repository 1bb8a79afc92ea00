"""The operators who may log in to ``tether serve``, kept on the store they operate.

A user is a name, an argon2id hash of their password (never the password) and a role:
``operator`` (may decide and stop) or ``watcher`` (``--read-only``: sees, cannot change
anything). They live where the runs live, so every ``tether serve`` of a store knows the
same people:

* the file store: ``<runs_dir>/users.json``, replaced atomically under a lock (as the
  store's ``rules.json``), mode 0600;
* PostgreSQL: the table ``web_users`` in the store's schema, made on first use by the
  operator's role (the watcher's role reads it, by the schema's default privileges).

Why argon2id (``argon2-cffi``): a memory-hard hash, the OWASP first choice for passwords,
with its parameters and salt inside the hash string, so raising them later re-hashes at
the next login (:meth:`PasswordHasher.check_needs_rehash`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

from tether.store.protocol import Store, Tables
from tether.vocab.state import StateError
from tether.store.private import PRIVATE_FILE, private_dirs, write_private

USERS_FILE = "users.json"
USERS_LOCK = ".users.lock"
MIN_PASSWORD = 10
"""The shortest password taken: long passphrases are easy to type on a phone, short ones
are guessed (the login throttle slows guessing, it does not make it impossible)."""
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
_HASHER = PasswordHasher()  # argon2id, the library's defaults (RFC 9106's second choice, 64 MiB)
# A hash of nothing anybody typed: a login by an unknown name is checked against it, so it
# takes as long as a wrong password and does not tell which names exist.
_DECOY = _HASHER.hash("not a password of anyone: the decoy for unknown names")
T = TypeVar("T")
Role = Literal["operator", "watcher"]


class UserError(ValueError):
    """A user that cannot be added or removed, in words (the CLI prints them)."""


@dataclass(frozen=True, slots=True)
class User:
    """``stamp``: a digest of the user's password hash and role, which a session is opened
    with and checked against (:mod:`tether.web.sessions`). ``--add-user`` hashes with a new
    salt each time and ``--remove-user`` leaves no row, so a new password (or the same one
    set again), a new role or a removal each changes it, whoever made the change: this
    server or another process. Derived, not stored: an old ``users.json`` or ``web_users``
    table has it already, and no hash is kept beside the sessions."""

    name: str
    role: Role
    created_at: float
    stamp: str

    @property
    def may_change(self) -> bool:
        return self.role == "operator"


def check_name(name: str) -> str:
    if not _NAME.match(name or ""):
        raise UserError(f"{name!r} is not a user name: use letters, digits and . _ @ - (at most 64, starting with "
                        "a letter or digit)")
    return name


def check_password(name: str, password: str) -> None:
    """Refuse, in words, a password too weak to stand behind a login on the internet."""
    if not password or not password.strip():
        raise UserError("the password is empty; nothing was changed")
    if len(password) < MIN_PASSWORD:
        raise UserError(f"the password is {len(password)} characters; use at least {MIN_PASSWORD} (a passphrase of "
                        "a few words is easy to type on a phone); nothing was changed")
    if len(set(password)) < 4:
        raise UserError("the password repeats too few characters to be guessed slowly; nothing was changed")
    if name.lower() in password.lower():
        raise UserError("the password contains the user's name; nothing was changed")
    if password.lower() in ("password123", "1234567890", "qwertyuiop", "0123456789", "letmein123"):
        raise UserError("that password is on every list of guesses; nothing was changed")


def hash_password(password: str) -> str:
    return _HASHER.hash(password)


def password_matches(stored: str | None, password: str) -> bool:
    """Whether ``password`` is the one hashed in ``stored`` (None: an unknown name, checked
    against a decoy all the same, so that both take the same time)."""
    try:
        return _HASHER.verify(stored or _DECOY, password) and stored is not None
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


class UserBook:
    """The users of one store (see the module). Blocking calls: the server makes them in a
    worker thread."""

    def __init__(self, store: Store) -> None:
        self.store = store
        root = store.side_dir()
        self._file = _UsersFile(root) if root is not None else None
        self._db = store.tables()
        self._table_ready = False

    # ---- reading ----------------------------------------------------------------------
    def users(self) -> list[User]:
        return [_user(name, row) for name, row in sorted(self._rows().items())]

    def get(self, name: str) -> User | None:
        row = self._rows().get(name)
        return _user(name, row) if row is not None else None

    def stamps(self) -> dict[str, str]:
        """Each user's :attr:`User.stamp`, in one read (what the server's sessions are held against)."""
        return {name: _user(name, row).stamp for name, row in self._rows().items()}

    def check(self, name: str, password: str) -> User | None:
        """The user whose name and password these are, else None (same time either way)."""
        row = self._rows().get(name)
        if not password_matches(row["hash"] if row else None, password) or row is None:
            return None
        return _user(name, row)

    # ---- changing ---------------------------------------------------------------------
    def add(self, name: str, password: str, *, role: Role = "operator") -> User:
        """Add ``name``, or set a new password and role for them (what an operator expects of
        ``--add-user`` run again); refused in words before anything is written."""
        check_name(name)
        check_password(name, password)
        row = {"hash": hash_password(password), "role": role, "created_at": time.time()}
        if self._file is not None:
            def put(data: dict[str, Any]) -> None:
                data["users"][name] = row

            self._file.change(put)
        else:
            with self._pg() as conn:
                conn.execute(self._tables().q(
                    "INSERT INTO {s}.web_users (name, hash, role, created_at) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT (name) DO UPDATE SET hash = EXCLUDED.hash, role = EXCLUDED.role"),
                    (name, row["hash"], role, row["created_at"]))
        return _user(name, row)

    def remove(self, name: str) -> None:
        if self._file is not None:
            def drop(data: dict[str, Any]) -> None:
                if data["users"].pop(name, None) is None:
                    raise UserError(f"no user {name!r} on this store (tether serve --users lists them)")

            self._file.change(drop)
            return
        with self._pg() as conn:
            gone = conn.execute(self._tables().q("DELETE FROM {s}.web_users WHERE name = %s RETURNING name"),
                                (name,)).fetchone()
        if gone is None:
            raise UserError(f"no user {name!r} on this store (tether serve --users lists them)")

    # ---- where they are ---------------------------------------------------------------
    def _rows(self) -> dict[str, dict[str, Any]]:
        if self._file is not None:
            return self._file.load()["users"]
        with self._pg() as conn:
            rows = conn.execute(self._tables().q("SELECT name, hash, role, created_at FROM {s}.web_users")).fetchall()
        return {name: {"hash": h, "role": role, "created_at": created} for name, h, role, created in rows}

    def _tables(self) -> Tables:
        if self._db is None:  # a store has a folder or tables: never neither
            raise UserError(f"{self.store.where} keeps no users")
        return self._db

    @contextlib.contextmanager
    def _pg(self) -> Iterator[Any]:
        with self._tables().connection() as conn:
            if not self._table_ready:
                _ensure_table(self._tables(), conn)
                self._table_ready = True
            yield conn


def _ensure_table(store: Tables, conn: Any) -> None:
    """``web_users``, made if it is missing; a role that may not make it (the watcher's)
    reads it once the operator's role has (or finds no users, and says so at login)."""
    # lazy: psycopg comes with the [postgres] extra only, and a file store's users need none (test_wheel)
    import psycopg

    if conn.execute("SELECT to_regclass(%s)", (f"{store.schema}.web_users",)).fetchone()[0] is not None:
        return
    try:
        with conn.transaction():
            conn.execute(store.q("CREATE TABLE IF NOT EXISTS {s}.web_users (name text PRIMARY KEY, hash text NOT NULL, "
                                 "role text NOT NULL, created_at double precision NOT NULL)"))
    except psycopg.errors.InsufficientPrivilege:
        raise UserError(f"{store.where} has no users yet and this role may not add them: run tether serve "
                        "--add-user NAME with the operator's role first") from None


def _user(name: str, row: dict[str, Any]) -> User:
    role: Role = "watcher" if row.get("role") == "watcher" else "operator"
    stamp = hashlib.sha256(f"{role}\n{row.get('hash')}".encode()).hexdigest()[:32]
    return User(name, role, float(row.get("created_at") or 0.0), stamp)


class _UsersFile:
    """``<runs_dir>/users.json``: ``{"users": {NAME: {"hash", "role", "created_at"}}}``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / USERS_FILE

    def load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {"users": {}}
        except (OSError, ValueError) as exc:
            raise StateError(f"the store's users in {self.path} cannot be read ({exc}); fix the file or move it "
                             "away") from None
        if not isinstance(data, dict) or not isinstance(data.get("users"), dict):
            raise StateError(f"{self.path} is not a users file; fix it or move it away")
        return data

    def change(self, edit: Callable[[dict[str, Any]], T]) -> T:
        """``edit(data)`` under the lock, then the file replaced whole (synced first: a crash
        leaves the old users or the new ones, never half)."""

        private_dirs(self.root)
        lock = os.open(self.root / USERS_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            data = self.load()
            result = edit(data)
            tmp = self.root / f".{USERS_FILE}.{os.getpid()}.tmp"
            write_private(tmp, (json.dumps(data, indent=1) + "\n").encode(), sync=True)
            os.replace(tmp, self.path)
            return result
        finally:
            os.close(lock)
